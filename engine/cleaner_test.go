package engine

// Compaction tests: the cleaned log against an oracle (the latest record of each key, tombstones
// until their delete horizon), offsets kept and increasing, every stored batch valid, fetches at
// removed offsets landing on the next survivor; the offset map's memory bound forcing several
// passes; keyless records refused; compact,delete; truncation and concurrent readers during a
// cleaning; the Manager's cleaner. Crashes and faults: cleaner_crash_test.go.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/vfs"
)

type testClock struct{ ms atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ms.Store(1_700_000_000_000)
	return c
}

func (c *testClock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *testClock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// compactConfig is a compacted log with small segments, page-cache acknowledgements and a
// high watermark that follows the log end.
func compactConfig(clock *testClock) Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.IndexIntervalBytes = 512
	cfg.MaxIndexBytes = 8 << 10
	cfg.CleanupPolicy = "compact"
	cfg.DeleteRetentionMs = 60_000
	cfg.FlushIntervalMessages = 1 << 30
	cfg.LocalHighWatermark = true
	cfg.Now = clock.now
	cfg.FileDeleteDelayMs = 0 // replaced segments go at once (noLeftovers); enginekeys_test.go delays them
	return cfg
}

// oracleRec is a record as appended (value nil: a tombstone).
type oracleRec struct {
	offset int64
	key    []byte // nil: no key
	value  []byte
}

func (r oracleRec) String() string {
	v := "<tombstone>"
	if r.value != nil {
		v = fmt.Sprintf("%d bytes", len(r.value))
	}
	return fmt.Sprintf("{%d %q %s}", r.offset, r.key, v)
}

// writer appends random keyed batches to a log and remembers every record.
type writer struct {
	t       testing.TB
	l       *Log
	clock   *testClock
	rng     *rand.Rand
	keys    int
	codecs  bool    // compress some batches with each codec
	deletes float64 // share of tombstones
	keyless bool    // write some records without key (only on a delete-policy log)
	pid     int64   // idempotent producer id of some batches, -1 for none
	seq     int32
	serial  int
	codec   batchCodec
	all     []oracleRec
}

func newWriter(t testing.TB, l *Log, clock *testClock, seed uint64, keys int) *writer {
	return &writer{t: t, l: l, clock: clock, rng: rand.New(rand.NewPCG(seed, 7)), keys: keys, deletes: 0.1, pid: -1}
}

func (w *writer) key() []byte {
	if w.rng.IntN(4) == 0 {
		return []byte(fmt.Sprintf("hot-%d", w.rng.IntN(3))) // a few keys repeated very often
	}
	return []byte(fmt.Sprintf("key-%05d", w.rng.IntN(w.keys)))
}

// batch appends one batch of n random records.
func (w *writer) batch(n int) AppendInfo {
	recs := make([]record.Record, n)
	for i := range recs {
		w.serial++
		recs[i].Key = w.key()
		if w.keyless && w.rng.IntN(5) == 0 {
			recs[i].Key = nil
		}
		if w.rng.Float64() >= w.deletes {
			v := make([]byte, 8+w.rng.IntN(120))
			for j := range v {
				v[j] = byte(w.rng.Uint32())
			}
			copy(v, fmt.Sprintf("#%d#", w.serial))
			recs[i].Value = v
		}
		recs[i].TimestampDelta = int64(i)
	}
	codec := 0
	if w.codecs && w.rng.IntN(2) == 0 {
		// gzip, snappy or zstd (lz4's 4 MiB blocks are slow to allocate under the race
		// detector: TestCleanerRewritesEveryCodec covers it)
		codec = []int{1, 2, 4}[w.rng.IntN(3)]
	}
	opts := record.BuildOptions{BaseTimestamp: w.clock.now().UnixMilli(), ProducerID: -1, BaseSequence: -1}
	if w.pid >= 0 && w.rng.IntN(2) == 0 {
		opts.ProducerID, opts.BaseSequence = w.pid, w.seq
		w.seq += int32(n)
	}
	b := w.build(opts, recs, codec)
	info, err := w.l.Append(b)
	if err != nil {
		w.t.Fatalf("append: %v", err)
	}
	for i, r := range recs {
		w.all = append(w.all, oracleRec{offset: info.BaseOffset + int64(i), key: r.Key, value: r.Value})
	}
	w.clock.advance(time.Millisecond)
	return info
}

