package segment

// Segments written by the log cleaner. A cleaned segment is built under temporary names,
// <base>.log.cleaned with its .index.cleaned and .timeindex.cleaned, renamed to .swap once the
// cleaner decides to swap it in, and to the plain names once the segments it replaces are gone.
// The engine owns the protocol (engine/cleaner_swap.go); this file gives it the files.

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/index"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/vfs"
)

// ErrSegmentFull is returned by AppendCleaned when the batches would take the .log past the
// positions the offset index can name (int32).
var ErrSegmentFull = errors.New("segment: positions would overflow int32")

// CreateCleaned creates an empty segment at baseOffset whose three files carry CleanedSuffix.
// Leftovers under those names (a cleaning that died) are removed first. created is reported by
// Created (the cleaner passes the oldest replaced segment's).
func CreateCleaned(fsys vfs.FS, dir string, baseOffset int64, cfg Config, created time.Time) (*Segment, error) {
	if err := RemoveFiles(fsys, dir, baseOffset, CleanedSuffix); err != nil {
		return nil, err
	}
	s, err := open(fsys, dir, baseOffset, cfg, os.O_CREATE|os.O_EXCL|os.O_RDWR, CleanedSuffix)
	if err != nil {
		return nil, err
	}
	s.created = created
	return s, nil
}

// OpenSwap opens the segment at baseOffset whose files carry SwapSuffix (a swap decided before a
// crash). Like Open it does not scan the .log: Recover rebuilds its state and indexes.
func OpenSwap(fsys vfs.FS, dir string, baseOffset int64, cfg Config) (*Segment, error) {
	s, err := open(fsys, dir, baseOffset, cfg, os.O_RDWR, SwapSuffix)
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
	return s, nil
}

// RenameFiles renames the segment's three files from their current suffix to suffix: the two
// indexes first, the .log last, so the .log's name is the one that decides (a .log.swap is a
// decided swap; an index whose .log has not followed is rebuilt or removed at open). Open
// descriptors and mappings stay valid. The caller syncs the directory. It must run under the
// owning log's structure lock (Delete reads the suffix).
func (s *Segment) RenameFiles(suffix string) error {
	// idxMu: a lazy mapping of the indexes (lazyindex.go) never sees the names half renamed.
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	rename := func(from, to string) error {
		if err := s.fsys.Rename(from, to); err != nil {
			return fmt.Errorf("rename %s: %w", from, err)
		}
		return nil
	}
	var renameOffset, renameTime func(string) error
	if p := s.idx.Load(); p != nil {
		renameOffset, renameTime = p.offset.Rename, p.time.Rename
	} else { // not mapped (opened sealed): the files by name
		op, tp := s.indexPaths()
		renameOffset = func(to string) error { return rename(op, to) }
		renameTime = func(to string) error { return rename(tp, to) }
	}
	for _, idx := range []struct {
		rename func(string) error
		name   string
	}{
		{renameOffset, IndexSuffix},
		{renameTime, TimeIndexSuffix},
	} {
		if err := idx.rename(filepath.Join(s.dir, FileName(s.baseOffset, idx.name)+suffix)); err != nil {
			return err
		}
	}
	if err := s.renameTxn(suffix); err != nil {
		return err
	}
	from := filepath.Join(s.dir, FileName(s.baseOffset, LogSuffix)+s.suffix)
	to := filepath.Join(s.dir, FileName(s.baseOffset, LogSuffix)+suffix)
	if err := s.fsys.Rename(from, to); err != nil {
		return fmt.Errorf("rename segment %s: %w", from, err)
	}
	s.suffix = suffix
	return nil
}

// AppendCleaned writes whole batches (offsets assigned, increasing, each at or after the
// segment's next offset) at the end of the .log with one write, and indexes each batch as Append
// does. A full index stops indexing instead of failing, as in Recover: the segment is sealed
// right after, and a lookup past the last entry scans forward. It returns ErrSegmentFull when
// the .log would grow past int32 positions.
func (s *Segment) AppendCleaned(batches []byte) error {
	pos := s.size.Load()
	if pos+int64(len(batches)) > math.MaxInt32 {
		return fmt.Errorf("append to cleaned segment %s at %d: %w", s.name, pos, ErrSegmentFull)
	}
	if _, err := s.ownFile().WriteAt(batches, pos); err != nil {
		return fmt.Errorf("append to cleaned segment %s at %d: %w", s.name, pos, err)
	}
	next := s.nextOffset.Load()
	for p := int64(0); p < int64(len(batches)); {
		h, err := record.ParseHeader(batches[p:])
		if err != nil {
			return err
		}
		if h.Size() > int64(len(batches))-p || h.BaseOffset < next {
			return fmt.Errorf("cleaned batch at offset %d (size %d) does not follow offset %d: %w", h.BaseOffset, h.Size(), next, kerr.CorruptMessage)
		}
		if err := s.indexBatch(&h, pos+p); err != nil && !errors.Is(err, index.ErrIndexFull) {
			return err
		}
		next = h.NextOffset()
		p += h.Size()
	}
	s.size.Store(pos + int64(len(batches)))
	s.nextOffset.Store(next)
	return nil
}

// RemoveFiles removes the .log, .index, .timeindex and .txnindex of baseOffset carrying suffix; missing files
// are not an error. The caller syncs the directory.
func RemoveFiles(fsys vfs.FS, dir string, baseOffset int64, suffix string) error {
	for _, kind := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
		p := filepath.Join(dir, FileName(baseOffset, kind)+suffix)
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return nil
}
