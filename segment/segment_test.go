package segment_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/weir-mq/weir/index"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// segBatch builds a batch of n records (values of valueSize bytes) with offsets from base and
// record timestamps ts, ts+1, ...: its max timestamp is ts+n-1.
func segBatch(base int64, n, valueSize int, ts int64) ([]byte, record.Header) {
	recs := make([]record.Record, n)
	for i := range recs {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = byte(int(base) + i + j)
		}
		recs[i] = record.Record{Key: []byte{byte(i)}, Value: v, TimestampDelta: int64(i)}
	}
	b := record.Build(nil, record.BuildOptions{BaseOffset: base, BaseTimestamp: ts, ProducerID: -1, BaseSequence: -1}, recs)
	h, err := record.ParseHeader(b)
	if err != nil {
		panic(err)
	}
	return b, h
}

// segAppended is one appended batch as the test remembers it.
type segAppended struct {
	h    record.Header
	pos  int64
	data []byte
}

// segIndexModel computes the index entries Kafka's LogSegment.append writes: an offset entry
// (the batch's last offset, the batch's position) when more than interval bytes were appended
// since the last entry, a time entry (max timestamp so far, offset of that max) at the same
// moments if the timestamp grew, and, when final, the entry added as the segment goes inactive.
type segIndexModel struct {
	offsets [][2]int64 // offset, position
	times   [][2]int64 // timestamp, offset
}

func segModel(batches []segAppended, base int64, interval int, final bool) segIndexModel {
	var m segIndexModel
	since, maxTs, offOfMax := 0, int64(-1), base
	lastTs := int64(-1)
	for _, b := range batches {
		if b.h.MaxTimestamp > maxTs {
			maxTs, offOfMax = b.h.MaxTimestamp, b.h.LastOffset()
		}
		if since > interval {
			m.offsets = append(m.offsets, [2]int64{b.h.LastOffset(), b.pos})
			if maxTs > lastTs {
				m.times = append(m.times, [2]int64{maxTs, offOfMax})
				lastTs = maxTs
			}
			since = 0
		}
		since += len(b.data)
	}
	if final && maxTs > lastTs {
		m.times = append(m.times, [2]int64{maxTs, offOfMax})
	}
	return m
}

func segCheckIndexes(t *testing.T, s *segment.Segment, want segIndexModel) {
	t.Helper()
	oi, ti := s.OffsetIndex(), s.TimeIndex()
	if oi.Entries() != len(want.offsets) {
		t.Fatalf("offset index has %d entries, want %d: %v", oi.Entries(), len(want.offsets), want.offsets)
	}
	for i, w := range want.offsets {
		if o, p := oi.Entry(i); o != w[0] || p != w[1] {
			t.Fatalf("offset index entry %d = (%d, %d), want (%d, %d)", i, o, p, w[0], w[1])
		}
	}
	if ti.Entries() != len(want.times) {
		t.Fatalf("time index has %d entries, want %d: %v", ti.Entries(), len(want.times), want.times)
	}
	for i, w := range want.times {
		if ts, o := ti.Entry(i); ts != w[0] || o != w[1] {
			t.Fatalf("time index entry %d = (%d, %d), want (%d, %d)", i, ts, o, w[0], w[1])
		}
	}
}

