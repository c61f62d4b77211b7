package index

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// writeFile writes buf to a new file and returns its path.
func writeFile(t *testing.T, buf []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.idx")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

func TestOffsetIndexTrimAndReopen(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const base, maxBytes = 4000, 64 << 10
	path := filepath.Join(t.TempDir(), "00000000000000004000.index")
	x := openOffset(t, path, base, maxBytes)
	if got := fileSize(t, path); got != maxBytes {
		t.Fatalf("new file is %d bytes, want %d", got, maxBytes)
	}
	o := &offsetOracle{base: base}
	fillOffset(t, x, o, rng, 1500)
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got, want := fileSize(t, path), int64(1500*OffsetEntrySize); got != want {
		t.Fatalf("closed file is %d bytes, want %d", got, want)
	}

	x = openOffset(t, path, base, maxBytes)
	if err := x.SanityCheck(); err != nil {
		t.Fatal(err)
	}
	checkOffsetAgainstOracle(t, x, o, rng)
	fillOffset(t, x, o, rng, 100)
	checkOffsetAgainstOracle(t, x, o, rng)

	// A trim (roll) keeps the mapping; the next append grows the file back first.
	if err := x.TrimToValidSize(); err != nil {
		t.Fatal(err)
	}
	if got, want := fileSize(t, path), int64(1600*OffsetEntrySize); got != want {
		t.Fatalf("trimmed file is %d bytes, want %d", got, want)
	}
	checkOffsetAgainstOracle(t, x, o, rng)
	fillOffset(t, x, o, rng, 600) // crosses pages that were cut off by the trim
	if got := fileSize(t, path); got != maxBytes {
		t.Fatalf("file is %d bytes after appending to a trimmed index, want %d", got, maxBytes)
	}
	checkOffsetAgainstOracle(t, x, o, rng)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x = openOffset(t, path, base, maxBytes)
	checkOffsetAgainstOracle(t, x, o, rng)
}

func TestTimeIndexTrimAndReopen(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const base, maxBytes = 123, 60 << 10
	path := filepath.Join(t.TempDir(), "00000000000000000123.timeindex")
	x := openTime(t, path, base, maxBytes)
	o := &timeOracle{base: base}
	fillTime(t, x, o, rng, 1500)
	n := len(o.entries)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := fileSize(t, path), int64(n*TimeEntrySize); got != want {
		t.Fatalf("closed file is %d bytes, want %d", got, want)
	}
	x = openTime(t, path, base, maxBytes)
	if err := x.SanityCheck(); err != nil {
		t.Fatal(err)
	}
	checkTimeAgainstOracle(t, x, o, rng)
	fillTime(t, x, o, rng, 100)
	checkTimeAgainstOracle(t, x, o, rng)
	if err := x.TrimToValidSize(); err != nil {
		t.Fatal(err)
	}
	fillTime(t, x, o, rng, 800)
	checkTimeAgainstOracle(t, x, o, rng)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x = openTime(t, path, base, maxBytes)
	checkTimeAgainstOracle(t, x, o, rng)
}

// An index that was never trimmed (the broker crashed) is padded with zero entries up to its
// maximum size; they are not counted as entries.
func TestUntrimmedIndexReopensWithWrittenEntries(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{0, 1, 2, 3, 1000, 4095, 4096} {
		dir := t.TempDir()
		x := openOffset(t, filepath.Join(dir, "a.index"), 0, 4096*OffsetEntrySize)
		o := &offsetOracle{}
		fillOffset(t, x, o, rng, n)
		y := openTime(t, filepath.Join(dir, "a.timeindex"), 0, 4096*TimeEntrySize)
		for i := range n {
			// The last slot is reserved for a segment's final entry (skipFullCheck).
			if err := y.MaybeAppend(int64(i+1)*10, int64(i), i == 4095); err != nil {
				t.Fatal(err)
			}
		}
		// Copy the files while they are still untrimmed, as a crash would leave them.
		for _, name := range []string{"a.index", "a.timeindex"} {
			buf, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "b"+name[1:]), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		x2 := openOffset(t, filepath.Join(dir, "b.index"), 0, 4096*OffsetEntrySize)
		checkOffsetAgainstOracle(t, x2, o, rng)
		if err := x2.SanityCheck(); err != nil {
			t.Fatal(err)
		}
		y2 := openTime(t, filepath.Join(dir, "b.timeindex"), 0, 4096*TimeEntrySize)
		if y2.Entries() != n {
			t.Fatalf("untrimmed time index with %d entries reopens with %d", n, y2.Entries())
		}
		if err := y2.SanityCheck(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMaxIndexBytes(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		maxIndexBytes, wantOffset, wantTime int
	}{
		{0, 1, 1}, {-5, 1, 1}, {7, 1, 1}, {25, 3, 2}, {10485760, 1310720, 873813},
	} {
		x := openOffset(t, filepath.Join(dir, "x.index"), 0, tc.maxIndexBytes)
		y := openTime(t, filepath.Join(dir, "x.timeindex"), 0, tc.maxIndexBytes)
		if x.MaxEntries() != tc.wantOffset || y.MaxEntries() != tc.wantTime {
			t.Fatalf("maxIndexBytes %d: MaxEntries() = %d, %d; want %d, %d",
				tc.maxIndexBytes, x.MaxEntries(), y.MaxEntries(), tc.wantOffset, tc.wantTime)
		}
		if err := errors.Join(x.Delete(), y.Delete()); err != nil {
			t.Fatal(err)
		}
	}
}

// A file longer than the configured maximum (the maximum was lowered) keeps all its entries.
func TestIndexLongerThanMaximum(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	path := filepath.Join(t.TempDir(), "0.index")
	x := openOffset(t, path, 0, 100*OffsetEntrySize)
	o := &offsetOracle{}
	fillOffset(t, x, o, rng, 100)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x = openOffset(t, path, 0, 10*OffsetEntrySize)
	if x.MaxEntries() != 100 || !x.IsFull() {
		t.Fatalf("MaxEntries() = %d, IsFull() = %v; want 100, true", x.MaxEntries(), x.IsFull())
	}
	if err := x.SanityCheck(); err != nil {
		t.Fatal(err)
	}
	checkOffsetAgainstOracle(t, x, o, rng)
	if err := x.Append(1<<30, 1<<30); !errors.Is(err, ErrIndexFull) {
		t.Fatalf("Append = %v, want ErrIndexFull", err)
	}
}

// Corruption loop: garbage written over the tail of a closed index is reported by SanityCheck after
// reopening. The garbage starts at a random entry, in the bytes that make the last entry fail
// (SanityCheck only looks at the tail: like Kafka's, it is a cheap check, not a proof).
func TestSanityCheckCatchesCorruptTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	type sanityChecker interface{ SanityCheck() error }
	kinds := []struct {
		name      string
		entrySize int
		write     func(path string) // writes at least two entries and closes
		open      func(path string) sanityChecker
	}{
		{"offset", OffsetEntrySize, func(path string) {
			x := openOffset(t, path, 100, 1<<16)
			fillOffset(t, x, &offsetOracle{base: 100}, rng, 2+rng.IntN(500))
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
		}, func(path string) sanityChecker { return openOffset(t, path, 100, 1<<16) }},
		{"time", TimeEntrySize, func(path string) {
			y := openTime(t, path, 100, 1<<16)
			for y.Entries() < 2 {
				fillTime(t, y, &timeOracle{base: 100}, rng, 2+rng.IntN(500))
			}
			if err := y.Close(); err != nil {
				t.Fatal(err)
			}
		}, func(path string) sanityChecker { return openTime(t, path, 100, 1<<16) }},
	}
	corruptions := []struct {
		name    string
		corrupt func(buf []byte, entrySize int) []byte
	}{
		{"0xff from a random entry on", func(buf []byte, entrySize int) []byte {
			// Starting in the first 4 bytes of an entry makes the last entry's relative offset
			// negative (offset index: or its position).
			for i := rng.IntN(len(buf)/entrySize)*entrySize + rng.IntN(4); i < len(buf); i++ {
				buf[i] = 0xff
			}
			return buf
		}},
		{"an earlier entry repeated at the end", func(buf []byte, entrySize int) []byte {
			n := len(buf) / entrySize
			copy(buf[(n-1)*entrySize:], buf[rng.IntN(n-1)*entrySize:][:entrySize])
			return buf
		}},
		{"a torn entry at the end", func(buf []byte, entrySize int) []byte {
			return append(buf, make([]byte, 1+rng.IntN(entrySize-1))...)
		}},
	}
	for _, kind := range kinds {
		for _, c := range corruptions {
			t.Run(kind.name+"/"+c.name, func(t *testing.T) {
				for range 20 {
					path := filepath.Join(t.TempDir(), "0.idx")
					kind.write(path)
					buf, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, c.corrupt(buf, kind.entrySize), 0o644); err != nil {
						t.Fatal(err)
					}
					if err := kind.open(path).SanityCheck(); !errors.Is(err, ErrCorruptIndex) {
						t.Fatalf("SanityCheck() = %v, want ErrCorruptIndex", err)
					}
				}
			})
		}
	}
}

// Once an index with a torn length is emptied for a rebuild, it is sane again and closes at a
// whole number of entries.
func TestResetClearsMisalignedLength(t *testing.T) {
	buf := make([]byte, 3*OffsetEntrySize+5)
	for i := range 3 {
		offsetRelativeOffset.put(buf, i, int64(i+1))
		offsetPosition.put(buf, i, int64(100*(i+1)))
	}
	path := writeFile(t, buf)
	x := openOffset(t, path, 0, 1<<12)
	if x.Entries() != 3 {
		t.Fatalf("Entries() = %d, want 3", x.Entries())
	}
	if err := x.SanityCheck(); !errors.Is(err, ErrCorruptIndex) {
		t.Fatalf("SanityCheck() = %v, want ErrCorruptIndex", err)
	}
	x.Reset()
	if err := x.SanityCheck(); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(5, 100); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path); got != OffsetEntrySize {
		t.Fatalf("file is %d bytes, want %d", got, OffsetEntrySize)
	}
}

