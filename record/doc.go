// Package record owns the RecordBatch v2 (magic 2) header: its byte layout, in-place offset
// assignment, and validation of batches arriving from the network or read back from disk.
//
// Layout (big-endian), 61 bytes of header followed by the records:
//
//	off  size field
//	0    8    baseOffset            (outside the CRC: assigned in place by the log)
//	8    4    batchLength           (bytes after this field: total size = batchLength + 12)
//	12   4    partitionLeaderEpoch  (outside the CRC: stamped in place by the leader)
//	16   1    magic = 2
//	17   4    crc                   (CRC32C, Castagnoli, over bytes 21..end)
//	21   2    attributes            (bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control)
//	23   4    lastOffsetDelta
//	27   8    baseTimestamp
//	35   8    maxTimestamp
//	43   8    producerId
//	51   2    producerEpoch
//	53   4    baseSequence
//	57   4    recordCount
//	61   ...  records
//
// Records are read by one bounded, streaming Reader (reader.go) used by every path that looks
// inside batches: produce validation, ListOffsets by timestamp, the log cleaner and the group
// coordinator. An uncompressed batch is walked in place, without copying or allocating; a
// compressed one (gzip, snappy raw or in Kafka's xerial framing, lz4 frame, zstd) is decompressed
// as a stream into the reader's buffer, never whole, and never past a bound (DecompressLimit:
// 16 x max(max.message.bytes, 1 MiB)). Readers, their decoders and buffers are pooled
// (GetReader / Release); a Reader is used by one goroutine at a time. At most
// max(4, 2 x GOMAXPROCS) compressed batches from the network (produce validation, ListOffsets)
// are decompressed at once (decompressSlots): the memory a flood of compressed batches can cost
// is that many times twice the bound, whatever the number of clients.
//
// ValidateProduce is Kafka's LogValidator for magic 2: the header, then every record against it
// (count, offset deltas 0..n-1, framing, keys on compacted topics, timestamp bounds), then the
// header's maxTimestamp and timestamp type stamped as the log's message.timestamp.type says (the
// only write into CRC-covered bytes, with the CRC recomputed, and only when they changed). The
// other writes are the two fields outside the CRC (baseOffset, partitionLeaderEpoch). Validation
// failures are typed: each wraps a franz-go kerr error carrying the Kafka error code the broker
// must answer with (CORRUPT_MESSAGE, UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_RECORD,
// INVALID_TIMESTAMP, MESSAGE_TOO_LARGE); a refusal naming one record is a *RecordError.
//
// Recompression (recompress.go) is Kafka's rebuild of a produced batch whose codec is not its
// topic's compression.type (LogValidator.buildRecordsAndAssignOffsets): Compression.Rewrites
// says from two header bytes whether a batch needs it (never under compression.type=producer,
// never for a batch already in the target codec, never for an uncompressed control batch), and a
// pooled Recompressor streams the records through a Reader into a pooled encoder (gzip, snappy in
// Kafka's xerial framing, lz4 frame with 64 KiB blocks, zstd with a 1 MiB window; levels on
// Kafka's scale, KIP-390) writing into a buffer bounded by max.message.bytes (MESSAGE_TOO_LARGE
// past it, the buffer never larger). The records keep their bytes; the header keeps every field
// but the codec bits, batchLength and the CRC. Recompressions take the decompression slots
// above, so at most that many encoders and output buffers are in use at once. Followers never
// recompress: they store the leader's bytes.
//
// Control records (control.go): BuildEndTxnMarker and ParseEndTxnMarker write and read Kafka's
// transaction markers (a control + transactional batch of one record: key version and type 0
// ABORT / 1 COMMIT, value version and coordinator epoch). ValidateProduce refuses control batches
// from clients and transactional batches without a producer id.
package record
