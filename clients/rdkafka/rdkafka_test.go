//go:build cgo

package rdkafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// TestMain keeps the in-process brokers' logs to warnings and errors.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	os.Exit(m.Run())
}

// brokerProps are set on every broker the tests start: a single consumer joins at once.
var brokerProps = map[string]string{"group.initial.rebalance.delay.ms": "0"}

func logVersion(t *testing.T) {
	_, v := kafka.LibraryVersion()
	t.Logf("librdkafka %s", v)
}

// single starts one in-process broker and returns its bootstrap address.
func single(t *testing.T) string {
	return inproc.Start(t, brokerProps).Addr()
}

// cluster starts three in-process brokers forming one cluster and returns the bootstrap list.
func cluster(t *testing.T) string {
	if testing.Short() {
		t.Skip("three brokers")
	}
	var addrs []string
	for _, b := range inproc.StartCluster(t, 3, brokerProps) {
		addrs = append(addrs, b.Addr())
	}
	return strings.Join(addrs, ",")
}

// createTopics creates topics with franz-go's admin client (the setup is not under test).
func createTopics(t *testing.T, bootstrap string, partitions int32, rf int16, topics ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, rf, nil, topics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics {
		if r := resp[topic]; r.Err != nil {
			t.Fatalf("create %s: %v", topic, r.Err)
		}
	}
}

