package record_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/record"
)

// hrec is a record with headers, for batches Build cannot make.
type hrec struct {
	key, value []byte // nil = null
	headers    [][2][]byte
	tsDelta    int64
}

// buildHeaders returns an uncompressed batch of recs (with headers) under o, with attrs.
func buildHeaders(o record.BuildOptions, recs []hrec) []byte {
	var payload []byte
	for i, r := range recs {
		var body []byte
		body = append(body, 0)
		body = binary.AppendVarint(body, r.tsDelta)
		body = binary.AppendVarint(body, int64(i))
		for _, f := range [][]byte{r.key, r.value} {
			if f == nil {
				body = binary.AppendVarint(body, -1)
			} else {
				body = binary.AppendVarint(body, int64(len(f)))
				body = append(body, f...)
			}
		}
		body = binary.AppendVarint(body, int64(len(r.headers)))
		for _, h := range r.headers {
			body = binary.AppendVarint(body, int64(len(h[0])))
			body = append(body, h[0]...)
			if h[1] == nil {
				body = binary.AppendVarint(body, -1)
			} else {
				body = binary.AppendVarint(body, int64(len(h[1])))
				body = append(body, h[1]...)
			}
		}
		payload = binary.AppendVarint(payload, int64(len(body)))
		payload = append(payload, body...)
	}
	hdr := record.Build(nil, o, []record.Record{{}})
	return record.WithRecords(hdr, 0, payload, int32(len(recs)), int32(len(recs)-1))
}

func headerRecords(n int) []hrec {
	var recs []hrec
	for i := range n {
		r := hrec{tsDelta: int64(i * 3), value: bytes.Repeat([]byte(fmt.Sprintf("value-%d ", i)), 1+i%50)}
		if i%7 != 3 {
			r.key = []byte(fmt.Sprintf("key-%d", i%13))
		}
		if i%5 == 0 {
			r.value = nil
		}
		if i%3 == 0 {
			r.headers = [][2][]byte{{[]byte("h1"), []byte("v")}, {[]byte("h2"), nil}}
		}
		recs = append(recs, r)
	}
	return recs
}

// compressed returns the uncompressed batch plain with its records compressed by codec (5 =
// snappy in xerial framing), header fields (and attributes other than the codec) unchanged.
func compressed(t testing.TB, plain []byte, codec int) []byte {
	t.Helper()
	h, err := record.ParseHeader(plain)
	if err != nil {
		t.Fatal(err)
	}
	payload := plain[record.HeaderSize:]
	c := codec
	if codec == 5 {
		payload, c = xerial(payload, 1000), 2
	} else if codec != 0 {
		if payload, err = record.Compress(codec, payload); err != nil {
			t.Fatal(err)
		}
	}
	return record.WithRecords(plain, c, payload, h.RecordCount, h.LastOffsetDelta)
}

// encodedRecords reads every record of b (Encoded bytes), checking the header's count.
func encodedRecords(t testing.TB, b []byte) [][]byte {
	t.Helper()
	rd := record.GetReader()
	defer rd.Release()
	if err := rd.Reset(b, 0); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		r, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]byte(nil), r.Encoded...))
	}
	if int32(len(out)) != rd.Header().RecordCount {
		t.Fatalf("%d records, header says %d", len(out), rd.Header().RecordCount)
	}
	return out
}

