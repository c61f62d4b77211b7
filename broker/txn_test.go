package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafka "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
)

// txnFixture is a single broker with a one-partition topic written with transactional batches
// (appended as the leader, as a transactional producer's Produce will once the coordinator
// serves transactional ids) and ended with WriteTxnMarkers requests.
type txnFixture struct {
	t     *testing.T
	b     *Broker
	cl    *kgo.Client
	topic string
	rep   *replica
}

func newTxnFixture(t *testing.T, topic string) *txnFixture {
	b := startBroker(t, nil)
	createTopic(t, b.Addr(), topic, 1, nil)
	f := &txnFixture{t: t, b: b, cl: newKgo(t, b.Addr()), topic: topic}
	f.rep = b.rm.get(engine.TopicPartition{Topic: topic, Partition: 0})
	if f.rep == nil {
		t.Fatal("no replica")
	}
	return f
}

func (f *txnFixture) producerID() (int64, int16) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	resp, err := req.RequestWith(ctx, f.cl)
	if err != nil || resp.ErrorCode != 0 {
		f.t.Fatalf("InitProducerId: %v %d", err, resp.ErrorCode)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// appendBatch appends values as one batch (transactional when pid >= 0) and waits until it is
// below the high watermark.
func (f *txnFixture) appendBatch(pid int64, epoch int16, seq int32, values ...string) int64 {
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	o := record.BuildOptions{ProducerID: -1, BaseSequence: -1}
	if pid >= 0 {
		o = record.BuildOptions{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, Attributes: record.AttrTransactional}
	}
	info, _, err := f.rep.appendAsLeader(record.Build(nil, o, recs))
	if err != nil {
		f.t.Fatal(err)
	}
	f.waitHW(info.LastOffset + 1)
	return info.BaseOffset
}

func (f *txnFixture) waitHW(upTo int64) {
	if err := f.rep.log.AwaitDurable(upTo); err != nil {
		f.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.rep.log.HighWatermark() < upTo {
		if time.Now().After(deadline) {
			f.t.Fatalf("high watermark %d never reached %d", f.rep.log.HighWatermark(), upTo)
		}
		time.Sleep(time.Millisecond)
	}
}

// marker sends WriteTxnMarkers for the topic's partition 0 and returns the partition's error.
func (f *txnFixture) marker(topic string, pid int64, epoch int16, coordinatorEpoch int32, commit bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed = pid, epoch, coordinatorEpoch, commit
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	// Straight to the broker (the client would route by partition leader, and refuse an
	// unknown topic itself).
	kresp, err := f.cl.Broker(int(f.b.nodeID)).Request(ctx, req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	if len(resp.Markers) != 1 || resp.Markers[0].ProducerID != pid || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
		f.t.Fatalf("WriteTxnMarkers response %+v", resp)
	}
	return kerr.ErrorForCode(resp.Markers[0].Topics[0].Partitions[0].ErrorCode)
}

func (f *txnFixture) listOffset(isolation int8) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = f.topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, f.cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		f.t.Fatalf("ListOffsets: %v %+v", err, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

// consumeCommitted reads the topic read_committed with each client until want values arrived,
// then checks nothing more arrives for a short while. kafka-go (v0.4) sends
// isolation_level=1 but neither drops aborted records nor control records (it reads and
// discards aborted_transactions): it is checked to stop at the last stable offset, lso, having
// read every offset below it.
func consumeCommitted(t *testing.T, addr, topic string, want []string, lso int64) {
	t.Helper()
	check := func(client string, got []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s read_committed got %q, want %q", client, got, want)
		}
	}
	t.Run("franz-go", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var got []string
		deadline := time.Now().Add(15 * time.Second)
		quietUntil := time.Time{}
		for time.Now().Before(deadline) {
			if len(got) >= len(want) {
				if quietUntil.IsZero() {
					quietUntil = time.Now().Add(500 * time.Millisecond)
				}
				if time.Now().After(quietUntil) {
					break
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("fetch: %v", err)
				}
			})
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		check("franz-go", got)
	})
	t.Run("sarama", func(t *testing.T) {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
		cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
		cons, err := sarama.NewConsumer([]string{addr}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		var got []string
		timeout := time.After(15 * time.Second)
	loop:
		for {
			wait := 15 * time.Second
			if len(got) >= len(want) {
				wait = 500 * time.Millisecond
			}
			select {
			case m := <-pc.Messages():
				got = append(got, string(m.Value))
			case err := <-pc.Errors():
				t.Fatalf("sarama: %v", err)
			case <-time.After(wait):
				break loop
			case <-timeout:
				break loop
			}
		}
		check("sarama", got)
	})
	t.Run("kafka-go", func(t *testing.T) {
		rd := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: 0, MinBytes: 1, MaxBytes: 1 << 20,
			MaxWait: 200 * time.Millisecond, IsolationLevel: kafka.ReadCommitted})
		defer rd.Close()
		if err := rd.SetOffset(kafka.FirstOffset); err != nil {
			t.Fatal(err)
		}
		var got []int64
		for {
			wait := 15 * time.Second
			if int64(len(got)) >= lso {
				wait = 700 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			m, err := rd.ReadMessage(ctx)
			cancel()
			if err != nil {
				break
			}
			got = append(got, m.Offset)
		}
		if int64(len(got)) != lso || (lso > 0 && got[len(got)-1] != lso-1) {
			t.Fatalf("kafka-go read_committed read offsets %v, want 0..%d", got, lso-1)
		}
	})
}

func TestTxnReadCommittedClients(t *testing.T) {
	f := newTxnFixture(t, "txn-rc")
	p1, e1 := f.producerID()
	p2, e2 := f.producerID()
	p3, e3 := f.producerID()
	f.appendBatch(p1, e1, 0, "a1", "a2")
	f.appendBatch(-1, 0, 0, "p1")
	f.appendBatch(p2, e2, 0, "c1")
	f.appendBatch(p1, e1, 2, "a3")
	f.appendBatch(p2, e2, 1, "c2")
	if err := f.marker(f.topic, p1, e1, 0, false); err != nil {
		t.Fatalf("abort: %v", err)
	}
	f.waitHW(f.rep.log.LogEndOffset())
	if lso := f.listOffset(1); lso != 3 { // p2's transaction from offset 3 is still open
		t.Fatalf("LSO %d, want 3", lso)
	}
	if err := f.marker(f.topic, p2, e2, 0, true); err != nil {
		t.Fatalf("commit: %v", err)
	}
	open := f.appendBatch(p3, e3, 0, "o1")
	f.appendBatch(-1, 0, 0, "p2")
	f.waitHW(f.rep.log.LogEndOffset())
	if hw, lso := f.listOffset(0), f.listOffset(1); hw != f.rep.log.LogEndOffset() || lso != open {
		t.Fatalf("ListOffsets latest: uncommitted %d (log end %d), committed %d (want %d)", hw, f.rep.log.LogEndOffset(), lso, open)
	}

	// DescribeProducers shows p3's open transaction.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dreq := kmsg.NewPtrDescribeProducersRequest()
	dt := kmsg.NewDescribeProducersRequestTopic()
	dt.Topic, dt.Partitions = f.topic, []int32{0}
	dreq.Topics = append(dreq.Topics, dt)
	dresp, err := dreq.RequestWith(ctx, f.cl)
	if err != nil || dresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("DescribeProducers: %v %+v", err, dresp)
	}
	starts := map[int64]int64{}
	for _, ap := range dresp.Topics[0].Partitions[0].ActiveProducers {
		starts[ap.ProducerID] = ap.CurrentTxnStartOffset
	}
	if starts[p3] != open || starts[p1] != -1 || starts[p2] != -1 {
		t.Fatalf("DescribeProducers txn starts %v (p1 %d p2 %d p3 %d open at %d)", starts, p1, p2, p3, open)
	}

	// Held back by p3's open transaction: "o1" and "p2".
	consumeCommitted(t, f.b.Addr(), f.topic, []string{"p1", "c1", "c2"}, open)
	// A zombie coordinator is fenced; an unknown partition is named.
	if err := f.marker(f.topic, p3, e3, 5, true); err != nil {
		t.Fatalf("commit of p3 with coordinator epoch 5: %v", err)
	}
	if err := f.marker(f.topic, p3, e3, 4, true); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("older coordinator epoch: %v", err)
	}
	if err := f.marker("no-such-topic", p3, e3, 0, true); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", err)
	}
	f.waitHW(f.rep.log.LogEndOffset())
	consumeCommitted(t, f.b.Addr(), f.topic, []string{"p1", "c1", "c2", "o1", "p2"}, f.rep.log.LogEndOffset())
}

