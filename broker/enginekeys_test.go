package broker

// The engine's per-log keys through a real broker and a real client (franz-go): each key is set
// on a topic at creation (or on the broker) and its effect observed on the partition's files or
// in what consumers read.

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

func keysCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func keysCreate(t *testing.T, cl *kgo.Client, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	c := map[string]*string{}
	for k, v := range configs {
		c[k] = kadm.StringPtr(v)
	}
	resp, err := kadm.NewClient(cl).CreateTopic(keysCtx(t), partitions, 1, c, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
}

func keysLog(t *testing.T, b *Broker, topic string, p int32) *engine.Log {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l, ok := b.logs.Log(engine.TopicPartition{Topic: topic, Partition: p}); ok {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log for %s-%d", topic, p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// keysReadAll reads partition 0 of topic from the start to its end offset with a new consumer.
func keysReadAll(t *testing.T, b *Broker, topic string) []*kgo.Record {
	t.Helper()
	ctx := keysCtx(t)
	adm, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for end.Offset > 0 && (len(out) == 0 || out[len(out)-1].Offset < end.Offset-1) {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume %s: %v", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// TestBrokerProducerIDExpiration: producer.id.expiration.ms (a broker key, here with a short
// producer.id.expiration.check.interval.ms): a retried idempotent batch is deduplicated while its
// producer is remembered, and stored again once the producer expired.
func TestBrokerProducerIDExpiration(t *testing.T) {
	b := startBroker(t, map[string]string{"producer.id.expiration.ms": "1000", "producer.id.expiration.check.interval.ms": "50"})
	cl := v9Client(t, b)
	createTestTopic(t, cl, "pid", nil)
	batch := func() []byte {
		return record.Build(nil, record.BuildOptions{BaseTimestamp: time.Now().UnixMilli(), ProducerID: 4242, BaseSequence: 0},
			[]record.Record{{Value: []byte("once")}})
	}
	if rp := rawProduce(t, cl, "pid", batch()); rp.ErrorCode != 0 || rp.BaseOffset != 0 {
		t.Fatalf("first: %+v", rp)
	}
	if rp := rawProduce(t, cl, "pid", batch()); rp.ErrorCode != 0 || rp.BaseOffset != 0 {
		t.Fatalf("retry while remembered: %+v, want the original offset 0", rp)
	}
	time.Sleep(1500 * time.Millisecond) // past the expiration and several checks
	if rp := rawProduce(t, cl, "pid", batch()); rp.ErrorCode != 0 || rp.BaseOffset != 1 {
		t.Fatalf("retry after the expiration: %+v, want stored again at 1", rp)
	}
	if got := len(keysReadAll(t, b, "pid")); got != 2 {
		t.Fatalf("consumer reads %d records, want 2", got)
	}
}

// TestBrokerMaxCompactionLag: a compacted topic with max.compaction.lag.ms is cleaned although its
// dirty ratio can never pass min.cleanable.dirty.ratio=1: its active segment rolls after the lag
// and the cleaner then compacts it (KIP-354).
func TestBrokerMaxCompactionLag(t *testing.T) {
	b := startBroker(t, map[string]string{"log.cleaner.backoff.ms": "50"})
	cl := validateTestClient(t, b, kgo.DefaultProduceTopic("lag"))
	keysCreate(t, cl, "lag", 1, map[string]string{"cleanup.policy": "compact", "max.compaction.lag.ms": "1000", "min.cleanable.dirty.ratio": "1"})
	ctx := keysCtx(t)
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	// This record rolls the active segment (max.compaction.lag.ms bounds segment.ms).
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("z")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if n := len(keysLog(t, b, "lag", 0).Segments()); n != 2 {
		t.Fatalf("%d segments: the active segment did not roll after max.compaction.lag.ms", n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		recs := keysReadAll(t, b, "lag")
		if len(recs) == 2 && string(recs[0].Value) == "e" && recs[0].Offset == 4 && string(recs[1].Value) == "z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not compacted 20 s after max.compaction.lag.ms: %d records", len(recs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBrokerSegmentJitter: with segment.jitter.ms each partition's active segment rolls at a
// random point before segment.ms: of 8 partitions written for 2.5 s with segment.ms=3000 and
// segment.jitter.ms=3000, some roll (each with probability 5/6), which none would without jitter.
func TestBrokerSegmentJitter(t *testing.T) {
	b := startBroker(t, nil)
	cl := validateTestClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	keysCreate(t, cl, "jit", 8, map[string]string{"segment.ms": "3000", "segment.jitter.ms": "3000"})
	keysCreate(t, cl, "nojit", 8, map[string]string{"segment.ms": "3000"})
	ctx := keysCtx(t)
	start := time.Now()
	for time.Since(start) < 2500*time.Millisecond {
		for p := int32(0); p < 8; p++ {
			for _, topic := range []string{"jit", "nojit"} {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	rolled := func(topic string) int {
		n := 0
		for p := int32(0); p < 8; p++ {
			if len(keysLog(t, b, topic, p).Segments()) > 1 {
				n++
			}
		}
		return n
	}
	if n := rolled("nojit"); n != 0 {
		t.Fatalf("%d partitions without jitter rolled before segment.ms", n)
	}
	if n := rolled("jit"); n == 0 {
		t.Fatal("no partition with segment.jitter.ms=3000 rolled within 2.5 s of segment.ms=3000")
	}
}

// TestBrokerLogRollJitterHours: log.roll.jitter.hours gives log.roll.jitter.ms when it is unset,
// and the topics' segment.jitter.ms follows it.
func TestBrokerLogRollJitterHours(t *testing.T) {
	b := startBroker(t, map[string]string{"log.roll.jitter.hours": "2"})
	cl := validateTestClient(t, b)
	keysCreate(t, cl, "jh", 1, nil)
	if got := keysLog(t, b, "jh", 0).Config().SegmentJitterMs; got != 2*3600*1000 {
		t.Fatalf("segment.jitter.ms %d, want 2 h from log.roll.jitter.hours", got)
	}
}

// TestBrokerPreallocate: preallocate=true makes the active segment's .log segment.bytes long;
// consumers read only the records; a clean shutdown trims it to the records' bytes.
func TestBrokerPreallocate(t *testing.T) {
	// The broker keys too: a partition's first segment is made when its log is created, which
	// may come before the topic's configs reach the broker (they are applied right after).
	b := startBroker(t, map[string]string{"log.preallocate": "true", "log.segment.bytes": "1048576"})
	cl := validateTestClient(t, b, kgo.DefaultProduceTopic("pre"))
	keysCreate(t, cl, "pre", 1, map[string]string{"preallocate": "true", "segment.bytes": "1048576"})
	ctx := keysCtx(t)
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("pre")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	l := keysLog(t, b, "pre", 0)
	path := l.Segments()[0].LogPath()
	st, err := os.Stat(path)
	if err != nil || st.Size() != 1048576 {
		t.Fatalf("active .log: %v bytes (%v), want 1048576", st.Size(), err)
	}
	if recs := keysReadAll(t, b, "pre"); len(recs) != 3 {
		t.Fatalf("consumer reads %d records, want 3", len(recs))
	}
	logical := l.Size()
	cl.Close()
	if err := b.Shutdown(keysCtx(t)); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != logical {
		t.Fatalf("after a clean shutdown the .log is %d bytes (%v), want %d", st.Size(), err, logical)
	}
}

// TestBrokerFileDeleteDelay: segments dropped by DeleteRecords are renamed .deleted at once and
// removed after file.delete.delay.ms.
func TestBrokerFileDeleteDelay(t *testing.T) {
	b := startBroker(t, nil)
	cl := validateTestClient(t, b, kgo.DefaultProduceTopic("dd"))
	keysCreate(t, cl, "dd", 1, map[string]string{"file.delete.delay.ms": "1500", "internal.segment.bytes": "1024"})
	ctx := keysCtx(t)
	for i := 0; i < 20; i++ {
		v := make([]byte, 300) // incompressible: the client compresses batches
		for j := range v {
			v[j] = byte(j*7 + i*13 + j*j)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	l := keysLog(t, b, "dd", 0)
	if len(l.Segments()) < 4 {
		t.Fatalf("%d segments, want several", len(l.Segments()))
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "dd", Partition: 0, At: 15})
	resp, err := kadm.NewClient(cl).DeleteRecords(ctx, offs)
	if err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}
	deleted := func() int {
		entries, err := osReadDir(l.Dir())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			if strings.HasSuffix(e, segment.DeletedSuffix) {
				n++
			}
		}
		return n
	}
	if n := deleted(); n == 0 {
		t.Fatal("no .deleted files right after DeleteRecords")
	}
	time.Sleep(500 * time.Millisecond)
	if n := deleted(); n == 0 {
		t.Fatal(".deleted files removed before file.delete.delay.ms")
	}
	deadline := time.Now().Add(10 * time.Second)
	for deleted() > 0 {
		if time.Now().After(deadline) {
			t.Fatal(".deleted files still there 10 s later")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if recs := keysReadAll(t, b, "dd"); len(recs) != 5 || recs[0].Offset != 15 {
		t.Fatalf("after DeleteRecords: %d records", len(recs))
	}
}

func osReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, err
}

// lastTimeIndexEntry reads the last entry of a .timeindex file.
func lastTimeIndexEntry(t *testing.T, path string) (ts int64, rel int32, n int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n = len(data) / 12
	if n == 0 {
		return -1, 0, 0
	}
	e := data[len(data)-12:]
	return int64(binary.BigEndian.Uint64(e)), int32(binary.BigEndian.Uint32(e[8:])), n
}

// TestBrokerTimeIndexAtShutdown: after a clean shutdown the active segment's .timeindex ends with
// (max timestamp, its offset), for a topic and for the __consumer_offsets partition a group
// committed to, as Kafka's LogSegment.close leaves it.
func TestBrokerTimeIndexAtShutdown(t *testing.T) {
	b := startBroker(t, nil)
	cl := validateTestClient(t, b, kgo.DefaultProduceTopic("ti"))
	keysCreate(t, cl, "ti", 1, nil)
	ctx := keysCtx(t)
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for i := 0; i < 5; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v"), Timestamp: base.Add(time.Duration(i) * time.Second)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "ti", Partition: 0, At: 3})
	if resp, err := adm.CommitOffsets(ctx, "ti-group", offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	type seg struct {
		path string
		base int64
	}
	var segs []seg
	for tp, l := range b.logs.Logs() {
		if tp.Topic == "ti" || (tp.Topic == "__consumer_offsets" && l.LogEndOffset() > 0) {
			s := l.Segments()[len(l.Segments())-1]
			segs = append(segs, seg{filepath.Join(l.Dir(), segment.FileName(s.BaseOffset(), segment.TimeIndexSuffix)), s.BaseOffset()})
		}
	}
	if len(segs) != 2 {
		t.Fatalf("found %d logs (want ti-0 and one __consumer_offsets partition)", len(segs))
	}
	type want struct{ ts, off int64 }
	wants := map[string]want{}
	for _, s := range segs {
		l := b.logs.Logs()[parseTP(t, filepath.Base(filepath.Dir(s.path)))]
		wants[s.path] = want{l.Segments()[len(l.Segments())-1].MaxTimestamp(), l.LogEndOffset() - 1}
	}
	cl.Close()
	if err := b.Shutdown(keysCtx(t)); err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		ts, rel, n := lastTimeIndexEntry(t, s.path)
		w := wants[s.path]
		if n == 0 || ts != w.ts || s.base+int64(rel) > w.off {
			t.Fatalf("%s: %d entries, last (%d, %d); want the max timestamp %d", s.path, n, ts, s.base+int64(rel), w.ts)
		}
	}
	if w := wants[segs[0].path]; strings.Contains(segs[0].path, "ti-0") && w.ts != base.Add(4*time.Second).UnixMilli() {
		t.Fatalf("ti-0 max timestamp %d, want %d", w.ts, base.Add(4*time.Second).UnixMilli())
	}
}

func parseTP(t *testing.T, name string) engine.TopicPartition {
	t.Helper()
	tp, ok := engine.ParsePartitionDir(name)
	if !ok {
		t.Fatalf("not a partition dir: %s", name)
	}
	return tp
}

// TestBrokerLogAppendTimeBrokerKey: log.message.timestamp.type=LogAppendTime on the broker stamps
// batches of topics without an override (message.timestamp.type is read at both levels).
func TestBrokerLogAppendTimeBrokerKey(t *testing.T) {
	b := startBroker(t, map[string]string{"log.message.timestamp.type": "LogAppendTime"})
	cl := v9Client(t, b)
	createTestTopic(t, cl, "lat-broker", nil)
	before := time.Now().UnixMilli()
	batch := record.Build(nil, record.BuildOptions{BaseTimestamp: 946684800000, ProducerID: -1, BaseSequence: -1}, []record.Record{{Value: []byte("v")}})
	if rp := rawProduce(t, cl, "lat-broker", batch); rp.ErrorCode != 0 || rp.LogAppendTime < before {
		t.Fatalf("broker-level LogAppendTime: error %d, log_append_time %d (before %d)", rp.ErrorCode, rp.LogAppendTime, before)
	}
	createTestTopic(t, cl, "ct-override", map[string]*string{"message.timestamp.type": kadm.StringPtr("CreateTime")})
	if rp := rawProduce(t, cl, "ct-override", batch); rp.ErrorCode != 0 || rp.LogAppendTime != -1 {
		t.Fatalf("topic override CreateTime: error %d, log_append_time %d", rp.ErrorCode, rp.LogAppendTime)
	}
}

// TestBrokerEngineKeysDynamic: the broker keys of the engine's per-log settings change at run
// time (IncrementalAlterConfigs on the broker) and reach the open logs, as Kafka's do.
func TestBrokerEngineKeysDynamic(t *testing.T) {
	b := startBroker(t, nil)
	cl := validateTestClient(t, b)
	keysCreate(t, cl, "dyn", 1, nil)
	l := keysLog(t, b, "dyn", 0)
	set := map[string]string{
		"producer.id.expiration.ms":         "5000",
		"log.roll.jitter.ms":                "10",
		"log.preallocate":                   "true",
		"log.segment.delete.delay.ms":       "7",
		"log.cleaner.max.compaction.lag.ms": "9",
		"log.cleaner.min.compaction.lag.ms": "3",
	}
	var alters []kadm.AlterConfig
	for k, v := range set {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(v)})
	}
	resp, err := kadm.NewClient(cl).AlterBrokerConfigs(keysCtx(t), alters)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp {
		if r.Err != nil {
			t.Fatalf("alter: %v %s", r.Err, r.ErrMessage)
		}
	}
	c := l.Config()
	if c.ProducerIDExpirationMs != 5000 || c.SegmentJitterMs != 10 || !c.Preallocate || c.FileDeleteDelayMs != 7 ||
		c.MaxCompactionLagMs != 9 || c.MinCompactionLagMs != 3 {
		t.Fatalf("log config after the change: %+v", c)
	}
}

// TestBrokerEngineKeysRanges: out-of-range values of the engine keys are refused (INVALID_CONFIG),
// with Kafka's bounds: max.compaction.lag.ms at least 1, the jitter, delays and min lag not negative.
func TestBrokerEngineKeysRanges(t *testing.T) {
	b := startBroker(t, nil)
	cl := validateTestClient(t, b)
	for k, v := range map[string]string{"max.compaction.lag.ms": "0", "segment.jitter.ms": "-1", "file.delete.delay.ms": "-5", "min.compaction.lag.ms": "-1"} {
		resp, err := kadm.NewClient(cl).CreateTopic(keysCtx(t), 1, 1, map[string]*string{k: kadm.StringPtr(v)}, "bad-"+strings.ReplaceAll(k, ".", "-"))
		if err == nil && resp.Err == nil {
			t.Fatalf("%s=%s accepted", k, v)
		}
	}
	if _, err := NewConfig(map[string]string{"producer.id.expiration.ms": "0"}); err == nil {
		t.Fatal("producer.id.expiration.ms=0 accepted at start")
	}
}
