package broker

// Real clients against an in-process broker: franz-go (kgo, kadm), IBM/sarama and
// segmentio/kafka-go. Each test produces with the client's own producer, consumes with its own
// consumer and checks the records come back byte for byte, exactly once, in order per partition.
// Everything runs on 127.0.0.1 and every loop is bounded in count and time.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRecord is what a test produced and expects back.
type testRecord struct {
	Partition int32
	Key       []byte
	Value     []byte
	Headers   []kgo.RecordHeader
	Timestamp time.Time
}

// makeRecords builds n records spread over partitions, with varied keys (some null), values
// (some null, some large and incompressible, some compressible), headers and explicit
// timestamps (millisecond precision, starting at base, 1 ms apart).
func makeRecords(rng *rand.Rand, tag string, n int, partitions int32, base time.Time) []testRecord {
	out := make([]testRecord, n)
	for i := range out {
		r := testRecord{Partition: int32(i) % partitions, Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
		if i%7 != 0 {
			r.Key = []byte(fmt.Sprintf("%s-key-%d", tag, i%13))
		}
		if i%11 != 5 {
			switch i % 3 {
			case 0: // compressible
				r.Value = bytes.Repeat([]byte(fmt.Sprintf("%s-%d|", tag, i)), 1+i%40)
			case 1: // incompressible
				r.Value = make([]byte, 16+rng.IntN(2048))
				for j := range r.Value {
					r.Value[j] = byte(rng.Uint32())
				}
			default:
				r.Value = []byte(fmt.Sprintf("%s-value-%d", tag, i))
			}
		}
		for h := 0; h < i%4; h++ {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: fmt.Sprintf("h%d", h), Value: []byte(fmt.Sprintf("%s-hv-%d-%d", tag, i, h))})
		}
		out[i] = r
	}
	return out
}

func (r testRecord) kgo(topic string) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
}

// checkRecords compares what was consumed with what was produced: per partition the same
// records in the same order, byte for byte (null keys and values stay null), headers and
// timestamps included, each exactly once. got maps partition to records in consumed order.
func checkRecords(t testing.TB, want []testRecord, got map[int32][]testRecord) {
	t.Helper()
	byPart := map[int32][]testRecord{}
	for _, r := range want {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	for p, w := range byPart {
		g := got[p]
		if len(g) != len(w) {
			t.Errorf("partition %d: consumed %d records, produced %d", p, len(g), len(w))
		}
		for i := 0; i < min(len(g), len(w)); i++ {
			if err := sameRecord(w[i], g[i]); err != nil {
				t.Errorf("partition %d record %d: %v", p, i, err)
				return
			}
		}
	}
	for p := range got {
		if _, ok := byPart[p]; !ok && len(got[p]) > 0 {
			t.Errorf("partition %d: %d records consumed, none produced", p, len(got[p]))
		}
	}
}

func sameRecord(w, g testRecord) error {
	switch {
	case !bytes.Equal(w.Key, g.Key) || (w.Key == nil) != (g.Key == nil):
		return fmt.Errorf("key %q (nil %v), want %q (nil %v)", trunc(g.Key), g.Key == nil, trunc(w.Key), w.Key == nil)
	case !bytes.Equal(w.Value, g.Value) || (w.Value == nil) != (g.Value == nil):
		return fmt.Errorf("value %q (%d bytes, nil %v), want %q (%d bytes, nil %v)", trunc(g.Value), len(g.Value), g.Value == nil, trunc(w.Value), len(w.Value), w.Value == nil)
	case !w.Timestamp.Equal(g.Timestamp):
		return fmt.Errorf("timestamp %v, want %v", g.Timestamp, w.Timestamp)
	case len(w.Headers) != len(g.Headers):
		return fmt.Errorf("%d headers, want %d", len(g.Headers), len(w.Headers))
	}
	for i := range w.Headers {
		if w.Headers[i].Key != g.Headers[i].Key || !bytes.Equal(w.Headers[i].Value, g.Headers[i].Value) {
			return fmt.Errorf("header %d = %s:%q, want %s:%q", i, g.Headers[i].Key, g.Headers[i].Value, w.Headers[i].Key, w.Headers[i].Value)
		}
	}
	return nil
}

func trunc(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

// newKgo returns a franz-go client on addr, closed at the end of the test.
func newKgo(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic with the given partitions and config overrides.
func createTopic(t testing.TB, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, addr))
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// consumeKgo reads topic from the start with a direct (group-less) franz-go consumer until n
// records arrived or the deadline passed, and returns them by partition.
func consumeKgo(t testing.TB, addr, topic string, n int, timeout time.Duration, opts ...kgo.Opt) map[int32][]testRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cl := newKgo(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	got := map[int32][]testRecord{}
	count := 0
	for count < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], testRecord{Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
			count++
		})
	}
	if count < n {
		t.Errorf("consumed %d of %d records of %s within %v", count, n, topic, timeout)
	}
	// A short extra poll: nothing more (no duplicates) may arrive.
	if count == n {
		ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel2()
		fs := cl.PollFetches(ctx2)
		fs.EachRecord(func(r *kgo.Record) {
			t.Errorf("extra record at %s/%d@%d after all %d were consumed", r.Topic, r.Partition, r.Offset, n)
		})
	}
	return got
}

