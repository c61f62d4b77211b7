package engine

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// Manager tests: partitions spread over two log dirs, Kafka's checkpoint and partition.metadata
// files byte for byte, a clean reopen that scans nothing, a crash reopen that scans only from the
// recovery point, DeleteLog, and the checkpoint and directory-name parsers.

func mgrConfig(dirs ...string) ManagerConfig {
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 128
	cfg.RetentionMs = -1
	return ManagerConfig{Dirs: dirs, Default: cfg, RetentionCheckInterval: -1, CheckpointInterval: -1}
}

func mgrOpen(t *testing.T, cfg ManagerConfig) *Manager {
	t.Helper()
	m, err := OpenManager(cfg)
	if err != nil {
		t.Fatalf("open manager: %v", err)
	}
	return m
}

func mgrLog(t *testing.T, m *Manager, tp TopicPartition) *Log {
	t.Helper()
	l, ok := m.Log(tp)
	if !ok {
		t.Fatalf("no log for %s", tp)
	}
	return l
}

// mgrAppend appends batches of n records each; it returns every batch's AppendInfo.
func mgrAppend(t *testing.T, l *Log, n int, batches int) []AppendInfo {
	t.Helper()
	var out []AppendInfo
	for i := 0; i < batches; i++ {
		recs := make([]record.Record, n)
		for j := range recs {
			recs[j] = record.Record{Key: []byte("k"), Value: []byte(strings.Repeat("payload-", 8))}
		}
		info, err := l.Append(record.Build(nil, record.BuildOptions{BaseTimestamp: 1_700_000_000_000 + int64(i), ProducerID: -1, BaseSequence: -1}, recs))
		if err != nil {
			t.Fatalf("append to %s: %v", l.Dir(), err)
		}
		out = append(out, info)
	}
	if err := l.SetHighWatermark(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	return out
}

func mgrFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mgrExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// mgrCorrupt flips one byte of a batch's record payload (CRC-covered) in a segment file.
func mgrCorrupt(t *testing.T, dir string, info AppendInfo) {
	t.Helper()
	path := filepath.Join(dir, segment.FileName(info.SegmentBase, segment.LogSuffix))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := info.Position + record.HeaderSize + 20
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// mgrBatchCRCOK reads the batch at offset and reports whether its CRC still matches.
func mgrBatchCRCOK(t *testing.T, l *Log, offset int64) bool {
	t.Helper()
	sl, err := l.Read(offset, 1, ReadUpToLogEnd)
	if err != nil {
		t.Fatalf("read %d: %v", offset, err)
	}
	b := orcSliceBytes(t, sl)
	h, err := record.ParseHeader(b)
	if err != nil || h.BaseOffset > offset || h.LastOffset() < offset {
		t.Fatalf("read %d: batch [%d, %d] (%v)", offset, h.BaseOffset, h.LastOffset(), err)
	}
	return record.Checksum(b[:h.Size()]) == h.CRC
}

func TestManagerFilesAndCleanReopen(t *testing.T) {
	root := t.TempDir()
	d0, d1 := filepath.Join(root, "d0"), filepath.Join(root, "d1")
	cfg := mgrConfig(d0, d1)
	m := mgrOpen(t, cfg)

	ordersID := [16]byte{0xfb, 0xff, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0xfe}
	dottedID := [16]byte{15: 1}
	tps := []TopicPartition{{"orders", 0}, {"orders", 1}, {"orders", 2}, {"my.topic-v2", 0}}
	wantDir := []string{d0, d1, d0, d1} // the dir holding fewest partitions, the first on a tie
	for i, tp := range tps {
		id := ordersID
		if tp.Topic == "my.topic-v2" {
			id = dottedID
		}
		l, err := m.CreateLog(tp, id)
		if err != nil {
			t.Fatal(err)
		}
		if got := filepath.Dir(l.Dir()); got != wantDir[i] {
			t.Fatalf("%s created in %s, want %s", tp, got, wantDir[i])
		}
	}
	// orders-0: 3 batches of 2 (end 6), log start moved to 2; orders-1: 6 segments of 2 batches
	// of 5 (end 60); orders-2: empty; my.topic-v2-0: 4 batches of 1 (end 4).
	mgrAppend(t, mgrLog(t, m, tps[0]), 2, 3)
	if _, err := mgrLog(t, m, tps[0]).DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	o1 := mgrLog(t, m, tps[1])
	var infos []AppendInfo
	for i := 0; i < 6; i++ {
		infos = append(infos, mgrAppend(t, o1, 5, 2)...)
		if i < 5 {
			if err := o1.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	mgrAppend(t, mgrLog(t, m, tps[3]), 1, 4)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	for _, d := range []string{d0, d1} {
		if got := mgrFile(t, filepath.Join(d, CleanShutdownFile)); got != `{"version":0,"brokerEpoch":-1}` {
			t.Fatalf("%s clean shutdown marker %q", d, got)
		}
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(d0, RecoveryPointCheckpointFile), "0\n2\norders 0 6\norders 2 0\n"},
		{filepath.Join(d0, LogStartOffsetCheckpointFile), "0\n2\norders 0 2\norders 2 0\n"},
		{filepath.Join(d1, RecoveryPointCheckpointFile), "0\n2\nmy.topic-v2 0 4\norders 1 60\n"},
		{filepath.Join(d1, LogStartOffsetCheckpointFile), "0\n2\nmy.topic-v2 0 0\norders 1 0\n"},
		{filepath.Join(d0, "orders-0", PartitionMetadataFile), "version: 0\ntopic_id: -_8BAgMEBQYHCAkKCwwN_g\n"},
		{filepath.Join(d1, "my.topic-v2-0", PartitionMetadataFile), "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"},
	} {
		if got := mgrFile(t, c.path); got != c.want {
			t.Errorf("%s:\n%q\nwant\n%q", c.path, got, c.want)
		}
	}
	if got := base64.RawURLEncoding.EncodeToString(ordersID[:]); got != "-_8BAgMEBQYHCAkKCwwN_g" {
		t.Fatalf("topic id encoding %q", got) // URL-safe alphabet, no padding
	}

	// Corrupt a record in the middle of orders-1's first (sealed) segment. A clean open reads
	// nothing of it: the corrupt batch is still served, nothing is truncated.
	victim := infos[1] // offsets 5-9 in segment 0
	mgrCorrupt(t, filepath.Join(d1, "orders-1"), victim)
	m = mgrOpen(t, cfg)
	if mgrExists(filepath.Join(d0, CleanShutdownFile)) || mgrExists(filepath.Join(d1, CleanShutdownFile)) {
		t.Fatal("the clean shutdown marker survived the open: a crash now would pass for clean")
	}
	for i, tp := range tps {
		l := mgrLog(t, m, tp)
		wantEnd := []int64{6, 60, 0, 4}[i]
		wantStart := []int64{2, 0, 0, 0}[i]
		if l.LogEndOffset() != wantEnd || l.LogStartOffset() != wantStart {
			t.Fatalf("%s reopened with log [%d, %d), want [%d, %d)", tp, l.LogStartOffset(), l.LogEndOffset(), wantStart, wantEnd)
		}
		if filepath.Dir(l.Dir()) != wantDir[i] {
			t.Fatalf("%s reopened from %s", tp, l.Dir())
		}
	}
	if id, ok := m.TopicID(tps[0]); !ok || id != ordersID {
		t.Fatalf("topic id of orders-0: %x %v", id, ok)
	}
	if id, ok := m.TopicID(tps[3]); !ok || id != dottedID {
		t.Fatalf("topic id of my.topic-v2-0: %x %v", id, ok)
	}
	o1 = mgrLog(t, m, tps[1])
	if mgrBatchCRCOK(t, o1, victim.BaseOffset) {
		t.Fatal("the corruption is gone: was the segment rewritten?")
	}
	if len(o1.Segments()) != 6 {
		t.Fatalf("%d segments after a clean open, want 6", len(o1.Segments()))
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// Without the marker (a crash) and without a recovery point (no checkpoint), every segment
	// is recovered: the log is truncated at the corrupt batch and the later segments deleted.
	if err := os.Remove(filepath.Join(d1, CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(d1, RecoveryPointCheckpointFile)); err != nil {
		t.Fatal(err)
	}
	m = mgrOpen(t, cfg)
	defer m.Close()
	o1 = mgrLog(t, m, tps[1])
	if o1.LogEndOffset() != victim.BaseOffset || len(o1.Segments()) != 1 {
		t.Fatalf("unclean open: log end %d with %d segments, want %d with 1", o1.LogEndOffset(), len(o1.Segments()), victim.BaseOffset)
	}
	if got := retFileBases(t, o1); len(got) != 1 || got[0] != 0 {
		t.Fatalf("segment files after recovery: %v", got)
	}
	// The other dir was shut down cleanly and is untouched.
	if l := mgrLog(t, m, tps[0]); l.LogEndOffset() != 6 || l.LogStartOffset() != 2 {
		t.Fatalf("orders-0: [%d, %d)", l.LogStartOffset(), l.LogEndOffset())
	}
}

// TestManagerCrashRecoversFromRecoveryPoint: after a crash (no marker) only the segments from the
// one holding the checkpointed recovery point on are scanned: a corruption below it stays
// unnoticed, one above it truncates the log there.
func TestManagerCrashRecoversFromRecoveryPoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d0")
	cfg := mgrConfig(dir)
	m := mgrOpen(t, cfg)
	tp := TopicPartition{"events", 3}
	l, err := m.CreateLog(tp, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	var segs [][]AppendInfo // 4 segments of 3 batches of 4 records: bases 0, 12, 24, 36
	for i := 0; i < 4; i++ {
		segs = append(segs, mgrAppend(t, l, 4, 3))
		if i < 3 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// The state a crash leaves: no marker, a recovery point checkpointed earlier (offset 14, in
	// segment 12). Corrupt segment 0 (below it) and the middle batch of segment 24 (above it).
	if err := os.Remove(filepath.Join(dir, CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	if err := WriteCheckpoint(vfs.OS, filepath.Join(dir, RecoveryPointCheckpointFile), map[TopicPartition]int64{tp: 14}); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, tp.String())
	below, above := segs[0][1], segs[2][1]
	mgrCorrupt(t, pdir, below)
	mgrCorrupt(t, pdir, above)

	m = mgrOpen(t, cfg)
	defer m.Close()
	l = mgrLog(t, m, tp)
	if l.LogEndOffset() != above.BaseOffset {
		t.Fatalf("log end %d, want %d (truncated at the corrupt batch above the recovery point)", l.LogEndOffset(), above.BaseOffset)
	}
	if got := retBases(l); !reflect.DeepEqual(got, []int64{0, 12, 24}) {
		t.Fatalf("segments %v, want [0 12 24] (36 deleted after the truncation)", got)
	}
	if mgrBatchCRCOK(t, l, below.BaseOffset) {
		t.Fatal("the corruption below the recovery point was noticed: segment 0 was scanned")
	}
	if !mgrBatchCRCOK(t, l, segs[2][0].BaseOffset) {
		t.Fatal("the batch before the truncation point is damaged")
	}
	// Appends continue at the truncation point.
	info := mgrAppend(t, l, 1, 1)[0]
	if info.BaseOffset != above.BaseOffset {
		t.Fatalf("next append at %d, want %d", info.BaseOffset, above.BaseOffset)
	}
}

func TestManagerDeleteLog(t *testing.T) {
	root := t.TempDir()
	d0 := filepath.Join(root, "d0")
	cfg := mgrConfig(d0)
	m := mgrOpen(t, cfg)
	keep, gone := TopicPartition{"keep", 0}, TopicPartition{"gone-topic", 7}
	for _, tp := range []TopicPartition{keep, gone} {
		l, err := m.CreateLog(tp, [16]byte{2})
		if err != nil {
			t.Fatal(err)
		}
		mgrAppend(t, l, 3, 2)
	}
	if err := m.DeleteLog(gone); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Log(gone); ok {
		t.Fatal("deleted log still listed")
	}
	entries, err := os.ReadDir(d0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "gone-topic-7") {
			t.Fatalf("%s left behind", e.Name())
		}
	}
	// A leftover "-delete" directory (a crash midway through a delete) is removed at open and
	// never loaded as a partition.
	stray := filepath.Join(d0, "keep-1.0123456789abcdef-delete")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mgrFile(t, filepath.Join(d0, RecoveryPointCheckpointFile)); got != "0\n1\nkeep 0 6\n" {
		t.Fatalf("checkpoint after delete: %q", got)
	}
	m = mgrOpen(t, cfg)
	defer m.Close()
	if _, ok := m.Log(gone); ok {
		t.Fatal("deleted log came back")
	}
	if len(m.Logs()) != 1 {
		t.Fatalf("%d logs after reopen", len(m.Logs()))
	}
	if mgrExists(stray) {
		t.Fatal("stray -delete directory survived the open")
	}
	if l := mgrLog(t, m, keep); l.LogEndOffset() != 6 {
		t.Fatalf("keep-0 log end %d", l.LogEndOffset())
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt")
	for _, x := range []map[TopicPartition]int64{
		{},
		{{"a", 0}: 0},
		{{"orders", 0}: 17, {"orders", 10}: 5, {"orders", 2}: 1 << 40, {"my.topic-with-dashes", 3}: 9, {"__consumer_offsets", 49}: 123},
	} {
		if err := WriteCheckpoint(vfs.OS, path, x); err != nil {
			t.Fatal(err)
		}
		got, err := ReadCheckpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, x) {
			t.Fatalf("round trip of %v gave %v", x, got)
		}
	}
	// Kafka's text format, sorted by topic then partition (numerically).
	if got := mgrFile(t, path); got != "0\n5\n__consumer_offsets 49 123\nmy.topic-with-dashes 3 9\norders 0 17\norders 2 1099511627776\norders 10 5\n" {
		t.Fatalf("checkpoint text %q", got)
	}
	if mgrExists(path + ".tmp") {
		t.Fatal("temporary file left behind")
	}
	if got, err := ReadCheckpoint(filepath.Join(dir, "missing")); err != nil || len(got) != 0 {
		t.Fatalf("missing checkpoint: %v, %v", got, err)
	}
	for _, bad := range []string{"", "1\n0\n", "0\nx\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\n1\nt x 1\n", "0\n1\nt 0 y\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadCheckpoint(path); err == nil {
			t.Errorf("ReadCheckpoint(%q) = %v, want an error", bad, got)
		}
	}
}

func TestParsePartitionDir(t *testing.T) {
	for _, c := range []struct {
		name string
		tp   TopicPartition
		ok   bool
	}{
		{"orders-0", TopicPartition{"orders", 0}, true},
		{"my-topic-12", TopicPartition{"my-topic", 12}, true},
		{"a.b.c-3", TopicPartition{"a.b.c", 3}, true},
		{"__consumer_offsets-49", TopicPartition{"__consumer_offsets", 49}, true},
		{"topic--1", TopicPartition{"topic-", 1}, true}, // "topic-" is a legal topic name
		{"orders-0.0123456789abcdef-delete", TopicPartition{}, false},
		{"orders-0.0123456789abcdef-future", TopicPartition{}, false},
		{"orders", TopicPartition{}, false},
		{"orders-", TopicPartition{}, false},
		{"-1", TopicPartition{}, false},
		{"orders-x", TopicPartition{}, false},
		{"orders-99999999999", TopicPartition{}, false},
	} {
		tp, ok := ParsePartitionDir(c.name)
		if ok != c.ok || tp != c.tp {
			t.Errorf("ParsePartitionDir(%q) = %v, %v; want %v, %v", c.name, tp, ok, c.tp, c.ok)
		}
		if ok && tp.String() != c.name {
			t.Errorf("%v.String() = %q, want %q", tp, tp.String(), c.name)
		}
	}
}
