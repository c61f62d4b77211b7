package coordinator

import (
	"errors"
	"fmt"
	"io"

	"github.com/weir-mq/weir/record"
)

// kv is one __consumer_offsets record: a key and a value (nil value = tombstone).
type kv struct {
	Key, Value []byte
}

// buildBatch encodes records as one uncompressed RecordBatch v2 (not idempotent, no
// transaction) with base timestamp nowMs.
func buildBatch(nowMs int64, recs []kv) []byte {
	rs := make([]record.Record, len(recs))
	for i, r := range recs {
		rs[i] = record.Record{Key: r.Key, Value: r.Value}
	}
	if nowMs <= 0 {
		nowMs = 1
	}
	return record.Build(nil, record.BuildOptions{BaseTimestamp: nowMs, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, rs)
}

// errUnreadable reports a batch whose records cannot be read within the bound (a corrupt
// batch, or one decompressing past record.DecompressLimit): the loader skips it with a warning.
var errUnreadable = errors.New("batch records unreadable")

// eachRecord calls fn for every record of one stored batch (the whole batch in b). Control
// batches (transaction markers) are skipped. Compressed batches (a log written by Kafka may hold
// them) are streamed through a pooled record.Reader, bounded by record.DecompressLimit of the
// default max.message.bytes; an unreadable batch yields errUnreadable after the records before
// the bad one. key and value are valid only during fn (they alias b or the reader's buffer); a
// null value is nil, an empty one is empty and non-nil (an empty value is not a tombstone).
func eachRecord(b []byte, fn func(key, value []byte) error) error {
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
		return nil
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
		if err := fn(r.Key, value); err != nil {
			return err
		}
	}
}
