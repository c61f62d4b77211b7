package record

// Recompression on produce: a topic whose compression.type names a codec stores every batch in
// that codec, as Kafka's LogValidator does (validateMessagesAndAssignOffsetsCompressed: a batch
// whose codec differs from the target is rebuilt). The batch's records are streamed through a
// pooled Reader (bounded decompression, every record's framing checked) into a pooled encoder
// writing into a bounded output buffer; the header is the producer's, with the codec bits,
// batchLength and CRC rewritten.

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Codec ids: the compression bits of a batch's attributes, and CodecProducer for
// compression.type=producer (store batches in the codec they arrive in).
const (
	CodecProducer = -1
	CodecNone     = 0
	CodecGzip     = 1
	CodecSnappy   = 2
	CodecLZ4      = 3
	CodecZstd     = 4
)

// Compression levels (KIP-390, Kafka 3.8+): Kafka's defaults and valid ranges of
// compression.gzip.level, compression.lz4.level and compression.zstd.level.
const (
	GzipDefaultLevel = -1 // zlib's default (6); otherwise 1..9
	GzipMinLevel     = 1
	GzipMaxLevel     = 9
	LZ4DefaultLevel  = 9 // lz4's fast compressor; any other level is its high-compression one
	LZ4MinLevel      = 1
	LZ4MaxLevel      = 17
	ZstdDefaultLevel = 3
	ZstdMinLevel     = -131072
	ZstdMaxLevel     = 22
)

// compressionTypes are compression.type's values (Kafka's names, case-sensitive as in Kafka)
// and the codec each one means.
var compressionTypes = map[string]int{
	"producer":     CodecProducer,
	"uncompressed": CodecNone,
	"gzip":         CodecGzip,
	"snappy":       CodecSnappy,
	"lz4":          CodecLZ4,
	"zstd":         CodecZstd,
}

// codecNames are the codecs' compression.type names, by codec id.
var codecNames = [...]string{CodecNone: "uncompressed", CodecGzip: "gzip", CodecSnappy: "snappy", CodecLZ4: "lz4", CodecZstd: "zstd"}

// ParseCompressionType returns the codec a compression.type value names: uncompressed, gzip,
// snappy, lz4, zstd, or producer (CodecProducer).
func ParseCompressionType(s string) (codec int, ok bool) {
	codec, ok = compressionTypes[s]
	return codec, ok
}

// CheckLevel reports whether level is valid for codec, with Kafka's ranges: gzip -1 or 1..9,
// lz4 1..17, zstd -131072..22; snappy and none take no level.
func CheckLevel(codec, level int) error {
	switch codec {
	case CodecGzip:
		if level != GzipDefaultLevel && (level < GzipMinLevel || level > GzipMaxLevel) {
			return fmt.Errorf("gzip level %d: must be between %d and %d or equal to %d", level, GzipMinLevel, GzipMaxLevel, GzipDefaultLevel)
		}
	case CodecLZ4:
		if level < LZ4MinLevel || level > LZ4MaxLevel {
			return fmt.Errorf("lz4 level %d: must be between %d and %d", level, LZ4MinLevel, LZ4MaxLevel)
		}
	case CodecZstd:
		if level < ZstdMinLevel || level > ZstdMaxLevel {
			return fmt.Errorf("zstd level %d: must be between %d and %d", level, ZstdMinLevel, ZstdMaxLevel)
		}
	}
	return nil
}

// Compression is the codec a log stores produced batches in (compression.type) and the level
// of that codec (compression.<codec>.level, Kafka's scale; ignored for none and snappy).
type Compression struct {
	Codec int
	Level int
}

// Rewrites reports whether the produced batch b must be recompressed to be stored under c: c
// names a codec (not producer) that differs from b's. As in Kafka, an uncompressed control
// batch is never compressed, and the level plays no part (a batch already in the target codec
// is stored as it came, whatever level it was compressed at). It reads two header bytes and
// allocates nothing; a batch too short to have a header is left to validation.
func (c Compression) Rewrites(b []byte) bool {
	if c.Codec == CodecProducer || len(b) < HeaderSize || b[MagicOffset] != CurrentMagic {
		return false
	}
	attrs := b[AttributesOffset+1] // the low byte of the big-endian attributes
	codec := int(attrs & compressionMask)
	if codec == c.Codec {
		return false
	}
	return !(codec == CodecNone && attrs&controlMask != 0)
}

// Output buffers of recompression are kept by the pool up to this capacity (the default
// max.message.bytes, 1048588, with room); larger ones are dropped on Release.
const keepRecompressBuffer = 2 << 20

// snappyBlock is the uncompressed size of the blocks of Kafka's xerial snappy framing (the
// Java client's SnappyOutputStream default, 32 KiB).
const snappyBlock = 32 << 10

