package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
)

// readCommitted reads every partition of topic from the start with read_committed until want
// records arrived (then a short quiet period) or 20 s passed, and returns the values in
// partition-then-offset order.
func readCommitted(t *testing.T, addr, topic string, want int) map[int32][]string {
	t.Helper()
	return readCommittedFrom(t, []string{addr}, topic, want)
}

func readCommittedFrom(t *testing.T, seeds []string, topic string, want int) map[int32][]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[int32][]string{}
	n := 0
	deadline := time.Now().Add(20 * time.Second)
	var quiet time.Time
	for time.Now().Before(deadline) {
		if n >= want {
			if quiet.IsZero() {
				quiet = time.Now().Add(700 * time.Millisecond)
			}
			if time.Now().After(quiet) {
				break
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	return got
}

// TestTxnFranzCommitAbort: a franz-go transactional producer commits, aborts and commits; a
// read_committed consumer sees exactly the committed records, in order; DescribeTransactions
// and ListTransactions show the id.
func TestTxnFranzCommitAbort(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "txn-franz"
	createTopic(t, b.Addr(), topic, 1, nil)
	p := newKgo(t, b.Addr(), kgo.TransactionalID("franz-tx"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(commit bool, values ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := p.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end (commit %v): %v", commit, err)
		}
	}
	run(true, "c1", "c2")
	run(false, "a1", "a2", "a3")
	run(true, "c3")
	got := readCommitted(t, b.Addr(), topic, 3)
	if want := []string{"c1", "c2", "c3"}; !slices.Equal(got[0], want) {
		t.Fatalf("read_committed %q, want %q", got[0], want)
	}

	adm := kadm.NewClient(newKgo(t, b.Addr()))
	ds, err := adm.DescribeTransactions(ctx, "franz-tx")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ds["franz-tx"]
	if !ok || d.Err != nil || d.ProducerID < 0 || (d.State != "CompleteCommit" && d.State != "PrepareCommit") {
		t.Fatalf("DescribeTransactions: %+v", ds)
	}
	ls, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ls["franz-tx"]; !ok {
		t.Fatalf("ListTransactions: %+v", ls)
	}
	// A second producer with the same id fences the first.
	p2 := newKgo(t, b.Addr(), kgo.TransactionalID("franz-tx"), kgo.DefaultProduceTopic(topic))
	if err := p2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p2.ProduceSync(ctx, kgo.StringRecord("z1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p2.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err == nil {
		if err := p.ProduceSync(ctx, kgo.StringRecord("zombie")).FirstErr(); err == nil {
			if err := p.EndTransaction(ctx, kgo.TryCommit); err == nil {
				t.Fatal("a fenced producer committed")
			}
		}
	}
	got = readCommitted(t, b.Addr(), topic, 4)
	if want := []string{"c1", "c2", "c3", "z1"}; !slices.Equal(got[0], want) {
		t.Fatalf("after fencing: read_committed %q, want %q", got[0], want)
	}
}

// TestTxnGroupTransactSession: consume-transform-produce with franz-go's GroupTransactSession:
// every input record appears once in the output (read_committed), and the group's committed
// offsets, written in the transactions, cover the input.
func TestTxnGroupTransactSession(t *testing.T) {
	b := startBroker(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	createTopic(t, b.Addr(), "txn-etl-in", 2, nil)
	createTopic(t, b.Addr(), "txn-etl-out", 2, nil)
	transactSession(t, []string{b.Addr()}, "txn-etl-in", "txn-etl-out", "txn-etl", 300)
}

// transactSession copies n records written to in into out exactly once through a
// GroupTransactSession of group, and checks the output (read_committed) and the group's offsets.
func transactSession(t *testing.T, seeds []string, in, out, group string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	src, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(in))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i := 0; i < n; i++ {
		src.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.TransactionalID(group+"-tx"), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(out), kgo.TransactionTimeout(30*time.Second), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	done, txns := 0, 0
	for rounds := 0; done < n && rounds < 2000 && ctx.Err() == nil; rounds++ {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollRecords(pctx, 40) // at most 40 records a transaction: many transactions, one epoch
		pcancel()
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: []byte("out-" + string(r.Value))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("End: %v", err)
		}
		if committed {
			done += fs.NumRecords()
			txns++
		}
	}
	if done < n || txns < 2 {
		t.Fatalf("transformed %d of %d records in %d transactions", done, n, txns)
	}
	t.Logf("%d records in %d transactions", done, txns)
	got := readCommittedFrom(t, seeds, out, n)
	seen := map[string]int{}
	total := 0
	for _, vs := range got {
		for _, v := range vs {
			seen[v]++
			total++
		}
	}
	if total != n || len(seen) != n {
		t.Fatalf("output has %d records, %d distinct, want %d once each", total, len(seen), n)
	}
	for i := 0; i < n; i++ {
		if seen["out-"+strconv.Itoa(i)] != 1 {
			t.Fatalf("output record out-%d seen %d times", i, seen["out-"+strconv.Itoa(i)])
		}
	}
	acl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer acl.Close()
	offs, err := kadm.NewClient(acl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != int64(n) {
		t.Fatalf("group offsets sum to %d, want %d: %+v", sum, n, offs)
	}
}

// TestTxnSaramaCommitAbort: sarama's transactional producer commits and aborts; read_committed
// sees the committed records only, in order.
func TestTxnSaramaCommitAbort(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "txn-sarama"
	createTopic(t, b.Addr(), topic, 1, nil)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = "sarama-tx"
	cfg.Producer.Retry.Max = 5
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	run := func(commit bool, values ...string) {
		t.Helper()
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatalf("send %s: %v", v, err)
			}
		}
		var err error
		if commit {
			err = p.CommitTxn()
		} else {
			err = p.AbortTxn()
		}
		if err != nil {
			t.Fatal(fmt.Errorf("end (commit %v): %w", commit, err))
		}
	}
	run(true, "s1", "s2")
	run(false, "x1")
	run(true, "s3")
	got := readCommitted(t, b.Addr(), topic, 3)
	if want := []string{"s1", "s2", "s3"}; !slices.Equal(got[0], want) {
		t.Fatalf("read_committed %q, want %q", got[0], want)
	}
}

// TestClusterTxn: transactions on 3 brokers: __transaction_state with replication factor 3,
// markers written to partition leaders on other brokers (WriteTxnMarkers over the inter-broker
// listener), commit and abort seen by read_committed, and a GroupTransactSession copy.
func TestClusterTxn(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	c := startCluster(t, 3, nil)
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, topic := range []string{"ctxn", "ctxn-in", "ctxn-out"} {
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	p := c.client(kgo.TransactionalID("cluster-tx"), kgo.DefaultProduceTopic("ctxn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	run := func(commit bool, tag string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for part := int32(0); part < 3; part++ {
			if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte(tag + strconv.Itoa(int(part)))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end: %v", err)
		}
	}
	run(true, "c")
	run(false, "a")
	run(true, "d")
	got := readCommittedFrom(t, c.addrs(), "ctxn", 6)
	for part := int32(0); part < 3; part++ {
		want := []string{"c" + strconv.Itoa(int(part)), "d" + strconv.Itoa(int(part))}
		if !slices.Equal(got[part], want) {
			t.Fatalf("partition %d read_committed %q, want %q", part, got[part], want)
		}
	}
	ts, err := adm.ListTopics(ctx, txnStateTopic)
	if err != nil {
		t.Fatal(err)
	}
	if d := ts[txnStateTopic]; len(d.Partitions) != 50 || len(d.Partitions[0].Replicas) != 3 {
		t.Fatalf("%s: %d partitions, %v", txnStateTopic, len(d.Partitions), d.Partitions[0])
	}
	transactSession(t, c.addrs(), "ctxn-in", "ctxn-out", "ctxn-group", 300)
}

// TestTxnJavaMessageCopier: Kafka's own TransactionalMessageCopier (the Java client 4.x,
// consume-transform-produce with sendOffsetsToTransaction and group metadata, random aborts)
// copies a partition exactly once; then TransactionsCommand (kafka-transactions.sh) lists and
// describes its transactional id. Kafka jars: WEIR_KAFKA_LIBS=<folder of jars>.
func TestTxnJavaMessageCopier(t *testing.T) {
	libs := os.Getenv("WEIR_KAFKA_LIBS")
	if libs == "" {
		t.Skip("WEIR_KAFKA_LIBS not set: the Java client is not available")
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("no java")
	}
	b := startBroker(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	addr := b.Addr()
	const in, out, n = "java-copy-in", "java-copy-out", 1000
	createTopic(t, addr, in, 1, nil)
	createTopic(t, addr, out, 1, nil)
	var recs []testRecord
	for i := range n {
		recs = append(recs, testRecord{Value: []byte(strconv.Itoa(i))})
	}
	produceTestRecords(t, addr, in, recs)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-cp", libs+"/*", "org.apache.kafka.tools.TransactionalMessageCopier",
		"--broker-list", addr, "--input-topic", in, "--input-partition", "0", "--output-topic", out,
		"--consumer-group", "java-copier", "--transactional-id", "java-copier-tx", "--max-messages", strconv.Itoa(n),
		"--transaction-size", "50", "--enable-random-aborts", "--use-group-metadata")
	if outp, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("TransactionalMessageCopier: %v\n%s", err, tail(string(outp), 30))
	}
	got := readCommitted(t, addr, out, n)
	if len(got[0]) != n {
		t.Fatalf("output has %d records, want %d", len(got[0]), n)
	}
	for i, v := range got[0] {
		if v != strconv.Itoa(i) {
			t.Fatalf("output record %d is %q", i, v)
		}
	}
	for _, args := range [][]string{{"list"}, {"describe", "--transactional-id", "java-copier-tx"}} {
		cmd := exec.CommandContext(ctx, "java", append([]string{"-cp", libs + "/*", "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", addr}, args...)...)
		outp, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(outp), "java-copier-tx") {
			t.Fatalf("TransactionsCommand %v: %v\n%s", args, err, tail(string(outp), 30))
		}
		t.Logf("kafka-transactions.sh %v:\n%s", args, outp)
	}
}

// TestTxnProduceVerification: KIP-890 part 1 on the leader: a transactional batch for a
// partition the producer never added to its transaction is refused (INVALID_TXN_STATE) and
// nothing is appended; after AddPartitionsToTxn the same batch is accepted.
func TestTxnProduceVerification(t *testing.T) {
	b := startBroker(t, nil)
	const topic, id = "txn-verify", "verify-tx"
	createTopic(t, b.Addr(), topic, 1, nil)
	cl := newKgo(t, b.Addr(), kgo.MaxVersions(kversion.V3_0_0())) // Produce v9: topics by name
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKey = 1, id
	if _, err := fc.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	var pid int64
	var epoch int16
	for i := 0; ; i++ { // COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR while the new topic's partitions load
		ip := kmsg.NewPtrInitProducerIDRequest()
		ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr(id), 30000
		resp, err := ip.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode == 0 {
			pid, epoch = resp.ProducerID, resp.ProducerEpoch
			break
		}
		if i > 50 {
			t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		time.Sleep(100 * time.Millisecond)
	}
	produce := func() int16 {
		batch := record.Build(nil, record.BuildOptions{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 0, Attributes: record.AttrTransactional},
			[]record.Record{{Value: []byte("x")}})
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, kmsg.StringPtr(id)
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		req.Version = 9
		resp, err := cl.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(); code != kerr.InvalidTxnState.Code {
		t.Fatalf("produce to a partition not in the transaction: %v", kerr.ErrorForCode(code))
	}
	if end := b.rm.get(engine.TopicPartition{Topic: topic, Partition: 0}).log.LogEndOffset(); end != 0 {
		t.Fatalf("log end %d after a refused batch", end)
	}
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, []int32{0}
	ap.Topics = append(ap.Topics, at)
	apr, err := ap.RequestWith(ctx, cl)
	if err != nil || apr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %+v", err, apr)
	}
	if code := produce(); code != 0 {
		t.Fatalf("produce after AddPartitionsToTxn: %v", kerr.ErrorForCode(code))
	}
}

// TestAuthzTransactions: the TransactionalId resource as Kafka: WRITE to use an id (FindCoordinator
// needs DESCRIBE, implied by WRITE), DESCRIBE to see it in ListTransactions and
// DescribeTransactions; a principal without it gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
func TestAuthzTransactions(t *testing.T) {
	b := startBroker(t, map[string]string{"authorizer.class.name": testAuthorizer, "super.users": "User:admin"})
	principalsByClientID(b)
	_, adm := userClient(t, b, "admin")
	admCreateTopic(t, adm, "tx-acl", 1, nil)
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice", "User:bob").Topics("tx-acl").Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe))
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").TransactionalIDs("alice-tx").Operations(kadm.OpWrite))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	alice, aliceAdm := userClient(t, b, "alice", kgo.TransactionalID("alice-tx"), kgo.DefaultProduceTopic("tx-acl"))
	if err := alice.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := alice.ProduceSync(ctx, kgo.StringRecord("a")).FirstErr(); err != nil {
		t.Fatalf("alice produce: %v", err)
	}
	if err := alice.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("alice commit: %v", err)
	}
	bob, bobAdm := userClient(t, b, "bob", kgo.TransactionalID("alice-tx"), kgo.DefaultProduceTopic("tx-acl"))
	err := bob.BeginTransaction() // franz-go may initialize the producer id here already
	if err == nil {
		err = bob.ProduceSync(ctx, kgo.StringRecord("b")).FirstErr()
	}
	if err == nil || !strings.Contains(err.Error(), "TRANSACTIONAL_ID_AUTHORIZATION_FAILED") {
		t.Fatalf("bob with alice's transactional id: %v", err)
	}
	if ls, err := aliceAdm.ListTransactions(ctx, nil, nil); err != nil || len(ls) != 1 {
		t.Fatalf("alice lists %v (%v)", ls, err)
	}
	if ls, err := bobAdm.ListTransactions(ctx, nil, nil); err != nil || len(ls) != 0 {
		t.Fatalf("bob lists %v (%v)", ls, err)
	}
	var ds kadm.DescribedTransactions
	ds, err = bobAdm.DescribeTransactions(ctx, "alice-tx")
	if err == nil {
		if d := ds["alice-tx"]; !errors.Is(d.Err, kerr.TransactionalIDAuthorizationFailed) {
			t.Fatalf("bob describes alice-tx: %+v", d)
		}
	} else if !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		t.Fatalf("bob describes alice-tx: %v", err)
	}
}

// TestTxnBadInput: the transaction APIs answer bad or out-of-order requests with Kafka's errors.
func TestTxnBadInput(t *testing.T) {
	b := startBroker(t, nil)
	createTopic(t, b.Addr(), "tx-bad", 1, nil)
	cl := newKgo(t, b.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := func(what string, code int16, e *kerr.Error) {
		t.Helper()
		if code != e.Code {
			t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(code), e)
		}
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKey = 1, "bad-tx"
	fr, err := fc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want("FindCoordinator", fr.ErrorCode, &kerr.Error{Code: 0})
	fc.CoordinatorType = 7
	fr, _ = fc.RequestWith(ctx, cl)
	want("FindCoordinator type 7", fr.ErrorCode, kerr.InvalidRequest)
	if err := b.TxnCoordinator().WaitLoaded(ctx, b.TxnCoordinator().PartitionFor("bad-tx")); err != nil {
		t.Fatal(err)
	}

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr("bad-tx"), 0
	ir, _ := ip.RequestWith(ctx, cl)
	want("InitProducerId timeout 0", ir.ErrorCode, kerr.InvalidTransactionTimeout)
	ip.TransactionTimeoutMillis = 900001
	ir, _ = ip.RequestWith(ctx, cl)
	want("InitProducerId timeout above the max", ir.ErrorCode, kerr.InvalidTransactionTimeout)

	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = "bad-tx", 12345, 0
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "tx-bad", []int32{0}
	ap.Topics = append(ap.Topics, at)
	at.Topic, at.Partitions = "no-such-topic", []int32{0}
	ap.Topics = append(ap.Topics, at)
	ar, err := ap.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if v := ar.GetVersion(); v < 4 {
		want("AddPartitionsToTxn beside an unknown topic", ar.Topics[0].Partitions[0].ErrorCode, kerr.OperationNotAttempted)
		want("AddPartitionsToTxn unknown topic", ar.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	}
	ap = kmsg.NewPtrAddPartitionsToTxnRequest() // a new request: franz-go rewrites a sent one into the v4 form
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = "bad-tx", 12345, 0
	at.Topic = "tx-bad"
	ap.Topics = append(ap.Topics, at)
	ar, _ = ap.RequestWith(ctx, cl)
	want("AddPartitionsToTxn unknown id", ar.Topics[0].Partitions[0].ErrorCode, kerr.InvalidProducerIDMapping)

	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = "bad-tx", 12345, 0, true
	er, _ := et.RequestWith(ctx, cl)
	want("EndTxn unknown id", er.ErrorCode, kerr.InvalidProducerIDMapping)

	ip.TransactionTimeoutMillis = 30000
	ir, _ = ip.RequestWith(ctx, cl)
	want("InitProducerId", ir.ErrorCode, &kerr.Error{Code: 0})
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = "bad-tx", "bad-group", ir.ProducerID, ir.ProducerEpoch, -1
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "tx-bad"
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Offset = 1
	tt.Partitions = append(tt.Partitions, tp)
	tc.Topics = append(tc.Topics, tt)
	tt.Topic = "no-such-topic"
	tc.Topics = append(tc.Topics, tt)
	tr, err := tc.RequestWith(ctx, newKgo(t, b.Addr(), kgo.MaxVersions(kversion.V3_0_0()))) // v3: topics by name
	if err != nil {
		t.Fatal(err)
	}
	want("TxnOffsetCommit without AddOffsetsToTxn", tr.Topics[0].Partitions[0].ErrorCode, kerr.InvalidTxnState)
	want("TxnOffsetCommit unknown topic", tr.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	tc.Version = 6
	tc.Topics[0].TopicID, tc.Topics[1].TopicID = [16]byte{1}, [16]byte{2}
	tr6, err := tc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if tr6.GetVersion() >= 6 {
		want("TxnOffsetCommit v6 unknown topic id", tr6.Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicID)
	}

	lt := kmsg.NewPtrListTransactionsRequest()
	lt.TransactionalIDPattern = kmsg.StringPtr("(")
	lr, err := lt.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if lr.GetVersion() >= 2 {
		want("ListTransactions bad pattern", lr.ErrorCode, kerr.InvalidRequest)
	}
	lt.TransactionalIDPattern, lt.StateFilters = nil, []string{"Ongoing", "NoSuchState"}
	lr, _ = lt.RequestWith(ctx, cl)
	if lr.ErrorCode != 0 || !slices.Equal(lr.UnknownStateFilters, []string{"NoSuchState"}) {
		t.Errorf("ListTransactions unknown state: %+v", lr)
	}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"never-seen-tx"}
	dr, err := dt.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if e := dr.TransactionStates[0].ErrorCode; e != kerr.TransactionalIDNotFound.Code && e != kerr.NotCoordinator.Code {
		t.Errorf("DescribeTransactions unknown id: %v", kerr.ErrorForCode(e))
	}
}

// TestSecurityClusterTxn: transactions on 3 brokers whose inter-broker listener is SASL_SSL
// (SCRAM) with the authorizer on: markers and verifications travel between brokers as
// User:broker, which needs CLUSTER_ACTION; commits and aborts are seen by read_committed.
func TestSecurityClusterTxn(t *testing.T) {
	c := startSecureCluster(t, 3, map[string]string{
		"listener.name.broker.sasl.enabled.mechanisms":        "SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol":                "SCRAM-SHA-512",
		"listener.name.broker.scram-sha-512.sasl.jaas.config": jaasLine("scram.ScramLoginModule", "broker", brokerPassword),
		"authorizer.class.name":                               testAuthorizer,
		"super.users":                                         "User:ANONYMOUS",
	})
	adm := kadm.NewClient(c.client())
	createUsers(t, adm, map[string]string{"broker": brokerPassword})
	addACLs(t, adm, kadm.NewACLs().Allow("User:broker").Clusters().Operations(kadm.OpClusterAction))
	const topic = "secure-txn"
	createReplicatedTopic(t, adm, topic, 3, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := c.client(kgo.TransactionalID("secure-tx"), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, commit := range []bool{true, false, true} {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for part := int32(0); part < 3; part++ {
			if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte("t" + strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v\n%s", err, tail(c.output(), 40))
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end: %v", err)
		}
	}
	got := readCommittedFrom(t, c.addrs(), topic, 6)
	for part := int32(0); part < 3; part++ {
		if want := []string{"t0", "t2"}; !slices.Equal(got[part], want) {
			t.Fatalf("partition %d read_committed %q, want %q\n%s", part, got[part], want, tail(c.output(), 30))
		}
	}
}
