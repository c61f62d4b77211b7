package record_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
)

func testRecords() []record.Record {
	return []record.Record{
		{Key: []byte("k0"), Value: []byte("first value"), TimestampDelta: 0},
		{Key: nil, Value: []byte("no key"), TimestampDelta: 30},
		{Key: []byte("k2"), Value: nil, TimestampDelta: 5},
		{Key: []byte{}, Value: []byte{}, TimestampDelta: 12},
	}
}

func testBatch() []byte {
	return record.Build(nil, record.BuildOptions{BaseOffset: 0, BaseTimestamp: 1_700_000_000_000, ProducerID: 77, ProducerEpoch: 3, BaseSequence: 40}, testRecords())
}

// reCRC recomputes the checksum after a test edited CRC-covered bytes on purpose.
func reCRC(b []byte) []byte { record.SetChecksum(b); return b }

type decodedRecord struct {
	key, value     []byte
	tsDelta, delta int64
}

// decodeRecords walks an uncompressed batch's records independently of the package.
func decodeRecords(t *testing.T, b []byte) []decodedRecord {
	t.Helper()
	var out []decodedRecord
	r := b[record.HeaderSize:]
	bytesField := func(x []byte) ([]byte, []byte) {
		l, n := binary.Varint(x)
		x = x[n:]
		if l < 0 {
			return nil, x
		}
		return x[:l], x[l:]
	}
	for len(r) > 0 {
		l, n := binary.Varint(r)
		if n <= 0 || int(l) > len(r)-n {
			t.Fatalf("record %d framing", len(out))
		}
		rec := r[n+1 : n+int(l)] // skip attributes
		r = r[n+int(l):]
		var d decodedRecord
		var k int
		d.tsDelta, k = binary.Varint(rec)
		rec = rec[k:]
		d.delta, k = binary.Varint(rec)
		rec = rec[k:]
		d.key, rec = bytesField(rec)
		d.value, rec = bytesField(rec)
		if h, _ := binary.Varint(rec); h != 0 {
			t.Fatalf("record %d: %d headers", len(out), h)
		}
		out = append(out, d)
	}
	return out
}

