package engine

// Delayed segment deletion (file.delete.delay.ms / log.segment.delete.delay.ms), as Kafka's
// LocalLog.deleteSegmentFiles: a segment leaving the log (retention, DeleteRecords, a cleaner
// swap, a truncation) has its files renamed <name>.deleted at once and its reference dropped; the
// files are removed by a timer after the delay. Readers that held the segment keep their open
// descriptor (and any mapping) until they release it, so the descriptor and mapping budgets
// count the segment only while someone reads it, not for the whole delay. A restart removes
// leftover .deleted files (load.go). A failed removal is logged: the file is removed at the next
// start.

import (
	"errors"
	"io/fs"
	"log/slog"
	"time"

	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// deleteSegment removes s from disk: at once when delayMs <= 0, else renamed .deleted now and
// removed delayMs later. Either way the caller's (the log's) reference is dropped. Requires the
// log's structure lock (the rename changes the segment's file names).
func deleteSegment(fsys vfs.FS, s *segment.Segment, delayMs int64) error {
	if delayMs <= 0 {
		return s.Delete()
	}
	paths, err := s.RenameDeleted()
	if err != nil {
		return err
	}
	time.AfterFunc(time.Duration(delayMs)*time.Millisecond, func() { removeFiles(fsys, paths) })
	return nil
}

// removeFiles removes the .deleted files of a segment; a missing file (the directory was deleted
// meanwhile, or a later segment of the same base took the name and was removed first) is not an
// error.
func removeFiles(fsys vfs.FS, paths []string) {
	for _, p := range paths {
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			slog.Warn("remove deleted segment file (retried at the next start)", "file", p, "err", err)
		}
	}
}
