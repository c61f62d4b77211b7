// Package engine owns partition logs and the log dirs that hold them.
//
// A Log is one partition: an ordered list of segments (package segment), the last one active.
// Append validates a RecordBatch v2 as Kafka's LogValidator does (record.ValidateProduce with the
// policy of the log's current Config: every record checked against the header, compressed
// batches streamed through a bounded record.Reader, CreateTime timestamps within
// message.timestamp.before/after.max.ms, keys on compacted logs), stamps LogAppendTime when the
// log says so (the only change to CRC-covered bytes, the CRC recomputed in place), assigns its
// offsets by writing baseOffset and the partition leader epoch into the header in place (both lie
// outside the CRC: no re-encode, no recompression), rolls by segment.bytes, segment.ms (less the
// segment's random segment.jitter.ms share; max.compaction.lag.ms when smaller on a compacted
// log, Kafka's maxSegmentMs) and index capacity, and writes the batch
// to the page cache. Reads return file slices bounded by the high watermark (consumers) or the log
// end (followers); the high watermark is set from outside (replication, or the broker after a
// durable local append).
//
// Invariants: logStartOffset <= highWatermark <= logEndOffset, and recoveryPoint (the flushed
// offset) <= logEndOffset. Readers never take the append lock: the segment list, log end, high
// watermark, log start and flushed offsets are published atomically.
//
// Durability: with flush.messages = 1 (weir's default) an acknowledged append is fdatasync'd.
// Each LogDir has one flusher goroutine doing group commit (flush.go), started with the dir's
// first log and ended with its last: a round takes every log that asked for a cycle (an append
// due a flush, a roll, a flush.ms timer, a waiter), snapshots each log end under its append lock,
// syncs all their active segments at once without any lock (one io_submit, one wait: the
// segment.Syncer), stores every flushed offset and only then wakes the waiters, so N concurrent
// durable appenders of a log share one fdatasync and a request waiting for several partitions of
// a dir wakes once. Rolled segments are sealed (fdatasync, index trim and sync, directory fsync)
// by the flusher too, off the append path, on a goroutine of their own so a long seal never
// delays the other logs' acknowledgements; a log's cycles never overlap. Larger flush.messages
// or flush.ms keep Kafka's page-cache-acknowledgement meaning. The first failed write or sync makes
// the whole LogDir offline with a sticky KAFKA_STORAGE_ERROR; nothing is retried.
//
// Resources (logdir.go, budget.go): running out of descriptors, mappings or memory
// (vfs.IsResourceExhausted) is not a disk failure. LogDir.Fail refuses only the operation that hit
// it (ErrResourceExhausted with a retriable KAFKA_STORAGE_ERROR) and the dir stays online: a
// refused CreateLog leaves no directory behind; a refused roll leaves the active segment active
// and appendable (the new segment is made before anything changes, and removed if incomplete), the
// batch goes to the active segment when it still fits (a roll due by segment.ms), else the append
// fails and the next one rolls again; a refused checkpoint is written at the next interval; a refused
// flush cycle puts its work back and retries after 100 ms. A Budget (descriptors and mappings held
// by segments, counted process-wide by the segment package) refuses CreateLog and rolls before the
// kernel would. The one exception is a cleaner swap once decided: any failure takes the dir
// offline (the next open finishes it).
//
// Retention deletes whole segments, oldest first and never the active one, by retention.ms
// (judged on a segment's largest timestamp) and retention.bytes, advancing the log start offset,
// when cleanup.policy includes delete; DeleteRecordsBefore advances it explicitly. As in Kafka,
// a segment whose largest timestamp lies in the future is not expired by time, and time
// retention stops there; message.timestamp.after.max.ms (checked by Append) keeps such records
// out, and retention.bytes is not affected.
//
// Clocks (Config.Now, Config.Nanotime; the broker passes internal/clock's): every rule that
// compares with a stored timestamp (LogAppendTime, retention, time rolls, compaction lags, the
// delete horizon, producer-id expiry, timestamp bounds) reads the wall clock, as Kafka's
// Time.milliseconds(); a segment's largest timestamp and the time index keep the largest
// timestamp so far, so a backward step of the wall clock leaves them monotonic. Producer-id
// expiry also asks the monotonic clock: a producer that appended in this process less than
// producer.id.expiration.ms ago is kept whatever the wall clock says (a forward step would
// otherwise forget a producer that is writing, and its retried batch would be stored twice). The
// cleaner's backoff after a failed clean is on the monotonic clock.
//
// Compaction (cleanup.policy includes compact; cleaner.go, cleaner_swap.go): a Cleaner rewrites
// the sealed segments below the high watermark and the recovery point, keeping the latest record
// of each key (an offset map with a fixed memory bound over the dirty section, the part after the
// cleaner checkpoint) and dropping tombstones once the delete horizon (KIP-534) written at the
// cleaning that first kept them has passed. Offsets never change: rewritten batches keep their
// base and last offsets. A cleaned group of segments is written as <base>.log.cleaned, renamed
// .swap (the decision), published in the segment list, the old segments deleted and the .swap
// renamed .log, with directory syncs between; at open a .cleaned is removed and a .swap finished.
// Append refuses keyless records on a compacted log (INVALID_RECORD). The Manager runs
// log.cleaner.threads cleaners that pick the dirtiest log above min.cleanable.dirty.ratio, or
// any log whose oldest dirty record is past max.compaction.lag.ms (KIP-354), and keep Kafka's
// cleaner-offset-checkpoint.
//
// Transactions (txn.go, producerstate.go): transactional batches start their producer's ongoing
// transaction; AppendMarker (the leader, WriteTxnMarkers) and AppendStored (a follower copying
// the leader's control batches) end it, an ABORT adding a Kafka-format entry to the segment's
// .txnindex. LastStableOffset is min(first unstable offset, high watermark) and moves with the
// high watermark; Read with ReadCommitted stops there and AbortedTransactions lists what a
// read_committed fetch reports. Snapshots carry each producer's ongoing transaction's first
// offset and coordinator epoch; open and TruncateTo rebuild the state from the newest snapshot and
// the batches after it, markers included. At open the .txnindex of every segment recovery
// rescanned, and of every segment from the first corrupt index on, is rebuilt from the markers
// (the snapshots after it are dropped so the replay covers it) and synced. Compaction treats
// transactions as Kafka's cleaner (cleaner_txn.go): it stops at the LSO, drops aborted
// transactions' batches, compacts committed records, and removes markers delete.retention.ms after
// their transaction's data is gone.
//
// Idempotent producers (producerstate.go) past producer.id.expiration.ms are forgotten by the
// Manager every ProducerIDExpirationCheckInterval (Kafka's 10 minutes) and when a log opens.
//
// Deleting segments (deleteq.go): a segment leaving the log (retention, DeleteRecords, a cleaner
// swap, a truncation) is renamed <name>.deleted at once and its files are removed
// file.delete.delay.ms later by a timer, as Kafka's scheduler does; readers holding it keep their
// descriptors until they release it, and leftover .deleted files are removed at open.
//
// Leader epochs (epochs.go): each Log keeps Kafka's leader epoch cache, (epoch, start offset)
// entries strictly increasing in both, in the partition's leader-epoch-checkpoint file
// ("0\n<n>\n<epoch> <startOffset>\n...", rewritten atomically at each change, outside the
// append lock). BecomeLeader and the first append of a newer epoch (Append's stamped epoch,
// AppendStored's copied one) add entries; TruncateTo and the log start moving up trim them;
// EndOffsetForEpoch answers OffsetForLeaderEpoch. At open the file is trimmed to the recovered
// log, and rebuilt from the batch headers when missing, unreadable or behind the last batch.
//
// The Manager opens every <topic>-<partition> directory of every log dir concurrently and keeps
// Kafka's files: recovery-point-offset-checkpoint, log-start-offset-checkpoint,
// replication-offset-checkpoint (high watermarks, restored at open for logs whose watermark is
// set from outside) and cleaner-offset-checkpoint (text format
// "0\n<n>\n<topic> <partition> <offset>\n..."), partition.metadata (topic id) and the
// .kafka_cleanshutdown marker. The recovery-point checkpoint is also written within about a
// second after a segment rolls and is synced (Kafka writes it only every
// log.flush.offset.checkpoint.interval.ms), so a crash rescans about a second of rolled segments. With the marker present nothing is scanned at start; without it,
// segments from the one holding the recovery point on are recovered (torn tails truncated,
// indexes rebuilt; CRC-checked from the batch holding the recovery point on, the flushed batches
// before it only by header) and later segments after a truncation are deleted. A recovered
// segment is synced only when recovery checked or cut bytes past the recovery point. Segments that
// need no recovery, except the last, are opened sealed (segment.OpenSealed): one descriptor, no
// mapping until a reader's first index lookup. Inactive, durable segments hold their descriptor
// and index mappings only while the process-wide caches keep them (segment/fdcache.go, bounded by
// storage.descriptor.cache.size and storage.index.cache.size); the retention loop also evicts what
// was not used since its previous run (segment.EvictIdle). An idle active segment is settled by
// the settle loop after one to two seconds (segment.SettleIfIdle); when the segments being
// written hold more than three quarters of the descriptor or mapping ceiling (segment.Pressure),
// the Manager's pressure loop settles at once the active segment of every log written since its
// previous sweep that is synced (segment.SettleIfSynced; a log whose appender holds the lock waits
// for the next sweep), so a burst of produces to more partitions than descriptors stays within
// the ceilings. An append costs one atomic load for this (the log is listed once per sweep).
// Zeros after a segment's last batch (a preallocated segment, preallocate, that a crash left
// untrimmed) are trimmed as the segment's end, not a truncation.
//
// DeleteLog renames a partition directory to "<topic>-<partition>.<32 hex>-delete" (the topic cut
// so the name fits in 255 bytes, as Kafka's LocalLog does) and removes it; a failed removal is
// retried by the retention loop and reported by DeleteFailed; "-delete" directories are removed
// at open; CreateLog removes a leftover directory in its way; MoveAsideLog renames a stray log
// "-stray" (deletedir.go).
//
// Several log dirs (move.go): CreateLog puts a new log in the online dir holding the fewest; a
// dir that cannot be opened at start is offline (its logs are not loaded) while the others serve.
// CreateFuture, Future.CatchUp and CompleteFuture move a log to another dir while it serves: a
// "<topic>-<partition>.<32 hex>-future" copy is filled with the source's batches, then the source
// is frozen, the tail copied and synced, the source renamed "-delete" (the decision) and the copy
// renamed into place; at open a "-future" directory is removed when its partition has a log, and
// completed when it has none.
package engine
