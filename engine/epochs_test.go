package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/vfs"
)

// Leader epoch cache tests: the cache's rules (Kafka's LeaderEpochFileCache), a leader's and a
// follower's logs, truncation from both ends, the leader-epoch-checkpoint file byte for byte,
// reopening, rebuilding, crash recovery; and the replication-offset-checkpoint of the Manager.

func epOpen(t *testing.T, dir string, cfg Config, clean bool) *Log {
	t.Helper()
	l, err := OpenLog(OpenOptions{Dir: dir, Topic: "t", Config: cfg, CleanShutdown: clean})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return l
}

// epBatch is an offset batch of n records at base carrying leader epoch epoch.
func epBatch(base int64, n int, epoch int32) []byte {
	b := offsetBatch(base, n, 1_700_000_000_000+base)
	record.SetPartitionLeaderEpoch(b, epoch)
	return b
}

func epFile(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, LeaderEpochCheckpointFile))
	if err != nil {
		t.Fatalf("leader epoch checkpoint: %v", err)
	}
	return string(b)
}

func epEntries(pairs ...int64) []EpochEntry {
	var out []EpochEntry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, EpochEntry{Epoch: int32(pairs[i]), StartOffset: pairs[i+1]})
	}
	return out
}

func epExpect(t *testing.T, what string, l PartitionLog, want []EpochEntry) {
	t.Helper()
	if got := l.EpochEntries(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("%s: epoch entries %v, want %v", what, got, want)
	}
}