// Recompressor rewrites produced batches into another codec. GetRecompressor hands out pooled
// ones; the batch Recompress returns lives in the recompressor's buffer until Release. Not safe
// for concurrent use.
type Recompressor struct {
	out boundedBuffer
	sn  xerialWriter

	// The pooled encoder in use during Recompress (at most one set) and its pool.
	gz   *gzip.Writer
	lz   *lz4.Writer
	zs   *zstd.Encoder
	pool *sync.Pool
}

var recompressorPool = sync.Pool{New: func() any { return new(Recompressor) }}

// GetRecompressor returns a pooled Recompressor; Release gives it back.
func GetRecompressor() *Recompressor { return recompressorPool.Get().(*Recompressor) }

// Release returns the recompressor, and the batch its last Recompress returned, to the pool.
func (rc *Recompressor) Release() {
	if cap(rc.out.b) > keepRecompressBuffer {
		rc.out.b = nil
	}
	rc.out.b = rc.out.b[:0]
	rc.sn.w = nil
	recompressorPool.Put(rc)
}

// Recompress returns the produced batch b rewritten with its records compressed by c.Codec at
// c.Level, as Kafka's LogValidator rebuilds a batch whose codec is not the topic's. b is checked
// first as ValidateProduce checks a header (size against maxBatchBytes: MESSAGE_TOO_LARGE; magic:
// UNSUPPORTED_FOR_MESSAGE_FORMAT; batchLength, CRC, codec: CORRUPT_MESSAGE; record count and
// lastOffsetDelta: INVALID_RECORD); its records are then streamed through a Reader (decompressing
// at most limit bytes, <= 0 meaning DecompressLimit(maxBatchBytes); framing: CORRUPT_MESSAGE;
// count: INVALID_RECORD) into the encoder. The record bytes are copied unchanged (Kafka re-encodes
// each record from its fields, which gives the same bytes for every record a client writes:
// offset deltas 0..n-1, timestamps relative to the unchanged baseTimestamp, zero record
// attributes). The header keeps every field but the codec bits of the attributes, batchLength
// and the CRC, which are rewritten: producer id, epoch, base sequence, the transactional, control
// and timestamp-type bits, baseTimestamp and maxTimestamp are the producer's. The result is
// bounded by maxBatchBytes (max.message.bytes; <= 0: twice the decompression bound): a batch
// whose new form would exceed it is refused with MESSAGE_TOO_LARGE (Kafka's
// RecordTooLargeException after recompression) and the buffer never grows past the bound.
//
// The record-level policy (offset deltas in order, keys on compacted topics, timestamp bounds,
// control and producer-id checks, LogAppendTime) is left to ValidateProduce, which the log runs on
// the result: the records are the same bytes, so it refuses exactly what it would have refused
// in b. At most as many batches as there are decompression slots are recompressed at once,
// whatever their source codec, which bounds the memory held by encoders and output buffers.
//
// The returned slice aliases the recompressor's buffer: valid until the next Recompress or
// Release. b is not modified. A batch for which c.Rewrites is false is rewritten all the same.
func (rc *Recompressor) Recompress(b []byte, c Compression, maxBatchBytes, limit int) ([]byte, error) {
	h, err := checkBatch(b, maxBatchBytes)
	if err != nil {
		return nil, err
	}
	if c.Codec < CodecNone || c.Codec > CodecZstd {
		return nil, fmt.Errorf("recompress to codec %d: unknown codec", c.Codec)
	}
	if err := CheckLevel(c.Codec, c.Level); err != nil {
		return nil, fmt.Errorf("recompress: %w", err)
	}
	if limit <= 0 {
		limit = DecompressLimit(maxBatchBytes)
	}
	bound := maxBatchBytes
	if bound <= 0 {
		bound = 2 * limit
	}
	acquireDecompressSlot()
	defer releaseDecompressSlot()

	rd := GetReader()
	defer rd.Release()
	if err := rd.Reset(b, limit); err != nil {
		return nil, err
	}
	rc.out.reset(bound, len(b))
	rc.out.Write(b[:HeaderSize]) // fixed up below; the bound always holds a header
	enc := rc.encoder(c)
	i := int32(0)
	for ; ; i++ {
		r, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			rc.putEncoder()
			return nil, err
		}
		if _, err := enc.Write(r.Encoded); err != nil {
			rc.putEncoder()
			return nil, fmt.Errorf("recompress to %s: %w", codecNames[c.Codec], err)
		}
		if rc.out.over {
			break
		}
	}
	if !rc.out.over && i != h.RecordCount {
		rc.putEncoder()
		return nil, fmt.Errorf("batch declares %d records, holds %d: %w", h.RecordCount, i, kerr.InvalidRecord)
	}
	err = enc.Close()
	rc.putEncoder()
	if err != nil {
		return nil, fmt.Errorf("recompress to %s: %w", codecNames[c.Codec], err)
	}
	if rc.out.over {
		return nil, fmt.Errorf("batch of %d bytes recompressed to %s exceeds max.message.bytes %d: %w", len(b), codecNames[c.Codec], bound, kerr.MessageTooLarge)
	}
	out := rc.out.b
	be := binary.BigEndian
	be.PutUint32(out[BatchLengthOffset:], uint32(len(out)-LogOverhead))
	attrs := uint16(h.Attributes)&^compressionMask | uint16(c.Codec)
	be.PutUint16(out[AttributesOffset:], attrs)
	SetChecksum(out)
	return out, nil
}