func segCreate(t *testing.T, dir string, base int64, cfg segment.Config) *segment.Segment {
	t.Helper()
	s, err := segment.Create(vfs.OS, dir, base, cfg, time.UnixMilli(1_700_000_000_000))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func segAppend(t *testing.T, s *segment.Segment, b []byte, h record.Header) segAppended {
	t.Helper()
	pos, err := s.Append(b, &h)
	if err != nil {
		t.Fatalf("append [%d, %d]: %v", h.BaseOffset, h.LastOffset(), err)
	}
	return segAppended{h: h, pos: pos, data: b}
}

// segFill appends batches of random sizes (1-8 records of 1-300 bytes) with timestamps that
// mostly grow but sometimes go back, and returns them.
func segFill(t *testing.T, s *segment.Segment, rng *rand.Rand, batches int) []segAppended {
	t.Helper()
	var out []segAppended
	next, ts := s.NextOffset(), int64(1_700_000_000_000)
	for i := 0; i < batches; i++ {
		if rng.Intn(4) == 0 {
			ts -= rng.Int63n(5000)
		} else {
			ts += rng.Int63n(5000)
		}
		b, h := segBatch(next, 1+rng.Intn(8), 1+rng.Intn(300), ts)
		out = append(out, segAppend(t, s, b, h))
		next = h.NextOffset()
	}
	return out
}

func segSliceBytes(t *testing.T, sl segment.Slice) []byte {
	t.Helper()
	buf := make([]byte, sl.Length)
	if n, err := sl.File.ReadAt(buf, sl.Position); n != len(buf) {
		t.Fatalf("read slice: %d of %d bytes: %v", n, len(buf), err)
	}
	return buf
}

// segCheckReads checks TranslateOffset for every offset, slices, and ReadHeaderAt at the end.
func segCheckReads(t *testing.T, s *segment.Segment, batches []segAppended) {
	t.Helper()
	for _, b := range batches {
		for o := b.h.BaseOffset; o <= b.h.LastOffset(); o++ {
			pos, h, found, err := s.TranslateOffset(o)
			if err != nil || !found || pos != b.pos || h != b.h {
				t.Fatalf("translate %d: pos %d found %v err %v, want the batch [%d, %d] at %d", o, pos, found, err, b.h.BaseOffset, b.h.LastOffset(), b.pos)
			}
		}
		sl, ok := s.Slice(b.pos, int64(len(b.data)))
		if !ok {
			t.Fatal("slice of an open segment refused")
		}
		if got := segSliceBytes(t, sl); !bytes.Equal(got, b.data) {
			t.Fatalf("slice of batch %d differs", b.h.BaseOffset)
		}
		sl.Release()
	}
	last := batches[len(batches)-1]
	if _, _, found, err := s.TranslateOffset(last.h.NextOffset()); found || err != nil {
		t.Fatalf("translate past the end: found %v, %v", found, err)
	}
	if _, err := s.ReadHeaderAt(s.Size()); err != io.EOF {
		t.Fatalf("read header at the end: %v, want io.EOF", err)
	}
	if _, err := s.ReadHeaderAt(s.Size() - record.HeaderSize + 1); err != io.EOF {
		t.Fatalf("read header crossing the end: %v, want io.EOF", err)
	}
	// Below the base: the first batch.
	if pos, _, found, _ := s.TranslateOffset(s.BaseOffset() - 5); !found || pos != 0 {
		t.Fatalf("translate below the base: pos %d found %v", pos, found)
	}
	if s.NextOffset() != last.h.NextOffset() || s.Size() != last.pos+int64(len(last.data)) {
		t.Fatalf("next offset %d size %d", s.NextOffset(), s.Size())
	}
}

func TestSegmentAppendTranslateSlice(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	cfg := segment.Config{IndexIntervalBytes: 700, MaxIndexBytes: 4096}
	s := segCreate(t, t.TempDir(), 1000, cfg)
	defer s.Close()
	batches := segFill(t, s, rng, 60)
	segCheckReads(t, s, batches) // active: pread
	if err := s.MarkInactive(); err != nil {
		t.Fatal(err)
	}
	segCheckReads(t, s, batches) // sealed: through the read-only mapping
	var maxTs int64 = -1
	for _, b := range batches {
		maxTs = max(maxTs, b.h.MaxTimestamp)
	}
	if s.MaxTimestamp() != maxTs {
		t.Fatalf("max timestamp %d, want %d", s.MaxTimestamp(), maxTs)
	}
	if s.FirstBatchTimestamp() != batches[0].h.MaxTimestamp {
		t.Fatalf("first batch timestamp %d, want %d", s.FirstBatchTimestamp(), batches[0].h.MaxTimestamp)
	}
	// FindTimestamp against a scan, from several start offsets.
	for _, start := range []int64{0, batches[20].h.BaseOffset + 1, batches[59].h.LastOffset()} {
		for ts := batches[0].h.MaxTimestamp - 20000; ts < maxTs+20000; ts += 997 {
			pos, h, found, err := s.FindTimestamp(ts, start)
			if err != nil {
				t.Fatal(err)
			}
			var want *segAppended
			for i := range batches {
				if batches[i].h.LastOffset() >= start && batches[i].h.MaxTimestamp >= ts {
					want = &batches[i]
					break
				}
			}
			if (want != nil) != found || (found && (pos != want.pos || h.BaseOffset != want.h.BaseOffset)) {
				t.Fatalf("find timestamp %d from %d: found %v at %d (%d)", ts, start, found, pos, h.BaseOffset)
			}
		}
	}
}

// TestSegmentIndexPlacement checks every index entry against Kafka's rule, for several intervals,
// and the final time index entry added when the segment goes inactive.
func TestSegmentIndexPlacement(t *testing.T) {
	for _, interval := range []int{1, 100, 1000, 4096} {
		rng := rand.New(rand.NewSource(int64(interval)))
		s := segCreate(t, t.TempDir(), 50, segment.Config{IndexIntervalBytes: interval, MaxIndexBytes: 64 << 10})
		batches := segFill(t, s, rng, 120)
		segCheckIndexes(t, s, segModel(batches, 50, interval, false))
		// A timestamp larger than any so far, in a batch that gets no index entry (interval
		// large): only MarkInactive records it.
		if interval == 4096 {
			last := batches[len(batches)-1]
			b, h := segBatch(last.h.NextOffset(), 1, 10, 1_800_000_000_000)
			batches = append(batches, segAppend(t, s, b, h))
			segCheckIndexes(t, s, segModel(batches, 50, interval, false))
		}
		if err := s.MarkInactive(); err != nil {
			t.Fatal(err)
		}
		want := segModel(batches, 50, interval, true)
		segCheckIndexes(t, s, want)
		if ts, _ := s.TimeIndex().LastEntry(); ts != s.MaxTimestamp() {
			t.Fatalf("interval %d: last time index entry %d, segment max %d", interval, ts, s.MaxTimestamp())
		}
		// Seal trims both files to their entries.
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			path string
			size int
		}{
			{s.OffsetIndex().Path(), len(want.offsets) * index.OffsetEntrySize},
			{s.TimeIndex().Path(), len(want.times) * index.TimeEntrySize},
		} {
			if st, err := os.Stat(c.path); err != nil || st.Size() != int64(c.size) {
				t.Fatalf("interval %d: %s is %v bytes (%v), want %d", interval, c.path, st.Size(), err, c.size)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSegmentReopen: a segment closed cleanly reopens from its trimmed indexes and a short tail
// scan (LoadTail) or, sealed, from its indexes alone (LoadSealed).
func TestSegmentReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := segment.Config{IndexIntervalBytes: 500, MaxIndexBytes: 4096}
	s := segCreate(t, dir, 7, cfg)
	batches := segFill(t, s, rand.New(rand.NewSource(2)), 40)
	want := segModel(batches, 7, 500, false)
	maxTs, next, size := s.MaxTimestamp(), s.NextOffset(), s.Size()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := segment.Open(vfs.OS, dir, 7, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SanityCheck(); err != nil {
		t.Fatal(err)
	}
	if err := s.LoadTail(); err != nil {
		t.Fatal(err)
	}
	segCheckIndexes(t, s, want)
	if s.MaxTimestamp() != maxTs || s.NextOffset() != next || s.Size() != size || s.FirstBatchTimestamp() != batches[0].h.MaxTimestamp {
		t.Fatalf("reopened: max ts %d next %d size %d first ts %d; want %d %d %d %d", s.MaxTimestamp(), s.NextOffset(), s.Size(),
			s.FirstBatchTimestamp(), maxTs, next, size, batches[0].h.MaxTimestamp)
	}
	segCheckReads(t, s, batches)
	// Appends continue with the right index state.
	more := segFill(t, s, rand.New(rand.NewSource(3)), 5)
	_ = more
	if err := s.MarkInactive(); err != nil {
		t.Fatal(err)
	}
	maxTs, next = s.MaxTimestamp(), s.NextOffset()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = segment.Open(vfs.OS, dir, 7, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.LoadSealed(next)
	if s.MaxTimestamp() != maxTs || s.NextOffset() != next || !s.IsSealed() {
		t.Fatalf("load sealed: max ts %d next %d sealed %v", s.MaxTimestamp(), s.NextOffset(), s.IsSealed())
	}
	segCheckReads(t, s, append(batches, more...))
}

// segWriteFiles writes a segment's three files into dir from the given bytes.
func segWriteFiles(t *testing.T, dir string, base int64, log, offsetIndex, timeIndex []byte) {
	t.Helper()
	for _, f := range []struct {
		suffix string
		data   []byte
	}{{segment.LogSuffix, log}, {segment.IndexSuffix, offsetIndex}, {segment.TimeIndexSuffix, timeIndex}} {
		if err := os.WriteFile(filepath.Join(dir, segment.FileName(base, f.suffix)), f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func segReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// segRecoverAndCheck opens the segment in dir, recovers it and checks that exactly the batches
// in survivors remain, with their indexes rebuilt, and that appends continue after them.
func segRecoverAndCheck(t *testing.T, dir string, base int64, cfg segment.Config, fileSize int64, survivors []segAppended, what string) {
	t.Helper()
	s, err := segment.Open(vfs.OS, dir, base, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	truncated, err := s.Recover()
	if err != nil {
		t.Fatalf("%s: recover: %v", what, err)
	}
	var end int64
	next := base
	if n := len(survivors); n > 0 {
		end = survivors[n-1].pos + int64(len(survivors[n-1].data))
		next = survivors[n-1].h.NextOffset()
	}
	if truncated != fileSize-end || s.Size() != end || s.NextOffset() != next {
		t.Fatalf("%s: recovered size %d next %d truncated %d; want size %d next %d truncated %d",
			what, s.Size(), s.NextOffset(), truncated, end, next, fileSize-end)
	}
	if st, err := os.Stat(s.LogPath()); err != nil || st.Size() != end {
		t.Fatalf("%s: file is %d bytes after recovery, want %d", what, st.Size(), end)
	}
	segCheckIndexes(t, s, segModel(survivors, base, cfg.IndexIntervalBytes, false))
	if len(survivors) > 0 {
		segCheckReads(t, s, survivors)
	}
	b, h := segBatch(next, 2, 5, 1_700_000_000_000)
	if pos := segAppend(t, s, b, h).pos; pos != end {
		t.Fatalf("%s: append after recovery at %d, want %d", what, pos, end)
	}
}

// TestSegmentRecoverTornTail: the file cut at every byte of the last batch, then garbage written
// from every byte of the last batch and from random positions of the whole file (Kafka's
// LogSegmentTest.testRecoveryWithCorruptMessage): recovery keeps exactly the batches that end at
// or before the damage, truncates the rest and rebuilds both indexes, whatever stale entries the
// index files held.
func TestSegmentRecoverTornTail(t *testing.T) {
	const base = 3000
	cfg := segment.Config{IndexIntervalBytes: 300, MaxIndexBytes: 4096}
	src := t.TempDir()
	s := segCreate(t, src, base, cfg)
	rng := rand.New(rand.NewSource(4))
	batches := segFill(t, s, rng, 30)
	// A small last batch: its every byte is a cut point below.
	lastBatch, lastHeader := segBatch(s.NextOffset(), 3, 15, 1_700_000_100_000)
	batches = append(batches, segAppend(t, s, lastBatch, lastHeader))
	if err := s.Close(); err != nil { // indexes trimmed: they describe every batch
		t.Fatal(err)
	}
	logBytes := segReadFile(t, filepath.Join(src, segment.FileName(base, segment.LogSuffix)))
	oiBytes := segReadFile(t, filepath.Join(src, segment.FileName(base, segment.IndexSuffix)))
	tiBytes := segReadFile(t, filepath.Join(src, segment.FileName(base, segment.TimeIndexSuffix)))
	survivorsBefore := func(p int64) []segAppended {
		var out []segAppended
		for _, b := range batches {
			if b.pos+int64(len(b.data)) <= p {
				out = append(out, b)
			}
		}
		return out
	}
	last := batches[len(batches)-1]
	dir := t.TempDir() // each case rewrites the three files here
	// Torn: the file ends at p.
	for p := last.pos; p < int64(len(logBytes)); p++ {
		segWriteFiles(t, dir, base, logBytes[:p], oiBytes, tiBytes)
		segRecoverAndCheck(t, dir, base, cfg, p, survivorsBefore(p), "torn at "+strconv.FormatInt(p, 10))
	}
	// Garbage from p: every byte of the last batch, then random positions anywhere.
	positions := []int64{}
	for p := last.pos; p < int64(len(logBytes)); p++ {
		positions = append(positions, p)
	}
	for i := 0; i < 100; i++ {
		positions = append(positions, rng.Int63n(int64(len(logBytes))))
	}
	for _, p := range positions {
		damaged := append([]byte(nil), logBytes...)
		n := int64(len(logBytes)) - p + rng.Int63n(200) // to the end of the file and maybe beyond
		for i := int64(0); i < n; i++ {
			garbage := byte(1 + rng.Intn(255))
			if p+i < int64(len(damaged)) {
				damaged[p+i] ^= garbage // every byte from p on differs from what was written
			} else {
				damaged = append(damaged, garbage)
			}
		}
		segWriteFiles(t, dir, base, damaged, oiBytes, tiBytes)
		segRecoverAndCheck(t, dir, base, cfg, int64(len(damaged)), survivorsBefore(p), "garbage from "+strconv.FormatInt(p, 10))
	}
	// A batch whose offsets go backwards ends the valid prefix too.
	damaged := append([]byte(nil), logBytes...)
	record.SetBaseOffset(damaged[batches[10].pos:], batches[9].h.BaseOffset) // outside the CRC
	segWriteFiles(t, dir, base, damaged, oiBytes, tiBytes)
	segRecoverAndCheck(t, dir, base, cfg, int64(len(damaged)), batches[:10], "offsets going backwards")
}

// TestSegmentTruncateTo: a truncation removes the batch holding the offset and everything after
// it, with their index entries; appends continue from there. A sealed segment truncated becomes
// writable again.
func TestSegmentTruncateTo(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		const base = 200
		cfg := segment.Config{IndexIntervalBytes: 250, MaxIndexBytes: 4096}
		s := segCreate(t, t.TempDir(), base, cfg)
		batches := segFill(t, s, rand.New(rand.NewSource(5)), 40)
		if sealed {
			if err := s.MarkInactive(); err != nil {
				t.Fatal(err)
			}
		}
		// Truncating past the end changes nothing.
		if next, err := s.TruncateTo(batches[39].h.NextOffset()); err != nil || next != batches[39].h.NextOffset() || s.Size() != batches[39].pos+int64(len(batches[39].data)) {
			t.Fatalf("truncate past the end: next %d, %v", next, err)
		}
		k := 25
		target := batches[k].h.LastOffset() // inside or at the end of batch k: it goes whole
		next, err := s.TruncateTo(target)
		if err != nil || next != batches[k].h.BaseOffset {
			t.Fatalf("truncate to %d: next %d (%v), want %d", target, next, err, batches[k].h.BaseOffset)
		}
		if s.Size() != batches[k].pos || s.NextOffset() != next || s.IsSealed() {
			t.Fatalf("after truncate: size %d next %d sealed %v", s.Size(), s.NextOffset(), s.IsSealed())
		}
		if st, _ := os.Stat(s.LogPath()); st.Size() != batches[k].pos {
			t.Fatalf("file is %d bytes, want %d", st.Size(), batches[k].pos)
		}
		kept := batches[:k]
		var maxTs int64 = -1
		for _, b := range kept {
			maxTs = max(maxTs, b.h.MaxTimestamp)
		}
		if s.MaxTimestamp() != maxTs {
			t.Fatalf("max timestamp after truncate %d, want %d", s.MaxTimestamp(), maxTs)
		}
		// Entries naming offsets of the truncated batches go; the final entry of MarkInactive
		// stays only if it names a kept offset.
		full := segModel(batches, base, 250, sealed)
		var wantIdx segIndexModel
		for _, e := range full.offsets {
			if e[0] < batches[k].h.BaseOffset {
				wantIdx.offsets = append(wantIdx.offsets, e)
			}
		}
		for _, e := range full.times {
			if e[1] < batches[k].h.BaseOffset {
				wantIdx.times = append(wantIdx.times, e)
			}
		}
		segCheckIndexes(t, s, wantIdx)
		segCheckReads(t, s, kept)
		// Appending again: the index restarts counting from the truncation (as Kafka resets
		// bytesSinceLastIndexEntry).
		rest := segFill(t, s, rand.New(rand.NewSource(6)), 15)
		all := append(append([]segAppended(nil), kept...), rest...)
		segCheckReads(t, s, all)
		got := s.OffsetIndex().Entries()
		model := segModel(kept, base, 250, false).offsets
		since := 0
		for _, b := range rest {
			if since > 250 {
				model = append(model, [2]int64{b.h.LastOffset(), b.pos})
				since = 0
			}
			since += len(b.data)
		}
		if got != len(model) {
			t.Fatalf("sealed=%v: %d offset index entries after re-append, want %d", sealed, got, len(model))
		}
		for i, w := range model {
			if o, p := s.OffsetIndex().Entry(i); o != w[0] || p != w[1] {
				t.Fatalf("sealed=%v: offset entry %d = (%d, %d), want %v", sealed, i, o, p, w)
			}
		}
		// Truncating to the base empties the segment.
		if next, err := s.TruncateTo(base); err != nil || next != base || s.Size() != 0 || s.OffsetIndex().Entries() != 0 || s.TimeIndex().Entries() != 0 {
			t.Fatalf("truncate to the base: next %d size %d entries %d/%d (%v)", next, s.Size(), s.OffsetIndex().Entries(), s.TimeIndex().Entries(), err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSegmentRefcount: a Slice holds the segment open: after Delete (files unlinked at once) its
// bytes stay readable until the last Release closes the files.
func TestSegmentRefcount(t *testing.T) {
	dir := t.TempDir()
	s := segCreate(t, dir, 0, segment.Config{IndexIntervalBytes: 100, MaxIndexBytes: 4096})
	batches := segFill(t, s, rand.New(rand.NewSource(7)), 10)
	if err := s.MarkInactive(); err != nil {
		t.Fatal(err)
	}
	sl, ok := s.Slice(0, s.Size())
	if !ok {
		t.Fatal("slice refused")
	}
	want := segSliceBytes(t, sl)
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{segment.LogSuffix, segment.IndexSuffix, segment.TimeIndexSuffix} {
		if _, err := os.Stat(filepath.Join(dir, segment.FileName(0, suffix))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still there after Delete: %v", suffix, err)
		}
	}
	if got := segSliceBytes(t, sl); !bytes.Equal(got, want) {
		t.Fatal("slice bytes changed after Delete")
	}
	// The segment is still usable by reference holders.
	if !s.Acquire() {
		t.Fatal("acquire refused while a slice holds the segment")
	}
	if pos, _, found, err := s.TranslateOffset(batches[5].h.BaseOffset); !found || err != nil || pos != batches[5].pos {
		t.Fatalf("translate on a deleted segment still referenced: %d %v %v", pos, found, err)
	}
	s.Release()
	file := sl.File
	sl.Release()
	sl.Release() // a second release is a no-op
	if _, err := file.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after the last release: %v, want os.ErrClosed", err)
	}
	if s.Acquire() {
		t.Fatal("acquire succeeded after the last reference went")
	}
	if _, ok := s.Slice(0, 1); ok {
		t.Fatal("slice succeeded after the last reference went")
	}
}

func TestFileName(t *testing.T) {
	if got := segment.FileName(42, segment.LogSuffix); got != "00000000000000000042.log" {
		t.Fatalf("file name %q", got)
	}
	for _, c := range []struct {
		name, suffix string
		base         int64
		ok           bool
	}{
		{"00000000000000000042.log", ".log", 42, true},
		{"09223372036854775807.index", ".index", 9223372036854775807, true},
		{"00000000000000000042.log", ".index", 0, false},
		{"0000000000000000042.log", ".log", 0, false},
		{"0000000000000000004x.log", ".log", 0, false},
		{"00000000000000000042.log.deleted", ".log", 0, false},
		{"-0000000000000000042.log", ".log", 0, false},
	} {
		base, ok := segment.ParseFileName(c.name, c.suffix)
		if ok != c.ok || base != c.base {
			t.Errorf("ParseFileName(%q, %q) = %d, %v", c.name, c.suffix, base, ok)
		}
	}
}

// TestSegmentRecoverFullIndex: recovery rebuilds the indexes from scratch, and their entries may
// fall on other batches than when they were appended (the byte count since the last entry starts
// again at zero after a reopen or a truncation, as in Kafka). A rebuilt index that fills up before
// the end of the segment must not end the valid data: every batch survives, the index just stops
// growing.
func TestSegmentRecoverFullIndex(t *testing.T) {
	const base = 0
	dir := t.TempDir()
	cfg := segment.Config{IndexIntervalBytes: 150, MaxIndexBytes: 6 * index.TimeEntrySize} // 6 time, 9 offset entries
	s := segCreate(t, dir, base, cfg)
	var batches []segAppended
	next, ts := int64(base), int64(1_700_000_000_000)
	appendUntilFull := func(limit int) {
		for len(batches) < limit {
			b, h := segBatch(next, 1, 100, ts)
			if !s.CanHold(h.LastOffset()) {
				return // the log would roll here
			}
			batches = append(batches, segAppend(t, s, b, h))
			next, ts = h.NextOffset(), ts+10
		}
	}
	appendUntilFull(3)
	// A clean close and reopen in the middle: the byte count since the last entry restarts.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := segment.Open(vfs.OS, dir, base, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.LoadTail(); err != nil {
		t.Fatal(err)
	}
	appendUntilFull(1000)
	if s.CanHold(next) {
		t.Fatal("the index never filled")
	}
	size := s.Size()
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = segment.Open(vfs.OS, dir, base, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	truncated, err := s.Recover()
	if err != nil || truncated != 0 || s.Size() != size || s.NextOffset() != next {
		t.Fatalf("recovery of %d valid batches: truncated %d bytes (%v), size %d of %d, next %d of %d",
			len(batches), truncated, err, s.Size(), size, s.NextOffset(), next)
	}
	segCheckReads(t, s, batches)
}

// TestSegmentRecoverFromRecoveryPoint: RecoverTailFrom checks the CRC of the batches from the one
// holding the recovery point on and only the headers before it (flushed before the recovery point
// was written); a broken header below it still ends the log.
func TestSegmentRecoverFromRecoveryPoint(t *testing.T) {
	const base = 100
	cfg := segment.Config{IndexIntervalBytes: 300, MaxIndexBytes: 4096}
	src := t.TempDir()
	s := segCreate(t, src, base, cfg)
	batches := segFill(t, s, rand.New(rand.NewSource(7)), 20)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logBytes := segReadFile(t, filepath.Join(src, segment.FileName(base, segment.LogSuffix)))
	flushed := batches[10].h.BaseOffset // batches 0-9 are below the recovery point
	var pastFlushed int64
	for _, b := range batches[10:] {
		pastFlushed += int64(len(b.data))
	}
	recoverFrom := func(log []byte, from int64) (segment.RecoverResult, int64) {
		t.Helper()
		dir := t.TempDir()
		segWriteFiles(t, dir, base, log, nil, nil)
		s, err := segment.Open(vfs.OS, dir, base, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.RecoverTailFrom(from)
		if err != nil {
			t.Fatal(err)
		}
		return res, s.NextOffset()
	}
	end := batches[len(batches)-1].h.NextOffset()
	if res, next := recoverFrom(logBytes, flushed); res.Truncated != 0 || res.Checked != pastFlushed || next != end {
		t.Fatalf("intact: %+v next %d, want %d bytes checked, next %d", res, next, pastFlushed, end)
	}
	if res, next := recoverFrom(logBytes, end); res.Truncated != 0 || res.Checked != 0 || next != end {
		t.Fatalf("all flushed: %+v next %d, want nothing checked, next %d", res, next, end)
	}
	payload := func(b segAppended) int64 { return b.pos + int64(len(b.data)) - 1 } // CRC-covered
	// A payload byte flipped past the recovery point: cut there.
	damaged := append([]byte(nil), logBytes...)
	damaged[payload(batches[14])] ^= 0xff
	if res, next := recoverFrom(damaged, flushed); next != batches[14].h.BaseOffset || res.Truncated != int64(len(logBytes))-batches[14].pos {
		t.Fatalf("damaged past the recovery point: %+v next %d", res, next)
	}
	// The same below it: flushed bytes are not checksummed again (a full recovery cuts them).
	damaged = append([]byte(nil), logBytes...)
	damaged[payload(batches[4])] ^= 0xff
	if res, next := recoverFrom(damaged, flushed); next != end || res.Truncated != 0 {
		t.Fatalf("payload damaged below the recovery point: %+v next %d, want kept", res, next)
	}
	if _, next := recoverFrom(damaged, base); next != batches[4].h.BaseOffset {
		t.Fatalf("full recovery of a damaged payload: next %d, want %d", next, batches[4].h.BaseOffset)
	}
	// A header broken below the recovery point still ends the log (the walk cannot go on).
	damaged = append([]byte(nil), logBytes...)
	damaged[batches[4].pos+16] = 7 // magic
	if _, next := recoverFrom(damaged, flushed); next != batches[4].h.BaseOffset {
		t.Fatalf("header damaged below the recovery point: next %d, want %d", next, batches[4].h.BaseOffset)
	}
}