// build encodes recs as a batch compressed with codec (0 = none).
func (w *writer) build(opts record.BuildOptions, recs []record.Record, codec int) []byte {
	b := record.Build(nil, opts, recs)
	if codec == 0 {
		return b
	}
	h, _ := record.ParseHeader(b)
	out, err := w.codec.appendBatch(nil, b, len(recs), b[record.HeaderSize:], h.Attributes|int16(codec), h.BaseTimestamp, h.MaxTimestamp)
	if err != nil {
		w.t.Fatalf("compress: %v", err)
	}
	return out
}

func (w *writer) batches(n int) {
	for range n {
		w.batch(1 + w.rng.IntN(8))
	}
}

// expect is what a cleaning reaching end leaves of all: records from end on, and below it the
// latest keyed record of each key, tombstones below expiredBefore excepted.
func expect(all []oracleRec, end, expiredBefore int64) []oracleRec {
	latest := map[string]int64{}
	for _, r := range all {
		if r.offset < end && r.key != nil {
			latest[string(r.key)] = r.offset
		}
	}
	var out []oracleRec
	for _, r := range all {
		switch {
		case r.offset >= end:
			out = append(out, r)
		case r.key == nil || latest[string(r.key)] != r.offset:
		case r.value == nil && r.offset < expiredBefore:
		default:
			out = append(out, r)
		}
	}
	return out
}

// storedRecords reads l from its log start through Log.Read, checking that every batch passes
// record.CheckStored, batches and records come in increasing offset order, every record lies in
// its batch's offset range and the record count is right. It returns the records and batches.
func storedRecords(t testing.TB, l *Log) ([]oracleRec, []record.Header) {
	t.Helper()
	recs, hdrs, err := readStored(l)
	if err != nil {
		t.Fatal(err)
	}
	return recs, hdrs
}

func readStored(l *Log) ([]oracleRec, []record.Header, error) {
	codec := testCodecs.Get().(*batchCodec)
	defer testCodecs.Put(codec)
	var recs []oracleRec
	var hdrs []record.Header
	last := int64(-1)
	from := l.LogStartOffset()
	for {
		sl, err := l.Read(from, 64<<10, ReadUpToLogEnd)
		if err != nil {
			return nil, nil, fmt.Errorf("read at %d: %w", from, err)
		}
		if sl.Length == 0 {
			return recs, hdrs, nil
		}
		buf := make([]byte, sl.Length)
		_, err = sl.File.ReadAt(buf, sl.Position)
		sl.Release()
		if err != nil && err != io.EOF {
			return nil, nil, fmt.Errorf("read at %d: %w", from, err)
		}
		n := 0
		for len(buf) >= record.HeaderSize {
			h, err := record.ParseHeader(buf)
			if err != nil || h.Size() > int64(len(buf)) && n > 0 {
				break // the rest of a batch cut by maxBytes
			}
			if _, err := record.CheckStored(buf); err != nil {
				return nil, nil, fmt.Errorf("batch at %d (read from %d: position %d, length %d): %w", h.BaseOffset, from, sl.Position, sl.Length, err)
			}
			if h.BaseOffset <= last {
				return nil, nil, fmt.Errorf("batch at %d follows offset %d", h.BaseOffset, last)
			}
			data, err := codec.records(buf, &h, 1<<30)
			if err != nil {
				return nil, nil, fmt.Errorf("batch at %d: records: %w", h.BaseOffset, err)
			}
			count := 0
			for len(data) > 0 {
				r, size, err := nextRecord(data)
				if err != nil {
					return nil, nil, fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
				}
				data = data[size:]
				o := h.BaseOffset + r.offsetDelta
				if o <= last || o > h.LastOffset() {
					return nil, nil, fmt.Errorf("record at %d in batch %d..%d after offset %d", o, h.BaseOffset, h.LastOffset(), last)
				}
				last = o
				rec := oracleRec{offset: o}
				if r.hasKey {
					rec.key = bytes.Clone(r.key)
				}
				if r.hasValue {
					if rec.value, err = recordValue(r.encoded); err != nil {
						return nil, nil, fmt.Errorf("record at %d: %w", o, err)
					}
				}
				recs = append(recs, rec)
				count++
			}
			if count != int(h.RecordCount) {
				return nil, nil, fmt.Errorf("batch at %d declares %d records, holds %d", h.BaseOffset, h.RecordCount, count)
			}
			last = max(last, h.LastOffset())
			hdrs = append(hdrs, h)
			from = h.NextOffset()
			buf = buf[h.Size():]
			n++
		}
		if n == 0 {
			return nil, nil, fmt.Errorf("read at %d returned no whole batch", from)
		}
	}
}

