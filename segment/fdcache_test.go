package segment_test

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// fdcSealed makes n settled segments (created, filled, rolled and sealed) in dir and returns them
// with their batches.
func fdcSealed(t *testing.T, dir string, n, batches int) ([]*segment.Segment, [][]segAppended) {
	t.Helper()
	cfg := segment.Config{IndexIntervalBytes: 300, MaxIndexBytes: 64 << 10}
	segs := make([]*segment.Segment, n)
	all := make([][]segAppended, n)
	base := int64(0)
	for i := range segs {
		s := segCreate(t, dir, base, cfg)
		all[i] = segFill(t, s, rand.New(rand.NewSource(int64(i))), batches)
		if err := s.MarkInactive(); err != nil {
			t.Fatal(err)
		}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
		segs[i] = s
		base = s.NextOffset()
	}
	return segs, all
}

// fdcLimits sets the caches' bounds for one test and restores "unbounded" after it.
func fdcLimits(t *testing.T, logs, indexes int64) {
	segment.SetLogDescriptorCacheSize(logs)
	segment.SetIndexMappingCacheSize(indexes)
	t.Cleanup(func() {
		segment.SetLogDescriptorCacheSize(0)
		segment.SetIndexMappingCacheSize(0)
	})
}

// More settled segments than the caches hold: descriptors and index mappings stay within the
// bounds, every segment reads correctly (translations, headers, slices), slices pinned past the
// bound keep their descriptors open until released, and the active segment keeps its own.
func TestFDCacheBoundsDescriptorsAndMappings(t *testing.T) {
	const n, logBound, idxBound = 40, 5, 4
	fdcLimits(t, logBound, idxBound)
	fds0, maps0 := segment.Usage()
	segs, all := fdcSealed(t, t.TempDir(), n, 30)
	defer func() {
		for _, s := range segs {
			_ = s.Close()
		}
	}()
	check := func(when string, pinned int) {
		t.Helper()
		c := segment.Caches()
		fds, maps := segment.Usage()
		if c.Descriptors > logBound || c.IndexPairs > idxBound {
			t.Fatalf("%s: caches hold %d descriptors, %d index pairs; bounds %d, %d", when, c.Descriptors, c.IndexPairs, logBound, idxBound)
		}
		if fds-fds0 > logBound+int64(pinned) {
			t.Fatalf("%s: %d descriptors open (%d pinned), bound %d", when, fds-fds0, pinned, logBound)
		}
		// Index pairs plus read mappings (one per segment read, kept until close).
		if maps-maps0 > 2*(idxBound+int64(pinned))+n {
			t.Fatalf("%s: %d mappings", when, maps-maps0)
		}
	}
	check("after sealing", 0)
	for round := 0; round < 2; round++ {
		for i, s := range segs {
			segCheckReads(t, s, all[i])
			check("reading", 0)
		}
	}
	// Pin one slice of every segment: each keeps its descriptor open past the bound.
	slices := make([]segment.Slice, n)
	for i, s := range segs {
		b := all[i][len(all[i])/2]
		var ok bool
		if slices[i], ok = s.Slice(b.pos, int64(len(b.data))); !ok {
			t.Fatalf("slice %d refused", i)
		}
	}
	if fds, _ := segment.Usage(); fds-fds0 < n {
		t.Fatalf("%d descriptors open with %d slices pinned", fds-fds0, n)
	}
	for i := range segs { // evict again: every pinned descriptor must still read
		segCheckReads(t, segs[(i+7)%n], all[(i+7)%n])
	}
	for i := range slices {
		b := all[i][len(all[i])/2]
		if got := segSliceBytes(t, slices[i]); !bytes.Equal(got, b.data) {
			t.Fatalf("pinned slice %d reads other bytes", i)
		}
		slices[i].Release()
	}
	check("after releasing the slices", 0)
	if c := segment.Caches(); c.DescriptorEvictions == 0 || c.IndexPairEvictions == 0 {
		t.Fatalf("no eviction: %+v", c)
	}
	// The cleaner's reads go through the cache too.
	buf := make([]byte, len(all[3][0].data))
	if _, err := segs[3].ReadAt(buf, 0); err != nil || !bytes.Equal(buf, all[3][0].data) {
		t.Fatalf("ReadAt: %v", err)
	}
	// Idle eviction: two calls with no use in between drop everything cached.
	segment.EvictIdle()
	segment.EvictIdle()
	if c := segment.Caches(); c.Descriptors != 0 || c.IndexPairs != 0 {
		t.Fatalf("after EvictIdle: %+v", c)
	}
	if fds, _ := segment.Usage(); fds != fds0 {
		t.Fatalf("after EvictIdle: %d descriptors, want %d", fds, fds0)
	}
	segCheckReads(t, segs[0], all[0])
}