func newProducer(t *testing.T, cfg kafka.ConfigMap) *kafka.Producer {
	t.Helper()
	p, err := kafka.NewProducer(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func newConsumer(t *testing.T, cfg kafka.ConfigMap) *kafka.Consumer {
	t.Helper()
	c, err := kafka.NewConsumer(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// produce sends the values to topic/partition (kafka.PartitionAny: by key) and waits for every
// delivery report.
func produce(t *testing.T, p *kafka.Producer, topic string, partition int32, keys, values []string) {
	t.Helper()
	dr := make(chan kafka.Event, len(values))
	for i, v := range values {
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: partition}, Value: []byte(v)}
		if keys != nil {
			m.Key = []byte(keys[i])
		}
		for {
			err := p.Produce(m, dr)
			if err == nil {
				break
			}
			var ke kafka.Error
			if errors.As(err, &ke) && ke.Code() == kafka.ErrQueueFull {
				p.Flush(100)
				continue
			}
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	timeout := time.After(30 * time.Second)
	for range values {
		select {
		case e := <-dr:
			if m, ok := e.(*kafka.Message); !ok || m.TopicPartition.Error != nil {
				t.Fatalf("delivery: %v", e)
			}
		case <-timeout:
			t.Fatal("delivery reports: none for 30 s")
		}
	}
}

// readAll reads every partition of topic from the start with the isolation level until want
// records arrived and nothing more came for a second, or 30 s passed; it returns the values by
// partition, in offset order.
func readAll(t *testing.T, bootstrap, topic string, partitions int32, isolation string, want int) map[int32][]string {
	t.Helper()
	c := newConsumer(t, kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": "reader-" + topic + "-" + isolation,
		"isolation.level": isolation, "enable.auto.commit": false, "fetch.wait.max.ms": 200})
	var tps []kafka.TopicPartition
	for p := range partitions {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(tps); err != nil {
		t.Fatal(err)
	}
	got := map[int32][]string{}
	n := 0
	deadline := time.Now().Add(30 * time.Second)
	idleSince := time.Now()
	for time.Now().Before(deadline) && (n < want || time.Since(idleSince) < time.Second) {
		m, err := c.ReadMessage(200 * time.Millisecond)
		if err != nil {
			var ke kafka.Error
			if errors.As(err, &ke) && ke.IsTimeout() {
				continue
			}
			t.Fatalf("read %s: %v", topic, err)
		}
		got[m.TopicPartition.Partition] = append(got[m.TopicPartition.Partition], string(m.Value))
		n++
		idleSince = time.Now()
	}
	return got
}

// TestRdkafkaSmoke: librdkafka's plain (non-idempotent, lz4) producer writes keyed records to 3
// partitions of one broker; a consumer in a group reads every record once, in per-partition
// order, and commits its offsets.
func TestRdkafkaSmoke(t *testing.T) {
	logVersion(t)
	addr := single(t)
	const topic, n = "rdk-smoke", 600
	createTopics(t, addr, 3, 1, topic)
	p := newProducer(t, kafka.ConfigMap{"bootstrap.servers": addr, "acks": "all", "compression.type": "lz4", "linger.ms": 5})
	var keys, values []string
	for i := range n {
		keys = append(keys, "k"+strconv.Itoa(i%10))
		values = append(values, strconv.Itoa(i))
	}
	produce(t, p, topic, kafka.PartitionAny, keys, values)

	c := newConsumer(t, kafka.ConfigMap{"bootstrap.servers": addr, "group.id": "rdk-smoke-group", "auto.offset.reset": "earliest",
		"enable.auto.commit": false})
	if err := c.SubscribeTopics([]string{topic}, nil); err != nil {
		t.Fatal(err)
	}
	byKey := map[string][]int{}
	seen := 0
	for deadline := time.Now().Add(30 * time.Second); seen < n && time.Now().Before(deadline); {
		m, err := c.ReadMessage(200 * time.Millisecond)
		if err != nil {
			var ke kafka.Error
			if errors.As(err, &ke) && ke.IsTimeout() {
				continue
			}
			t.Fatal(err)
		}
		v, _ := strconv.Atoi(string(m.Value))
		byKey[string(m.Key)] = append(byKey[string(m.Key)], v)
		seen++
	}
	if seen != n {
		t.Fatalf("consumed %d of %d records", seen, n)
	}
	for k, vs := range byKey { // one key, one partition: its records in produce order
		if !slices.IsSorted(vs) || len(vs) != n/10 {
			t.Fatalf("key %s: %d records, order %v", k, len(vs), vs)
		}
	}
	if _, err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	asg, err := c.Assignment()
	if err != nil {
		t.Fatal(err)
	}
	committed, err := c.Committed(asg, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, tp := range committed {
		sum += int64(tp.Offset)
	}
	if sum != n {
		t.Fatalf("committed offsets %v sum to %d, want %d", committed, sum, n)
	}
}

// TestRdkafkaTxnCommitAbort: a librdkafka transactional producer commits, aborts and commits on
// one broker; read_committed sees exactly the committed records in order, read_uncommitted all.
func TestRdkafkaTxnCommitAbort(t *testing.T) {
	logVersion(t)
	txnCommitAbort(t, single(t), 1, 1)
}

// TestRdkafkaClusterTxnCommitAbort: the same on three brokers, topic replication factor 3,
// transactions spanning the 3 partitions (markers written to leaders on other brokers).
func TestRdkafkaClusterTxnCommitAbort(t *testing.T) {
	txnCommitAbort(t, cluster(t), 3, 3)
}

func txnCommitAbort(t *testing.T, bootstrap string, partitions int32, rf int16) {
	const topic = "rdk-txn"
	createTopics(t, bootstrap, partitions, rf, topic)
	p := newProducer(t, kafka.ConfigMap{"bootstrap.servers": bootstrap, "transactional.id": "rdk-txn-id", "transaction.timeout.ms": 30000})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatalf("InitTransactions: %v", err)
	}
	run := func(commit bool, tag string, count int) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for part := range partitions {
			var vs []string
			for i := range count {
				vs = append(vs, fmt.Sprintf("%s-%d-%d", tag, part, i))
			}
			produce(t, p, topic, part, nil, vs)
		}
		var err error
		if commit {
			err = p.CommitTransaction(ctx)
		} else {
			err = p.AbortTransaction(ctx)
		}
		if err != nil {
			t.Fatalf("end %s (commit %v): %v", tag, commit, err)
		}
	}
	run(true, "c1", 2)
	run(false, "a1", 3)
	run(true, "c2", 1)
	run(false, "a2", 1)
	run(true, "c3", 4)

	got := readAll(t, bootstrap, topic, partitions, "read_committed", 7*int(partitions))
	all := readAll(t, bootstrap, topic, partitions, "read_uncommitted", 11*int(partitions))
	for part := range partitions {
		var want, wantAll []string
		for _, tx := range []struct {
			tag    string
			n      int
			commit bool
		}{{"c1", 2, true}, {"a1", 3, false}, {"c2", 1, true}, {"a2", 1, false}, {"c3", 4, true}} {
			for i := range tx.n {
				v := fmt.Sprintf("%s-%d-%d", tx.tag, part, i)
				wantAll = append(wantAll, v)
				if tx.commit {
					want = append(want, v)
				}
			}
		}
		if !slices.Equal(got[part], want) {
			t.Errorf("partition %d read_committed %q, want %q", part, got[part], want)
		}
		if !slices.Equal(all[part], wantAll) {
			t.Errorf("partition %d read_uncommitted %q, want %q", part, all[part], wantAll)
		}
	}
}

// TestRdkafkaTxnConsumeTransformProduce: librdkafka's consume-transform-produce loop (as its
// transactions example): a consumer in a group reads the input with read_committed, a
// transactional producer writes the transformed records and the consumer's positions with
// SendOffsetsToTransaction (group metadata: KIP-447 fencing), every third transaction is aborted
// and the consumer rewound to its committed offsets. The output holds each input record once, in
// order, and the group's committed offsets are at the input's end.
func TestRdkafkaTxnConsumeTransformProduce(t *testing.T) {
	logVersion(t)
	consumeTransformProduce(t, single(t), 1, 1)
}

// TestRdkafkaClusterTxnConsumeTransformProduce: the same on three brokers, 3 partitions,
// replication factor 3.
func TestRdkafkaClusterTxnConsumeTransformProduce(t *testing.T) {
	consumeTransformProduce(t, cluster(t), 3, 3)
}

func consumeTransformProduce(t *testing.T, bootstrap string, partitions int32, rf int16) {
	const in, out, group, n = "rdk-ctp-in", "rdk-ctp-out", "rdk-ctp", 300
	createTopics(t, bootstrap, partitions, rf, in, out)
	src := newProducer(t, kafka.ConfigMap{"bootstrap.servers": bootstrap, "enable.idempotence": true})
	perPart := n / int(partitions)
	for part := range partitions {
		var vs []string
		for i := range perPart {
			vs = append(vs, fmt.Sprintf("%d-%d", part, i))
		}
		produce(t, src, in, part, nil, vs)
	}

	c := newConsumer(t, kafka.ConfigMap{"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
		"enable.auto.commit": false, "isolation.level": "read_committed", "fetch.wait.max.ms": 200})
	if err := c.SubscribeTopics([]string{in}, nil); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, kafka.ConfigMap{"bootstrap.servers": bootstrap, "transactional.id": group + "-tx", "transaction.timeout.ms": 30000})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatalf("InitTransactions: %v", err)
	}
	done, txns, aborts := 0, 0, 0
	for ctx.Err() == nil && done < n {
		var batch []*kafka.Message
		for len(batch) < 25 {
			m, err := c.ReadMessage(200 * time.Millisecond)
			if err != nil {
				var ke kafka.Error
				if errors.As(err, &ke) && ke.IsTimeout() {
					break
				}
				t.Fatal(err)
			}
			batch = append(batch, m)
		}
		if len(batch) == 0 {
			continue
		}
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, m := range batch {
			tag := "out-"
			if (txns+aborts)%3 == 2 {
				tag = "aborted-"
			}
			produce(t, p, out, m.TopicPartition.Partition, nil, []string{tag + string(m.Value)})
		}
		asg, err := c.Assignment()
		if err != nil {
			t.Fatal(err)
		}
		pos, err := c.Position(asg)
		if err != nil {
			t.Fatal(err)
		}
		md, err := c.GetConsumerGroupMetadata()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.SendOffsetsToTransaction(ctx, pos, md); err != nil {
			t.Fatalf("SendOffsetsToTransaction: %v", err)
		}
		if (txns+aborts)%3 == 2 {
			if err := p.AbortTransaction(ctx); err != nil {
				t.Fatalf("AbortTransaction: %v", err)
			}
			aborts++
			rewind(t, c)
			continue
		}
		if err := p.CommitTransaction(ctx); err != nil {
			t.Fatalf("CommitTransaction: %v", err)
		}
		txns++
		done += len(batch)
	}
	if done != n || aborts == 0 {
		t.Fatalf("transformed %d of %d records in %d transactions (%d aborted)", done, n, txns, aborts)
	}
	t.Logf("%d records in %d committed and %d aborted transactions", done, txns, aborts)

	got := readAll(t, bootstrap, out, partitions, "read_committed", n)
	for part := range partitions {
		var want []string
		for i := range perPart {
			want = append(want, fmt.Sprintf("out-%d-%d", part, i))
		}
		if !slices.Equal(got[part], want) {
			t.Errorf("partition %d: read_committed %d records %q..., want %d", part, len(got[part]), got[part][:min(len(got[part]), 5)], len(want))
		}
	}
	var tps []kafka.TopicPartition
	inTopic := in
	for part := range partitions {
		tps = append(tps, kafka.TopicPartition{Topic: &inTopic, Partition: part})
	}
	committed, err := c.Committed(tps, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range committed {
		if int(tp.Offset) != perPart {
			t.Errorf("group %s committed %v, want %d", group, tp, perPart)
		}
	}
}

// rewind moves the consumer back to its committed offsets after an aborted transaction (the
// beginning where nothing is committed), as librdkafka's transactions example does.
func rewind(t *testing.T, c *kafka.Consumer) {
	t.Helper()
	asg, err := c.Assignment()
	if err != nil {
		t.Fatal(err)
	}
	committed, err := c.Committed(asg, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range committed {
		if tp.Offset < 0 {
			tp.Offset = kafka.OffsetBeginning
		}
		if err := c.Seek(tp, -1); err != nil {
			t.Fatalf("seek %v: %v", tp, err)
		}
	}
}