// testCodecs keeps decoders between reads (making a zstd decoder is slow under the race detector).
var testCodecs = sync.Pool{New: func() any { return new(batchCodec) }}

// recordValue extracts the value of an encoded record (decodeRecords, the tests' decoder,
// works on uncompressed batches: give it a batch of this one record).
func recordValue(encoded []byte) ([]byte, error) {
	b := make([]byte, 0, len(encoded)+record.HeaderSize)
	b = append(b, make([]byte, record.HeaderSize)...)
	b = append(b, encoded...)
	recs, err := decodeRecords(b)
	if err != nil || len(recs) != 1 {
		return nil, fmt.Errorf("decode record: %v", err)
	}
	return bytes.Clone(recs[0].Value), nil
}

func sameRecords(t testing.TB, what string, got, want []oracleRec) {
	t.Helper()
	if err := diffRecords(got, want); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func diffRecords(got, want []oracleRec) error {
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.offset != w.offset || !bytes.Equal(g.key, w.key) || (g.key == nil) != (w.key == nil) ||
			!bytes.Equal(g.value, w.value) || (g.value == nil) != (w.value == nil) {
			return fmt.Errorf("record %d: got %v, want %v", i, g, w)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d records, want %d", len(got), len(want))
	}
	return nil
}

// checkFetches fetches at random offsets as a consumer does (a fetch returns the batch holding
// the offset or the next one; the consumer skips records before the offset and continues after
// batches with nothing for it) and checks it lands on the next surviving record.
func checkFetches(t testing.TB, l *Log, want []oracleRec, rng *rand.Rand, samples int) {
	t.Helper()
	codec := testCodecs.Get().(*batchCodec)
	defer testCodecs.Put(codec)
	end := l.LogEndOffset()
	for range samples {
		o := l.LogStartOffset() + rng.Int64N(end-l.LogStartOffset())
		var next *oracleRec
		for i := range want {
			if want[i].offset >= o {
				next = &want[i]
				break
			}
		}
		var got *oracleRec
		for pos := o; got == nil && pos < end; {
			sl, err := l.Read(pos, 1, ReadUpToHighWatermark)
			if err != nil {
				t.Fatalf("fetch at %d: %v", pos, err)
			}
			if sl.Length == 0 {
				break
			}
			buf := make([]byte, sl.Length)
			_, _ = sl.File.ReadAt(buf, sl.Position)
			sl.Release()
			h, err := record.CheckStored(buf)
			if err != nil {
				t.Fatalf("fetch at %d: %v", pos, err)
			}
			if h.LastOffset() < pos {
				t.Fatalf("fetch at %d returned batch %d..%d", pos, h.BaseOffset, h.LastOffset())
			}
			data, err := codec.records(buf, &h, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			for len(data) > 0 {
				r, n, _ := nextRecord(data)
				data = data[n:]
				if off := h.BaseOffset + r.offsetDelta; off >= o {
					got = &oracleRec{offset: off, key: bytes.Clone(r.key)}
					break
				}
			}
			pos = h.NextOffset()
		}
		switch {
		case next == nil && got != nil:
			t.Fatalf("fetch at %d found %v, want nothing", o, got)
		case next != nil && got == nil:
			t.Fatalf("fetch at %d found nothing, want %v", o, next)
		case next != nil && (got.offset != next.offset || !bytes.Equal(got.key, next.key)):
			t.Fatalf("fetch at %d found %v, want %v", o, got, next)
		}
	}
}

func openCompacted(t testing.TB, fsys vfs.FS, dir string, cfg Config, clean bool, rp int64) *Log {
	t.Helper()
	l, err := OpenLog(OpenOptions{FS: fsys, LogDir: NewLogDir(filepath.Dir(dir)), Dir: dir, Topic: "compacted", Config: cfg, CleanShutdown: clean, RecoveryPoint: rp})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return l
}

// sealAll rolls and flushes so that every record is in a sealed, durable segment.
func sealAll(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

func mustClean(t testing.TB, c *Cleaner, l *Log) CleanStats {
	t.Helper()
	st, err := c.Clean(l)
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	return st
}

func noLeftovers(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".cleaned") || strings.HasSuffix(e.Name(), ".swap") || strings.HasSuffix(e.Name(), ".deleted") {
			t.Fatalf("leftover %s in %s", e.Name(), dir)
		}
	}
}

func TestCleanerKeepsLatestPerKey(t *testing.T) {
	clock := newTestClock()
	dir := filepath.Join(t.TempDir(), "compacted-0")
	cfg := compactConfig(clock)
	cfg.CleanupPolicy = "delete" // keyless records first: the cleaner drops them once compacted
	l := openCompacted(t, vfs.OS, dir, cfg, true, 0)
	w := newWriter(t, l, clock, 1, 300)
	w.codecs, w.keyless, w.pid = true, true, 42
	w.batches(200)
	cfg.CleanupPolicy = "compact"
	l.SetConfig(cfg)
	w.keyless = false
	w.batches(600)
	sealAll(t, l)
	w.batches(20) // the active segment: never cleaned
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	before := l.Size()
	end := l.Segments()[len(l.Segments())-1].BaseOffset()
	pre, _ := storedRecords(t, l)
	sameRecords(t, "before cleaning", pre, w.all)

	c := NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20})
	st := mustClean(t, c, l)
	if st.EndOffset != end || st.FirstDirtyOffset != 0 || l.CleanerCheckpoint() != end {
		t.Fatalf("cleaned [%d, %d), checkpoint %d; want [0, %d)", st.FirstDirtyOffset, st.EndOffset, l.CleanerCheckpoint(), end)
	}
	want := expect(w.all, end, -1)
	got, hdrs := storedRecords(t, l)
	sameRecords(t, "after cleaning", got, want)
	if l.Size() >= before/2 {
		t.Errorf("log shrank from %d to %d bytes only", before, l.Size())
	}
	if l.LogEndOffset() != w.all[len(w.all)-1].offset+1 || l.LogStartOffset() != 0 {
		t.Fatalf("log start %d, end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	// The producer's last batch survives, at its offsets, even if cleaning emptied it.
	var pidLast int64 = -1
	for _, h := range hdrs {
		if h.ProducerID == 42 {
			pidLast = h.LastOffset()
		}
	}
	if want := l.producerLastOffsets()[42]; pidLast != want {
		t.Fatalf("producer 42's last batch ends at %d in the log, the producer table says %d", pidLast, want)
	}
	checkFetches(t, l, want, rand.New(rand.NewPCG(2, 2)), 100)
	noLeftovers(t, dir)

	// Cleaning again with nothing dirty changes nothing (the tombstones are within their horizon).
	mustClean(t, c, l)
	got, _ = storedRecords(t, l)
	sameRecords(t, "after a second cleaning", got, want)

	// The cleaned log survives a clean restart, and a crash (every segment recovered).
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, clean := range []bool{true, false} {
		l = openCompacted(t, vfs.OS, dir, cfg, clean, 0)
		got, _ = storedRecords(t, l)
		sameRecords(t, fmt.Sprintf("reopened (clean shutdown %v)", clean), got, want)
		checkFetches(t, l, want, rand.New(rand.NewPCG(3, 3)), 50)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCleanerTombstonesExpireAfterDeleteRetention(t *testing.T) {
	clock := newTestClock()
	dir := filepath.Join(t.TempDir(), "compacted-0")
	cfg := compactConfig(clock)
	cfg.DeleteRetentionMs = 10_000
	l := openCompacted(t, vfs.OS, dir, cfg, true, 0)
	defer l.Close()
	w := newWriter(t, l, clock, 4, 100)
	w.deletes = 0.4
	w.batches(400)
	sealAll(t, l)
	c := NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20})
	end1 := mustClean(t, c, l).EndOffset
	want := expect(w.all, end1, -1)
	got, _ := storedRecords(t, l)
	sameRecords(t, "first cleaning keeps tombstones", got, want)
	tombstones := 0
	for _, r := range got {
		if r.value == nil {
			tombstones++
		}
	}
	if tombstones == 0 {
		t.Fatal("no tombstone survived the first cleaning")
	}

	// Before the horizon a cleaning keeps them; after it, it drops those it reached first.
	clock.advance(9 * time.Second)
	w.batches(100)
	sealAll(t, l)
	end2 := mustClean(t, c, l).EndOffset
	got, _ = storedRecords(t, l)
	sameRecords(t, "before the delete horizon", got, expect(w.all, end2, -1))
	clock.advance(2 * time.Second)
	w.batches(50)
	sealAll(t, l)
	end3 := mustClean(t, c, l).EndOffset
	got, _ = storedRecords(t, l)
	sameRecords(t, "after the first delete horizon", got, expect(w.all, end3, end1))
	clock.advance(time.Minute)
	mustClean(t, c, l)
	got, _ = storedRecords(t, l)
	sameRecords(t, "after every delete horizon", got, expect(w.all, end3, end3))
	for _, r := range got {
		if r.value == nil && r.offset < end3 {
			t.Fatalf("tombstone %v survived its delete horizon", r)
		}
	}
	// Record timestamps survive the delete-horizon rewrite.
	checkFetches(t, l, expect(w.all, end3, end3), rand.New(rand.NewPCG(5, 5)), 100)
}

// A cleaning whose offset map holds fewer keys than the dirty section needs as many passes as it
// takes, each advancing the checkpoint, and ends with the same log as one big pass.
func TestCleanerSmallOffsetMapCleansInPasses(t *testing.T) {
	clock := newTestClock()
	dir := filepath.Join(t.TempDir(), "compacted-0")
	l := openCompacted(t, vfs.OS, dir, compactConfig(clock), true, 0)
	defer l.Close()
	w := newWriter(t, l, clock, 6, 1000)
	w.batches(500)
	sealAll(t, l)
	end := l.LogEndOffset()
	c := NewCleaner(CleanerConfig{DedupeBufferSize: 400 * offsetMapSlotBytes})
	if c.MapCapacity() != 360 {
		t.Fatalf("map capacity %d", c.MapCapacity())
	}
	passes := 0
	for l.CleanerCheckpoint() < end {
		before := l.CleanerCheckpoint()
		st := mustClean(t, c, l)
		passes++
		if st.EndOffset <= before || st.MapKeys > c.MapCapacity() {
			t.Fatalf("pass %d: checkpoint %d -> %d with %d keys", passes, before, st.EndOffset, st.MapKeys)
		}
		// Between passes the log is correct for what was cleaned so far.
		got, _ := storedRecords(t, l)
		sameRecords(t, fmt.Sprintf("after pass %d", passes), got, expect(w.all, st.EndOffset, -1))
	}
	if passes < 3 {
		t.Fatalf("%d passes; the map should have filled", passes)
	}
	got, _ := storedRecords(t, l)
	sameRecords(t, "after every pass", got, expect(w.all, end, -1))
}

func TestCleanerRefusesKeylessRecordsOnCompactedTopic(t *testing.T) {
	clock := newTestClock()
	cfg := compactConfig(clock)
	l := openCompacted(t, vfs.OS, filepath.Join(t.TempDir(), "compacted-0"), cfg, true, 0)
	defer l.Close()
	w := newWriter(t, l, clock, 8, 10)
	opts := record.BuildOptions{BaseTimestamp: clock.now().UnixMilli(), ProducerID: -1, BaseSequence: -1}
	keyless := []record.Record{{Key: []byte("k"), Value: []byte("v")}, {Value: []byte("no key")}}
	for codec := range 5 {
		if _, err := l.Append(w.build(opts, keyless, codec)); !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("codec %d: keyless record appended: %v", codec, err)
		}
		if _, err := l.Append(w.build(opts, keyless[:1], codec)); err != nil {
			t.Fatalf("codec %d: keyed record refused: %v", codec, err)
		}
	}
	// A compressed batch whose records would decompress past the bound is refused.
	bomb := []record.Record{{Key: []byte("k"), Value: make([]byte, decompressLimit(&cfg)+1)}}
	if _, err := l.Append(w.build(opts, bomb, 4)); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("decompression bomb: %v", err)
	}
	if l.LogEndOffset() != 5 {
		t.Fatalf("log end %d, want 5", l.LogEndOffset())
	}
	// Under cleanup.policy=delete a keyless record is fine.
	cfg.CleanupPolicy = "delete"
	l.SetConfig(cfg)
	if _, err := l.Append(w.build(opts, keyless, 0)); err != nil {
		t.Fatal(err)
	}
}

