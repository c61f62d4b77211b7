package broker

// compression.type against a real broker: batches produced by franz-go (uncompressed and lz4)
// and sarama are stored in the topic's codec (read back from the segment files), consumed back
// byte for byte by franz-go and sarama; producer keeps every codec; the broker key is the
// default, a topic override wins and can change at run time; a recompressed batch past
// max.message.bytes is refused; bad values are refused.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/record"
)

// storedCodecs reads every batch of topic's partition p from its segment files in dir and
// returns the codec of each, checking each batch's CRC.
func storedCodecs(t *testing.T, dir, topic string, p int) []int {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, topic+"-"+strconv.Itoa(p), "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments of %s-%d: %v %v", topic, p, segs, err)
	}
	sort.Strings(segs)
	var codecs []int
	for _, s := range segs {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) >= record.HeaderSize {
			h, err := record.CheckStored(b)
			if err != nil {
				if h.BatchLength == 0 { // preallocated tail
					break
				}
				t.Fatalf("%s: %v", s, err)
			}
			codecs = append(codecs, h.Compression())
			b = b[h.Size():]
		}
	}
	return codecs
}

// produceKgo produces recs to topic with codec and waits for every acknowledgement.
func produceKgo(t *testing.T, addr, topic string, codec kgo.CompressionCodec, recs []testRecord) {
	t.Helper()
	cl := newKgo(t, addr, kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, len(recs))
	for _, r := range recs {
		cl.Produce(ctx, r.kgo(topic), func(_ *kgo.Record, err error) { errs <- err })
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	for range recs {
		if err := <-errs; err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
}

// consumeSarama reads n records of topic (partitions 0..parts-1) with sarama's partition
// consumer at its newest protocol version.
func consumeSarama(t *testing.T, addr, topic string, parts int32, n int) map[int32][]testRecord {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.MaxVersion
	cfg.ClientID = "weir-test"
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cons, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int32][]testRecord{}
	count := 0
	timeout := time.After(20 * time.Second)
	for p := int32(0); p < parts; p++ {
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		hw := pc.HighWaterMarkOffset()
	read:
		for int64(len(got[p])) < hw {
			select {
			case m := <-pc.Messages():
				r := testRecord{Partition: p, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp}
				for _, h := range m.Headers {
					r.Headers = append(r.Headers, kgo.RecordHeader{Key: string(h.Key), Value: h.Value})
				}
				got[p] = append(got[p], r)
				count++
			case err := <-pc.Errors():
				t.Fatalf("sarama %s/%d: %v", topic, p, err)
			case <-timeout:
				t.Errorf("sarama %s/%d: %d of %d messages within 20s", topic, p, len(got[p]), hw)
				break read
			}
		}
		pc.AsyncClose()
	}
	if count != n {
		t.Errorf("sarama read %d records of %s, want %d", count, topic, n)
	}
	return got
}

// TestCompressionTypeRecompresses: topics with compression.type zstd, gzip, lz4 (level 17),
// snappy and uncompressed each get franz-go batches without compression and with lz4, and
// sarama batches with gzip; every batch lands in the topic's codec, a producer topic keeps each
// batch's own codec, and franz-go and sarama consume every record back byte for byte.
func TestCompressionTypeRecompresses(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, map[string]string{"log.dirs": dir})
	addr := b.Addr()
	str := func(s string) *string { return &s }
	topics := []struct {
		name    string
		configs map[string]*string
		want    int // stored codec, -1: each batch's own
	}{
		{"c-zstd", map[string]*string{"compression.type": str("zstd")}, record.CodecZstd},
		{"c-gzip", map[string]*string{"compression.type": str("gzip"), "compression.gzip.level": str("1")}, record.CodecGzip},
		{"c-lz4", map[string]*string{"compression.type": str("lz4"), "compression.lz4.level": str("17")}, record.CodecLZ4},
		{"c-snappy", map[string]*string{"compression.type": str("snappy")}, record.CodecSnappy},
		{"c-none", map[string]*string{"compression.type": str("uncompressed")}, record.CodecNone},
		{"c-producer", nil, -1},
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for ti, tc := range topics {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const parts, n = 2, 120
			createTopic(t, addr, tc.name, parts, tc.configs)
			rng := rand.New(rand.NewPCG(uint64(ti), 7))
			want := makeRecords(rng, tc.name, 3*n, parts, base)
			// franz-go uncompressed, franz-go lz4, sarama gzip: a third each.
			produceKgo(t, addr, tc.name, kgo.NoCompression(), want[:n])
			produceKgo(t, addr, tc.name, kgo.Lz4Compression(), want[n:2*n])
			produceSaramaGzip(t, addr, tc.name, want[2*n:])
			for p := 0; p < parts; p++ {
				codecs := storedCodecs(t, dir, tc.name, p)
				if len(codecs) < 3 {
					t.Fatalf("partition %d: %d batches stored", p, len(codecs))
				}
				for i, c := range codecs {
					if tc.want >= 0 && c != tc.want {
						t.Fatalf("partition %d batch %d stored with codec %d, want %d (all: %v)", p, i, c, tc.want, codecs)
					}
				}
				if tc.want < 0 && (!containsInt(codecs, record.CodecNone) || !containsInt(codecs, record.CodecLZ4) || !containsInt(codecs, record.CodecGzip)) {
					t.Fatalf("producer topic partition %d: codecs %v, want the producers' none, lz4 and gzip", p, codecs)
				}
			}
			checkRecords(t, want, consumeKgo(t, addr, tc.name, len(want), 20*time.Second))
			checkRecords(t, want, consumeSarama(t, addr, tc.name, parts, len(want)))
		})
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// produceSaramaGzip sends recs with sarama's SyncProducer, gzip-compressed, acks all.
func produceSaramaGzip(t *testing.T, addr, topic string, recs []testRecord) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_0_0_0
	cfg.ClientID = "weir-test"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Compression = sarama.CompressionGZIP
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Flush.Messages = 20
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	prod, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var msgs []*sarama.ProducerMessage
	for _, r := range recs {
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
		t.Fatalf("sarama SendMessages to %s: %v", topic, err)
	}
}

