package segment

// Bounded descriptors and index mappings of settled segments.
//
// A process with many partitions has many more segments than it can keep a descriptor open for
// (RLIMIT_NOFILE) or keep mapped (vm.max_map_count). A segment is settled once it is durable and
// nothing writes it: inactive (opened sealed at start: OpenSealed, LoadSealed; or rolled and then
// sealed: Seal after MarkInactive), or active and idle with everything synced (Settle when its
// log is opened, SettleIfIdle called by the engine). The .log descriptor and the index mappings of
// a settled segment are entries of two process-wide caches bounded by SetLogDescriptorCacheSize
// and SetIndexMappingCacheSize (and SetCeilings); when a cache is over its bound, an entry is
// evicted. An evicted descriptor or mapping is opened again by the next reader that needs it. The
// appender unsettles a segment before it changes it (Append, MarkInactive, TruncateTo, Recover):
// a segment being written keeps its descriptor and indexes. An evicted writable index pair is
// trimmed to its entries at eviction, under its current name.
//
// Pins: each open descriptor (fileRef) and each index pair counts its pins: one for being
// installed in the segment, one per reader using it (a Slice until Release, a header read, a
// pread, an index lookup). Eviction uninstalls it and drops the installed pin; the descriptor is
// closed (the mapping unmapped) when its last pin goes, so a reader never sees its descriptor or
// mapping vanish, and a descriptor pinned by a Slice stays valid through a rename or unlink of the
// file. A pin is an atomic compare-and-swap: the fetch path allocates nothing for it. Delete and
// RenameDeleted unsettle the segment first (its descriptor is reopened if it was evicted), so the
// readers that still hold the segment read the unlinked or renamed file through that descriptor.
//
// Replacement policy: CLOCK, the usual lock-free-on-hit approximation of LRU. A pin sets the
// entry's used bit (a load, and a store only when it was clear); a cache over its bound sweeps its
// hand over the entries, clearing used bits and skipping pinned entries, and evicts the first
// entry neither used since the hand last passed nor pinned (after two full turns it evicts the
// entry under the hand whatever its state: its resources then go with its last pin). The caches'
// locks are taken only when an entry is added (a descriptor opened or indexes mapped again) or
// removed, never on a hit.
//
// Idle entries: EvictIdle (called periodically by the engine) evicts the entries not used since
// the previous call, so mappings and descriptors of segments nobody reads go even below the
// bounds.
//
// Write bursts: an active segment keeps its descriptor and indexes outside the caches from its
// first append until it is settled again (SettleIfIdle: idle and synced for one to two of the
// engine's intervals), so a burst that writes to more partitions than the ceiling within that time
// would hold them all. Until the segments outside the caches hold three quarters of a ceiling,
// the caches shrink to make room (a descriptor opened or indexes mapped past the ceiling first
// evict from the cache: relieve). Past three quarters the segment package signals the
// subscribers of Pressure (at most one pending signal each; the check is a few atomic loads where
// a descriptor is opened or indexes are mapped, never on an append that opens nothing), and the
// engine settles every active segment whose bytes are all durable (SettleIfSynced, even one
// written a moment ago; only the kinds under pressure go to their caches); the caches then evict what is over their bounds, CLOCK choosing the
// least recently used (a segment appended to again leaves the cache: the cold ones go), and the
// next append to an evicted segment opens its .log and maps its indexes again. The total stays at
// the ceilings: what is outside the caches passes three quarters of a ceiling only by what is
// opened and not yet synced between a signal and the sweep it starts, and the caches shrink to the
// rest. Below three quarters nothing changes for partitions being written (no eviction and
// reopening of hot segments while the caches can give room).
//
// Lock order: Segment.logMu, then Segment.idxMu, then a cache's mu. Eviction takes a segment's lock
// with no cache lock held.

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/weir-mq/weir/vfs"
)

// fileRef is one open descriptor of a segment's .log with its pins.
type fileRef struct {
	f    vfs.File
	fd   int
	pins atomic.Int32
}

// tryPin takes a pin unless the descriptor is already closed (its last pin gone).
func (r *fileRef) tryPin() bool {
	return addIfLive(&r.pins)
}

// unpin drops a pin; the last one closes the descriptor.
func (r *fileRef) unpin() {
	if r.pins.Add(-1) == 0 {
		_ = r.f.Close()
		liveDescriptors.Add(-1)
	}
}

