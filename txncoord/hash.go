package txncoord

import "unicode/utf16"

// javaStringHashCode is Java's String.hashCode over the UTF-16 code units of s, in 32-bit
// two's-complement arithmetic (invalid UTF-8 counts as U+FFFD). It mirrors coordinator's: the
// two coordinators sit in the same layer and do not import each other; the rule is ten lines.
func javaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			h = 31*h + int32(hi)
			h = 31*h + int32(lo)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// PartitionFor is the partition of an internal topic with the given partition count that holds
// id: abs(hashCode(id)) % partitions, with Kafka's Utils.abs (Integer.MIN_VALUE maps to 0). Kafka
// places transactional ids on __transaction_state and group ids on __consumer_offsets by the
// same rule. partitions must be positive.
func PartitionFor(id string, partitions int32) int32 {
	h := javaStringHashCode(id)
	switch {
	case h == -1<<31:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
}
