package index

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// lookupTargets returns 1024 targets drawn from entries [from, to) of a key sequence, each either an
// entry's key exactly or one past it.
func lookupTargets(rng *rand.Rand, key func(i int) int64, from, to int) []int64 {
	targets := make([]int64, 1024)
	for i := range targets {
		targets[i] = key(from+rng.IntN(to-from)) + rng.Int64N(2)
	}
	return targets
}

// warmAndCold splits n entries into the warm section (the last warmSectionBytes of entries) and the
// rest; with fewer entries than the warm section holds, cold targets are drawn from all of them.
func warmAndCold(n, entrySize int) (warmFrom, coldTo int) {
	warmFrom = max(0, n-warmSectionBytes/entrySize)
	if warmFrom == 0 {
		return 0, n
	}
	return warmFrom, warmFrom
}

var benchSizes = []struct {
	name    string
	entries int
}{{"1k", 1000}, {"100k", 100_000}}

func BenchmarkOffsetIndexLookup(b *testing.B) {
	for _, size := range benchSizes {
		x := openOffset(b, filepath.Join(b.TempDir(), "0.index"), 1<<40, size.entries*OffsetEntrySize)
		for i := range size.entries {
			if err := x.Append(1<<40+int64(i)*10+3, int64(i)*1000+100); err != nil {
				b.Fatal(err)
			}
		}
		key := func(i int) int64 { off, _ := x.Entry(i); return off }
		warmFrom, coldTo := warmAndCold(size.entries, OffsetEntrySize)
		for _, temp := range []struct {
			name     string
			from, to int
		}{{"warm", warmFrom, size.entries}, {"cold", 0, coldTo}} {
			targets := lookupTargets(rand.New(rand.NewPCG(1, 1)), key, temp.from, temp.to)
			b.Run(fmt.Sprintf("entries=%s/%s", size.name, temp.name), func(b *testing.B) {
				b.ReportAllocs()
				var sink int64
				i := 0
				for b.Loop() {
					_, pos := x.Lookup(targets[i&1023])
					sink += pos
					i++
				}
				_ = sink
			})
		}
	}
}

func BenchmarkTimeIndexLookup(b *testing.B) {
	for _, size := range benchSizes {
		y := openTime(b, filepath.Join(b.TempDir(), "0.timeindex"), 1<<40, size.entries*TimeEntrySize)
		for i := range size.entries {
			if err := y.MaybeAppend(1_700_000_000_000+int64(i)*7, 1<<40+int64(i)*10, false); err != nil {
				b.Fatal(err)
			}
		}
		key := func(i int) int64 { ts, _ := y.Entry(i); return ts }
		warmFrom, coldTo := warmAndCold(size.entries, TimeEntrySize)
		for _, temp := range []struct {
			name     string
			from, to int
		}{{"warm", warmFrom, size.entries}, {"cold", 0, coldTo}} {
			targets := lookupTargets(rand.New(rand.NewPCG(2, 2)), key, temp.from, temp.to)
			b.Run(fmt.Sprintf("entries=%s/%s", size.name, temp.name), func(b *testing.B) {
				b.ReportAllocs()
				var sink int64
				i := 0
				for b.Loop() {
					_, off := y.LookupBefore(targets[i&1023])
					sink += off
					i++
				}
				_ = sink
			})
		}
	}
}

// Lookups are on the fetch path: they must not allocate.
func TestLookupsDoNotAllocate(t *testing.T) {
	dir := t.TempDir()
	x := openOffset(t, filepath.Join(dir, "0.index"), 0, 1<<16)
	y := openTime(t, filepath.Join(dir, "0.timeindex"), 0, 1<<16)
	for i := range int64(5000) {
		if err := x.Append(i*2+1, i*100+100); err != nil {
			t.Fatal(err)
		}
		if err := y.MaybeAppend(i*3+10, i*2, false); err != nil {
			t.Fatal(err)
		}
	}
	target := int64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		target = (target + 7919) % 16000
		x.Lookup(target)
		y.Lookup(target)
		y.LookupBefore(target)
		x.LastOffset()
		y.LastEntry()
	})
	if allocs != 0 {
		t.Fatalf("lookups allocate %.1f times per run", allocs)
	}
}