// cacheKind names one of the two caches (the index into Segment.slot and Segment.used).
type cacheKind int

const (
	kindLog cacheKind = iota
	kindIndex
)

// clockCache is a bounded set of settled segments holding one kind of resource.
type clockCache struct {
	kind cacheKind
	// mu guards entries, hand and the slot[kind] of every segment.
	mu      sync.Mutex
	entries []*Segment
	hand    int
	// limit is the bound on len(entries); 0 is unbounded.
	limit atomic.Int64
	// evictions counts entries evicted (tests, metrics).
	evictions atomic.Int64
	// size is len(entries), for lock-free reads (pressure checks).
	size atomic.Int64
}

var (
	logCache = &clockCache{kind: kindLog}
	idxCache = &clockCache{kind: kindIndex}
	// liveDescriptors counts the open .log descriptors of this process's segments.
	liveDescriptors atomic.Int64
	// ceilings (SetCeilings): the descriptors and mappings all segments may hold; the caches
	// shrink below their own bounds to keep the total under them (0 = none).
	descriptorCeiling atomic.Int64
	mappingCeiling    atomic.Int64
)

// SetCeilings sets the descriptors and mappings the process's segments may hold in all (the
// engine's budget, 0 = none): the caches evict beyond their own bounds when the active segments
// and the cached ones together would pass them.
func SetCeilings(descriptors, mappings int64) {
	descriptorCeiling.Store(max(descriptors, 0))
	mappingCeiling.Store(max(mappings, 0))
	logCache.trim()
	idxCache.trim()
}

// bound returns the number of entries the cache may hold now: its limit, lowered so that what
// the segments outside it hold plus the entries stay under the ceiling (at least 1 entry).
func (c *clockCache) bound(n int) int64 {
	limit := c.limit.Load()
	if limit <= 0 {
		return 0 // unbounded: nothing is evicted, as in Kafka
	}
	var room int64
	switch c.kind {
	case kindLog:
		ceil := descriptorCeiling.Load()
		if ceil <= 0 {
			return limit
		}
		room = ceil - (liveDescriptors.Load() - int64(n))
	default:
		ceil := mappingCeiling.Load()
		if ceil <= 0 {
			return limit
		}
		room = (ceil - (liveMappings.Load() - IndexMappingsPerSegment*int64(n))) / IndexMappingsPerSegment
	}
	return min(max(room, 1), limit)
}

// SetLogDescriptorCacheSize bounds the .log descriptors held open by settled (inactive, durable)
// segments (0 = no bound); active segments keep theirs outside the bound. Descriptors over a
// lowered bound are evicted at once.
func SetLogDescriptorCacheSize(n int64) {
	logCache.limit.Store(max(n, 0))
	logCache.trim()
}

// SetIndexMappingCacheSize bounds the settled segments whose index pair (two mappings) is mapped
// (0 = no bound).
func SetIndexMappingCacheSize(pairs int64) {
	idxCache.limit.Store(max(pairs, 0))
	idxCache.trim()
}

// CacheStats reports the settled segments holding a descriptor and an index mapping now, and the
// evictions so far of each cache.
type CacheStats struct {
	Descriptors, IndexPairs                 int
	DescriptorEvictions, IndexPairEvictions int64
}

// Caches returns the caches' current state.
func Caches() CacheStats {
	logCache.mu.Lock()
	d := len(logCache.entries)
	logCache.mu.Unlock()
	idxCache.mu.Lock()
	i := len(idxCache.entries)
	idxCache.mu.Unlock()
	return CacheStats{Descriptors: d, IndexPairs: i, DescriptorEvictions: logCache.evictions.Load(), IndexPairEvictions: idxCache.evictions.Load()}
}

// EvictIdle evicts the descriptors and index mappings of settled segments not used since the
// previous call (their used bit is clear), and clears the used bit of the others.
func EvictIdle() {
	for _, c := range []*clockCache{logCache, idxCache} {
		c.mu.Lock()
		var idle []*Segment
		for i := 0; i < len(c.entries); {
			s := c.entries[i]
			if s.used[c.kind].Load() || s.pinned(c.kind) {
				s.used[c.kind].Store(false)
				i++
				continue
			}
			c.removeAtLocked(i)
			idle = append(idle, s)
		}
		c.mu.Unlock()
		for _, s := range idle {
			c.evictions.Add(1)
			s.evict(c.kind)
		}
	}
}

