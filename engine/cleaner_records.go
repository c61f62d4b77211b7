package engine

// Record-level work for compaction: walking the records of a batch (decompressing it within a
// bound), rebuilding a batch from the records a cleaning keeps, and the produce-time check that a
// compacted topic receives only keyed records.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/record"
)

const (
	// deleteHorizonFlag is attribute bit 6 of a RecordBatch v2 (KIP-534): the batch's
	// baseTimestamp holds the delete horizon, the time after which its tombstones may go.
	deleteHorizonFlag = 0x40
	compressionMask   = 0x07

	// decompressedBatchFactor bounds what one batch may decompress to: this many times
	// max(max.message.bytes, 1 MiB). Kafka streams records and sets no bound; weir holds the
	// decompressed records of one batch at a time and refuses to hold more. A stored batch over
	// the bound is kept whole by the cleaner (never lost, never compacted); a produced one is
	// refused on a compacted topic (MESSAGE_TOO_LARGE).
	decompressedBatchFactor = 16
)

// errDecompressedTooLarge reports a batch whose records exceed the decompression bound.
var errDecompressedTooLarge = errors.New("batch decompresses past the bound")

// decompressLimit is the decompression bound of a log's batches.
func decompressLimit(cfg *Config) int {
	return decompressedBatchFactor * max(cfg.MaxMessageBytes, 1<<20)
}

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

// nextRecord parses the record at the start of b and returns it with its encoded length.
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

// batchCodec decompresses and compresses record payloads, reusing its decoders and buffers.
// Not safe for concurrent use.
type batchCodec struct {
	out        bytes.Buffer
	scratch    []byte // snappy and zstd output, reused
	gz         *gzip.Reader
	lz         *lz4.Reader
	zstd       *zstdDecoder
	zstdLimit  int
	src        bytes.Reader
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

// records returns the records of the batch b (header included), decompressed when needed; the
// slice is valid until the next call.
func (c *batchCodec) records(b []byte, h *record.Header, limit int) ([]byte, error) {
	payload := b[record.HeaderSize:h.Size()]
	codec := h.Compression()
	if codec == 0 {
		return payload, nil
	}
	return c.decompress(codec, payload, limit)
}

// decompress decodes src, refusing output beyond limit bytes (errDecompressedTooLarge).
func (c *batchCodec) decompress(codec int, src []byte, limit int) ([]byte, error) {
	c.out.Reset()
	c.src.Reset(src)
	var r io.Reader
	switch codec {
	case 1:
		if c.gz == nil {
			gz, err := gzip.NewReader(&c.src)
			if err != nil {
				return nil, fmt.Errorf("gzip: %w", err)
			}
			c.gz = gz
		} else if err := c.gz.Reset(&c.src); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		r = c.gz
	case 2:
		return c.decompressSnappy(src, limit)
	case 3:
		if c.lz == nil {
			c.lz = lz4.NewReader(&c.src)
		} else {
			c.lz.Reset(&c.src)
		}
		r = c.lz
	case 4:
		if c.zstd == nil || c.zstdLimit != limit {
			d, err := newZstdDecoder(limit)
			if err != nil {
				return nil, fmt.Errorf("zstd: %w", err)
			}
			c.zstd, c.zstdLimit = d, limit
		}
		out, err := c.zstd.d.DecodeAll(src, c.scratch[:0])
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || len(out) > limit {
			return nil, errDecompressedTooLarge
		}
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		c.scratch = out[:0]
		return out, nil
	default:
		return nil, fmt.Errorf("compression codec %d unknown: %w", codec, kerr.CorruptMessage)
	}
	n, err := c.out.ReadFrom(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("decompress codec %d: %w", codec, err)
	}
	if n > int64(limit) {
		return nil, errDecompressedTooLarge
	}
	return c.out.Bytes(), nil
}

// zstdDecoder owns a decoder bounded to limit bytes of output (and of window), closed when
// unreachable (a pooled codec may be dropped without notice).
type zstdDecoder struct{ d *zstd.Decoder }

func newZstdDecoder(limit int) (*zstdDecoder, error) {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(uint64(limit)))
	if err != nil {
		return nil, err
	}
	z := &zstdDecoder{d: d}
	runtime.SetFinalizer(z, func(z *zstdDecoder) { z.d.Close() })
	return z, nil
}

// xerialMagic starts a snappy payload framed the way Kafka's Java clients write it: the magic,
// version and compatible version, then blocks of int32 length + raw snappy.
var xerialMagic = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func (c *batchCodec) decompressSnappy(src []byte, limit int) ([]byte, error) {
	if len(src) < 16 || !bytes.HasPrefix(src, xerialMagic) {
		n, err := s2.DecodedLen(src)
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if n > limit {
			return nil, errDecompressedTooLarge
		}
		if cap(c.scratch) < n {
			c.scratch = make([]byte, n)
		}
		out, err := s2.Decode(c.scratch[:n], src)
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		return out, nil
	}
	dst := c.scratch[:0]
	for rest := src[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, errors.New("snappy: truncated xerial block header")
		}
		blockLen := int(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if blockLen < 0 || blockLen > len(rest) {
			return nil, errors.New("snappy: truncated xerial block")
		}
		block := rest[:blockLen]
		rest = rest[blockLen:]
		n, err := s2.DecodedLen(block)
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if len(dst)+n > limit {
			return nil, errDecompressedTooLarge
		}
		dst = append(dst, make([]byte, n)...)
		if _, err := s2.Decode(dst[len(dst)-n:], block); err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
	}
	c.scratch = dst[:0]
	return dst, nil
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

var keyCheckCodecs = sync.Pool{New: func() any { return new(batchCodec) }}

// checkKeyed refuses a batch holding a record without a key, as Kafka does for a topic whose
// cleanup.policy includes compact (INVALID_RECORD, "compacted topic cannot accept message without
// key"). Compressed batches are decompressed within decompressLimit. Control batches pass.
func checkKeyed(batch []byte, h *record.Header, cfg *Config) error {
	if h.IsControl() {
		return nil
	}
	c := keyCheckCodecs.Get().(*batchCodec)
	defer keyCheckCodecs.Put(c)
	recs, err := c.records(batch, h, decompressLimit(cfg))
	if errors.Is(err, errDecompressedTooLarge) {
		return fmt.Errorf("batch decompresses to more than %d bytes: %w", decompressLimit(cfg), kerr.MessageTooLarge)
	}
	if err != nil {
		return fmt.Errorf("batch records unreadable: %v: %w", err, kerr.CorruptMessage)
	}
	n := 0
	for len(recs) > 0 {
		r, size, err := nextRecord(recs)
		if err != nil {
			return err
		}
		if !r.hasKey {
			return fmt.Errorf("record %d has no key; a compacted topic cannot accept a record without a key: %w", n, kerr.InvalidRecord)
		}
		recs = recs[size:]
		n++
	}
	if n != int(h.RecordCount) {
		return fmt.Errorf("batch declares %d records, holds %d: %w", h.RecordCount, n, kerr.InvalidRecord)
	}
	return nil
}
