package index

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// openDescriptors counts the process's open descriptors.
func openDescriptors(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(entries)
}

// An open index holds a mapping but no descriptor; trimming, growing back and syncing still work
// through the path.
func TestIndexHoldsNoDescriptor(t *testing.T) {
	dir := t.TempDir()
	before := openDescriptors(t)
	var xs []*OffsetIndex
	for i := range 20 {
		x, err := OpenOffsetIndex(nil, filepath.Join(dir, fmt.Sprintf("%020d.index", i)), int64(i)*100, 4096)
		if err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
	}
	if after := openDescriptors(t); after > before+2 {
		t.Fatalf("%d descriptors open with 20 indexes, %d before", after, before)
	}
	x := xs[0]
	if err := x.Append(10, 100); err != nil {
		t.Fatal(err)
	}
	if err := x.TrimToValidSize(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, x.Path()); got != OffsetEntrySize {
		t.Fatalf("trimmed file is %d bytes", got)
	}
	if err := x.Append(20, 200); err != nil { // grows the file back first
		t.Fatal(err)
	}
	if got := fileSize(t, x.Path()); got != 4096 {
		t.Fatalf("grown file is %d bytes", got)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	// Renamed: the new path is used.
	renamed := x.Path() + ".deleted"
	if err := x.Rename(renamed); err != nil {
		t.Fatal(err)
	}
	if err := x.TrimToValidSize(); err != nil || fileSize(t, renamed) != 2*OffsetEntrySize {
		t.Fatalf("trim after rename: %v, %d bytes", err, fileSize(t, renamed))
	}
	for _, x := range xs {
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if after := openDescriptors(t); after > before {
		t.Fatalf("%d descriptors open after close, %d before", after, before)
	}
}

// A file removed and created again under the index's name is never trimmed by the old index.
func TestIndexNeverTouchesAReplacedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.index")
	x, err := OpenOffsetIndex(nil, path, 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Append(10, 100); err != nil {
		t.Fatal(err)
	}
	if err := x.TrimToValidSize(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := x.TrimToValidSize(); err != nil { // the file is gone: nothing to trim
		t.Fatal(err)
	}
	other := make([]byte, 800)
	if err := os.WriteFile(path, other, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(20, 200); err == nil {
		t.Fatal("append to an index whose file was replaced succeeded")
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path); got != int64(len(other)) {
		t.Fatalf("the replacing file is %d bytes, want %d untouched", got, len(other))
	}
	// Unlinked: even the same name is left alone.
	y, err := OpenOffsetIndex(nil, path, 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	y.Unlinked()
	if err := y.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, path); got != 4096 {
		t.Fatalf("an unlinked index trimmed its old name: %d bytes", got)
	}
}

// An index that was grown and never trimmed (a crash) is mostly a hole: its entries are counted
// from the written pages alone.
func TestUntrimmedIndexCountedBeforeTheHole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.index")
	x, err := OpenOffsetIndex(nil, path, 0, 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 700 { // past the first page
		if err := x.Append(int64(10+i), int64(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	// A crash: the file keeps its grown length (Close would trim it, so the mapping is dropped
	// without closing, as a killed process's would be).
	if got := fileSize(t, path); got != 10<<20 {
		t.Fatalf("file %d bytes before the crash", got)
	}
	y, err := OpenOffsetIndex(nil, path, 0, 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	if y.Entries() != 700 {
		t.Fatalf("%d entries after the crash, want 700", y.Entries())
	}
	if off, pos := y.Lookup(1000); off != 709 || pos != 799 {
		t.Fatalf("lookup: %d at %d", off, pos)
	}
	_ = x.Close()
}
