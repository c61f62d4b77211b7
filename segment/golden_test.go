package segment_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// The golden segment: a deterministic segment (fixed keys, values and timestamps, some going
// backwards; a small index interval so that several entries exist), sealed and closed so its
// indexes are trimmed, compared byte for byte with testdata/golden. The golden files are then
// decoded here independently of the segment, index and record packages (encoding/binary and the
// standard library's CRC32C), so that they are known to be right, not merely stable.
// Regenerate with: go test ./segment -run Golden -update

const (
	goldenBase     = 100
	goldenInterval = 200 // log.index.interval.bytes
	goldenEpoch    = 5   // partition leader epoch stamped into every batch
)

// goldenTimestamps are the batches' base timestamps; batch i has i%4+1 records, record j at
// base + 7j.
var goldenTimestamps = []int64{
	1_700_000_000_000, 1_700_000_001_000, 1_700_000_000_500, 1_700_000_003_000,
	1_700_000_003_000, 1_700_000_002_000, 1_700_000_009_000, 1_700_000_010_000,
	1_700_000_008_000, 1_700_000_020_000, 1_700_000_020_001, 1_700_000_015_000,
}

func goldenSegment(t *testing.T, dir string) {
	t.Helper()
	s, err := segment.Create(vfs.OS, dir, goldenBase, segment.Config{IndexIntervalBytes: goldenInterval, MaxIndexBytes: 1 << 16}, time.UnixMilli(goldenTimestamps[0]))
	if err != nil {
		t.Fatal(err)
	}
	next := int64(goldenBase)
	for i, ts := range goldenTimestamps {
		recs := make([]record.Record, i%4+1)
		for j := range recs {
			var key []byte
			if (i+j)%3 != 0 {
				key = []byte(fmt.Sprintf("key-%d-%d", i, j))
			}
			recs[j] = record.Record{Key: key, Value: bytes.Repeat([]byte{byte('a' + i)}, 10+13*i+j), TimestampDelta: int64(7 * j)}
		}
		b := record.Build(nil, record.BuildOptions{BaseOffset: next, BaseTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		record.SetPartitionLeaderEpoch(b, goldenEpoch)
		h, err := record.ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(b, &h); err != nil {
			t.Fatal(err)
		}
		next = h.NextOffset()
	}
	if err := s.MarkInactive(); err != nil {
		t.Fatal(err)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestGoldenSegment(t *testing.T) {
	dir := t.TempDir()
	goldenSegment(t, dir)
	golden := filepath.Join("testdata", "golden")
	for _, suffix := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix} {
		name := segment.FileName(goldenBase, suffix)
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.MkdirAll(golden, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(golden, name), got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(filepath.Join(golden, name))
		if err != nil {
			t.Fatalf("%v (regenerate with -update)", err)
		}
		if !bytes.Equal(got, want) {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s differs from the golden file at byte %d (%d bytes, golden %d)", name, i, len(got), len(want))
		}
	}
}

// goldenBatch is a batch decoded from the golden .log with encoding/binary only.
type goldenBatch struct {
	pos, size               int64
	baseOffset, lastOffset  int64
	baseTs, maxTs           int64
	epoch                   int32
	records                 int
	recordTimestampsMax     int64
	producerID, producerSeq int64
}

var goldenCastagnoli = crc32.MakeTable(crc32.Castagnoli)

// goldenDecodeLog walks the .log by batchLength and checks every batch fully: magic, CRC32C
// (standard library), attributes, record count against the records' varint framing, and the max
// timestamp against the records' own timestamps.
func goldenDecodeLog(t *testing.T, b []byte) []goldenBatch {
	t.Helper()
	be := binary.BigEndian
	var out []goldenBatch
	for pos := int64(0); pos < int64(len(b)); {
		if int64(len(b))-pos < 61 {
			t.Fatalf("trailing %d bytes at %d", int64(len(b))-pos, pos)
		}
		x := b[pos:]
		size := int64(int32(be.Uint32(x[8:]))) + 12
		if size < 61 || pos+size > int64(len(b)) {
			t.Fatalf("batch at %d: size %d", pos, size)
		}
		x = x[:size]
		g := goldenBatch{pos: pos, size: size}
		g.baseOffset = int64(be.Uint64(x[0:]))
		g.epoch = int32(be.Uint32(x[12:]))
		if x[16] != 2 {
			t.Fatalf("batch at %d: magic %d", pos, x[16])
		}
		if crc := be.Uint32(x[17:]); crc != crc32.Checksum(x[21:], goldenCastagnoli) {
			t.Fatalf("batch at %d: crc %08x does not match its bytes", pos, crc)
		}
		if attrs := be.Uint16(x[21:]); attrs != 0 {
			t.Fatalf("batch at %d: attributes %#x", pos, attrs)
		}
		lastDelta := int64(int32(be.Uint32(x[23:])))
		g.lastOffset = g.baseOffset + lastDelta
		g.baseTs = int64(be.Uint64(x[27:]))
		g.maxTs = int64(be.Uint64(x[35:]))
		g.producerID = int64(be.Uint64(x[43:]))
		g.producerSeq = int64(int32(be.Uint32(x[53:])))
		count := int(int32(be.Uint32(x[57:])))
		// Records: varint length, then attributes, timestamp delta, offset delta, key, value,
		// headers.
		r := x[61:]
		g.recordTimestampsMax = -1
		for len(r) > 0 {
			l, n := binary.Varint(r)
			if n <= 0 || l <= 0 || int(l) > len(r)-n {
				t.Fatalf("batch at %d: record %d framing", pos, g.records)
			}
			rec := r[n : n+int(l)]
			r = r[n+int(l):]
			rec = rec[1:] // attributes
			tsDelta, k := binary.Varint(rec)
			rec = rec[k:]
			offDelta, _ := binary.Varint(rec)
			if offDelta != int64(g.records) {
				t.Fatalf("batch at %d: record %d has offset delta %d", pos, g.records, offDelta)
			}
			g.recordTimestampsMax = max(g.recordTimestampsMax, g.baseTs+tsDelta)
			g.records++
		}
		if g.records != count || int64(count) != lastDelta+1 {
			t.Fatalf("batch at %d: %d records framed, count %d, lastOffsetDelta %d", pos, g.records, count, lastDelta)
		}
		if g.maxTs != g.recordTimestampsMax {
			t.Fatalf("batch at %d: maxTimestamp %d, records' max %d", pos, g.maxTs, g.recordTimestampsMax)
		}
		out = append(out, g)
		pos += size
	}
	return out
}

// TestGoldenFilesDecode proves the golden files right: every offset index entry points at the
// start of a real batch and names its last offset, exactly at Kafka's placement (more than
// index.interval.bytes appended since the previous entry); every time index entry carries the
// largest timestamp so far and the last offset of the batch that holds it, strictly growing,
// the last one the segment's largest; the files are trimmed to their entries.
func TestGoldenFilesDecode(t *testing.T) {
	golden := filepath.Join("testdata", "golden")
	read := func(suffix string) []byte {
		b, err := os.ReadFile(filepath.Join(golden, segment.FileName(goldenBase, suffix)))
		if err != nil {
			t.Fatalf("%v (regenerate with -update)", err)
		}
		return b
	}
	batches := goldenDecodeLog(t, read(segment.LogSuffix))
	if len(batches) != len(goldenTimestamps) {
		t.Fatalf("%d batches, want %d", len(batches), len(goldenTimestamps))
	}
	next := int64(goldenBase)
	for i, g := range batches {
		if g.baseOffset != next || g.baseTs != goldenTimestamps[i] || g.epoch != goldenEpoch || g.producerID != -1 || g.producerSeq != -1 {
			t.Fatalf("batch %d: %+v", i, g)
		}
		next = g.lastOffset + 1
	}
	byPos := map[int64]goldenBatch{}
	for _, g := range batches {
		byPos[g.pos] = g
	}
	be := binary.BigEndian

	oi := read(segment.IndexSuffix)
	if len(oi)%8 != 0 || len(oi) == 0 {
		t.Fatalf(".index is %d bytes", len(oi))
	}
	var offsetEntries [][2]int64
	for i := 0; i < len(oi); i += 8 {
		rel, pos := int64(int32(be.Uint32(oi[i:]))), int64(int32(be.Uint32(oi[i+4:])))
		g, ok := byPos[pos]
		if !ok {
			t.Fatalf("offset entry %d: position %d is not a batch start", i/8, pos)
		}
		if goldenBase+rel != g.lastOffset {
			t.Fatalf("offset entry %d: offset %d, the batch at %d ends at %d", i/8, goldenBase+rel, pos, g.lastOffset)
		}
		offsetEntries = append(offsetEntries, [2]int64{goldenBase + rel, pos})
	}
	// Kafka's placement, recomputed from the decoded batches.
	var want [][2]int64
	since := int64(0)
	for _, g := range batches {
		if since > goldenInterval {
			want = append(want, [2]int64{g.lastOffset, g.pos})
			since = 0
		}
		since += g.size
	}
	if fmt.Sprint(offsetEntries) != fmt.Sprint(want) {
		t.Fatalf("offset entries %v, Kafka's placement gives %v", offsetEntries, want)
	}
	if len(offsetEntries) < 3 {
		t.Fatalf("only %d offset entries: the golden segment should exercise several", len(offsetEntries))
	}

	ti := read(segment.TimeIndexSuffix)
	if len(ti)%12 != 0 || len(ti) == 0 {
		t.Fatalf(".timeindex is %d bytes", len(ti))
	}
	lastTs, lastOff := int64(-1), int64(-1)
	for i := 0; i < len(ti); i += 12 {
		ts, off := int64(be.Uint64(ti[i:])), goldenBase+int64(int32(be.Uint32(ti[i+8:])))
		if ts <= lastTs || off < lastOff {
			t.Fatalf("time entry %d (%d, %d) does not follow (%d, %d)", i/12, ts, off, lastTs, lastOff)
		}
		// The entry names the last offset of the batch holding the max timestamp, and no batch
		// up to it has a larger one.
		var holder *goldenBatch
		for j := range batches {
			if batches[j].lastOffset == off {
				holder = &batches[j]
			}
		}
		if holder == nil || holder.maxTs != ts {
			t.Fatalf("time entry %d (%d, %d): no batch ending at %d with that max timestamp", i/12, ts, off, off)
		}
		for _, g := range batches {
			if g.lastOffset <= off && g.maxTs > ts {
				t.Fatalf("time entry %d (%d, %d): batch %d before it has max %d", i/12, ts, off, g.baseOffset, g.maxTs)
			}
		}
		lastTs, lastOff = ts, off
	}
	var segMax int64 = -1
	for _, g := range batches {
		segMax = max(segMax, g.maxTs)
	}
	if lastTs != segMax {
		t.Fatalf("last time entry %d, segment max %d: the entry added on sealing is missing", lastTs, segMax)
	}
	if len(ti)/12 < 3 {
		t.Fatalf("only %d time entries", len(ti)/12)
	}

	// And the segment package reads the golden files back as it wrote them.
	dir := t.TempDir()
	for _, suffix := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix} {
		if err := os.WriteFile(filepath.Join(dir, segment.FileName(goldenBase, suffix)), read(suffix), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := segment.Open(vfs.OS, dir, goldenBase, segment.Config{IndexIntervalBytes: goldenInterval, MaxIndexBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SanityCheck(); err != nil {
		t.Fatal(err)
	}
	s.LoadSealed(next)
	if s.MaxTimestamp() != segMax || s.OffsetIndex().Entries() != len(offsetEntries) || s.TimeIndex().Entries() != len(ti)/12 {
		t.Fatalf("reopened golden segment: max %d, %d/%d entries", s.MaxTimestamp(), s.OffsetIndex().Entries(), s.TimeIndex().Entries())
	}
	for _, g := range batches {
		pos, h, found, err := s.TranslateOffset(g.lastOffset)
		if err != nil || !found || pos != g.pos || h.BaseOffset != g.baseOffset {
			t.Fatalf("translate %d: %d %v %v", g.lastOffset, pos, found, err)
		}
	}
}
