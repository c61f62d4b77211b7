package txncoord

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/weir-mq/weir/record"
)

// Records on __transaction_state, in Kafka 4.4's schemas (TransactionLogKey.json and
// TransactionLogValue.json of Kafka's transaction-coordinator module), byte for byte as Kafka's
// generated code writes them, so Kafka's tools (DumpLogSegments --transaction-log-decoder) read
// weir's log and weir reads Kafka's.
//
//	key   = int16 version (0, the coordinator record type) | TransactionLogKey v0:
//	        string transactional_id (int16 length)
//	value = int16 version (0 or 1) | TransactionLogValue:
//	        int64 producer_id, int16 producer_epoch, int32 timeout_ms, int8 state,
//	        nullable array of {string topic, array of int32 partition} (null in Empty),
//	        int64 last_update_ms, int64 start_ms,
//	        v1 (flexible: compact strings and arrays, a tagged-field section per struct):
//	        tags 0 previous_producer_id (int64, default -1), 1 next_producer_id (int64, -1),
//	        2 client_transaction_version (int16, 0), 3 next_producer_epoch (int16, -1: KIP-939,
//	        read and written back but never set by weir), each written only when not default.
//	a null value is a tombstone: the transactional id expired.
//
// Kafka writes value version 1 when the transaction.version feature is 2 (TV2) and version 0
// below it; Config.TransactionVersion chooses the same way.

const (
	keyVersion      = 0
	maxValueVersion = 1
	// maxIDLen is the longest transactional id (and topic name) the schema's int16 string
	// length can hold.
	maxIDLen = 32767
)

var errShort = errors.New("record truncated")

// logValue is one TransactionLogValue.
type logValue struct {
	ProducerID         int64
	PreviousProducerID int64 // v1 tag 0 (-1: none)
	NextProducerID     int64 // v1 tag 1 (-1: none)
	ProducerEpoch      int16
	NextProducerEpoch  int16 // v1 tag 3 (-1: none)
	TimeoutMs          int32
	State              State
	// Partitions is nil when the record holds a null array (Kafka writes null in Empty).
	Partitions            []TopicPartition
	LastUpdateMs, StartMs int64
	ClientTxnVersion      int16 // v1 tag 2
}

