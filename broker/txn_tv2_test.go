package broker

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
)

// keyCounter counts the requests a client writes, by API key.
type keyCounter struct{ n [128]atomic.Int64 }

func (k *keyCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil && key >= 0 && int(key) < len(k.n) {
		k.n[key].Add(1)
	}
}

// txnVersionFinalized is the transaction.version level the broker at addr finalizes (0: none).
func txnVersionFinalized(t *testing.T, addr string) int16 {
	t.Helper()
	cl := newKgo(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	supported := false
	for _, f := range resp.SupportedFeatures {
		if f.Name == "transaction.version" && f.MinVersion == 0 && f.MaxVersion == 2 {
			supported = true
		}
	}
	if !supported || resp.FinalizedFeaturesEpoch < 0 {
		t.Fatalf("ApiVersions: supported %+v, finalized epoch %d", resp.SupportedFeatures, resp.FinalizedFeaturesEpoch)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel
		}
	}
	return 0
}

// txnEpochs runs commits transactions of one record on topic with p and returns the producer
// epoch DescribeTransactions shows after each (the first element: before the first).
func txnEpochs(t *testing.T, addr string, p *kgo.Client, txnID string, commits int) []int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, addr))
	describe := func() int16 {
		ds, err := adm.DescribeTransactions(ctx, txnID)
		if err != nil {
			t.Fatal(err)
		}
		d := ds[txnID]
		if d.Err != nil {
			t.Fatalf("DescribeTransactions: %v", d.Err)
		}
		return d.ProducerEpoch
	}
	var epochs []int16
	for i := range commits {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.ProduceSync(ctx, kgo.StringRecord("v"+string(rune('a'+i)))).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if i == 0 {
			epochs = append(epochs, describe())
		}
		if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit: %v", err)
		}
		epochs = append(epochs, describe())
	}
	return epochs
}