// TestKgoAcksAndCompression produces with acks 0, 1 and all (idempotent, franz-go's default)
// and every compression codec, records with null keys and values, headers and explicit
// timestamps, and consumes everything back byte for byte, exactly once, in order.
func TestKgoAcksAndCompression(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	acks := []struct {
		name string
		opts []kgo.Opt
	}{
		{"acks0", []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}},
		{"acks1", []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
		{"acksall", []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}},
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for ai, a := range acks {
		for ci, c := range codecs {
			t.Run(a.name+"-"+c.name, func(t *testing.T) {
				t.Parallel()
				topic := "rt-" + a.name + "-" + c.name
				const parts, n = 3, 300
				createTopic(t, addr, topic, parts, nil)
				rng := rand.New(rand.NewPCG(uint64(ai), uint64(ci)))
				want := makeRecords(rng, topic, n, parts, base)
				prod := newKgo(t, addr, append([]kgo.Opt{kgo.ProducerBatchCompression(c.codec),
					kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5 * time.Millisecond)}, a.opts...)...)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				var failed atomic.Int64
				for _, r := range want {
					prod.Produce(ctx, r.kgo(topic), func(r *kgo.Record, err error) {
						if err != nil && failed.Add(1) == 1 {
							t.Errorf("produce: %v", err)
						}
					})
				}
				if err := prod.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if failed.Load() > 0 {
					t.Fatalf("%d records failed", failed.Load())
				}
				checkRecords(t, want, consumeKgo(t, addr, topic, n, 20*time.Second))
			})
		}
	}
}

// TestKgoLargeRecord sends a 1 MiB record: refused with MESSAGE_TOO_LARGE at the default
// max.message.bytes (1048588 cannot hold 1 MiB plus the batch overhead), accepted on a topic with
// max.message.bytes raised, and fetched back whole.
func TestKgoLargeRecord(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	big := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prodOpts := []kgo.Opt{kgo.ProducerBatchMaxBytes(4 << 20), kgo.RecordRetries(2)}

	createTopic(t, addr, "big-default", 1, nil)
	prod := newKgo(t, addr, prodOpts...)
	err := prod.ProduceSync(ctx, &kgo.Record{Topic: "big-default", Value: big}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("1 MiB record at the default max.message.bytes: err %v, want MESSAGE_TOO_LARGE", err)
	}

	limit := "2097152"
	createTopic(t, addr, "big", 1, map[string]*string{"max.message.bytes": &limit})
	want := []testRecord{
		{Key: []byte("small-before"), Value: []byte("x"), Timestamp: time.UnixMilli(1_700_000_000_000)},
		{Key: []byte("big"), Value: big, Headers: []kgo.RecordHeader{{Key: "size", Value: []byte("1MiB")}}, Timestamp: time.UnixMilli(1_700_000_000_001)},
		{Key: []byte("small-after"), Value: []byte("y"), Timestamp: time.UnixMilli(1_700_000_000_002)},
	}
	for _, r := range want { // one batch each
		if err := prod.ProduceSync(ctx, r.kgo("big")).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", r.Key, err)
		}
	}
	got := consumeKgo(t, addr, "big", len(want), 20*time.Second,
		kgo.FetchMaxPartitionBytes(4<<20), kgo.FetchMaxBytes(8<<20), kgo.BrokerMaxReadBytes(16<<20))
	checkRecords(t, want, got)

	// The default per-partition fetch limit (1 MiB) is smaller than the batch: the broker still
	// returns the whole batch (KIP-74), so a consumer with default settings is not stuck.
	got = consumeKgo(t, addr, "big", len(want), 20*time.Second)
	checkRecords(t, want, got)
}

