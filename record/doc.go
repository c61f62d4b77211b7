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
// Nothing here allocates or copies record bytes: headers are decoded from the caller's slice and
// the only writes are the two fields outside the CRC. Validation failures are typed: each wraps a
// franz-go kerr error carrying the Kafka error code the broker must answer with
// (CORRUPT_MESSAGE, UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_RECORD, MESSAGE_TOO_LARGE).
package record