// add lists s (if it is not listed) and evicts entries while the cache is over its bound.
func (c *clockCache) add(s *Segment) {
	c.mu.Lock()
	if s.slot[c.kind] < 0 {
		s.slot[c.kind] = len(c.entries)
		c.entries = append(c.entries, s)
		c.size.Store(int64(len(c.entries)))
	}
	c.mu.Unlock()
	c.trim()
}

// remove unlists s.
func (c *clockCache) remove(s *Segment) {
	c.mu.Lock()
	if i := s.slot[c.kind]; i >= 0 {
		c.removeAtLocked(i)
	}
	c.mu.Unlock()
}

func (c *clockCache) removeAtLocked(i int) {
	s := c.entries[i]
	last := len(c.entries) - 1
	c.entries[i] = c.entries[last]
	c.entries[i].slot[c.kind] = i
	c.entries[last] = nil
	c.entries = c.entries[:last]
	c.size.Store(int64(last))
	s.slot[c.kind] = -1
	if c.hand >= len(c.entries) {
		c.hand = 0
	}
}

// trim evicts entries, one at a time, while the cache is over its bound.
func (c *clockCache) trim() {
	for {
		c.mu.Lock()
		v := c.victimLocked()
		c.mu.Unlock()
		if v == nil {
			return
		}
		c.evictions.Add(1)
		v.evict(c.kind)
	}
}

// victimLocked unlists and returns the entry to evict, or nil when the cache is within bound.
func (c *clockCache) victimLocked() *Segment {
	n := len(c.entries)
	limit := c.bound(n)
	if limit <= 0 || int64(n) <= limit {
		return nil
	}
	for step := 0; ; step++ {
		if c.hand >= len(c.entries) {
			c.hand = 0
		}
		s := c.entries[c.hand]
		if step < 2*n {
			if s.used[c.kind].Load() {
				s.used[c.kind].Store(false)
				c.hand++
				continue
			}
			if s.pinned(c.kind) {
				c.hand++
				continue
			}
		}
		c.removeAtLocked(c.hand)
		return s
	}
}

// pinned reports whether a reader pins the segment's resource of this kind.
func (s *Segment) pinned(kind cacheKind) bool {
	if kind == kindLog {
		r := s.logRef.Load()
		return r != nil && r.pins.Load() > 1
	}
	p := s.idx.Load()
	return p != nil && p.pins.Load() > 1
}

// evict uninstalls the segment's resource of this kind if the segment is still settled; it is
// released with its last pin.
func (s *Segment) evict(kind cacheKind) {
	if kind == kindLog {
		s.logMu.Lock()
		var r *fileRef
		if s.settled.Load() && !s.logClosed {
			r = s.logRef.Swap(nil)
		}
		s.logMu.Unlock()
		if r != nil {
			r.unpin()
		}
		return
	}
	s.idxMu.Lock()
	var p *indexPair
	if s.settled.Load() && !s.idxGone {
		p = s.idx.Swap(nil)
		if p != nil && !p.sealed {
			// A writable pair is trimmed to its entries now, under its current name (later it
			// is closed without touching the files, which may be renamed by then): its file
			// may hold entries past the valid ones (a truncation or recovery reset it), which a
			// later open would count again. Readers of a settled segment read only valid
			// entries, so the trim does not cut under them.
			_ = p.offset.TrimToValidSize()
			_ = p.time.TrimToValidSize()
		}
	}
	s.idxMu.Unlock()
	if p != nil {
		p.retire()
	}
}

// settle makes the segment's descriptor and index mappings evictable: it is inactive and
// everything in it is durable.
func (s *Segment) settle() {
	if s.settled.Swap(true) {
		return
	}
	if s.logRef.Load() != nil {
		s.used[kindLog].Store(true)
		logCache.add(s)
	}
	if s.idx.Load() != nil {
		s.used[kindIndex].Store(true)
		idxCache.add(s)
	}
}

// settleKinds settles the segment with only the kinds named handed to their caches (an active
// segment under pressure: SettleIfSynced); the others stay held until the segment is settled
// again or closed. Called by the appender's excluder, as settle. Adding a listed entry is a no-op.
func (s *Segment) settleKinds(log, idx bool) {
	s.settled.Store(true)
	if log && s.logRef.Load() != nil {
		s.used[kindLog].Store(true)
		logCache.add(s)
	}
	if idx && s.idx.Load() != nil {
		s.used[kindIndex].Store(true)
		idxCache.add(s)
	}
}

