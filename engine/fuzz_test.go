package engine

// FuzzRecover: the input describes a log (segment size, index interval and size, time roll, and a
// list of batches: record counts, value sizes, timestamps) and one damage to its files after a
// clean close (a truncation, an overwrite of a few bytes, or garbage appended, in the last or any
// segment .log; optionally also a damaged, truncated or missing index). The log is then reopened as
// after a crash, from recovery point 0, and must hold exactly what an independent model of the
// format predicts:
//
//   - the segments before the damaged one, whole;
//   - in the damaged segment, the batches before the first one that no longer checks. A batch
//     checks when all of its bytes are there and unchanged, except two fields the CRC does not
//     cover: partitionLeaderEpoch (never validated: the batch survives with the new epoch) and
//     baseOffset (Kafka cannot detect a change either: the batch survives at its new offsets if they
//     still come after the previous batch and fit the segment, and then the next batch, now below
//     them, ends the segment). A change to batchLength, magic, the CRC or any CRC-covered byte drops
//     the batch; bytes after the last batch are a torn batch;
//   - the later segments only if the damaged one was not truncated and does not now overlap them
//     (a segment cut exactly at a batch boundary is indistinguishable from a shorter one; Kafka keeps
//     the later segments too and so does weir, leaving an offset gap).
//
// Then every offset of every surviving batch must read back that batch (the rebuilt indexes are
// consistent), each offset index entry must point at the batch holding its offset, the log must
// take appends at its end, and a clean reopen must see the same log.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

// fuzzInput hands out the input's bytes; an exhausted input reads as zeros.
type fuzzInput struct{ b []byte }

func (in *fuzzInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *fuzzInput) u16() int { return int(in.byte())<<8 | int(in.byte()) }

// fuzzBatch is a batch as written: where it is and what offsets it got.
type fuzzBatch struct {
	segBase   int64
	seg       int // index of its segment
	pos, size int
	base      int64
	last      int64
}

// fuzzSegment is a segment file as written (before the damage).
type fuzzSegment struct {
	base    int64
	batches []int // indexes into the written batches
	data    []byte
}

// expectedBatch is a batch the recovered log must hold.
type expectedBatch struct {
	base, last int64
	bytes      []byte
}

func FuzzRecover(f *testing.F) {
	// Recovery logs a warning per truncation; keep fuzzing output readable.
	oldLogger, oldWriter, oldFlags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.Cleanup(func() {
		slog.SetDefault(oldLogger)
		log.SetOutput(oldWriter)
		log.SetFlags(oldFlags)
	})
	// More seeds, one per kind of damage, are in testdata/fuzz/FuzzRecover.
	f.Add([]byte{})                                                            // one batch, truncated to nothing
	f.Add(fuzzSeed([5]byte{0, 20, 0, 0, 50}, 30, 0, 0, 0, 255, 30, 0))         // the last segment torn inside a batch
	f.Add(fuzzSeed([5]byte{10, 5, 0, 0, 50}, 40, 1, 0, 0, 255, 7, 0, 0x40, 0)) // a baseOffset raised: the batch moves
	f.Add(fuzzSeed([5]byte{0, 20, 0, 0, 50}, 30, 0, 129, 0, 1, 0, 0))          // a middle segment cut at a batch boundary
	f.Fuzz(fuzzRecover)
}

// fuzzSeed builds an input: the five configuration bytes, n batches of varied sizes, then the
// damage bytes (see fuzzRecover for the layout).
func fuzzSeed(cfg [5]byte, n int, damage ...byte) []byte {
	b := append(cfg[:], byte(n-1))
	for i := 0; i < n; i++ {
		b = append(b, byte(i%8), byte(20+i*13%100), byte(i%5))
	}
	return append(b, damage...)
}

