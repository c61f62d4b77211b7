package record

// A bounded, streaming reader of the records of one batch. Every path that reads records (produce
// validation, ListOffsets by timestamp, the log cleaner, the group coordinator loading
// __consumer_offsets) goes through it, so a batch's claims are checked in one place and no batch
// is ever inflated whole: a compressed batch is decompressed as a stream into the reader's own
// buffer, which holds at most the current record and what the decompressor handed over past it.

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
)

const (
	// DecompressFactor bounds what one batch may decompress to: DecompressLimit gives this many
	// times max(max.message.bytes, 1 MiB). Kafka streams records and sets no bound; weir refuses
	// a batch whose records decompress past it (a produced one with MESSAGE_TOO_LARGE), so a
	// small compressed batch cannot make the broker inflate gigabytes.
	DecompressFactor = 16

	// minRecordBody is the smallest record body: attributes, timestamp delta, offset delta, key
	// length, value length and header count, one byte each.
	minRecordBody = 6

	// initialBuffer is a new reader's decompression buffer; it grows to hold the largest record
	// read (never past the bound) and is dropped on Release when larger than keepBuffer.
	initialBuffer = 64 << 10
	keepBuffer    = 1 << 20
)

// decompressSlots bounds how many batches the network-facing paths (ValidateProduce,
// FirstRecordAtOrAfter, Recompressor.Recompress) decompress at once: each may hold up to twice
// its bound (the record buffer and the zstd window), so with the default max.message.bytes the
// broker's memory for decompression stays below slots x 32 MiB however many clients send
// compressed batches at once (a recompression adds its encoder and an output buffer of at most
// max.message.bytes).
// Decompression is CPU-bound, so more slots than twice the processors would not add throughput.
// A waiter holds no lock.
var decompressSlots = make(chan struct{}, max(4, 2*runtime.GOMAXPROCS(0)))

func acquireDecompressSlot() { decompressSlots <- struct{}{} }
func releaseDecompressSlot() { <-decompressSlots }

// ErrDecompressedTooLarge reports a batch whose records decompress past the reader's bound.
var ErrDecompressedTooLarge = errors.New("batch decompresses past the bound")

// DecompressLimit is the decompression bound of a log whose max.message.bytes is maxMessageBytes.
func DecompressLimit(maxMessageBytes int) int {
	return DecompressFactor * max(maxMessageBytes, 1<<20)
}

// Rec is one record as a Reader returns it. The slices alias the batch (uncompressed) or the
// reader's buffer (compressed) and are valid until the next call of Next, Reset or Release.
type Rec struct {
	Attributes     byte
	TimestampDelta int64
	OffsetDelta    int64
	// Key and Value are nil when null (HasKey / HasValue false), possibly empty otherwise.
	Key, Value       []byte
	HasKey, HasValue bool
	// Headers is the number of record headers (each checked for framing, not returned).
	Headers int
	// Encoded is the whole record, its length prefix included.
	Encoded []byte
	// AfterTimestamp is the record body from the offset delta on (a record re-encoded with a new
	// timestamp delta keeps these bytes).
	AfterTimestamp []byte
}

// Reader walks the records of one batch. The zero value is ready for Reset; GetReader hands out
// pooled readers (their decoders and buffers reused). Not safe for concurrent use.
type Reader struct {
	h     Header
	limit int
	n     int32 // records returned
	rec   Rec

	plain []byte // uncompressed: the records not yet returned, in the batch itself

	// Compressed: decompressed bytes are buf[r:w]; total counts every byte the decompressor
	// produced for this batch.
	dec   io.Reader
	buf   []byte
	r, w  int
	total int
	eof   bool

	src  bytes.Reader
	gz   *gzip.Reader
	lz   *lz4.Reader
	zs   *zstdDecoder
	zsAt int // the limit zs was made for
	sn   snappyReader
}

var readerPool = sync.Pool{New: func() any { return new(Reader) }}

// GetReader returns a pooled Reader; Release gives it back.
func GetReader() *Reader { return readerPool.Get().(*Reader) }

// Release drops the reader's references to the batch and returns it to the pool.
func (rd *Reader) Release() {
	rd.plain, rd.dec = nil, nil
	rd.src.Reset(nil)
	rd.sn.src = nil
	rd.rec = Rec{}
	if cap(rd.buf) > keepBuffer {
		rd.buf = nil
	}
	if cap(rd.sn.block) > keepBuffer {
		rd.sn.block = nil
	}
	readerPool.Put(rd)
}