// unsettle makes the segment keep its descriptor and indexes, once opened, until it is settled
// again or closed: the appender is about to change it (Append, MarkInactive, writableIndexes).
// An evicted descriptor is opened again by the next use (pinLog), not here.
func (s *Segment) unsettle() {
	s.idxHeld.Store(false)
	if s.settled.Swap(false) {
		logCache.remove(s)
		idxCache.remove(s)
		// Barrier: an eviction that saw the segment settled finishes (under these locks)
		// before the caller uses what it would uninstall; later ones see it unsettled.
		s.logMu.Lock()
		//lint:ignore SA2001 empty critical section: a barrier
		s.logMu.Unlock()
		s.idxMu.Lock()
		//lint:ignore SA2001 empty critical section: a barrier
		s.idxMu.Unlock()
	}
}

// holdLog unsettles the segment and opens its .log again if it was evicted, so that ownFile
// works and readers holding the segment keep a descriptor whatever happens to the file's name:
// the appender changes it by name (TruncateTo, Recover) or its files are about to be unlinked or
// renamed (Delete, RenameDeleted).
func (s *Segment) holdLog() error {
	s.unsettle()
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if s.logRef.Load() != nil {
		return nil
	}
	if s.logClosed {
		return ErrClosed
	}
	r, err := s.openLogLocked(1)
	if err != nil {
		return err
	}
	s.logRef.Store(r)
	return nil
}

// pinLog returns the .log's descriptor pinned (unpin when done), opening it again if it was
// evicted.
func (s *Segment) pinLog() (*fileRef, error) {
	for {
		r := s.logRef.Load()
		if r == nil {
			return s.reopenLog()
		}
		if r.tryPin() {
			if !s.used[kindLog].Load() {
				s.used[kindLog].Store(true)
			}
			return r, nil
		}
	}
}

// reopenLog opens the .log of a segment whose descriptor was evicted and installs it, returning
// it pinned.
func (s *Segment) reopenLog() (*fileRef, error) {
	relieve(kindLog)
	s.logMu.Lock()
	if r := s.logRef.Load(); r != nil && r.tryPin() {
		s.logMu.Unlock()
		return r, nil
	}
	if s.logClosed {
		s.logMu.Unlock()
		return nil, fmt.Errorf("segment %s: %w", s.name, ErrClosed)
	}
	r, err := s.openLogLocked(2) // installed + the caller's
	if err != nil {
		s.logMu.Unlock()
		return nil, err
	}
	s.logRef.Store(r)
	settled := s.settled.Load()
	s.logMu.Unlock()
	s.used[kindLog].Store(true)
	if settled {
		logCache.add(s)
	}
	return r, nil
}

// openLogLocked opens the .log under its current name with pins pins. The caller holds logMu.
func (s *Segment) openLogLocked(pins int32) (*fileRef, error) {
	s.idxMu.Lock() // RenameFiles changes suffix under idxMu
	path := filepath.Join(s.dir, FileName(s.baseOffset, LogSuffix)+s.suffix)
	s.idxMu.Unlock()
	f, err := s.fsys.OpenFile(path, os.O_RDWR, vfs.FileMode)
	if err != nil {
		return nil, fmt.Errorf("reopen segment %s: %w", path, err)
	}
	return newFileRef(f, pins), nil
}

func newFileRef(f vfs.File, pins int32) *fileRef {
	r := &fileRef{f: f, fd: int(f.OS().Fd())}
	r.pins.Store(pins)
	liveDescriptors.Add(1)
	checkPressure()
	return r
}

var (
	// pressureSubs are the channels Pressure handed out (an immutable slice, replaced whole
	// under pressureMu).
	pressureSubs atomic.Pointer[[]chan struct{}]
	pressureMu   sync.Mutex
	// liveIndexMappings counts the index mappings of this process's segments (a part of
	// liveMappings: the rest are .log read mappings, which settling does not release).
	liveIndexMappings atomic.Int64
)