// TestKgoListOffsetsByTime checks timestamp lookups: the first offset whose timestamp is >= the
// target (inside a batch too, compressed or not), and the end offset (kadm) / -1 (wire) for a
// time after every record.
func TestKgoListOffsetsByTime(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	const n, perBatch = 100, 10
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"zstd", kgo.ZstdCompression()}, {"gzip", kgo.GzipCompression()}} {
		t.Run(codec.name, func(t *testing.T) {
			topic := "ts-" + codec.name
			createTopic(t, addr, topic, 1, nil)
			prod := newKgo(t, addr, kgo.ProducerBatchCompression(codec.codec), kgo.ProducerLinger(50*time.Millisecond))
			// Record i has timestamp t0 + 10*i ms; records go in batches of perBatch.
			for i := 0; i < n; i += perBatch {
				var recs []*kgo.Record
				for j := i; j < i+perBatch; j++ {
					// Compressible values, so the codecs really compress (franz-go sends a batch
					// uncompressed when compressing does not shrink it).
					recs = append(recs, &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte(fmt.Sprintf("%03d|", j)), 64), Timestamp: t0.Add(time.Duration(10*j) * time.Millisecond)})
				}
				if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			adm := kadm.NewClient(newKgo(t, addr))
			cases := []struct {
				target int64
				want   int64
			}{
				{t0.UnixMilli() - 1000, 0},
				{t0.UnixMilli(), 0},
				{t0.UnixMilli() + 1, 1},
				{t0.UnixMilli() + 10*3, 3},
				{t0.UnixMilli() + 10*15 - 5, 15},
				{t0.UnixMilli() + 10*57, 57},
				{t0.UnixMilli() + 10*(n-1), n - 1},
				{t0.UnixMilli() + 10*(n-1) + 1, n}, // after every record: kadm answers the end offset
				{time.Now().Add(time.Hour).UnixMilli(), n},
			}
			for _, c := range cases {
				lo, err := adm.ListOffsetsAfterMilli(ctx, c.target, topic)
				if err != nil {
					t.Fatal(err)
				}
				o, ok := lo.Lookup(topic, 0)
				if !ok || o.Err != nil {
					t.Fatalf("ListOffsetsAfterMilli(%d): %+v %v", c.target-t0.UnixMilli(), o, o.Err)
				}
				if o.Offset != c.want {
					t.Errorf("ListOffsetsAfterMilli(t0+%d ms) = %d, want %d", c.target-t0.UnixMilli(), o.Offset, c.want)
				}
			}
			// On the wire, a time after every record is offset -1 and timestamp -1.
			req := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = t0.UnixMilli() + 10*n
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, newKgo(t, addr))
			if err != nil {
				t.Fatal(err)
			}
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != -1 || p.Timestamp != -1 {
				t.Errorf("ListOffsets after every record: offset %d timestamp %d error %d, want -1 -1 0", p.Offset, p.Timestamp, p.ErrorCode)
			}
			// The timestamp answered with an offset is that record's.
			rp.Timestamp = t0.UnixMilli() + 10*42 - 3
			req.Topics[0].Partitions[0] = rp
			resp, err = req.RequestWith(ctx, newKgo(t, addr))
			if err != nil {
				t.Fatal(err)
			}
			if p := resp.Topics[0].Partitions[0]; p.Offset != 42 || p.Timestamp != t0.UnixMilli()+420 {
				t.Errorf("ListOffsets(t0+417) = offset %d timestamp %d, want 42 and t0+420", p.Offset, p.Timestamp-t0.UnixMilli())
			}
		})
	}
}