func TestRenameAndDelete(t *testing.T) {
	dir := t.TempDir()
	x := openOffset(t, filepath.Join(dir, "0.index"), 0, 1<<12)
	if err := x.Append(3, 100); err != nil {
		t.Fatal(err)
	}
	renamed := filepath.Join(dir, "0.index.swap")
	if err := x.Rename(renamed); err != nil {
		t.Fatal(err)
	}
	if x.Path() != renamed {
		t.Fatalf("Path() = %q after Rename", x.Path())
	}
	if err := x.Append(4, 200); err != nil { // the mapping survives the rename
		t.Fatal(err)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, renamed); got != 2*OffsetEntrySize {
		t.Fatalf("renamed file is %d bytes, want %d", got, 2*OffsetEntrySize)
	}
	if err := x.Append(5, 300); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if err := x.Flush(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close = %v, want ErrClosed", err)
	}
	if err := x.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(renamed); !os.IsNotExist(err) {
		t.Fatalf("file still there after Delete: %v", err)
	}
	if err := x.Delete(); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
}

// One appender, several readers: every lookup returns an entry that was appended (or the base),
// never a torn one, and never one older than what was published when the lookup began.
// The entries follow fixed formulas so a reader can recognise a valid one.
func TestConcurrentAppendAndLookup(t *testing.T) {
	const base, n, readers = 1000, 20000, 4
	dir := t.TempDir()
	x := openOffset(t, filepath.Join(dir, "0.index"), base, n*OffsetEntrySize)
	y := openTime(t, filepath.Join(dir, "0.timeindex"), base, n*TimeEntrySize)
	offsetOf := func(i int64) int64 { return base + 3*i + 1 }
	positionOf := func(i int64) int64 { return 7*i + 5 }
	timestampOf := func(i int64) int64 { return 10_000 + 10*i }
	timeOffsetOf := func(i int64) int64 { return base + 2*i }

	var done atomic.Bool
	var concurrentLookups atomic.Int64
	var wg, started sync.WaitGroup
	started.Add(readers)
	errs := make(chan error, readers+1)
	wg.Go(func() {
		defer done.Store(true)
		started.Wait() // the readers are looking up while the entries arrive
		for i := range int64(n) {
			if err := x.Append(offsetOf(i), positionOf(i)); err != nil {
				errs <- err
				return
			}
			if err := y.MaybeAppend(timestampOf(i), timeOffsetOf(i), i == int64(n)-1); err != nil { // the last: the reserved slot
				errs <- err
				return
			}
		}
	})
	for r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 99))
			started.Done()
			for ; !done.Load(); concurrentLookups.Add(1) {
				// Offset index: the entry for i is valid iff its offset and position match.
				published := int64(x.Entries())
				target := offsetOf(rng.Int64N(n+10)) - 1 + rng.Int64N(3)
				off, pos := x.Lookup(target)
				i := (off - base - 1) / 3
				switch {
				case off == base && pos == 0:
					i = -1
				case off > target || (off-base-1)%3 != 0 || pos != positionOf(i):
					errs <- fmt.Errorf("offset Lookup(%d) = (%d, %d): not an appended entry", target, off, pos)
					return
				}
				if want := min(published-1, (target-base-1)/3); target > base && i < want {
					errs <- fmt.Errorf("offset Lookup(%d) = entry %d, but entry %d was published", target, i, want)
					return
				}

				published = int64(y.Entries())
				ts := timestampOf(rng.Int64N(n+10)) - 1 + rng.Int64N(3)
				gotTs, gotOff := y.Lookup(ts)
				j := (gotTs - 10_000) / 10
				switch {
				case gotTs == -1 && gotOff == base:
					j = -1
				case gotTs > ts || (gotTs-10_000)%10 != 0 || gotOff != timeOffsetOf(j):
					errs <- fmt.Errorf("time Lookup(%d) = (%d, %d): not an appended entry", ts, gotTs, gotOff)
					return
				}
				if want := min(published-1, (ts-10_000)/10); ts >= 10_000 && j < want {
					errs <- fmt.Errorf("time Lookup(%d) = entry %d, but entry %d was published", ts, j, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d lookups of each index during %d appends", concurrentLookups.Load(), n)
}
