package engine

import "github.com/weir-mq/weir/segment"

// PartitionLog is what the rest of the broker uses of one partition's log: the produce path
// (Append, AwaitDurable), the fetch path (Read), replication (AppendStored, TruncateTo, the high
// watermark), ListOffsets (OffsetForTimestamp) and DeleteRecords. Log is the disk implementation;
// MemLog is the small in-memory reference the behaviour tests compare it with.
//
// Semantics every implementation keeps (Kafka's, with weir's choices noted):
//   - Invariant: LogStartOffset() <= HighWatermark() <= LogEndOffset().
//   - Append validates one RecordBatch v2 (record.ValidateProduce: max.message.bytes, every
//     record against the header, timestamp bounds, keys on compacted logs; a batch larger than
//     segment.bytes is RECORD_LIST_TOO_LARGE), stamps LogAppendTime when configured, assigns
//     baseOffset = LogEndOffset() and the leader epoch by writing them into batch in place, and
//     stores the bytes unchanged otherwise.
//     AppendStored keeps the offsets it is given (each batch must start at or after the log end).
//   - Read(offset) answers OFFSET_OUT_OF_RANGE outside [LogStartOffset, bound], bound being the high
//     watermark or the log end (Isolation). Otherwise it returns whole batches starting with the
//     first batch whose last offset is >= offset (a read inside a batch returns that whole batch),
//     never a batch reaching the bound, at most maxBytes but always the whole first batch; the
//     last batch may be cut at maxBytes, as Kafka's fetch does. A read at the bound is empty.
//     The disk Log may also stop at a segment boundary (the next read continues there).
//     ReadCommitted (the disk Log's transactions, txn.go) stops at the last stable offset; MemLog
//     has no transactions and reads it as the high watermark.
//   - SetHighWatermark clamps to [log start, log end]; weir never lets the watermark split a batch:
//     inside one it moves down to the batch's base offset (not below the log start).
//   - TruncateTo(offset) removes every batch whose last offset is >= offset (the batch holding offset
//     goes whole); an offset below the log start truncates to the log start. The log end is the
//     offset after the last batch kept, or, when no kept batch reaches the log start (the log is
//     emptied), the base offset of the first batch removed. The high watermark and the log start
//     follow the log end down.
//   - DeleteRecordsBefore advances the log start (never lowers it) and refuses an offset past the
//     high watermark with OFFSET_OUT_OF_RANGE. It returns the log start.
//   - OffsetForTimestamp(ts) returns the first batch holding an offset >= the log start whose max
//     timestamp is >= ts, as (max(its base offset, log start), its max timestamp), or (-1, -1).
//   - After Close, writes fail with NOT_LEADER_OR_FOLLOWER.
//   - The leader epoch cache (Kafka's LeaderEpochFileCache) holds (epoch, start offset) entries
//     strictly increasing in both: an appended batch whose leader epoch is newer than the latest
//     cached one starts it at its base offset (Append stamps SetLeaderEpoch's epoch, AppendStored
//     keeps the batch's); BecomeLeader records (epoch, log end) for a newer epoch; TruncateTo drops
//     the entries starting at or after the new log end; the log start moving up drops the entries
//     before it and moves the last of them up to it. EndOffsetForEpoch is Kafka's endOffsetFor.
type PartitionLog interface {
	Append(batch []byte) (AppendInfo, error)
	AppendStored(batches []byte) (AppendInfo, error)
	// AwaitDurable blocks until every offset below upTo is durable, when the log's
	// acknowledgement policy asks for it. Offsets a truncation removed (upTo above the log end)
	// fail with NOT_LEADER_OR_FOLLOWER.
	AwaitDurable(upTo int64) error
	// Read returns a file slice; the caller must Release it.
	Read(offset int64, maxBytes int64, iso Isolation) (segment.Slice, error)
	LogStartOffset() int64
	LogEndOffset() int64
	HighWatermark() int64
	SetHighWatermark(offset int64) error
	TruncateTo(offset int64) error
	DeleteRecordsBefore(offset int64) (int64, error)
	OffsetForTimestamp(ts int64) (offset int64, timestamp int64, err error)
	SetLeaderEpoch(epoch int32)
	BecomeLeader(epoch int32) error
	LatestEpoch() (epoch int32, ok bool)
	EndOffsetForEpoch(epoch int32) (endOffset int64, foundEpoch int32)
	EpochEntries() []EpochEntry
	Close() error
}

var (
	_ PartitionLog = (*Log)(nil)
	_ PartitionLog = (*MemLog)(nil)
)
