package sharecoord

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/sharestate"
)

// Record key versions of __share_group_state (the "apiKey" of Kafka's coordinator-key schemas,
// written as the key's leading int16).
const (
	keySnapshot int16 = 0 // ShareSnapshotKey -> ShareSnapshotValue
	keyUpdate   int16 = 1 // ShareUpdateKey -> ShareUpdateValue
)

// batchWireSize is one StateBatch in a value: first and last offset, state, count and an empty
// tagged-field section.
const batchWireSize = 8 + 8 + 1 + 2 + 1

var errShort = errors.New("record truncated")

// errUnknownKey is a key of a version this coordinator does not write (skipped at load).
var errUnknownKey = errors.New("not a share state key")

// snapshotValue is ShareSnapshotValue v0: a share partition's full state.
type snapshotValue struct {
	SnapshotEpoch         int32
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32 // tagged 0, default -1
	CreateTimestamp       int64
	WriteTimestamp        int64
	Batches               []sharestate.Batch
}

// updateValue is ShareUpdateValue v0: a delta over the last snapshot and updates.
type updateValue struct {
	SnapshotEpoch         int32
	LeaderEpoch           int32
	StartOffset           int64 // -1: unchanged
	DeliveryCompleteCount int32 // tagged 0, default -1
	Batches               []sharestate.Batch
}

// encodeKey is ShareSnapshotKey (version keySnapshot) or ShareUpdateKey (keyUpdate) v0, both
// non-flexible: group id (int16 length), topic id, partition.
func encodeKey(version int16, k sharestate.Key) []byte {
	b := make([]byte, 0, 2+2+len(k.Group)+16+4)
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint16(b, uint16(len(k.Group)))
	b = append(b, k.Group...)
	b = append(b, k.TopicID[:]...)
	return binary.BigEndian.AppendUint32(b, uint32(k.Partition))
}

// decodeKey reads a key written by encodeKey (or Kafka).
func decodeKey(b []byte) (int16, sharestate.Key, error) {
	r := reader{b: b}
	v := r.i16()
	if r.err != nil {
		return 0, sharestate.Key{}, r.err
	}
	if v != keySnapshot && v != keyUpdate {
		return v, sharestate.Key{}, fmt.Errorf("key version %d: %w", v, errUnknownKey)
	}
	var k sharestate.Key
	n := r.i16()
	if n < 0 {
		return 0, k, fmt.Errorf("group id length %d: %w", n, errShort)
	}
	k.Group = string(r.take(int(n)))
	copy(k.TopicID[:], r.take(16))
	k.Partition = r.i32()
	return v, k, r.err
}

