package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/weir-mq/weir/index"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/vfs"
)

// Lazy indexes (Kafka's LazyIndex). A segment opened with OpenSealed (an inactive segment found at
// start) holds its .log descriptor and no index: its state comes from a look at the index files
// (SanityCheck and the time index's last entry), which are then unmapped again. The indexes are
// mapped on first use by a reader (offset translation, a time lookup), at the files' lengths and
// without growing them (index.OpenOffsetIndexSealed); an appender that needs them writable again
// (TruncateTo, Recover) replaces them with indexes grown to log.index.size.max.bytes, the replaced
// pair kept mapped until the segment's files close since a reader may be inside it. Mapped
// indexes stay mapped until the segment closes, as in Kafka; what a process of many segments maps
// is what its readers looked at plus every active segment.
//
// Concurrency: idx is published atomically and read without a lock; idxMu serialises opening,
// replacing and renaming (RenameFiles holds it so a lazy open never uses a stale name).

// indexPair is a segment's two indexes.
type indexPair struct {
	offset *index.OffsetIndex
	time   *index.TimeIndex
	// sealed: opened at the files' lengths for reading only (full, no append).
	sealed bool
	// pins: 1 while installed in the segment (idx) plus one per reader inside a lookup; the
	// mappings go with the last (fdcache.go).
	pins atomic.Int32
}

// tryPin takes a pin unless the pair is already closed.
func (p *indexPair) tryPin() bool {
	return addIfLive(&p.pins)
}

// unpin drops a pin; the last one unmaps the pair (and trims the files by name unless they were
// marked unlinked).
func (p *indexPair) unpin() {
	if p.pins.Add(-1) == 0 {
		n := p.mappings()
		liveMappings.Add(-n)
		liveIndexMappings.Add(-n)
		p.close()
	}
}

// retire drops the installed pin of a pair that was replaced or evicted: it never touches its
// files by name again (they may have been renamed since, and a newer pair owns them).
func (p *indexPair) retire() {
	p.offset.Unlinked()
	p.time.Unlinked()
	p.unpin()
}

// mappings returns the number of mappings the pair holds.
func (p *indexPair) mappings() int64 {
	n := int64(0)
	if p.offset.Mapped() {
		n++
	}
	if p.time.Mapped() {
		n++
	}
	return n
}

func (p *indexPair) close() {
	_ = p.offset.Close()
	_ = p.time.Close()
}

// indexPaths returns the paths of the two index files under the segment's current suffix. The
// caller holds idxMu (or the segment is not shared yet).
func (s *Segment) indexPaths() (offsetPath, timePath string) {
	return filepath.Join(s.dir, FileName(s.baseOffset, IndexSuffix)+s.suffix),
		filepath.Join(s.dir, FileName(s.baseOffset, TimeIndexSuffix)+s.suffix)
}

// openIndexPair opens both indexes: grown to the maximum and created if missing (writable), or
// at their files' lengths (sealed).
func openIndexPair(fsys vfs.FS, offsetPath, timePath string, base int64, maxIndexBytes int, sealed bool) (*indexPair, error) {
	var (
		oi  *index.OffsetIndex
		ti  *index.TimeIndex
		err error
	)
	if sealed {
		oi, err = index.OpenOffsetIndexSealed(fsys, offsetPath, base)
	} else {
		oi, err = index.OpenOffsetIndex(fsys, offsetPath, base, maxIndexBytes)
	}
	if err != nil {
		return nil, err
	}
	if sealed {
		ti, err = index.OpenTimeIndexSealed(fsys, timePath, base)
	} else {
		ti, err = index.OpenTimeIndex(fsys, timePath, base, maxIndexBytes)
	}
	if err != nil {
		_ = oi.Close()
		return nil, err
	}
	p := &indexPair{offset: oi, time: ti, sealed: sealed}
	p.pins.Store(1)
	n := p.mappings()
	liveMappings.Add(n)
	liveIndexMappings.Add(n)
	checkPressure()
	return p, nil
}