// A batch some records are removed from is re-encoded with its own codec, keeping its offsets,
// producer fields and every kept record.
func TestCleanerRewritesEveryCodec(t *testing.T) {
	clock := newTestClock()
	l := openCompacted(t, vfs.OS, filepath.Join(t.TempDir(), "compacted-0"), compactConfig(clock), true, 0)
	defer l.Close()
	w := newWriter(t, l, clock, 17, 10)
	var all []oracleRec
	for codec := range 5 {
		for round := range 2 {
			recs := []record.Record{
				{Key: []byte(fmt.Sprint("stays-", codec, "-", round)), Value: []byte("v")},
				{Key: []byte(fmt.Sprint("overwritten-", codec)), Value: []byte(fmt.Sprint(round))},
				{Key: []byte(fmt.Sprint("deleted-", codec))},
			}
			opts := record.BuildOptions{BaseTimestamp: clock.now().UnixMilli(), ProducerID: 5, BaseSequence: int32(len(all))}
			info, err := l.Append(w.build(opts, recs, codec))
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range recs {
				all = append(all, oracleRec{offset: info.BaseOffset + int64(i), key: r.Key, value: r.Value})
			}
		}
	}
	sealAll(t, l)
	_, before := storedRecords(t, l)
	mustClean(t, NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20}), l)
	got, after := storedRecords(t, l)
	sameRecords(t, "cleaned", got, expect(all, l.LogEndOffset(), -1))
	if len(after) != len(before) {
		t.Fatalf("%d batches before, %d after", len(before), len(after))
	}
	for i, h := range after {
		b := before[i]
		if h.BaseOffset != b.BaseOffset || h.LastOffset() != b.LastOffset() || h.Compression() != b.Compression() ||
			h.ProducerID != b.ProducerID || h.BaseSequence != b.BaseSequence ||
			(h.Attributes&deleteHorizonFlag != 0) != (i%2 == 1) { // only the second round keeps a tombstone
			t.Fatalf("batch %d: before %+v, after %+v", i, b, h)
		}
	}
}