// TestKgoLongPoll checks that a fetch with no data parks: a consumer waiting with nothing to read
// gets a record produced later within a short time (the broker wakes the parked fetch on the
// append, it does not wait out max_wait), and idle fetches each really take max_wait.
func TestKgoLongPoll(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	createTopic(t, addr, "poll", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := newKgo(t, addr, kgo.DefaultProduceTopic("poll"))
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("first")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	t.Run("wakeup", func(t *testing.T) {
		var fetches atomic.Int64
		cons := newKgo(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"poll": {0: kgo.NewOffset().At(1)}}),
			kgo.FetchMaxWait(5*time.Second), kgo.WithHooks(fetchCounter{&fetches}))
		got := make(chan time.Time, 1)
		go func() {
			for ctx.Err() == nil {
				fs := cons.PollFetches(ctx)
				if fs.NumRecords() > 0 {
					got <- time.Now()
					return
				}
			}
		}()
		time.Sleep(300 * time.Millisecond) // the consumer's fetch is parked by now
		parked := fetches.Load()
		produced := time.Now()
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("later")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		acked := time.Now()
		select {
		case at := <-got:
			lat := at.Sub(produced)
			t.Logf("long-poll wake-up: record consumed %v after the produce call (%v after its ack); %d fetches before the produce", lat, at.Sub(acked), parked)
			if lat > 1500*time.Millisecond { // max wait is 5 s: anything near it means no wake-up
				t.Errorf("parked fetch answered %v after the produce: not woken by the append", lat)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("record produced to a long-polling consumer never arrived")
		}
		if parked > 3 {
			t.Errorf("%d fetches in 300 ms with max wait 5 s: the broker answers empty fetches at once", parked)
		}
	})

	t.Run("idle", func(t *testing.T) {
		cl := newKgo(t, addr)
		meta := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr("poll")
		meta.Topics = append(meta.Topics, mt)
		mresp, err := meta.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 500
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "poll", mresp.Topics[0].TopicID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset = 2 // the log end
		fp.PartitionMaxBytes = 1 << 20
		fp.CurrentLeaderEpoch = -1
		fp.LogStartOffset = -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		const n = 4
		start := time.Now()
		for i := 0; i < n; i++ {
			one := time.Now()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatal(err)
			}
			p := resp.Topics[0].Partitions[0]
			if resp.ErrorCode != 0 || p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 2 {
				t.Fatalf("idle fetch: error %d/%d, %d record bytes, high watermark %d", resp.ErrorCode, p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
			}
			if d := time.Since(one); d < 450*time.Millisecond {
				t.Errorf("idle fetch %d with max wait 500 ms answered after %v", i, d)
			}
		}
		total := time.Since(start)
		t.Logf("%d idle fetches with max wait 500 ms took %v", n, total)
		if total < n*475*time.Millisecond {
			t.Errorf("%d idle fetches took %v, want >= %v", n, total, n*500*time.Millisecond)
		}
	})
}

// fetchCounter counts Fetch requests written.
type fetchCounter struct{ n *atomic.Int64 }

func (f fetchCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == 1 {
		f.n.Add(1)
	}
}

// parallelProducers is how many goroutines the concurrency test runs.
const parallelProducers = 4