// A settled segment whose descriptor was evicted can still be truncated back into the active one
// (TruncateTo reopens and keeps it), and the descriptor is held outside the cache from then on.
func TestFDCacheTruncateEvicted(t *testing.T) {
	fdcLimits(t, 1, 1)
	dir := t.TempDir()
	segs, all := fdcSealed(t, dir, 3, 20)
	defer func() {
		for _, s := range segs[1:] {
			_ = s.Close()
		}
	}()
	s := segs[0] // evicted by the later ones
	cut := all[0][10]
	if got, err := s.TruncateTo(cut.h.BaseOffset); err != nil || got != cut.h.BaseOffset {
		t.Fatalf("truncate: %d %v", got, err)
	}
	for _, o := range segs[1:] {
		segCheckReads(t, o, all[segIndex(segs, o)])
	}
	more := append(all[0][:10:10], segFill(t, s, rand.New(rand.NewSource(9)), 10)...)
	segCheckReads(t, s, more)
	// Settled again and evicted: the indexes the truncation reset are trimmed at eviction, so a
	// reopen does not count the dropped entries again.
	if err := s.MarkInactive(); err != nil {
		t.Fatal(err)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	segment.EvictIdle()
	segment.EvictIdle()
	next := s.NextOffset()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := segment.OpenSealed(vfs.OS, dir, 0, segment.Config{IndexIntervalBytes: 300, MaxIndexBytes: 64 << 10}, next)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer r.Close()
	segCheckReads(t, r, more)
}

func segIndex(segs []*segment.Segment, s *segment.Segment) int {
	for i, o := range segs {
		if o == s {
			return i
		}
	}
	return -1
}

// Race: readers (translations, header reads, slices read after a delay, the cleaner's ReadAt) on
// settled segments while the caches evict (bounds of 1-3 changing), and segments are renamed to
// .deleted or deleted under readers that acquired them. A reader holding the segment always reads
// the right bytes; run with -race.
func TestFDCacheRaceReadersEvictionRenameDelete(t *testing.T) {
	const n = 24
	fdcLimits(t, 2, 2)
	dir := t.TempDir()
	segs, all := fdcSealed(t, dir, n, 25)
	var (
		wg     sync.WaitGroup
		stop   = make(chan struct{})
		errs   = make(chan string, 16)
		mu     sync.Mutex // guards live
		live   = append([]*segment.Segment(nil), segs...)
		deadAt = time.Now().Add(1500 * time.Millisecond)
		fail   = func(s string) {
			select {
			case errs <- s:
			default:
			}
		}
	)
	pick := func(rng *rand.Rand) (*segment.Segment, []segAppended) {
		mu.Lock()
		defer mu.Unlock()
		s := live[rng.Intn(len(live))]
		if !s.Acquire() {
			return nil, nil
		}
		return s, all[segIndex(segs, s)]
	}
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(100 + r)))
			for i := 0; i < 20000 && time.Now().Before(deadAt); i++ {
				s, batches := pick(rng)
				if s == nil {
					continue
				}
				b := batches[rng.Intn(len(batches))]
				switch rng.Intn(4) {
				case 0:
					o := b.h.BaseOffset + rng.Int63n(b.h.LastOffset()-b.h.BaseOffset+1)
					if pos, h, found, err := s.TranslateOffset(o); err != nil || !found || pos != b.pos || h != b.h {
						fail("translate: " + errString(err))
					}
				case 1:
					if h, err := s.ReadHeaderAt(b.pos); err != nil || h != b.h {
						fail("header: " + errString(err))
					}
				case 2:
					sl, ok := s.Slice(b.pos, int64(len(b.data)))
					if !ok {
						fail("slice refused")
						break
					}
					time.Sleep(time.Duration(rng.Intn(200)) * time.Microsecond) // sent later
					got := make([]byte, len(b.data))
					if _, err := sl.File.ReadAt(got, sl.Position); err != nil || !bytes.Equal(got, b.data) {
						fail("slice read: " + errString(err))
					}
					sl.Release()
				case 3:
					got := make([]byte, len(b.data))
					if _, err := s.ReadAt(got, b.pos); err != nil || !bytes.Equal(got, b.data) {
						fail("ReadAt: " + errString(err))
					}
				}
				s.Release()
			}
		}(r)
	}
	wg.Add(1)
	go func() { // bounds move, idle sweeps
		defer wg.Done()
		rng := rand.New(rand.NewSource(7))
		for time.Now().Before(deadAt) {
			segment.SetLogDescriptorCacheSize(int64(1 + rng.Intn(3)))
			segment.SetIndexMappingCacheSize(int64(1 + rng.Intn(3)))
			if rng.Intn(10) == 0 {
				segment.EvictIdle()
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Add(1)
	go func() { // segments leave: renamed .deleted (then removed) or deleted
		defer wg.Done()
		defer close(stop)
		rng := rand.New(rand.NewSource(8))
		for k := 0; k < n/2 && time.Now().Before(deadAt); k++ {
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			i := rng.Intn(len(live))
			s := live[i]
			live = append(live[:i], live[i+1:]...)
			mu.Unlock()
			if k%2 == 0 {
				paths, err := s.RenameDeleted()
				if err != nil {
					fail("rename: " + err.Error())
					continue
				}
				time.Sleep(5 * time.Millisecond)
				for _, p := range paths {
					_ = os.Remove(p)
				}
			} else if err := s.Delete(); err != nil {
				fail("delete: " + err.Error())
			}
		}
	}()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, s := range live {
		_ = s.Close()
	}
	if fds, _ := segment.Usage(); fds != 0 && len(segs) > 0 {
		// Other tests of the package may run in parallel with open segments; this one runs
		// alone, so nothing of its own stays open.
		t.Fatalf("%d descriptors still open", fds)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.deleted")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func errString(err error) string {
	if err == nil {
		return "wrong result"
	}
	return err.Error()
}

// An idle, synced active segment settles (SettleIfIdle on the second call with no append in
// between), its descriptor and indexes are evicted, and the next appends, reads, roll and close
// work as if nothing happened; a reopened copy has the same indexes.
func TestFDCacheSettleIdleActive(t *testing.T) {
	fdcLimits(t, 1, 1)
	dir := t.TempDir()
	cfg := segment.Config{IndexIntervalBytes: 300, MaxIndexBytes: 64 << 10}
	s := segCreate(t, dir, 0, cfg)
	batches := segFill(t, s, rand.New(rand.NewSource(1)), 20)
	if s.SettleIfIdle() {
		t.Fatal("settled before a sync")
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if !s.SettleIfIdle() { // the second look with no append in between
		t.Fatal("idle synced segment not settled")
	}
	others, _ := fdcSealed(t, t.TempDir(), 3, 5) // evict s's descriptor and indexes
	for _, o := range others {
		defer o.Close()
	}
	if s.IndexesMapped() {
		t.Fatal("settled active segment's indexes still mapped past the bound")
	}
	if !s.CanHold(s.NextOffset()) {
		t.Fatal("evicted active segment cannot take appends")
	}
	batches = append(batches, segFill(t, s, rand.New(rand.NewSource(2)), 20)...)
	segCheckReads(t, s, batches)
	if err := s.MarkInactive(); err != nil {
		t.Fatal(err)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	next := s.NextOffset()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := segment.OpenSealed(vfs.OS, dir, 0, cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	segCheckReads(t, r, batches)
	segCheckIndexes(t, r, segModel(batches, 0, cfg.IndexIntervalBytes, true))
}

// Under pressure an active segment settles as soon as it is synced, however recently written
// (SettleIfSynced), not before; Pressure signals once the segments outside the caches hold more
// than three quarters of the descriptor ceiling; opening past the ceiling evicts from the cache first
// (relieve), so the total stays at the ceiling; and an evicted active segment takes appends and
// reads as before.
func TestFDCacheSettleIfSyncedUnderPressure(t *testing.T) {
	fds0, maps0 := segment.Usage()
	const ceil = 6
	fdcLimits(t, 4, 4)
	segment.SetCeilings(fds0+ceil, maps0+2*ceil+2)
	t.Cleanup(func() { segment.SetCeilings(0, 0) })
	ch, stop := segment.Pressure()
	defer stop()
	dir := t.TempDir()
	cfg := segment.Config{IndexIntervalBytes: 300, MaxIndexBytes: 64 << 10}
	var segs []*segment.Segment
	var batches [][]segAppended
	defer func() {
		for _, s := range segs {
			_ = s.Close()
		}
	}()
	base := int64(0)
	pressured := false
	for i := 0; i < 2*ceil; i++ {
		s := segCreate(t, dir, base, cfg)
		segs = append(segs, s)
		batches = append(batches, segFill(t, s, rand.New(rand.NewSource(int64(i))), 5))
		base = s.NextOffset() + 1000
		if s.SettleIfSynced() {
			t.Fatal("settled before a sync")
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
			pressured = true
		default:
		}
		if pressured {
			for _, o := range segs {
				o.SettleIfSynced()
			}
			segment.TrimCaches()
		}
		if fds, _ := segment.Usage(); fds-fds0 > ceil+1 {
			t.Fatalf("%d segments: %d descriptors, ceiling %d", i+1, fds-fds0, ceil)
		}
	}
	if !pressured {
		t.Fatal("no pressure signal with twice the ceiling's segments written")
	}
	// Every segment written again (its descriptor and indexes opened again when evicted) and
	// read back.
	for i, s := range segs {
		batches[i] = append(batches[i], segFill(t, s, rand.New(rand.NewSource(int64(100+i))), 5)...)
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		s.SettleIfSynced()
		if fds, _ := segment.Usage(); fds-fds0 > ceil+1 {
			t.Fatalf("rewriting segment %d: %d descriptors, ceiling %d", i, fds-fds0, ceil)
		}
	}
	for i, s := range segs {
		segCheckReads(t, s, batches[i])
	}
}
