package broker

// The decode charge of a request (netio.Config.DecodeCost): the memory its decoded form and its
// response take beyond its frame. The transport's bounds count frame bytes; a request made of
// many tiny entries decodes into many times its size (a Produce partition with no records is 6
// to 8 bytes on the wire and about 300 bytes of request and response structures; a Metadata
// topic name of 4 bytes about 200), so without this charge the bounds would not bound memory.

import (
	"encoding/binary"
)

const (
	// decodeAmplification bounds how many times its frame size a request other than Produce
	// takes once decoded and answered (measured: about 35 for a Metadata request naming
	// hundreds of thousands of short topic names, the worst case of the APIs served).
	decodeAmplification = 40
	// producePartitionCost and produceTopicCost are what one partition and one topic entry of
	// a Produce request take decoded, answered and tracked (measured: about 275 bytes a
	// partition for a request naming a million partitions without records), rounded up.
	producePartitionCost = 320
	produceTopicCost     = 256
)

// requestDecodeCost estimates the memory a request takes beyond its frame once decoded and
// answered. A Produce request's record bytes are not copied (the decoded request refers to the
// frame, and they are appended from there), so it is charged for its entries, counted by a scan
// of its topics and partitions that skips the records; any other request for its size times
// decodeAmplification. A frame that does not scan is charged as the others: its decode fails.
func requestDecodeCost(key, version int16, frame []byte) int64 {
	if key == 0 {
		if topics, partitions, ok := scanProduce(version, frame); ok {
			return topics*produceTopicCost + partitions*producePartitionCost
		}
	}
	return decodeAmplification * int64(len(frame))
}

// wire is a bounds-checked reader over a request's bytes; the first failure sticks.
type wire struct {
	b   []byte
	bad bool
}

func (w *wire) skip(n int64) {
	if w.bad || n < 0 || n > int64(len(w.b)) {
		w.bad = true
		return
	}
	w.b = w.b[n:]
}

func (w *wire) int16() int16 {
	if w.bad || len(w.b) < 2 {
		w.bad = true
		return 0
	}
	v := int16(binary.BigEndian.Uint16(w.b))
	w.b = w.b[2:]
	return v
}

func (w *wire) int32() int32 {
	if w.bad || len(w.b) < 4 {
		w.bad = true
		return 0
	}
	v := int32(binary.BigEndian.Uint32(w.b))
	w.b = w.b[4:]
	return v
}

func (w *wire) uvarint() uint64 {
	if w.bad {
		return 0
	}
	v, n := binary.Uvarint(w.b)
	if n <= 0 {
		w.bad = true
		return 0
	}
	w.b = w.b[n:]
	return v
}

// string skips a string or nullable string: int16 length (-1: null) or, flexible, a uvarint of
// length+1 (0: null).
func (w *wire) string(flexible bool) {
	if flexible {
		if n := w.uvarint(); n > 0 {
			w.skip(int64(n - 1))
		}
		return
	}
	if n := w.int16(); n > 0 {
		w.skip(int64(n))
	}
}

// bytes skips nullable bytes: int32 length (-1: null) or, flexible, a uvarint of length+1.
func (w *wire) bytes(flexible bool) {
	if flexible {
		if n := w.uvarint(); n > 0 {
			w.skip(int64(n - 1))
		}
		return
	}
	if n := w.int32(); n > 0 {
		w.skip(int64(n))
	}
}

// arrayLen reads an array's length: int32 or, flexible, a uvarint of length+1 (0: null).
func (w *wire) arrayLen(flexible bool) int64 {
	if flexible {
		n := w.uvarint()
		if n == 0 || n-1 > uint64(len(w.b)) { // every element takes at least one byte
			if n != 0 {
				w.bad = true
			}
			return 0
		}
		return int64(n - 1)
	}
	n := w.int32()
	if n < 0 {
		return 0
	}
	if int64(n) > int64(len(w.b)) {
		w.bad = true
		return 0
	}
	return int64(n)
}

// tags skips a tagged-fields section.
func (w *wire) tags() {
	n := w.uvarint()
	for i := uint64(0); i < n && !w.bad; i++ {
		w.uvarint() // tag
		w.skip(int64(w.uvarint()))
	}
}

// scanProduce counts the topic and partition entries of a Produce request (v3-v13, the versions
// served), header included in frame, without decoding or allocating.
func scanProduce(version int16, frame []byte) (topics, partitions int64, ok bool) {
	if version < 3 || version > 13 {
		return 0, 0, false
	}
	flexible := version >= 9
	w := wire{b: frame}
	w.skip(8)       // api key, version, correlation id
	w.string(false) // client id: always an int16-prefixed nullable string
	if flexible {
		w.tags() // request header v2
	}
	w.string(flexible) // transactional id
	w.skip(6)          // acks, timeout
	topics = w.arrayLen(flexible)
	for t := int64(0); t < topics && !w.bad; t++ {
		if version >= 13 {
			w.skip(16) // topic id
		} else {
			w.string(flexible)
		}
		n := w.arrayLen(flexible)
		partitions += n
		for p := int64(0); p < n && !w.bad; p++ {
			w.skip(4) // partition index
			w.bytes(flexible)
			if flexible {
				w.tags()
			}
		}
		if flexible {
			w.tags()
		}
	}
	return topics, partitions, !w.bad
}
