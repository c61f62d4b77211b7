package index

import (
	"math"

	"github.com/weir-mq/weir/vfs"
)

// OffsetEntrySize is the size of an offset index entry: int32 relative offset | int32 position.
const OffsetEntrySize = 8

// OffsetIndex maps offsets to byte positions in a segment's .log file (Kafka's OffsetIndex). It is
// sparse: the segment adds an entry every log.index.interval.bytes, and a reader scans the log
// forward from the entry Lookup returns.
//
// One goroutine appends at a time; Lookup, LastOffset, Entry and Entries may run concurrently with
// it and with each other.
type OffsetIndex struct {
	mappedFile
}

// OpenOffsetIndex opens or creates the offset index at path for the segment starting at baseOffset.
// An existing file of s bytes holds s/8 entries (after a clean shutdown it was trimmed; the zero
// entries that pad a file that was not are not counted). The file is then grown to maxIndexBytes
// (Kafka's log.index.size.max.bytes) rounded down to whole entries, at least one, and mapped
// read-write. A file whose length is not a whole number of entries is still opened, rounded down;
// SanityCheck reports it. A file longer than maxIndexBytes is mapped whole and is full.
func OpenOffsetIndex(fsys vfs.FS, path string, baseOffset int64, maxIndexBytes int) (*OffsetIndex, error) {
	x := &OffsetIndex{}
	if err := x.open(fsys, "offset index", path, baseOffset, maxIndexBytes, OffsetEntrySize, false); err != nil {
		return nil, err
	}
	return x, nil
}

// OpenOffsetIndexSealed opens the existing offset index at path of an inactive segment, mapped at the file's
// length (whole entries) and not grown: it serves lookups and takes no append (it is full). An
// empty file is not mapped. The file is never created.
func OpenOffsetIndexSealed(fsys vfs.FS, path string, baseOffset int64) (*OffsetIndex, error) {
	x := &OffsetIndex{}
	if err := x.open(fsys, "offset index", path, baseOffset, 0, OffsetEntrySize, true); err != nil {
		return nil, err
	}
	return x, nil
}

// entry decodes entry i of the mapping into an absolute offset and a position.
func (x *OffsetIndex) entry(i int) (offset int64, position int64) {
	return x.baseOffset + offsetRelativeOffset.get(x.mapping, i), offsetPosition.get(x.mapping, i)
}

// LastOffset returns the offset of the last entry, or the base offset if the index is empty.
func (x *OffsetIndex) LastOffset() int64 {
	if n := x.Entries(); n > 0 {
		offset, _ := x.entry(n - 1)
		return offset
	}
	return x.baseOffset
}

// Append adds an entry saying that the batch holding offset starts at byte position of the log.
// It refuses, with a wrapped error, an index that is full (ErrIndexFull), an offset below the base
// or more than math.MaxInt32 above it, or a position outside [0, math.MaxInt32] (ErrOffsetOverflow),
// and an entry whose offset or position is not greater than the last entry's (ErrNotMonotonic).
func (x *OffsetIndex) Append(offset int64, position int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	n, err := x.nextSlotLocked()
	if err != nil {
		return err
	}
	relativeOffset, ok := relative(x.baseOffset, offset)
	if !ok {
		return x.errorfLocked(ErrOffsetOverflow, "append offset %d to base %d", offset, x.baseOffset)
	}
	if position < 0 || position > math.MaxInt32 {
		return x.errorfLocked(ErrOffsetOverflow, "append offset %d at position %d", offset, position)
	}
	if n > 0 {
		lastOffset, lastPosition := x.entry(n - 1)
		if offset <= lastOffset || position <= lastPosition {
			return x.errorfLocked(ErrNotMonotonic, "append offset %d at position %d after offset %d at position %d",
				offset, position, lastOffset, lastPosition)
		}
	}
	if err := x.coverSlotLocked(); err != nil {
		return err
	}
	offsetRelativeOffset.put(x.mapping, n, relativeOffset)
	offsetPosition.put(x.mapping, n, position)
	x.setEntriesLocked(n + 1)
	return nil
}

// Lookup returns the entry with the largest offset <= target, as an absolute offset and a position.
// If there is none (the index is empty or target precedes its first entry) it returns
// (BaseOffset(), 0): the segment's first batch starts at position 0. The most recent 8 KiB of
// entries are searched first (see warmSectionBytes). It does not allocate.
func (x *OffsetIndex) Lookup(target int64) (offset int64, position int64) {
	if target < x.baseOffset {
		return x.baseOffset, 0
	}
	// Every entry is <= a target beyond int32 (and target-base cannot overflow int64 here).
	relativeTarget := min(target-x.baseOffset, math.MaxInt32)
	i := offsetRelativeOffset.lastAtMost(x.mapping, x.Entries(), relativeTarget)
	if i < 0 {
		return x.baseOffset, 0
	}
	return x.entry(i)
}

// Entry returns entry i as an absolute offset and a position. It panics unless i < Entries().
func (x *OffsetIndex) Entry(i int) (offset int64, position int64) {
	x.checkEntry(i, x.Entries())
	return x.entry(i)
}

// TruncateTo removes every entry whose offset is >= offset (when the log is truncated to offset).
func (x *OffsetIndex) TruncateTo(offset int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.truncateLocked(countBelow(offsetRelativeOffset, x.mapping, x.Entries(), x.baseOffset, offset))
}

// relative returns offset-base and whether it fits a non-negative int32.
func relative(base, offset int64) (int64, bool) {
	if offset < base || offset-base > math.MaxInt32 {
		return 0, false
	}
	return offset - base, true
}

// countBelow returns how many of the first n entries have field f below the absolute offset, where
// f holds offsets relative to base and is non-decreasing over the entries.
func countBelow(f field, buf []byte, n int, base, offset int64) int {
	if offset <= base {
		return 0
	}
	if offset-base > math.MaxInt32 {
		return n
	}
	return f.lastAtMost(buf, n, offset-base-1) + 1
}

// SanityCheck reports ErrCorruptIndex (wrapped with the detail) if the file's length at open was not
// a whole number of entries, or if the last entry does not fit after the one before it: its offset
// must be at least the base and greater than the previous offset, its position non-negative and
// greater than the previous position. A zero entry after the first is the unwritten padding of a file
// that was neither trimmed nor recovered (Kafka never indexes position 0) and fails the same test.
func (x *OffsetIndex) SanityCheck() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.sanityCheckLengthLocked(); err != nil {
		return err
	}
	n := x.Entries()
	if n == 0 {
		return nil
	}
	lastOffset, lastPosition := x.entry(n - 1)
	if lastOffset < x.baseOffset || lastPosition < 0 {
		return x.errorfLocked(ErrCorruptIndex, "last entry (offset %d, position %d) of %d is out of range (base offset %d)",
			lastOffset, lastPosition, n, x.baseOffset)
	}
	if n > 1 {
		prevOffset, prevPosition := x.entry(n - 2)
		if lastOffset <= prevOffset || lastPosition <= prevPosition {
			return x.errorfLocked(ErrCorruptIndex, "last entry (offset %d, position %d) of %d does not follow (offset %d, position %d)",
				lastOffset, lastPosition, n, prevOffset, prevPosition)
		}
	}
	return nil
}