// TestTxnVersion2InUse: the broker finalizes transaction.version 2 (ApiVersions), and franz-go
// then speaks KIP-890 part 2: no AddPartitionsToTxn (the partition leader adds the partition
// for Produce v12+), EndTxn v5 bumps the producer epoch at every commit (DescribeTransactions
// and DescribeProducers show it), and read_committed sees exactly the commits.
func TestTxnVersion2InUse(t *testing.T) {
	b := startBroker(t, nil)
	const topic, id = "tv2", "tv2-tx"
	createTopic(t, b.Addr(), topic, 1, nil)
	if lv := txnVersionFinalized(t, b.Addr()); lv != 2 {
		t.Fatalf("transaction.version finalized at %d, want 2", lv)
	}
	var kc keyCounter
	p := newKgo(t, b.Addr(), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.WithHooks(&kc))
	epochs := txnEpochs(t, b.Addr(), p, id, 3)
	for i := 1; i < len(epochs); i++ {
		if epochs[i] != epochs[i-1]+1 {
			t.Fatalf("producer epochs across commits %v: want +1 at each (transaction version 2)", epochs)
		}
	}
	if n := kc.n[24].Load(); n != 0 {
		t.Fatalf("the client sent %d AddPartitionsToTxn under transaction version 2", n)
	}
	if n := kc.n[26].Load(); n != 3 {
		t.Fatalf("%d EndTxn, want 3", n)
	}
	got := readCommitted(t, b.Addr(), topic, 3)
	if len(got[0]) != 3 {
		t.Fatalf("read_committed %q", got[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, b.Addr()))
	// The last marker carries the last bumped epoch into the partition's producer state.
	for {
		ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		var dp kadm.DescribedProducer
		found := false
		ps.EachProducer(func(d kadm.DescribedProducer) { dp, found = d, true })
		if found && dp.ProducerEpoch == epochs[len(epochs)-1] && dp.CurrentTxnStartOffset == -1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("DescribeProducers: %+v (found %v), want epoch %d and no open transaction", dp, found, epochs[len(epochs)-1])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTxnVersion1ClientUnderVersion2: with transaction.version 2 finalized, a client that
// speaks version 1 (franz-go capped at Kafka 3.9's versions: EndTxn v4, Produce v11, explicit
// AddPartitionsToTxn) still commits and aborts, and its epoch does not move across commits.
func TestTxnVersion1ClientUnderVersion2(t *testing.T) {
	b := startBroker(t, nil)
	const topic, id = "tv1-client", "tv1-client-tx"
	createTopic(t, b.Addr(), topic, 1, nil)
	var kc keyCounter
	p := newKgo(t, b.Addr(), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.WithHooks(&kc), kgo.MaxVersions(kversion.V3_9_0()))
	epochs := txnEpochs(t, b.Addr(), p, id, 3)
	for i := 1; i < len(epochs); i++ {
		if epochs[i] != epochs[0] {
			t.Fatalf("producer epochs across commits %v: a version 1 client keeps its epoch", epochs)
		}
	}
	if n := kc.n[24].Load(); n < 3 {
		t.Fatalf("the client sent %d AddPartitionsToTxn, want one per transaction (version 1)", n)
	}
	if got := readCommitted(t, b.Addr(), topic, 3); len(got[0]) != 3 {
		t.Fatalf("read_committed %q", got[0])
	}
}

// TestTxnVersionPinned: internal.transaction.version=0 finalizes nothing: franz-go speaks
// version 1 (explicit AddPartitionsToTxn, no epoch bump), as against a Kafka cluster at
// transaction.version 0.
func TestTxnVersionPinned(t *testing.T) {
	b := startBroker(t, map[string]string{"internal.transaction.version": "0"})
	const topic, id = "tv0", "tv0-tx"
	createTopic(t, b.Addr(), topic, 1, nil)
	if lv := txnVersionFinalized(t, b.Addr()); lv != 0 {
		t.Fatalf("transaction.version finalized at %d, want none", lv)
	}
	var kc keyCounter
	p := newKgo(t, b.Addr(), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.WithHooks(&kc))
	epochs := txnEpochs(t, b.Addr(), p, id, 2)
	if epochs[0] != epochs[len(epochs)-1] || kc.n[24].Load() < 2 {
		t.Fatalf("epochs %v, %d AddPartitionsToTxn: want version 1", epochs, kc.n[24].Load())
	}
}

// TestTxnVerificationGuard forces the interleaving KIP-890's VerificationGuard exists for: the
// leader has verified the partition (the coordinator says it is in the transaction) but before
// the batch is appended the transaction is aborted and its marker written. The batch must be
// refused (INVALID_TXN_STATE) rather than open a transaction no marker ends: the log holds only
// the marker and the last stable offset is the log end.
func TestTxnVerificationGuard(t *testing.T) {
	b := startBroker(t, nil)
	const topic, id = "txn-guard", "guard-tx"
	createTopic(t, b.Addr(), topic, 1, nil)
	cl := newKgo(t, b.Addr(), kgo.MaxVersions(kversion.V3_0_0())) // Produce v9
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKey = 1, id
	if _, err := fc.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	var pid int64
	var epoch int16
	for i := 0; ; i++ {
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
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = id, pid, epoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = topic, []int32{0}
	ap.Topics = append(ap.Topics, at)
	if apr, err := ap.RequestWith(ctx, cl); err != nil || apr.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("AddPartitionsToTxn: %v %+v", err, apr)
	}
	l := b.rm.get(engine.TopicPartition{Topic: topic, Partition: 0}).log
	hooked := atomic.Int32{}
	txnVerifiedHook = func(tp engine.TopicPartition, p int64) {
		if tp.Topic != topic || p != pid || !hooked.CompareAndSwap(0, 1) {
			return
		}
		// Verified: now the transaction is aborted and its marker lands before the append.
		if r := b.txns.coord.EndTxn(id, pid, epoch, false, 0); r.Err != nil {
			t.Errorf("EndTxn(abort): %v", r.Err)
			return
		}
		for deadline := time.Now().Add(10 * time.Second); l.LogEndOffset() == 0; {
			if time.Now().After(deadline) {
				t.Error("the abort marker was not written")
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	t.Cleanup(func() { txnVerifiedHook = nil })

	batch := record.Build(nil, record.BuildOptions{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 0, Attributes: record.AttrTransactional},
		[]record.Record{{Value: []byte("late")}})
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
	if hooked.Load() != 1 {
		t.Fatal("the verification hook did not run")
	}
	if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTxnState.Code {
		t.Fatalf("append after the transaction's marker: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
	if end := l.LogEndOffset(); end != 1 {
		t.Fatalf("log end %d: want only the abort marker", end)
	}
	for deadline := time.Now().Add(10 * time.Second); l.LastStableOffset() != l.LogEndOffset(); {
		if time.Now().After(deadline) {
			t.Fatalf("last stable offset %d, log end %d: a transaction hangs", l.LastStableOffset(), l.LogEndOffset())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClusterTxnJavaCopierV2: Kafka's TransactionalMessageCopier (the Java client 4.4) on 3
// brokers with transaction.version 2 finalized: the client takes the KIP-890 part 2 paths
// (Produce v12 adds the partitions on their leaders, TxnOffsetCommit v5 adds the offsets
// partition, EndTxn v5 bumps the epoch), markers go to leaders on other brokers, and the input
// is copied exactly once (with random aborts). The producer epoch after the run shows one bump
// per transaction. Before internal topics were accepted in a broker's AddPartitionsToTxn, this
// hung in sendOffsetsToTransaction whenever the group coordinator was not the transaction
// coordinator: the add of __consumer_offsets was refused and TxnOffsetCommit retried forever.
func TestClusterTxnJavaCopierV2(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	libs := os.Getenv("WEIR_KAFKA_LIBS")
	if libs == "" {
		t.Skip("WEIR_KAFKA_LIBS not set: the Java client is not available")
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("no java")
	}
	c := startCluster(t, 3, nil)
	if lv := txnVersionFinalized(t, c.addrs()[0]); lv != 2 {
		t.Fatalf("transaction.version finalized at %d", lv)
	}
	const in, out, n, perTxn = "jv2-in", "jv2-out", 600, 30
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	for _, topic := range []string{in, out} {
		if _, err := adm.CreateTopic(ctx, 3, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	p := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range n {
		p.Produce(ctx, &kgo.Record{Topic: in, Partition: 0, Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "java", "-cp", libs+"/*", "org.apache.kafka.tools.TransactionalMessageCopier",
		"--broker-list", strings.Join(c.addrs(), ","), "--input-topic", in, "--input-partition", "0", "--output-topic", out,
		"--consumer-group", "jv2-copier", "--transactional-id", "jv2-tx", "--max-messages", strconv.Itoa(n),
		"--transaction-size", strconv.Itoa(perTxn), "--use-group-metadata", "--enable-random-aborts")
	outp, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("TransactionalMessageCopier: %v\n%s", err, tail(string(outp), 30))
	}
	t.Logf("TransactionalMessageCopier:\n%s", tail(string(outp), 5))
	got := readCommittedFrom(t, c.addrs(), out, n)
	seen := map[string]bool{}
	for _, vs := range got {
		for _, v := range vs {
			if seen[v] {
				t.Fatalf("%q copied twice", v)
			}
			seen[v] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct records copied, want %d", len(seen), n)
	}
	ds, err := adm.DescribeTransactions(ctx, "jv2-tx")
	if err != nil {
		t.Fatal(err)
	}
	d := ds["jv2-tx"]
	if d.Err != nil || int(d.ProducerEpoch) < n/perTxn {
		t.Fatalf("DescribeTransactions %+v: want an epoch of at least %d (one bump per transaction)", d, n/perTxn)
	}
	t.Logf("producer %d at epoch %d after %d transactions", d.ProducerID, d.ProducerEpoch, n/perTxn)
}

// TestTxnMarkerBatching: many concurrent transactions on 3 in-process brokers, each spanning
// partitions led by every broker. Markers for other brokers go through the per-broker queues,
// so WriteTxnMarkers requests carry several transactions' markers: fewer requests than markers
// sent. Every commit is visible to read_committed. (A producer that fails would leave the
// others at the barrier: the test's context bounds that.)
func TestTxnMarkerBatching(t *testing.T) {
	brokers := startInprocCluster(t, 3, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	var seeds []string
	for _, b := range brokers {
		seeds = append(seeds, b.Addr())
	}
	const topic, producers, rounds = "txn-batch", 16, 3
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, seeds[0], kgo.SeedBrokers(seeds...)))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	clients := make([]*kgo.Client, producers)
	for i := range clients {
		clients[i] = newKgo(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.TransactionalID("batch-tx-"+strconv.Itoa(i)),
			kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	// The producers end their transactions together (a barrier per round), so the coordinators
	// have many transactions' markers for the same brokers at once.
	errc := make(chan error, producers)
	var barriers [rounds]sync.WaitGroup
	for r := range barriers {
		barriers[r].Add(producers)
	}
	for _, p := range clients {
		go func() {
			for r := range rounds {
				if err := p.BeginTransaction(); err != nil {
					errc <- err
					return
				}
				for part := range int32(3) {
					if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte(strconv.Itoa(r))}).FirstErr(); err != nil {
						errc <- err
						return
					}
				}
				barriers[r].Done()
				barriers[r].Wait()
				if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range producers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	got := readCommittedFrom(t, seeds, topic, producers*rounds*3)
	n := 0
	for _, vs := range got {
		n += len(vs)
	}
	if n != producers*rounds*3 {
		t.Fatalf("read_committed %d records, want %d", n, producers*rounds*3)
	}
	var reqs, markers int64
	for _, b := range brokers {
		reqs += b.txns.markerRequests.Load()
		markers += b.txns.markersSent.Load()
	}
	t.Logf("%d markers to other brokers in %d WriteTxnMarkers requests", markers, reqs)
	if markers < producers*rounds || reqs >= markers {
		t.Fatalf("%d markers in %d requests: want several markers per request", markers, reqs)
	}
}
