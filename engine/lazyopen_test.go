package engine

import (
	"testing"

	"github.com/weir-mq/weir/segment"
)

// TestOpenMapsOnlyActiveIndexes: a log of many segments reopened after a clean shutdown, or after
// a crash with its recovery point in the last segment, maps the indexes of its active segment
// only; reads of any offset map what they use and return every batch.
func TestOpenMapsOnlyActiveIndexes(t *testing.T) {
	dir := t.TempDir() + "/lazy-0"
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2048
	cfg.IndexIntervalBytes = 256
	l, err := OpenLog(OpenOptions{Dir: dir, Topic: "lazy", Config: cfg, CleanShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	const batches = 200
	for i := range batches {
		if _, err := l.Append(offsetBatch(int64(i*4), 4, 1_700_000_000_000+int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	segs := len(l.Segments())
	if segs < 20 {
		t.Fatalf("%d segments, want many", segs)
	}
	want := scanLog(t, l)
	wantTsOffset, _, err := l.OffsetForTimestamp(1_700_000_000_000 + 100)
	if err != nil {
		t.Fatal(err)
	}
	recoveryPoint := l.RecoveryPoint()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, clean := range []bool{true, false} {
		_, maps0 := segment.Usage()
		l, err := OpenLog(OpenOptions{Dir: dir, Topic: "lazy", Config: cfg, CleanShutdown: clean, RecoveryPoint: recoveryPoint})
		if err != nil {
			t.Fatal(err)
		}
		// The active segment's; the last non-empty one's when the active one is empty (its last
		// batch's leader epoch is read at open); the one holding the latest leader epoch's start
		// (checked against its batch at open). Not the others.
		mapped := 0
		for _, s := range l.Segments() {
			if s.IndexesMapped() {
				mapped++
			}
		}
		_, maps := segment.Usage()
		if mapped > 3 || maps-maps0 > 3*segment.IndexMappingsPerSegment+1 {
			t.Fatalf("clean %v: %d of %d segments have mapped indexes, %d mappings", clean, mapped, segs, maps-maps0)
		}
		got := scanLog(t, l)
		if len(got) != len(want) || l.LogEndOffset() != batches*4 {
			t.Fatalf("clean %v: %d batches, end %d; want %d, %d", clean, len(got), l.LogEndOffset(), len(want), batches*4)
		}
		for i := range got {
			if got[i].Header != want[i].Header {
				t.Fatalf("clean %v: batch %d differs", clean, i)
			}
		}
		if off, _, err := l.OffsetForTimestamp(1_700_000_000_000 + 100); err != nil || off != wantTsOffset {
			t.Fatalf("clean %v: offset for timestamp: %d, %v", clean, off, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
