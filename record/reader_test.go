package record_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
)

var codecNames = map[int]string{0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd", 5: "snappy-xerial"}

// xerial frames a raw payload the way Kafka's Java clients write snappy: the 16-byte header,
// then blocks of int32 length + raw snappy.
func xerial(src []byte, block int) []byte {
	out := []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for len(src) > 0 {
		n := min(block, len(src))
		enc := s2.EncodeSnappy(nil, src[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(enc)))
		out = append(out, enc...)
		src = src[n:]
	}
	return out
}

// batchWith builds a batch of recs whose records are compressed with codec (5 = snappy in
// xerial framing) and whose header says count / lastOffsetDelta.
func batchWith(t testing.TB, codec int, o record.BuildOptions, recs []record.Record, count, lastDelta int32) []byte {
	t.Helper()
	plain := record.Build(nil, o, recs)
	payload := plain[record.HeaderSize:]
	c := codec
	if codec == 5 {
		payload, c = xerial(payload, 100), 2
	} else if codec != 0 {
		var err error
		if payload, err = record.Compress(codec, payload); err != nil {
			t.Fatal(err)
		}
	}
	return record.WithRecords(plain, c, payload, count, lastDelta)
}

func TestReaderCodecs(t *testing.T) {
	recs := testRecords()
	for codec := 0; codec <= 5; codec++ {
		t.Run(codecNames[codec], func(t *testing.T) {
			b := batchWith(t, codec, record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}, recs, 4, 3)
			h, err := record.Validate(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			if h.RecordCount != 4 {
				t.Fatalf("count %d", h.RecordCount)
			}
			rd := record.GetReader()
			defer rd.Release()
			if err := rd.Reset(b, 0); err != nil {
				t.Fatal(err)
			}
			for i, want := range recs {
				r, err := rd.Next()
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				if r.OffsetDelta != int64(i) || r.TimestampDelta != want.TimestampDelta || !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) ||
					r.HasKey != (want.Key != nil) || r.HasValue != (want.Value != nil) {
					t.Fatalf("record %d: %+v, want %+v", i, r, want)
				}
			}
			if _, err := rd.Next(); err != io.EOF {
				t.Fatalf("after the last record: %v", err)
			}
		})
	}
}

// TestValidateLyingBatches: a batch whose header disagrees with its records is refused,
// compressed or not, with the Kafka error of each case.
func TestValidateLyingBatches(t *testing.T) {
	o := record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}
	recs := testRecords()
	for codec := 0; codec <= 5; codec++ {
		for _, c := range []struct {
			name             string
			count, lastDelta int32
			want             *kerr.Error
		}{
			{"MaxInt32 records", math.MaxInt32, math.MaxInt32 - 1, kerr.InvalidRecord},
			{"count too large", 5, 4, kerr.InvalidRecord},
			{"count too small", 3, 2, kerr.InvalidRecord},
			{"count one", 1, 0, kerr.InvalidRecord},
			{"lastOffsetDelta mismatch", 4, 9, kerr.InvalidRecord},
			{"count zero", 0, -1, kerr.InvalidRecord},
		} {
			t.Run(codecNames[codec]+"/"+c.name, func(t *testing.T) {
				b := batchWith(t, codec, o, recs, c.count, c.lastDelta)
				if _, err := record.Validate(b, 0); !errors.Is(err, c.want) {
					t.Fatalf("Validate: %v, want %s", err, c.want.Message)
				}
				p := record.Policy{}
				if _, err := record.ValidateProduce(b, &p); !errors.Is(err, c.want) {
					t.Fatalf("ValidateProduce: %v, want %s", err, c.want.Message)
				}
			})
		}
		t.Run(codecNames[codec]+"/offset deltas out of order", func(t *testing.T) {
			plain := record.Build(nil, o, recs)
			// Swap the offset deltas of records 1 and 2 (each is one varint byte: 2 and 4).
			p := plain[record.HeaderSize:]
			var seen int
			for pos := 0; pos < len(p); {
				l, k := binary.Varint(p[pos:])
				body := p[pos+k : pos+k+int(l)]
				_, tk := binary.Varint(body[1:])
				off := 1 + tk
				switch seen {
				case 1:
					body[off] = 4
				case 2:
					body[off] = 2
				}
				seen++
				pos += k + int(l)
			}
			payload := p
			cc := codec
			if codec == 5 {
				payload, cc = xerial(p, 64), 2
			} else if codec != 0 {
				payload, _ = record.Compress(codec, p)
			}
			b := record.WithRecords(plain, cc, payload, 4, 3)
			_, err := record.Validate(b, 0)
			var re *record.RecordError
			if !errors.Is(err, kerr.InvalidRecord) || !errors.As(err, &re) || re.Index != 1 {
				t.Fatalf("Validate: %v, want INVALID_RECORD naming record 1", err)
			}
		})
	}
}