// TestKgoConcurrentProducers runs several idempotent producers on one partition at once and
// checks each producer's records arrive complete and in its order.
func TestKgoConcurrentProducers(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	createTopic(t, addr, "conc", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const per = 500
	var wg sync.WaitGroup
	for p := 0; p < parallelProducers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := newKgo(t, addr, kgo.DefaultProduceTopic("conc"), kgo.ProducerLinger(time.Millisecond))
			for i := 0; i < per; i++ {
				cl.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(p)), Value: []byte(fmt.Sprint(i))}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("producer %d: %v", p, err)
					}
				})
			}
			if err := cl.Flush(ctx); err != nil {
				t.Errorf("producer %d flush: %v", p, err)
			}
		}()
	}
	wg.Wait()
	got := consumeKgo(t, addr, "conc", parallelProducers*per, 20*time.Second)
	next := map[string]int{}
	for _, r := range got[0] {
		var i int
		fmt.Sscan(string(r.Value), &i)
		if i != next[string(r.Key)] {
			t.Fatalf("producer %s: record %d, want %d", r.Key, i, next[string(r.Key)])
		}
		next[string(r.Key)]++
	}
}

// TestSarama produces with sarama's SyncProducer (acks all, each codec) and reads back with its
// partition consumer (no groups: ConsumePartition), at sarama's default protocol version (2.8),
// at 3.0 and at the newest it knows.
func TestSarama(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	versions := []struct {
		name string
		v    sarama.KafkaVersion
	}{{"default", sarama.DefaultVersion}, {"v3.0", sarama.V3_0_0_0}, {"max", sarama.MaxVersion}}
	codecs := []struct {
		name  string
		codec sarama.CompressionCodec
	}{
		{"none", sarama.CompressionNone}, {"gzip", sarama.CompressionGZIP}, {"snappy", sarama.CompressionSnappy},
		{"lz4", sarama.CompressionLZ4}, {"zstd", sarama.CompressionZSTD},
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for vi, v := range versions {
		for ci, c := range codecs {
			t.Run(v.name+"-"+c.name, func(t *testing.T) {
				t.Parallel()
				topic := "sarama-" + v.name + "-" + c.name
				const parts, n = 2, 200
				createTopic(t, addr, topic, parts, nil)
				cfg := sarama.NewConfig()
				cfg.Version = v.v
				cfg.ClientID = "weir-test"
				cfg.Producer.RequiredAcks = sarama.WaitForAll
				cfg.Producer.Return.Successes = true
				cfg.Producer.Compression = c.codec
				cfg.Producer.Partitioner = sarama.NewManualPartitioner
				cfg.Producer.Flush.Messages = 20
				cfg.Producer.Flush.Frequency = 5 * time.Millisecond
				cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
				cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
				prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer prod.Close()
				rng := rand.New(rand.NewPCG(uint64(100+vi), uint64(ci)))
				want := makeRecords(rng, topic, n, parts, base)
				var msgs []*sarama.ProducerMessage
				for _, r := range want {
					m := &sarama.ProducerMessage{Topic: topic, Partition: r.Partition, Timestamp: r.Timestamp}
					if r.Key != nil {
						m.Key = sarama.ByteEncoder(r.Key)
					}
					if r.Value != nil {
						m.Value = sarama.ByteEncoder(r.Value)
					}
					for _, h := range r.Headers {
						m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
					}
					msgs = append(msgs, m)
				}
				if err := prod.SendMessages(msgs); err != nil {
					t.Fatalf("SendMessages: %v", err)
				}
				// Offsets reported to the producer are consecutive per partition.
				nextOff := map[int32]int64{}
				for _, m := range msgs {
					if m.Offset != nextOff[m.Partition] {
						t.Fatalf("partition %d: produced at offset %d, want %d", m.Partition, m.Offset, nextOff[m.Partition])
					}
					nextOff[m.Partition]++
				}

				cons, err := sarama.NewConsumer([]string{addr}, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer cons.Close()
				got := map[int32][]testRecord{}
				for p := int32(0); p < parts; p++ {
					pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
					if err != nil {
						t.Fatal(err)
					}
					timeout := time.After(20 * time.Second)
				read:
					for int64(len(got[p])) < nextOff[p] {
						select {
						case m := <-pc.Messages():
							if m.Offset != int64(len(got[p])) {
								t.Fatalf("partition %d: message at offset %d, want %d", p, m.Offset, len(got[p]))
							}
							r := testRecord{Partition: p, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp}
							for _, h := range m.Headers {
								r.Headers = append(r.Headers, kgo.RecordHeader{Key: string(h.Key), Value: h.Value})
							}
							got[p] = append(got[p], r)
						case err := <-pc.Errors():
							t.Fatalf("partition %d: %v", p, err)
						case <-timeout:
							t.Errorf("partition %d: %d of %d messages within 20s", p, len(got[p]), nextOff[p])
							break read
						}
					}
					pc.AsyncClose()
				}
				checkRecords(t, want, got)
			})
		}
	}
}

// TestKafkaGo writes with segmentio/kafka-go's Writer (acks all, each codec) and reads back with
// its Reader on explicit partitions (no GroupID: groups are not served yet).
func TestKafkaGo(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	codecs := []struct {
		name  string
		codec kafka.Compression
	}{{"none", 0}, {"gzip", kafka.Gzip}, {"snappy", kafka.Snappy}, {"lz4", kafka.Lz4}, {"zstd", kafka.Zstd}}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for ci, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			topic := "kafkago-" + c.name
			const parts, n = 2, 200
			createTopic(t, addr, topic, parts, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Each writer gets its own Transport: kafka-go's shared DefaultTransport answers
			// Metadata from a cache refreshed every 6 s, so a topic created by another client
			// after the cache was filled is "unknown" to it for up to that long (the same
			// against Apache Kafka).
			tr := &kafka.Transport{}
			defer tr.CloseIdleConnections()
			w := &kafka.Writer{
				Transport:    tr,
				Addr:         kafka.TCP(addr),
				Topic:        topic,
				Balancer:     kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition }),
				RequiredAcks: kafka.RequireAll,
				Compression:  c.codec,
				BatchSize:    25,
				BatchTimeout: 5 * time.Millisecond,
			}
			defer w.Close()
			rng := rand.New(rand.NewPCG(200, uint64(ci)))
			want := makeRecords(rng, topic, n, parts, base)
			var msgs []kafka.Message
			for _, r := range want {
				m := kafka.Message{Partition: int(r.Partition), Key: r.Key, Value: r.Value, Time: r.Timestamp}
				for _, h := range r.Headers {
					m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
				}
				msgs = append(msgs, m)
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatalf("WriteMessages: %v", err)
			}
			got := map[int32][]testRecord{}
			perPart := map[int32]int{}
			for _, r := range want {
				perPart[r.Partition]++
			}
			for p := int32(0); p < parts; p++ {
				rd := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: int(p),
					MinBytes: 1, MaxBytes: 4 << 20, MaxWait: 200 * time.Millisecond})
				if err := rd.SetOffset(kafka.FirstOffset); err != nil {
					t.Fatal(err)
				}
				for len(got[p]) < perPart[p] {
					m, err := rd.ReadMessage(ctx)
					if err != nil {
						t.Fatalf("partition %d after %d messages: %v", p, len(got[p]), err)
					}
					if m.Offset != int64(len(got[p])) {
						t.Fatalf("partition %d: message at offset %d, want %d", p, m.Offset, len(got[p]))
					}
					r := testRecord{Partition: p, Key: m.Key, Value: m.Value, Timestamp: m.Time}
					for _, h := range m.Headers {
						r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
					}
					got[p] = append(got[p], r)
				}
				rd.Close()
			}
			checkRecords(t, want, got)

			// kafka-go's Conn: the partition's first and last offsets, and a batch read.
			conn, err := kafka.DialLeader(ctx, "tcp", addr, topic, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			first, last, err := conn.ReadOffsets()
			if err != nil {
				t.Fatal(err)
			}
			if first != 0 || last != int64(perPart[0]) {
				t.Errorf("Conn.ReadOffsets = %d, %d, want 0, %d", first, last, perPart[0])
			}
		})
	}
}
