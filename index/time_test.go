package index

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"
)

// timeEntry is one entry of the sorted-slice oracle for the time index.
type timeEntry struct{ timestamp, offset int64 }

// timeOracle answers Lookup and LookupBefore from a sorted slice.
type timeOracle struct {
	base    int64
	entries []timeEntry
}

// lastBelow returns the last entry whose timestamp is < bound, or (-1, base).
func (o *timeOracle) lastBelow(bound int64) (int64, int64) {
	i := sort.Search(len(o.entries), func(i int) bool { return o.entries[i].timestamp >= bound }) - 1
	if i < 0 {
		return -1, o.base
	}
	return o.entries[i].timestamp, o.entries[i].offset
}

func (o *timeOracle) lookup(target int64) (int64, int64) {
	if target == math.MaxInt64 {
		if n := len(o.entries); n > 0 {
			return o.entries[n-1].timestamp, o.entries[n-1].offset
		}
		return -1, o.base
	}
	return o.lastBelow(target + 1)
}

func (o *timeOracle) truncateTo(offset int64) {
	o.entries = o.entries[:sort.Search(len(o.entries), func(i int) bool { return o.entries[i].offset >= offset })]
}

func (o *timeOracle) last() (int64, int64) {
	if n := len(o.entries); n > 0 {
		return o.entries[n-1].timestamp, o.entries[n-1].offset
	}
	return -1, o.base
}

// timestampTargets returns timestamps around every entry, the extremes and random values.
func (o *timeOracle) timestampTargets(rng *rand.Rand) []int64 {
	ts := []int64{math.MinInt64, -2, -1, 0, 1, math.MaxInt64}
	for _, e := range o.entries {
		ts = append(ts, e.timestamp-1, e.timestamp, e.timestamp+1)
	}
	if n := len(o.entries); n > 0 {
		for range 200 {
			ts = append(ts, rng.Int64N(o.entries[n-1].timestamp+10))
		}
	}
	return ts
}

// offsetTargets returns offsets around every entry and the base.
func (o *timeOracle) offsetTargets() []int64 {
	ts := []int64{math.MinInt64, o.base - 1, o.base, o.base + 1, o.base + math.MaxInt32 + 1, math.MaxInt64}
	for _, e := range o.entries {
		ts = append(ts, e.offset-1, e.offset, e.offset+1)
	}
	return ts
}