// checkBatch is the first part of Kafka's validation of a produced batch, header only: size
// against max.message.bytes, magic, batchLength against len(b), CRC, a known codec, a positive
// record count matching lastOffsetDelta.
func checkBatch(b []byte, maxBatchBytes int) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if maxBatchBytes > 0 && len(b) > maxBatchBytes {
		return h, fmt.Errorf("batch of %d bytes exceeds max.message.bytes %d: %w", len(b), maxBatchBytes, kerr.MessageTooLarge)
	}
	if h.Magic != CurrentMagic {
		return h, fmt.Errorf("batch magic %d, only magic %d is supported: %w", h.Magic, CurrentMagic, kerr.UnsupportedForMessageFormat)
	}
	if int64(h.BatchLength)+LogOverhead != int64(len(b)) {
		return h, fmt.Errorf("batchLength %d disagrees with %d bytes received: %w", h.BatchLength, len(b), kerr.CorruptMessage)
	}
	if c := Checksum(b); c != h.CRC {
		return h, fmt.Errorf("batch crc %08x, computed %08x: %w", h.CRC, c, kerr.CorruptMessage)
	}
	if h.Compression() > CodecZstd {
		return h, fmt.Errorf("batch compression codec %d unknown: %w", h.Compression(), kerr.CorruptMessage)
	}
	if h.RecordCount <= 0 {
		return h, fmt.Errorf("invalid reported count for record batch: %d: %w", h.RecordCount, kerr.InvalidRecord)
	}
	if h.LastOffsetDelta != h.RecordCount-1 {
		return h, fmt.Errorf("inconsistent batch offset range [0, %d] and count of records %d: %w", h.LastOffsetDelta, h.RecordCount, kerr.InvalidRecord)
	}
	return h, nil
}

// encoder returns a writer compressing into rc.out with c, taken from its pool; putEncoder
// gives it back (after Close, or instead of Close on an error).
func (rc *Recompressor) encoder(c Compression) io.WriteCloser {
	switch c.Codec {
	case CodecGzip:
		rc.pool = &gzipPools[gzipPoolIndex(c.Level)]
		w, _ := rc.pool.Get().(*gzip.Writer)
		if w == nil {
			// The level was checked: NewWriterLevel cannot fail.
			w, _ = gzip.NewWriterLevel(nil, c.Level)
		}
		w.Reset(&rc.out)
		rc.gz = w
		return w
	case CodecSnappy:
		rc.sn.reset(&rc.out)
		return &rc.sn
	case CodecLZ4:
		lvl := lz4Level(c.Level)
		rc.pool = &lz4Pools[lz4PoolIndex(lvl)]
		w, _ := rc.pool.Get().(*lz4.Writer)
		if w == nil {
			w = lz4.NewWriter(nil)
			// Kafka's block size (64 KiB) and synchronous compression; valid options cannot fail.
			_ = w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.CompressionLevelOption(lvl), lz4.ConcurrencyOption(1))
		}
		w.Reset(&rc.out)
		rc.lz = w
		return w
	case CodecZstd:
		lvl := zstd.EncoderLevelFromZstd(c.Level)
		rc.pool = &zstdPools[int(lvl)-1]
		w, _ := rc.pool.Get().(*zstd.Encoder)
		if w == nil {
			// Concurrency 1: a synchronous encoder, no goroutines to stop. The window bounds
			// the encoder's history and what a consumer needs to decode the batch.
			w, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(lvl),
				zstd.WithWindowSize(zstdWindow), zstd.WithZeroFrames(true), zstd.WithLowerEncoderMem(true))
		}
		w.Reset(&rc.out)
		rc.zs = w
		return w
	default:
		return &rc.out
	}
}

