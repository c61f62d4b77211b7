package record

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Validate checks one complete batch b (exactly one batch, as a Produce request carries it per
// partition) and returns its header. maxBatchBytes is max.message.bytes (0 = unbounded). It checks,
// in order: size bounds, magic, batchLength against len(b), CRC32C, record count against
// lastOffsetDelta and, for uncompressed batches, against the records actually present. It never
// modifies b and never allocates.
func Validate(b []byte, maxBatchBytes int) (Header, error) {
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
	if h.RecordCount <= 0 {
		return h, fmt.Errorf("batch declares %d records: %w", h.RecordCount, kerr.InvalidRecord)
	}
	if h.LastOffsetDelta != h.RecordCount-1 {
		return h, fmt.Errorf("batch lastOffsetDelta %d does not match record count %d: %w", h.LastOffsetDelta, h.RecordCount, kerr.InvalidRecord)
	}
	if h.Compression() == 0 {
		n, err := countRecords(b[HeaderSize:])
		if err != nil {
			return h, err
		}
		if n != int(h.RecordCount) {
			return h, fmt.Errorf("batch declares %d records, holds %d: %w", h.RecordCount, n, kerr.InvalidRecord)
		}
	} else if h.Compression() > 4 {
		return h, fmt.Errorf("batch compression codec %d unknown: %w", h.Compression(), kerr.CorruptMessage)
	}
	return h, nil
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

// countRecords walks the records of an uncompressed batch by their varint length prefixes.
func countRecords(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		l, k := binary.Varint(b)
		if k <= 0 || l < 0 || l > int64(len(b)-k) {
			return n, fmt.Errorf("record %d has a bad length prefix: %w", n, kerr.CorruptMessage)
		}
		b = b[k+int(l):]
		n++
	}
	return n, nil
}
