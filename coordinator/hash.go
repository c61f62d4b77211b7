package coordinator

import "github.com/weir-mq/weir/internal/kafkahash"

// javaStringHashCode is Java's String.hashCode (kafkahash.JavaStringHashCode).
func javaStringHashCode(s string) int32 { return kafkahash.JavaStringHashCode(s) }

// PartitionFor is the __consumer_offsets partition that holds group's offsets and metadata:
// Kafka's abs(hashCode(group)) % partitions (kafkahash.PartitionFor). partitions must be positive.
func PartitionFor(group string, partitions int32) int32 {
	return kafkahash.PartitionFor(group, partitions)
}