// putEncoder returns the encoder encoder handed out to its pool, pointing it away from rc.out
// first (a pooled encoder must not keep a recompressor's buffer alive).
func (rc *Recompressor) putEncoder() {
	switch {
	case rc.gz != nil:
		rc.gz.Reset(nil)
		rc.pool.Put(rc.gz)
	case rc.lz != nil:
		rc.lz.Reset(nil)
		rc.pool.Put(rc.lz)
	case rc.zs != nil:
		rc.zs.Reset(nil)
		rc.pool.Put(rc.zs)
	}
	rc.gz, rc.lz, rc.zs, rc.pool = nil, nil, nil, nil
	rc.sn.w = nil
}

// zstdWindow is the window of the zstd encoder: 1 MiB, enough to find repeats across the
// records of a batch (the default max.message.bytes), and far below what any consumer accepts.
const zstdWindow = 1 << 20

// Encoder pools, one per distinct encoder setting: gzip levels -1 and 1..9, lz4 Fast and
// Level1..Level9, zstd's four encoder levels.
var (
	gzipPools [10]sync.Pool
	lz4Pools  [10]sync.Pool
	zstdPools [4]sync.Pool
)

func gzipPoolIndex(level int) int {
	if level < 1 {
		return 0
	}
	return level
}

// lz4Level maps Kafka's lz4 level to pierrec/lz4's. Kafka's default (9) uses lz4-java's fast
// compressor: Fast here. Any other level uses lz4-java's high-compression compressor, whose
// search depth doubles with each level; pierrec/lz4 offers nine high-compression depths
// (Level1..Level9, 2^9..2^17): Kafka's 1..9 take Level1, 10..17 take Level2..Level9.
func lz4Level(level int) lz4.CompressionLevel {
	if level == LZ4DefaultLevel {
		return lz4.Fast
	}
	n := min(max(level-8, 1), 9)
	return lz4.CompressionLevel(1 << (8 + n))
}

func lz4PoolIndex(l lz4.CompressionLevel) int {
	for i := 0; i < 9; i++ {
		if l == lz4.CompressionLevel(1<<(9+i)) {
			return i + 1
		}
	}
	return 0
}

// boundedBuffer collects the new batch, never growing past max: a write that would go past it
// sets over and is dropped (the encoders see success, so they stay usable; Recompress checks
// over and refuses the batch).
type boundedBuffer struct {
	b    []byte
	max  int
	over bool
}

// reset empties the buffer for a batch bounded by max, expecting about hint bytes.
func (w *boundedBuffer) reset(max, hint int) {
	w.b, w.max, w.over = w.b[:0], max, false
	if cap(w.b) < min(hint, max) {
		w.b = make([]byte, 0, min(hint, max))
	}
}

// Close is a no-op: the uncompressed target writes the records straight into the buffer.
func (w *boundedBuffer) Close() error { return nil }

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if w.over || len(p) > w.max-len(w.b) {
		w.over = true
		return len(p), nil
	}
	if len(p) > cap(w.b)-len(w.b) {
		nb := make([]byte, len(w.b), min(max(2*cap(w.b), len(w.b)+len(p)), w.max))
		copy(nb, w.b)
		w.b = nb
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// xerialWriter writes Kafka's snappy framing (what the Java client's SnappyOutputStream writes
// and every client reads): the 16-byte xerial header, then blocks of int32 length + one raw
// snappy block each, for every snappyBlock bytes of input.
type xerialWriter struct {
	w       io.Writer
	in      []byte // input not yet compressed, < snappyBlock bytes
	enc     []byte // one compressed block, with its length prefix
	started bool
}

// xerialHeader is the framing's magic, version 1 and minimum compatible version 1.
var xerialHeader = append(append([]byte(nil), xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)

func (s *xerialWriter) reset(w io.Writer) {
	s.w, s.in, s.started = w, s.in[:0], false
	if s.in == nil {
		s.in = make([]byte, 0, snappyBlock)
	}
}

func (s *xerialWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), snappyBlock-len(s.in))
		s.in = append(s.in, p[:k]...)
		p = p[k:]
		if len(s.in) == snappyBlock {
			if err := s.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

func (s *xerialWriter) flush() error {
	if !s.started {
		s.started = true
		if _, err := s.w.Write(xerialHeader); err != nil {
			return err
		}
	}
	if len(s.in) == 0 {
		return nil
	}
	if need := 4 + s2.MaxEncodedLen(len(s.in)); cap(s.enc) < need {
		s.enc = make([]byte, need)
	}
	blk := s2.EncodeSnappy(s.enc[4:cap(s.enc)], s.in)
	binary.BigEndian.PutUint32(s.enc[:4], uint32(len(blk)))
	s.in = s.in[:0]
	_, err := s.w.Write(s.enc[:4+len(blk)])
	return err
}

// Close writes the last (partial) block.
func (s *xerialWriter) Close() error { return s.flush() }