// Header is the header of the batch being read.
func (rd *Reader) Header() *Header { return &rd.h }

// Read returns the number of records returned so far.
func (rd *Reader) Read() int32 { return rd.n }

// Decompressed is the number of bytes decompressed so far (0 for an uncompressed batch); it
// never exceeds the bound by more than one byte.
func (rd *Reader) Decompressed() int { return rd.total }

// Reset starts reading batch, which must hold the whole batch (header included; bytes past its
// size are ignored). limit bounds what a compressed batch may decompress to (<= 0: the bound of
// the default max.message.bytes). Reset checks only that the header is complete and names a
// known codec; Next checks each record.
func (rd *Reader) Reset(batch []byte, limit int) error {
	h, err := ParseHeader(batch)
	if err != nil {
		return err
	}
	if h.BatchLength < HeaderSize-LogOverhead || h.Size() > int64(len(batch)) {
		return fmt.Errorf("batch length %d disagrees with the %d bytes present: %w", h.BatchLength, len(batch), kerr.CorruptMessage)
	}
	if limit <= 0 {
		limit = DecompressLimit(0)
	}
	rd.h, rd.limit, rd.n = h, limit, 0
	rd.rec = Rec{}
	payload := batch[HeaderSize:h.Size()]
	rd.plain, rd.dec = nil, nil
	rd.r, rd.w, rd.total, rd.eof = 0, 0, 0, false
	codec := h.Compression()
	if codec == 0 {
		rd.plain = payload
		return nil
	}
	rd.src.Reset(payload)
	switch codec {
	case 1:
		if rd.gz == nil {
			gz, err := gzip.NewReader(&rd.src)
			if err != nil {
				return fmt.Errorf("gzip: %v: %w", err, kerr.CorruptMessage)
			}
			rd.gz = gz
		} else if err := rd.gz.Reset(&rd.src); err != nil {
			return fmt.Errorf("gzip: %v: %w", err, kerr.CorruptMessage)
		}
		rd.dec = rd.gz
	case 2:
		rd.sn.reset(payload, limit)
		rd.dec = &rd.sn
	case 3:
		if rd.lz == nil {
			rd.lz = lz4.NewReader(&rd.src)
		} else {
			rd.lz.Reset(&rd.src)
		}
		rd.dec = rd.lz
	case 4:
		if rd.zs == nil || rd.zsAt != limit {
			z, err := newZstdDecoder(limit)
			if err != nil {
				return fmt.Errorf("zstd: %w", err)
			}
			rd.zs, rd.zsAt = z, limit
		}
		if err := rd.zs.d.Reset(&rd.src); err != nil {
			return fmt.Errorf("zstd: %v: %w", err, kerr.CorruptMessage)
		}
		rd.dec = rd.zs.d
	default:
		return fmt.Errorf("batch compression codec %d unknown: %w", codec, kerr.CorruptMessage)
	}
	if rd.buf == nil {
		rd.buf = make([]byte, initialBuffer)
	}
	return nil
}

// Next returns the next record, or io.EOF after the last one. It refuses (CORRUPT_MESSAGE) a
// record whose framing is broken and a stream that ends inside a record, (INVALID_RECORD) a
// record past the header's record count, and (ErrDecompressedTooLarge, also wrapping
// MESSAGE_TOO_LARGE) decompression past the bound. It never allocates once the reader's
// buffer has grown to the batch's largest record.
func (rd *Reader) Next() (*Rec, error) {
	var rec []byte
	if rd.dec == nil {
		if len(rd.plain) == 0 {
			return nil, io.EOF
		}
		l, k := varint(rd.plain)
		if k <= 0 || l < minRecordBody || l > int64(len(rd.plain)-k) {
			return nil, fmt.Errorf("record %d has a bad length prefix: %w", rd.n, kerr.CorruptMessage)
		}
		rec = rd.plain[:k+int(l)]
		rd.plain = rd.plain[k+int(l):]
		if err := rd.parse(rec, k); err != nil {
			return nil, err
		}
	} else {
		var err error
		if rec, err = rd.nextCompressed(); err != nil {
			return nil, err
		}
	}
	if rd.n >= rd.h.RecordCount {
		return nil, fmt.Errorf("batch holds more than the %d records it declares: %w", rd.h.RecordCount, kerr.InvalidRecord)
	}
	rd.n++
	return &rd.rec, nil
}

