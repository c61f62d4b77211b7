package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Record is one record for Build: a key, a value and a timestamp delta.
type Record struct {
	Key, Value     []byte
	TimestampDelta int64
}

// BuildOptions are the header fields Build fills in.
type BuildOptions struct {
	BaseOffset    int64
	BaseTimestamp int64 // 0 means now
	ProducerID    int64 // -1 when not idempotent
	ProducerEpoch int16
	BaseSequence  int32
	Attributes    int16
}

// Build appends an uncompressed RecordBatch v2 holding recs to dst and returns it. It is the
// encoder used by tests, benchmarks and the load generator, never by the broker's hot paths.
func Build(dst []byte, o BuildOptions, recs []Record) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...)
	if o.BaseTimestamp == 0 {
		o.BaseTimestamp = time.Now().UnixMilli()
	}
	maxTs := o.BaseTimestamp
	var tmp [binary.MaxVarintLen64]byte
	for i, r := range recs {
		if ts := o.BaseTimestamp + r.TimestampDelta; ts > maxTs {
			maxTs = ts
		}
		body := make([]byte, 0, 16+len(r.Key)+len(r.Value))
		body = append(body, 0) // record attributes
		body = binary.AppendVarint(body, r.TimestampDelta)
		body = binary.AppendVarint(body, int64(i))
		if r.Key == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.Key)))
			body = append(body, r.Key...)
		}
		if r.Value == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.Value)))
			body = append(body, r.Value...)
		}
		body = binary.AppendVarint(body, 0) // headers
		n := binary.PutVarint(tmp[:], int64(len(body)))
		dst = append(dst, tmp[:n]...)
		dst = append(dst, body...)
	}
	b := dst[start:]
	be := binary.BigEndian
	be.PutUint64(b[BaseOffsetOffset:], uint64(o.BaseOffset))
	be.PutUint32(b[BatchLengthOffset:], uint32(len(b)-LogOverhead))
	be.PutUint32(b[PartitionLeaderEpochOffset:], 0xffffffff)
	b[MagicOffset] = CurrentMagic
	be.PutUint16(b[AttributesOffset:], uint16(o.Attributes))
	be.PutUint32(b[LastOffsetDeltaOffset:], uint32(len(recs)-1))
	be.PutUint64(b[BaseTimestampOffset:], uint64(o.BaseTimestamp))
	be.PutUint64(b[MaxTimestampOffset:], uint64(maxTs))
	be.PutUint64(b[ProducerIDOffset:], uint64(o.ProducerID))
	be.PutUint16(b[ProducerEpochOffset:], uint16(o.ProducerEpoch))
	be.PutUint32(b[BaseSequenceOffset:], uint32(o.BaseSequence))
	be.PutUint32(b[RecordCountOffset:], uint32(len(recs)))
	SetChecksum(b)
	return dst
}

// Compress compresses records (the bytes after a batch header) with codec (1 gzip, 2 snappy
// as one raw block, 3 lz4 frame, 4 zstd). It is the encoder of tests and tools, never of the
// broker's hot paths.
func Compress(codec int, src []byte) ([]byte, error) {
	var out bytes.Buffer
	switch codec {
	case 1:
		w := gzip.NewWriter(&out)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case 2:
		return s2.EncodeSnappy(nil, src), nil
	case 3:
		w := lz4.NewWriter(&out)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case 4:
		w, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("compression codec %d unknown", codec)
	}
	return out.Bytes(), nil
}

// WithRecords returns a copy of the batch b (its header) holding payload as its records, with
// the codec, record count and last offset delta given, and a correct CRC and batchLength. Tests
// use it to build batches that lie about themselves.
func WithRecords(b []byte, codec int, payload []byte, count, lastOffsetDelta int32) []byte {
	out := append(append([]byte(nil), b[:HeaderSize]...), payload...)
	be := binary.BigEndian
	be.PutUint32(out[BatchLengthOffset:], uint32(len(out)-LogOverhead))
	attrs := int16(be.Uint16(out[AttributesOffset:]))&^compressionMask | int16(codec)
	be.PutUint16(out[AttributesOffset:], uint16(attrs))
	be.PutUint32(out[RecordCountOffset:], uint32(count))
	be.PutUint32(out[LastOffsetDeltaOffset:], uint32(lastOffsetDelta))
	SetChecksum(out)
	return out
}

// BuildCompressed is Build with the records compressed by codec.
func BuildCompressed(dst []byte, o BuildOptions, recs []Record, codec int) ([]byte, error) {
	plain := Build(nil, o, recs)
	payload, err := Compress(codec, plain[HeaderSize:])
	if err != nil {
		return dst, err
	}
	return append(dst, WithRecords(plain, codec, payload, int32(len(recs)), int32(len(recs)-1))...), nil
}

// BuildCoordinatorBatch encodes recs as one uncompressed RecordBatch v2 with no producer id and
// base timestamp nowMs (at least 1): the batches Kafka's group and transaction coordinators
// append to their internal topics (compression none, not idempotent, not transactional).
func BuildCoordinatorBatch(nowMs int64, recs []Record) []byte {
	if nowMs <= 0 {
		nowMs = 1
	}
	return Build(nil, BuildOptions{BaseTimestamp: nowMs, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
}
