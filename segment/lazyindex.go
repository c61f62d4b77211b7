package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
	liveMappings.Add(p.mappings())
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
	st, err := s.log.Stat()
	if err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("stat segment %s: %w", s.log.Name(), err)
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
		return nil, fmt.Errorf("open segment %s: %w", s.log.Name(), err)
	}
	defer func() {
		liveMappings.Add(-p.mappings())
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
	return s, nil
}

// indexes returns the segment's indexes, mapping them first when the segment was opened without
// (OpenSealed). It returns nil when they cannot be mapped (the segment is closed, its files were
// removed, or no descriptor or mapping is left): a reader then scans the segment from its start,
// which is slower but correct.
func (s *Segment) indexes() *indexPair {
	if p := s.idx.Load(); p != nil {
		return p
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if p := s.idx.Load(); p != nil {
		return p
	}
	if s.refs.Load() <= 0 || s.idxGone {
		return nil
	}
	op, tp := s.indexPaths()
	p, err := openIndexPair(s.fsys, op, tp, s.baseOffset, s.cfg.MaxIndexBytes, true)
	if err != nil {
		return nil
	}
	s.idx.Store(p)
	return p
}

// mappedIndexes returns the indexes if they are mapped, without mapping them.
func (s *Segment) mappedIndexes() *indexPair { return s.idx.Load() }

// writableIndexes returns indexes that take appends, for the appender: indexes mapped sealed (or
// not at all) are replaced by ones grown to the maximum; a replaced pair stays mapped until the
// segment's files close (a reader may be inside it).
func (s *Segment) writableIndexes() (*indexPair, error) {
	if p := s.idx.Load(); p != nil && !p.sealed {
		return p, nil
	}
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if p := s.idx.Load(); p != nil && !p.sealed {
		return p, nil
	}
	op, tp := s.indexPaths()
	p, err := openIndexPair(s.fsys, op, tp, s.baseOffset, s.cfg.MaxIndexBytes, false)
	if err != nil {
		return nil, fmt.Errorf("open indexes of %s: %w", s.log.Name(), err)
	}
	if old := s.idx.Swap(p); old != nil {
		s.retiredIdx = append(s.retiredIdx, old)
	}
	return p, nil
}

// closeIndexes closes every index pair the segment mapped. Called with the last reference gone.
func (s *Segment) closeIndexes() {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	pairs := s.retiredIdx
	if p := s.idx.Swap(nil); p != nil {
		pairs = append(pairs, p)
	}
	for _, p := range pairs {
		liveMappings.Add(-p.mappings())
		p.close()
	}
	s.retiredIdx = nil
	s.idxGone = true
}

// IndexesMapped reports whether the segment's indexes are mapped (tests, tools).
func (s *Segment) IndexesMapped() bool { return s.idx.Load() != nil }
