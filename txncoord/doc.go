// Package txncoord is weir's transaction coordinator (Kafka's TransactionCoordinator,
// TransactionStateManager and TransactionMarkerChannelManager): the state of every
// transactional id, stored as records on the internal compacted topic __transaction_state in
// Kafka's schema, and the two-phase end of each transaction (PrepareCommit/PrepareAbort
// written, markers written to every partition of the transaction, CompleteCommit/CompleteAbort
// written). It knows nothing of the wire: the broker decodes InitProducerId,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions and
// calls the methods here, and implements the three interfaces the coordinator needs: Store
// (the partitions of __transaction_state), ProducerIDSource and MarkerWriter.
//
// # Placement and ownership
//
// A transactional id lives on partition abs(hashCode(id)) % partitions of __transaction_state
// (PartitionFor: Java's String.hashCode and Kafka's Utils.abs, the rule coordinator uses for
// groups; mirrored here since the two packages share a layer and do not import each other).
// The broker leading that partition coordinates the id: the broker calls Elect(p, leaderEpoch)
// when it becomes leader and Resign(p) when it stops. Elect loads the partition in the
// background (COORDINATOR_LOAD_IN_PROGRESS meanwhile); a partition not led here answers
// NOT_COORDINATOR. The leader epoch is the coordinator epoch written in markers, so a
// partition leader can refuse a deposed coordinator's markers. The ownership states mirror
// coordinator's Elect/Resign (that code is interleaved with the group goroutines, so it is not
// shared).
//
// # Records
//
// records.go: TransactionLogKey v0 (transactional id) and TransactionLogValue v0/v1 (v1 is
// flexible, with tagged previous/next producer id, client transaction version and KIP-939's
// next producer epoch), exactly as Kafka's generated code writes them; v1 is written when the
// cluster's transaction.version is 2, as Kafka does. A tombstone (null value) removes an id
// that expired. One record per batch, uncompressed.
//
// # State machine
//
// metadata.go is Kafka's TransactionMetadata: states Empty, Ongoing, PrepareCommit,
// PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence with Kafka's valid
// previous states, and the pending-state discipline: a transition is prepared under the id's
// mutex (pending set: every other request for the id answers CONCURRENT_TRANSACTIONS), the
// record is appended and awaited with no lock held, and the transition is applied only once the
// append is durable (acks=all: replicated), or dropped if it failed. Epochs follow Kafka:
// InitProducerId bumps (KIP-360 recovery with the expected id and epoch), an open transaction
// is fenced by a bump and aborted; with transaction version 2 (KIP-890) every end bumps the
// epoch and EndTxn returns the new one (an EndTxn at that new epoch while the transaction is
// still PrepareCommit/PrepareAbort is the client's next transaction ending early:
// CONCURRENT_TRANSACTIONS, where Kafka answers PRODUCER_FENCED); at epoch 32766 the id rotates
// to a new producer id.
//
// # Concurrency
//
// Coordinator.mu guards the map of led partitions and each partition's map of ids; txnMeta.mu
// guards one id's state. The two are never held together, and no lock is
// held across a log append, an fdatasync wait or a marker write. Requests run on the caller's
// goroutine. Marker sending runs on one goroutine per ending transaction (the MarkerWriter may
// batch concurrent calls into one request per destination broker, as the broker does); it stops when the
// partition is resigned (its context ends) and the next leader resends the markers of every
// transaction it loads in PrepareCommit/PrepareAbort, which makes a failover complete in-flight
// commits and aborts. Two background loops (Start) abort transactions past their timeout and
// expire idle ids; tests call AbortTimedOut and ExpireTransactionalIDs with a fake Clock. The
// Clock is the broker's wall clock (internal/clock): timeouts and expiry compare it with the
// timestamps stored in __transaction_state, as Kafka's do, so a forward step of the wall clock
// aborts ongoing transactions older than their timeout minus the step and a backward one delays
// timeouts by the step.
//
// # Errors
//
// Methods answer Kafka's error codes (*kerr.Error) as Kafka's coordinator does; ResponseError
// turns PRODUCER_FENCED into INVALID_PRODUCER_EPOCH for request versions older than KIP-588,
// as Kafka's request handlers do. One deliberate difference: a client's EndTxn while an epoch
// fence is prepared (timeout abort, InitProducerId over an open transaction) answers
// CONCURRENT_TRANSACTIONS instead of taking the fence over.
//
// # Bounds
//
// Transactional ids and topic names are at most 32767 bytes (the schema's int16 lengths:
// INVALID_REQUEST beyond); a transaction holds at most Config.MaxPartitionsPerTxn partitions;
// the record decoder checks every length and count against the bytes left.
package txncoord
