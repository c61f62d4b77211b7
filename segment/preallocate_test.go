package segment_test

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

func segFileSize(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestPreallocatedSegment: a preallocated .log is PreallocateBytes long from creation, Size counts
// only the batches, reads see them, and MarkInactive (roll) and Close trim it; RecoverTail cuts a
// zero tail as such, and reports a non-zero one as a torn tail.
func TestPreallocatedSegment(t *testing.T) {
	const prealloc = 256 << 10
	for _, how := range []string{"roll", "close"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			s := segCreate(t, dir, 0, segment.Config{IndexIntervalBytes: 256, MaxIndexBytes: 4096, PreallocateBytes: prealloc})
			path := filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
			if got := segFileSize(t, path); got != prealloc {
				t.Fatalf("created .log is %d bytes, want %d", got, prealloc)
			}
			batches := segFill(t, s, rand.New(rand.NewSource(5)), 40)
			last := batches[len(batches)-1]
			logical := last.pos + int64(len(last.data))
			if s.Size() != logical || segFileSize(t, path) != prealloc {
				t.Fatalf("size %d (want %d), file %d (want %d)", s.Size(), logical, segFileSize(t, path), prealloc)
			}
			segCheckReads(t, s, batches)
			if how == "roll" {
				if err := s.MarkInactive(); err != nil {
					t.Fatal(err)
				}
				if got := segFileSize(t, path); got != logical {
					t.Fatalf("after MarkInactive the file is %d bytes, want %d", got, logical)
				}
				segCheckReads(t, s, batches)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if got := segFileSize(t, path); got != logical {
				t.Fatalf("after Close the file is %d bytes, want %d", got, logical)
			}
		})
	}
	t.Run("recover", func(t *testing.T) {
		for _, tail := range []string{"zeros", "garbage"} {
			dir := t.TempDir()
			cfg := segment.Config{IndexIntervalBytes: 256, MaxIndexBytes: 4096, PreallocateBytes: prealloc}
			s := segCreate(t, dir, 0, cfg)
			batches := segFill(t, s, rand.New(rand.NewSource(6)), 20)
			logical := s.Size()
			path := filepath.Join(dir, segment.FileName(0, segment.LogSuffix))
			if tail == "garbage" { // half of a batch's bytes after the last one, then zeros
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt(batches[0].data[:len(batches[0].data)/2], logical); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			// A crash: the files as they are (no trim); reopen and recover.
			s.Release()
			r, err := segment.Open(vfs.OS, dir, 0, cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.RecoverTail()
			if err != nil {
				t.Fatal(err)
			}
			if res.Truncated != prealloc-logical || res.ZeroTail != (tail == "zeros") {
				t.Fatalf("%s: recovered %+v, want %d bytes cut, zero tail %v", tail, res, prealloc-logical, tail == "zeros")
			}
			if r.Size() != logical || segFileSize(t, path) != logical || r.NextOffset() != batches[len(batches)-1].h.NextOffset() {
				t.Fatalf("%s: recovered size %d, file %d, next %d", tail, r.Size(), segFileSize(t, path), r.NextOffset())
			}
			segCheckReads(t, r, batches)
			r.Close()
		}
	})
}

// TestFullTimeIndexKeepsFinalEntry: the time index is full one entry early (Kafka's
// TimeIndex.isFull reserves the last slot): the segment rolls with a slot left, and its last entry
// is the max timestamp so far after the roll.
func TestFullTimeIndexKeepsFinalEntry(t *testing.T) {
	dir := t.TempDir()
	// 4 time slots (3 for appends, 1 reserved); an index entry after every batch.
	s := segCreate(t, dir, 0, segment.Config{IndexIntervalBytes: 1, MaxIndexBytes: 4 * 12})
	next, ts := int64(0), int64(1_700_000_000_000)
	var maxTs, maxOff int64
	for i := 0; ; i++ {
		b, h := segBatch(next, 2, 10, ts)
		if !s.CanHold(h.LastOffset()) {
			break
		}
		if i > 20 {
			t.Fatal("the time index never filled")
		}
		segAppend(t, s, b, h)
		maxTs, maxOff = h.MaxTimestamp, h.LastOffset()
		next, ts = h.NextOffset(), ts+100
	}
	if got := s.TimeIndex().Entries(); got != 3 {
		t.Fatalf("time index full at %d entries, want 3 (the fourth slot reserved)", got)
	}
	if err := s.MarkInactive(); err != nil {
		t.Fatal(err)
	}
	if gotTs, gotOff := s.TimeIndex().LastEntry(); gotTs != maxTs || gotOff != maxOff {
		t.Fatalf("final entry (%d, %d) of %d entries, want (%d, %d)", gotTs, gotOff, s.TimeIndex().Entries(), maxTs, maxOff)
	}
	s.Close()
}
