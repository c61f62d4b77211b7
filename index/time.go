package index

import (
	"math"

	"github.com/weir-mq/weir/vfs"
)

// TimeEntrySize is the size of a time index entry: int64 timestamp | int32 relative offset.
const TimeEntrySize = 12

// noTimestamp is Kafka's RecordBatch.NO_TIMESTAMP, the timestamp of an empty time index.
const noTimestamp = -1

// TimeIndex maps timestamps to offsets in a segment (Kafka's TimeIndex). Each entry says that the
// largest timestamp seen in the segment up to offset is timestamp; timestamps strictly increase
// from entry to entry and offsets never decrease.
//
// One goroutine appends at a time; LookupBefore, Lookup, LastEntry, Entry and Entries may run
// concurrently with it and with each other.
type TimeIndex struct {
	mappedFile
}

// OpenTimeIndex opens or creates the time index at path for the segment starting at baseOffset.
// Sizing and mapping are as for OpenOffsetIndex, with 12-byte entries.
func OpenTimeIndex(fsys vfs.FS, path string, baseOffset int64, maxIndexBytes int) (*TimeIndex, error) {
	x := &TimeIndex{}
	if err := x.open(fsys, "time index", path, baseOffset, maxIndexBytes, TimeEntrySize, false); err != nil {
		return nil, err
	}
	return x, nil
}

// OpenTimeIndexSealed opens the existing time index at path of an inactive segment, mapped at the file's
// length (whole entries) and not grown: it serves lookups and takes no append (it is full). An
// empty file is not mapped. The file is never created.
func OpenTimeIndexSealed(fsys vfs.FS, path string, baseOffset int64) (*TimeIndex, error) {
	x := &TimeIndex{}
	if err := x.open(fsys, "time index", path, baseOffset, 0, TimeEntrySize, true); err != nil {
		return nil, err
	}
	return x, nil
}

// entry decodes entry i of the mapping into a timestamp and an absolute offset.
func (x *TimeIndex) entry(i int) (timestamp int64, offset int64) {
	return timeTimestamp.get(x.mapping, i), x.baseOffset + timeRelativeOffset.get(x.mapping, i)
}

// LastEntry returns the last entry, or (-1, BaseOffset()) if the index is empty (-1 is Kafka's
// RecordBatch.NO_TIMESTAMP).
func (x *TimeIndex) LastEntry() (timestamp int64, offset int64) {
	if n := x.Entries(); n > 0 {
		return x.entry(n - 1)
	}
	return noTimestamp, x.baseOffset
}

// MaybeAppend appends (timestamp, offset) if timestamp is greater than the last entry's timestamp
// (Kafka's TimeIndex.maybeAppend) and otherwise returns nil without appending. An offset below the
// last entry's is refused with ErrNotMonotonic, even when nothing would be appended; an offset that
// does not fit int32 relative to the base with ErrOffsetOverflow; a full index with ErrIndexFull.
//
// skipFullCheck is Kafka's flag for the append made when the segment rolls or closes. Without it a
// full index (IsFull: the last slot is reserved) is refused before anything else is looked at, as in
// Kafka. With it the reserved slot may be used, so the final entry (max timestamp so far) always
// fits; an index opened with no free slot at all (a lowered maximum) refuses it only if the entry
// would actually be appended.
func (x *TimeIndex) MaybeAppend(timestamp int64, offset int64, skipFullCheck bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return x.errorfLocked(ErrClosed, "append")
	}
	n := x.Entries()
	if !skipFullCheck && x.isFull(n) {
		return x.errorfLocked(ErrIndexFull, "append timestamp %d at offset %d after %d entries", timestamp, offset, n)
	}
	lastTimestamp, lastOffset := x.LastEntry()
	if n > 0 && offset < lastOffset {
		return x.errorfLocked(ErrNotMonotonic, "append timestamp %d at offset %d after timestamp %d at offset %d",
			timestamp, offset, lastTimestamp, lastOffset)
	}
	if timestamp <= lastTimestamp {
		return nil
	}
	n, err := x.nextSlotLocked()
	if err != nil {
		return err
	}
	relativeOffset, ok := relative(x.baseOffset, offset)
	if !ok {
		return x.errorfLocked(ErrOffsetOverflow, "append timestamp %d at offset %d to base %d", timestamp, offset, x.baseOffset)
	}
	if err := x.coverSlotLocked(); err != nil {
		return err
	}
	timeTimestamp.put(x.mapping, n, timestamp)
	timeRelativeOffset.put(x.mapping, n, relativeOffset)
	x.setEntriesLocked(n + 1)
	return nil
}

