package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Policy is what a log's configuration asks of a batch a producer sends (ValidateProduce).
type Policy struct {
	// MaxBatchBytes is max.message.bytes (0 = unbounded).
	MaxBatchBytes int
	// DecompressLimit bounds what a compressed batch may decompress to; 0 means
	// DecompressLimit(MaxBatchBytes).
	DecompressLimit int
	// Now is the broker's clock in Unix milliseconds: the LogAppendTime stamped, and the
	// reference of the timestamp bounds.
	Now int64
	// LogAppendTime is message.timestamp.type=LogAppendTime: the batch is stamped with Now and
	// the bounds below are not applied (as in Kafka).
	LogAppendTime bool
	// CheckTimestamps applies BeforeMaxMs and AfterMaxMs (message.timestamp.before.max.ms /
	// after.max.ms; negative = unbounded) to every CreateTime record timestamp. The zero Policy
	// checks none.
	CheckTimestamps         bool
	BeforeMaxMs, AfterMaxMs int64
	// RequireKeys refuses records without a key (a topic whose cleanup.policy includes compact).
	RequireKeys bool
}

// RecordError is a refusal that names one record of the batch by its index, as Kafka's Produce
// response reports it (record_errors, v8+). It wraps the Kafka error of the refusal.
type RecordError struct {
	Index   int32
	Message string
	Err     *kerr.Error
}

func (e *RecordError) Error() string { return e.Message }
func (e *RecordError) Unwrap() error { return e.Err }

// Validate checks one complete batch b (exactly one batch, as a Produce request carries it per
// partition) and returns its header, without the log policy's checks (ValidateProduce). It never
// modifies b. See ValidateProduce for what is checked.
func Validate(b []byte, maxBatchBytes int) (Header, error) {
	p := Policy{MaxBatchBytes: maxBatchBytes}
	return validate(b, &p, false)
}

// ValidateProduce checks one complete batch b from a producer as Kafka's LogValidator does for
// magic 2, then stamps its timestamps, and returns the header as it is now in b. It checks, in
// order:
//
//   - the header: size against max.message.bytes (MESSAGE_TOO_LARGE), magic 2
//     (UNSUPPORTED_FOR_MESSAGE_FORMAT), batchLength against len(b) and the CRC32C
//     (CORRUPT_MESSAGE), a known compression codec (CORRUPT_MESSAGE), recordCount > 0 and
//     lastOffsetDelta = recordCount-1 (INVALID_RECORD), no control batch and no producer id
//     without a base sequence (INVALID_RECORD: clients may not write either);
//   - every record, walked in one pass (uncompressed: in place, without copying or allocating;
//     compressed: streamed through a pooled Reader, bounded by p.DecompressLimit, MESSAGE_TOO_LARGE
//     past it): its framing (every length within the record, the fields filling it exactly:
//     CORRUPT_MESSAGE), its offset delta equal to its index (INVALID_RECORD: Kafka rewrites a
//     compressed batch whose inner offsets are not 0..n-1 for the sake of pre-0.10 clients; no
//     magic-2 client writes one, and rewriting would mean recompressing on the produce path, so
//     weir refuses it), its key on a compacted topic (INVALID_RECORD), its timestamp within the
//     bounds (INVALID_TIMESTAMP, Kafka's message, RecordError naming the record);
//   - the number of records found against recordCount (INVALID_RECORD either way).
//
// Record attributes (unused in magic 2) are not checked, as in Kafka. Then, as Kafka does,
// maxTimestamp is made what the records say: with CreateTime the largest record timestamp (a
// producer's header that disagrees is corrected, not refused: clients whose records are not in
// timestamp order write the last one's), with LogAppendTime p.Now and the timestamp-type
// attribute set (baseTimestamp and the records are left alone: a reader takes every record's
// timestamp from maxTimestamp). The CRC is recomputed only when the header changed. A batch
// marked LogAppendTime by its producer is refused under LogAppendTime (INVALID_TIMESTAMP, as
// Kafka); under CreateTime its records' timestamp (the header's maxTimestamp) is checked and
// the batch becomes CreateTime.
func ValidateProduce(b []byte, p *Policy) (Header, error) {
	return validate(b, p, true)
}

