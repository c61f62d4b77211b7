package engine

// The crash-safe swap of a cleaned segment, and its completion at open (Kafka's replaceSegments
// and the .swap handling of LogLoader).
//
// The cleaner writes a group's cleaned data to <base>.log.cleaned (+ .index.cleaned,
// .timeindex.cleaned), fdatasyncs it and flushes its indexes. Then, holding the log's structure
// lock (truncation, retention, DeleteRecords and Close wait; appends and reads do not):
//
//  1. check that the group's segments are still in the log and no truncation happened;
//  2. rename the .cleaned files to .swap (the .log last) and fsync the directory: the swap is
//     decided, and durably so;
//  3. publish the new segment list (the cleaned segment in place of the group) under the append
//     lock; readers holding the old segments keep reading them;
//  4. delete the old segments (unlink; open descriptors stay valid) and fsync the directory;
//  5. rename the .swap files to their plain names (the .log last) and fsync the directory.
//
// A crash before 2 is durable leaves a .cleaned (or an undurable .swap the directory lost):
// removed at open, the log is as before. After 2, open finds <base>.log.swap and finishes the
// swap: it rebuilds the swap segment's indexes from its .log, deletes every .log segment whose
// base offset lies in [base, the swap segment's next offset) (exactly the group's segments that
// still hold a record of the swap's range, and the first of them in any case), syncs the
// directory, renames the .swap files and syncs again. A group segment the swap's range does not
// reach (all its records were removed) may survive that: it holds only records the cleaned
// segment superseded, so the log reads as partly uncleaned, never as missing a record. The
// directory sync of step 4 comes before step 5 so that a crash can never resurrect an old
// segment next to the renamed cleaned one (which would overlap it).

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"

	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// swapCleaned swaps ns (a sealed segment with .cleaned files) in for old, a run of consecutive
// segments of the log, as the file comment says. hook is called after each step (tests crash
// there); its error stops the swap. A failure after the swap was decided takes the log dir
// offline, whatever the cause (even resource exhaustion: a decided swap cannot be abandoned
// halfway): the next open finishes the swap. A resource failure of the sync that decides it undoes
// the rename and abandons the cleaning instead.
func (l *Log) swapCleaned(ns *segment.Segment, old []*segment.Segment, truncations int64, hook func(string) error) error {
	l.structMu.Lock()
	defer l.structMu.Unlock()
	l.mu.Lock()
	ok := !l.closed && l.logDir.Err() == nil && l.clean.truncations.Load() == truncations && l.findRunLocked(old) >= 0
	l.mu.Unlock()
	if !ok {
		_ = ns.Delete()
		return errCleanAborted
	}
	if err := ns.RenameFiles(segment.SwapSuffix); err != nil {
		return l.logDir.failHard(err)
	}
	if err := hook("swap-renamed"); err != nil {
		return err
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		if vfs.IsResourceExhausted(err) && ns.RenameFiles(segment.CleanedSuffix) == nil {
			// Not decided yet as far as the disk knows (the rename may not be durable): undo
			// it and give this cleaning up; the log dir stays online.
			_ = ns.Delete()
			return l.logDir.Refuse(err)
		}
		return l.logDir.failHard(err)
	}
	if err := hook("swap-synced"); err != nil {
		return err
	}

	l.mu.Lock()
	segs := l.Segments()
	i := l.findRunLocked(old)
	first, after := old[0].BaseOffset(), segs[i+len(old)].BaseOffset()
	next := make([]*segment.Segment, 0, len(segs)-len(old)+1)
	next = append(next, segs[:i]...)
	next = append(next, ns)
	next = append(next, segs[i+len(old):]...)
	// The log end's and the high watermark's places name a segment and a byte position in it.
	// Right after a roll they still name the segment before the active one, with its size, and
	// that segment may be one being replaced: before the new list is published, move them to the
	// segments after the group (the offsets are the same). A high watermark that moved down into
	// the group since the cleaning began is recomputed right after the publication.
	l.hwMu.Lock()
	if _, endBase, _ := l.end.load(); endBase >= first && endBase < after {
		l.end.store(l.nextOffset, l.active.BaseOffset(), l.active.Size())
	}
	hwOffset, hwBase, _ := l.hw.load()
	hwMoves := hwBase >= first && hwBase < after
	if hwMoves && hwOffset >= after {
		_ = l.setHighWatermarkLocked(hwOffset)
	}
	l.segments.Store(&next)
	if hwMoves && hwOffset < after {
		_ = l.setHighWatermarkLocked(hwOffset)
	}
	l.hwMu.Unlock()
	l.mu.Unlock()
	if err := hook("published"); err != nil {
		return err
	}

	for _, s := range old {
		// Renamed .deleted (file.delete.delay.ms) or removed: either way its name is free for
		// the .swap rename below.
		if err := deleteSegment(l.fsys, s, l.config().FileDeleteDelayMs); err != nil {
			return l.logDir.failHard(err)
		}
		if err := hook("old-deleted"); err != nil {
			return err
		}
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return l.logDir.failHard(err)
	}
	if err := hook("old-synced"); err != nil {
		return err
	}
	if err := ns.RenameFiles(""); err != nil {
		return l.logDir.failHard(err)
	}
	if err := hook("renamed"); err != nil {
		return err
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return l.logDir.failHard(err)
	}
	return hook("done")
}

