package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
)

// Produce validation against a real broker through franz-go: batches that lie about their
// records, decompression bombs and out-of-range timestamps are refused with Kafka's error codes
// before anything is written; LogAppendTime is stamped and visible to consumers.

func validateTestClient(t *testing.T, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// v9Client is a client whose requests name topics (Produce v9), for hand-built batches.
func v9Client(t *testing.T, b *Broker, opts ...kgo.Opt) *kgo.Client {
	return validateTestClient(t, b, append([]kgo.Opt{kgo.MaxVersions(kversion.V3_0_0())}, opts...)...)
}

func createTestTopic(t *testing.T, cl *kgo.Client, name string, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, configs, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", name, err, resp.Err)
	}
}

// rawProduce sends one batch to topic/0 at Produce v9 (the client must be capped at Kafka
// 3.0's versions, v9Client) and returns the partition's response.
func rawProduce(t *testing.T, cl *kgo.Client, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	return resp.Topics[0].Partitions[0]
}

// swapOffsetDeltas rewrites the offset deltas of records 1 and 2 of an uncompressed payload
// (each a one-byte varint) so they come out of order.
func swapOffsetDeltas(p []byte) []byte {
	p = append([]byte(nil), p...)
	for pos, i := 0, 0; pos < len(p); i++ {
		l, k := binary.Varint(p[pos:])
		body := p[pos+k : pos+k+int(l)]
		_, tk := binary.Varint(body[1:])
		switch i {
		case 1:
			body[1+tk] = 4
		case 2:
			body[1+tk] = 2
		}
		pos += k + int(l)
	}
	return p
}

func TestProduceRefusesLyingBatches(t *testing.T) {
	b := startBroker(t, nil)
	cl := v9Client(t, b)
	createTestTopic(t, cl, "lies", nil)
	createTestTopic(t, cl, "bystander", nil)
	now := time.Now().UnixMilli()
	recs := []record.Record{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}, {Key: []byte("c"), Value: []byte("3")}, {Key: []byte("d"), Value: []byte("4")}}
	plain := record.Build(nil, record.BuildOptions{BaseTimestamp: now, ProducerID: -1, BaseSequence: -1}, recs)
	payload := plain[record.HeaderSize:]
	compress := func(codec int, p []byte) []byte {
		c, err := record.Compress(codec, p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// A zstd bomb: 40 records of 1 MiB of zeros, far past the 16 MiB decompression bound.
	var bombPlain []byte
	{
		var big []record.Record
		for range 40 {
			big = append(big, record.Record{Key: []byte("k"), Value: make([]byte, 1<<20)})
		}
		bombPlain = record.Build(nil, record.BuildOptions{BaseTimestamp: now, ProducerID: -1, BaseSequence: -1}, big)
	}
	bomb := record.WithRecords(bombPlain, 4, compress(4, bombPlain[record.HeaderSize:]), 40, 39)
	year9999 := record.Build(nil, record.BuildOptions{BaseTimestamp: 253402300799000, ProducerID: -1, BaseSequence: -1}, recs[:1])
	for _, c := range []struct {
		name  string
		batch []byte
		want  *kerr.Error
	}{
		{"zstd claiming MaxInt32 records", record.WithRecords(plain, 4, compress(4, payload), math.MaxInt32, math.MaxInt32-1), kerr.InvalidRecord},
		{"gzip count too small", record.WithRecords(plain, 1, compress(1, payload), 2, 1), kerr.InvalidRecord},
		{"lz4 count too large", record.WithRecords(plain, 3, compress(3, payload), 5, 4), kerr.InvalidRecord},
		{"snappy offset deltas out of order", record.WithRecords(plain, 2, compress(2, swapOffsetDeltas(payload)), 4, 3), kerr.InvalidRecord},
		{"uncompressed offset deltas out of order", record.WithRecords(plain, 0, swapOffsetDeltas(payload), 4, 3), kerr.InvalidRecord},
		{"zstd bomb", bomb, kerr.MessageTooLarge},
		{"year 9999", year9999, kerr.InvalidTimestamp},
	} {
		t.Run(c.name, func(t *testing.T) {
			rp := rawProduce(t, cl, "lies", c.batch)
			if rp.ErrorCode != c.want.Code {
				t.Fatalf("error %v (%v), want %s", kerr.ErrorForCode(rp.ErrorCode), rp.ErrorMessage, c.want.Message)
			}
			if rp.BaseOffset != -1 || rp.ErrorMessage == nil {
				t.Fatalf("base offset %d, message %v", rp.BaseOffset, rp.ErrorMessage)
			}
			t.Logf("%s: %s", kerr.ErrorForCode(rp.ErrorCode), *rp.ErrorMessage)
			if c.want == kerr.InvalidTimestamp && (len(rp.ErrorRecords) != 1 || rp.ErrorRecords[0].RelativeOffset != 0) {
				t.Fatalf("record errors %+v", rp.ErrorRecords)
			}
			l, ok := b.Logs().Log(engine.TopicPartition{Topic: "lies", Partition: 0})
			if !ok {
				t.Fatal("no log")
			}
			if end, segs := l.LogEndOffset(), len(l.Segments()); end != 0 || segs != 1 {
				t.Fatalf("log end %d, %d segments after a refused batch", end, segs)
			}
		})
	}
	// The same connection, the same partition and another topic keep working with a real
	// producer (compressed, so its batches go through the streaming validation).
	prod := validateTestClient(t, b, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, topic := range []string{"lies", "bystander"} {
		for i := range 10 {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte{byte(i)}}).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", topic, err)
			}
		}
	}
	if rp := rawProduce(t, cl, "lies", record.WithRecords(plain, 4, compress(4, payload), 4, 3)); rp.ErrorCode != 0 || rp.BaseOffset != 10 {
		t.Fatalf("honest zstd batch: %v at %d", kerr.ErrorForCode(rp.ErrorCode), rp.BaseOffset)
	}
}