func TestBuildRoundTrip(t *testing.T) {
	b := testBatch()
	h, err := record.Validate(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := record.Header{
		BaseOffset: 0, BatchLength: int32(len(b) - record.LogOverhead), PartitionLeaderEpoch: -1, Magic: 2,
		CRC: record.Checksum(b), Attributes: 0, LastOffsetDelta: 3, BaseTimestamp: 1_700_000_000_000,
		MaxTimestamp: 1_700_000_000_030, ProducerID: 77, ProducerEpoch: 3, BaseSequence: 40, RecordCount: 4,
	}
	if h != want {
		t.Fatalf("header\n%+v\nwant\n%+v", h, want)
	}
	if h.Size() != int64(len(b)) || h.LastOffset() != 3 || h.NextOffset() != 4 {
		t.Fatalf("size %d last %d next %d", h.Size(), h.LastOffset(), h.NextOffset())
	}
	recs := decodeRecords(t, b)
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range testRecords() {
		d := recs[i]
		if d.delta != int64(i) || d.tsDelta != r.TimestampDelta || !bytes.Equal(d.key, r.Key) || !bytes.Equal(d.value, r.Value) ||
			(d.key == nil) != (r.Key == nil) || (d.value == nil) != (r.Value == nil) {
			t.Fatalf("record %d: %+v, built from %+v", i, d, r)
		}
	}
	// Offsets and epoch are assigned in place, outside the CRC.
	record.SetBaseOffset(b, 1234)
	record.SetPartitionLeaderEpoch(b, 9)
	h, err = record.Validate(b, 0)
	if err != nil || h.BaseOffset != 1234 || h.PartitionLeaderEpoch != 9 || h.LastOffset() != 1237 {
		t.Fatalf("after assignment: %+v, %v", h, err)
	}
	if hs, err := record.CheckStored(b); err != nil || hs != h {
		t.Fatalf("CheckStored: %+v, %v", hs, err)
	}
	// BaseTimestamp 0 means now.
	before := time.Now().UnixMilli()
	h, _ = record.ParseHeader(record.Build(nil, record.BuildOptions{ProducerID: -1}, testRecords()[:1]))
	if h.BaseTimestamp < before || h.BaseTimestamp > time.Now().UnixMilli() {
		t.Fatalf("base timestamp %d is not now", h.BaseTimestamp)
	}
	// Build appends to dst.
	two := record.Build(record.Build(nil, record.BuildOptions{BaseTimestamp: 1}, testRecords()), record.BuildOptions{BaseOffset: 4, BaseTimestamp: 1}, testRecords())
	h1, err := record.CheckStored(two)
	if err != nil {
		t.Fatal(err)
	}
	if h2, err := record.Validate(two[h1.Size():], 0); err != nil || h2.BaseOffset != 4 {
		t.Fatalf("second batch: %+v, %v", h2, err)
	}
}

func TestHeaderAttributes(t *testing.T) {
	for _, c := range []struct {
		attrs                         int16
		codec                         int
		transactional, control, logAT bool
	}{
		{0, 0, false, false, false},
		{0x04, 4, false, false, false},
		{0x08, 0, false, false, true},
		{0x10 | 0x01, 1, true, false, false},
		{0x20 | 0x10, 0, true, true, false},
	} {
		h := record.Header{Attributes: c.attrs}
		if h.Compression() != c.codec || h.IsTransactional() != c.transactional || h.IsControl() != c.control || h.LogAppendTime() != c.logAT {
			t.Errorf("attributes %#x: codec %d txn %v control %v logAppendTime %v", c.attrs, h.Compression(), h.IsTransactional(), h.IsControl(), h.LogAppendTime())
		}
	}
}

// TestValidateRefusals: each refusal, with the Kafka error the broker answers with.
func TestValidateRefusals(t *testing.T) {
	be := binary.BigEndian
	edit := func(f func(b []byte) []byte) []byte { return f(testBatch()) }
	for _, c := range []struct {
		name     string
		batch    []byte
		maxBytes int
		want     *kerr.Error
	}{
		{"empty", nil, 0, kerr.CorruptMessage},
		{"truncated header", testBatch()[:record.HeaderSize-1], 0, kerr.CorruptMessage},
		{"header only", testBatch()[:record.HeaderSize], 0, kerr.CorruptMessage}, // batchLength disagrees
		{"torn records", testBatch()[:len(testBatch())-1], 0, kerr.CorruptMessage},
		{"bad crc", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), 0, kerr.CorruptMessage},
		{"crc field", edit(func(b []byte) []byte { b[record.CRCOffset] ^= 0x80; return b }), 0, kerr.CorruptMessage},
		{"magic 1", edit(func(b []byte) []byte { b[record.MagicOffset] = 1; return b }), 0, kerr.UnsupportedForMessageFormat},
		{"magic 0", edit(func(b []byte) []byte { b[record.MagicOffset] = 0; return b }), 0, kerr.UnsupportedForMessageFormat},
		{"magic 3", edit(func(b []byte) []byte { b[record.MagicOffset] = 3; return b }), 0, kerr.UnsupportedForMessageFormat},
		{"length too large", edit(func(b []byte) []byte {
			be.PutUint32(b[record.BatchLengthOffset:], uint32(len(b)-record.LogOverhead+1))
			return b
		}), 0, kerr.CorruptMessage},
		{"length too small", edit(func(b []byte) []byte {
			be.PutUint32(b[record.BatchLengthOffset:], uint32(len(b)-record.LogOverhead-1))
			return b
		}), 0, kerr.CorruptMessage},
		{"negative length", edit(func(b []byte) []byte { be.PutUint32(b[record.BatchLengthOffset:], 0xffffffff); return b }), 0, kerr.CorruptMessage},
		{"two batches", append(testBatch(), testBatch()...), 0, kerr.CorruptMessage},
		{"trailing byte", append(testBatch(), 0), 0, kerr.CorruptMessage},
		{"count above records", edit(func(b []byte) []byte {
			be.PutUint32(b[record.RecordCountOffset:], 5)
			be.PutUint32(b[record.LastOffsetDeltaOffset:], 4)
			return reCRC(b)
		}), 0, kerr.InvalidRecord},
		{"count below records", edit(func(b []byte) []byte {
			be.PutUint32(b[record.RecordCountOffset:], 3)
			be.PutUint32(b[record.LastOffsetDeltaOffset:], 2)
			return reCRC(b)
		}), 0, kerr.InvalidRecord},
		{"count zero", edit(func(b []byte) []byte {
			be.PutUint32(b[record.RecordCountOffset:], 0)
			be.PutUint32(b[record.LastOffsetDeltaOffset:], 0xffffffff)
			return reCRC(b)
		}), 0, kerr.InvalidRecord},
		{"count negative", edit(func(b []byte) []byte { be.PutUint32(b[record.RecordCountOffset:], 0xfffffff0); return reCRC(b) }), 0, kerr.InvalidRecord},
		{"lastOffsetDelta mismatch", edit(func(b []byte) []byte { be.PutUint32(b[record.LastOffsetDeltaOffset:], 7); return reCRC(b) }), 0, kerr.InvalidRecord},
		{"lastOffsetDelta negative", edit(func(b []byte) []byte { be.PutUint32(b[record.LastOffsetDeltaOffset:], 0xffffffff); return reCRC(b) }), 0, kerr.InvalidRecord},
		{"record length past the end", edit(func(b []byte) []byte { b[record.HeaderSize] = 0x7e; return reCRC(b) }), 0, kerr.CorruptMessage},
		{"negative record length", edit(func(b []byte) []byte { b[record.HeaderSize] = 0x01; return reCRC(b) }), 0, kerr.CorruptMessage},
		{"unknown codec", edit(func(b []byte) []byte { be.PutUint16(b[record.AttributesOffset:], 5); return reCRC(b) }), 0, kerr.CorruptMessage},
		{"too large", testBatch(), len(testBatch()) - 1, kerr.MessageTooLarge},
		{"too large before magic", edit(func(b []byte) []byte { b[record.MagicOffset] = 1; return b }), 70, kerr.MessageTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := append([]byte(nil), c.batch...)
			_, err := record.Validate(c.batch, c.maxBytes)
			if !errors.Is(err, c.want) {
				t.Fatalf("Validate: %v, want %s", err, c.want.Message)
			}
			for _, other := range []*kerr.Error{kerr.CorruptMessage, kerr.InvalidRecord, kerr.MessageTooLarge, kerr.UnsupportedForMessageFormat} {
				if other != c.want && errors.Is(err, other) {
					t.Fatalf("Validate: %v is also %s", err, other.Message)
				}
			}
			if !bytes.Equal(in, c.batch) {
				t.Fatal("Validate modified its input")
			}
		})
	}
	// Accepted: exactly at the limit. Refused: records marked zstd that are not zstd.
	if _, err := record.Validate(testBatch(), len(testBatch())); err != nil {
		t.Fatalf("batch at max.message.bytes: %v", err)
	}
	compressed := edit(func(b []byte) []byte { be.PutUint16(b[record.AttributesOffset:], 4); return reCRC(b) })
	if _, err := record.Validate(compressed, 0); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("zstd batch holding plain records: %v", err)
	}
}