func validate(b []byte, p *Policy, stamp bool) (Header, error) {
	h, err := checkBatch(b, p.MaxBatchBytes)
	if err != nil {
		return h, err
	}
	if h.IsControl() {
		return h, fmt.Errorf("clients are not allowed to write control records: %w", kerr.InvalidRecord)
	}
	if h.IsTransactional() && h.ProducerID < 0 {
		// Kafka's LogValidator: a transactional batch needs a producer id.
		return h, fmt.Errorf("transactional record batch without a producer id: %w", kerr.InvalidRecord)
	}
	if h.ProducerID >= 0 && h.BaseSequence < 0 {
		return h, fmt.Errorf("invalid sequence number %d in record batch with producerId %d: %w", h.BaseSequence, h.ProducerID, kerr.InvalidRecord)
	}
	createTime := !p.LogAppendTime
	if stamp && h.LogAppendTime() && (!createTime || h.MaxTimestamp == NoTimestamp) {
		return h, &RecordError{Index: 0, Err: kerr.InvalidTimestamp,
			Message: "Invalid timestamp type in message: producer should not set timestamp type to LogAppendTime"}
	}
	limit := p.DecompressLimit
	if limit <= 0 {
		limit = DecompressLimit(p.MaxBatchBytes)
	}
	if h.Compression() != 0 {
		acquireDecompressSlot()
		defer releaseDecompressSlot()
	}
	rd := GetReader()
	defer rd.Release()
	if err := rd.Reset(b, limit); err != nil {
		return h, err
	}
	maxTs := int64(NoTimestamp)
	checkTs := stamp && createTime && p.CheckTimestamps
	for i := int32(0); ; i++ {
		r, err := rd.Next()
		if err == io.EOF {
			if i != h.RecordCount {
				return h, fmt.Errorf("batch declares %d records, holds %d: %w", h.RecordCount, i, kerr.InvalidRecord)
			}
			break
		}
		if err != nil {
			return h, err
		}
		if r.OffsetDelta != int64(i) {
			return h, &RecordError{Index: i, Err: kerr.InvalidRecord,
				Message: fmt.Sprintf("record %d has offset delta %d: inner offsets must be 0..%d in order", i, r.OffsetDelta, h.LastOffsetDelta)}
		}
		if p.RequireKeys && !r.HasKey {
			return h, &RecordError{Index: i, Err: kerr.InvalidRecord,
				Message: fmt.Sprintf("record %d has no key: compacted topic cannot accept message without key", i)}
		}
		ts := h.BaseTimestamp + r.TimestampDelta
		if h.LogAppendTime() {
			ts = h.MaxTimestamp
		}
		if ts > maxTs {
			maxTs = ts
		}
		if checkTs && ts != NoTimestamp && !timestampWithin(ts, p.Now, p.BeforeMaxMs, p.AfterMaxMs) {
			lo, hi := satAdd(p.Now, -p.BeforeMaxMs), satAdd(p.Now, p.AfterMaxMs)
			return h, &RecordError{Index: i, Err: kerr.InvalidTimestamp,
				Message: fmt.Sprintf("Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]", ts, h.BaseOffset+r.OffsetDelta, lo, hi)}
		}
	}
	if !stamp {
		return h, nil
	}
	attrs, newMax := h.Attributes&^timestampTypeMask, maxTs
	if p.LogAppendTime {
		attrs, newMax = attrs|timestampTypeMask, p.Now
	}
	if attrs != h.Attributes || newMax != h.MaxTimestamp {
		h.Attributes, h.MaxTimestamp = attrs, newMax
		binary.BigEndian.PutUint16(b[AttributesOffset:], uint16(attrs))
		binary.BigEndian.PutUint64(b[MaxTimestampOffset:], uint64(newMax))
		h.CRC = Checksum(b)
		binary.BigEndian.PutUint32(b[CRCOffset:], h.CRC)
	}
	return h, nil
}

// timestampWithin is Kafka's bound: now-ts <= before and ts-now <= after (negative bounds are
// unbounded), computed without overflow for any int64 timestamp.
func timestampWithin(ts, now, before, after int64) bool {
	if ts <= now {
		return before < 0 || uint64(now)-uint64(ts) <= uint64(before)
	}
	return after < 0 || uint64(ts)-uint64(now) <= uint64(after)
}

func satAdd(a, b int64) int64 {
	c := a + b
	if (b > 0 && c < a) || (b < 0 && c > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return c
}

// CheckStored is the lighter check used by recovery on bytes read back from disk: magic,
// batchLength within avail, and CRC. It returns the header and the batch size.
func CheckStored(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Magic != CurrentMagic {
		return h, fmt.Errorf("stored batch magic %d: %w", h.Magic, kerr.CorruptMessage)
	}
	if h.BatchLength < HeaderSize-LogOverhead || int64(h.BatchLength)+LogOverhead > int64(len(b)) {
		return h, fmt.Errorf("stored batch length %d exceeds the %d bytes left: %w", h.BatchLength, len(b), kerr.CorruptMessage)
	}
	if c := Checksum(b[:h.Size()]); c != h.CRC {
		return h, fmt.Errorf("stored batch crc %08x, computed %08x: %w", h.CRC, c, kerr.CorruptMessage)
	}
	if h.LastOffsetDelta < 0 {
		return h, fmt.Errorf("stored batch lastOffsetDelta %d: %w", h.LastOffsetDelta, kerr.CorruptMessage)
	}
	return h, nil
}

// IsDecompressedTooLarge reports whether err is a Reader's refusal to decompress past its bound.
func IsDecompressedTooLarge(err error) bool { return errors.Is(err, ErrDecompressedTooLarge) }