func appendBatches(b []byte, bs []sharestate.Batch) []byte {
	b = binary.AppendUvarint(b, uint64(len(bs))+1)
	for _, x := range bs {
		b = binary.BigEndian.AppendUint64(b, uint64(x.FirstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(x.LastOffset))
		b = append(b, byte(x.DeliveryState))
		b = binary.BigEndian.AppendUint16(b, uint16(x.DeliveryCount))
		b = append(b, 0) // no tagged fields
	}
	return b
}

// appendDCCTag writes the top-level tagged-field section: DeliveryCompleteCount (tag 0) when it
// is not its default -1, as Kafka's generated writer does.
func appendDCCTag(b []byte, dcc int32) []byte {
	if dcc == -1 {
		return append(b, 0)
	}
	b = append(b, 1, 0, 4) // one field: tag 0, 4 bytes
	return binary.BigEndian.AppendUint32(b, uint32(dcc))
}

// encodeSnapshot is ShareSnapshotValue v0 with its version prefix.
func encodeSnapshot(v *snapshotValue) []byte {
	b := make([]byte, 0, 2+4+4+4+8+8+8+5+len(v.Batches)*batchWireSize+8)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(v.SnapshotEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.StateEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(v.StartOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(v.CreateTimestamp))
	b = binary.BigEndian.AppendUint64(b, uint64(v.WriteTimestamp))
	b = appendBatches(b, v.Batches)
	return appendDCCTag(b, v.DeliveryCompleteCount)
}

// encodeUpdate is ShareUpdateValue v0 with its version prefix.
func encodeUpdate(v *updateValue) []byte {
	b := make([]byte, 0, 2+4+4+8+5+len(v.Batches)*batchWireSize+8)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(v.SnapshotEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.LeaderEpoch))
	b = binary.BigEndian.AppendUint64(b, uint64(v.StartOffset))
	b = appendBatches(b, v.Batches)
	return appendDCCTag(b, v.DeliveryCompleteCount)
}

// decodeSnapshot reads a ShareSnapshotValue (version 0; a later version's extra fields are
// only tagged or trailing, so it is read as 0 as Kafka's reader of an unknown version would
// refuse: here it is refused too).
func decodeSnapshot(b []byte) (*snapshotValue, error) {
	r := reader{b: b}
	if v := r.i16(); r.err == nil && v != 0 {
		return nil, fmt.Errorf("ShareSnapshotValue version %d", v)
	}
	v := &snapshotValue{DeliveryCompleteCount: -1}
	v.SnapshotEpoch = r.i32()
	v.StateEpoch = r.i32()
	v.LeaderEpoch = r.i32()
	v.StartOffset = r.i64()
	v.CreateTimestamp = r.i64()
	v.WriteTimestamp = r.i64()
	v.Batches = r.batches()
	r.tags(func(tag uint64, data []byte) {
		if tag == 0 && len(data) == 4 {
			v.DeliveryCompleteCount = int32(binary.BigEndian.Uint32(data))
		}
	})
	return v, r.err
}

// decodeUpdate reads a ShareUpdateValue v0.
func decodeUpdate(b []byte) (*updateValue, error) {
	r := reader{b: b}
	if v := r.i16(); r.err == nil && v != 0 {
		return nil, fmt.Errorf("ShareUpdateValue version %d", v)
	}
	v := &updateValue{DeliveryCompleteCount: -1}
	v.SnapshotEpoch = r.i32()
	v.LeaderEpoch = r.i32()
	v.StartOffset = r.i64()
	v.Batches = r.batches()
	r.tags(func(tag uint64, data []byte) {
		if tag == 0 && len(data) == 4 {
			v.DeliveryCompleteCount = int32(binary.BigEndian.Uint32(data))
		}
	})
	return v, r.err
}

// reader reads big-endian fields; the first shortfall sets err and every later read returns
// zero values, so callers check err once.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		if r.err == nil {
			r.err = errShort
		}
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) i8() int8 {
	if b := r.take(1); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *reader) i16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) i32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) i64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

// batches reads a compact array of StateBatch, its count bounded by the bytes left.
func (r *reader) batches() []sharestate.Batch {
	n := r.uvarint()
	if r.err != nil || n == 0 {
		return nil // null array: none
	}
	n--
	if n > uint64(len(r.b)/(batchWireSize)) {
		r.err = fmt.Errorf("%d state batches in %d bytes: %w", n, len(r.b), errShort)
		return nil
	}
	out := make([]sharestate.Batch, n)
	for i := range out {
		out[i].FirstOffset = r.i64()
		out[i].LastOffset = r.i64()
		out[i].DeliveryState = r.i8()
		out[i].DeliveryCount = r.i16()
		r.tags(nil)
	}
	if r.err != nil {
		return nil
	}
	return out
}

// tags reads a tagged-field section, calling fn (when not nil) for each field.
func (r *reader) tags(fn func(tag uint64, data []byte)) {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = errShort
		return
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		tag := r.uvarint()
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.err = errShort
			return
		}
		data := r.take(int(size))
		if fn != nil && r.err == nil {
			fn(tag, data)
		}
	}
}

// kv is one record of a batch the coordinator appends.
type kv = record.Record

// buildBatch is one uncompressed RecordBatch v2 of recs, as Kafka's coordinators write.
func buildBatch(nowMs int64, recs []kv) []byte { return record.BuildCoordinatorBatch(nowMs, recs) }

// errUnreadable reports a batch whose records cannot be read: the loader skips it with a
// warning.
var errUnreadable = errors.New("batch records unreadable")

// eachRecord calls fn for every record of one stored batch (b holds the whole batch). Control
// batches are skipped; compressed batches are read through a pooled record.Reader bounded by
// record.DecompressLimit. key and value are valid only during fn; a null value is nil.
func eachRecord(b []byte, fn func(key, value []byte) error) error {
	h, err := record.ParseHeader(b)
	if err != nil {
		return err
	}
	if h.Size() < record.HeaderSize {
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
	if err := rd.Reset(b[:h.Size()], record.DecompressLimit(0)); err != nil {
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