// TestRecompressCodecPairs: every source codec (snappy raw and xerial) into every other target
// codec: the result passes validation (CRC, length, records), holds the same record bytes,
// carries the target codec and every other header field unchanged (producer id, epoch,
// sequence, transactional and timestamp-type bits, timestamps), and franz-go's decompressor
// reads its records back.
func TestRecompressCodecPairs(t *testing.T) {
	o := record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: 4242, ProducerEpoch: 7, BaseSequence: 99,
		Attributes: 0x10} // transactional
	plain := buildHeaders(o, headerRecords(300))
	want := encodedRecords(t, plain)
	for src := 0; src <= 5; src++ {
		for dst := 0; dst <= 4; dst++ {
			srcCodec := src
			if src == 5 {
				srcCodec = 2
			}
			if srcCodec == dst {
				continue
			}
			t.Run(codecNames[src]+"-to-"+codecNames[dst], func(t *testing.T) {
				in := compressed(t, plain, src)
				keep := append([]byte(nil), in...)
				c := record.Compression{Codec: dst, Level: defaultLevel(dst)}
				if !c.Rewrites(in) {
					t.Fatal("Rewrites is false")
				}
				rc := record.GetRecompressor()
				defer rc.Release()
				out, err := rc.Recompress(in, c, 1<<20, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(in, keep) {
					t.Fatal("input modified")
				}
				if c.Rewrites(out) {
					t.Fatal("result still needs rewriting")
				}
				if _, err := record.CheckStored(out); err != nil {
					t.Fatalf("CheckStored: %v", err)
				}
				hin, _ := record.ParseHeader(in)
				hout, err := record.Validate(out, 0)
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if hout.Compression() != dst {
					t.Fatalf("codec %d, want %d", hout.Compression(), dst)
				}
				hin.Attributes = hin.Attributes&^7 | int16(dst)
				hin.BatchLength, hin.CRC = hout.BatchLength, hout.CRC
				if hin != hout {
					t.Fatalf("header\n got %+v\nwant %+v", hout, hin)
				}
				if !hout.IsTransactional() {
					t.Fatal("transactional bit lost")
				}
				got := encodedRecords(t, out)
				if len(got) != len(want) {
					t.Fatalf("%d records, want %d", len(got), len(want))
				}
				for i := range got {
					if !bytes.Equal(got[i], want[i]) {
						t.Fatalf("record %d differs", i)
					}
				}
				// An independent decoder (franz-go's) reads the new payload.
				if dst != 0 {
					dec, err := kgo.DefaultDecompressor().Decompress(out[record.HeaderSize:], kgo.CompressionCodecType(dst))
					if err != nil {
						t.Fatalf("franz-go decompress: %v", err)
					}
					if !bytes.Equal(dec, plain[record.HeaderSize:]) {
						t.Fatal("franz-go decompresses different records")
					}
				}
			})
		}
	}
}

func defaultLevel(codec int) int {
	switch codec {
	case record.CodecGzip:
		return record.GzipDefaultLevel
	case record.CodecLZ4:
		return record.LZ4DefaultLevel
	case record.CodecZstd:
		return record.ZstdDefaultLevel
	}
	return 0
}

// TestRecompressLevels: every level of Kafka's range compresses to a valid batch (a sample of
// zstd's), levels outside it are refused.
func TestRecompressLevels(t *testing.T) {
	plain := buildHeaders(record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}, headerRecords(50))
	want := encodedRecords(t, plain)
	levels := map[int][]int{
		record.CodecGzip: {-1, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		record.CodecLZ4:  {1, 2, 8, 9, 10, 12, 16, 17},
		record.CodecZstd: {record.ZstdMinLevel, -5, -1, 0, 1, 2, 3, 5, 6, 9, 10, 19, 22},
	}
	for codec, ls := range levels {
		for _, l := range ls {
			rc := record.GetRecompressor()
			out, err := rc.Recompress(plain, record.Compression{Codec: codec, Level: l}, 1<<20, 0)
			if err != nil {
				t.Fatalf("%s level %d: %v", codecNames[codec], l, err)
			}
			got := encodedRecords(t, out)
			if len(got) != len(want) || !bytes.Equal(got[len(got)-1], want[len(want)-1]) {
				t.Fatalf("%s level %d: records differ", codecNames[codec], l)
			}
			rc.Release()
		}
	}
	bad := map[int][]int{
		record.CodecGzip: {-2, 0, 10},
		record.CodecLZ4:  {0, -1, 18},
		record.CodecZstd: {record.ZstdMinLevel - 1, 23},
	}
	for codec, ls := range bad {
		for _, l := range ls {
			if record.CheckLevel(codec, l) == nil {
				t.Fatalf("%s level %d accepted", codecNames[codec], l)
			}
			rc := record.GetRecompressor()
			if _, err := rc.Recompress(plain, record.Compression{Codec: codec, Level: l}, 1<<20, 0); err == nil {
				t.Fatalf("%s level %d: recompressed", codecNames[codec], l)
			}
			rc.Release()
		}
	}
}