// Pressure returns a channel that receives (at most one pending signal) when the descriptors or
// index mappings held outside the caches, by segments being written, pass three quarters of the
// ceilings (SetCeilings): the receiver settles the active segments that are durable (SettleIfSynced) so
// the caches can evict them. stop unsubscribes.
func Pressure() (c <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	pressureMu.Lock()
	defer pressureMu.Unlock()
	var subs []chan struct{}
	if p := pressureSubs.Load(); p != nil {
		subs = append(subs, (*p)...)
	}
	subs = append(subs, ch)
	pressureSubs.Store(&subs)
	return ch, func() {
		pressureMu.Lock()
		defer pressureMu.Unlock()
		var keep []chan struct{}
		for _, s := range *pressureSubs.Load() {
			if s != ch {
				keep = append(keep, s)
			}
		}
		pressureSubs.Store(&keep)
	}
}

// UnderPressure reports whether the descriptors or index mappings held outside the caches pass
// three quarters of the ceilings, or all that segments hold passes a ceiling (the caches have not
// shrunk yet to the room the segments being written left them: TrimCaches).
func UnderPressure() bool {
	fds, maps := pressureKinds()
	return fds || maps
}

// pressureKinds reports which kinds are under pressure (UnderPressure).
func pressureKinds() (descriptors, mappings bool) {
	if c := descriptorCeiling.Load(); c > 0 {
		live, cached := liveDescriptors.Load(), logCache.size.Load()
		descriptors = live-cached > c/4*3 || live > c && cached > 0
	}
	if c := mappingCeiling.Load(); c > 0 {
		// Read mappings count in liveMappings but are not the caches' to release: only the
		// index mappings of segments being written call for settling.
		cached := idxCache.size.Load()
		mappings = liveIndexMappings.Load()-IndexMappingsPerSegment*cached > c/4*3 || liveMappings.Load() > c && cached > 0
	}
	return descriptors, mappings
}

// TrimCaches evicts what the caches hold over their bounds now: a bound shrinks as segments
// being written open descriptors and map indexes, which do not trim the caches themselves (they
// hold a segment's lock, and eviction takes other segments'). The engine calls it on Pressure.
func TrimCaches() {
	logCache.trim()
	idxCache.trim()
}

// relieve makes room before a descriptor is opened or indexes are mapped (kind), with no segment
// lock held: when all that segments hold has reached the ceiling, the cache evicts what is over
// its bound now (its bound shrank as segments being written took the room), instead of waiting
// for the next insertion or the engine's pressure sweep. A few atomic loads when under the
// ceiling.
func relieve(kind cacheKind) {
	if kind == kindLog {
		if c := descriptorCeiling.Load(); c > 0 && liveDescriptors.Load() >= c {
			logCache.trim()
		}
		return
	}
	if c := mappingCeiling.Load(); c > 0 && liveMappings.Load()+IndexMappingsPerSegment > c {
		idxCache.trim()
	}
}

// checkPressure signals Pressure's subscribers when UnderPressure. Called where a descriptor is
// opened or indexes are mapped.
func checkPressure() {
	if !UnderPressure() {
		return
	}
	p := pressureSubs.Load()
	if p == nil {
		return
	}
	for _, ch := range *p {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// closeLog drops the installed descriptor for good (the segment's last reference went).
func (s *Segment) closeLog() {
	s.settled.Store(false)
	logCache.remove(s)
	idxCache.remove(s)
	s.logMu.Lock()
	s.logClosed = true
	r := s.logRef.Swap(nil)
	s.logMu.Unlock()
	if r != nil {
		r.unpin()
	}
}

// withLog runs fn with the .log's descriptor pinned.
func (s *Segment) withLog(fn func(f vfs.File) error) error {
	r, err := s.pinLog()
	if err != nil {
		return err
	}
	defer r.unpin()
	return fn(r.f)
}

// ReadAt reads len(p) bytes of the .log at off through a pinned descriptor (the cleaner's reads).
// It returns what os.File.ReadAt returns.
func (s *Segment) ReadAt(p []byte, off int64) (int, error) {
	r, err := s.pinLog()
	if err != nil {
		return 0, err
	}
	defer r.unpin()
	return r.f.ReadAt(p, off)
}

// ownFile returns the installed .log descriptor without pinning it, for code that runs while the
// segment is not settled (being created or opened, or changed by the appender after unsettle):
// its descriptor cannot be evicted then.
func (s *Segment) ownFile() vfs.File { return s.logRef.Load().f }
