package index

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"
)

// offsetEntry is one entry of the sorted-slice oracle for the offset index.
type offsetEntry struct{ offset, position int64 }

// offsetOracle answers Lookup from a sorted slice.
type offsetOracle struct {
	base    int64
	entries []offsetEntry
}

func (o *offsetOracle) lookup(target int64) (int64, int64) {
	i := sort.Search(len(o.entries), func(i int) bool { return o.entries[i].offset > target }) - 1
	if i < 0 {
		return o.base, 0
	}
	return o.entries[i].offset, o.entries[i].position
}

func (o *offsetOracle) truncateTo(offset int64) {
	o.entries = o.entries[:sort.Search(len(o.entries), func(i int) bool { return o.entries[i].offset >= offset })]
}

// targets returns lookup targets covering the edges: below the base, the base, every entry exactly
// and either side of it, past the last entry, the int32 boundary, and random values in between.
func (o *offsetOracle) targets(rng *rand.Rand) []int64 {
	ts := []int64{math.MinInt64, o.base - 1000, o.base - 1, o.base, o.base + 1,
		o.base + math.MaxInt32, o.base + math.MaxInt32 + 1, math.MaxInt64}
	for _, e := range o.entries {
		ts = append(ts, e.offset-1, e.offset, e.offset+1)
	}
	if n := len(o.entries); n > 0 {
		last := o.entries[n-1].offset
		for range 200 {
			ts = append(ts, o.base+rng.Int64N(last-o.base+10))
		}
	}
	return ts
}

