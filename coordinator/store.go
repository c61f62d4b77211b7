package coordinator

// Store is the coordinator's view of the internal topic __consumer_offsets. The broker
// implements it over its partition logs; tests use an in-memory one.
type Store interface {
	// Partitions is the partition count of __consumer_offsets: the existing topic's, or
	// offsets.topic.num.partitions when it does not exist yet.
	Partitions() int32
	// Log returns partition p's log, creating the topic on first use.
	Log(p int32) (OffsetsLog, error)
	// Existing returns partition p's log if the topic exists, for loading at start-up.
	Existing(p int32) (OffsetsLog, bool)
}

// OffsetsLog is one partition of __consumer_offsets.
type OffsetsLog interface {
	// Append appends one uncompressed RecordBatch v2 (it may be modified in place: offsets are
	// assigned) and returns the offset after it, once it is in the page cache.
	Append(batch []byte) (nextOffset int64, err error)
	// AwaitDurable blocks until every offset below upTo is durable (fdatasync'd) and visible.
	AwaitDurable(upTo int64) error
	// ReadBatches calls fn with every stored batch from the log start to the log end, in offset
	// order. fn must not retain the batch.
	ReadBatches(fn func(batch []byte) error) error
}

// TxnAppender is implemented by an OffsetsLog that can append the coordinator's transactional
// offset commits (TxnOffsetCommit): one uncompressed RecordBatch v2 with the transactional
// attribute, the producer's id and epoch and base sequence 0, appended as Kafka appends its
// coordinator's batches (AppendOrigin.COORDINATOR): a producer epoch older than the partition's
// is refused (INVALID_PRODUCER_EPOCH), the sequence is not checked (every such batch starts at
// 0), and the batch opens (or continues) the producer's transaction on the partition, so the
// partition's last stable offset stays below it until the producer's COMMIT or ABORT marker.
// A store whose logs do not implement it answers TxnCommitOffsets with
// COORDINATOR_NOT_AVAILABLE.
type TxnAppender interface {
	AppendTxn(batch []byte) (nextOffset int64, err error)
}
