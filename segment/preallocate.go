package segment

// Preallocation (preallocate / log.preallocate), as Kafka's FileRecords does it: a new segment's
// .log is made segment.bytes long at creation, appends write inside it (so the file's size does
// not change and an fdatasync has no size to commit), and the file is trimmed to the bytes
// really written when the segment rolls (MarkInactive, Kafka's onBecomeInactiveSegment) and when
// it is closed (Kafka's FileRecords.close). The segment's Size is always the logical size (the
// bytes of its batches): roll, retention and reads use it, never the file's length.
//
// weir reserves the space with fallocate(2) (mode 0: blocks allocated, reading as zeros, the
// size set), so a preallocated segment really has its space on disk and is not fragmented;
// Kafka's RandomAccessFile.setLength only sets the size (a sparse file). Where the filesystem
// does not support fallocate (EOPNOTSUPP, ENOSYS), and when the disk has not the room for a
// whole segment (ENOSPC: the appends may still fit, as they would in Kafka's sparse file), it
// falls back to ftruncate.
//
// After a crash, a preallocated segment that was not trimmed ends in zeros: recovery
// (RecoverTail) stops at the first byte that does not start a valid batch, truncates the file
// there, and reports whether what it cut was only zeros (the unused end of a preallocated
// file, not a torn write).

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/vfs"
)

// preallocate makes f size bytes long, with its blocks allocated where the filesystem can.
func preallocate(f vfs.File, size int64) error {
	fd := int(f.OS().Fd())
	var err error
	for {
		err = unix.Fallocate(fd, 0, 0, size)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOSPC) {
		if terr := f.Truncate(size); terr != nil {
			return fmt.Errorf("preallocate %s to %d bytes: %w", f.Name(), size, terr)
		}
		return nil
	}
	return fmt.Errorf("preallocate %s to %d bytes: %w", f.Name(), size, err)
}

// trimPreallocated truncates a preallocated .log to its logical size (once; later calls do
// nothing). Called by the appender (MarkInactive) or at close.
func (s *Segment) trimPreallocated() error {
	if !s.preallocated.Load() {
		return nil
	}
	if err := s.withLog(func(f vfs.File) error { return f.Truncate(s.size.Load()) }); err != nil {
		return fmt.Errorf("trim preallocated segment %s to %d bytes: %w", s.name, s.size.Load(), err)
	}
	s.preallocated.Store(false)
	return nil
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