// TestValidateBomb: records that decompress past the bound are refused (MESSAGE_TOO_LARGE)
// after decompressing no more than the bound.
func TestValidateBomb(t *testing.T) {
	big := make([]byte, 1<<20)
	var recs []record.Record
	for range 40 { // 40 MiB of zeros in records of 1 MiB
		recs = append(recs, record.Record{Key: []byte("k"), Value: big})
	}
	one := []record.Record{{Value: make([]byte, 40<<20)}} // one record past the bound
	for _, codec := range []int{1, 2, 3, 4, 5} {
		for name, rs := range map[string][]record.Record{"many": recs, "one": one} {
			t.Run(codecNames[codec]+"/"+name, func(t *testing.T) {
				b := batchWith(t, codec, record.BuildOptions{BaseTimestamp: 1, ProducerID: -1, BaseSequence: -1}, rs, int32(len(rs)), int32(len(rs)-1))
				t.Logf("%d compressed bytes", len(b))
				_, err := record.Validate(b, 0) // bound: 16 MiB
				if !errors.Is(err, kerr.MessageTooLarge) || !record.IsDecompressedTooLarge(err) {
					t.Fatalf("Validate: %v, want MESSAGE_TOO_LARGE", err)
				}
				rd := record.GetReader()
				defer rd.Release()
				if err := rd.Reset(b, 4<<20); err != nil {
					t.Fatal(err)
				}
				for {
					if _, err := rd.Next(); err != nil {
						if !record.IsDecompressedTooLarge(err) {
							t.Fatalf("Next: %v", err)
						}
						break
					}
				}
				if d := rd.Decompressed(); d > 4<<20+1 {
					t.Fatalf("decompressed %d bytes past a bound of %d", d, 4<<20)
				}
			})
		}
	}
}

