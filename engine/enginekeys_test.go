package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// rollsAfter appends a batch at ts0 to a fresh segment, then batches at ts0+w for w = 1, 2, ...
// and returns the first w at which the log rolled.
func rollsAfter(t *testing.T, l *Log, ts0, limit int64) int64 {
	t.Helper()
	keyed := func(ts int64) []byte {
		return record.Build(nil, record.BuildOptions{BaseTimestamp: ts, ProducerID: -1, BaseSequence: -1}, []record.Record{{Key: []byte("k"), Value: []byte("v")}})
	}
	retAppend(t, l, keyed(ts0))
	n := len(l.Segments())
	for w := int64(1); w <= limit; w++ {
		retAppend(t, l, keyed(ts0+w))
		if len(l.Segments()) > n {
			return w
		}
	}
	t.Fatalf("no roll within %d ms", limit)
	return 0
}

// TestSegmentJitterRoll: with segment.jitter.ms each segment rolls once segment.ms less a random
// jitter in [0, min(jitter, segment.ms)) has passed since its first batch (Kafka's rollJitterMs):
// within (segment.ms - jitter, segment.ms], and not always at the same moment.
func TestSegmentJitterRoll(t *testing.T) {
	const segMs, jitter = 200, 150
	seen := map[int64]bool{}
	for i := 0; i < 12; i++ {
		l, _ := retOpen(t, func(c *Config) { c.SegmentMs = segMs; c.SegmentJitterMs = jitter })
		ts0 := retNow + int64(i)*10_000
		for range 3 { // the first segment, and two rolled ones
			w := rollsAfter(t, l, ts0, 2*segMs)
			if w <= segMs-jitter || w > segMs+1 {
				t.Fatalf("rolled after %d ms, want in (%d, %d]", w, segMs-jitter, segMs+1)
			}
			seen[w] = true
			ts0 += 2 * segMs
		}
	}
	if len(seen) < 3 {
		t.Fatalf("36 segments rolled after only %d distinct delays: no jitter? %v", len(seen), seen)
	}
	// Without jitter: exactly segment.ms.
	l, _ := retOpen(t, func(c *Config) { c.SegmentMs = segMs })
	if w := rollsAfter(t, l, retNow, 2*segMs); w != segMs+1 {
		t.Fatalf("without jitter rolled after %d ms, want %d", w, segMs+1)
	}
}

// TestMaxCompactionLagRoll: the active segment of a compacted log rolls once
// max.compaction.lag.ms has passed even when segment.ms is longer (Kafka's maxSegmentMs); a
// delete-only log keeps segment.ms.
func TestMaxCompactionLagRoll(t *testing.T) {
	l, _ := retOpen(t, func(c *Config) { c.CleanupPolicy = "compact"; c.MaxCompactionLagMs = 300 })
	if w := rollsAfter(t, l, retNow, 1000); w != 301 {
		t.Fatalf("compacted log rolled after %d ms, want 301", w)
	}
	l, _ = retOpen(t, func(c *Config) { c.MaxCompactionLagMs = 300; c.SegmentMs = 500 })
	if w := rollsAfter(t, l, retNow, 1000); w != 501 {
		t.Fatalf("delete log rolled after %d ms, want segment.ms 501", w)
	}
	l, _ = retOpen(t, func(c *Config) { c.CleanupPolicy = "compact"; c.MaxCompactionLagMs = 300; c.SegmentMs = 100 })
	if w := rollsAfter(t, l, retNow, 1000); w != 101 {
		t.Fatalf("compacted log with a shorter segment.ms rolled after %d ms, want 101", w)
	}
}

