package engine

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// The oracle: random operation sequences applied to the disk Log and to MemLog, every observable
// answer compared (STYLE.md "Oracles"; nats-server's testFileStoreAllPermutations for the matrix).
// Every configuration runs the same sequences (seeds oracle.seed, oracle.seed+1, ...). A failure
// prints its sequence's seed; rerun it alone with
//
//	go test ./engine -run 'TestOracle/<configuration>' -oracle.seed=<seed> -oracle.seqs=1 [-oracle.ops=<n>]
//
// and soak with -oracle.seed=0 (random) and larger -oracle.seqs / -oracle.ops.
var (
	oracleSeed = flag.Int64("oracle.seed", 1, "first sequence seed of TestOracle (0 = from the clock)")
	oracleSeqs = flag.Int("oracle.seqs", 0, "sequences per configuration in TestOracle (0 = default)")
	oracleOps  = flag.Int("oracle.ops", 300, "operations per sequence in TestOracle")
)

// orcBaseTime is the clock of every oracle log and the centre of the batches' timestamps.
var orcBaseTime = time.UnixMilli(1_700_000_000_000)

type orcConfig struct {
	name string
	cfg  Config
}

// orcConfigs is the disk Log's matrix: segment size x index interval (and index capacity) x
// acknowledgement policy.
func orcConfigs() []orcConfig {
	var out []orcConfig
	for _, seg := range []string{"seg=tiny", "seg=large"} {
		for _, idx := range []string{"idx=tiny", "idx=default"} {
			for _, ack := range []string{"durable", "pagecache"} {
				cfg := DefaultConfig()
				cfg.MaxMessageBytes = 48 << 10
				cfg.RetentionMs = -1
				cfg.RetentionBytes = -1
				if seg == "seg=tiny" {
					cfg.SegmentBytes = 24 << 10
					cfg.SegmentMs = 30 * 60 * 1000 // timestamps spread over hours: time-based rolls happen
				}
				if idx == "idx=tiny" {
					cfg.IndexIntervalBytes = 1  // an entry for every batch but a segment's first
					cfg.MaxIndexBytes = 40 * 12 // 40 time entries, 60 offset entries: index-full rolls
				}
				if ack == "pagecache" {
					cfg.FlushIntervalMessages = 1 << 40
				}
				cfg.Now = func() time.Time { return orcBaseTime }
				out = append(out, orcConfig{name: seg + "/" + idx + "/" + ack, cfg: cfg})
			}
		}
	}
	return out
}

// orcCode is the Kafka error code an error carries (0 for nil, -1 for an error without one).
func orcCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return -1
}

// orcSliceBytes reads a slice into memory and releases it.
func orcSliceBytes(t testing.TB, sl segment.Slice) []byte {
	t.Helper()
	defer sl.Release()
	if sl.Length == 0 {
		return nil
	}
	buf := make([]byte, sl.Length)
	n, err := sl.File.ReadAt(buf, sl.Position)
	if n != len(buf) {
		t.Fatalf("read slice [%d, +%d) of %s: %d bytes: %v", sl.Position, sl.Length, sl.File.Name(), n, err)
	}
	return buf
}

// orcBatches splits bytes read from a log into its complete batches (a cut last batch is dropped).
func orcBatches(b []byte) []record.Header {
	var out []record.Header
	for len(b) >= record.HeaderSize {
		h, err := record.ParseHeader(b)
		if err != nil || h.Size() > int64(len(b)) || h.BatchLength < record.HeaderSize-record.LogOverhead {
			break
		}
		out = append(out, h)
		b = b[h.Size():]
	}
	return out
}

// orcReadAll reads every complete batch from the log start up to the bound.
func orcReadAll(t testing.TB, pl PartitionLog, iso Isolation) []byte {
	t.Helper()
	var out []byte
	offset := pl.LogStartOffset()
	for {
		sl, err := pl.Read(offset, 64<<10, iso)
		if err != nil {
			t.Fatalf("read all at %d: %v", offset, err)
		}
		b := orcSliceBytes(t, sl)
		hs := orcBatches(b)
		if len(hs) == 0 {
			if len(b) != 0 {
				t.Fatalf("read all at %d: %d bytes without a whole batch", offset, len(b))
			}
			return out
		}
		for _, h := range hs {
			out = append(out, b[:h.Size()]...)
			b = b[h.Size():]
			offset = h.NextOffset()
		}
	}
}

