package txncoord

import "github.com/weir-mq/weir/internal/kafkahash"

// javaStringHashCode is Java's String.hashCode (kafkahash.JavaStringHashCode).
func javaStringHashCode(s string) int32 { return kafkahash.JavaStringHashCode(s) }

// PartitionFor is the partition of an internal topic with the given partition count that holds
// id: Kafka places transactional ids on __transaction_state and group ids on __consumer_offsets
// by the same rule, abs(hashCode(id)) % partitions (kafkahash.PartitionFor).
func PartitionFor(id string, partitions int32) int32 { return kafkahash.PartitionFor(id, partitions) }