// TestRecompressRewrites: producer never rewrites, a batch in the target codec is kept (whatever
// its level), an uncompressed control batch is never compressed (Kafka), a compressed one is.
func TestRecompressRewrites(t *testing.T) {
	o := record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}
	plain := record.Build(nil, o, testRecords())
	lz := compressed(t, plain, 3)
	if (record.Compression{Codec: record.CodecProducer}).Rewrites(lz) {
		t.Fatal("producer rewrites")
	}
	if (record.Compression{Codec: record.CodecLZ4, Level: 17}).Rewrites(lz) {
		t.Fatal("same codec, other level rewrites")
	}
	if !(record.Compression{Codec: record.CodecZstd}).Rewrites(lz) || !(record.Compression{Codec: record.CodecNone}).Rewrites(lz) {
		t.Fatal("other codec not rewritten")
	}
	if (record.Compression{Codec: record.CodecZstd}).Rewrites(plain[:record.HeaderSize-1]) {
		t.Fatal("short batch rewritten")
	}
	o.Attributes = 0x20 | 0x10 // control, transactional
	ctrl := record.Build(nil, o, testRecords()[:1])
	if (record.Compression{Codec: record.CodecZstd, Level: 3}).Rewrites(ctrl) {
		t.Fatal("uncompressed control batch rewritten")
	}
	zctrl := compressed(t, ctrl, 4)
	c := record.Compression{Codec: record.CodecGzip, Level: -1}
	if !c.Rewrites(zctrl) {
		t.Fatal("compressed control batch not rewritten")
	}
	rc := record.GetRecompressor()
	defer rc.Release()
	out, err := rc.Recompress(zctrl, c, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := record.CheckStored(out)
	if err != nil {
		t.Fatal(err)
	}
	if !h.IsControl() || !h.IsTransactional() || h.Compression() != record.CodecGzip {
		t.Fatalf("attributes %#x", h.Attributes)
	}
}

