package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Control records (Kafka's ControlRecordType and EndTransactionMarker). A transaction ends with a
// control batch (attributes control + transactional, the producer's id and epoch, base sequence
// -1) holding one record whose key is
//
//	version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
//
// and whose value is Kafka's EndTxnMarker schema version 0:
//
//	version int16 (0) | coordinatorEpoch int32
//
// Kafka reads any key version (only the type matters) and refuses a key shorter than 4 bytes;
// weir does the same, and a value shorter than 6 bytes is refused too.

// Control record types (the key's type field).
const (
	ControlTypeAbort  int16 = 0
	ControlTypeCommit int16 = 1
)

// Attribute bits of a transaction marker batch.
const (
	AttrTransactional int16 = transactionalMask
	AttrControl       int16 = controlMask
)

// EndTxnMarker is the content of a transaction marker.
type EndTxnMarker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// ErrNotEndTxnMarker is returned by ParseEndTxnMarker for a control batch that holds no
// transaction marker (an empty control batch left by the cleaner, or another control type).
var ErrNotEndTxnMarker = errors.New("control batch holds no transaction marker")

// BuildEndTxnMarker appends a control batch with one transaction marker record to dst, as
// Kafka's MemoryRecords.withEndTransactionMarker does: offsets from baseOffset, timestamp ts
// (Unix ms), the producer's id and epoch, no sequence, no leader epoch (-1). The broker assigns
// the offset and leader epoch in place when it appends it.
func BuildEndTxnMarker(dst []byte, baseOffset, ts, producerID int64, producerEpoch int16, m EndTxnMarker) []byte {
	typ := ControlTypeAbort
	if m.Commit {
		typ = ControlTypeCommit
	}
	var key [4]byte
	binary.BigEndian.PutUint16(key[0:], 0)
	binary.BigEndian.PutUint16(key[2:], uint16(typ))
	var val [6]byte
	binary.BigEndian.PutUint16(val[0:], 0)
	binary.BigEndian.PutUint32(val[2:], uint32(m.CoordinatorEpoch))
	return Build(dst, BuildOptions{
		BaseOffset: baseOffset, BaseTimestamp: ts, ProducerID: producerID, ProducerEpoch: producerEpoch,
		BaseSequence: -1, Attributes: AttrControl | AttrTransactional,
	}, []Record{{Key: key[:], Value: val[:]}})
}

// ParseControlKey returns the type of a control record's key.
func ParseControlKey(key []byte) (int16, error) {
	if len(key) < 4 {
		return 0, fmt.Errorf("control record key of %d bytes, want at least 4: %w", len(key), kerr.CorruptMessage)
	}
	return int16(binary.BigEndian.Uint16(key[2:])), nil
}

// ParseEndTxnMarker reads the transaction marker of a control batch b (one whole batch, CRC
// already checked). A control batch without records, or whose first record is not a COMMIT or
// ABORT, gives ErrNotEndTxnMarker; a malformed record CORRUPT_MESSAGE.
func ParseEndTxnMarker(b []byte) (EndTxnMarker, error) {
	var rd Reader
	if err := rd.Reset(b, 1<<16); err != nil {
		return EndTxnMarker{}, err
	}
	if !rd.Header().IsControl() {
		return EndTxnMarker{}, fmt.Errorf("not a control batch: %w", kerr.InvalidRecord)
	}
	r, err := rd.Next()
	if err == io.EOF {
		return EndTxnMarker{}, ErrNotEndTxnMarker
	}
	if err != nil {
		return EndTxnMarker{}, err
	}
	typ, err := ParseControlKey(r.Key)
	if err != nil {
		return EndTxnMarker{}, err
	}
	if typ != ControlTypeAbort && typ != ControlTypeCommit {
		return EndTxnMarker{}, ErrNotEndTxnMarker
	}
	if len(r.Value) < 6 {
		return EndTxnMarker{}, fmt.Errorf("transaction marker value of %d bytes, want at least 6: %w", len(r.Value), kerr.CorruptMessage)
	}
	return EndTxnMarker{Commit: typ == ControlTypeCommit, CoordinatorEpoch: int32(binary.BigEndian.Uint32(r.Value[2:]))}, nil
}
