// Package kafkahash places ids on the partitions of Kafka's internal topics as Kafka does: group
// ids on __consumer_offsets and transactional ids on __transaction_state, both by
// abs(String.hashCode(id)) % partitions. It owns no state and starts no goroutines.
package kafkahash

import "unicode/utf16"

// JavaStringHashCode is Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over the UTF-16 code
// units of s, in 32-bit two's-complement arithmetic. Invalid UTF-8 bytes count as U+FFFD, as
// Java's decoder of the request bytes would make them.
func JavaStringHashCode(s string) int32 {
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
// id: abs(JavaStringHashCode(id)) % partitions, where abs is Kafka's Utils.abs (Math.abs with
// Integer.MIN_VALUE mapped to 0). partitions must be positive.
func PartitionFor(id string, partitions int32) int32 {
	h := JavaStringHashCode(id)
	switch {
	case h == -1<<31:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
}