// cleanup.policy=compact,delete applies retention and compaction; compact alone no retention.
func TestCleanerCompactDelete(t *testing.T) {
	for _, policy := range []string{"compact", "compact,delete", "delete , compact"} {
		t.Run(policy, func(t *testing.T) {
			clock := newTestClock()
			cfg := compactConfig(clock)
			cfg.CleanupPolicy = policy
			cfg.RetentionMs = 60_000
			l := openCompacted(t, vfs.OS, filepath.Join(t.TempDir(), "compacted-0"), cfg, true, 0)
			defer l.Close()
			w := newWriter(t, l, clock, 9, 200)
			w.batches(300)
			sealAll(t, l)
			clock.advance(2 * time.Minute)
			old := l.LogEndOffset()
			w.batches(300)
			sealAll(t, l)
			n, err := l.DeleteExpiredSegments()
			if err != nil {
				t.Fatal(err)
			}
			deletes := cfg.PolicyDelete()
			if deletes != (n > 0) || deletes != (l.LogStartOffset() == old) {
				t.Fatalf("retention deleted %d segments, log start %d (delete policy %v)", n, l.LogStartOffset(), deletes)
			}
			mustClean(t, NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20}), l)
			var kept []oracleRec
			for _, r := range w.all {
				if r.offset >= l.LogStartOffset() {
					kept = append(kept, r)
				}
			}
			got, _ := storedRecords(t, l)
			sameRecords(t, "cleaned", got, expect(kept, l.LogEndOffset(), -1))
		})
	}
}

