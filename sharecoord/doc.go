// Package sharecoord is weir's share coordinator (Kafka's ShareCoordinatorService and
// ShareCoordinatorShard, KIP-932): the durable state of every share partition (share-partition
// start offset, in-flight batches with delivery state and count, state epoch, leader epoch,
// delivery-complete count) stored as records on the internal compacted topic
// __share_group_state in Kafka's schema. It knows nothing of the wire: the broker decodes
// InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState
// and ReadShareGroupStateSummary and calls the methods here, which implement
// sharestate.Persister for the keys this broker coordinates; the broker's persister sends the
// others to their coordinator.
//
// # Placement and ownership
//
// A share partition (group, topic id, partition) lives on partition
// abs(hashCode("group:topicId:partition")) % partitions of __share_group_state, the topic id
// in its base64 string form (PartitionFor, CoordinatorKey: Kafka's
// SharePartitionKey.asCoordinatorKey and ShareCoordinatorService.partitionFor). The broker
// leading that partition coordinates the key: the broker calls Elect(p, leaderEpoch) when it
// becomes leader and Resign(p) when it stops. Elect loads the partition in the background
// (COORDINATOR_LOAD_IN_PROGRESS meanwhile); a partition not led here answers NOT_COORDINATOR.
//
// # Records
//
// records.go: ShareSnapshotKey (key version 0) with ShareSnapshotValue v0 (the full state,
// with CreateTimestamp and WriteTimestamp, DeliveryCompleteCount as tagged field 0) and
// ShareUpdateKey (key version 1) with ShareUpdateValue v0 (a delta: leader epoch, start offset
// or -1, the batches written), exactly as Kafka 4.4's generated code writes them. Initialize
// writes a snapshot; a write (and a read that records a newer leader epoch) writes an update,
// and once UpdatesPerSnapshot updates followed the last snapshot, a snapshot of the merged
// state instead (share.coordinator.snapshot.update.records.per.snapshot). Delete writes
// tombstones for both keys. One batch per operation, uncompressed.
//
// # Durability
//
// Every operation that changes state appends its record and waits until it is durable
// (fdatasync'd, and in a cluster replicated to the ISR as acks=all) before the in-memory state
// changes and the operation returns; a failed append changes nothing.
//
// # Fencing
//
// A write or read with a leader epoch below the stored one is FENCED_LEADER_EPOCH; a write or
// initialize with a state epoch below the stored one is FENCED_STATE_EPOCH. An initialize
// without a start offset (-1) of a share partition that has one is a no-op (see Initialize).
// Read and write of a share partition never initialized are INVALID_REQUEST
// (sharestate.ErrNotInitialized).
//
// # Concurrency
//
// Coordinator.mu guards the map of led partitions and their loading state; ownedPart.wmu
// guards one partition's states and is held by an operation from its checks through its
// append and durability wait, so the records of one partition are applied in log order. An
// operation holding wmu may take mu; nothing holding mu takes wmu. Operations
// run on the caller's goroutine; each Elect starts one load goroutine, ended by Resign or
// Close.
//
// # Bounds
//
// Group ids are at most 32767 bytes; one write and one state hold at most Config.MaxBatches
// batches (INVALID_REQUEST beyond); the record decoder checks every length and count against
// the bytes left.
package sharecoord
