package engine

import (
	"errors"
	"hash/maphash"
	"math/bits"
)

// offsetMap is the cleaner's map from record key to the latest offset holding that key, with a
// fixed memory bound (Kafka's SkimpyOffsetMap, log.cleaner.dedupe.buffer.size). A key is not
// stored: it is represented by a 128-bit hash (two independently seeded maphash values), so the
// map's size does not depend on key sizes. Two different keys share a hash with probability
// about n^2/2^129 for n keys: negligible (Kafka makes the same bet with MD5).
//
// Layout: an open-addressing table of offsetMapSlotBytes-byte slots {hash1, hash2, tag}, linear
// probing from the slot hash1 maps to. The tag holds the map's generation in its top 8 bits and
// offset+1 in the rest: reset starts a new generation instead of clearing the table; every 255
// generations the table is cleared for real.
//
// Size: reset is told how many keys the cleaning may need at most (the record count of the
// dirty section, from batch headers) and uses a table just large enough, never more than the
// memory bound: a small dirty section probes a table that fits the CPU caches instead of
// scattering over the whole buffer. The allocation is kept and reused, replaced by a larger one
// when a cleaning needs it (the old one is dropped first: one table is live at a time).
//
// The map holds at most offsetMapLoadFactor of its slots (Kafka's dedupe buffer load factor):
// put reports false once it is full, and the cleaner stops its dirty scan there.
//
// Not safe for concurrent use: each cleaner owns one.
type offsetMap struct {
	maxSlots int
	// slots is the table of this cleaning: a prefix of backing.
	slots      []offsetMapSlot
	backing    []offsetMapSlot
	gen        uint64
	entries    int
	maxEntries int
	seed1      maphash.Seed
	seed2      maphash.Seed
	// latest is the largest offset put since the last reset, or -1.
	latest int64
}

type offsetMapSlot struct {
	hash1, hash2 uint64
	tag          uint64 // gen<<offsetMapGenShift | (offset + 1); another generation = empty
}

const (
	offsetMapSlotBytes  = 24
	offsetMapLoadFactor = 0.9
	offsetMapGenShift   = 56
	// offsetMapMaxOffset is the largest offset the tag can hold.
	offsetMapMaxOffset = 1<<offsetMapGenShift - 2
	// offsetMapMinSlots keeps a tiny configured buffer usable.
	offsetMapMinSlots = 16
	// offsetMapInitialSlots is the smallest table allocated (96 KiB).
	offsetMapInitialSlots = 4096
)

var errOffsetTooLarge = errors.New("offset too large for the cleaner's offset map")

// newOffsetMap returns a map using at most memoryBytes of slots.
func newOffsetMap(memoryBytes int64) *offsetMap {
	n := max(int(memoryBytes/offsetMapSlotBytes), offsetMapMinSlots)
	return &offsetMap{
		maxSlots: n,
		seed1:    maphash.MakeSeed(),
		seed2:    maphash.MakeSeed(),
		latest:   -1,
	}
}

// capacity is the number of keys the map holds at most (with the largest table).
func (m *offsetMap) capacity() int { return int(float64(m.maxSlots) * offsetMapLoadFactor) }

// reset empties the map for a cleaning that puts at most keys keys (an upper bound; a larger
// value only costs memory and cache misses).
func (m *offsetMap) reset(keys int64) {
	n := m.maxSlots
	if want := float64(keys)/offsetMapLoadFactor + 1; want < float64(n) {
		n = max(int(want), min(offsetMapInitialSlots, m.maxSlots))
	}
	if n > len(m.backing) {
		// Grow geometrically (cleanings of one log tend to need similar sizes).
		size := min(max(n, 2*len(m.backing)), m.maxSlots)
		m.backing = nil // one table live at a time
		m.backing = make([]offsetMapSlot, size)
		m.gen = 0
	}
	m.slots = m.backing[:n]
	m.maxEntries = max(int(float64(n)*offsetMapLoadFactor), 1)
	m.gen++
	if m.gen >= 1<<(64-offsetMapGenShift) {
		clear(m.backing)
		m.gen = 1
	}
	m.entries = 0
	m.latest = -1
}

func (m *offsetMap) hash(key []byte) (uint64, uint64, int) {
	h1 := maphash.Bytes(m.seed1, key)
	h2 := maphash.Bytes(m.seed2, key)
	i, _ := bits.Mul64(h1, uint64(len(m.slots)))
	return h1, h2, int(i)
}

// put records offset as the latest offset of key, unless a higher one is recorded (offsets
// arrive in increasing order from valid batches; a malformed batch cannot make the map forget a
// later record). It returns false, changing nothing, when key is new and the map is full.
func (m *offsetMap) put(key []byte, offset int64) (bool, error) {
	if offset < 0 || offset > offsetMapMaxOffset {
		return false, errOffsetTooLarge
	}
	h1, h2, i := m.hash(key)
	tag := m.gen<<offsetMapGenShift | uint64(offset+1)
	for {
		s := &m.slots[i]
		if s.tag>>offsetMapGenShift != m.gen {
			if m.entries >= m.maxEntries {
				return false, nil
			}
			*s = offsetMapSlot{hash1: h1, hash2: h2, tag: tag}
			m.entries++
			break
		}
		if s.hash1 == h1 && s.hash2 == h2 {
			if tag > s.tag {
				s.tag = tag
			}
			break
		}
		if i++; i == len(m.slots) {
			i = 0
		}
	}
	if offset > m.latest {
		m.latest = offset
	}
	return true, nil
}

// get returns the latest offset recorded for key, or -1.
func (m *offsetMap) get(key []byte) int64 {
	if m.entries == 0 {
		return -1
	}
	h1, h2, i := m.hash(key)
	for {
		s := &m.slots[i]
		if s.tag>>offsetMapGenShift != m.gen {
			return -1
		}
		if s.hash1 == h1 && s.hash2 == h2 {
			return int64(s.tag&(1<<offsetMapGenShift-1)) - 1
		}
		if i++; i == len(m.slots) {
			i = 0
		}
	}
}

// full reports whether a new key would be refused.
func (m *offsetMap) full() bool { return m.entries >= m.maxEntries }