// A truncation while a cleaning runs makes the swap give up; the cleaned files are removed.
func TestCleanerAbortsOnTruncation(t *testing.T) {
	clock := newTestClock()
	dir := filepath.Join(t.TempDir(), "compacted-0")
	l := openCompacted(t, vfs.OS, dir, compactConfig(clock), true, 0)
	defer l.Close()
	w := newWriter(t, l, clock, 12, 50)
	w.batches(300)
	sealAll(t, l)
	cut := l.Segments()[1].BaseOffset() + 1
	c := NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20})
	c.testHook = func(step string) error {
		if step == "cleaned" {
			return l.TruncateTo(cut)
		}
		return nil
	}
	if _, err := c.Clean(l); !errors.Is(err, errCleanAborted) {
		t.Fatalf("clean across a truncation: %v", err)
	}
	noLeftovers(t, dir)
	got, _ := storedRecords(t, l)
	var want []oracleRec
	for _, r := range w.all {
		if r.offset < l.LogEndOffset() {
			want = append(want, r)
		}
	}
	sameRecords(t, "truncated, not cleaned", got, want)
}

// Readers and an appender run while cleanings swap segments: every read sees valid batches in
// offset order, every record it sees was written, and nothing written is lost.
func TestCleanerConcurrentReadersAndAppends(t *testing.T) {
	clock := newTestClock()
	dir := filepath.Join(t.TempDir(), "compacted-0")
	l := openCompacted(t, vfs.OS, dir, compactConfig(clock), true, 0)
	defer l.Close()
	w := newWriter(t, l, clock, 13, 100)
	w.batches(300)
	sealAll(t, l)
	var mu sync.Mutex // guards w.all for the readers
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, _, err := readStored(l)
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				mu.Lock()
				byOffset := make(map[int64]oracleRec, len(w.all))
				for _, x := range w.all {
					byOffset[x.offset] = x
				}
				mu.Unlock()
				for _, g := range got {
					if err := diffRecords([]oracleRec{g}, []oracleRec{byOffset[g.offset]}); err != nil {
						t.Errorf("reader %d: %v", r, err)
						return
					}
				}
			}
		}()
	}
	c := NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20})
	for range 5 {
		mu.Lock()
		w.batches(100)
		mu.Unlock()
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		mustClean(t, c, l)
	}
	close(stop)
	wg.Wait()
	end := l.Segments()[len(l.Segments())-1].BaseOffset()
	got, _ := storedRecords(t, l)
	sameRecords(t, "after concurrent cleaning", got, expect(w.all, min(end, l.CleanerCheckpoint()), -1))
}