// TestTxnProduceNeedsTransactionalID: a transactional batch in a Produce request without a
// transactional id is refused, as Kafka does.
func TestTxnProduceNeedsTransactionalID(t *testing.T) {
	f := newTxnFixture(t, "txn-noid")
	pid, epoch := f.producerID()
	batch := record.Build(nil, record.BuildOptions{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: 0, Attributes: record.AttrTransactional},
		[]record.Record{{Value: []byte("x")}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = f.topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.Version = 9
	resp, err := f.cl.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	if code != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional batch without transactional id: %v", kerr.ErrorForCode(code))
	}
	if end := f.rep.log.LogEndOffset(); end != 0 {
		t.Fatalf("log end %d after a refused batch", end)
	}
}

// TestTxnAPIsAuthz: WriteTxnMarkers needs CLUSTER_ACTION on the cluster, DescribeProducers READ
// on the topic.
func TestTxnAPIsAuthz(t *testing.T) {
	b := startBroker(t, map[string]string{"authorizer.class.name": testAuthorizer, "super.users": "User:admin"})
	principalsByClientID(b)
	_, adm := userClient(t, b, "admin")
	admCreateTopic(t, adm, "tx-acl", 1, nil)
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("tx-acl").Operations(kadm.OpRead))
	alice, _ := userClient(t, b, "alice")
	admin, _ := userClient(t, b, "admin")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	markers := func(cl *kgo.Client) int16 {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID = 42
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = "tx-acl", []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp, err := cl.Broker(int(b.nodeID)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	if code := markers(alice); code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice WriteTxnMarkers: %v", kerr.ErrorForCode(code))
	}
	if code := markers(admin); code != 0 {
		t.Fatalf("admin WriteTxnMarkers: %v", kerr.ErrorForCode(code))
	}
	describe := func(cl *kgo.Client, user string) int16 {
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = "tx-acl", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(int(b.nodeID)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
		if user == "admin" && (len(p.ActiveProducers) != 1 || p.ActiveProducers[0].ProducerID != 42 || p.ActiveProducers[0].CurrentTxnStartOffset != -1) {
			t.Fatalf("admin DescribeProducers: %+v", p)
		}
		return p.ErrorCode
	}
	bob, _ := userClient(t, b, "bob")
	if code := describe(bob, "bob"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob DescribeProducers: %v", kerr.ErrorForCode(code))
	}
	if code := describe(alice, "alice"); code != 0 {
		t.Fatalf("alice DescribeProducers: %v", kerr.ErrorForCode(code))
	}
	if code := describe(admin, "admin"); code != 0 {
		t.Fatalf("admin DescribeProducers: %v", kerr.ErrorForCode(code))
	}
}

// TestTxnFetchAbortedList: a raw read_committed Fetch lists the aborted transaction overlapping
// what it returns and reports the last stable offset; read_uncommitted answers a null list.
func TestTxnFetchAbortedList(t *testing.T) {
	f := newTxnFixture(t, "txn-raw")
	p1, e1 := f.producerID()
	p2, e2 := f.producerID()
	f.appendBatch(p1, e1, 0, "a1", "a2") // 0-1, aborted
	f.appendBatch(p2, e2, 0, "o1")       // 2, left open
	if err := f.marker(f.topic, p1, e1, 0, false); err != nil {
		t.Fatal(err)
	}
	f.appendBatch(-1, 0, 0, "p1") // 4
	f.waitHW(f.rep.log.LogEndOffset())
	for _, v := range []int16{4, 11, 12, 16} {
		for _, iso := range []int8{0, 1} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.ReplicaID, req.MaxBytes, req.IsolationLevel, req.SessionEpoch = v, -1, 1<<20, iso, -1
			rt := kmsg.NewFetchRequestTopic()
			tt, _ := f.b.topics.get(f.topic)
			rt.Topic, rt.TopicID = f.topic, tt.ID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 0, 1<<20, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := f.cl.Broker(int(f.b.nodeID)).Request(ctx, req)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.HighWatermark != 5 || p.LastStableOffset != 2 {
				t.Fatalf("v%d iso %d: error %d hw %d lso %d", v, iso, p.ErrorCode, p.HighWatermark, p.LastStableOffset)
			}
			if iso == 0 {
				if p.AbortedTransactions != nil {
					t.Fatalf("v%d read_uncommitted aborted list %+v", v, p.AbortedTransactions)
				}
				continue
			}
			if len(p.AbortedTransactions) != 1 || p.AbortedTransactions[0].ProducerID != p1 || p.AbortedTransactions[0].FirstOffset != 0 {
				t.Fatalf("v%d read_committed aborted list %+v", v, p.AbortedTransactions)
			}
			end := batchesEnd(p.RecordBatches)
			if end != 2 {
				t.Fatalf("v%d read_committed records end at %d, want the LSO 2", v, end)
			}
		}
	}
}

// TestTxnLongPollWakesOnCommit: a read_committed consumer parked in a long poll behind an open
// transaction gets its records as soon as the COMMIT marker moves the last stable offset, not
// after max_wait_ms.
func TestTxnLongPollWakesOnCommit(t *testing.T) {
	f := newTxnFixture(t, "txn-wake")
	pid, epoch := f.producerID()
	f.appendBatch(pid, epoch, 0, "x1", "x2")
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.b.Addr()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{f.topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.NumRecords() > 0 {
				got <- time.Now()
				return
			}
		}
	}()
	time.Sleep(500 * time.Millisecond) // the fetch is parked (nothing below the LSO)
	select {
	case <-got:
		t.Fatal("records of an open transaction were returned")
	default:
	}
	sent := time.Now()
	if err := f.marker(f.topic, pid, epoch, 0, true); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		if d := at.Sub(sent); d > 3*time.Second {
			t.Fatalf("woken %v after the commit", d)
		}
		t.Logf("records %v after the commit marker was sent", at.Sub(sent))
	case <-time.After(8 * time.Second):
		t.Fatal("the parked read_committed fetch was not woken by the commit")
	}
}
