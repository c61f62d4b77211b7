package engine

import (
	"bytes"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

// kafkaLogDir is a log dir written by Apache Kafka 4.4.0 (one broker, log.index.interval.bytes=1024,
// topic kfix, 800 records of 100 bytes from ProducerPerformance with acks=all and the idempotent
// producer), copied after a clean shutdown.
const kafkaLogDir = "testdata/kafka-4.4.0-logdir"

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func kafkaCompatConfig() Config {
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 1024
	return cfg
}

// TestServesKafkaWrittenLog opens a log dir Apache Kafka wrote, after its clean shutdown, and
// reads every record back through Kafka's own indexes.
func TestServesKafkaWrittenLog(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, kafkaLogDir, dir)
	m, err := OpenManager(ManagerConfig{Dirs: []string{dir}, Default: kafkaCompatConfig(), RetentionCheckInterval: -1, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tp := TopicPartition{Topic: "kfix", Partition: 0}
	l, ok := m.Log(tp)
	if !ok {
		t.Fatal("kfix-0 not loaded")
	}
	if l.LogEndOffset() != 800 || l.LogStartOffset() != 0 {
		t.Fatalf("log end %d start %d, want 800 and 0", l.LogEndOffset(), l.LogStartOffset())
	}
	id, ok := m.TopicID(tp)
	if want, _ := base64.RawURLEncoding.DecodeString("RLZdbnlFSUu1YFGIcaF22g"); !ok || !bytes.Equal(id[:], want) {
		t.Fatalf("topic id %x, want %x", id, want)
	}
	hs := readAll(t, l, 0, ReadUpToHighWatermark)
	var records int64
	for i, h := range hs {
		if i > 0 && h.BaseOffset != hs[i-1].NextOffset() {
			t.Fatalf("batch %d at %d after %d", i, h.BaseOffset, hs[i-1].NextOffset())
		}
		if h.ProducerID < 0 {
			t.Fatalf("batch %d has no producer id; the fixture came from an idempotent producer", i)
		}
		records += int64(h.RecordCount)
	}
	if records != 800 {
		t.Fatalf("read %d records, want 800", records)
	}
	// Every offset reads back the batch holding it, through Kafka's .index.
	for o := int64(0); o < 800; o += 7 {
		got := readAll(t, l, o, ReadUpToHighWatermark)
		if len(got) == 0 || got[0].BaseOffset > o || got[0].LastOffset() < o {
			t.Fatalf("read at %d returned a batch that does not hold it", o)
		}
	}
	// Appending continues the log.
	info, err := l.Append(testBatch(3, 10, 1))
	if err != nil || info.BaseOffset != 800 {
		t.Fatalf("append after Kafka's log: base %d err %v", info.BaseOffset, err)
	}
}

// TestRebuiltIndexesMatchKafka recovers Kafka's segment as after a crash (indexes rebuilt from the
// .log) and checks that weir rebuilds Kafka's .index and .timeindex byte for byte.
func TestRebuiltIndexesMatchKafka(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, kafkaLogDir, dir)
	part := filepath.Join(dir, "kfix-0")
	wantIndex := readFile(t, filepath.Join(part, segment.FileName(0, segment.IndexSuffix)))
	wantTime := readFile(t, filepath.Join(part, segment.FileName(0, segment.TimeIndexSuffix)))
	for _, suffix := range []string{segment.IndexSuffix, segment.TimeIndexSuffix} {
		if err := os.Remove(filepath.Join(part, segment.FileName(0, suffix))); err != nil {
			t.Fatal(err)
		}
	}
	l, err := OpenLog(OpenOptions{Dir: part, Topic: "kfix", Config: kafkaCompatConfig(), CleanShutdown: false})
	if err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 800 {
		t.Fatalf("recovered log end %d, want 800", l.LogEndOffset())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(part, segment.FileName(0, segment.IndexSuffix))); !bytes.Equal(got, wantIndex) {
		t.Fatalf("rebuilt .index (%d bytes) differs from Kafka's (%d bytes)", len(got), len(wantIndex))
	}
	if got := readFile(t, filepath.Join(part, segment.FileName(0, segment.TimeIndexSuffix))); !bytes.Equal(got, wantTime) {
		t.Fatalf("rebuilt .timeindex (%d bytes) differs from Kafka's (%d bytes)", len(got), len(wantTime))
	}
}

// TestKafkaDumpLogReadsWeirSegments runs Apache Kafka's own DumpLogSegments over segments weir
// wrote. It needs the Kafka jars: WEIR_KAFKA_LIBS=<folder of jars> (../shared/anchors/kafka/setup.sh
// prints it; .ci/run sets it when Maven Central answers).
func TestKafkaDumpLogReadsWeirSegments(t *testing.T) {
	libs := os.Getenv("WEIR_KAFKA_LIBS")
	if libs == "" {
		t.Skip("WEIR_KAFKA_LIBS not set: Kafka's DumpLogSegments is not available")
	}
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 32 << 10
	l, err := OpenLog(OpenOptions{Dir: dir, Topic: "t", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 150; i++ {
		recs := make([]record.Record, 1+i%5)
		for j := range recs {
			recs[j] = record.Record{Key: []byte("k"), Value: bytes.Repeat([]byte{byte(i)}, 40+i%200), TimestampDelta: int64(j)}
		}
		if _, err := l.Append(record.Build(nil, record.BuildOptions{BaseTimestamp: 1700000000000 + int64(i), ProducerID: -1, BaseSequence: -1}, recs)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var files []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") || strings.HasSuffix(e.Name(), ".index") || strings.HasSuffix(e.Name(), ".timeindex") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) < 6 {
		t.Fatalf("expected several segments, have %d files", len(files))
	}
	run := func(args ...string) string {
		cmd := exec.Command("java", append([]string{"-cp", libs + "/*", "org.apache.kafka.tools.DumpLogSegments"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("DumpLogSegments %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run("--deep-iteration", "--files", strings.Join(files, ","))
	if strings.Contains(out, "isvalid: false") || strings.Count(out, "isvalid: true") != 150 {
		t.Fatalf("DumpLogSegments did not find 150 valid batches:\n%s", out)
	}
	for _, bad := range []string{"Mismatches", "failed sanity", "Exception", "corrupt"} {
		if strings.Contains(out, bad) {
			t.Fatalf("DumpLogSegments reports %q:\n%s", bad, out)
		}
	}
	out = run("--verify-index-only", "--index-sanity-check", "--files", strings.Join(files, ","))
	for _, bad := range []string{"Mismatches", "failed sanity", "Exception"} {
		if strings.Contains(out, bad) {
			t.Fatalf("DumpLogSegments index check reports %q:\n%s", bad, out)
		}
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKafkaDumpLogReadsWeirTxnIndex runs Kafka's DumpLogSegments over a segment with
// transactional batches and markers, its .txnindex and a producer snapshot holding an ongoing
// transaction (WEIR_KAFKA_LIBS as above).
func TestKafkaDumpLogReadsWeirTxnIndex(t *testing.T) {
	libs := os.Getenv("WEIR_KAFKA_LIBS")
	if libs == "" {
		t.Skip("WEIR_KAFKA_LIBS not set: Kafka's DumpLogSegments is not available")
	}
	dir := filepath.Join(t.TempDir(), "t-0")
	l, err := OpenLog(OpenOptions{Dir: dir, Topic: "t", Config: DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	txn := func(pid int64, seq int32) {
		b := record.Build(nil, record.BuildOptions{BaseTimestamp: time.Now().UnixMilli(), ProducerID: pid, ProducerEpoch: 3, BaseSequence: seq,
			Attributes: record.AttrTransactional}, []record.Record{{Key: []byte("k"), Value: []byte("v")}, {Key: []byte("k"), Value: []byte("w")}})
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	txn(7, 0)                                                     // 0-1
	txn(8, 0)                                                     // 2-3
	if _, err := l.AppendMarker(7, 3, 11, false, 0); err != nil { // 4: abort of 7, 8 still open
		t.Fatal(err)
	}
	if _, err := l.AppendMarker(8, 3, 11, true, 0); err != nil { // 5
		t.Fatal(err)
	}
	txn(9, 0) // 6-7: left open in the snapshot
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		cmd := exec.Command("java", append([]string{"-cp", libs + "/*", "org.apache.kafka.tools.DumpLogSegments"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("DumpLogSegments %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	base := filepath.Join(dir, segment.FileName(0, ""))
	out := run("--deep-iteration", "--files", base+segment.LogSuffix)
	for _, want := range []string{"endTxnMarker: ABORT coordinatorEpoch: 11", "endTxnMarker: COMMIT coordinatorEpoch: 11", "isTransactional: true"} {
		if !strings.Contains(out, want) {
			t.Fatalf("DumpLogSegments .log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "isvalid: false") || strings.Contains(out, "Exception") {
		t.Fatalf("DumpLogSegments .log:\n%s", out)
	}
	out = run("--files", base+segment.TxnIndexSuffix)
	if !strings.Contains(out, "version: 0 producerId: 7 firstOffset: 0 lastOffset: 4 lastStableOffset: 2") {
		t.Fatalf("DumpLogSegments .txnindex:\n%s", out)
	}
	out = run("--files", filepath.Join(dir, segment.FileName(8, SnapshotSuffix)))
	if !strings.Contains(out, "producerId: 9") || !strings.Contains(out, "currentTxnFirstOffset: OptionalLong[6]") || !strings.Contains(out, "coordinatorEpoch: 11") {
		t.Fatalf("DumpLogSegments .snapshot:\n%s", out)
	}
}