func epAppend(t *testing.T, l PartitionLog, batches, records int) {
	t.Helper()
	for range batches {
		if _, err := l.Append(offsetBatch(l.LogEndOffset(), records, 1_700_000_000_000)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEpochCacheRules(t *testing.T) {
	c := epochCache{latest: -1}
	if c.assignLocked(-1, 0) || c.assignLocked(0, -1) {
		t.Fatal("an unset epoch or offset was assigned")
	}
	if !c.assignLocked(0, 0) || !c.assignLocked(3, 120) || c.assignLocked(3, 130) {
		t.Fatal("assign: a new epoch must change the cache, the latest one again must not")
	}
	if got := string(encodeEpochCheckpoint(c.entries)); got != "0\n2\n0 0\n3 120\n" {
		t.Fatalf("file %q", got)
	}
	// A newer epoch at the same start offset replaces the entry (a leader elected twice without
	// appending); an entry breaking monotonicity goes.
	c.assignLocked(4, 120)
	if !reflect.DeepEqual(c.entries, epEntries(0, 0, 4, 120)) || c.latest != 4 {
		t.Fatalf("entries %v latest %d", c.entries, c.latest)
	}

	c = epochCache{latest: -1}
	for _, e := range epEntries(2, 10, 4, 30, 7, 50) {
		c.assignLocked(e.Epoch, e.StartOffset)
	}
	leo := func() int64 { return 80 }
	for _, tc := range []struct {
		req       int32
		off       int64
		foundEpch int32
	}{
		{7, 80, 7}, // the latest epoch: the log end
		{6, 50, 4}, {5, 50, 4}, {4, 50, 4}, {3, 30, 2}, {2, 30, 2},
		{1, 10, 1}, {0, 10, 0}, // older than every entry: Kafka answers (requested, first start)
		{8, -1, -1},  // newer than every entry
		{-1, -1, -1}, // UNDEFINED_EPOCH
	} {
		off, e := c.endOffsetFor(tc.req, leo)
		if off != tc.off || e != tc.foundEpch {
			t.Errorf("endOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.req, off, e, tc.off, tc.foundEpch)
		}
	}
	if off, e := (&epochCache{latest: -1}).endOffsetFor(0, leo); off != -1 || e != -1 {
		t.Fatalf("empty cache: (%d, %d)", off, e)
	}

	if c.truncateFromEndLocked(51) || !c.truncateFromEndLocked(50) || !reflect.DeepEqual(c.entries, epEntries(2, 10, 4, 30)) || c.latest != 4 {
		t.Fatalf("truncate from end: %v (latest %d)", c.entries, c.latest)
	}
	if c.truncateFromStartLocked(10) || c.truncateFromStartLocked(3) {
		t.Fatal("truncate from start at or before the first entry changed the cache")
	}
	if !c.truncateFromStartLocked(35) || !reflect.DeepEqual(c.entries, epEntries(4, 35)) {
		t.Fatalf("truncate from start: %v", c.entries)
	}
	if !c.truncateFromEndLocked(0) || len(c.entries) != 0 || c.latest != -1 {
		t.Fatalf("truncate everything: %v (latest %d)", c.entries, c.latest)
	}
}

func TestEpochCheckpointParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []EpochEntry
		ok   bool
	}{
		{"0\n2\n0 0\n3 120\n", epEntries(0, 0, 3, 120), true},
		{"0\n0\n", nil, true},
		{"", nil, true}, // Kafka creates the file empty
		{"1\n0\n", nil, false},
		{"0\n2\n0 0\n", nil, false},
		{"0\n2\n3 0\n1 5\n", nil, false}, // epochs not increasing
		{"0\n2\n0 5\n1 5\n", nil, false}, // offsets not increasing
		{"0\n1\n0 x\n", nil, false},
		{"0\n1\n-1 0\n", nil, false},
	} {
		got, err := parseEpochCheckpoint([]byte(tc.in))
		if (err == nil) != tc.ok || !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("parse %q = %v, %v", tc.in, got, err)
		}
	}
}

func TestLogEpochsLeader(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := DefaultConfig()
	l := epOpen(t, dir, cfg, true)
	if _, err := os.Stat(filepath.Join(dir, LeaderEpochCheckpointFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a new empty log has a leader epoch checkpoint (%v)", err)
	}
	if _, ok := l.LatestEpoch(); ok {
		t.Fatal("a new log has a latest epoch")
	}
	if err := l.BecomeLeader(0); err != nil {
		t.Fatal(err)
	}
	if got := epFile(t, dir); got != "0\n1\n0 0\n" {
		t.Fatalf("file %q", got)
	}
	epAppend(t, l, 12, 10)
	if err := l.BecomeLeader(3); err != nil {
		t.Fatal(err)
	}
	if got := epFile(t, dir); got != "0\n2\n0 0\n3 120\n" {
		t.Fatalf("file %q", got)
	}
	epAppend(t, l, 2, 10)
	for _, h := range readAll(t, l, 0, ReadUpToLogEnd) {
		want := int32(0)
		if h.BaseOffset >= 120 {
			want = 3
		}
		if h.PartitionLeaderEpoch != want {
			t.Fatalf("batch at %d stamped with epoch %d, want %d", h.BaseOffset, h.PartitionLeaderEpoch, want)
		}
	}
	for _, tc := range [][3]int64{{3, 140, 3}, {2, 120, 0}, {1, 120, 0}, {0, 120, 0}, {4, -1, -1}} {
		if off, e := l.EndOffsetForEpoch(int32(tc[0])); off != tc[1] || int64(e) != tc[2] {
			t.Fatalf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", tc[0], off, e, tc[1], tc[2])
		}
	}
	if err := l.BecomeLeader(2); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("become leader in an older epoch: %v", err)
	}
	if err := l.BecomeLeader(3); err != nil {
		t.Fatalf("become leader again in the latest epoch: %v", err)
	}
	epExpect(t, "after BecomeLeader in old epochs", l, epEntries(0, 0, 3, 120))

	// SetLeaderEpoch alone: the first append in the new epoch records it.
	l.SetLeaderEpoch(5)
	epAppend(t, l, 1, 10)
	if got := epFile(t, dir); got != "0\n3\n0 0\n3 120\n5 140\n" {
		t.Fatalf("file %q", got)
	}
	// Elected twice without appending: the later epoch replaces the earlier one at the log end.
	if err := l.BecomeLeader(6); err != nil {
		t.Fatal(err)
	}
	if err := l.BecomeLeader(7); err != nil {
		t.Fatal(err)
	}
	epExpect(t, "two elections", l, epEntries(0, 0, 3, 120, 5, 140, 7, 150))
	if e, ok := l.LatestEpoch(); !ok || e != 7 {
		t.Fatalf("latest epoch %d %v", e, ok)
	}
	if off, e := l.EndOffsetForEpoch(5); off != 150 || e != 5 {
		t.Fatalf("EndOffsetForEpoch(5) = (%d, %d)", off, e)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := epFile(t, dir); got != "0\n4\n0 0\n3 120\n5 140\n7 150\n" {
		t.Fatalf("file at close %q", got)
	}

	// Reopen: the checkpoint is loaded; as Kafka's log loading does, entries at or after the log
	// end (an election without appends) are dropped.
	l = epOpen(t, dir, cfg, true)
	defer l.Close()
	epExpect(t, "reopened", l, epEntries(0, 0, 3, 120, 5, 140))
	if got := epFile(t, dir); got != "0\n3\n0 0\n3 120\n5 140\n" {
		t.Fatalf("file after reopen %q", got)
	}
}

func TestLogEpochsFollower(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1024 // about one batch per segment
	cfg.RetentionMs = -1
	l := epOpen(t, dir, cfg, true)
	var buf []byte
	for _, b := range [][3]int64{{0, 5, -1}, {5, 5, 1}, {10, 5, 1}, {15, 5, 2}, {25, 5, 2}, {30, 5, 5}, {35, 5, 3}} {
		buf = append(buf, epBatch(b[0], int(b[1]), int32(b[2]))...)
	}
	if _, err := l.AppendStored(buf); err != nil {
		t.Fatal(err)
	}
	// The unset epoch and the older epoch after 5 are not recorded.
	epExpect(t, "follower", l, epEntries(1, 5, 2, 15, 5, 30))
	if got := epFile(t, dir); got != "0\n3\n1 5\n2 15\n5 30\n" {
		t.Fatalf("file %q", got)
	}
	for _, tc := range [][3]int64{{5, 40, 5}, {4, 30, 2}, {2, 30, 2}, {1, 15, 1}, {0, 5, 0}, {6, -1, -1}} {
		if off, e := l.EndOffsetForEpoch(int32(tc[0])); off != tc[1] || int64(e) != tc[2] {
			t.Fatalf("EndOffsetForEpoch(%d) = (%d, %d), want (%d, %d)", tc[0], off, e, tc[1], tc[2])
		}
	}

	// Truncation from the end: the batch holding 32 goes whole, and epoch 5 with it.
	if err := l.TruncateTo(32); err != nil {
		t.Fatal(err)
	}
	epExpect(t, "truncated to 30", l, epEntries(1, 5, 2, 15))
	if got := epFile(t, dir); got != "0\n2\n1 5\n2 15\n" {
		t.Fatalf("file %q", got)
	}
	buf = nil
	for _, b := range [][3]int64{{30, 5, 4}, {35, 5, 4}, {40, 5, 6}, {45, 5, 6}, {50, 5, 6}} {
		buf = append(buf, epBatch(b[0], int(b[1]), int32(b[2]))...)
	}
	if _, err := l.AppendStored(buf); err != nil {
		t.Fatal(err)
	}
	epExpect(t, "refetched", l, epEntries(1, 5, 2, 15, 4, 30, 6, 40))

	// Truncation from the start: DeleteRecords, then retention.
	if err := l.SetHighWatermark(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecordsBefore(17); err != nil {
		t.Fatal(err)
	}
	epExpect(t, "records deleted before 17", l, epEntries(2, 17, 4, 30, 6, 40))
	if got := epFile(t, dir); got != "0\n3\n2 17\n4 30\n6 40\n" {
		t.Fatalf("file %q", got)
	}
	cfg.RetentionBytes = 1
	l.SetConfig(cfg)
	if n, err := l.DeleteExpiredSegments(); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	start := l.LogStartOffset()
	if start <= 40 {
		t.Fatalf("retention left the log start at %d", start)
	}
	epExpect(t, "retention", l, epEntries(6, start))
	if got := epFile(t, dir); got != fmt.Sprintf("0\n1\n6 %d\n", start) {
		t.Fatalf("file %q", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopen, clean and with the file gone: the same cache.
	for _, rebuild := range []bool{false, true} {
		if rebuild {
			if err := os.Remove(filepath.Join(dir, LeaderEpochCheckpointFile)); err != nil {
				t.Fatal(err)
			}
		}
		l = OpenLogMust(t, dir, cfg, start)
		epExpect(t, fmt.Sprintf("reopened (rebuild %v)", rebuild), l, epEntries(6, start))
		if got := epFile(t, dir); got != fmt.Sprintf("0\n1\n6 %d\n", start) {
			t.Fatalf("file %q", got)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// OpenLogMust reopens a log cleanly with its log start (as the Manager's checkpoint gives it).
func OpenLogMust(t *testing.T, dir string, cfg Config, logStart int64) *Log {
	t.Helper()
	l, err := OpenLog(OpenOptions{Dir: dir, Topic: "t", Config: cfg, CleanShutdown: true, LogStartOffset: logStart})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLogEpochsRebuild: a missing, unreadable or stale checkpoint is rebuilt from the batch
// headers; a log without epochs has an empty cache.
func TestLogEpochsRebuild(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1024
	dir := filepath.Join(t.TempDir(), "t-0")
	l := epOpen(t, dir, cfg, true)
	var buf []byte
	for i, e := range []int32{0, 0, 1, 1, 1, 4, 4, 9, 9, 9} {
		buf = append(buf, epBatch(int64(i*4), 4, e)...)
	}
	if _, err := l.AppendStored(buf); err != nil {
		t.Fatal(err)
	}
	want := epEntries(0, 0, 1, 8, 4, 20, 9, 28)
	epExpect(t, "appended", l, want)
	wantFile := "0\n4\n0 0\n1 8\n4 20\n9 28\n"
	segs := len(l.Segments())
	l.Close()
	if segs < 3 {
		t.Fatalf("%d segments: want several", segs)
	}
	path := filepath.Join(dir, LeaderEpochCheckpointFile)
	for name, content := range map[string]string{
		"missing":  "",
		"garbage":  "0\n7\nnot a checkpoint\n",
		"stale":    "0\n2\n0 0\n1 8\n",                    // a crash before the write of epochs 4 and 9
		"too long": "0\n5\n0 0\n1 8\n4 20\n9 28\n12 40\n", // truncated after the last write: fixed, not rebuilt
	} {
		if name == "missing" {
			_ = os.Remove(path)
		} else if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, clean := range []bool{true, false} {
			l := epOpen(t, dir, cfg, clean)
			epExpect(t, name, l, want)
			if got := epFile(t, dir); got != wantFile {
				t.Fatalf("%s: file %q", name, got)
			}
			l.Close()
		}
	}

	// No epoch information at all: an empty cache (and an empty file, so the next open scans nothing).
	dir2 := filepath.Join(t.TempDir(), "u-0")
	l = epOpen(t, dir2, cfg, true)
	if _, err := l.AppendStored(append(epBatch(0, 3, -1), epBatch(3, 3, -1)...)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = epOpen(t, dir2, cfg, false)
	defer l.Close()
	if _, ok := l.LatestEpoch(); ok {
		t.Fatal("a latest epoch in a log without epochs")
	}
	if off, e := l.EndOffsetForEpoch(0); off != -1 || e != -1 {
		t.Fatalf("EndOffsetForEpoch(0) = (%d, %d)", off, e)
	}
	if got := epFile(t, dir2); got != "0\n0\n" {
		t.Fatalf("file %q", got)
	}
}

// TestLogEpochsTornTail: crash recovery that truncates a torn batch, the first of its epoch,
// truncates the cache too.
func TestLogEpochsTornTail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := DefaultConfig()
	l := epOpen(t, dir, cfg, true)
	if err := l.BecomeLeader(0); err != nil {
		t.Fatal(err)
	}
	epAppend(t, l, 12, 10)
	if err := l.BecomeLeader(3); err != nil {
		t.Fatal(err)
	}
	epAppend(t, l, 1, 10)
	if err := l.AwaitDurable(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	active := l.Segments()[len(l.Segments())-1]
	logPath, size := active.LogPath(), active.Size()
	l.Close()
	if got := epFile(t, dir); got != "0\n2\n0 0\n3 120\n" {
		t.Fatalf("file %q", got)
	}
	if err := os.Truncate(logPath, size-10); err != nil { // the last batch torn
		t.Fatal(err)
	}
	l, err := OpenLog(OpenOptions{Dir: dir, Topic: "t", Config: cfg, CleanShutdown: false, RecoveryPoint: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.LogEndOffset() != 120 {
		t.Fatalf("recovered log end %d, want 120", l.LogEndOffset())
	}
	epExpect(t, "recovered", l, epEntries(0, 0))
	if got := epFile(t, dir); got != "0\n1\n0 0\n" {
		t.Fatalf("file %q", got)
	}
	if off, e := l.EndOffsetForEpoch(0); off != 120 || e != 0 {
		t.Fatalf("EndOffsetForEpoch(0) = (%d, %d)", off, e)
	}
}

// TestLogEpochsCrash: after a simulated power loss at any moment, the reopened log's cache is the
// one its batches give (the checkpoint written at each epoch change, rebuilt when stale).
func TestLogEpochsCrash(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 10
	for round := range 6 {
		ffs := vfs.NewFaultFS(vfs.OS)
		hfs := newHaltFS(ffs)
		l := openTestLog(t, hfs, nil, dir, cfg, false, 0)
		e, _ := l.LatestEpoch()
		for i := range 4 {
			if err := l.BecomeLeader(e + 1 + int32(i)); err != nil {
				t.Fatal(err)
			}
			epAppend(t, l, 3+round, 2)
		}
		if round%2 == 1 {
			if err := l.TruncateTo(l.LogEndOffset() - 5); err != nil {
				t.Fatal(err)
			}
		}
		crashLog(t, l, hfs, ffs)

		l = openTestLog(t, vfs.OS, nil, dir, cfg, false, 0)
		got := l.EpochEntries()
		l.Close()
		if err := os.Remove(filepath.Join(dir, LeaderEpochCheckpointFile)); err != nil {
			t.Fatal(err)
		}
		l = openTestLog(t, vfs.OS, nil, dir, cfg, false, 0)
		epExpect(t, fmt.Sprintf("round %d: crashed vs rebuilt", round), l, got)
		l.Close()
	}
}

// TestMemLogEpochs: MemLog keeps the same cache as the disk Log for the same operations.
func TestMemLogEpochs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1024
	disk := epOpen(t, filepath.Join(t.TempDir(), "t-0"), cfg, true)
	defer disk.Close()
	mem, err := NewMemLog(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var buf []byte
	for _, b := range [][3]int64{{0, 5, 1}, {5, 5, 2}, {10, 5, 2}, {20, 5, 4}} {
		buf = append(buf, epBatch(b[0], int(b[1]), int32(b[2]))...)
	}
	steps := []func(pl PartitionLog) error{
		func(pl PartitionLog) error { _, err := pl.AppendStored(append([]byte(nil), buf...)); return err },
		func(pl PartitionLog) error { return pl.BecomeLeader(3) },
		func(pl PartitionLog) error { return pl.BecomeLeader(6) },
		func(pl PartitionLog) error { epAppend(t, pl, 3, 4); return nil },
		func(pl PartitionLog) error { return pl.TruncateTo(27) },
		func(pl PartitionLog) error { return pl.BecomeLeader(8) },
		func(pl PartitionLog) error { epAppend(t, pl, 2, 4); return pl.SetHighWatermark(pl.LogEndOffset()) },
		func(pl PartitionLog) error { _, err := pl.DeleteRecordsBefore(12); return err },
	}
	for i, step := range steps {
		derr, merr := step(disk), step(mem)
		if orcCode(derr) != orcCode(merr) {
			t.Fatalf("step %d: disk %v, mem %v", i, derr, merr)
		}
		if d, m := disk.EpochEntries(), mem.EpochEntries(); !reflect.DeepEqual(d, m) {
			t.Fatalf("step %d: disk %v, mem %v", i, d, m)
		}
		for e := int32(-1); e < 10; e++ {
			do, de := disk.EndOffsetForEpoch(e)
			mo, me := mem.EndOffsetForEpoch(e)
			if do != mo || de != me {
				t.Fatalf("step %d: EndOffsetForEpoch(%d): disk (%d, %d), mem (%d, %d)", i, e, do, de, mo, me)
			}
		}
	}
	epExpect(t, "end", disk, epEntries(2, 12, 4, 20, 8, 25))
}

func TestManagerHighWatermarkCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d0")
	cfg := mgrConfig(dir)
	m := mgrOpen(t, cfg)
	tp := TopicPartition{"events", 3}
	l, err := m.CreateLog(tp, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	mgrAppend(t, l, 4, 5) // offsets [0, 20), high watermark 20
	if err := l.SetHighWatermark(8); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	hwPath := filepath.Join(dir, ReplicationOffsetCheckpointFile)
	if got := mgrFile(t, hwPath); got != "0\n1\nevents 3 8\n" {
		t.Fatalf("replication-offset-checkpoint %q", got)
	}

	// A clean restart keeps the high watermark.
	ffs := vfs.NewFaultFS(vfs.OS)
	hfs := newHaltFS(ffs)
	cfg.FS = hfs
	m = mgrOpen(t, cfg)
	l = mgrLog(t, m, tp)
	if l.HighWatermark() != 8 || l.LogEndOffset() != 20 {
		t.Fatalf("reopened: high watermark %d, log end %d; want 8, 20", l.HighWatermark(), l.LogEndOffset())
	}
	// An unclean one: the value of the last checkpoint.
	mgrAppend(t, l, 4, 2) // log end 28
	if err := l.AwaitDurable(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if err := l.SetHighWatermark(12); err != nil {
		t.Fatal(err)
	}
	if err := m.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := l.SetHighWatermark(24); err != nil {
		t.Fatal(err)
	}
	if err := hfs.halt(ffs.Crash); err != nil {
		t.Fatal(err)
	}
	_ = m.Close() // fails: the process is gone
	cfg.FS = nil
	m = mgrOpen(t, cfg)
	l = mgrLog(t, m, tp)
	if l.HighWatermark() != 12 || l.LogEndOffset() != 28 {
		t.Fatalf("after a crash: high watermark %d, log end %d; want 12, 28", l.HighWatermark(), l.LogEndOffset())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// A checkpoint without the partition: Kafka's 0, clamped to the log start. A value past the
	// log end is clamped to it.
	for _, c := range []struct {
		ckpt map[TopicPartition]int64
		want int64
	}{{map[TopicPartition]int64{}, 0}, {map[TopicPartition]int64{tp: 1000}, 28}} {
		if err := WriteCheckpoint(vfs.OS, hwPath, c.ckpt); err != nil {
			t.Fatal(err)
		}
		m = mgrOpen(t, cfg)
		if got := mgrLog(t, m, tp).HighWatermark(); got != c.want {
			t.Fatalf("checkpoint %v: high watermark %d, want %d", c.ckpt, got, c.want)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// A log whose watermark follows the log itself ignores the checkpoint.
	cfg.Default.LocalHighWatermark = true
	if err := WriteCheckpoint(vfs.OS, hwPath, map[TopicPartition]int64{tp: 4}); err != nil {
		t.Fatal(err)
	}
	m = mgrOpen(t, cfg)
	defer m.Close()
	if got := mgrLog(t, m, tp).HighWatermark(); got != 28 {
		t.Fatalf("local high watermark: %d, want the log end 28", got)
	}
}

// TestLogEpochsConcurrent: appenders, elections and OffsetForLeaderEpoch readers at once (run
// with -race); the cache ends as the batches give it.
func TestLogEpochsConcurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 << 10
	cfg.FlushIntervalMessages = 1 << 40
	l := epOpen(t, dir, cfg, true)
	done := make(chan struct{})
	errs := make(chan error, 8)
	for range 3 {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				if _, err := l.Append(offsetBatch(0, 1+i%3, 1_700_000_000_000)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	go func() {
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			// An election may replace e meanwhile (a newer epoch at the same start offset):
			// the answer then names an older epoch.
			e, ok := l.LatestEpoch()
			if off, fe := l.EndOffsetForEpoch(e); ok && (fe > e || off < 0) {
				errs <- fmt.Errorf("EndOffsetForEpoch(%d) = (%d, %d)", e, off, fe)
				return
			}
		}
	}()
	for e := int32(0); e < 40; e++ {
		if err := l.BecomeLeader(e); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := l.EpochEntries()
	l.Close()
	for i := 1; i < len(got); i++ {
		if got[i].Epoch <= got[i-1].Epoch || got[i].StartOffset <= got[i-1].StartOffset {
			t.Fatalf("entries not increasing: %v", got)
		}
	}
	if err := os.Remove(filepath.Join(dir, LeaderEpochCheckpointFile)); err != nil {
		t.Fatal(err)
	}
	l = epOpen(t, dir, cfg, true)
	defer l.Close()
	// Elections without appends leave no batch: the rebuilt cache is the loaded one without them.
	var withBatches []EpochEntry
	for i, e := range got {
		if (i+1 < len(got) && got[i+1].StartOffset > e.StartOffset) || (i+1 == len(got) && e.StartOffset < l.LogEndOffset()) {
			withBatches = append(withBatches, e)
		}
	}
	epExpect(t, "rebuilt after concurrent elections", l, withBatches)
}

// TestTruncateEmptiedAfterRestart: a follower emptied its log (truncated to the log start), then
// started over at its leader's higher log start, appending after a gap (into the segment based
// lower, or into one rolled after it when that segment is full), and later truncates everything
// again. The disk Log ends
// as MemLog does: at the base of the first removed batch, with the log start there (it used to
// fall back to the end of the batches left below the log start, lowering the log start to it).
func TestTruncateEmptiedAfterRestart(t *testing.T) {
	for _, roll := range []bool{false, true} {
		t.Run(fmt.Sprintf("roll=%v", roll), func(t *testing.T) {
			cfg := DefaultConfig()
			if roll {
				// A segment per batch.
				cfg.SegmentBytes = int64(len(epBatch(0, 5, 1)) + 1)
			}
			disk := epOpen(t, filepath.Join(t.TempDir(), "t-0"), cfg, true)
			defer disk.Close()
			mem, err := NewMemLog(cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			old := append(append(epBatch(0, 5, 1), epBatch(5, 5, 1)...), epBatch(10, 5, 1)...)
			restart := append(epBatch(30, 5, 2), epBatch(35, 5, 2)...)
			for _, pl := range []PartitionLog{disk, mem} {
				if _, err := pl.AppendStored(append([]byte(nil), old...)); err != nil {
					t.Fatal(err)
				}
				if err := pl.SetHighWatermark(15); err != nil {
					t.Fatal(err)
				}
				if _, err := pl.DeleteRecordsBefore(10); err != nil {
					t.Fatal(err)
				}
				if err := pl.TruncateTo(pl.LogStartOffset()); err != nil { // emptied: [10, 10)
					t.Fatal(err)
				}
				if _, err := pl.AppendStored(append([]byte(nil), restart...)); err != nil {
					t.Fatal(err)
				}
				if roll && pl == PartitionLog(disk) && len(disk.Segments()) < 2 {
					var bases []int64
					for _, sg := range disk.Segments() {
						bases = append(bases, sg.BaseOffset())
					}
					t.Fatalf("the disk log did not roll at the restart: segments %v", bases)
				}
				if err := pl.SetHighWatermark(40); err != nil {
					t.Fatal(err)
				}
				if _, err := pl.DeleteRecordsBefore(30); err != nil {
					t.Fatal(err)
				}
				if err := pl.TruncateTo(30); err != nil { // emptied again
					t.Fatal(err)
				}
			}
			type state struct{ Start, End, HW int64 }
			d := state{disk.LogStartOffset(), disk.LogEndOffset(), disk.HighWatermark()}
			m := state{mem.LogStartOffset(), mem.LogEndOffset(), mem.HighWatermark()}
			if d != m || d != (state{30, 30, 30}) {
				t.Fatalf("after emptying the restarted log: disk %+v, mem %+v, want both {30 30 30}", d, m)
			}
		})
	}
}
