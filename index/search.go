package index

import "encoding/binary"

// warmSectionBytes is the size of the tail of an index that lookups search first.
//
// Almost every lookup asks for a recent offset or timestamp: followers and consumers near the head
// read what was just appended. A plain binary search over the whole index starts in the middle and
// touches about log2(n) pages, most of them cold, so under memory pressure a head read can fault in
// pages of an index nobody else reads. Searching the last warmSectionBytes of entries first keeps
// the head lookups on the two or three pages that appends keep in the page cache anyway; only
// targets older than the warm section pay for a search of the rest. 8 KiB is Kafka's choice
// (AbstractIndex): large enough to cover what in-sync followers and tailing consumers ask for,
// small enough to stay resident. The boundary entry is chosen from the entry count alone, so the
// same pages are touched whichever entries are being looked up.
const warmSectionBytes = 8192

// field names one big-endian signed integer stored in every fixed-width entry of an index mapping.
// Both index kinds search through a field: the offset index by relative offset, the time index by
// timestamp (lookups) and by relative offset (truncation).
type field struct {
	entrySize int // bytes per entry
	at        int // byte offset of the integer inside an entry
	width     int // 4 (int32) or 8 (int64)
}

var (
	offsetRelativeOffset = field{entrySize: OffsetEntrySize, at: 0, width: 4}
	offsetPosition       = field{entrySize: OffsetEntrySize, at: 4, width: 4}
	timeTimestamp        = field{entrySize: TimeEntrySize, at: 0, width: 8}
	timeRelativeOffset   = field{entrySize: TimeEntrySize, at: 8, width: 4}
)

// get returns the field of entry i of buf.
func (f field) get(buf []byte, i int) int64 {
	p := i*f.entrySize + f.at
	if f.width == 4 {
		return int64(int32(binary.BigEndian.Uint32(buf[p : p+4])))
	}
	return int64(binary.BigEndian.Uint64(buf[p : p+8]))
}

// put stores v into the field of entry i of buf. v must fit the field's width.
func (f field) put(buf []byte, i int, v int64) {
	p := i*f.entrySize + f.at
	if f.width == 4 {
		binary.BigEndian.PutUint32(buf[p:p+4], uint32(int32(v)))
		return
	}
	binary.BigEndian.PutUint64(buf[p:p+8], uint64(v))
}

// lastAtMost returns the largest i in [0, n) whose field is <= target, or -1 if there is none.
// The field must be non-decreasing over [0, n). The warm section (the last warmSectionBytes of
// entries) is tried first: one probe at its boundary decides whether the search continues inside
// it or in the older entries before it. It does not allocate.
func (f field) lastAtMost(buf []byte, n int, target int64) int {
	// Invariant of the loop below: every entry before lo is <= target, every entry from hi on is
	// > target; the answer is lo-1 once lo == hi.
	lo, hi := 0, n
	if boundary := n - 1 - warmSectionBytes/f.entrySize; boundary > 0 {
		if f.get(buf, boundary) <= target {
			lo = boundary + 1
		} else {
			hi = boundary
		}
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if f.get(buf, mid) <= target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo - 1
}