func TestOffsetMap(t *testing.T) {
	m := newOffsetMap(100 * offsetMapSlotBytes)
	if m.capacity() != 90 {
		t.Fatalf("capacity %d", m.capacity())
	}
	for gen := range 300 { // past the generation wrap, with tables of every size up to the bound
		keys := int64(gen % 120)
		m.reset(keys)
		n := 0
		for ; ; n++ {
			ok, err := m.put([]byte(fmt.Sprint("k", n)), int64(gen*1000+n))
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
		}
		if n < int(min(keys, int64(m.capacity()))) || n > m.capacity() || !m.full() {
			t.Fatalf("gen %d: sized for %d keys, took %d", gen, keys, n)
		}
		if ok, _ := m.put([]byte("k0"), int64(gen*1000+999)); !ok {
			t.Fatal("a full map refused an update")
		}
		if ok, _ := m.put([]byte("k0"), 0); !ok || m.get([]byte("k0")) != int64(gen*1000+999) {
			t.Fatal("a lower offset replaced a higher one")
		}
		for i := 1; i < n; i++ {
			if got := m.get([]byte(fmt.Sprint("k", i))); got != int64(gen*1000+i) {
				t.Fatalf("gen %d: get k%d = %d", gen, i, got)
			}
		}
		if got := m.get([]byte("absent")); got != -1 {
			t.Fatalf("absent key: %d", got)
		}
	}
}