func openTime(t testing.TB, path string, base int64, maxIndexBytes int) *TimeIndex {
	t.Helper()
	x, err := OpenTimeIndex(nil, path, base, maxIndexBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// fillTime offers n random (timestamp, offset) pairs to MaybeAppend, some with timestamps that do
// not advance (not appended), and records the appended ones in the oracle. Offsets sometimes repeat.
func fillTime(t testing.TB, x *TimeIndex, o *timeOracle, rng *rand.Rand, n int) {
	t.Helper()
	timestamp, offset := x.LastEntry()
	if timestamp < 0 {
		timestamp = rng.Int64N(3) - 1 // first timestamp 0 or 1 sometimes, -1 is never appended
	}
	for range n {
		offset += rng.Int64N(30)
		advance := rng.IntN(4) != 0
		ts := timestamp - rng.Int64N(5)
		if advance {
			ts = timestamp + 1 + rng.Int64N(1000)
		}
		lastTimestamp, _ := o.last()
		if err := x.MaybeAppend(ts, offset, false); err != nil {
			t.Fatalf("MaybeAppend(%d, %d): %v", ts, offset, err)
		}
		if ts > lastTimestamp {
			o.entries = append(o.entries, timeEntry{ts, offset})
			timestamp = ts
		}
	}
}

func checkTimeAgainstOracle(t *testing.T, x *TimeIndex, o *timeOracle, rng *rand.Rand) {
	t.Helper()
	if got, want := x.Entries(), len(o.entries); got != want {
		t.Fatalf("Entries() = %d, want %d", got, want)
	}
	for i, e := range o.entries {
		if ts, off := x.Entry(i); ts != e.timestamp || off != e.offset {
			t.Fatalf("Entry(%d) = (%d, %d), want (%d, %d)", i, ts, off, e.timestamp, e.offset)
		}
	}
	for _, target := range o.timestampTargets(rng) {
		gotTs, gotOff := x.Lookup(target)
		wantTs, wantOff := o.lookup(target)
		if gotTs != wantTs || gotOff != wantOff {
			t.Fatalf("%d entries: Lookup(%d) = (%d, %d), want (%d, %d)", len(o.entries), target, gotTs, gotOff, wantTs, wantOff)
		}
		gotTs, gotOff = x.LookupBefore(target)
		wantTs, wantOff = o.lastBelow(target)
		if gotTs != wantTs || gotOff != wantOff {
			t.Fatalf("%d entries: LookupBefore(%d) = (%d, %d), want (%d, %d)", len(o.entries), target, gotTs, gotOff, wantTs, wantOff)
		}
	}
	gotTs, gotOff := x.LastEntry()
	wantTs, wantOff := o.last()
	if gotTs != wantTs || gotOff != wantOff {
		t.Fatalf("LastEntry() = (%d, %d), want (%d, %d)", gotTs, gotOff, wantTs, wantOff)
	}
}

func TestTimeIndexLookupMatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	// The warm section holds 682 time entries; fillTime appends about 3 of every 4 offers.
	for _, n := range []int{0, 1, 2, 3, 17, 900, 920, 4000} {
		for _, base := range []int64{0, 1 << 40} {
			x := openTime(t, filepath.Join(t.TempDir(), "0.timeindex"), base, 1<<20)
			o := &timeOracle{base: base}
			fillTime(t, x, o, rng, n)
			checkTimeAgainstOracle(t, x, o, rng)
		}
	}
}

func TestTimeIndexMaybeAppend(t *testing.T) {
	const base = 1000
	x := openTime(t, filepath.Join(t.TempDir(), "0.timeindex"), base, 3*TimeEntrySize) // full at 2: the third is reserved
	expect := func(timestamp, offset int64, skipFullCheck bool, want error, wantEntries int) {
		t.Helper()
		if err := x.MaybeAppend(timestamp, offset, skipFullCheck); !errors.Is(err, want) {
			t.Fatalf("MaybeAppend(%d, %d, %v) = %v, want %v", timestamp, offset, skipFullCheck, err, want)
		}
		if x.Entries() != wantEntries {
			t.Fatalf("after MaybeAppend(%d, %d): Entries() = %d, want %d", timestamp, offset, x.Entries(), wantEntries)
		}
	}
	expect(-1, base, false, nil, 0) // NO_TIMESTAMP is never indexed
	expect(100, base-1, false, ErrOffsetOverflow, 0)
	expect(100, base+math.MaxInt32+1, false, ErrOffsetOverflow, 0)
	expect(100, base+10, false, nil, 1)
	expect(100, base+20, false, nil, 1)            // same timestamp: ignored
	expect(99, base+20, false, nil, 1)             // older timestamp: ignored
	expect(200, base+9, false, ErrNotMonotonic, 1) // offset goes back
	expect(50, base+9, false, ErrNotMonotonic, 1)  // even when nothing would be appended
	expect(200, base+10, false, nil, 2)            // same offset, later timestamp: appended
	if !x.IsFull() {
		t.Fatal("IsFull() = false")
	}
	expect(200, base+10, false, ErrIndexFull, 2) // full is refused first without skipFullCheck
	expect(200, base+10, true, nil, 2)           // the roll-time repeat of the last entry succeeds
	expect(300, base+11, true, nil, 3)           // the final entry takes the reserved slot (Kafka's isFull)
	expect(400, base+12, true, ErrIndexFull, 3)  // and then nothing more fits
	if ts, off := x.LastEntry(); ts != 300 || off != base+11 {
		t.Fatalf("LastEntry() = (%d, %d)", ts, off)
	}
}

func TestTimeIndexTruncateToAndReset(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const base = 77
	for range 20 {
		x := openTime(t, filepath.Join(t.TempDir(), "0.timeindex"), base, 1<<16)
		o := &timeOracle{base: base}
		fillTime(t, x, o, rng, 1+rng.IntN(2000))
		for range 4 {
			ts := o.offsetTargets()
			target := ts[rng.IntN(len(ts))]
			x.TruncateTo(target)
			o.truncateTo(target)
			checkTimeAgainstOracle(t, x, o, rng)
			fillTime(t, x, o, rng, rng.IntN(100))
			checkTimeAgainstOracle(t, x, o, rng)
		}
		x.Reset()
		o.entries = nil
		checkTimeAgainstOracle(t, x, o, rng)
		fillTime(t, x, o, rng, 10)
		checkTimeAgainstOracle(t, x, o, rng)
	}
}

func TestTimeIndexSanityCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []timeEntry // relative offsets, written straight to the file
		ok      bool
	}{
		{"empty", nil, true},
		{"one", []timeEntry{{100, 5}}, true},
		{"increasing", []timeEntry{{100, 5}, {200, 5}, {300, 9}}, true},
		{"timestamp repeats", []timeEntry{{100, 5}, {100, 9}}, false},
		{"timestamp below the first", []timeEntry{{100, 5}, {200, 6}, {50, 9}}, false},
		{"offset decreases", []timeEntry{{100, 5}, {200, 4}}, false},
		{"negative relative offset", []timeEntry{{100, -1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, len(tc.entries)*TimeEntrySize)
			for i, e := range tc.entries {
				timeTimestamp.put(buf, i, e.timestamp)
				timeRelativeOffset.put(buf, i, e.offset)
			}
			x := openTime(t, writeFile(t, buf), 1000, 1<<12)
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