func TestValidateProduceTimestamps(t *testing.T) {
	const now = 1_800_000_000_000
	policy := record.Policy{Now: now, CheckTimestamps: true, BeforeMaxMs: math.MaxInt64, AfterMaxMs: 3_600_000}
	build := func(codec int, base int64, deltas ...int64) []byte {
		var rs []record.Record
		for _, d := range deltas {
			rs = append(rs, record.Record{Value: []byte("v"), TimestampDelta: d})
		}
		return batchWith(t, codec, record.BuildOptions{BaseTimestamp: base, ProducerID: -1, BaseSequence: -1}, rs, int32(len(rs)), int32(len(rs)-1))
	}
	year9999 := int64(253402300799000)
	for _, codec := range []int{0, 4} {
		p := policy
		if _, err := record.ValidateProduce(build(codec, now, 0, 10), &p); err != nil {
			t.Fatalf("%s: in range: %v", codecNames[codec], err)
		}
		_, err := record.ValidateProduce(build(codec, now, 0, year9999-now), &p)
		var re *record.RecordError
		if !errors.Is(err, kerr.InvalidTimestamp) || !errors.As(err, &re) || re.Index != 1 {
			t.Fatalf("%s: year 9999: %v, want INVALID_TIMESTAMP on record 1", codecNames[codec], err)
		}
		if _, err := record.ValidateProduce(build(codec, now+3_600_000), &p); err != nil && false {
			t.Fatal(err)
		}
		if _, err := record.ValidateProduce(build(codec, now+3_600_000, 0), &p); err != nil {
			t.Fatalf("%s: exactly after.max.ms ahead: %v", codecNames[codec], err)
		}
		if _, err := record.ValidateProduce(build(codec, now+3_600_001, 0), &p); !errors.Is(err, kerr.InvalidTimestamp) {
			t.Fatalf("%s: 1 ms past after.max.ms: %v", codecNames[codec], err)
		}
		// Old records: unbounded by default, refused with before.max.ms.
		if _, err := record.ValidateProduce(build(codec, 1000, 0), &p); err != nil {
			t.Fatalf("%s: old record, unbounded: %v", codecNames[codec], err)
		}
		p.BeforeMaxMs = 86_400_000
		if _, err := record.ValidateProduce(build(codec, now-86_400_001, 0), &p); !errors.Is(err, kerr.InvalidTimestamp) {
			t.Fatalf("%s: old record: %v", codecNames[codec], err)
		}
		// NO_TIMESTAMP records are not checked (Kafka).
		if _, err := record.ValidateProduce(build(codec, -1, 0), &p); err != nil {
			t.Fatalf("%s: no timestamp: %v", codecNames[codec], err)
		}
		// LogAppendTime ignores the bounds and stamps the batch.
		lat := record.Policy{Now: now, LogAppendTime: true, CheckTimestamps: true, AfterMaxMs: 0, BeforeMaxMs: 0}
		b := build(codec, year9999, 0, 5)
		h, err := record.ValidateProduce(b, &lat)
		if err != nil {
			t.Fatalf("%s: LogAppendTime: %v", codecNames[codec], err)
		}
		hs, err := record.CheckStored(b)
		if err != nil || hs != h || !h.LogAppendTime() || h.MaxTimestamp != now || h.BaseTimestamp != year9999 {
			t.Fatalf("%s: stamped header %+v (stored %+v, %v)", codecNames[codec], h, hs, err)
		}
		if off, ts, ok := record.FirstRecordAtOrAfter(b, now, 0); !ok || off != 0 || ts != now {
			t.Fatalf("%s: LogAppendTime lookup: %d %d %v", codecNames[codec], off, ts, ok)
		}
		// A producer may not set LogAppendTime itself under LogAppendTime.
		if _, err := record.ValidateProduce(b, &lat); !errors.Is(err, kerr.InvalidTimestamp) {
			t.Fatalf("%s: producer-set LogAppendTime: %v", codecNames[codec], err)
		}
	}
}

// TestValidateProduceMaxTimestamp: a header maxTimestamp that disagrees with the records is
// corrected in place with a valid CRC; an agreeing one leaves the bytes alone.
func TestValidateProduceMaxTimestamp(t *testing.T) {
	b := testBatch() // max delta 30
	orig := append([]byte(nil), b...)
	p := record.Policy{}
	if _, err := record.ValidateProduce(b, &p); err != nil || !bytes.Equal(b, orig) {
		t.Fatalf("agreeing header changed or refused: %v", err)
	}
	binary.BigEndian.PutUint64(b[record.MaxTimestampOffset:], 5)
	reCRC(b)
	h, err := record.ValidateProduce(b, &p)
	if err != nil || h.MaxTimestamp != 1_700_000_000_030 {
		t.Fatalf("maxTimestamp %d, %v", h.MaxTimestamp, err)
	}
	if !bytes.Equal(b, orig) {
		t.Fatal("corrected batch differs from the original")
	}
}

