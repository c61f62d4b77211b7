package record

import (
	"encoding/binary"
	"fmt"

	"github.com/klauspost/crc32"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Header field offsets and sizes of RecordBatch v2.
const (
	BaseOffsetOffset           = 0
	BatchLengthOffset          = 8
	PartitionLeaderEpochOffset = 12
	MagicOffset                = 16
	CRCOffset                  = 17
	AttributesOffset           = 21
	LastOffsetDeltaOffset      = 23
	BaseTimestampOffset        = 27
	MaxTimestampOffset         = 35
	ProducerIDOffset           = 43
	ProducerEpochOffset        = 51
	BaseSequenceOffset         = 53
	RecordCountOffset          = 57

	// HeaderSize is the size of a RecordBatch v2 header; the records follow it.
	HeaderSize = 61
	// LogOverhead is the part of the header not counted by batchLength (baseOffset + batchLength).
	LogOverhead = 12
	// CurrentMagic is the only record format weir stores.
	CurrentMagic = 2

	// NoTimestamp is Kafka's RecordBatch.NO_TIMESTAMP.
	NoTimestamp = -1

	compressionMask   = 0x07
	timestampTypeMask = 0x08
	transactionalMask = 0x10
	controlMask       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded fixed part of a RecordBatch v2.
type Header struct {
	BaseOffset           int64
	BatchLength          int32 // bytes after the batchLength field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the total size of the batch in bytes (header included).
func (h *Header) Size() int64 { return int64(h.BatchLength) + LogOverhead }

// LastOffset is the offset of the batch's last record.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset following the batch.
func (h *Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression returns the codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h *Header) Compression() int { return int(h.Attributes & compressionMask) }

// IsTransactional reports the transactional attribute bit.
func (h *Header) IsTransactional() bool { return h.Attributes&transactionalMask != 0 }

// IsControl reports the control-batch attribute bit.
func (h *Header) IsControl() bool { return h.Attributes&controlMask != 0 }

// LogAppendTime reports whether the batch uses LogAppendTime timestamps.
func (h *Header) LogAppendTime() bool { return h.Attributes&timestampTypeMask != 0 }

// ParseHeader decodes the header at the start of b. It checks only that b holds a header.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("batch header needs %d bytes, have %d: %w", HeaderSize, len(b), kerr.CorruptMessage)
	}
	be := binary.BigEndian
	h.BaseOffset = int64(be.Uint64(b[BaseOffsetOffset:]))
	h.BatchLength = int32(be.Uint32(b[BatchLengthOffset:]))
	h.PartitionLeaderEpoch = int32(be.Uint32(b[PartitionLeaderEpochOffset:]))
	h.Magic = int8(b[MagicOffset])
	h.CRC = be.Uint32(b[CRCOffset:])
	h.Attributes = int16(be.Uint16(b[AttributesOffset:]))
	h.LastOffsetDelta = int32(be.Uint32(b[LastOffsetDeltaOffset:]))
	h.BaseTimestamp = int64(be.Uint64(b[BaseTimestampOffset:]))
	h.MaxTimestamp = int64(be.Uint64(b[MaxTimestampOffset:]))
	h.ProducerID = int64(be.Uint64(b[ProducerIDOffset:]))
	h.ProducerEpoch = int16(be.Uint16(b[ProducerEpochOffset:]))
	h.BaseSequence = int32(be.Uint32(b[BaseSequenceOffset:]))
	h.RecordCount = int32(be.Uint32(b[RecordCountOffset:]))
	return h, nil
}

// SetBaseOffset writes baseOffset into the batch in place. The field lies outside the CRC.
func SetBaseOffset(b []byte, baseOffset int64) {
	binary.BigEndian.PutUint64(b[BaseOffsetOffset:], uint64(baseOffset))
}

// SetPartitionLeaderEpoch writes the leader epoch into the batch in place (outside the CRC).
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[PartitionLeaderEpochOffset:], uint32(epoch))
}

// Checksum computes the CRC32C of a whole batch's CRC-covered bytes (attributes..end).
func Checksum(batch []byte) uint32 {
	return crc32.Checksum(batch[AttributesOffset:], castagnoli)
}

// SetChecksum recomputes and stores the CRC of a whole batch (used by encoders and tests).
func SetChecksum(batch []byte) {
	binary.BigEndian.PutUint32(batch[CRCOffset:], Checksum(batch))
}

// FirstRecordAtOrAfter walks the records of a batch (the whole batch in b; a compressed one is
// streamed through a pooled Reader, decompressing at most limit bytes, <= 0 meaning the default
// bound) and returns the offset and timestamp of the first record whose timestamp is >= ts. ok
// is false when no record qualifies or the records cannot be read within the bound.
func FirstRecordAtOrAfter(b []byte, ts int64, limit int) (offset, timestamp int64, ok bool) {
	if h, err := ParseHeader(b); err == nil && h.Compression() != 0 {
		acquireDecompressSlot()
		defer releaseDecompressSlot()
	}
	rd := GetReader()
	defer rd.Release()
	if rd.Reset(b, limit) != nil {
		return 0, 0, false
	}
	h := rd.Header()
	for {
		r, err := rd.Next()
		if err != nil {
			return 0, 0, false
		}
		rts := h.BaseTimestamp + r.TimestampDelta
		if h.LogAppendTime() {
			rts = h.MaxTimestamp
		}
		if rts >= ts {
			return h.BaseOffset + r.OffsetDelta, rts, true
		}
	}
}