// findRunLocked returns the index of run in the segment list when run is there, consecutive and
// followed by at least one segment, or -1. Requires l.mu.
func (l *Log) findRunLocked(run []*segment.Segment) int {
	segs := l.Segments()
	for i, s := range segs {
		if s != run[0] {
			continue
		}
		if i+len(run) >= len(segs) {
			return -1
		}
		for j := range run {
			if segs[i+j] != run[j] {
				return -1
			}
		}
		return i
	}
	return -1
}

// completeSwaps finishes, at open, every swap a crash interrupted (see the file comment), and
// removes .swap indexes whose .log.swap is gone. It runs before the segments are opened.
func (l *Log) completeSwaps() error {
	entries, err := l.fsys.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("list log %s: %w", l.dir, err)
	}
	swapLog := segment.LogSuffix + segment.SwapSuffix
	swaps := map[int64]bool{}
	var bases []int64
	for _, e := range entries {
		if b, ok := segment.ParseFileName(e.Name(), swapLog); ok {
			swaps[b] = true
		} else if b, ok := segment.ParseFileName(e.Name(), segment.LogSuffix); ok {
			bases = append(bases, b)
		}
	}
	for _, e := range entries {
		for _, suffix := range []string{segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix} {
			if b, ok := segment.ParseFileName(e.Name(), suffix+segment.SwapSuffix); ok && !swaps[b] {
				if err := l.fsys.Remove(filepath.Join(l.dir, e.Name())); err != nil {
					return fmt.Errorf("remove leftover %s: %w", e.Name(), err)
				}
			}
		}
	}
	order := make([]int64, 0, len(swaps))
	for b := range swaps {
		order = append(order, b)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	for _, base := range order {
		if err := l.completeSwap(base, bases); err != nil {
			return err
		}
	}
	return nil
}

// completeSwap finishes the swap of the segment at base; bases are the .log segments present.
func (l *Log) completeSwap(base int64, bases []int64) error {
	s, err := segment.OpenSwap(l.fsys, l.dir, base, l.config().segmentConfig())
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			s.Close()
		}
	}()
	truncated, err := s.Recover()
	if err != nil {
		return fmt.Errorf("recover %s: %w", s.LogPath(), err)
	}
	if truncated > 0 {
		// A .swap is fdatasync'd before it gets that name: only a lying disk tears it.
		slog.Warn("cleaned segment torn; keeping its valid prefix", "segment", s.LogPath(), "bytes", truncated)
	}
	if err := s.MarkInactive(); err != nil {
		return err
	}
	if err := s.Seal(); err != nil {
		return fmt.Errorf("complete swap %s: %w", s.LogPath(), err)
	}
	end := max(s.NextOffset(), base+1)
	var replaced []string
	for _, b := range bases {
		if b >= base && b < end {
			if err := segment.RemoveFiles(l.fsys, l.dir, b, ""); err != nil {
				return err
			}
			replaced = append(replaced, segment.FileName(b, segment.LogSuffix))
		}
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fmt.Errorf("complete swap in %s: %w", l.dir, err)
	}
	if err := s.RenameFiles(""); err != nil {
		return err
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fmt.Errorf("complete swap in %s: %w", l.dir, err)
	}
	done = true
	slog.Info("completed an interrupted swap of a cleaned segment", "dir", l.dir,
		"segment", segment.FileName(base, segment.LogSuffix), "replaced", strings.Join(replaced, ","))
	return s.Close()
}