// TestRecompressBounds: the new batch is bounded by max.message.bytes (MESSAGE_TOO_LARGE, the
// buffer never past the bound), the source's decompression by the limit, and lying or corrupt
// sources are refused with the validator's codes.
func TestRecompressBounds(t *testing.T) {
	o := record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}
	var recs []record.Record
	for range 64 {
		recs = append(recs, record.Record{Value: bytes.Repeat([]byte{'z'}, 16<<10)})
	}
	plain := record.Build(nil, o, recs) // ~1 MiB of zeros-like values
	zs := compressed(t, plain, 4)       // a few KiB
	rc := new(record.Recompressor)      // not pooled: its buffer starts empty
	defer rc.Release()
	const maxBytes = 256 << 10
	_, err := rc.Recompress(zs, record.Compression{Codec: record.CodecNone}, maxBytes, 0)
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("decompressed past max.message.bytes: %v", err)
	}
	if out := rc.Buffer(); cap(out) > maxBytes {
		t.Fatalf("buffer grew to %d past the bound %d", cap(out), maxBytes)
	}
	// The same batch fits once compressed with another codec.
	if _, err := rc.Recompress(zs, record.Compression{Codec: record.CodecGzip, Level: -1}, maxBytes, 0); err != nil {
		t.Fatal(err)
	}
	// Decompression bound: a limit below the records' size refuses (MESSAGE_TOO_LARGE).
	if _, err := rc.Recompress(zs, record.Compression{Codec: record.CodecLZ4, Level: 9}, maxBytes, 64<<10); !record.IsDecompressedTooLarge(err) {
		t.Fatalf("decompression past the limit: %v", err)
	}
	// The source itself larger than max.message.bytes.
	if _, err := rc.Recompress(plain, record.Compression{Codec: record.CodecZstd, Level: 3}, maxBytes, 0); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("oversized source: %v", err)
	}
	small := record.Build(nil, o, testRecords())
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"crc":       {func() []byte { b := append([]byte(nil), small...); b[len(b)-1] ^= 1; return b }(), kerr.CorruptMessage},
		"truncated": {small[:len(small)-1], kerr.CorruptMessage},
		"magic":     {func() []byte { b := append([]byte(nil), small...); b[record.MagicOffset] = 1; return b }(), kerr.UnsupportedForMessageFormat},
		"count":     {record.WithRecords(small, 0, small[record.HeaderSize:], 5, 4), kerr.InvalidRecord},
		"codec 7":   {record.WithRecords(small, 7, small[record.HeaderSize:], 4, 3), kerr.CorruptMessage},
		"bad zstd":  {record.WithRecords(small, 4, []byte("not zstd at all"), 4, 3), kerr.CorruptMessage},
		"cut lz4": {func() []byte {
			z := compressed(t, small, 3)
			return record.WithRecords(z, 3, z[record.HeaderSize:len(z)-8], 4, 3)
		}(), kerr.CorruptMessage},
	} {
		for _, dst := range []int{0, 2, 4} {
			_, err := rc.Recompress(tc.b, record.Compression{Codec: dst, Level: defaultLevel(dst)}, 1<<20, 0)
			if !errors.Is(err, tc.want) {
				t.Errorf("%s -> %s: %v, want %v", name, codecNames[dst], err, tc.want)
			}
		}
	}
}

// TestRecompressXerialBlocks: a snappy result larger than one xerial block (32 KiB of records)
// splits into several, each decoded by the reader and by franz-go.
func TestRecompressXerialBlocks(t *testing.T) {
	plain := buildHeaders(record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}, headerRecords(2000))
	if len(plain) < 3*32<<10 {
		t.Fatalf("batch of %d bytes: too small for the test", len(plain))
	}
	rc := record.GetRecompressor()
	defer rc.Release()
	out, err := rc.Recompress(compressed(t, plain, 4), record.Compression{Codec: record.CodecSnappy}, 4<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out[record.HeaderSize:], []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}) {
		t.Fatal("no xerial header")
	}
	got, want := encodedRecords(t, out), encodedRecords(t, plain)
	if len(got) != len(want) || !bytes.Equal(got[1999], want[1999]) {
		t.Fatal("records differ")
	}
	dec, err := kgo.DefaultDecompressor().Decompress(out[record.HeaderSize:], kgo.CodecSnappy)
	if err != nil || !bytes.Equal(dec, plain[record.HeaderSize:]) {
		t.Fatalf("franz-go: %v", err)
	}
}

// TestRecompressAllocs: a warm recompressor allocates a bounded number of times per batch,
// whatever the number of records (no per-record allocation).
func TestRecompressAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	for _, pair := range [][2]int{{0, 4}, {3, 4}, {0, 1}, {4, 0}, {0, 3}, {0, 2}, {4, 2}} {
		var per [2]float64
		for k, n := range []int{100, 1000} {
			plain := buildHeaders(record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}, headerRecords(n))
			in := compressed(t, plain, pair[0])
			c := record.Compression{Codec: pair[1], Level: defaultLevel(pair[1])}
			per[k] = testing.AllocsPerRun(50, func() {
				rc := record.GetRecompressor()
				if _, err := rc.Recompress(in, c, 4<<20, 0); err != nil {
					t.Fatal(err)
				}
				rc.Release()
			})
		}
		if per[1] > per[0]+2 || per[1] > 20 {
			t.Errorf("%s -> %s: %.1f allocations for 100 records, %.1f for 1000", codecNames[pair[0]], codecNames[pair[1]], per[0], per[1])
		}
	}
}

