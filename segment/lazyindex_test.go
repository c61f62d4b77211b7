package segment_test

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/weir-mq/weir/index"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// A segment opened sealed maps nothing until a reader needs its indexes, reads exactly as an
// eagerly opened one, and keeps its index files untouched (not grown).
func TestOpenSealedMapsIndexesOnFirstUse(t *testing.T) {
	const base = 500
	cfg := segment.Config{IndexIntervalBytes: 200, MaxIndexBytes: 64 << 10}
	dir := t.TempDir()
	s := segCreate(t, dir, base, cfg)
	batches := segFill(t, s, rand.New(rand.NewSource(3)), 60)
	next, maxTs := s.NextOffset(), s.MaxTimestamp()
	if err := s.MarkInactive(); err != nil {
		t.Fatal(err)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	indexPath := filepath.Join(dir, segment.FileName(base, segment.IndexSuffix))
	st, err := os.Stat(indexPath)
	if err != nil {
		t.Fatal(err)
	}
	_, maps0 := segment.Usage()
	s, err = segment.OpenSealed(vfs.OS, dir, base, cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, maps := segment.Usage(); s.IndexesMapped() || maps != maps0 {
		t.Fatalf("opened sealed: indexes mapped %v, mappings %d -> %d", s.IndexesMapped(), maps0, maps)
	}
	if s.NextOffset() != next || s.MaxTimestamp() != maxTs || !s.IsSealed() {
		t.Fatalf("state: next %d max ts %d sealed %v, want %d %d", s.NextOffset(), s.MaxTimestamp(), s.IsSealed(), next, maxTs)
	}
	segCheckReads(t, s, batches)
	if !s.IndexesMapped() {
		t.Fatal("indexes not mapped after reads")
	}
	if _, _, found, err := s.FindTimestamp(maxTs, base); !found || err != nil {
		t.Fatalf("find the max timestamp: %v %v", found, err)
	}
	if st2, err := os.Stat(indexPath); err != nil || st2.Size() != st.Size() {
		t.Fatalf("index file grown by a sealed mapping: %d -> %v (%v)", st.Size(), st2.Size(), err)
	}
	// A truncation makes it writable again: appends go on and are indexed.
	cut := batches[30]
	if got, err := s.TruncateTo(cut.h.BaseOffset); err != nil || got != cut.h.BaseOffset {
		t.Fatalf("truncate: next %d, %v", got, err)
	}
	more := append(batches[:30:30], segFill(t, s, rand.New(rand.NewSource(4)), 40)...)
	segCheckReads(t, s, more)
	if !s.CanHold(s.NextOffset()) {
		t.Fatal("truncated segment cannot take appends")
	}
}

// A sealed segment whose index is corrupt, or missing, is refused with index.ErrCorruptIndex (the
// log recovers it); renames and deletes of one never mapped work by name.
func TestOpenSealedCorruptAndRename(t *testing.T) {
	const base = 0
	cfg := segment.Config{IndexIntervalBytes: 100, MaxIndexBytes: 4096}
	dir := t.TempDir()
	s := segCreate(t, dir, base, cfg)
	batches := segFill(t, s, rand.New(rand.NewSource(5)), 30)
	next := s.NextOffset()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	indexPath := filepath.Join(dir, segment.FileName(base, segment.IndexSuffix))
	good := segReadFile(t, indexPath)
	if err := os.WriteFile(indexPath, good[:len(good)-3], 0o600); err != nil { // not whole entries
		t.Fatal(err)
	}
	if _, err := segment.OpenSealed(vfs.OS, dir, base, cfg, next); !errors.Is(err, index.ErrCorruptIndex) {
		t.Fatalf("misaligned index: %v, want ErrCorruptIndex", err)
	}
	if err := os.Remove(indexPath); err != nil {
		t.Fatal(err)
	}
	if _, err := segment.OpenSealed(vfs.OS, dir, base, cfg, next); !errors.Is(err, index.ErrCorruptIndex) {
		t.Fatalf("missing index: %v, want ErrCorruptIndex", err)
	}
	if d, _ := segment.Usage(); d < 0 {
		t.Fatal("descriptor count went negative")
	}
	if err := os.WriteFile(indexPath, good, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := segment.OpenSealed(vfs.OS, dir, base, cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RenameFiles(segment.SwapSuffix); err != nil { // never mapped: by name
		t.Fatal(err)
	}
	if _, err := os.Stat(indexPath + segment.SwapSuffix); err != nil {
		t.Fatalf("index not renamed: %v", err)
	}
	segCheckReads(t, s, batches) // maps the renamed files
	if err := s.RenameFiles(""); err != nil {
		t.Fatal(err)
	}
	if !s.Acquire() { // a reader holding the segment across its deletion
		t.Fatal("acquire")
	}
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	segCheckReads(t, s, batches) // still readable through the open descriptor and mappings
	s.Release()
	if _, err := os.Stat(indexPath); !os.IsNotExist(err) {
		t.Fatalf("index left after delete: %v", err)
	}
}

// Readers mapping a sealed segment's indexes concurrently with the appender making them writable
// (TruncateTo), appending, renaming and deleting: every read is answered from the bytes (run
// with -race).
func TestLazyIndexesConcurrentReaders(t *testing.T) {
	const base = 1000
	cfg := segment.Config{IndexIntervalBytes: 100, MaxIndexBytes: 8192}
	dir := t.TempDir()
	s := segCreate(t, dir, base, cfg)
	batches := segFill(t, s, rand.New(rand.NewSource(11)), 80)
	next := s.NextOffset()
	if err := s.MarkInactive(); err != nil {
		t.Fatal(err)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := segment.OpenSealed(vfs.OS, dir, base, cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	keep := batches[:40]
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for r := range 4 {
		go func() {
			rng := rand.New(rand.NewSource(int64(r)))
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if !s.Acquire() {
					errs <- nil
					return
				}
				b := keep[rng.Intn(len(keep))]
				o := b.h.BaseOffset + rng.Int63n(int64(b.h.LastOffsetDelta)+1)
				pos, h, found, err := s.TranslateOffset(o)
				s.Release()
				if err != nil || !found || pos != b.pos || h != b.h {
					errs <- errors.New("translate of a kept batch went wrong")
					return
				}
			}
		}()
	}
	if _, err := s.TruncateTo(keep[len(keep)-1].h.NextOffset()); err != nil {
		t.Fatal(err)
	}
	segFill(t, s, rand.New(rand.NewSource(12)), 30)
	if err := s.RenameFiles(segment.SwapSuffix); err != nil {
		t.Fatal(err)
	}
	if err := s.RenameFiles(""); err != nil {
		t.Fatal(err)
	}
	close(stop)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
}