// IsFull reports whether the index takes no more entries but the final one: as Kafka's
// TimeIndex.isFull, the last slot is reserved for the entry appended when the segment rolls or
// closes (MaybeAppend with skipFullCheck), so that entry is never lost to a full index. The segment
// rolls when it is full.
func (x *TimeIndex) IsFull() bool { return x.isFull(x.Entries()) }

func (x *TimeIndex) isFull(n int) bool { return n >= x.maxEntries-1 }

// LookupBefore returns the entry with the largest timestamp strictly below target, or
// (-1, BaseOffset()) if there is none. Every record up to that entry's offset has a timestamp
// below target, so a scan of the log from there finds the first batch whose max timestamp is
// >= target (ListOffsets by timestamp). Same warm-first search as OffsetIndex.Lookup; it does not
// allocate.
func (x *TimeIndex) LookupBefore(target int64) (timestamp int64, offset int64) {
	if target == math.MinInt64 {
		return noTimestamp, x.baseOffset
	}
	return x.lookupAtMost(target - 1)
}

// Lookup returns the entry with the largest timestamp <= target, or (-1, BaseOffset()) if there is
// none (Kafka's TimeIndex.lookup). It does not allocate.
func (x *TimeIndex) Lookup(target int64) (timestamp int64, offset int64) {
	return x.lookupAtMost(target)
}

func (x *TimeIndex) lookupAtMost(target int64) (timestamp int64, offset int64) {
	i := timeTimestamp.lastAtMost(x.mapping, x.Entries(), target)
	if i < 0 {
		return noTimestamp, x.baseOffset
	}
	return x.entry(i)
}

// Entry returns entry i as a timestamp and an absolute offset. It panics unless i < Entries().
func (x *TimeIndex) Entry(i int) (timestamp int64, offset int64) {
	x.checkEntry(i, x.Entries())
	return x.entry(i)
}

// TruncateTo removes every entry whose offset is >= offset (when the log is truncated to offset).
// Offsets may repeat between entries; all copies of a removed offset go.
func (x *TimeIndex) TruncateTo(offset int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.truncateLocked(countBelow(timeRelativeOffset, x.mapping, x.Entries(), x.baseOffset, offset))
}

// SanityCheck reports ErrCorruptIndex (wrapped with the detail) if the file's length at open was not
// a whole number of entries, or if the last entry cannot follow the others: its timestamp must be at
// least the first entry's (Kafka's check) and greater than the previous one's, its offset at least
// the base and at least the previous one's.
func (x *TimeIndex) SanityCheck() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.sanityCheckLengthLocked(); err != nil {
		return err
	}
	n := x.Entries()
	if n == 0 {
		return nil
	}
	lastTimestamp, lastOffset := x.entry(n - 1)
	firstTimestamp, _ := x.entry(0)
	if lastTimestamp < firstTimestamp || lastOffset < x.baseOffset {
		return x.errorfLocked(ErrCorruptIndex, "last entry (timestamp %d, offset %d) of %d is out of range (first timestamp %d, base offset %d)",
			lastTimestamp, lastOffset, n, firstTimestamp, x.baseOffset)
	}
	if n > 1 {
		prevTimestamp, prevOffset := x.entry(n - 2)
		if lastTimestamp <= prevTimestamp || lastOffset < prevOffset {
			return x.errorfLocked(ErrCorruptIndex, "last entry (timestamp %d, offset %d) of %d does not follow (timestamp %d, offset %d)",
				lastTimestamp, lastOffset, n, prevTimestamp, prevOffset)
		}
	}
	return nil
}
