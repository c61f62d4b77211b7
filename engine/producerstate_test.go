package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
)

func TestKafkaSnapshotRoundTrip(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(kafkaLogDir, "kfix-0", "00000000000000000800.snapshot"))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := decodeSnapshot(want)
	if err != nil {
		t.Fatal(err)
	}
	e := ps.producers[0]
	if e == nil || e.epoch != 0 || e.last().lastSeq != 799 || e.last().lastOffset != 799 || e.last().firstOffset != 793 {
		t.Fatalf("decoded Kafka snapshot: %+v", e)
	}
	if got := ps.encodeSnapshot(); !bytes.Equal(got, want) {
		t.Fatalf("re-encoded snapshot differs from Kafka's:\n got %x\nwant %x", got, want)
	}
	bad := append([]byte(nil), want...)
	bad[len(bad)-1] ^= 1
	if _, err := decodeSnapshot(bad); err == nil {
		t.Fatal("corrupt snapshot accepted")
	}
}

// idemBatch is an idempotent batch stamped now (older producers would be expired at open,
// producer.id.expiration.ms).
func idemBatch(pid int64, epoch int16, seq int32, n int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte("v")}
	}
	return record.Build(nil, record.BuildOptions{BaseTimestamp: time.Now().UnixMilli(), ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, recs)
}

func TestIdempotentProducer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 600 // a roll every few batches: snapshots are taken at rolls
	open := func(clean bool) *Log {
		l, err := OpenLog(OpenOptions{Dir: dir, Topic: "t", Config: cfg, CleanShutdown: clean})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open(true)
	first, err := l.Append(idemBatch(7, 0, 0, 3))
	if err != nil || first.Duplicate {
		t.Fatal(err)
	}
	// A retry of the same batch is not stored again and answers the original offsets.
	dup, err := l.Append(idemBatch(7, 0, 0, 3))
	if err != nil || !dup.Duplicate || dup.BaseOffset != first.BaseOffset || dup.LastOffset != first.LastOffset {
		t.Fatalf("retry: %+v %v", dup, err)
	}
	if l.LogEndOffset() != 3 {
		t.Fatalf("log end %d after a duplicate", l.LogEndOffset())
	}
	// A gap is refused.
	if _, err := l.Append(idemBatch(7, 0, 5, 1)); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("gap: %v", err)
	}
	var lastInfo AppendInfo
	seq := int32(3)
	for i := 0; i < 20; i++ {
		if lastInfo, err = l.Append(idemBatch(7, 0, seq, 2)); err != nil {
			t.Fatal(err)
		}
		seq += 2
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("expected rolls, have %d segments", len(l.Segments()))
	}
	// A new epoch must start at 0; then the old epoch is fenced.
	if _, err := l.Append(idemBatch(7, 1, 4, 1)); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("new epoch not at 0: %v", err)
	}
	// An unknown producer is accepted at any sequence.
	if _, err := l.Append(idemBatch(8, 0, 42, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	// Clean restart: the snapshot at the log end still deduplicates.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(true)
	if d, err := l.Append(idemBatch(7, 0, seq-2, 2)); err != nil || !d.Duplicate || d.BaseOffset != lastInfo.BaseOffset {
		t.Fatalf("after clean restart: %+v %v", d, err)
	}
	if _, err := l.Append(idemBatch(7, 0, seq+1, 1)); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("gap after restart: %v", err)
	}
	// Unclean restart without the log-end snapshot: state comes from a roll snapshot plus replay.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(snapshotPath(dir, l.LogEndOffset()))
	l = open(false)
	defer l.Close()
	if d, err := l.Append(idemBatch(7, 0, seq-2, 2)); err != nil || !d.Duplicate || d.BaseOffset != lastInfo.BaseOffset {
		t.Fatalf("after unclean restart: %+v %v", d, err)
	}
	if _, err := l.Append(idemBatch(7, 1, 0, 1)); err != nil {
		t.Fatalf("epoch bump: %v", err)
	}
	if _, err := l.Append(idemBatch(7, 0, seq, 1)); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("fenced epoch: %v", err)
	}
}
