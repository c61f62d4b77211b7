package coordinator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/weir-mq/weir/record"
)

// kv is one __consumer_offsets record: a key and a value (nil value = tombstone).
type kv = record.Record

// buildBatch encodes records as one uncompressed RecordBatch v2 with base timestamp nowMs, as
// Kafka's coordinator appends them (record.BuildCoordinatorBatch).
func buildBatch(nowMs int64, recs []kv) []byte { return record.BuildCoordinatorBatch(nowMs, recs) }

// Batch attributes of the coordinator's transactional offset commits (RecordBatch v2).
const (
	attrTransactional = record.AttrTransactional
	attrControl       = record.AttrControl
)

// Control record types of an end-transaction marker (Kafka's ControlRecordType).
const (
	controlAbort  int16 = 0
	controlCommit int16 = 1
)

// buildTxnBatch encodes records as one uncompressed transactional RecordBatch v2 of producer
// producerID at epoch: what Kafka's coordinator runtime writes for a TxnOffsetCommit (the
// transactional attribute, the producer's id and epoch, base sequence 0; the log does not check
// the sequence of the coordinator's own batches, as Kafka appends them with
// AppendOrigin.COORDINATOR).
func buildTxnBatch(nowMs, producerID int64, epoch int16, recs []kv) []byte {
	rs := make([]record.Record, len(recs))
	for i, r := range recs {
		rs[i] = record.Record{Key: r.Key, Value: r.Value}
	}
	if nowMs <= 0 {
		nowMs = 1
	}
	return record.Build(nil, record.BuildOptions{BaseTimestamp: nowMs, ProducerID: producerID, ProducerEpoch: epoch,
		BaseSequence: 0, Attributes: attrTransactional}, rs)
}

// errUnreadable reports a batch whose records cannot be read within the bound (a corrupt
// batch, or one decompressing past record.DecompressLimit): the loader skips it with a warning.
var errUnreadable = errors.New("batch records unreadable")

// eachRecord calls fn for every record of one stored batch (the whole batch in b). Control
// batches (transaction markers) are skipped (readBatch hands them over). Compressed batches (a log written by Kafka may hold
// them) are streamed through a pooled record.Reader, bounded by record.DecompressLimit of the
// default max.message.bytes; an unreadable batch yields errUnreadable after the records before
// the bad one. key and value are valid only during fn (they alias b or the reader's buffer); a
// null value is nil, an empty one is empty and non-nil (an empty value is not a tombstone).
func eachRecord(b []byte, fn func(key, value []byte) error) error {
	return readBatch(b, nil, func(_ *record.Header, _ int64, key, value []byte) error { return fn(key, value) })
}

// readBatch is eachRecord with the batch header and each record's offset, and, for a control
// batch, onMarker with its control record type (controlAbort, controlCommit, or another type
// Kafka's raft layer writes, which the caller ignores). A nil onMarker skips control batches.
func readBatch(b []byte, onMarker func(h *record.Header, typ int16) error, fn func(h *record.Header, offset int64, key, value []byte) error) error {
	h, err := record.ParseHeader(b)
	if err != nil {
		return err
	}
	if h.Size() < record.HeaderSize { // a negative or short batch length (found by FuzzOffsetsRecord)
		return fmt.Errorf("batch at %d: batch length %d", h.BaseOffset, h.BatchLength)
	}
	if int64(len(b)) < h.Size() {
		return fmt.Errorf("batch at %d: %d bytes of %d", h.BaseOffset, len(b), h.Size())
	}
	if h.IsControl() {
		if onMarker == nil {
			return nil
		}
		typ, err := controlType(b)
		if err != nil {
			return fmt.Errorf("control batch at %d: %v: %w", h.BaseOffset, err, errUnreadable)
		}
		return onMarker(&h, typ)
	}
	rd := record.GetReader()
	defer rd.Release()
	if err := rd.Reset(b, record.DecompressLimit(0)); err != nil {
		return fmt.Errorf("batch at %d: %v: %w", h.BaseOffset, err, errUnreadable)
	}
	for i := int32(0); ; i++ {
		r, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("batch at %d record %d: %v: %w", h.BaseOffset, i, err, errUnreadable)
		}
		value := r.Value
		if r.HasValue && value == nil {
			value = []byte{}
		}
		if err := fn(&h, h.BaseOffset+r.OffsetDelta, r.Key, value); err != nil {
			return err
		}
	}
}

// controlType reads the type of a control batch's first record: its key is an int16 version and
// an int16 type (Kafka's ControlRecordType: 0 ABORT, 1 COMMIT). A key version other than 0 is
// read the same way, as Kafka's ControlRecordType.parse does.
func controlType(b []byte) (int16, error) {
	rd := record.GetReader()
	defer rd.Release()
	if err := rd.Reset(b, record.DecompressLimit(0)); err != nil {
		return 0, err
	}
	r, err := rd.Next()
	if err != nil {
		return 0, err
	}
	if len(r.Key) < 4 {
		return 0, fmt.Errorf("control record key of %d bytes", len(r.Key))
	}
	return int16(binary.BigEndian.Uint16(r.Key[2:4])), nil
}