// TestCheckStored: the recovery check takes a batch followed by anything and refuses what cannot
// be a stored batch.
func TestCheckStored(t *testing.T) {
	be := binary.BigEndian
	b := testBatch()
	h, err := record.CheckStored(append(append([]byte(nil), b...), 0xde, 0xad))
	if err != nil || h.Size() != int64(len(b)) {
		t.Fatalf("batch with trailing bytes: %+v, %v", h, err)
	}
	for _, c := range []struct {
		name  string
		batch []byte
	}{
		{"short", b[:record.HeaderSize-1]},
		{"torn", b[:len(b)-1]},
		{"bad crc", func() []byte { x := testBatch(); x[len(x)-3] ^= 4; return x }()},
		{"magic", func() []byte { x := testBatch(); x[record.MagicOffset] = 1; return x }()},
		{"length below a header", func() []byte { x := testBatch(); be.PutUint32(x[record.BatchLengthOffset:], 10); return x }()},
		{"negative lastOffsetDelta", func() []byte {
			x := testBatch()
			be.PutUint32(x[record.LastOffsetDeltaOffset:], 0xfffffffe)
			return reCRC(x)
		}()},
	} {
		if _, err := record.CheckStored(c.batch); !errors.Is(err, kerr.CorruptMessage) {
			t.Errorf("%s: %v, want CORRUPT_MESSAGE", c.name, err)
		}
	}
}

// FuzzValidate: Validate never panics and never modifies its input; what it accepts, recovery's
// CheckStored accepts too with the same header, and the header describes exactly the bytes.
func FuzzValidate(f *testing.F) {
	f.Add(testBatch(), 0)
	f.Add(testBatch()[:70], 0)
	f.Add(record.Build(nil, record.BuildOptions{BaseTimestamp: 5}, []record.Record{{Value: []byte("x")}}), 100)
	c := testBatch()
	binary.BigEndian.PutUint16(c[record.AttributesOffset:], 2)
	f.Add(reCRC(c), 0)
	f.Add(make([]byte, record.HeaderSize), 0)
	for codec := 1; codec <= 4; codec++ { // compressed seeds: honest, and claiming MaxInt32 records
		plain := testBatch()
		payload, err := record.Compress(codec, plain[record.HeaderSize:])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(record.WithRecords(plain, codec, payload, 4, 3), 0)
		f.Add(record.WithRecords(plain, codec, payload, 1<<31-1, 1<<31-2), 0)
	}
	f.Fuzz(func(t *testing.T, b []byte, maxBytes int) {
		in := append([]byte(nil), b...)
		h, err := record.Validate(b, maxBytes)
		if !bytes.Equal(in, b) {
			t.Fatal("Validate modified its input")
		}
		if err != nil {
			return
		}
		if h.Size() != int64(len(b)) || h.Magic != record.CurrentMagic || h.RecordCount != h.LastOffsetDelta+1 || h.RecordCount <= 0 {
			t.Fatalf("accepted header %+v for %d bytes", h, len(b))
		}
		if maxBytes > 0 && len(b) > maxBytes {
			t.Fatalf("accepted %d bytes over max.message.bytes %d", len(b), maxBytes)
		}
		hs, err := record.CheckStored(b)
		if err != nil {
			t.Fatalf("Validate accepted, CheckStored refused: %v", err)
		}
		if hs != h {
			t.Fatalf("headers differ: Validate %+v, CheckStored %+v", h, hs)
		}
	})
}