// fuzzRecover reads its input byte by byte (an exhausted input reads as zeros):
//
//	segment.bytes 1280 + 16*b; index.interval.bytes 16 + 4*b; two bytes for segment.index.bytes
//	(odd first byte: 16 + 8*(b%32), else 4096); segment.ms 1000*(1 + b);
//	1 + b%48 batches of three bytes each: 1 + b%8 records, values of b%128 bytes, a timestamp step
//	of int8(b)*50 ms (0x80: a batch without timestamps);
//	the damage: kind b%4 (truncation, overwrite, garbage, none); the segment (b < 128: the last,
//	else b%segments); the place (even b: batch b, offset b in its first 72 bytes; odd b: a
//	big-endian u16 modulo the size); for an overwrite 1 + b%8 bytes XORed with the next bytes (0
//	counts as 0xff), for garbage 1 + b%100 bytes;
//	the index damage: b%3 (none, .index, .timeindex), the segment b, then b%4 (truncation to a
//	u16, 8 bytes XORed at a u16, 1 + b%40 bytes appended, removal).
func fuzzRecover(t *testing.T, data []byte) {
	in := &fuzzInput{b: data}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1280 + int64(in.byte())*16
	cfg.IndexIntervalBytes = 16 + int(in.byte())*4
	small, size := in.byte(), in.byte()
	cfg.MaxIndexBytes = 4096
	if small&1 == 1 {
		cfg.MaxIndexBytes = 16 + 8*int(size%32) // 2..33 offset entries: rolls on a full index
	}
	// preallocate: segments are made segment.bytes long, trimmed at roll and close; the damaged
	// segment is then padded back with zeros to segment.bytes, as a crash leaves an active
	// preallocated segment (or a rolled one whose trim was lost).
	cfg.Preallocate = small&2 == 2
	cfg.SegmentMs = 1000 * (1 + int64(in.byte()))
	// Durability is not what this target is about: acknowledge from the page cache.
	cfg.FlushIntervalMessages = 1 << 40
	// A fixed clock: a batch without timestamps never rolls the log by age.
	cfg.Now = func() time.Time { return time.UnixMilli(1_700_000_000_000) }

	dir := filepath.Join(fuzzTempDir(t), "f-0")
	l, err := OpenLog(OpenOptions{Dir: dir, Topic: "f", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	nb := 1 + int(in.byte())%48
	var written []fuzzBatch
	ts := int64(1_700_000_000_000)
	for i := 0; i < nb; i++ {
		n, vsize, tsb := 1+int(in.byte())%8, int(in.byte())%128, in.byte()
		var batchTs int64
		if tsb == 0x80 {
			batchTs = record.NoTimestamp
		} else {
			ts += int64(int8(tsb)) * 50
			batchTs = ts
		}
		recs := make([]record.Record, n)
		for r := range recs {
			v := make([]byte, vsize)
			for j := range v {
				v[j] = byte(i*31 + r*7 + j)
			}
			recs[r] = record.Record{Value: v}
			if r%2 == 1 {
				recs[r].Key = []byte{byte(i), byte(r)}
			}
		}
		b := record.Build(nil, record.BuildOptions{BaseTimestamp: batchTs, ProducerID: -1, BaseSequence: -1}, recs)
		info, err := l.Append(b)
		if err != nil {
			t.Fatalf("append batch %d (%d bytes): %v", i, len(b), err)
		}
		written = append(written, fuzzBatch{segBase: info.SegmentBase, pos: int(info.Position), size: len(b), base: info.BaseOffset, last: info.LastOffset})
	}
	origLEO := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// The files as written: each segment must be exactly its batches, back to back.
	var segs []fuzzSegment
	for i := range written {
		w := &written[i]
		if len(segs) == 0 || segs[len(segs)-1].base != w.segBase {
			segs = append(segs, fuzzSegment{base: w.segBase})
		}
		w.seg = len(segs) - 1
		s := &segs[w.seg]
		s.batches = append(s.batches, i)
	}
	for si := range segs {
		s := &segs[si]
		s.data, err = os.ReadFile(filepath.Join(dir, segment.FileName(s.base, segment.LogSuffix)))
		if err != nil {
			t.Fatal(err)
		}
		pos := 0
		for _, j := range s.batches {
			if written[j].pos != pos {
				t.Fatalf("segment %d: batch at %d, expected at %d", s.base, written[j].pos, pos)
			}
			pos += written[j].size
		}
		if pos != len(s.data) {
			t.Fatalf("segment %d: %d bytes, batches end at %d", s.base, len(s.data), pos)
		}
	}
	if entries, _ := os.ReadDir(dir); countSuffix(entries, segment.LogSuffix) != len(segs) {
		t.Fatalf("%d .log files for %d segments", countSuffix(entries, segment.LogSuffix), len(segs))
	}

	// The damage.
	kind := in.byte() % 4
	sel := in.byte()
	k := len(segs) - 1
	if sel >= 128 {
		k = int(sel) % len(segs)
	}
	dmg := &segs[k]
	damaged := bytes.Clone(dmg.data)
	var p int
	if mode := in.byte(); mode&1 == 0 {
		// A place in the first bytes of a batch: its header, where the interesting fields are.
		j := dmg.batches[int(in.byte())%len(dmg.batches)]
		p = written[j].pos + int(in.byte())%min(written[j].size, 72)
	} else {
		p = in.u16() % len(dmg.data)
	}
	switch kind {
	case 0: // a truncation
		damaged = damaged[:p]
	case 1: // a few bytes overwritten
		n := 1 + int(in.byte())%8
		for i := 0; i < n && p+i < len(damaged); i++ {
			x := in.byte()
			if x == 0 {
				x = 0xff
			}
			damaged[p+i] ^= x
		}
	case 2: // garbage appended
		n := 1 + int(in.byte())%100
		for i := 0; i < n; i++ {
			damaged = append(damaged, in.byte())
		}
	}
	if cfg.Preallocate && int64(len(damaged)) < cfg.SegmentBytes {
		damaged = append(damaged, make([]byte, int(cfg.SegmentBytes)-len(damaged))...)
	}
	logPath := filepath.Join(dir, segment.FileName(dmg.base, segment.LogSuffix))
	if err := os.WriteFile(logPath, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	damageIndex(t, in, dir, segs)

	// The model's prediction.
	var want []expectedBatch
	for _, s := range segs[:k] {
		for _, j := range s.batches {
			w := written[j]
			want = append(want, expectedBatch{w.base, w.last, s.data[w.pos : w.pos+w.size]})
		}
	}
	next, pos, cut := dmg.base, 0, false
	for _, j := range dmg.batches {
		w := written[j]
		if allZeroBytes(damaged[pos:]) {
			// Cut at a batch boundary: the rest is simply missing (only zeros follow: the
			// unused end of a preallocated segment, which recovery trims as the file's end).
			break
		}
		if pos+w.size > len(damaged) {
			cut = true // torn
			break
		}
		orig, now := dmg.data[pos:pos+w.size], damaged[pos:pos+w.size]
		if changedOutsideOffsetAndEpoch(orig, now) {
			if _, err := record.CheckStored(damaged[pos:]); err == nil {
				t.Skip("the damaged batch still checks (a CRC32C collision): nothing to predict")
			}
			cut = true
			break
		}
		base := int64(binary.BigEndian.Uint64(now[record.BaseOffsetOffset:]))
		last := base + (w.last - w.base)
		if base < next || last < base || last-dmg.base > math.MaxInt32 {
			cut = true // the offsets no longer follow the previous batch or fit the segment
			break
		}
		want = append(want, expectedBatch{base, last, now})
		next, pos = last+1, pos+w.size
	}
	if !cut && !allZeroBytes(damaged[pos:]) {
		if h, err := record.CheckStored(damaged[pos:]); err == nil && h.BaseOffset >= next {
			t.Skip("the appended garbage is a valid batch: nothing to predict")
		}
		cut = true
	}
	wantLEO := next
	laterKept := !cut && k < len(segs)-1 && next <= segs[k+1].base
	t.Logf("%d batches in %d segments; damage %s at %d of segment %d/%d; %d batches survive, cut %v, later segments kept %v",
		len(written), len(segs), [...]string{"truncation", "overwrite", "garbage", "none"}[kind], p, k, len(segs), len(want), cut, laterKept)
	if laterKept {
		for _, s := range segs[k+1:] {
			for _, j := range s.batches {
				w := written[j]
				want = append(want, expectedBatch{w.base, w.last, s.data[w.pos : w.pos+w.size]})
			}
		}
		wantLEO = origLEO
	}

	// Opened as after a clean shutdown, the damaged log is trusted (only the last segment's tail
	// is walked); that may keep damage, but it must not hang or panic, nor may reads of what it
	// kept. Whatever it recovers on the way it recovers as a crash would, so the model still holds.
	cleanOpenTerminates(t, dir, cfg)

	// Recover as after a crash, from the start.
	l, err = OpenLog(OpenOptions{Dir: dir, Topic: "f", Config: cfg, CleanShutdown: false, RecoveryPoint: 0})
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	checkRecovered(t, l, want, wantLEO)
	// The recovered log takes appends at its end.
	b := record.Build(nil, record.BuildOptions{BaseTimestamp: ts, ProducerID: -1, BaseSequence: -1}, []record.Record{{Value: []byte("after")}})
	info, err := l.Append(b)
	if err != nil || info.BaseOffset != wantLEO {
		t.Fatalf("append after recovery: %+v, %v; want base %d", info, err, wantLEO)
	}
	want = append(want, expectedBatch{info.BaseOffset, info.LastOffset, b})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A clean reopen (nothing scanned: the rebuilt indexes are trusted) sees the same log.
	l, err = OpenLog(OpenOptions{Dir: dir, Topic: "f", Config: cfg, CleanShutdown: true})
	if err != nil {
		t.Fatalf("clean reopen: %v", err)
	}
	checkRecovered(t, l, want, info.LastOffset+1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// changedOutsideOffsetAndEpoch reports a difference outside baseOffset and partitionLeaderEpoch.
func changedOutsideOffsetAndEpoch(a, b []byte) bool {
	for i := range a {
		if a[i] != b[i] && !(i < record.BatchLengthOffset || i >= record.PartitionLeaderEpochOffset && i < record.MagicOffset) {
			return true
		}
	}
	return false
}

// damageIndex optionally damages one index file: truncation, overwritten bytes, garbage appended,
// or removal. Recovery from offset 0 rebuilds every index, so none of this may show.
func damageIndex(t *testing.T, in *fuzzInput, dir string, segs []fuzzSegment) {
	which := in.byte()
	if which%3 == 0 {
		return
	}
	suffix := segment.IndexSuffix
	if which%3 == 2 {
		suffix = segment.TimeIndexSuffix
	}
	path := filepath.Join(dir, segment.FileName(segs[int(in.byte())%len(segs)].base, suffix))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch how := in.byte() % 4; how {
	case 0:
		data = data[:in.u16()%(len(data)+1)]
	case 1:
		if len(data) > 0 {
			p := in.u16() % len(data)
			for i := 0; i < 8 && p+i < len(data); i++ {
				data[p+i] ^= in.byte() | 1
			}
		}
	case 2:
		for i := 0; i < 1+int(in.byte())%40; i++ {
			data = append(data, in.byte())
		}
	case 3:
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkRecovered checks that l holds exactly want and ends at wantLEO, that every offset of every
// batch reads back that batch, and that the offset indexes point where they should.
func checkRecovered(t *testing.T, l *Log, want []expectedBatch, wantLEO int64) {
	t.Helper()
	if l.LogEndOffset() != wantLEO {
		t.Fatalf("log end %d, want %d", l.LogEndOffset(), wantLEO)
	}
	got := scanLog(t, l)
	if len(got) != len(want) {
		t.Fatalf("recovered %d batches, want %d (log end %d)", len(got), len(want), l.LogEndOffset())
	}
	for i, g := range got {
		w := want[i]
		if g.BaseOffset != w.base || g.LastOffset() != w.last || !bytes.Equal(g.Bytes, w.bytes) {
			t.Fatalf("batch %d: recovered %d..%d (%d bytes), want %d..%d (%d bytes)", i, g.BaseOffset, g.LastOffset(), len(g.Bytes), w.base, w.last, len(w.bytes))
		}
	}
	// Every offset of every batch reads back its batch.
	for _, w := range want {
		for o := w.base; o <= w.last; o++ {
			sl, err := l.Read(o, 1, ReadUpToLogEnd)
			if err != nil {
				t.Fatalf("read at %d: %v", o, err)
			}
			buf := make([]byte, len(w.bytes))
			if sl.Length < int64(len(buf)) {
				t.Fatalf("read at %d: %d bytes, batch %d..%d has %d", o, sl.Length, w.base, w.last, len(buf))
			}
			_, err = sl.File.ReadAt(buf, sl.Position)
			sl.Release()
			if err != nil || !bytes.Equal(buf, w.bytes) {
				t.Fatalf("read at %d did not return batch %d..%d (%v)", o, w.base, w.last, err)
			}
		}
	}
	if sl, err := l.Read(wantLEO, 1, ReadUpToLogEnd); err != nil || sl.Length != 0 {
		t.Fatalf("read at the log end: %d bytes, %v", sl.Length, err)
	}
	if _, err := l.Read(wantLEO+1, 1, ReadUpToLogEnd); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("read past the log end: %v", err)
	}
	// Offset index entries name a batch's last offset and point at its start; time index entries
	// increase and stay inside their segment.
	for _, s := range l.Segments() {
		x := s.OffsetIndex()
		for i := 0; i < x.Entries(); i++ {
			off, pos := x.Entry(i)
			h, err := s.ReadHeaderAt(pos)
			if err != nil || h.LastOffset() != off {
				t.Fatalf("segment %d: offset index entry %d (%d at %d) points at batch %d..%d (%v)", s.BaseOffset(), i, off, pos, h.BaseOffset, h.LastOffset(), err)
			}
		}
		y := s.TimeIndex()
		prev := int64(math.MinInt64)
		for i := 0; i < y.Entries(); i++ {
			ts, off := y.Entry(i)
			if ts <= prev || off < s.BaseOffset() || off >= max(s.NextOffset(), s.BaseOffset()+1) {
				t.Fatalf("segment %d: time index entry %d (%d, %d) out of order or range", s.BaseOffset(), i, ts, off)
			}
			prev = ts
		}
	}
}

// cleanOpenTerminates opens dir as after a clean shutdown, reads forward from the log start, and
// closes it, failing the test if that does not finish in 10 seconds. Errors are allowed.
func cleanOpenTerminates(t *testing.T, dir string, cfg Config) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, err := OpenLog(OpenOptions{Dir: dir, Topic: "f", Config: cfg, CleanShutdown: true})
		if err != nil {
			return
		}
		defer l.Close()
		from := l.LogStartOffset()
		for i := 0; i < 1000; i++ {
			sl, err := l.Read(from, 1, ReadUpToLogEnd)
			if err != nil || sl.Length < record.HeaderSize {
				sl.Release()
				return
			}
			var buf [record.HeaderSize]byte
			_, err = sl.File.ReadAt(buf[:], sl.Position)
			sl.Release()
			h, _ := record.ParseHeader(buf[:])
			if err != nil || h.NextOffset() <= from {
				return
			}
			from = h.NextOffset()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("opening the damaged log as cleanly shut down did not finish in 10s")
	}
}

func countSuffix(entries []os.DirEntry, suffix string) int {
	n := 0
	for _, e := range entries {
		if filepath.Ext(e.Name()) == suffix {
			n++
		}
	}
	return n
}

// fuzzTempDir prefers a memory filesystem: the target fsyncs on every close and recovery.
func fuzzTempDir(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "weir-fuzz-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

func allZeroBytes(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
