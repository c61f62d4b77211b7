package engine

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

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