// randomBatch is 100 records of 1 KiB random values (incompressible) with codec.
func randomBatch(t testing.TB, codec int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []record.Record
	for i := range 100 {
		v := make([]byte, 1024)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		recs = append(recs, record.Record{Key: []byte("key"), Value: v, TimestampDelta: int64(i)})
	}
	return batchWith(t, codec, record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: 1, BaseSequence: 0}, recs, 100, 99)
}

// BenchmarkRecompress: the produce-path cost of recompression, 100 records of 1 KiB from the
// client's codec into the topic's: compressible values (the validation benchmark's batch) and
// random ones. MB/s counts the uncompressed batch.
func BenchmarkRecompress(b *testing.B) {
	for _, pair := range [][2]int{{0, 4}, {3, 4}, {4, 3}, {0, 3}, {0, 1}, {0, 2}, {4, 0}} {
		for _, kind := range []string{"text", "random"} {
			mk := benchBatch
			if kind == "random" {
				mk = randomBatch
			}
			batch := mk(b, pair[0])
			c := record.Compression{Codec: pair[1], Level: defaultLevel(pair[1])}
			b.Run(kind+"/"+codecNames[pair[0]]+"-to-"+codecNames[pair[1]], func(b *testing.B) {
				b.SetBytes(int64(len(mk(b, 0))))
				b.ReportAllocs()
				for b.Loop() {
					rc := record.GetRecompressor()
					if _, err := rc.Recompress(batch, c, 4<<20, 0); err != nil {
						b.Fatal(err)
					}
					rc.Release()
				}
			})
		}
	}
}

// FuzzRecompress: recompression never panics, never modifies its input, and never returns a
// batch past its bound; what it returns validates and holds the records the source holds.
func FuzzRecompress(f *testing.F) {
	o := record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}
	for codec := 0; codec <= 5; codec++ {
		f.Add(batchWith(f, codec, o, testRecords(), 4, 3), uint8(codec))
		f.Add(batchWith(f, codec, o, testRecords(), 4, 3), uint8(0x80|(codec+1)))
	}
	const limit, maxBytes = 1 << 16, 1 << 15
	f.Fuzz(func(t *testing.T, b []byte, target uint8) {
		if target&0x80 != 0 && len(b) >= record.HeaderSize {
			// Make batchLength and the CRC agree with the bytes, so that mutations reach the
			// records instead of stopping at the header's checks.
			binary.BigEndian.PutUint32(b[record.BatchLengthOffset:], uint32(len(b)-record.LogOverhead))
			record.SetChecksum(b)
		}
		c := record.Compression{Codec: int(target % 5)}
		c.Level = defaultLevel(c.Codec)
		in := append([]byte(nil), b...)
		rc := new(record.Recompressor) // not pooled: its buffer starts empty
		defer rc.Release()
		out, err := rc.Recompress(b, c, maxBytes, limit)
		if !bytes.Equal(in, b) {
			t.Fatal("input modified")
		}
		if cap(rc.Buffer()) > max(maxBytes, len(b)) {
			t.Fatalf("buffer of %d bytes past the bound", cap(rc.Buffer()))
		}
		if err != nil {
			return
		}
		if len(out) > maxBytes {
			t.Fatalf("result of %d bytes past the bound", len(out))
		}
		h, err := record.CheckStored(out)
		if err != nil {
			t.Fatalf("result corrupt: %v", err)
		}
		// The header and records are the source's: what validation accepts in one, it accepts
		// in the other.
		if _, err := record.Validate(b, maxBytes); err == nil {
			if _, err := record.Validate(out, limit); err != nil {
				t.Fatalf("source valid, result invalid: %v", err)
			}
		}
		if h.Compression() != c.Codec {
			t.Fatalf("codec %d", h.Compression())
		}
		got := readAll(out, limit)
		want := readAll(b, limit)
		if len(got) != len(want) {
			t.Fatalf("%d records, source %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("record %d differs", i)
			}
		}
	})
}