func openOffset(t testing.TB, path string, base int64, maxIndexBytes int) *OffsetIndex {
	t.Helper()
	x, err := OpenOffsetIndex(nil, path, base, maxIndexBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// fillOffset appends n random increasing entries to x and to the oracle.
func fillOffset(t testing.TB, x *OffsetIndex, o *offsetOracle, rng *rand.Rand, n int) {
	t.Helper()
	offset, position := x.LastOffset(), int64(0)
	if len(o.entries) > 0 {
		position = o.entries[len(o.entries)-1].position
	}
	for range n {
		offset += 1 + rng.Int64N(40)
		position += 1 + rng.Int64N(4000)
		if err := x.Append(offset, position); err != nil {
			t.Fatalf("append %d at %d: %v", offset, position, err)
		}
		o.entries = append(o.entries, offsetEntry{offset, position})
	}
}

func checkOffsetAgainstOracle(t *testing.T, x *OffsetIndex, o *offsetOracle, rng *rand.Rand) {
	t.Helper()
	if got, want := x.Entries(), len(o.entries); got != want {
		t.Fatalf("Entries() = %d, want %d", got, want)
	}
	for i, e := range o.entries {
		if off, pos := x.Entry(i); off != e.offset || pos != e.position {
			t.Fatalf("Entry(%d) = (%d, %d), want (%d, %d)", i, off, pos, e.offset, e.position)
		}
	}
	for _, target := range o.targets(rng) {
		gotOff, gotPos := x.Lookup(target)
		wantOff, wantPos := o.lookup(target)
		if gotOff != wantOff || gotPos != wantPos {
			t.Fatalf("%d entries: Lookup(%d) = (%d, %d), want (%d, %d)",
				len(o.entries), target, gotOff, gotPos, wantOff, wantPos)
		}
	}
	wantLast := o.base
	if n := len(o.entries); n > 0 {
		wantLast = o.entries[n-1].offset
	}
	if got := x.LastOffset(); got != wantLast {
		t.Fatalf("LastOffset() = %d, want %d", got, wantLast)
	}
}

func TestOffsetIndexLookupMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	// Sizes on both sides of the warm section (1024 offset entries), and a large base offset.
	for _, n := range []int{0, 1, 2, 3, 17, 1024, 1025, 1026, 3000} {
		for _, base := range []int64{0, 1 << 40} {
			x := openOffset(t, filepath.Join(t.TempDir(), "0.index"), base, 1<<20)
			o := &offsetOracle{base: base}
			fillOffset(t, x, o, rng, n)
			checkOffsetAgainstOracle(t, x, o, rng)
		}
	}
}

func TestOffsetIndexAppendRefusals(t *testing.T) {
	const base = 1000
	x := openOffset(t, filepath.Join(t.TempDir(), "0.index"), base, 3*OffsetEntrySize)
	if x.MaxEntries() != 3 {
		t.Fatalf("MaxEntries() = %d, want 3", x.MaxEntries())
	}
	refuse := func(offset, position int64, want error) {
		t.Helper()
		if err := x.Append(offset, position); !errors.Is(err, want) {
			t.Fatalf("Append(%d, %d) = %v, want %v", offset, position, err, want)
		}
	}
	refuse(base-1, 10, ErrOffsetOverflow)
	refuse(base+math.MaxInt32+1, 10, ErrOffsetOverflow)
	refuse(base+5, -1, ErrOffsetOverflow)
	refuse(base+5, math.MaxInt32+1, ErrOffsetOverflow)
	if err := x.Append(base+math.MaxInt32-10, 100); err != nil {
		t.Fatal(err)
	}
	refuse(base+math.MaxInt32-10, 200, ErrNotMonotonic) // same offset
	refuse(base+math.MaxInt32-11, 200, ErrNotMonotonic) // smaller offset
	refuse(base+math.MaxInt32-9, 100, ErrNotMonotonic)  // same position
	refuse(base+math.MaxInt32-9, 99, ErrNotMonotonic)   // smaller position
	if err := x.Append(base+math.MaxInt32-9, 101); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(base+math.MaxInt32, math.MaxInt32); err != nil {
		t.Fatal(err)
	}
	if !x.IsFull() {
		t.Fatal("IsFull() = false after MaxEntries appends")
	}
	refuse(base+math.MaxInt32+1, math.MaxInt32, ErrIndexFull)
	if x.Entries() != 3 {
		t.Fatalf("Entries() = %d after refusals, want 3", x.Entries())
	}
	if off, pos := x.Lookup(math.MaxInt64); off != base+math.MaxInt32 || pos != math.MaxInt32 {
		t.Fatalf("Lookup(max) = (%d, %d)", off, pos)
	}
}

func TestOffsetIndexTruncateToAndReset(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const base = 500
	for range 20 {
		x := openOffset(t, filepath.Join(t.TempDir(), "0.index"), base, 1<<16)
		o := &offsetOracle{base: base}
		fillOffset(t, x, o, rng, 1+rng.IntN(2000))
		ts := o.targets(rng)
		for range 4 {
			target := ts[rng.IntN(len(ts))]
			x.TruncateTo(target)
			o.truncateTo(target)
			checkOffsetAgainstOracle(t, x, o, rng)
			fillOffset(t, x, o, rng, rng.IntN(100)) // appends continue after the truncation point
			checkOffsetAgainstOracle(t, x, o, rng)
		}
		x.Reset()
		o.entries = nil
		checkOffsetAgainstOracle(t, x, o, rng)
		fillOffset(t, x, o, rng, 10)
		checkOffsetAgainstOracle(t, x, o, rng)
	}
}

func TestOffsetIndexSanityCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []offsetEntry // relative offsets, written straight to the file
		ok      bool
	}{
		{"empty", nil, true},
		{"one", []offsetEntry{{5, 100}}, true},
		{"increasing", []offsetEntry{{5, 100}, {9, 300}}, true},
		{"offset repeats", []offsetEntry{{5, 100}, {5, 300}}, false},
		{"offset decreases", []offsetEntry{{5, 100}, {4, 300}}, false},
		{"position repeats", []offsetEntry{{5, 100}, {9, 100}}, false},
		{"negative relative offset", []offsetEntry{{-1, 100}}, false},
		{"negative position", []offsetEntry{{3, -100}}, false},
		{"zero position after the first entry", []offsetEntry{{5, 100}, {9, 0}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, len(tc.entries)*OffsetEntrySize)
			for i, e := range tc.entries {
				offsetRelativeOffset.put(buf, i, e.offset)
				offsetPosition.put(buf, i, e.position)
			}
			path := writeFile(t, buf)
			x := openOffset(t, path, 1000, 1<<12)
			if x.Entries() != len(tc.entries) {
				t.Fatalf("Entries() = %d, want %d", x.Entries(), len(tc.entries))
			}
			err := x.SanityCheck()
			if tc.ok && err != nil {
				t.Fatalf("SanityCheck() = %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, ErrCorruptIndex) {
				t.Fatalf("SanityCheck() = %v, want ErrCorruptIndex", err)
			}
		})
	}
}