// The Manager's cleaner: RunCleaner cleans the compacted logs whose dirty ratio is high enough
// and writes cleaner-offset-checkpoint; the checkpoint is read back at open; the background
// thread cleans on its own.
func TestManagerCleaner(t *testing.T) {
	clock := newTestClock()
	dir := t.TempDir()
	ratio := 0.5
	configFor := func(topic string) Config {
		c := compactConfig(clock)
		c.MinCleanableDirtyRatio = ratio
		if topic == "plain" {
			c.CleanupPolicy = "delete"
		}
		return c
	}
	open := func(threads int) *Manager {
		m, err := OpenManager(ManagerConfig{Dirs: []string{dir}, ConfigFor: configFor, CleanerThreads: threads,
			CleanerBackoff: 5 * time.Millisecond, CleanerDedupeBufferSize: 1 << 20,
			RetentionCheckInterval: -1, CheckpointInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tp, plain := TopicPartition{"cmp", 0}, TopicPartition{"plain", 0}
	m := open(-1)
	l, err := m.CreateLog(tp, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := m.CreateLog(plain, [16]byte{2})
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, l, clock, 14, 100)
	w.batches(300)
	sealAll(t, l)
	pw := newWriter(t, pl, clock, 15, 100)
	pw.batches(100)
	sealAll(t, pl)
	if n, err := m.RunCleaner(); n != 1 || err != nil {
		t.Fatalf("RunCleaner: %d cleanings, %v", n, err)
	}
	end := l.LogEndOffset()
	got, _ := storedRecords(t, l)
	sameRecords(t, "cleaned by the manager", got, expect(w.all, end, -1))
	plainGot, _ := storedRecords(t, pl)
	sameRecords(t, "a delete-policy log", plainGot, pw.all)
	ckpt, err := ReadCheckpoint(filepath.Join(dir, CleanerCheckpointFile))
	if err != nil || ckpt[tp] != end || len(ckpt) != 1 {
		t.Fatalf("cleaner checkpoint %v (%v), want %s at %d", ckpt, err, tp, end)
	}
	// Below min.cleanable.dirty.ratio nothing is cleaned.
	w.batches(20)
	sealAll(t, l)
	if n, _ := m.RunCleaner(); n != 0 {
		t.Fatalf("cleaned a log below its dirty ratio")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	m = open(1)
	defer m.Close()
	l, _ = m.Log(tp)
	if l.CleanerCheckpoint() != end {
		t.Fatalf("cleaner checkpoint after reopen %d, want %d", l.CleanerCheckpoint(), end)
	}
	ratio = 0.01
	l.SetConfig(configFor(tp.Topic))
	w.l = l
	w.batches(100)
	sealAll(t, l)
	want := l.LogEndOffset()
	deadline := time.Now().Add(20 * time.Second)
	for l.CleanerCheckpoint() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the cleaner thread did not clean: checkpoint %d, want %d", l.CleanerCheckpoint(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got, _ = storedRecords(t, l)
	sameRecords(t, "cleaned by the cleaner thread", got, expect(w.all, want, -1))
}

// BenchmarkClean measures compaction throughput: the bytes of the segments cleaned per second
// (read, filtered, written, fdatasync'd and swapped), for 64 MiB of keyed 100-byte values (half
// random, half zeros: about 2:1 compressible), 20 records a batch, where each of 50,000 keys was
// written about ten times, uncompressed (codec=0) and zstd (codec=4).
func BenchmarkClean(b *testing.B) {
	for _, codec := range []int{0, 4} {
		b.Run(fmt.Sprintf("codec=%d", codec), func(b *testing.B) {
			clock := newTestClock()
			cfg := compactConfig(clock)
			cfg.SegmentBytes = 8 << 20
			cfg.MaxIndexBytes = 1 << 20
			cfg.IndexIntervalBytes = 4096
			src := filepath.Join(b.TempDir(), "compacted-0")
			l := openCompacted(b, vfs.OS, src, cfg, true, 0)
			w := newWriter(b, l, clock, 16, 50_000)
			w.deletes = 0.02
			for l.Size() < 64<<20 {
				n := 20
				recs := make([]record.Record, n)
				for i := range recs {
					v := make([]byte, 100)
					for j := range 50 {
						v[j] = byte(w.rng.Uint32())
					}
					recs[i] = record.Record{Key: []byte(fmt.Sprintf("key-%06d", w.rng.IntN(w.keys))), Value: v}
				}
				batch := w.build(record.BuildOptions{BaseTimestamp: clock.now().UnixMilli(), ProducerID: -1, BaseSequence: -1}, recs, codec)
				if _, err := l.Append(batch); err != nil {
					b.Fatal(err)
				}
			}
			sealAll(b, l)
			size := l.Size()
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			c := NewCleaner(CleanerConfig{})
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "compacted-0")
				copyLogDir(b, src, dir)
				l := openCompacted(b, vfs.OS, dir, cfg, true, 0)
				if err := l.Flush(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				st := mustClean(b, c, l)
				b.StopTimer()
				if st.Segments == 0 || st.BytesWritten >= size {
					b.Fatalf("cleaned %d segments, %d of %d bytes written", st.Segments, st.BytesWritten, size)
				}
				l.Close()
				b.StartTimer()
			}
		})
	}
}

func copyLogDir(tb testing.TB, from, to string) {
	tb.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		tb.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}
