package coordinator

import (
	"encoding/binary"
	"errors"
	"fmt"

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

var errCompressed = errors.New("compressed batch")

// eachRecord calls fn for every record of one stored batch (the whole batch in b). Control
// batches (transaction markers) are skipped; compressed batches are refused with errCompressed
// (weir writes __consumer_offsets uncompressed). The key and value alias b.
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
	if h.Compression() != 0 {
		return fmt.Errorf("batch at %d: %w", h.BaseOffset, errCompressed)
	}
	recs := b[record.HeaderSize:h.Size()]
	for i := int32(0); i < h.RecordCount; i++ {
		l, n := binary.Varint(recs)
		if n <= 0 || l < 0 || l > int64(len(recs)-n) {
			return fmt.Errorf("batch at %d: bad record %d length", h.BaseOffset, i)
		}
		body := recs[n : n+int(l)]
		recs = recs[n+int(l):]
		key, value, err := parseRecordBody(body)
		if err != nil {
			return fmt.Errorf("batch at %d record %d: %w", h.BaseOffset, i, err)
		}
		if err := fn(key, value); err != nil {
			return err
		}
	}
	return nil
}

// parseRecordBody decodes attributes, timestamp delta, offset delta, key and value of a record
// (headers are ignored). A null value is returned as nil.
func parseRecordBody(b []byte) (key, value []byte, err error) {
	if len(b) < 1 {
		return nil, nil, errors.New("empty record")
	}
	b = b[1:]     // attributes
	for range 2 { // timestamp delta, offset delta
		_, n := binary.Varint(b)
		if n <= 0 {
			return nil, nil, errors.New("bad varint")
		}
		b = b[n:]
	}
	field := func() ([]byte, bool) {
		l, n := binary.Varint(b)
		if n <= 0 || l < -1 || l > int64(len(b)-n) {
			return nil, false
		}
		b = b[n:]
		if l < 0 {
			return nil, true
		}
		f := b[:l:l]
		b = b[l:]
		return f, true
	}
	var ok bool
	if key, ok = field(); !ok {
		return nil, nil, errors.New("bad key")
	}
	if value, ok = field(); !ok {
		return nil, nil, errors.New("bad value")
	}
	if value == nil {
		return key, nil, nil
	}
	if len(value) == 0 {
		value = []byte{} // an empty value is not a tombstone
	}
	return key, value, nil
}