func TestProduceTimestampBounds(t *testing.T) {
	b := startBroker(t, nil)
	cl := v9Client(t, b)
	createTestTopic(t, cl, "defaults", nil)
	createTestTopic(t, cl, "recent", map[string]*string{"message.timestamp.before.max.ms": kadm.StringPtr("3600000")})
	prod := validateTestClient(t, b, kgo.RecordRetries(0), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce := func(topic string, ts time.Time) error {
		return prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v"), Timestamp: ts}).FirstErr()
	}
	now := time.Now()
	// franz-go encodes timestamps through UnixNano, which overflows past 2262: year 9999 is
	// sent raw in TestProduceRefusesLyingBatches; here the year 2200.
	if err := produce("defaults", time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)); !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("year 2200 (after.max.ms default 1h): %v", err)
	}
	if err := produce("defaults", now.Add(2*time.Hour)); !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("2h ahead: %v", err)
	}
	if err := produce("defaults", now.Add(30*time.Minute)); err != nil {
		t.Fatalf("30 min ahead: %v", err)
	}
	if err := produce("defaults", time.UnixMilli(1000)); err != nil {
		t.Fatalf("1970 with before.max.ms unbounded: %v", err)
	}
	if err := produce("recent", now.Add(-2*time.Hour)); !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("2h old with before.max.ms 1h: %v", err)
	}
	if err := produce("recent", now.Add(-time.Minute)); err != nil {
		t.Fatalf("1 min old: %v", err)
	}
	// A dynamic change applies to the next batch.
	if _, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "message.timestamp.before.max.ms", Value: kadm.StringPtr("86400000")}}, "recent"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := produce("recent", now.Add(-2*time.Hour))
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.InvalidTimestamp) || time.Now().After(deadline) {
			t.Fatalf("2h old after raising before.max.ms: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestLogAppendTime(t *testing.T) {
	b := startBroker(t, nil)
	cl := v9Client(t, b)
	createTestTopic(t, cl, "lat", map[string]*string{"message.timestamp.type": kadm.StringPtr("LogAppendTime")})
	createTestTopic(t, cl, "ct", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old := time.UnixMilli(946684800000) // 2000-01-01: kept under CreateTime, replaced under LogAppendTime
	before := time.Now().UnixMilli()
	// The Produce response carries the append time (franz-go does not expose it: raw request).
	plain := record.Build(nil, record.BuildOptions{BaseTimestamp: old.UnixMilli(), ProducerID: -1, BaseSequence: -1}, []record.Record{{Value: []byte("raw")}})
	rp := rawProduce(t, cl, "lat", plain)
	after := time.Now().UnixMilli()
	if rp.ErrorCode != 0 || rp.LogAppendTime < before || rp.LogAppendTime > after {
		t.Fatalf("LogAppendTime topic: error %d, log_append_time %d not in [%d, %d]", rp.ErrorCode, rp.LogAppendTime, before, after)
	}
	if rp := rawProduce(t, cl, "ct", plain); rp.ErrorCode != 0 || rp.LogAppendTime != -1 {
		t.Fatalf("CreateTime topic: error %d, log_append_time %d", rp.ErrorCode, rp.LogAppendTime)
	}
	prod := validateTestClient(t, b, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	defer func() {
		// A dynamic change of message.timestamp.type applies to the next batch.
		if _, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "message.timestamp.type", Value: kadm.StringPtr("LogAppendTime")}}, "ct"); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			rp := rawProduce(t, cl, "ct", plain)
			if rp.ErrorCode != 0 {
				t.Fatalf("ct after the change: %v", kerr.ErrorForCode(rp.ErrorCode))
			}
			if rp.LogAppendTime >= before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ct still CreateTime 10 s after the change (log_append_time %d)", rp.LogAppendTime)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	for _, topic := range []string{"lat", "ct"} {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("client"), Timestamp: old}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	after = time.Now().UnixMilli()
	cons := validateTestClient(t, b, kgo.ConsumeTopics("lat", "ct"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]int{}
	for got["lat"] < 2 || got["ct"] < 2 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Topic]++
			ts := r.Timestamp.UnixMilli()
			switch r.Topic {
			case "lat":
				if r.Attrs.TimestampType() != 1 || ts < before || ts > after {
					t.Errorf("lat record %q: timestamp type %d, %d not in [%d, %d]", r.Value, r.Attrs.TimestampType(), ts, before, after)
				}
			case "ct":
				if r.Attrs.TimestampType() != 0 || ts != old.UnixMilli() {
					t.Errorf("ct record %q: timestamp type %d, %d", r.Value, r.Attrs.TimestampType(), ts)
				}
			}
		})
	}
}