// orcBatch builds a batch of 1-20 records with skewed value sizes (mostly small, up to 3000 B)
// and record timestamps from ts on (deltas up to a second).
func orcBatch(rng *rand.Rand, ts int64) []byte {
	recs := make([]record.Record, 1+rng.Intn(20))
	for i := range recs {
		n := 10 + rng.Intn(290)
		if rng.Intn(8) == 0 {
			n = 10 + rng.Intn(2990)
		}
		v := make([]byte, n)
		rng.Read(v)
		var key []byte
		if rng.Intn(3) > 0 {
			key = []byte(fmt.Sprintf("key-%d", rng.Intn(1000)))
		}
		recs[i] = record.Record{Key: key, Value: v, TimestampDelta: rng.Int63n(1000)}
	}
	return record.Build(nil, record.BuildOptions{BaseTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
}

// orcNoFlushFS is the real filesystem without the device flush: Sync and SyncDir return at once.
// The oracle puts a vfs.FaultFS on top, whose bookkeeping of what each Sync covered is what a
// simulated crash keeps, so durability is still checked while the sequences run at memory speed.
type orcNoFlushFS struct{ vfs.FS }

type orcNoFlushFile struct{ vfs.File }

func (f orcNoFlushFile) Sync() error { return nil }

func (fs orcNoFlushFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return orcNoFlushFile{f}, nil
}

func (orcNoFlushFS) SyncDir(string) error { return nil }

type oracleRun struct {
	t    *testing.T
	seed int64
	rng  *rand.Rand
	cfg  Config
	fsys *vfs.FaultFS
	dir  string
	disk *Log
	mem  *MemLog

	// lastTs is the timestamp of the last appended batch (timestamps drift, sometimes backwards).
	lastTs int64
	// ckptRP is the recovery point as a checkpoint would have it: written now and then, and
	// lowered on every truncation as Kafka's log manager does.
	ckptRP int64
	hist   []string
}

func (r *oracleRun) fatalf(format string, args ...any) {
	r.t.Helper()
	h := r.hist
	if len(h) > 25 {
		h = h[len(h)-25:]
	}
	var segs []string
	if r.disk != nil {
		for _, s := range r.disk.Segments() {
			segs = append(segs, fmt.Sprintf("[%d, %d) %d B", s.BaseOffset(), s.NextOffset(), s.Size()))
		}
	}
	r.t.Fatalf("seed %d: %s\ndisk segments: %s\nlast operations:\n  %s", r.seed, fmt.Sprintf(format, args...),
		strings.Join(segs, " "), strings.Join(h, "\n  "))
}

func (r *oracleRun) logf(format string, args ...any) {
	r.hist = append(r.hist, fmt.Sprintf(format, args...))
}

func (r *oracleRun) open(clean bool) {
	r.t.Helper()
	l, err := OpenLog(OpenOptions{
		FS: r.fsys, Dir: r.dir, Topic: "oracle", Config: r.cfg, CleanShutdown: clean,
		RecoveryPoint: r.ckptRP, LogStartOffset: r.mem.LogStartOffset(),
	})
	if err != nil {
		r.fatalf("open (clean=%v): %v", clean, err)
	}
	r.disk = l
}

// checkState compares the three offsets and checks the invariant.
func (r *oracleRun) checkState(what string) {
	r.t.Helper()
	d := [3]int64{r.disk.LogStartOffset(), r.disk.HighWatermark(), r.disk.LogEndOffset()}
	m := [3]int64{r.mem.LogStartOffset(), r.mem.HighWatermark(), r.mem.LogEndOffset()}
	if d != m {
		r.fatalf("after %s: disk (logStart, hw, leo) = %v, mem %v", what, d, m)
	}
	if !(d[0] <= d[1] && d[1] <= d[2]) {
		r.fatalf("after %s: invariant logStart <= hw <= leo broken: %v", what, d)
	}
	if rp := r.disk.RecoveryPoint(); rp > d[2] {
		r.fatalf("after %s: recovery point %d above log end %d", what, rp, d[2])
	}
}

// checkAll compares the whole content of both logs, up to the log end and up to the watermark.
func (r *oracleRun) checkAll(what string) {
	r.t.Helper()
	for _, iso := range []Isolation{ReadUpToLogEnd, ReadUpToHighWatermark} {
		d, m := orcReadAll(r.t, r.disk, iso), orcReadAll(r.t, r.mem, iso)
		if !bytes.Equal(d, m) {
			r.fatalf("after %s: whole log (isolation %d) differs: disk %d bytes, mem %d bytes", what, iso, len(d), len(m))
		}
	}
}

// randomOffset picks an offset around the interesting places of the log.
func (r *oracleRun) randomOffset() int64 {
	ls, hw, leo := r.mem.LogStartOffset(), r.mem.HighWatermark(), r.mem.LogEndOffset()
	switch k := r.rng.Intn(10); {
	case k < 4:
		return ls - 2 + r.rng.Int63n(leo-ls+5)
	case k < 7 && len(r.mem.batches) > 0:
		b := r.mem.batches[r.rng.Intn(len(r.mem.batches))].h
		return b.BaseOffset + r.rng.Int63n(int64(b.LastOffsetDelta)+1)
	default:
		c := []int64{ls, ls - 1, hw, hw - 1, hw + 1, leo, leo - 1, leo + 1}
		return c[r.rng.Intn(len(c))]
	}
}

func (r *oracleRun) nextTimestamp() int64 {
	if r.rng.Intn(5) == 0 {
		r.lastTs -= r.rng.Int63n(3600 * 1000) // backwards: producers' clocks need not agree
	} else {
		r.lastTs += r.rng.Int63n(600 * 1000)
	}
	return r.lastTs
}

func (r *oracleRun) opAppend() {
	b := orcBatch(r.rng, r.nextTimestamp())
	switch r.rng.Intn(40) {
	case 0:
		b[record.CRCOffset] ^= 0xff // CORRUPT_MESSAGE
	case 1:
		b[record.MagicOffset] = 1 // UNSUPPORTED_FOR_MESSAGE_FORMAT
	}
	b2 := append([]byte(nil), b...)
	di, derr := r.disk.Append(b)
	mi, merr := r.mem.Append(b2)
	r.logf("append %d B -> disk %+v %v | mem %+v %v", len(b), di, derr, mi, merr)
	if orcCode(derr) != orcCode(merr) {
		r.fatalf("append: disk error %v, mem error %v", derr, merr)
	}
	if derr != nil {
		return
	}
	if di.BaseOffset != mi.BaseOffset || di.LastOffset != mi.LastOffset || di.MaxTimestamp != mi.MaxTimestamp || di.Records != mi.Records {
		r.fatalf("append: disk %+v, mem %+v", di, mi)
	}
	if !bytes.Equal(b, b2) {
		r.fatalf("append: in-place offset assignment differs")
	}
	if err := r.disk.AwaitDurable(di.LastOffset + 1); err != nil {
		r.fatalf("await durable %d: %v", di.LastOffset+1, err)
	}
	if r.cfg.Durable() && r.disk.RecoveryPoint() < di.LastOffset+1 {
		r.fatalf("durable append acknowledged, recovery point %d < %d", r.disk.RecoveryPoint(), di.LastOffset+1)
	}
}

func (r *oracleRun) opAppendStored() {
	var buf []byte
	next := r.mem.LogEndOffset()
	n := 1 + r.rng.Intn(3)
	for i := 0; i < n; i++ {
		b := orcBatch(r.rng, r.nextTimestamp())
		base := next
		if i == n-1 && next > 0 && r.rng.Intn(6) == 0 {
			base = next - 1 // below the log end: INVALID_RECORD after the earlier batches went in
		}
		record.SetBaseOffset(b, base)
		record.SetPartitionLeaderEpoch(b, r.rng.Int31n(5))
		h, _ := record.ParseHeader(b)
		next = h.NextOffset()
		buf = append(buf, b...)
	}
	buf2 := append([]byte(nil), buf...)
	di, derr := r.disk.AppendStored(buf)
	mi, merr := r.mem.AppendStored(buf2)
	r.logf("appendStored %d batches -> disk %+v %v | mem %+v %v", n, di, derr, mi, merr)
	if orcCode(derr) != orcCode(merr) {
		r.fatalf("append stored: disk error %v, mem error %v", derr, merr)
	}
	if di.BaseOffset != mi.BaseOffset || di.LastOffset != mi.LastOffset || di.MaxTimestamp != mi.MaxTimestamp || di.Records != mi.Records {
		r.fatalf("append stored: disk %+v, mem %+v", di, mi)
	}
	if err := r.disk.AwaitDurable(r.disk.LogEndOffset()); err != nil {
		r.fatalf("await durable: %v", err)
	}
}

func (r *oracleRun) opRead() {
	offset := r.randomOffset()
	var maxBytes int64
	switch r.rng.Intn(4) {
	case 0:
		maxBytes = r.rng.Int63n(3) - 1 // -1, 0, 1: still one whole batch
	case 1:
		maxBytes = r.rng.Int63n(4 << 10)
	case 2:
		maxBytes = r.rng.Int63n(200 << 10)
	default:
		maxBytes = 1 << 20
	}
	iso := Isolation(r.rng.Intn(2))
	ds, derr := r.disk.Read(offset, maxBytes, iso)
	ms, merr := r.mem.Read(offset, maxBytes, iso)
	r.logf("read %d max %d iso %d -> disk %d B %v | mem %d B %v", offset, maxBytes, iso, ds.Length, derr, ms.Length, merr)
	if orcCode(derr) != orcCode(merr) {
		r.fatalf("read %d (max %d, isolation %d): disk error %v, mem error %v", offset, maxBytes, iso, derr, merr)
	}
	if derr != nil {
		if orcCode(derr) != kerr.OffsetOutOfRange.Code {
			r.fatalf("read %d: unexpected error %v", offset, derr)
		}
		return
	}
	d, m := orcSliceBytes(r.t, ds), orcSliceBytes(r.t, ms)
	r.compareRead(offset, maxBytes, iso, d, m)
}

// compareRead checks a disk read against the reference: the same bytes, except that the disk
// read may stop earlier at a segment boundary, after at least one whole batch.
func (r *oracleRun) compareRead(offset, maxBytes int64, iso Isolation, d, m []byte) {
	r.t.Helper()
	what := fmt.Sprintf("read %d (max %d, isolation %d)", offset, maxBytes, iso)
	if len(m) == 0 {
		if len(d) != 0 {
			r.fatalf("%s: disk returned %d bytes, mem none", what, len(d))
		}
		return
	}
	if len(d) > len(m) || !bytes.Equal(d, m[:len(d)]) {
		r.fatalf("%s: disk bytes (%d) are not a prefix of mem bytes (%d)", what, len(d), len(m))
	}
	first, _ := record.ParseHeader(m)
	if first.LastOffset() < offset {
		r.fatalf("%s: mem read starts with batch [%d, %d]", what, first.BaseOffset, first.LastOffset())
	}
	if int64(len(d)) < first.Size() {
		r.fatalf("%s: disk returned %d bytes, less than the first batch (%d)", what, len(d), first.Size())
	}
	if len(d) == len(m) {
		return
	}
	// A shorter disk read must end exactly where a segment ends.
	var pos int64
	for _, h := range orcBatches(m) {
		pos += h.Size()
		if pos == int64(len(d)) {
			next := h.NextOffset()
			for _, s := range r.disk.Segments() {
				if s.BaseOffset() == next {
					return
				}
			}
			r.fatalf("%s: disk read stopped at offset %d (%d of %d bytes), not a segment boundary", what, next, len(d), len(m))
		}
	}
	r.fatalf("%s: disk read of %d bytes (mem %d) ends inside a batch", what, len(d), len(m))
}

func (r *oracleRun) opSetHW() {
	offset := r.randomOffset()
	derr := r.disk.SetHighWatermark(offset)
	merr := r.mem.SetHighWatermark(offset)
	r.logf("setHW %d -> disk %d %v | mem %d %v", offset, r.disk.HighWatermark(), derr, r.mem.HighWatermark(), merr)
	if derr != nil || merr != nil {
		r.fatalf("set high watermark %d: disk %v, mem %v", offset, derr, merr)
	}
}

func (r *oracleRun) opTruncate() {
	ls, leo := r.mem.LogStartOffset(), r.mem.LogEndOffset()
	var offset int64
	if r.rng.Intn(3) == 0 {
		offset = ls - 2 + r.rng.Int63n(leo-ls+4)
	} else {
		offset = leo - r.rng.Int63n(min(leo-ls, 60)+2) // a diverged tail
	}
	derr := r.disk.TruncateTo(offset)
	merr := r.mem.TruncateTo(offset)
	r.logf("truncate %d -> disk %v | mem %v", offset, derr, merr)
	if derr != nil || merr != nil {
		r.fatalf("truncate to %d: disk %v, mem %v", offset, derr, merr)
	}
	r.ckptRP = min(r.ckptRP, r.disk.RecoveryPoint())
}

func (r *oracleRun) opDeleteRecords() {
	ls, hw := r.mem.LogStartOffset(), r.mem.HighWatermark()
	offset := ls - 1 + r.rng.Int63n(hw-ls+4)
	if r.rng.Intn(3) == 0 && len(r.mem.batches) > 0 {
		offset = r.mem.batches[r.rng.Intn(len(r.mem.batches))].h.BaseOffset
	}
	dls, derr := r.disk.DeleteRecordsBefore(offset)
	mls, merr := r.mem.DeleteRecordsBefore(offset)
	r.logf("deleteRecordsBefore %d -> disk %d %v | mem %d %v", offset, dls, derr, mls, merr)
	if orcCode(derr) != orcCode(merr) || dls != mls {
		r.fatalf("delete records before %d: disk (%d, %v), mem (%d, %v)", offset, dls, derr, mls, merr)
	}
}

func (r *oracleRun) opOffsetForTimestamp() {
	ts := r.lastTs - r.rng.Int63n(4*3600*1000) + 3600*1000
	if r.rng.Intn(3) == 0 && len(r.mem.batches) > 0 {
		ts = r.mem.batches[r.rng.Intn(len(r.mem.batches))].h.MaxTimestamp + r.rng.Int63n(3) - 1
	}
	do, dts, derr := r.disk.OffsetForTimestamp(ts)
	mo, mts, merr := r.mem.OffsetForTimestamp(ts)
	r.logf("offsetForTimestamp %d -> disk (%d, %d) %v | mem (%d, %d) %v", ts, do, dts, derr, mo, mts, merr)
	if do != mo || dts != mts || derr != nil || merr != nil {
		r.fatalf("offset for timestamp %d: disk (%d, %d, %v), mem (%d, %d, %v)", ts, do, dts, derr, mo, mts, merr)
	}
}

func (r *oracleRun) opRetention() {
	before := r.disk.LogStartOffset()
	n, err := r.disk.DeleteExpiredSegments()
	after := r.disk.LogStartOffset()
	r.logf("retention -> %d segments, log start %d -> %d, %v", n, before, after, err)
	if err != nil {
		r.fatalf("retention: %v", err)
	}
	if after < before || after > r.mem.HighWatermark() {
		r.fatalf("retention moved the log start from %d to %d (high watermark %d)", before, after, r.mem.HighWatermark())
	}
	if after == before {
		return
	}
	// Whole segments only: the new log start is a batch boundary of the reference.
	i := r.mem.firstReachingLocked(after)
	if after != r.mem.LogEndOffset() && (i == len(r.mem.batches) || r.mem.batches[i].h.BaseOffset != after) {
		r.fatalf("retention moved the log start to %d, not a batch boundary", after)
	}
	r.mem.mu.Lock()
	r.mem.advanceLogStartLocked(after)
	r.mem.mu.Unlock()
}

// reopen closes the disk log and opens it again: cleanly, uncleanly (the recovery point from the
// checkpoint, nothing lost), or after a simulated power loss (unsynced bytes lost).
func (r *oracleRun) reopen(kind string) {
	leo := r.mem.LogEndOffset()
	durableBefore := r.disk.RecoveryPoint()
	var memAll []byte
	if kind == "crash" {
		memAll = orcReadAll(r.t, r.mem, ReadUpToLogEnd)
	}
	if kind == "crash" {
		if err := r.fsys.Crash(); err != nil {
			r.fatalf("crash: %v", err)
		}
		_ = r.disk.Close() // fails: its handles are from before the crash
	} else if err := r.disk.Close(); err != nil {
		r.fatalf("close: %v", err)
	}
	if kind == "clean" || kind == "unclean" {
		r.ckptRP = r.disk.RecoveryPoint() // written at shutdown
	}
	r.open(kind == "clean")
	newLEO := r.disk.LogEndOffset()
	r.logf("reopen %s -> log end %d (was %d, durable %d, recovery point %d)", kind, newLEO, leo, durableBefore, r.ckptRP)
	if kind == "crash" {
		r.afterCrash(memAll, leo, durableBefore)
	} else if newLEO != leo {
		r.fatalf("reopen %s: log end %d, want %d", kind, newLEO, leo)
	}
	// A log opens with its high watermark at the log end.
	if err := r.mem.SetHighWatermark(r.mem.LogEndOffset()); err != nil {
		r.fatalf("mem: %v", err)
	}
	r.ckptRP = min(r.ckptRP, r.disk.LogEndOffset())
	r.checkState("reopen " + kind)
	r.checkAll("reopen " + kind)
}

// afterCrash checks what survived a simulated power loss: the batches the disk log still has are
// the first batches of what was appended, byte for byte, reaching at least the recovery point of
// before the crash. A durable log lost nothing. A page-cache log may have lost any unsynced tail;
// when a segment lost its tail but the (empty) segment after it survived, the log end stays past
// a gap of lost offsets (Kafka's LogLoader keeps such a segment too: only a truncating recovery
// deletes the later ones). The oracle then truncates both logs to the surviving prefix.
func (r *oracleRun) afterCrash(memAll []byte, leo, durableBefore int64) {
	diskAll := orcReadAll(r.t, r.disk, ReadUpToLogEnd)
	if len(diskAll) > len(memAll) || !bytes.Equal(diskAll, memAll[:len(diskAll)]) {
		r.fatalf("after crash: the surviving %d bytes are not a prefix of the %d bytes appended", len(diskAll), len(memAll))
	}
	// prefixEnd is where the surviving batches end; with none left from the log start on, the
	// log start (a truncation to it may then go lower, to where the data really ends).
	prefixEnd, survived := r.disk.LogStartOffset(), false
	if hs := orcBatches(diskAll); len(hs) > 0 {
		prefixEnd, survived = hs[len(hs)-1].NextOffset(), true
	}
	newLEO := r.disk.LogEndOffset()
	if r.cfg.Durable() {
		if newLEO != leo || prefixEnd != leo {
			r.fatalf("durable log after crash: log end %d, batches up to %d, want %d", newLEO, prefixEnd, leo)
		}
		return
	}
	if durableBefore > r.mem.LogStartOffset() && prefixEnd < durableBefore {
		r.fatalf("after crash: batches survive up to %d, below the recovery point %d", prefixEnd, durableBefore)
	}
	if newLEO < prefixEnd || newLEO > leo {
		r.fatalf("after crash: log end %d outside [%d, %d]", newLEO, prefixEnd, leo)
	}
	if newLEO != prefixEnd {
		var segs []string
		for _, s := range r.disk.Segments() {
			segs = append(segs, fmt.Sprintf("[%d, %d) %d B", s.BaseOffset(), s.NextOffset(), s.Size()))
		}
		r.logf("crash left a gap: log end %d, batches up to %d, log start %d, segments %v; truncating", newLEO, prefixEnd, r.disk.LogStartOffset(), segs)
		if err := r.disk.TruncateTo(prefixEnd); err != nil {
			r.fatalf("truncate after crash: %v", err)
		}
		if got := r.disk.LogEndOffset(); got > prefixEnd || (survived && got != prefixEnd) {
			r.fatalf("truncate to %d after crash: log end %d", prefixEnd, got)
		}
		prefixEnd = r.disk.LogEndOffset()
	}
	m := r.mem
	m.mu.Lock()
	if prefixEnd <= m.logStart {
		// Everything from the log start on was lost: the log is empty, starting at its end.
		m.batches, m.logStart, m.hw, m.leo = nil, prefixEnd, prefixEnd, prefixEnd
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	if err := m.TruncateTo(prefixEnd); err != nil {
		r.fatalf("mem truncate: %v", err)
	}
}

func (r *oracleRun) run(ops int) {
	for step := 0; step < ops; step++ {
		switch k := r.rng.Intn(1000); {
		case k < 380:
			r.opAppend()
		case k < 430:
			r.opAppendStored()
		case k < 650:
			r.opRead()
		case k < 730:
			r.opSetHW()
		case k < 770:
			r.opTruncate()
		case k < 800:
			r.opDeleteRecords()
		case k < 860:
			r.opOffsetForTimestamp()
		case k < 890:
			r.logf("roll")
			if err := r.disk.Roll(); err != nil {
				r.fatalf("roll: %v", err)
			}
		case k < 910:
			r.ckptRP = r.disk.RecoveryPoint()
			r.logf("checkpoint recovery point %d", r.ckptRP)
		case k < 935:
			r.opRetention()
		case k < 950:
			r.checkAll("spot check")
		case k < 965:
			r.reopen("clean")
		case k < 980:
			r.reopen("unclean")
		default:
			r.reopen("crash")
		}
		r.checkState(r.hist[len(r.hist)-1])
	}
	r.checkAll("the last operation")
}

func runOracleSequence(t *testing.T, oc orcConfig, seed int64, ops int) {
	r := &oracleRun{t: t, seed: seed, rng: rand.New(rand.NewSource(seed)), fsys: vfs.NewFaultFS(orcNoFlushFS{vfs.OS})}
	r.cfg = oc.cfg
	r.lastTs = orcBaseTime.UnixMilli() - 3*3600*1000
	switch r.rng.Intn(4) { // retention settings vary per sequence
	case 1:
		r.cfg.RetentionBytes = 100 << 10
	case 2:
		r.cfg.RetentionMs = 2 * 3600 * 1000
	case 3:
		r.cfg.RetentionBytes, r.cfg.RetentionMs = 300<<10, 3600*1000
	}
	r.dir = filepath.Join(t.TempDir(), "oracle-0")
	mem, err := NewMemLog(r.cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.mem = mem
	r.open(true)
	defer func() {
		r.disk.Close()
		r.mem.Close()
	}()
	r.run(ops)
}

// TestOracle runs random operation sequences on the disk Log (every configuration of the matrix)
// and on MemLog and compares every answer: append results and in-place offsets, read bytes and
// errors for both isolations, offsets after watermark moves, truncations, record deletion and
// retention, timestamp lookups, and the whole content after clean and unclean reopens and
// simulated power losses (where the durable configurations must lose nothing).
func TestOracle(t *testing.T) {
	seqs := *oracleSeqs
	if seqs == 0 {
		seqs = 5 // 40 sequences over the matrix: a few seconds; -oracle.seqs for soaks
		if testing.Short() {
			seqs = 2
		}
	}
	seed := *oracleSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("first seed %d, %d sequences x %d operations per configuration", seed, seqs, *oracleOps)
	for _, oc := range orcConfigs() {
		t.Run(oc.name, func(t *testing.T) {
			t.Parallel()
			for i := 0; i < seqs; i++ { // the same sequences on every configuration
				runOracleSequence(t, oc, seed+int64(i), *oracleOps)
			}
		})
	}
}

// orcEachLog runs f on a MemLog and on a disk Log (small segments); roll forces a segment roll on
// the disk log and does nothing on the reference.
func orcEachLog(t *testing.T, f func(t *testing.T, pl PartitionLog, roll func())) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 256
	cfg.Now = func() time.Time { return orcBaseTime }
	t.Run("mem", func(t *testing.T) {
		m, err := NewMemLog(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		f(t, m, func() {})
	})
	t.Run("disk", func(t *testing.T) {
		l, err := OpenLog(OpenOptions{Dir: filepath.Join(t.TempDir(), "sem-0"), Topic: "sem", Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		f(t, l, func() {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// orcAppendN appends a batch of n small records with timestamps from ts and returns its info.
func orcAppendN(t *testing.T, pl PartitionLog, n int, ts int64) AppendInfo {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte(fmt.Sprintf("value-%d-%d", ts, i)), TimestampDelta: int64(i)}
	}
	info, err := pl.Append(record.Build(nil, record.BuildOptions{BaseTimestamp: ts, ProducerID: -1, BaseSequence: -1}, recs))
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return info
}

// orcReadBases returns the base offsets of the whole batches a read returns ("oor" for
// OFFSET_OUT_OF_RANGE).
func orcReadBases(t *testing.T, pl PartitionLog, offset, maxBytes int64, iso Isolation) string {
	t.Helper()
	sl, err := pl.Read(offset, maxBytes, iso)
	if orcCode(err) == kerr.OffsetOutOfRange.Code {
		return "oor"
	}
	if err != nil {
		t.Fatalf("read %d: %v", offset, err)
	}
	var out []string
	for _, h := range orcBatches(orcSliceBytes(t, sl)) {
		out = append(out, fmt.Sprint(h.BaseOffset))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func orcExpect[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// TestPartitionLogSemantics pins the PartitionLog semantics with fixed expectations, on both
// implementations (the oracle only proves they agree).
func TestPartitionLogSemantics(t *testing.T) {
	t.Run("reads", func(t *testing.T) {
		orcEachLog(t, func(t *testing.T, pl PartitionLog, roll func()) {
			for i := 0; i < 3; i++ { // [0,4] [5,9] [10,14]
				orcAppendN(t, pl, 5, 1000)
			}
			roll()
			orcAppendN(t, pl, 5, 1000) // [15,19], in a new segment on disk
			if err := pl.SetHighWatermark(15); err != nil {
				t.Fatal(err)
			}
			orcExpect(t, "read inside a batch", orcReadBases(t, pl, 7, 1<<20, ReadUpToHighWatermark), "[5 10]")
			orcExpect(t, "maxBytes 0 still returns a batch", orcReadBases(t, pl, 7, 0, ReadUpToHighWatermark), "[5]")
			orcExpect(t, "read at the watermark", orcReadBases(t, pl, 15, 1<<20, ReadUpToHighWatermark), "[]")
			orcExpect(t, "read past the watermark", orcReadBases(t, pl, 16, 1<<20, ReadUpToHighWatermark), "oor")
			orcExpect(t, "follower read past the watermark", orcReadBases(t, pl, 16, 1<<20, ReadUpToLogEnd), "[15]")
			orcExpect(t, "read at the log end", orcReadBases(t, pl, 20, 1<<20, ReadUpToLogEnd), "[]")
			orcExpect(t, "read past the log end", orcReadBases(t, pl, 21, 1<<20, ReadUpToLogEnd), "oor")
			orcExpect(t, "read below the log start", orcReadBases(t, pl, -1, 1<<20, ReadUpToLogEnd), "oor")
			// A cut last batch: the first batch whole, then part of the next.
			sl, err := pl.Read(0, 100, ReadUpToLogEnd)
			if err != nil {
				t.Fatal(err)
			}
			b := orcSliceBytes(t, sl)
			first, _ := record.ParseHeader(b)
			if int64(len(b)) != first.Size() {
				t.Errorf("read with maxBytes 100 < first batch %d returned %d bytes", first.Size(), len(b))
			}
			sl, err = pl.Read(0, first.Size()+10, ReadUpToLogEnd)
			if err != nil {
				t.Fatal(err)
			}
			if n := sl.Length; n != first.Size()+10 {
				t.Errorf("read with maxBytes first+10 returned %d bytes, want %d", n, first.Size()+10)
			}
			sl.Release()
		})
	})
	t.Run("high watermark", func(t *testing.T) {
		orcEachLog(t, func(t *testing.T, pl PartitionLog, roll func()) {
			orcAppendN(t, pl, 5, 1000)
			orcAppendN(t, pl, 5, 1000)
			for _, c := range []struct{ set, want int64 }{{100, 10}, {7, 5}, {5, 5}, {-3, 0}, {10, 10}, {0, 0}} {
				if err := pl.SetHighWatermark(c.set); err != nil {
					t.Fatal(err)
				}
				orcExpect(t, fmt.Sprintf("high watermark set to %d", c.set), pl.HighWatermark(), c.want)
			}
			if err := pl.SetHighWatermark(10); err != nil {
				t.Fatal(err)
			}
			ls, err := pl.DeleteRecordsBefore(7) // the log start inside batch [5,9]
			orcExpect(t, "log start", ls, 7)
			orcExpect(t, "delete records error", err, nil)
			if err := pl.SetHighWatermark(8); err != nil {
				t.Fatal(err)
			}
			orcExpect(t, "high watermark inside the log start's batch", pl.HighWatermark(), 7)
			orcExpect(t, "read at the log start = watermark", orcReadBases(t, pl, 7, 1<<20, ReadUpToHighWatermark), "[]")
			orcExpect(t, "read below the log start", orcReadBases(t, pl, 6, 1<<20, ReadUpToLogEnd), "oor")
			orcExpect(t, "follower read at the log start", orcReadBases(t, pl, 7, 1<<20, ReadUpToLogEnd), "[5]")
			_, err = pl.DeleteRecordsBefore(8)
			orcExpect(t, "delete records past the watermark", orcCode(err), kerr.OffsetOutOfRange.Code)
			orcExpect(t, "log start after a refused delete", pl.LogStartOffset(), 7)
			_, err = pl.DeleteRecordsBefore(3)
			orcExpect(t, "log start never moves down", pl.LogStartOffset(), 7)
			orcExpect(t, "delete records below the log start", err, nil)
		})
	})
	t.Run("truncation", func(t *testing.T) {
		orcEachLog(t, func(t *testing.T, pl PartitionLog, roll func()) {
			orcAppendN(t, pl, 5, 1000) // [0,4]
			orcAppendN(t, pl, 5, 1000) // [5,9]
			roll()
			orcAppendN(t, pl, 5, 1000) // [10,14]
			orcAppendN(t, pl, 5, 1000) // [15,19]
			if err := pl.SetHighWatermark(20); err != nil {
				t.Fatal(err)
			}
			if err := pl.TruncateTo(17); err != nil {
				t.Fatal(err)
			}
			orcExpect(t, "log end after truncating inside a batch", pl.LogEndOffset(), 15)
			orcExpect(t, "high watermark follows the log end", pl.HighWatermark(), 15)
			if err := pl.TruncateTo(100); err != nil {
				t.Fatal(err)
			}
			orcExpect(t, "truncating past the end changes nothing", pl.LogEndOffset(), 15)
			// The watermark at a segment boundary; truncate there (the disk log deletes that
			// segment), then append again: a watermark-bounded read must still stop at 10.
			if err := pl.SetHighWatermark(10); err != nil {
				t.Fatal(err)
			}
			if err := pl.TruncateTo(10); err != nil {
				t.Fatal(err)
			}
			orcExpect(t, "log end", pl.LogEndOffset(), 10)
			orcExpect(t, "high watermark", pl.HighWatermark(), 10)
			orcAppendN(t, pl, 5, 1000) // [10,14] again
			orcExpect(t, "consumer read stops at the watermark", orcReadBases(t, pl, 0, 1<<20, ReadUpToHighWatermark), "[0 5]")
			orcExpect(t, "follower read", orcReadBases(t, pl, 0, 1<<20, ReadUpToLogEnd), "[0 5 10]")
			// Truncating below the log start truncates to it; the batch holding it goes whole.
			if err := pl.SetHighWatermark(15); err != nil {
				t.Fatal(err)
			}
			if _, err := pl.DeleteRecordsBefore(7); err != nil {
				t.Fatal(err)
			}
			if err := pl.TruncateTo(2); err != nil {
				t.Fatal(err)
			}
			orcExpect(t, "log end", pl.LogEndOffset(), 5)
			orcExpect(t, "log start follows the log end down", pl.LogStartOffset(), 5)
			orcExpect(t, "high watermark", pl.HighWatermark(), 5)
			info := orcAppendN(t, pl, 2, 1000)
			orcExpect(t, "next append's offset", info.BaseOffset, 5)
		})
	})
	t.Run("timestamps", func(t *testing.T) {
		orcEachLog(t, func(t *testing.T, pl PartitionLog, roll func()) {
			orcAppendN(t, pl, 5, 5000) // [0,4] max 5004
			orcAppendN(t, pl, 5, 1000) // [5,9] max 1004: clocks need not agree
			roll()
			orcAppendN(t, pl, 5, 3000) // [10,14] max 3004
			orcAppendN(t, pl, 5, 9000) // [15,19] max 9004
			type answer struct{ offset, ts int64 }
			lookup := func(ts int64) answer {
				o, mts, err := pl.OffsetForTimestamp(ts)
				if err != nil {
					t.Fatal(err)
				}
				return answer{o, mts}
			}
			orcExpect(t, "lookup 0", lookup(0), answer{0, 5004})
			orcExpect(t, "lookup 5004", lookup(5004), answer{0, 5004})
			orcExpect(t, "lookup 5005", lookup(5005), answer{15, 9004})
			orcExpect(t, "lookup past every batch", lookup(9005), answer{-1, -1})
			if err := pl.SetHighWatermark(20); err != nil {
				t.Fatal(err)
			}
			if _, err := pl.DeleteRecordsBefore(7); err != nil {
				t.Fatal(err)
			}
			// Batch [0,4] is below the log start now: it no longer answers.
			orcExpect(t, "lookup 2000 after delete", lookup(2000), answer{10, 3004})
			orcExpect(t, "lookup 1000 after delete", lookup(1000), answer{7, 1004})
		})
	})
	t.Run("stored batches", func(t *testing.T) {
		orcEachLog(t, func(t *testing.T, pl PartitionLog, roll func()) {
			var buf []byte
			for _, base := range []int64{0, 10, 30} { // gaps, as a compacted leader has them
				b := orcSmallBatch(3, 1000+base)
				record.SetBaseOffset(b, base)
				record.SetPartitionLeaderEpoch(b, 3)
				buf = append(buf, b...)
			}
			info, err := pl.AppendStored(buf)
			if err != nil {
				t.Fatal(err)
			}
			orcExpect(t, "last stored batch", info.BaseOffset, 30)
			orcExpect(t, "log end", pl.LogEndOffset(), 33)
			if err := pl.SetHighWatermark(20); err != nil { // in the gap [13, 30)
				t.Fatal(err)
			}
			orcExpect(t, "high watermark in a gap", pl.HighWatermark(), 20)
			orcExpect(t, "read in a gap", orcReadBases(t, pl, 5, 1<<20, ReadUpToLogEnd), "[10 30]")
			orcExpect(t, "read just before a batch after a gap", orcReadBases(t, pl, 29, 1<<20, ReadUpToLogEnd), "[30]")
			orcExpect(t, "consumer read in the gap below the watermark", orcReadBases(t, pl, 15, 1<<20, ReadUpToHighWatermark), "[]")
			orcExpect(t, "consumer read", orcReadBases(t, pl, 0, 1<<20, ReadUpToHighWatermark), "[0 10]")
			last := pl.LogEndOffset()
			b := orcSmallBatch(2, 2000)
			record.SetBaseOffset(b, last-1)
			_, err = pl.AppendStored(b)
			orcExpect(t, "stored batch below the log end", orcCode(err), kerr.InvalidRecord.Code)
			orcExpect(t, "log end unchanged", pl.LogEndOffset(), last)
		})
	})
	t.Run("closed", func(t *testing.T) {
		orcEachLog(t, func(t *testing.T, pl PartitionLog, roll func()) {
			orcAppendN(t, pl, 1, 1000)
			if err := pl.Close(); err != nil {
				t.Fatal(err)
			}
			_, err := pl.Append(orcSmallBatch(1, 1000))
			orcExpect(t, "append after close", orcCode(err), kerr.NotLeaderForPartition.Code)
			orcExpect(t, "truncate after close", orcCode(pl.TruncateTo(0)), kerr.NotLeaderForPartition.Code)
		})
	})
}

// orcSmallBatch builds a batch of n one-byte records with timestamps from ts.
func orcSmallBatch(n int, ts int64) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte{byte(i)}, TimestampDelta: int64(i)}
	}
	return record.Build(nil, record.BuildOptions{BaseTimestamp: ts, ProducerID: -1, BaseSequence: -1}, recs)
}

// TestAwaitDurableAfterTruncate: an appender waiting for the durability of offsets that a
// truncation removes (a follower truncating to its new leader) is answered, not left waiting for
// offsets that may never come back.
func TestAwaitDurableAfterTruncate(t *testing.T) {
	for _, durable := range []bool{true, false} {
		cfg := DefaultConfig()
		if !durable {
			cfg.FlushIntervalMessages = 1 << 40 // nothing synced before the truncation
		}
		l, err := OpenLog(OpenOptions{Dir: filepath.Join(t.TempDir(), "await-0"), Topic: "await", Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		orcAppendN(t, l, 3, 1000)
		info := orcAppendN(t, l, 5, 1000)
		if err := l.TruncateTo(info.BaseOffset); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- l.WaitFlushed(info.LastOffset + 1) }()
		select {
		case err := <-done:
			if orcCode(err) != kerr.NotLeaderForPartition.Code {
				t.Fatalf("durable=%v: wait for truncated offsets: %v, want NOT_LEADER_OR_FOLLOWER", durable, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("durable=%v: waiting for truncated offsets still blocked after 10s", durable)
		}
		// Offsets still there are waited for as before.
		if err := l.WaitFlushed(info.BaseOffset); err != nil {
			t.Fatalf("durable=%v: %v", durable, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