func TestValidateProduceClientRules(t *testing.T) {
	be := binary.BigEndian
	p := record.Policy{}
	b := testBatch()
	be.PutUint16(b[record.AttributesOffset:], 0x20)
	if _, err := record.ValidateProduce(reCRC(b), &p); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("control batch: %v", err)
	}
	b = testBatch()
	be.PutUint32(b[record.BaseSequenceOffset:], 0xffffffff)
	if _, err := record.ValidateProduce(reCRC(b), &p); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("producer id without sequence: %v", err)
	}
	b = record.Build(nil, record.BuildOptions{ProducerID: -1, BaseSequence: -1}, []record.Record{{Key: []byte("k"), Value: []byte("v")}, {Value: []byte("v")}})
	p.RequireKeys = true
	var re *record.RecordError
	if _, err := record.ValidateProduce(b, &p); !errors.Is(err, kerr.InvalidRecord) || !errors.As(err, &re) || re.Index != 1 {
		t.Fatalf("keyless record on a compacted topic: %v", err)
	}
}

// TestValidateNoAlloc: validating an uncompressed batch allocates nothing, nor does a
// compressed one once the pooled reader is warm (decoders allocate per frame; measured, not 0).
func TestValidateNoAlloc(t *testing.T) {
	b := benchBatch(t, 0)
	p := record.Policy{Now: 1_700_000_000_000, CheckTimestamps: true, BeforeMaxMs: -1, AfterMaxMs: -1}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := record.ValidateProduce(b, &p); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("uncompressed validation: %.1f allocations", allocs)
	}
}

// benchBatch is 100 records of 1 KiB values with codec.
func benchBatch(t testing.TB, codec int) []byte {
	var recs []record.Record
	for i := range 100 {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, 1024)
		copy(v, "value number ")
		recs = append(recs, record.Record{Key: []byte("key"), Value: v, TimestampDelta: int64(i)})
	}
	return batchWith(t, codec, record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: 1, BaseSequence: 0}, recs, 100, 99)
}

func BenchmarkValidate(b *testing.B) {
	for _, codec := range []int{0, 3, 4} {
		batch := benchBatch(b, codec)
		b.Run(codecNames[codec], func(b *testing.B) {
			p := record.Policy{Now: 1_700_000_000_000, CheckTimestamps: true, BeforeMaxMs: -1, AfterMaxMs: -1}
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := record.ValidateProduce(batch, &p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzRecordReader: the reader never panics, never decompresses past its bound, never returns
// more records than the header declares, and whatever Validate accepts reads back in full.
func FuzzRecordReader(f *testing.F) {
	o := record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}
	for codec := 0; codec <= 5; codec++ {
		f.Add(batchWith(f, codec, o, testRecords(), 4, 3))
		f.Add(batchWith(f, codec, o, testRecords(), math.MaxInt32, math.MaxInt32-1))
	}
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		rd := record.GetReader()
		defer rd.Release()
		if err := rd.Reset(b, limit); err != nil {
			return
		}
		n := int32(0)
		for {
			_, err := rd.Next()
			if rd.Decompressed() > limit+1 {
				t.Fatalf("decompressed %d bytes", rd.Decompressed())
			}
			if err != nil {
				break
			}
			n++
		}
		if n > max(rd.Header().RecordCount, 0) {
			t.Fatalf("%d records of %d declared", n, rd.Header().RecordCount)
		}
		if !bytes.Equal(in, b) {
			t.Fatal("reader modified its input")
		}
		p := record.Policy{DecompressLimit: limit}
		if h, err := record.ValidateProduce(b, &p); err == nil {
			if _, err := record.CheckStored(b); err != nil {
				t.Fatalf("accepted then stamped batch fails CheckStored: %v", err)
			}
			if h.RecordCount != h.LastOffsetDelta+1 {
				t.Fatalf("accepted %+v", h)
			}
		}
	})
}

// TestVarint: the fast varint agrees with encoding/binary on every length and on bad input.
func TestVarint(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, 1 << 40, math.MaxInt64, math.MinInt64} {
		b := binary.AppendVarint(nil, v)
		for _, in := range [][]byte{b, append(b, 0x7f), b[:len(b)-1]} {
			gv, gn := record.VarintForTest(in)
			wv, wn := binary.Varint(in)
			if gv != wv || gn != wn {
				t.Fatalf("%x: %d,%d want %d,%d", in, gv, gn, wv, wn)
			}
		}
	}
}