// TestCompressionTypeBrokerDefault: the broker's compression.type is the default of every
// topic, a topic override wins, and an override changed at run time (IncrementalAlterConfigs)
// applies to the next batch; DescribeConfigs reports the values and their sources.
func TestCompressionTypeBrokerDefault(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, map[string]string{"log.dirs": dir, "compression.type": "gzip", "compression.gzip.level": "9"})
	addr := b.Addr()
	str := func(s string) *string { return &s }
	createTopic(t, addr, "d-default", 1, nil)
	createTopic(t, addr, "d-override", 1, map[string]*string{"compression.type": str("producer")})
	recs := makeRecords(rand.New(rand.NewPCG(1, 2)), "d", 20, 1, time.Now().Truncate(time.Millisecond))
	for i := range recs { // compressible: franz-go sends a batch uncompressed when compressing does not shrink it
		recs[i].Value = bytes.Repeat([]byte("compressible "), 20+i)
	}
	produceKgo(t, addr, "d-default", kgo.ZstdCompression(), recs)
	produceKgo(t, addr, "d-override", kgo.ZstdCompression(), recs)
	for _, c := range storedCodecs(t, dir, "d-default", 0) {
		if c != record.CodecGzip {
			t.Fatalf("broker default gzip: stored codec %d", c)
		}
	}
	for _, c := range storedCodecs(t, dir, "d-override", 0) {
		if c != record.CodecZstd {
			t.Fatalf("topic override producer: stored codec %d", c)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, addr))
	rc, err := adm.DescribeTopicConfigs(ctx, "d-default", "d-override")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rc {
		for _, c := range r.Configs {
			if c.Key == "compression.type" {
				want, src := "gzip", "STATIC_BROKER_CONFIG"
				if r.Name == "d-override" {
					want, src = "producer", "DYNAMIC_TOPIC_CONFIG"
				}
				if c.Value == nil || *c.Value != want || c.Source.String() != src {
					t.Errorf("%s compression.type = %v (%v), want %s (%s)", r.Name, c.MaybeValue(), c.Source, want, src)
				}
			}
		}
	}

	// Change the override at run time: the next batches are stored in the new codec.
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: str("lz4")}}, "d-override")
	if err == nil {
		_, err = ar.On("d-override", nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	before := len(storedCodecs(t, dir, "d-override", 0))
	produceKgo(t, addr, "d-override", kgo.NoCompression(), recs)
	after := storedCodecs(t, dir, "d-override", 0)
	if len(after) <= before {
		t.Fatal("nothing appended")
	}
	for _, c := range after[before:] {
		if c != record.CodecLZ4 {
			t.Fatalf("after altering to lz4: stored codec %d (%v)", c, after)
		}
	}
	got := consumeKgo(t, addr, "d-override", 2*len(recs), 20*time.Second)
	checkRecords(t, append(append([]testRecord(nil), recs...), recs...), got)

	// The broker key changed at run time: topics without an override follow it; a bad value
	// is refused.
	for _, tc := range []struct {
		value string
		ok    bool
	}{{"snappy", true}, {"brotli", false}} {
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: str(tc.value)}}, b.cfg.NodeID())
		if err == nil {
			for _, r := range resps {
				err = r.Err
			}
		}
		if (err == nil) != tc.ok {
			t.Fatalf("broker compression.type=%s: %v", tc.value, err)
		}
	}
	before = len(storedCodecs(t, dir, "d-default", 0))
	produceKgo(t, addr, "d-default", kgo.ZstdCompression(), recs)
	after = storedCodecs(t, dir, "d-default", 0)
	if len(after) <= before {
		t.Fatal("nothing appended")
	}
	for _, c := range after[before:] {
		if c != record.CodecSnappy {
			t.Fatalf("after the broker key became snappy: stored codec %d (%v)", c, after)
		}
	}
}