func (rd *Reader) nextCompressed() ([]byte, error) {
	// The length prefix: a varint of at most MaxVarintLen64 bytes.
	var l int64
	var k int
	for {
		l, k = binary.Varint(rd.buf[rd.r:rd.w])
		if k > 0 {
			break
		}
		if k < 0 || rd.w-rd.r >= binary.MaxVarintLen64 {
			return nil, fmt.Errorf("record %d has a bad length prefix: %w", rd.n, kerr.CorruptMessage)
		}
		if err := rd.fill(rd.w - rd.r + 1); err != nil {
			if err == io.ErrUnexpectedEOF && rd.w == rd.r {
				return nil, io.EOF // the records end at a record boundary
			}
			return nil, rd.fillErr(err)
		}
	}
	if l < minRecordBody {
		return nil, fmt.Errorf("record %d has a bad length %d: %w", rd.n, l, kerr.CorruptMessage)
	}
	if l > int64(rd.limit) {
		return nil, rd.tooLarge()
	}
	size := k + int(l)
	if err := rd.fill(size); err != nil {
		return nil, rd.fillErr(err)
	}
	rec := rd.buf[rd.r : rd.r+size]
	rd.r += size
	return rec, rd.parse(rec, k)
}

func (rd *Reader) fillErr(err error) error {
	if err == io.ErrUnexpectedEOF {
		return fmt.Errorf("record %d: the decompressed records end inside it: %w", rd.n, kerr.CorruptMessage)
	}
	return err
}

// fill makes buf[r:w] hold at least need bytes, reading from the decompressor.
func (rd *Reader) fill(need int) error {
	for empty := 0; rd.w-rd.r < need; {
		if rd.eof {
			return io.ErrUnexpectedEOF
		}
		if len(rd.buf)-rd.r < need || rd.w == len(rd.buf) {
			if need > len(rd.buf) {
				if need > rd.limit+binary.MaxVarintLen64 {
					return rd.tooLarge()
				}
				nb := make([]byte, min(max(need, 2*len(rd.buf)), rd.limit+binary.MaxVarintLen64))
				rd.w = copy(nb, rd.buf[rd.r:rd.w])
				rd.buf, rd.r = nb, 0
			} else {
				rd.w = copy(rd.buf, rd.buf[rd.r:rd.w])
				rd.r = 0
			}
		}
		// Never ask for more than one byte past the bound: the bound is what is decompressed.
		room := rd.buf[rd.w:min(len(rd.buf), rd.w+rd.limit+1-rd.total)]
		n, err := rd.dec.Read(room)
		rd.w += n
		rd.total += n
		if n == 0 && err == nil {
			if empty++; empty > 100 {
				return fmt.Errorf("decompress codec %d: no progress: %w", rd.h.Compression(), kerr.CorruptMessage)
			}
		}
		if rd.total > rd.limit {
			return rd.tooLarge()
		}
		if err == io.EOF {
			rd.eof = true
		} else if err != nil {
			if errors.Is(err, ErrDecompressedTooLarge) || errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
				return rd.tooLarge()
			}
			return fmt.Errorf("decompress codec %d: %v: %w", rd.h.Compression(), err, kerr.CorruptMessage)
		}
	}
	return nil
}

func (rd *Reader) tooLarge() error {
	return fmt.Errorf("batch records decompress to more than %d bytes: %w: %w", rd.limit, ErrDecompressedTooLarge, kerr.MessageTooLarge)
}

