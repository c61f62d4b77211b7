package engine

// Record-level work for compaction: rebuilding a batch from the records a cleaning keeps. The
// records of stored batches are walked with record.Reader (streamed, bounded by
// decompressLimit); the produce-time check that a compacted topic receives only keyed records is
// record.ValidateProduce's (Policy.RequireKeys).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/record"
)

const (
	// deleteHorizonFlag is attribute bit 6 of a RecordBatch v2 (KIP-534): the batch's
	// baseTimestamp holds the delete horizon, the time after which its tombstones may go.
	deleteHorizonFlag = 0x40
	compressionMask   = 0x07
)

// decompressLimit is the decompression bound of a log's batches (record.DecompressLimit: 16 x
// max(max.message.bytes, 1 MiB)). Kafka streams records and sets no bound; weir refuses to
// decompress more. A stored batch over the bound is kept whole by the cleaner (never lost, never
// compacted); a produced one is refused (MESSAGE_TOO_LARGE).
func decompressLimit(cfg *Config) int { return record.DecompressLimit(cfg.MaxMessageBytes) }

// cleanerRecord is one record of a batch, its fields sliced from the decompressed records.
type cleanerRecord struct {
	attributes     byte
	timestampDelta int64
	offsetDelta    int64
	// afterTimestamp is the record body from the offset delta on (copied unchanged when the
	// record is re-encoded with a new timestamp delta).
	afterTimestamp []byte
	// encoded is the whole record, length prefix included.
	encoded  []byte
	key      []byte
	hasKey   bool
	hasValue bool
}

// nextRecord parses the record at the start of b (kept records the cleaner has copied, to
// re-encode them with a new timestamp delta) and returns it with its encoded length.
func nextRecord(b []byte) (cleanerRecord, int, error) {
	var r cleanerRecord
	bad := func(what string) (cleanerRecord, int, error) {
		return r, 0, fmt.Errorf("record %s: %w", what, kerr.CorruptMessage)
	}
	length, k := binary.Varint(b)
	if k <= 0 || length < 1 || length > int64(len(b)-k) {
		return bad("length")
	}
	n := k + int(length)
	body := b[k:n]
	r.encoded = b[:n]
	r.attributes = body[0]
	rest := body[1:]
	ts, k := binary.Varint(rest)
	if k <= 0 {
		return bad("timestamp delta")
	}
	r.timestampDelta = ts
	rest = rest[k:]
	r.afterTimestamp = rest
	od, k := binary.Varint(rest)
	if k <= 0 || od < 0 {
		return bad("offset delta")
	}
	r.offsetDelta = od
	rest = rest[k:]
	keyLen, k := binary.Varint(rest)
	if k <= 0 || keyLen < -1 || keyLen > int64(len(rest)-k) {
		return bad("key")
	}
	rest = rest[k:]
	if keyLen >= 0 {
		r.hasKey = true
		r.key = rest[:keyLen]
		rest = rest[keyLen:]
	}
	valueLen, k := binary.Varint(rest)
	if k <= 0 || valueLen < -1 || valueLen > int64(len(rest)-k) {
		return bad("value")
	}
	r.hasValue = valueLen >= 0
	return r, n, nil
}

// batchCodec compresses record payloads, reusing its buffer. Not safe for concurrent use.
type batchCodec struct {
	compressed bytes.Buffer
}

// compressors are kgo's, by codec id (1 gzip, 2 snappy, 3 lz4, 4 zstd), made on first use and
// shared (a kgo Compressor is safe for concurrent use and pools its encoders).
var compressors [5]struct {
	once sync.Once
	c    kgo.Compressor
	err  error
}

func compressorFor(codec int) (kgo.Compressor, error) {
	if codec < 1 || codec > 4 {
		return nil, fmt.Errorf("compression codec %d unknown", codec)
	}
	e := &compressors[codec]
	e.once.Do(func() {
		cc := [...]kgo.CompressionCodec{1: kgo.GzipCompression(), 2: kgo.SnappyCompression(), 3: kgo.Lz4Compression(), 4: kgo.ZstdCompression()}[codec]
		e.c, e.err = kgo.DefaultCompressor(cc)
	})
	return e.c, e.err
}

// compress compresses src with codec; the result is valid until the next call.
func (c *batchCodec) compress(codec int, src []byte) ([]byte, error) {
	comp, err := compressorFor(codec)
	if err != nil {
		return nil, err
	}
	c.compressed.Reset()
	out, used := comp.Compress(&c.compressed, src)
	if int(used) != codec {
		return nil, fmt.Errorf("compress with codec %d failed", codec)
	}
	return out, nil
}

// appendBatch appends to dst a batch with orig's header fields and the records recs (each record
// encoded with its length prefix, concatenated; n records), the last offset delta unchanged (so
// the batch keeps its offset range and its producer's sequence range, as Kafka does), the given
// base and max timestamps, and attrs. The records are compressed with the codec attrs names.
func (c *batchCodec) appendBatch(dst []byte, orig []byte, n int, recs []byte, attrs int16, baseTimestamp, maxTimestamp int64) ([]byte, error) {
	payload := recs
	if codec := int(attrs & compressionMask); codec != 0 && n > 0 {
		var err error
		if payload, err = c.compress(codec, recs); err != nil {
			return dst, err
		}
	}
	start := len(dst)
	dst = append(dst, orig[:record.HeaderSize]...)
	dst = append(dst, payload...)
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint32(b[record.BatchLengthOffset:], uint32(len(b)-record.LogOverhead))
	be.PutUint16(b[record.AttributesOffset:], uint16(attrs))
	be.PutUint64(b[record.BaseTimestampOffset:], uint64(baseTimestamp))
	be.PutUint64(b[record.MaxTimestampOffset:], uint64(maxTimestamp))
	be.PutUint32(b[record.RecordCountOffset:], uint32(n))
	record.SetChecksum(b)
	return dst, nil
}

// appendRetimed appends r to dst re-encoded with a new timestamp delta (the batch's base
// timestamp moved to a delete horizon); every other byte of the record is unchanged.
func appendRetimed(dst []byte, r *cleanerRecord, timestampDelta int64) []byte {
	var tmp [binary.MaxVarintLen64]byte
	tsLen := binary.PutVarint(tmp[:], timestampDelta)
	bodyLen := 1 + tsLen + len(r.afterTimestamp)
	dst = binary.AppendVarint(dst, int64(bodyLen))
	dst = append(dst, r.attributes)
	dst = append(dst, tmp[:tsLen]...)
	return append(dst, r.afterTimestamp...)
}