// TestCompressionTypeRefusals: a batch that becomes larger than max.message.bytes once
// recompressed (a compressible zstd batch on an uncompressed topic) is refused with
// MESSAGE_TOO_LARGE and nothing is stored; a corrupt batch gets the validator's code; bad
// compression values are refused at topic creation and at broker start.
func TestCompressionTypeRefusals(t *testing.T) {
	b := startBroker(t, nil)
	cl := v9Client(t, b)
	str := func(s string) *string { return &s }
	createTestTopic(t, cl, "r-none", map[string]*string{"compression.type": str("uncompressed"), "max.message.bytes": str("65536")})
	var recs []record.Record
	for range 16 {
		recs = append(recs, record.Record{Value: make([]byte, 8<<10)})
	}
	zs, err := record.BuildCompressed(nil, record.BuildOptions{ProducerID: -1, BaseSequence: -1}, recs, record.CodecZstd)
	if err != nil {
		t.Fatal(err)
	}
	if len(zs) > 65536 {
		t.Fatalf("zstd batch of %d bytes", len(zs))
	}
	resp := rawProduce(t, cl, "r-none", zs)
	if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("recompressed past max.message.bytes: %v", err)
	}
	// The same batch fits once the records do.
	small, _ := record.BuildCompressed(nil, record.BuildOptions{ProducerID: -1, BaseSequence: -1}, recs[:4], record.CodecZstd)
	if resp := rawProduce(t, cl, "r-none", small); resp.ErrorCode != 0 || resp.BaseOffset != 0 {
		t.Fatalf("small batch: code %d offset %d", resp.ErrorCode, resp.BaseOffset)
	}
	// A corrupt lz4 payload on a zstd topic: CORRUPT_MESSAGE, as without recompression.
	createTestTopic(t, cl, "r-zstd", map[string]*string{"compression.type": str("zstd")})
	plain := record.Build(nil, record.BuildOptions{ProducerID: -1, BaseSequence: -1}, recs[:2])
	bad := record.WithRecords(plain, record.CodecLZ4, []byte("definitely not lz4"), 2, 1)
	if resp := rawProduce(t, cl, "r-zstd", bad); !errors.Is(kerr.ErrorForCode(resp.ErrorCode), kerr.CorruptMessage) {
		t.Fatalf("corrupt lz4 batch: code %d", resp.ErrorCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	for _, cfg := range []map[string]*string{
		{"compression.type": str("brotli")},
		{"compression.type": str("ZSTD")},
		{"compression.gzip.level": str("0")},
		{"compression.lz4.level": str("18")},
		{"compression.zstd.level": str("23")},
	} {
		r, err := adm.CreateTopic(ctx, 1, 1, cfg, "r-bad")
		if err == nil {
			err = r.Err
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("create with %v: %v, want INVALID_CONFIG", *firstValue(cfg), err)
		}
	}
	for _, props := range []map[string]string{
		{"compression.type": "brotli"},
		{"compression.zstd.level": "-131073"},
		{"compression.gzip.level": "10"},
	} {
		if _, err := NewConfig(props); err == nil {
			t.Errorf("broker config %v accepted", props)
		}
	}
}

func firstValue(m map[string]*string) *string {
	for k, v := range m {
		s := k + "=" + *v
		return &s
	}
	return nil
}

// TestClusterCompressionFollowersCopyLeader: 2 brokers, RF 2, a topic with compression.type=zstd
// written uncompressed with acks=all: the leaders recompress, the followers store the leaders'
// bytes unchanged (no recompression of their own), so every replica's log is byte-identical
// and every stored batch is zstd.
func TestClusterCompressionFollowersCopyLeader(t *testing.T) {
	c := startCluster(t, 2, nil)
	adm := kadm.NewClient(c.client())
	const topic = "zstd-replicated"
	zstd := "zstd"
	createReplicatedTopic(t, adm, topic, 2, 2, map[string]*string{"compression.type": &zstd})
	c.waitISR(adm, topic, 2, 30*time.Second)
	prod := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 400
	errs := make(chan error, n)
	for i := range n {
		v := bytes.Repeat([]byte(fmt.Sprintf("record %d ", i)), 10)
		prod.Produce(ctx, &kgo.Record{Partition: int32(i % 2), Value: v}, func(_ *kgo.Record, err error) { errs <- err })
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for p := int32(0); p < 2; p++ {
		// acks=all: both replicas hold every batch; compare what both have.
		var logs [2][]byte
		waitFor(t, 10*time.Second, fmt.Sprintf("partition %d on both replicas", p), func() (bool, string) {
			for i, node := range c.nodes {
				logs[i] = logBytes(t, node.dir, topic, p)
			}
			e0, e1 := batchesEnd(logs[0]), batchesEnd(logs[1])
			return e0 == e1 && e0 > 0, fmt.Sprintf("log ends %d and %d", e0, e1)
		})
		end := int64(0)
		for b := logs[0]; len(b) >= record.HeaderSize; {
			h, err := record.CheckStored(b)
			if err != nil {
				break // the preallocated or unwritten tail
			}
			if h.Compression() != record.CodecZstd {
				t.Fatalf("partition %d: batch at %d stored with codec %d", p, h.BaseOffset, h.Compression())
			}
			end += h.Size()
			b = b[h.Size():]
		}
		if !bytes.Equal(logs[0][:end], logs[1][:end]) {
			t.Fatalf("partition %d: the replicas' logs differ", p)
		}
	}
}

// TestCompressionTypeProducerState: a recompressed batch keeps its producer id, epoch and
// sequence, so a retried idempotent batch is recognised (acknowledged with its first offset,
// stored once); under message.timestamp.type=LogAppendTime the recompressed batch is stamped
// and the Produce response carries the time.
func TestCompressionTypeProducerState(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, map[string]string{"log.dirs": dir})
	cl := v9Client(t, b)
	str := func(s string) *string { return &s }
	createTestTopic(t, cl, "p-zstd", map[string]*string{"compression.type": str("zstd"), "message.timestamp.type": str("LogAppendTime")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pidResp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err != nil || pidResp.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %d", err, pidResp.ErrorCode)
	}
	recs := []record.Record{{Key: []byte("k"), Value: []byte("v0")}, {Key: []byte("k"), Value: []byte("v1")}}
	o := record.BuildOptions{ProducerID: pidResp.ProducerID, ProducerEpoch: pidResp.ProducerEpoch, BaseSequence: 0}
	lz, err := record.BuildCompressed(nil, o, recs, record.CodecLZ4)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().UnixMilli()
	first := rawProduce(t, cl, "p-zstd", append([]byte(nil), lz...))
	retry := rawProduce(t, cl, "p-zstd", append([]byte(nil), lz...))
	if first.ErrorCode != 0 || retry.ErrorCode != 0 || first.BaseOffset != 0 || retry.BaseOffset != 0 {
		t.Fatalf("first %d@%d, retry %d@%d: want both acknowledged at 0", first.ErrorCode, first.BaseOffset, retry.ErrorCode, retry.BaseOffset)
	}
	if first.LogAppendTime < before {
		t.Fatalf("log append time %d, want >= %d", first.LogAppendTime, before)
	}
	o.BaseSequence = 2
	next, _ := record.BuildCompressed(nil, o, recs, record.CodecLZ4)
	if r := rawProduce(t, cl, "p-zstd", next); r.ErrorCode != 0 || r.BaseOffset != 2 {
		t.Fatalf("next batch: %d@%d", r.ErrorCode, r.BaseOffset)
	}
	seg := logBytes(t, dir, "p-zstd", 0)
	var hs []record.Header
	for len(seg) >= record.HeaderSize {
		h, err := record.CheckStored(seg)
		if err != nil {
			break
		}
		hs = append(hs, h)
		seg = seg[h.Size():]
	}
	if len(hs) != 2 {
		t.Fatalf("%d batches stored, want 2 (the retry is not stored)", len(hs))
	}
	for i, h := range hs {
		if h.Compression() != record.CodecZstd || !h.LogAppendTime() || h.ProducerID != pidResp.ProducerID ||
			h.ProducerEpoch != pidResp.ProducerEpoch || h.BaseSequence != int32(2*i) || h.MaxTimestamp < before {
			t.Fatalf("batch %d: %+v", i, h)
		}
	}
}

// TestZstdNeedsItsVersions: zstd came with Produce v7 and Fetch v10 (KIP-110). As Kafka does,
// a zstd batch in Produce v3-v6 gets UNSUPPORTED_COMPRESSION_TYPE, and so does a consumer's
// Fetch below v10 on a topic whose compression.type is zstd; newer versions work.
func TestZstdNeedsItsVersions(t *testing.T) {
	b := startBroker(t, nil)
	if codes := wireCreateTopics(t, b, 7, wireTopic("zt", 1, "compression.type", "zstd"), wireTopic("plain", 1)); codes["zt"] != 0 || codes["plain"] != 0 {
		t.Fatalf("create: %v", codes)
	}
	zbatch, err := record.BuildCompressed(nil, record.BuildOptions{ProducerID: -1}, []record.Record{{Value: []byte("z")}}, record.CodecZstd)
	if err != nil {
		t.Fatal(err)
	}
	w := dialWire(t, b.Addr())
	for _, tc := range []struct {
		version int16
		want    int16
	}{{6, kerr.UnsupportedCompressionType.Code}, {7, 0}} {
		resp := wireRoundTrip[*kmsg.ProduceResponse](w, wireProduce(wirePart{topic: "plain", records: zbatch}), tc.version)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Fatalf("zstd batch in Produce v%d: error %d, want %d", tc.version, got, tc.want)
		}
	}
	// One plain batch into each topic (recompressed to zstd in zt).
	for _, topic := range []string{"zt", "plain"} {
		resp := wireRoundTrip[*kmsg.ProduceResponse](w, wireProduce(wirePart{topic: topic, records: wireBatch("a")}), 9)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != 0 {
			t.Fatalf("produce to %s: error %d", topic, got)
		}
	}
	for _, tc := range []struct {
		topic   string
		version int16
		want    int16
	}{{"zt", 9, kerr.UnsupportedCompressionType.Code}, {"zt", 10, 0}, {"plain", 9, 0}} {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = tc.topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := wireRoundTrip[*kmsg.FetchResponse](w, req, tc.version)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != tc.want {
			t.Fatalf("Fetch v%d of %s: error %d, want %d", tc.version, tc.topic, p.ErrorCode, tc.want)
		}
		if tc.want == 0 && len(p.RecordBatches) == 0 {
			t.Fatalf("Fetch v%d of %s: no records", tc.version, tc.topic)
		}
	}
}