// TestListOffsetsDecompressionBomb: a stored zstd batch that inflates to 128 MiB (written as a
// follower or an older broker would have: AppendStored) is walked by ListOffsets from several
// clients at once within the decompression bound, not inflated whole.
func TestListOffsetsDecompressionBomb(t *testing.T) {
	b := startBroker(t, nil)
	cl := v9Client(t, b)
	createTestTopic(t, cl, "bomb", nil)
	l, ok := b.Logs().Log(engine.TopicPartition{Topic: "bomb", Partition: 0})
	if !ok {
		t.Fatal("no log")
	}
	const n = 128 // records of 1 MiB
	now := time.Now().UnixMilli()
	one := record.Build(nil, record.BuildOptions{BaseTimestamp: now, ProducerID: -1, BaseSequence: -1}, []record.Record{{Key: []byte("k"), Value: make([]byte, 1<<20)}})
	rec := one[record.HeaderSize:] // offset delta 0 in every record: the stream is what matters
	var payload bytes.Buffer
	zw, err := zstd.NewWriter(&payload, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := zw.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	batch := record.WithRecords(one, 4, payload.Bytes(), n, n-1)
	// maxTimestamp past every record: a lookup walks the whole stream.
	binary.BigEndian.PutUint64(batch[record.MaxTimestampOffset:], uint64(now+1000))
	record.SetChecksum(batch)
	if _, err := l.AppendStored(batch); err != nil {
		t.Fatal(err)
	}
	t.Logf("stored a %d-byte zstd batch inflating to %d MiB", len(batch), n*len(rec)>>20)
	if err := l.AdvanceHighWatermark(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	allocBefore, sysBefore := ms.TotalAlloc, ms.Sys
	const clients, rounds = 4, 3
	var wg sync.WaitGroup
	errs := make(chan error, clients*rounds)
	for range clients {
		c := validateTestClient(t, b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				req := kmsg.NewPtrListOffsetsRequest()
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = "bomb"
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Timestamp = -3 // max timestamp
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp, err := req.RequestWith(ctx, c)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != 0 {
					errs <- kerr.ErrorForCode(p.ErrorCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	alloc, sys := ms.TotalAlloc-allocBefore, int64(ms.Sys)-int64(sysBefore)
	t.Logf("%d ListOffsets(-3) over the bomb: %d MiB allocated, Sys grew %d MiB", clients*rounds, alloc>>20, sys>>20)
	// Inflating the batch whole would allocate at least 128 MiB per request (1.5 GiB here).
	if alloc > 256<<20 {
		t.Fatalf("%d MiB allocated by %d lookups: decompression is not bounded", alloc>>20, clients*rounds)
	}
}