func readAll(b []byte, limit int) [][]byte {
	rd := record.GetReader()
	defer rd.Release()
	if rd.Reset(b, limit) != nil {
		return nil
	}
	var out [][]byte
	for {
		r, err := rd.Next()
		if err != nil {
			return out
		}
		out = append(out, append([]byte(nil), r.Encoded...))
	}
}

// TestKafkaDecodesRecompressed runs Apache Kafka's own DumpLogSegments (--deep-iteration, which
// decompresses every batch with Kafka's codecs) over a segment of batches recompressed into each
// codec, at default and non-default levels. It needs the Kafka jars: WEIR_KAFKA_LIBS=<folder of
// jars> (scripts/kafka-libs.sh prints it).
func TestKafkaDecodesRecompressed(t *testing.T) {
	libs := os.Getenv("WEIR_KAFKA_LIBS")
	if libs == "" {
		t.Skip("WEIR_KAFKA_LIBS not set: Kafka's DumpLogSegments is not available")
	}
	plain := buildHeaders(record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: 5, ProducerEpoch: 1, BaseSequence: 0}, headerRecords(300))
	targets := []record.Compression{
		{Codec: record.CodecNone}, {Codec: record.CodecSnappy},
		{Codec: record.CodecGzip, Level: -1}, {Codec: record.CodecGzip, Level: 1}, {Codec: record.CodecGzip, Level: 9},
		{Codec: record.CodecLZ4, Level: 9}, {Codec: record.CodecLZ4, Level: 1}, {Codec: record.CodecLZ4, Level: 17},
		{Codec: record.CodecZstd, Level: 3}, {Codec: record.CodecZstd, Level: -5}, {Codec: record.CodecZstd, Level: 22},
	}
	var seg []byte
	next := int64(0)
	for i, c := range targets {
		src := compressed(t, plain, []int{3, 4, 0, 5}[i%4])
		if !c.Rewrites(src) { // already in the target codec: take another source
			src = compressed(t, plain, (c.Codec+1)%5)
		}
		rc := record.GetRecompressor()
		out, err := rc.Recompress(src, c, 4<<20, 0)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		out = append([]byte(nil), out...)
		rc.Release()
		record.SetBaseOffset(out, next)
		record.SetPartitionLeaderEpoch(out, 0)
		next += 300
		seg = append(seg, out...)
	}
	dir := filepath.Join(t.TempDir(), "t-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "00000000000000000000.log")
	if err := os.WriteFile(file, seg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("java", "-cp", libs+"/*", "org.apache.kafka.tools.DumpLogSegments", "--deep-iteration", "--print-data-log", "--files", file)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("DumpLogSegments: %v\n%s", err, outb)
	}
	out := string(outb)
	if strings.Contains(out, "isvalid: false") || strings.Count(out, "isvalid: true") != len(targets) {
		t.Fatalf("DumpLogSegments did not find %d valid batches:\n%.3000s", len(targets), out)
	}
	for _, bad := range []string{"Exception", "corrupt", "Error"} {
		if strings.Contains(out, bad) {
			t.Fatalf("DumpLogSegments reports %q:\n%.3000s", bad, out)
		}
	}
	if n := strings.Count(out, "| offset: "); n != 300*len(targets) {
		t.Fatalf("DumpLogSegments read %d records, want %d", n, 300*len(targets))
	}
	for _, name := range []string{"none", "snappy", "gzip", "lz4", "zstd"} {
		if !strings.Contains(out, "compresscodec: "+name) {
			t.Fatalf("no %s batch in DumpLogSegments' output", name)
		}
	}
	if want := "payload: " + strings.Repeat("value-299 ", 50); !strings.Contains(out, want) {
		t.Fatal("the last record's value is not in DumpLogSegments' output")
	}
}
