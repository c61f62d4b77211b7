package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// listCountFS counts directory listings.
type listCountFS struct {
	vfs.FS
	lists atomic.Int64
}

func (f *listCountFS) ReadDir(name string) ([]os.DirEntry, error) {
	f.lists.Add(1)
	return f.FS.ReadDir(name)
}

// TestRollsDoNotListDir: a roll writes a producer-state snapshot and removes the old ones without
// listing the partition directory (the listing at every roll made a log of n segments cost
// O(n^2) and stalled a topic of small segments near 6,700 segments), and the snapshots on disk
// are those the in-memory set names, across a truncation, a retention deletion and a reopen.
func TestRollsDoNotListDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	fsys := &listCountFS{FS: vfs.OS}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 300 // a roll every batch or two
	open := func(clean bool) *Log {
		l, err := OpenLog(OpenOptions{Dir: dir, Topic: "t", Config: cfg, FS: fsys, CleanShutdown: clean})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open(true)
	openLists := fsys.lists.Load()
	var seq int32
	produce := func(n int) {
		for i := 0; i < n; i++ {
			if _, err := l.Append(idemBatch(7, 0, seq, 3)); err != nil {
				t.Fatal(err)
			}
			seq += 3
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	produce(200)
	if segs := len(l.Segments()); segs < 50 {
		t.Fatalf("%d segments after 200 batches: rolls expected", segs)
	}
	if got := fsys.lists.Load() - openLists; got != 0 {
		t.Fatalf("%d directory listings during %d rolls, want 0", got, len(l.Segments()))
	}
	onDisk := func() []int64 {
		offs, err := snapshotOffsets(vfs.OS, dir)
		if err != nil {
			t.Fatal(err)
		}
		return offs
	}
	same := func(what string) {
		t.Helper()
		mem, err := l.snaps.list(fsys, dir)
		if err != nil {
			t.Fatal(err)
		}
		disk := onDisk()
		if len(mem) != len(disk) {
			t.Fatalf("%s: snapshots in memory %v, on disk %v", what, mem, disk)
		}
		for i := range mem {
			if mem[i] != disk[i] {
				t.Fatalf("%s: snapshots in memory %v, on disk %v", what, mem, disk)
			}
		}
	}
	same("after the rolls")
	if n := len(onDisk()); n < 50 {
		t.Fatalf("%d snapshots on disk, want one per roll", n)
	}
	// A truncation removes the snapshots past the new end.
	cut := l.LogEndOffset() / 2
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	for _, o := range onDisk() {
		if o > cut {
			t.Fatalf("snapshot at %d left after truncating to %d", o, cut)
		}
	}
	same("after the truncation")
	seq = int32(l.LogEndOffset())
	produce(20)
	// Deleting segments below a new log start: the next roll removes their snapshots.
	start := l.Segments()[len(l.Segments())/2].BaseOffset()
	if err := l.SetHighWatermark(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecordsBefore(start); err != nil {
		t.Fatal(err)
	}
	produce(5)
	for _, o := range onDisk() {
		if o < l.Segments()[0].BaseOffset() {
			t.Fatalf("snapshot at %d left below the first segment %d", o, l.Segments()[0].BaseOffset())
		}
	}
	same("after the deletion")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(true)
	defer l.Close()
	same("after the reopen")
	if _, err := l.Append(idemBatch(7, 0, seq, 3)); err != nil {
		t.Fatalf("the producer state did not survive: %v", err)
	}
}

// TestWriteBurstStaysUnderCeiling: produce bursts to more partitions than the descriptor ceiling
// lets hold open at once, each append awaited durable as the broker does. The segments being
// written are settled under pressure (segment.Pressure, Manager.settleUnderPressure) as soon as
// they are synced, so the descriptors and index mappings all segments hold stay near the ceiling
// instead of one per partition written (before, a partition kept its descriptor for one to two
// seconds after its last append), no append fails, and every partition reads back.
func TestWriteBurstStaysUnderCeiling(t *testing.T) {
	skipWithBoundedCaches(t)
	const parts, rounds, workers = 160, 4, 4
	fds0, maps0 := segment.Usage()
	const ceil, cacheSize = 60, 40
	segment.SetLogDescriptorCacheSize(cacheSize)
	segment.SetIndexMappingCacheSize(cacheSize)
	segment.SetCeilings(fds0+ceil, maps0+2*ceil)
	t.Cleanup(func() {
		segment.SetCeilings(0, 0)
		segment.SetLogDescriptorCacheSize(0)
		segment.SetIndexMappingCacheSize(0)
	})
	m := mgrOpen(t, mgrConfig(t.TempDir()))
	defer m.Close()
	logs := make([]*Log, parts)
	for i := range logs {
		l, err := m.CreateLog(TopicPartition{"burst", int32(i)}, [16]byte{1})
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = l
	}
	if fds, maps := segment.Usage(); true {
		t.Logf("after creating: %d descriptors, %d mappings; caches %+v pressure %v", fds-fds0, maps-maps0, segment.Caches(), segment.UnderPressure())
	}
	var maxFDs, maxMaps atomic.Int64
	sample := func() {
		fds, maps := segment.Usage()
		for v, m := fds-fds0, &maxFDs; v > m.Load(); {
			if m.CompareAndSwap(m.Load(), v) {
				break
			}
		}
		for v, m := maps-maps0, &maxMaps; v > m.Load(); {
			if m.CompareAndSwap(m.Load(), v) {
				break
			}
		}
	}
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < parts; i += workers {
					l := logs[i]
					info, err := l.Append(record.Build(nil, record.BuildOptions{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, BaseSequence: -1},
						[]record.Record{{Key: []byte("k"), Value: []byte("burst")}}))
					if err == nil {
						err = l.AwaitDurable(info.LastOffset + 1)
					}
					if err != nil {
						errs <- fmt.Errorf("round %d, partition %d: %w", r, i, err)
						return
					}
					sample()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		fds, maps := segment.Usage()
		t.Logf("round %d: %d descriptors (peak %d), %d mappings; caches %+v", r, fds-fds0, maxFDs.Load(), maps-maps0, segment.Caches())
	}
	// The pressure sweep runs asynchronously (at most every pressureSettleGap): what was opened
	// between two sweeps may pass the ceiling by a few; one per partition written would be 160.
	if got := maxFDs.Load(); got > ceil+parts/8 {
		t.Fatalf("descriptors peaked at %d during the bursts; ceiling %d, %d partitions", got, ceil, parts)
	}
	if got := maxMaps.Load(); got > 2*(ceil+parts/8) {
		t.Fatalf("index mappings peaked at %d during the bursts; ceiling %d, %d partitions", got, 2*ceil, parts)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		fds, _ := segment.Usage()
		if fds-fds0 <= ceil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors held after the bursts, ceiling %d", fds-fds0, ceil)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, l := range logs {
		if got := l.LogEndOffset(); got != rounds {
			t.Fatalf("partition %d: log end %d, want %d", i, got, rounds)
		}
		if err := l.SetHighWatermark(rounds); err != nil {
			t.Fatal(err)
		}
		sl, err := l.Read(0, 1<<20, ReadUpToLogEnd)
		if err != nil {
			t.Fatalf("read partition %d: %v", i, err)
		}
		if n := len(orcSliceBytes(t, sl)); n == 0 {
			t.Fatalf("partition %d reads nothing", i)
		}
	}
	t.Logf("peaks over the ceilings' base: %d descriptors (ceiling %d), %d mappings; caches %+v", maxFDs.Load(), ceil, maxMaps.Load(), segment.Caches())
}

// TestRecoveryPointCheckpointedAfterRoll: once a segment rolls and is synced, the recovery-point
// checkpoint follows within about a second (Manager.checkpointRolled), not at the periodic
// checkpoint (an hour here), so a crash then recovers only what was written since; an idle log
// does not rewrite it.
func TestRecoveryPointCheckpointedAfterRoll(t *testing.T) {
	dir := t.TempDir()
	cfg := mgrConfig(dir)
	cfg.CheckpointInterval = time.Hour
	cfg.Default.SegmentBytes = 300
	m := mgrOpen(t, cfg)
	defer m.Close()
	tp := TopicPartition{"rp", 0}
	l, err := m.CreateLog(tp, [16]byte{9})
	if err != nil {
		t.Fatal(err)
	}
	mgrAppend(t, l, 2, 20)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments: rolls expected", len(segs))
	}
	lastBase := segs[len(segs)-1].BaseOffset()
	path := filepath.Join(dir, RecoveryPointCheckpointFile)
	deadline := time.Now().Add(5 * time.Second)
	for {
		rps, err := ReadCheckpoint(path)
		if err == nil && rps[tp] >= lastBase {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recovery point in the checkpoint %d (%v), want at least %d (the active segment's base)", rps[tp], err, lastBase)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if st2, err := os.Stat(path); err != nil || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatalf("checkpoint rewritten with nothing rolled (%v)", err)
	}
}