// TestMaxCompactionLagCleansBelowRatio (KIP-354): a compacted log whose dirty ratio is below
// min.cleanable.dirty.ratio is cleaned once its oldest dirty record is older than
// max.compaction.lag.ms, and not before.
func TestMaxCompactionLagCleansBelowRatio(t *testing.T) {
	clock := newTestClock()
	lag := int64(0)
	configFor := func(string) Config {
		c := compactConfig(clock)
		c.MinCleanableDirtyRatio = 1 // a ratio never exceeds 1: never cleaned by ratio
		c.MaxCompactionLagMs = lag
		return c
	}
	m, err := OpenManager(ManagerConfig{Dirs: []string{t.TempDir()}, ConfigFor: configFor, CleanerThreads: -1,
		CleanerDedupeBufferSize: 1 << 20, RetentionCheckInterval: -1, CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.CreateLog(TopicPartition{"cmp", 0}, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, l, clock, 7, 20)
	w.batches(100)
	sealAll(t, l)
	if n, err := m.RunCleaner(); n != 0 || err != nil {
		t.Fatalf("without max.compaction.lag.ms: %d cleanings (%v), want 0", n, err)
	}
	lag = 60_000
	l.SetConfig(configFor("cmp"))
	clock.advance(30 * time.Second)
	if n, err := m.RunCleaner(); n != 0 || err != nil {
		t.Fatalf("before the lag: %d cleanings (%v), want 0", n, err)
	}
	clock.advance(31 * time.Second)
	if n, err := m.RunCleaner(); n != 1 || err != nil {
		t.Fatalf("past the lag: %d cleanings (%v), want 1", n, err)
	}
	if cp, end := l.CleanerCheckpoint(), l.Segments()[len(l.Segments())-1].BaseOffset(); cp != end {
		t.Fatalf("cleaner checkpoint %d, want %d", cp, end)
	}
	got, _ := storedRecords(t, l)
	sameRecords(t, "after the cleaning", got, expect(w.all, l.CleanerCheckpoint(), -1))
	// Nothing dirty left: no more cleanings however old the records get.
	clock.advance(time.Hour)
	if n, _ := m.RunCleaner(); n != 0 {
		t.Fatalf("clean log cleaned again: %d", n)
	}
}

// TestProducerIDExpiration: a producer whose last write is producer.id.expiration.ms old is
// forgotten by RemoveExpiredProducers (its next batch is accepted at any sequence, a retry is no
// longer recognised), a younger one is kept; the snapshot written at close does not bring the
// expired one back, and an older snapshot loaded at open is expired again.
func TestProducerIDExpiration(t *testing.T) {
	dir := t.TempDir() + "/t-0"
	clock := &retClock{}
	clock.ms.Store(retNow)
	cfg := DefaultConfig()
	cfg.Now = clock.now
	cfg.ProducerIDExpirationMs = 10_000
	open := func() *Log {
		l, err := OpenLog(OpenOptions{Dir: dir, Topic: "t", Config: cfg, CleanShutdown: true})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	batch := func(pid int64, seq int32, ts int64) []byte {
		return record.Build(nil, record.BuildOptions{BaseTimestamp: ts, ProducerID: pid, BaseSequence: seq}, []record.Record{{Value: []byte("v")}})
	}
	l := open()
	retAppend(t, l, batch(1, 0, retNow))      // producer 1: last write at retNow
	retAppend(t, l, batch(2, 0, retNow+5000)) // producer 2: 5 s later
	if err := l.Roll(); err != nil {          // a roll snapshot holding both
		t.Fatal(err)
	}
	clock.ms.Store(retNow + 9_999)
	if n := l.RemoveExpiredProducers(); n != 0 {
		t.Fatalf("expired %d producers before the expiration", n)
	}
	clock.ms.Store(retNow + 10_000) // producer 1 is exactly 10 s old: expired (Kafka's >=)
	if n := l.RemoveExpiredProducers(); n != 1 {
		t.Fatalf("expired %d producers, want 1", n)
	}
	// Producer 1's retry is not recognised any more: stored again. Producer 2's still is.
	if info := retAppend(t, l, batch(1, 0, retNow)); info.Duplicate {
		t.Fatal("expired producer's retry was recognised")
	}
	if info := retAppend(t, l, batch(2, 0, retNow+5000)); !info.Duplicate {
		t.Fatal("live producer's retry was stored again")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened 20 s later from the roll snapshot (the close one removed): both are expired at open.
	if err := os.Remove(snapshotPath(dir, l.LogEndOffset())); err != nil {
		t.Fatal(err)
	}
	clock.ms.Store(retNow + 20_000)
	l = open()
	defer l.Close()
	l.mu.Lock()
	left := len(l.producers.producers)
	l.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d producers survived an open past their expiration", left)
	}
}

// TestManagerExpiresProducers: the Manager's periodic task forgets expired producers.
func TestManagerExpiresProducers(t *testing.T) {
	clock := &retClock{}
	clock.ms.Store(retNow)
	cfg := DefaultConfig()
	cfg.Now = clock.now
	cfg.ProducerIDExpirationMs = 1000
	m, err := OpenManager(ManagerConfig{Dirs: []string{t.TempDir()}, Default: cfg, RetentionCheckInterval: -1,
		CheckpointInterval: -1, CleanerThreads: -1, ProducerIDExpirationCheckInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.CreateLog(TopicPartition{"t", 0}, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	retAppend(t, l, record.Build(nil, record.BuildOptions{BaseTimestamp: retNow, ProducerID: 3, BaseSequence: 0}, []record.Record{{Value: []byte("v")}}))
	clock.ms.Store(retNow + 1000)
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		left := len(l.producers.producers)
		l.mu.Unlock()
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the manager did not expire the producer within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deletedFiles lists the *.deleted files of dir.
func deletedFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), segment.DeletedSuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// waitNoDeleted waits (at most 5 s) until dir holds no *.deleted file.
func waitNoDeleted(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(deletedFiles(t, dir)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("*.deleted files still there after 5 s: %v", deletedFiles(t, dir))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFileDeleteDelay: segments deleted by DeleteRecords/retention and by a truncation are renamed
// .deleted at once and removed file.delete.delay.ms later; a reader holding a slice of one keeps
// reading it meanwhile; the segments' descriptors and mappings are given back as soon as no
// reader holds them (not after the delay); leftover .deleted files are removed at open.
func TestFileDeleteDelay(t *testing.T) {
	const delay = 300
	l, _ := retOpen(t, func(c *Config) {
		c.FileDeleteDelayMs = delay
		c.LocalHighWatermark = true
		c.FlushIntervalMessages = 1 << 30
	})
	for i := 0; i < 4; i++ { // segments 0, 1, 2, 3 (active), one batch each
		retAppend(t, l, retBatch(100, retNow+int64(i)))
		if i < 3 {
			retRoll(t, l)
		}
	}
	retSetHW(t, l, 4)
	if err := l.Flush(); err != nil { // the flusher's references on rolled segments go once sealed
		t.Fatal(err)
	}
	sl, err := l.Read(0, 1<<20, ReadUpToHighWatermark)
	if err != nil || sl.Length == 0 {
		t.Fatalf("read: %+v %v", sl, err)
	}
	desc0, _ := segment.Usage()
	if _, err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	retExpectBases(t, l, 2, 3)
	if got := deletedFiles(t, l.Dir()); len(got) != 6 {
		t.Fatalf("want the 6 files of segments 0 and 1 renamed .deleted, have %v", got)
	}
	if got := retFileBases(t, l); len(got) != 2 || got[0] != 2 {
		t.Fatalf(".log files %v, want 2 and 3", got)
	}
	// Segment 1 (no reader) is closed at once; segment 0 stays open for the slice's reader.
	if desc, _ := segment.Usage(); desc != desc0-segment.DescriptorsPerSegment {
		t.Fatalf("descriptors %d after the delete, want %d", desc, desc0-segment.DescriptorsPerSegment)
	}
	buf := make([]byte, sl.Length)
	if _, err := sl.File.ReadAt(buf, sl.Position); err != nil {
		t.Fatalf("reading a deleted segment's slice: %v", err)
	}
	if h, err := record.CheckStored(buf); err != nil || h.BaseOffset != 0 {
		t.Fatalf("slice of the deleted segment: %+v %v", h, err)
	}
	sl.Release()
	if desc, _ := segment.Usage(); desc != desc0-2*segment.DescriptorsPerSegment {
		t.Fatalf("descriptors %d after the reader released, want %d", desc, desc0-2*segment.DescriptorsPerSegment)
	}
	waitNoDeleted(t, l.Dir())

	// A truncation's segments go the same way.
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if got := deletedFiles(t, l.Dir()); len(got) != 3 {
		t.Fatalf("truncation: want segment 3's files renamed .deleted, have %v", got)
	}
	waitNoDeleted(t, l.Dir())

	// A .deleted file left by a crash is removed at open.
	stray := filepath.Join(l.Dir(), segment.FileName(1, segment.LogSuffix)+segment.DeletedSuffix)
	if err := os.WriteFile(stray, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := l.Config()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := OpenLog(OpenOptions{Dir: l.Dir(), Topic: "ret", Config: cfg, CleanShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := deletedFiles(t, l2.Dir()); len(got) != 0 {
		t.Fatalf("leftover .deleted files after open: %v", got)
	}
}

// TestFileDeleteDelayCleanerSwap: a cleaning's replaced segments are renamed .deleted (freeing the
// name for the cleaned segment) and removed after the delay; the log reopens intact.
func TestFileDeleteDelayCleanerSwap(t *testing.T) {
	clock := newTestClock()
	dir := filepath.Join(t.TempDir(), "compacted-0")
	cfg := compactConfig(clock)
	cfg.FileDeleteDelayMs = 200
	l := openCompacted(t, vfs.OS, dir, cfg, true, 0)
	w := newWriter(t, l, clock, 3, 30)
	w.batches(200)
	sealAll(t, l)
	c := NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20})
	mustClean(t, c, l)
	if got := deletedFiles(t, dir); len(got) == 0 {
		t.Fatal("no .deleted files right after the swap")
	}
	want := expect(w.all, l.CleanerCheckpoint(), -1)
	got, _ := storedRecords(t, l)
	sameRecords(t, "after the cleaning", got, want)
	waitNoDeleted(t, dir)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openCompacted(t, vfs.OS, dir, cfg, false, 0)
	defer l.Close()
	got, _ = storedRecords(t, l)
	sameRecords(t, "reopened", got, want)
}

// fileSize is the length of a file.
func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestPreallocate: with preallocate a new segment's .log is segment.bytes long; its logical size
// (roll by segment.bytes, retention.bytes, reads) counts only the batches; it is trimmed at roll and
// at a clean close; a crash leaves the zeros, and recovery finds the real end, torn tail or not,
// without deleting later segments for a zero tail.
func TestPreallocate(t *testing.T) {
	const segBytes = 64 << 10
	dir := filepath.Join(t.TempDir(), "p-0")
	cfg := DefaultConfig()
	cfg.SegmentBytes = segBytes
	cfg.Preallocate = true
	cfg.FlushIntervalMessages = 1 << 30
	l, err := OpenLog(OpenOptions{Dir: dir, Topic: "p", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	logPath := func(base int64) string { return filepath.Join(dir, segment.FileName(base, segment.LogSuffix)) }
	if got := fileSize(t, logPath(0)); got != segBytes {
		t.Fatalf("new segment's .log is %d bytes, want %d (preallocated)", got, segBytes)
	}
	var batches [][]byte
	appendOne := func(i int) AppendInfo {
		b := retBatch(1000, retNow+int64(i))
		batches = append(batches, append([]byte(nil), b...))
		return retAppend(t, l, b)
	}
	for i := 0; i < 10; i++ {
		appendOne(i)
	}
	if len(l.Segments()) != 1 || l.Size() != int64(10*len(batches[0])) {
		t.Fatalf("%d segments of %d bytes: the logical size must count only the batches", len(l.Segments()), l.Size())
	}
	// Rolls by segment.bytes on the logical size: about segBytes / batch size batches a segment.
	for i := 10; i < 150; i++ {
		appendOne(i)
	}
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments: segment.bytes must roll on the logical size", len(segs))
	}
	for _, s := range segs[:len(segs)-1] {
		if got := fileSize(t, logPath(s.BaseOffset())); got != s.Size() || got > segBytes {
			t.Fatalf("rolled segment %d: file %d bytes, logical %d: not trimmed at roll", s.BaseOffset(), got, s.Size())
		}
	}
	active := segs[len(segs)-1]
	if got := fileSize(t, logPath(active.BaseOffset())); got != segBytes {
		t.Fatalf("active segment's file %d bytes, want %d", got, segBytes)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	end := l.LogEndOffset()
	// A crash: copy the files as they are (the active one untrimmed), with a torn batch after the
	// last one in the active segment, and zeros after a rolled segment as if its trim were lost.
	crashDir := filepath.Join(t.TempDir(), "p-0")
	if err := os.MkdirAll(crashDir, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(crashDir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	activeCrash := filepath.Join(crashDir, segment.FileName(active.BaseOffset(), segment.LogSuffix))
	f, err := os.OpenFile(activeCrash, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := retBatch(1000, retNow+999)
	if _, err := f.WriteAt(torn[:len(torn)/2], active.Size()); err != nil { // half a batch, then zeros
		t.Fatal(err)
	}
	f.Close()
	if err := os.Truncate(filepath.Join(crashDir, segment.FileName(segs[0].BaseOffset(), segment.LogSuffix)), segBytes); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The clean close trimmed the active segment.
	if got := fileSize(t, logPath(active.BaseOffset())); got != active.Size() {
		t.Fatalf("active segment after a clean close: file %d bytes, logical %d", got, active.Size())
	}
	cl, err := OpenLog(OpenOptions{Dir: crashDir, Topic: "p", Config: cfg, CleanShutdown: false, RecoveryPoint: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if cl.LogEndOffset() != end || len(cl.Segments()) != len(segs) {
		t.Fatalf("recovered log end %d with %d segments, want %d with %d", cl.LogEndOffset(), len(cl.Segments()), end, len(segs))
	}
	for _, s := range cl.Segments() {
		if got := fileSize(t, filepath.Join(crashDir, segment.FileName(s.BaseOffset(), segment.LogSuffix))); got != s.Size() {
			t.Fatalf("recovered segment %d: file %d bytes, logical %d", s.BaseOffset(), got, s.Size())
		}
	}
	// Every batch reads back as written.
	retSetHW(t, cl, end)
	off, i := int64(0), 0
	for off < end {
		sl, err := cl.Read(off, 1, ReadUpToHighWatermark)
		if err != nil || sl.Length == 0 {
			t.Fatalf("read %d: %+v %v", off, sl, err)
		}
		buf := make([]byte, sl.Length)
		if _, err := sl.File.ReadAt(buf, sl.Position); err != nil {
			t.Fatal(err)
		}
		sl.Release()
		h, err := record.CheckStored(buf)
		if err != nil || h.BaseOffset != off || !bytesEqualAfterOffset(buf[:h.Size()], batches[i]) {
			t.Fatalf("batch %d at %d: %+v %v", i, off, h, err)
		}
		off, i = h.NextOffset(), i+1
	}
	// The recovered log appends at its end (no longer preallocated: the file grows).
	if info := retAppend(t, cl, retBatch(10, retNow+1000)); info.BaseOffset != end {
		t.Fatalf("append after recovery at %d, want %d", info.BaseOffset, end)
	}
}

// bytesEqualAfterOffset compares two batches but for the base offset and leader epoch the log
// assigned.
func bytesEqualAfterOffset(stored, built []byte) bool {
	// baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic ...
	return len(stored) == len(built) && string(stored[8:12]) == string(built[8:12]) && string(stored[16:]) == string(built[16:])
}

// TestFlushMsZero: flush.ms=0 (FlushOnAppend) fdatasyncs after every append even with page-cache
// acks, while without it and with no timer nothing is flushed until flush.messages is reached.
func TestFlushMsZero(t *testing.T) {
	batch := func() []byte {
		return record.Build(nil, record.BuildOptions{BaseTimestamp: retNow, ProducerID: -1, BaseSequence: -1}, []record.Record{{Value: []byte("v")}})
	}
	flushedWithin := func(l *Log, d time.Duration) bool {
		end := l.LogEndOffset()
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if l.flush.flushed.Load() >= end {
				return true
			}
		}
		return false
	}
	for _, onAppend := range []bool{true, false} {
		l, _ := retOpen(t, func(c *Config) { c.FlushIntervalMessages = 1 << 40; c.FlushIntervalMs = 0; c.FlushOnAppend = onAppend })
		retAppend(t, l, batch())
		flushedWithin(l, 200*time.Millisecond) // a new log's first flush cycle may take the first batch along
		for i := 0; i < 3; i++ {
			retAppend(t, l, batch())
			if got := flushedWithin(l, 300*time.Millisecond); got != onAppend {
				t.Fatalf("flush.ms=0 %v: append %d flushed within 300 ms: %v", onAppend, i, got)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