// OpenSealed opens an inactive segment found at start whose successor begins at nextBase: the
// .log is opened (one descriptor), the indexes are checked (SanityCheck; an error wrapping
// index.ErrCorruptIndex says the segment must be recovered: the caller closes it and opens it with
// Open) and the time index's last entry read, and nothing stays mapped: the indexes are mapped on
// first use (see lazyindex.go). A missing index file is reported as corrupt (to be rebuilt).
func OpenSealed(fsys vfs.FS, dir string, baseOffset int64, cfg Config, nextBase int64) (*Segment, error) {
	s, err := openLog(fsys, dir, baseOffset, cfg, os.O_RDWR, "")
	if err != nil {
		return nil, err
	}
	st, err := s.ownFile().Stat()
	if err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("stat segment %s: %w", s.name, err)
	}
	s.created = st.ModTime()
	s.size.Store(st.Size())
	op, tp := s.indexPaths()
	p, err := openIndexPair(fsys, op, tp, baseOffset, cfg.MaxIndexBytes, true)
	if err != nil {
		s.closeFiles()
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", index.ErrCorruptIndex, err)
		}
		return nil, fmt.Errorf("open segment %s: %w", s.name, err)
	}
	defer func() {
		n := p.mappings()
		liveMappings.Add(-n)
		liveIndexMappings.Add(-n)
		p.close()
	}()
	if err := p.offset.SanityCheck(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if err := p.time.SanityCheck(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if ts, off := p.time.LastEntry(); ts != record.NoTimestamp {
		s.maxTimestamp.Store(ts)
		s.offsetOfMaxTimestamp = off
	}
	s.nextOffset.Store(nextBase)
	s.sealed.Store(true)
	s.settle()
	return s, nil
}

// pinIndexes returns the segment's indexes pinned (unpin when done), mapping them first when
// they are not (OpenSealed, or evicted: fdcache.go). It returns nil when they cannot be mapped
// (the segment is closed, its files were removed, or no descriptor or mapping is left): a reader
// then scans the segment from its start, which is slower but correct.
func (s *Segment) pinIndexes() *indexPair {
	for {
		p := s.idx.Load()
		if p == nil {
			return s.mapIndexes()
		}
		if p.tryPin() {
			if !s.used[kindIndex].Load() {
				s.used[kindIndex].Store(true)
			}
			return p
		}
	}
}

// mapIndexes maps the indexes read-only and installs them, returning them pinned.
func (s *Segment) mapIndexes() *indexPair {
	relieve(kindIndex)
	s.idxMu.Lock()
	if p := s.idx.Load(); p != nil && p.tryPin() {
		s.idxMu.Unlock()
		return p
	}
	if s.refs.Load() <= 0 || s.idxGone {
		s.idxMu.Unlock()
		return nil
	}
	op, tp := s.indexPaths()
	p, err := openIndexPair(s.fsys, op, tp, s.baseOffset, s.cfg.MaxIndexBytes, true)
	if err != nil {
		s.idxMu.Unlock()
		return nil
	}
	p.pins.Add(1) // the caller's
	s.idx.Store(p)
	settled := s.settled.Load()
	s.idxMu.Unlock()
	s.used[kindIndex].Store(true)
	if settled {
		idxCache.add(s)
	}
	return p
}

// pinMappedIndexes returns the indexes pinned if they are mapped, without mapping them.
func (s *Segment) pinMappedIndexes() *indexPair {
	for {
		p := s.idx.Load()
		if p == nil || p.tryPin() {
			return p
		}
	}
}

// writableIndexes returns indexes that take appends, for the appender: indexes mapped sealed (or
// not at all) are replaced by ones grown to the maximum; a replaced pair stays mapped until its
// last reader unpins it. A settled segment is unsettled first (its indexes must not be evicted
// under the appender).
func (s *Segment) writableIndexes() (*indexPair, error) {
	if s.settled.Load() {
		s.unsettle()
	}
	if p := s.idx.Load(); p != nil && !p.sealed {
		return p, nil
	}
	relieve(kindIndex)
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if p := s.idx.Load(); p != nil && !p.sealed {
		return p, nil
	}
	op, tp := s.indexPaths()
	p, err := openIndexPair(s.fsys, op, tp, s.baseOffset, s.cfg.MaxIndexBytes, false)
	if err != nil {
		return nil, fmt.Errorf("open indexes of %s: %w", s.name, err)
	}
	if old := s.idx.Swap(p); old != nil {
		old.retire() // a reader inside it keeps it mapped until it unpins
	}
	return p, nil
}

// closeIndexes drops the installed index pair for good. Called with the last reference gone.
func (s *Segment) closeIndexes() {
	s.idxMu.Lock()
	p := s.idx.Swap(nil)
	s.idxGone = true
	s.idxMu.Unlock()
	if p != nil {
		p.unpin()
	}
}

// IndexesMapped reports whether the segment's indexes are mapped (tests, tools).
func (s *Segment) IndexesMapped() bool { return s.idx.Load() != nil }