// parse decodes the record rec (length prefix of k bytes included) into rd.rec, checking that
// every length lies within the record and that the fields fill it exactly. It is the hot loop
// of produce validation: no closures, one-byte varints decoded inline.
func (rd *Reader) parse(rec []byte, k int) error {
	r := &rd.rec
	r.Encoded = rec
	body := rec[k:]
	r.Attributes = body[0]
	b := body[1:]
	v, n := varint(b)
	if n <= 0 {
		return rd.bad("timestamp delta")
	}
	r.TimestampDelta = v
	b = b[n:]
	r.AfterTimestamp = b
	if v, n = varint(b); n <= 0 {
		return rd.bad("offset delta")
	}
	r.OffsetDelta = v
	b = b[n:]
	var ok bool
	if r.Key, r.HasKey, b, ok = lengthField(b); !ok {
		return rd.bad("key length")
	}
	if r.Value, r.HasValue, b, ok = lengthField(b); !ok {
		return rd.bad("value length")
	}
	hc, n := varint(b)
	if n <= 0 || hc < 0 || hc > int64(len(b)-n)/2 {
		return rd.bad("header count")
	}
	b = b[n:]
	r.Headers = int(hc)
	for i := 0; i < r.Headers; i++ {
		var has bool
		if _, has, b, ok = lengthField(b); !ok || !has {
			return rd.bad("header key")
		}
		if _, _, b, ok = lengthField(b); !ok {
			return rd.bad("header value")
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("record %d: %d bytes after its last field: %w", rd.n, len(b), kerr.CorruptMessage)
	}
	return nil
}

func (rd *Reader) bad(what string) error {
	return fmt.Errorf("record %d: bad %s: %w", rd.n, what, kerr.CorruptMessage)
}

// varint is binary.Varint with the one- and two-byte cases (most record fields) decoded
// without a loop.
func varint(b []byte) (int64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return int64(b[0]>>1) ^ -int64(b[0]&1), 1
	}
	if len(b) > 1 && b[1] < 0x80 {
		u := uint64(b[0]&0x7f) | uint64(b[1])<<7
		return int64(u>>1) ^ -int64(u&1), 2
	}
	return binary.Varint(b)
}

// lengthField reads a varint length (-1 = null) and the bytes it covers.
func lengthField(b []byte) (field []byte, present bool, rest []byte, ok bool) {
	l, n := varint(b)
	if n <= 0 || l < -1 || l > int64(len(b)-n) {
		return nil, false, b, false
	}
	b = b[n:]
	if l < 0 {
		return nil, false, b, true
	}
	return b[:l:l], true, b[l:], true
}

// zstdDecoder owns a streaming zstd decoder (synchronous: concurrency 1, no goroutines) whose
// window is bounded, closed when unreachable (a pooled reader may be dropped without notice).
type zstdDecoder struct{ d *zstd.Decoder }

func newZstdDecoder(limit int) (*zstdDecoder, error) {
	window := uint64(max(limit, zstd.MinWindowSize))
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(window), zstd.WithDecoderMaxMemory(window))
	if err != nil {
		return nil, err
	}
	z := &zstdDecoder{d: d}
	runtime.SetFinalizer(z, func(z *zstdDecoder) { z.d.Close() })
	return z, nil
}

// xerialMagic starts a snappy payload framed the way Kafka's Java clients write it: the magic,
// version and compatible version (16 bytes), then blocks of int32 length + raw snappy.
var xerialMagic = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappyReader decodes a snappy payload one block at a time: Kafka's xerial framing (blocks of
// typically 32 KiB) or one raw snappy block (librdkafka, franz-go). Each block's decoded length
// is read from its header and checked against the bound before anything is decoded.
type snappyReader struct {
	src    []byte // blocks not yet decoded
	xerial bool
	raw    bool // a raw block still to decode
	block  []byte
	out    []byte // decoded bytes not yet read
	total  int
	limit  int
}

func (s *snappyReader) reset(src []byte, limit int) {
	s.out, s.total, s.limit = nil, 0, limit
	s.xerial = len(src) >= 16 && bytes.HasPrefix(src, xerialMagic)
	if s.xerial {
		s.src, s.raw = src[16:], false
	} else {
		s.src, s.raw = src, true
	}
}

func (s *snappyReader) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		var block []byte
		switch {
		case s.raw:
			block, s.src, s.raw = s.src, nil, false
		case s.xerial && len(s.src) > 0:
			if len(s.src) < 4 {
				return 0, errors.New("snappy: truncated xerial block header")
			}
			n := binary.BigEndian.Uint32(s.src)
			if int64(n) > int64(len(s.src)-4) {
				return 0, errors.New("snappy: truncated xerial block")
			}
			block, s.src = s.src[4:4+n], s.src[4+n:]
		default:
			return 0, io.EOF
		}
		n, err := s2.DecodedLen(block)
		if err != nil {
			return 0, fmt.Errorf("snappy: %w", err)
		}
		if s.total+n > s.limit {
			return 0, ErrDecompressedTooLarge
		}
		s.total += n
		if cap(s.block) < n {
			s.block = make([]byte, n)
		}
		out, err := s2.Decode(s.block[:n], block)
		if err != nil {
			return 0, fmt.Errorf("snappy: %w", err)
		}
		s.out = out
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}