// encodeKey is the record key of transactional id id.
func encodeKey(id string) []byte {
	b := make([]byte, 0, 4+len(id))
	b = binary.BigEndian.AppendUint16(b, keyVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
	return append(b, id...)
}

// decodeKey returns the transactional id of a record key. A key of another version is not a
// transaction log record (errUnknownKey).
func decodeKey(b []byte) (string, error) {
	r := reader{b: b}
	v := r.i16()
	if r.err != nil {
		return "", r.err
	}
	if v != keyVersion {
		return "", fmt.Errorf("key version %d: %w", v, errUnknownKey)
	}
	id, null := r.str()
	if r.err == nil && null {
		r.err = errors.New("null transactional id")
	}
	if r.err != nil {
		return "", fmt.Errorf("transaction log key: %w", r.err)
	}
	return id, nil
}

var errUnknownKey = errors.New("not a transaction log key")

// groupPartitions groups partitions by topic, topics and partitions in ascending order (Kafka
// groups them with a hash map; the order carries no meaning).
func groupPartitions(parts []TopicPartition) (topics []string, ids [][]int32) {
	s := append([]TopicPartition(nil), parts...)
	sort.Slice(s, func(i, j int) bool {
		if s[i].Topic != s[j].Topic {
			return s[i].Topic < s[j].Topic
		}
		return s[i].Partition < s[j].Partition
	})
	for _, tp := range s {
		if n := len(topics); n == 0 || topics[n-1] != tp.Topic {
			topics = append(topics, tp.Topic)
			ids = append(ids, nil)
		}
		ids[len(ids)-1] = append(ids[len(ids)-1], tp.Partition)
	}
	return topics, ids
}

// encodeValue encodes v as TransactionLogValue version version (0 or 1).
func encodeValue(v *logValue, version int16) []byte {
	flex := version >= 1
	b := make([]byte, 0, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint64(b, uint64(v.ProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(v.ProducerEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.TimeoutMs))
	b = append(b, byte(v.State))
	if v.Partitions == nil {
		if flex {
			b = binary.AppendUvarint(b, 0)
		} else {
			b = binary.BigEndian.AppendUint32(b, 0xffffffff)
		}
	} else {
		topics, ids := groupPartitions(v.Partitions)
		if flex {
			b = binary.AppendUvarint(b, uint64(len(topics))+1)
		} else {
			b = binary.BigEndian.AppendUint32(b, uint32(len(topics)))
		}
		for i, t := range topics {
			if flex {
				b = binary.AppendUvarint(b, uint64(len(t))+1)
				b = append(b, t...)
				b = binary.AppendUvarint(b, uint64(len(ids[i]))+1)
			} else {
				b = binary.BigEndian.AppendUint16(b, uint16(len(t)))
				b = append(b, t...)
				b = binary.BigEndian.AppendUint32(b, uint32(len(ids[i])))
			}
			for _, p := range ids[i] {
				b = binary.BigEndian.AppendUint32(b, uint32(p))
			}
			if flex {
				b = append(b, 0) // no tagged fields
			}
		}
	}
	b = binary.BigEndian.AppendUint64(b, uint64(v.LastUpdateMs))
	b = binary.BigEndian.AppendUint64(b, uint64(v.StartMs))
	if flex {
		n := 0
		if v.PreviousProducerID != -1 {
			n++
		}
		if v.NextProducerID != -1 {
			n++
		}
		if v.ClientTxnVersion != 0 {
			n++
		}
		if v.NextProducerEpoch != -1 {
			n++
		}
		b = binary.AppendUvarint(b, uint64(n))
		if v.PreviousProducerID != -1 {
			b = append(b, 0, 8)
			b = binary.BigEndian.AppendUint64(b, uint64(v.PreviousProducerID))
		}
		if v.NextProducerID != -1 {
			b = append(b, 1, 8)
			b = binary.BigEndian.AppendUint64(b, uint64(v.NextProducerID))
		}
		if v.ClientTxnVersion != 0 {
			b = append(b, 2, 2)
			b = binary.BigEndian.AppendUint16(b, uint16(v.ClientTxnVersion))
		}
		if v.NextProducerEpoch != -1 {
			b = append(b, 3, 2)
			b = binary.BigEndian.AppendUint16(b, uint16(v.NextProducerEpoch))
		}
	}
	return b
}

// decodeValue decodes a TransactionLogValue (versions 0 and 1). Every length and count is
// checked against the bytes left, so a corrupt record costs at most its own size.
func decodeValue(b []byte) (*logValue, error) {
	r := reader{b: b}
	version := r.i16()
	if r.err != nil {
		return nil, fmt.Errorf("transaction log value: %w", r.err)
	}
	if version < 0 || version > maxValueVersion {
		return nil, fmt.Errorf("transaction log value version %d is not known", version)
	}
	flex := version >= 1
	v := &logValue{PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1}
	v.ProducerID = r.i64()
	v.ProducerEpoch = r.i16()
	v.TimeoutMs = r.i32()
	v.State = State(r.i8())
	minTopic := 2 + 4 // int16 string length, int32 array length
	if flex {
		minTopic = 1 + 1 + 1 // compact string, compact array, tagged fields
	}
	n, null := r.arrayLen(flex, minTopic)
	if !null {
		v.Partitions = []TopicPartition{}
		for i := 0; i < n && r.err == nil; i++ {
			topic, tnull := r.strFlex(flex)
			if tnull && r.err == nil {
				r.err = errors.New("null topic")
			}
			m, pnull := r.arrayLen(flex, 4)
			if pnull && r.err == nil {
				r.err = errors.New("null partition ids")
			}
			for j := 0; j < m && r.err == nil; j++ {
				v.Partitions = append(v.Partitions, TopicPartition{Topic: topic, Partition: r.i32()})
			}
			if flex {
				r.skipTags()
			}
		}
	}
	v.LastUpdateMs = r.i64()
	v.StartMs = r.i64()
	if flex {
		count := r.uvarint()
		for i := uint64(0); i < count && r.err == nil; i++ {
			tag := r.uvarint()
			size := r.uvarint()
			if r.err != nil {
				break
			}
			if size > uint64(len(r.b)) {
				r.err = errShort
				break
			}
			data := reader{b: r.b[:size]}
			r.b = r.b[size:]
			switch tag {
			case 0:
				v.PreviousProducerID = data.i64()
			case 1:
				v.NextProducerID = data.i64()
			case 2:
				v.ClientTxnVersion = data.i16()
			case 3:
				v.NextProducerEpoch = data.i16()
			default:
				continue // a tag of a newer Kafka: skipped, as Kafka keeps unknown tags aside
			}
			if data.err != nil {
				r.err = fmt.Errorf("tagged field %d: %w", tag, data.err)
			}
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("transaction log value v%d: %w", version, r.err)
	}
	if !v.State.valid() {
		return nil, fmt.Errorf("transaction log value: unknown transaction state %d", int8(v.State))
	}
	return v, nil
}

// reader decodes big-endian Kafka primitives; the first error sticks and later reads return
// zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = errShort
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) i8() int8 {
	if p := r.take(1); p != nil {
		return int8(p[0])
	}
	return 0
}

func (r *reader) i16() int16 {
	if p := r.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (r *reader) i32() int32 {
	if p := r.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (r *reader) i64() int64 {
	if p := r.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// str reads an int16-length string; length -1 reports null (the caller refuses it where the
// schema does not allow it).
func (r *reader) str() (string, bool) {
	n := r.i16()
	if r.err != nil {
		return "", false
	}
	if n < 0 {
		if n == -1 {
			return "", true
		}
		r.err = fmt.Errorf("string length %d", n)
		return "", false
	}
	return string(r.take(int(n))), false
}

// strFlex reads a string in the version's encoding.
func (r *reader) strFlex(flex bool) (string, bool) {
	if !flex {
		return r.str()
	}
	n := r.uvarint()
	if r.err != nil {
		return "", false
	}
	if n == 0 {
		return "", true
	}
	if n-1 > maxIDLen {
		r.err = fmt.Errorf("string length %d", n-1)
		return "", false
	}
	return string(r.take(int(n - 1))), false
}

// arrayLen reads an array length in the version's encoding, refusing counts that the bytes
// left cannot hold at minElem bytes an element.
func (r *reader) arrayLen(flex bool, minElem int) (int, bool) {
	var n int64
	if flex {
		u := r.uvarint()
		if r.err != nil {
			return 0, false
		}
		if u == 0 {
			return 0, true
		}
		if u-1 > uint64(len(r.b)) {
			r.err = fmt.Errorf("array length %d", u-1)
			return 0, false
		}
		n = int64(u - 1)
	} else {
		n = int64(r.i32())
		if r.err != nil {
			return 0, false
		}
		if n == -1 {
			return 0, true
		}
		if n < 0 {
			r.err = fmt.Errorf("array length %d", n)
			return 0, false
		}
	}
	if n*int64(minElem) > int64(len(r.b)) {
		r.err = fmt.Errorf("array length %d with %d bytes left", n, len(r.b))
		return 0, false
	}
	return int(n), false
}

// skipTags skips a tagged-field section.
func (r *reader) skipTags() {
	count := r.uvarint()
	for i := uint64(0); i < count && r.err == nil; i++ {
		r.uvarint()
		size := r.uvarint()
		if r.err == nil && size > uint64(len(r.b)) {
			r.err = errShort
			return
		}
		r.take(int(size))
	}
}

// kv is one __transaction_state record: a key and a value (nil value = tombstone).
type kv = record.Record

// buildBatch encodes records as one uncompressed RecordBatch v2 with base timestamp nowMs, as
// Kafka's coordinator appends them (record.BuildCoordinatorBatch).
func buildBatch(nowMs int64, recs []kv) []byte { return record.BuildCoordinatorBatch(nowMs, recs) }

// errUnreadable reports a batch whose records cannot be read within the bound: the loader skips
// it with a warning.
var errUnreadable = errors.New("batch records unreadable")

// eachRecord calls fn for every record of one stored batch (b holds the whole batch). Control
// batches are skipped; compressed batches (a log written by Kafka before it enforced no
// compression) are streamed through a pooled record.Reader bounded by record.DecompressLimit.
// key and value are valid only during fn; a null value is nil, an empty one non-nil. This
// mirrors coordinator's reader of __consumer_offsets.
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
