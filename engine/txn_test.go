package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// txnBatch builds a transactional batch of n records from producer pid.
func txnBatch(pid int64, epoch int16, seq int32, n int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte("k"), Value: []byte("v")}
	}
	return record.Build(nil, record.BuildOptions{ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq,
		Attributes: record.AttrTransactional}, recs)
}

func openTxnLog(t *testing.T, dir string, clean bool) *Log {
	t.Helper()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 10
	l, err := OpenLog(OpenOptions{Dir: dir, Topic: "t", Config: cfg, CleanShutdown: clean})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustAppend(t *testing.T, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
		t.Fatal(err)
	}
	return info
}

func mustMarker(t *testing.T, l *Log, pid int64, epoch int16, commit bool) AppendInfo {
	t.Helper()
	info, err := l.AppendMarker(pid, epoch, 0, commit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
		t.Fatal(err)
	}
	return info
}

func TestTxnMarkersLSOAndAbortedIndex(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := openTxnLog(t, dir, false)
	a1 := mustAppend(t, l, txnBatch(1, 0, 0, 3)) // 0-2, producer 1's transaction
	mustAppend(t, l, offsetBatch(0, 2, 1000))    // 3-4, plain
	b1 := mustAppend(t, l, txnBatch(2, 0, 0, 2)) // 5-6, producer 2's transaction
	l.AdvanceHighWatermark(l.LogEndOffset())
	if lso := l.LastStableOffset(); lso != a1.BaseOffset {
		t.Fatalf("LSO %d, want %d", lso, a1.BaseOffset)
	}
	// A non-transactional batch of producer 1 during its transaction: INVALID_TXN_STATE.
	plain := record.Build(nil, record.BuildOptions{ProducerID: 1, BaseSequence: 3}, []record.Record{{Key: []byte("k")}})
	if _, err := l.Append(plain); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("plain batch during a transaction: %v", err)
	}
	// Abort producer 1: its marker at 7; the LSO stays until the high watermark passes it.
	m1 := mustMarker(t, l, 1, 0, false)
	if lso := l.LastStableOffset(); lso != 0 {
		t.Fatalf("LSO before the HW passes the marker: %d", lso)
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
	if lso := l.LastStableOffset(); lso != b1.BaseOffset {
		t.Fatalf("LSO %d, want %d (producer 2 ongoing)", lso, b1.BaseOffset)
	}
	// An older coordinator epoch is fenced; an older producer epoch too.
	if _, err := l.AppendMarker(2, 0, 5, true, 0); err != nil {
		t.Fatal(err)
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
	mustAppend(t, l, txnBatch(2, 0, 2, 1))
	if _, err := l.AppendMarker(2, 0, 4, true, 0); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("older coordinator epoch: %v", err)
	}
	mustAppend(t, l, txnBatch(3, 5, 0, 1))
	if _, err := l.AppendMarker(3, 4, 0, true, 0); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("older producer epoch: %v", err)
	}
	if _, err := l.Append(txnBatch(3, 4, 1, 1)); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("fenced transactional batch: %v", err)
	}
	want := []AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: m1.BaseOffset, LastStableOffset: b1.BaseOffset}}
	got, err := l.AbortedTransactions(nil, 0, l.LastStableOffset())
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted %v %v, want %v", got, err, want)
	}
	if got, _ := l.AbortedTransactions(nil, m1.BaseOffset+1, l.LastStableOffset()); len(got) != 0 {
		t.Fatalf("aborted after the marker: %v", got)
	}
	// read_committed reads stop at the LSO.
	lso := l.LastStableOffset()
	sl, err := l.Read(0, 1<<20, ReadCommitted)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	buf := make([]byte, sl.Length)
	if _, err := sl.File.ReadAt(buf, sl.Position); err != nil {
		t.Fatal(err)
	}
	sl.Release()
	for p := buf; len(p) > 0; {
		h, err := record.ParseHeader(p)
		if err != nil {
			t.Fatal(err)
		}
		end = h.NextOffset()
		p = p[h.Size():]
	}
	if end != lso {
		t.Fatalf("read_committed read ends at %d, LSO %d", end, lso)
	}
	// .txnindex bytes: one 34-byte entry.
	b, err := os.ReadFile(filepath.Join(dir, segment.FileName(0, segment.TxnIndexSuffix)))
	if err != nil || len(b) != segment.TxnEntrySize {
		t.Fatalf("txnindex %x %v", b, err)
	}

	// Snapshot with ongoing transactions: a clean close and reopen keeps them.
	ongoing := l.Producers()
	lsoBefore := l.LastStableOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTxnLog(t, dir, true)
	if !reflect.DeepEqual(l.Producers(), ongoing) {
		t.Fatalf("producers after reopen %+v, want %+v", l.Producers(), ongoing)
	}
	if l.LastStableOffset() != lsoBefore {
		t.Fatalf("LSO after reopen %d, want %d", l.LastStableOffset(), lsoBefore)
	}
	// Truncation below the abort marker drops the .txnindex entry and reopens the transaction.
	if err := l.TruncateTo(m1.BaseOffset); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.AbortedTransactions(nil, 0, 1<<40); len(got) != 0 {
		t.Fatalf("aborted after truncation: %v", got)
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
	if l.LastStableOffset() != 0 {
		t.Fatalf("LSO after truncation %d", l.LastStableOffset())
	}
	l.Close()
}

func TestTxnRecoveryRebuildsIndexAndOngoing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := openTxnLog(t, dir, false)
	var aborted []AbortedTxn
	seqs := map[int64]int32{}
	var lastMarker, lastFirst int64
	for i := 0; i < 40; i++ { // several segments, aborts in each
		pid := int64(10 + i%3)
		info := mustAppend(t, l, txnBatch(pid, 0, seqs[pid], 2))
		mustAppend(t, l, txnBatch(pid, 0, seqs[pid]+2, 1))
		seqs[pid] += 3
		l.AdvanceHighWatermark(l.LogEndOffset())
		if i%2 == 0 {
			m := mustMarker(t, l, pid, 0, false)
			aborted = append(aborted, AbortedTxn{ProducerID: pid, FirstOffset: info.BaseOffset, LastOffset: m.BaseOffset})
		} else {
			lastMarker = mustMarker(t, l, pid, 0, true).BaseOffset
			lastFirst = info.BaseOffset
		}
		l.AdvanceHighWatermark(l.LogEndOffset())
	}
	open := mustAppend(t, l, txnBatch(99, 0, 0, 1)) // left ongoing by the "crash"
	l.AdvanceHighWatermark(l.LogEndOffset())
	want, _ := l.AbortedTransactions(nil, 0, 1<<40)
	if len(want) != len(aborted) {
		t.Fatalf("%d aborted entries, want %d", len(want), len(aborted))
	}
	// Crash with the files as they are, plus a stale entry (a marker the crash lost) in the last
	// segment's .txnindex, recovered from the last segment on: the entry goes.
	kept := filepath.Join(t.TempDir(), "t-0")
	os.MkdirAll(kept, 0o755)
	ents0, _ := os.ReadDir(dir)
	for _, e := range ents0 {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		os.WriteFile(filepath.Join(kept, e.Name()), b, 0o600)
	}
	lastBase := l.Segments()[len(l.Segments())-1].BaseOffset()
	stale := segment.AbortedTxn{ProducerID: 5, FirstOffset: l.LogEndOffset(), LastOffset: l.LogEndOffset() + 3, LastStableOffset: l.LogEndOffset() + 4}
	{
		f, err := os.OpenFile(filepath.Join(kept, segment.FileName(lastBase, segment.TxnIndexSuffix)), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		var b [segment.TxnEntrySize]byte
		binary.BigEndian.PutUint64(b[2:], uint64(stale.ProducerID))
		binary.BigEndian.PutUint64(b[10:], uint64(stale.FirstOffset))
		binary.BigEndian.PutUint64(b[18:], uint64(stale.LastOffset))
		binary.BigEndian.PutUint64(b[26:], uint64(stale.LastStableOffset))
		f.Write(b[:])
		f.Close()
	}
	k, err := OpenLog(OpenOptions{Dir: kept, Topic: "t", Config: l.Config(), RecoveryPoint: lastBase})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := k.AbortedTransactions(nil, 0, 1<<40); !reflect.DeepEqual(got, want) {
		t.Fatalf("recovered from the last segment: %v\nwant %v", got, want)
	}
	k.Close()

	// Crash: copy the files as they are (no clean close), losing every .txnindex and snapshot.
	crashed := filepath.Join(t.TempDir(), "t-0")
	os.MkdirAll(crashed, 0o755)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".txnindex" || filepath.Ext(e.Name()) == ".snapshot" {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		os.WriteFile(filepath.Join(crashed, e.Name()), b, 0o600)
	}
	l.Close()
	r := openTxnLog(t, crashed, false)
	defer r.Close()
	got, err := r.AbortedTransactions(nil, 0, 1<<40)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("rebuilt aborted %v %v\nwant %v", got, err, want)
	}
	if lso := r.LastStableOffset(); lso != open.BaseOffset {
		t.Fatalf("LSO after recovery %d, want %d", lso, open.BaseOffset)
	}
	// A high watermark restored below the last marker: its transaction, completed by the
	// replay, is not stable yet (Kafka's unreplicated transactions).
	if err := r.SetHighWatermark(lastMarker); err != nil {
		t.Fatal(err)
	}
	if lso := r.LastStableOffset(); lso != lastFirst {
		t.Fatalf("LSO with the high watermark at the last marker %d: %d, want %d", lastMarker, lso, lastFirst)
	}
	r.SetHighWatermark(r.LogEndOffset())
	found := false
	for _, p := range r.Producers() {
		if p.ProducerID == 99 && p.TxnStartOffset == open.BaseOffset {
			found = true
		}
	}
	if !found {
		t.Fatalf("ongoing transaction lost: %+v", r.Producers())
	}
}

// TestTxnCleanerAsKafka: compaction drops aborted transactions' records, compacts committed
// ones, keeps markers while their transaction has a batch left, then once more with a delete
// horizon, then drops them; the .txnindex follows the ABORT markers that stay.
func TestTxnCleanerAsKafka(t *testing.T) {
	clock := newTestClock()
	cfg := compactConfig(clock)
	dir := filepath.Join(t.TempDir(), "compacted-0")
	l := openCompacted(t, vfs.OS, dir, cfg, false, 0)
	defer l.Close()
	kv := func(k, v string) record.Record { return record.Record{Key: []byte(k), Value: []byte(v)} }
	plain := func(recs ...record.Record) {
		if _, err := l.Append(record.Build(nil, record.BuildOptions{ProducerID: -1, BaseSequence: -1}, recs)); err != nil {
			t.Fatal(err)
		}
	}
	txn := func(pid int64, seq int32, recs ...record.Record) {
		if _, err := l.Append(record.Build(nil, record.BuildOptions{ProducerID: pid, BaseSequence: seq, Attributes: record.AttrTransactional}, recs)); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(pid int64, commit bool) {
		if _, err := l.AppendMarker(pid, 0, 0, commit, 0); err != nil {
			t.Fatal(err)
		}
	}
	plain(kv("a", "1"), kv("b", "1")) // 0-1
	txn(7, 0, kv("a", "aborted"))     // 2: aborted (7's last batch: stays as a bare header)
	txn(8, 0, kv("b", "committed"))   // 3
	marker(7, false)                  // 4: stays (its transaction's header is left)
	marker(8, true)                   // 5: stays (b=committed is left)
	txn(9, 0, kv("c", "txn"))         // 6: committed, then superseded by c=3
	marker(9, true)                   // 7: goes once 6 is gone and the horizon passed
	txn(9, 1, kv("e", "1"))           // 8
	marker(9, true)                   // 9
	plain(kv("c", "3"))               // 10
	sealAll(t, l)
	plain(kv("z", "1")) // the active segment
	c := NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20})
	dump := func() (data []string, controls []int64, horizon map[int64]bool) {
		recs, hs := storedRecords(t, l)
		horizon = map[int64]bool{}
		for _, h := range hs {
			if h.IsControl() {
				controls = append(controls, h.BaseOffset)
				horizon[h.BaseOffset] = h.Attributes&deleteHorizonFlag != 0
			}
		}
		ctl := map[int64]bool{}
		for _, o := range controls {
			ctl[o] = true
		}
		for _, r := range recs {
			if !ctl[r.offset] {
				data = append(data, fmt.Sprintf("%d:%s=%s", r.offset, r.key, r.value))
			}
		}
		return data, controls, horizon
	}
	mustClean(t, c, l)
	data, controls, horizon := dump()
	if want := []string{"0:a=1", "3:b=committed", "8:e=1", "10:c=3", "11:z=1"}; !reflect.DeepEqual(data, want) {
		t.Fatalf("first cleaning kept %v, want %v", data, want)
	}
	if want := []int64{4, 5, 7, 9}; !reflect.DeepEqual(controls, want) || horizon[7] {
		t.Fatalf("first cleaning kept markers %v (horizons %v), want %v without horizons", controls, horizon, want)
	}
	got, _ := l.AbortedTransactions(nil, 0, 1<<40)
	if len(got) != 1 || got[0].ProducerID != 7 || got[0].FirstOffset != 2 || got[0].LastOffset != 4 {
		t.Fatalf("aborted after the first cleaning: %v", got)
	}
	// Second cleaning: 7's marker has no data of its transaction left: it gets its horizon.
	mustClean(t, c, l)
	_, controls, horizon = dump()
	if want := []int64{4, 5, 7, 9}; !reflect.DeepEqual(controls, want) || !horizon[7] || horizon[5] || horizon[9] {
		t.Fatalf("second cleaning: markers %v horizons %v", controls, horizon)
	}
	// After delete.retention.ms it goes.
	clock.advance(2 * time.Minute)
	mustClean(t, c, l)
	data, controls, _ = dump()
	if want := []int64{4, 5, 9}; !reflect.DeepEqual(controls, want) {
		t.Fatalf("after the horizon: markers %v, want %v", controls, want)
	}
	if want := []string{"0:a=1", "3:b=committed", "8:e=1", "10:c=3", "11:z=1"}; !reflect.DeepEqual(data, want) {
		t.Fatalf("after the horizon kept %v, want %v", data, want)
	}
	if got, _ := l.AbortedTransactions(nil, 0, 1<<40); len(got) != 1 || got[0].ProducerID != 7 {
		t.Fatalf("aborted after cleanings: %v", got)
	}
	noLeftovers(t, dir)
	// An open transaction bounds the cleanable section.
	txn(10, 0, kv("q", "open"))
	plain(kv("q", "later"))
	sealAll(t, l)
	plain(kv("y", "1"))
	r := l.cleanableRange(clock.now().UnixMilli())
	if r.end > l.LastStableOffset() {
		t.Fatalf("cleanable up to %d past the LSO %d", r.end, l.LastStableOffset())
	}
}

// TestTxnFollowerCopiesMarkers: a follower appending its leader's bytes (AppendStored, the
// replica fetcher's path) gets the same .txnindex files, producer state and last stable offset.
func TestTxnFollowerCopiesMarkers(t *testing.T) {
	base := t.TempDir()
	leader := openTxnLog(t, filepath.Join(base, "leader", "t-0"), false)
	defer leader.Close()
	follower := openTxnLog(t, filepath.Join(base, "follower", "t-0"), false)
	defer follower.Close()
	seqs := map[int64]int32{}
	for i := 0; i < 60; i++ {
		pid := int64(20 + i%4)
		mustAppend(t, leader, txnBatch(pid, 0, seqs[pid], 3))
		seqs[pid] += 3
		if i%4 == 3 {
			for p := int64(20); p < 24; p++ {
				mustMarker(t, leader, p, 0, (i/4+int(p))%2 == 0)
			}
		}
	}
	mustAppend(t, leader, txnBatch(30, 0, 0, 1)) // open on both
	leader.AdvanceHighWatermark(leader.LogEndOffset())
	// Replicate in fetch-sized pieces, as the follower fetcher does.
	for follower.LogEndOffset() < leader.LogEndOffset() {
		sl, err := leader.Read(follower.LogEndOffset(), 1500, ReadUpToLogEnd)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, sl.Length)
		if _, err := sl.File.ReadAt(buf, sl.Position); err != nil {
			t.Fatal(err)
		}
		sl.Release()
		// Whole batches only (a fetch may cut the last one).
		n := 0
		for n < len(buf) {
			h, err := record.ParseHeader(buf[n:])
			if err != nil || int64(n)+h.Size() > int64(len(buf)) {
				break
			}
			n += int(h.Size())
		}
		if _, err := follower.AppendStored(buf[:n]); err != nil {
			t.Fatal(err)
		}
	}
	follower.AdvanceHighWatermark(follower.LogEndOffset())
	if !reflect.DeepEqual(follower.Producers(), leader.Producers()) {
		t.Fatalf("follower producers %+v\nleader %+v", follower.Producers(), leader.Producers())
	}
	if f, l := follower.LastStableOffset(), leader.LastStableOffset(); f != l {
		t.Fatalf("follower LSO %d, leader %d", f, l)
	}
	files, _ := filepath.Glob(filepath.Join(base, "leader", "t-0", "*.txnindex"))
	if len(files) < 2 {
		t.Fatalf("expected aborted transactions in several segments: %v", files)
	}
	for _, lf := range files {
		lb, _ := os.ReadFile(lf)
		fb, err := os.ReadFile(filepath.Join(base, "follower", "t-0", filepath.Base(lf)))
		if err != nil || !reflect.DeepEqual(lb, fb) {
			t.Fatalf("%s differs on the follower (%v)", filepath.Base(lf), err)
		}
	}
}

// TestTxnCorruptIndexRebuilt: a .txnindex with a bad entry is rebuilt from the markers at open.
func TestTxnCorruptIndexRebuilt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := openTxnLog(t, dir, false)
	var want []AbortedTxn
	for i := 0; i < 30; i++ {
		mustAppend(t, l, txnBatch(int64(i), 0, 0, 2))
		mustMarker(t, l, int64(i), 0, i%3 != 0)
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
	want, _ = l.AbortedTransactions(want, 0, 1<<40)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.txnindex"))
	if len(files) < 2 {
		t.Fatalf("want aborted transactions in several segments: %v", files)
	}
	b, _ := os.ReadFile(files[len(files)-1])
	b[0] = 7 // entry version 7
	os.WriteFile(files[len(files)-1], b, 0o600)
	r := openTxnLog(t, dir, true)
	defer r.Close()
	got, err := r.AbortedTransactions(nil, 0, 1<<40)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after rebuild %v %v, want %v", got, err, want)
	}
}

// TestTxnAppendStoredRefusesMalformedMarker: a CRC-valid control batch whose marker record is
// malformed is refused before it is stored.
func TestTxnAppendStoredRefusesMalformedMarker(t *testing.T) {
	l := openTxnLog(t, filepath.Join(t.TempDir(), "t-0"), false)
	defer l.Close()
	bad := record.Build(nil, record.BuildOptions{ProducerID: 3, BaseSequence: -1, Attributes: record.AttrControl | record.AttrTransactional},
		[]record.Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0}}})
	if _, err := l.AppendStored(bad); err == nil {
		t.Fatal("malformed marker stored")
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("log end %d", l.LogEndOffset())
	}
	good := record.BuildEndTxnMarker(nil, 0, 1, 3, 0, record.EndTxnMarker{Commit: true})
	if _, err := l.AppendStored(good); err != nil {
		t.Fatal(err)
	}
}

// TestTxnCleanerReadCommittedView: random plain writes and transactions (committed or aborted)
// on a compacted log, cleaned several times across delete.retention.ms: what a read_committed
// consumer reads (aborted transactions skipped by the aborted list, as clients do) keeps the
// latest committed value of every key, and never an aborted one.
func TestTxnCleanerReadCommittedView(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		clock := newTestClock()
		cfg := compactConfig(clock)
		cfg.SegmentBytes = 2 << 10
		dir := filepath.Join(t.TempDir(), "compacted-0")
		l := openCompacted(t, vfs.OS, dir, cfg, false, 0)
		rng := mix64(seed)
		next := func(n uint64) uint64 { rng = mix64(rng + 0x9e3779b97f4a7c15); return rng % n }
		type write struct {
			k, v string
			txn  int // -1: plain
		}
		var writes []write
		committed := map[int]bool{}
		current := map[int64]int{} // producer -> its open transaction's id
		txnIDs := 0
		seqs := map[int64]int32{}
		for i := 0; i < 400; i++ {
			k := fmt.Sprintf("k%d", next(12))
			v := fmt.Sprintf("v%d", i)
			switch op := next(10); {
			case op < 4:
				if _, err := l.Append(record.Build(nil, record.BuildOptions{ProducerID: -1, BaseSequence: -1}, []record.Record{{Key: []byte(k), Value: []byte(v)}})); err != nil {
					t.Fatal(err)
				}
				writes = append(writes, write{k, v, -1})
			case op < 8:
				pid := int64(next(3))
				b := record.Build(nil, record.BuildOptions{ProducerID: pid, BaseSequence: seqs[pid], Attributes: record.AttrTransactional},
					[]record.Record{{Key: []byte(k), Value: []byte(v)}})
				if _, err := l.Append(b); err != nil {
					t.Fatal(err)
				}
				seqs[pid]++
				id, ok := current[pid]
				if !ok {
					txnIDs++
					id = txnIDs
					current[pid] = id
				}
				writes = append(writes, write{k, v, id})
			default:
				pid := int64(next(3))
				commit := next(2) == 0
				if _, err := l.AppendMarker(pid, 0, 0, commit, 0); err != nil {
					t.Fatal(err)
				}
				if id, ok := current[pid]; ok && commit {
					committed[id] = true
				}
				delete(current, pid)
			}
			if i%50 == 49 {
				c := NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20})
				if _, err := c.Clean(l); err != nil {
					t.Fatal(err)
				}
				clock.advance(40 * time.Second)
			}
		}
		for pid := range current { // end every transaction (aborted)
			if _, err := l.AppendMarker(pid, 0, 0, false, 0); err != nil {
				t.Fatal(err)
			}
		}
		latest := map[string]string{}
		for _, w := range writes {
			if w.txn < 0 || committed[w.txn] {
				latest[w.k] = w.v
			}
		}
		for round := 0; round < 3; round++ {
			sealAll(t, l)
			c := NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20})
			if _, err := c.Clean(l); err != nil {
				t.Fatal(err)
			}
			clock.advance(2 * time.Minute)
		}
		// Read as a read_committed client: skip the batches of aborted transactions.
		aborted, err := l.AbortedTransactions(nil, l.LogStartOffset(), l.LastStableOffset())
		if err != nil {
			t.Fatal(err)
		}
		skipping := map[int64]bool{}
		got := map[string]string{}
		for _, b := range scanLog(t, l) {
			for _, a := range aborted {
				if a.FirstOffset <= b.LastOffset() && a.LastOffset >= b.BaseOffset && b.ProducerID == a.ProducerID && !b.IsControl() {
					skipping[b.ProducerID] = true
				}
			}
			if b.IsControl() {
				delete(skipping, b.ProducerID)
				continue
			}
			if b.IsTransactional() && skipping[b.ProducerID] {
				continue
			}
			recs, err := decodeRecords(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				got[string(r.Key)] = string(r.Value)
			}
		}
		if !reflect.DeepEqual(got, latest) {
			t.Fatalf("seed %d: read_committed view after cleaning %v\nwant %v", seed, got, latest)
		}
		l.Close()
	}
}

// TestTxnReadCommittedPastHighWatermark: a read_committed read at an offset past the high
// watermark but not past the log end is empty, not OFFSET_OUT_OF_RANGE, as Kafka's
// LocalLog.read: after a failover the new leader's high watermark can lag offsets consumers
// already read from the old leader, and OFFSET_OUT_OF_RANGE made them reset their position
// (found by the broker's transaction crash test: a read_committed consumer re-read the
// partition from the start after a leader was killed). Past the log end is still out of range.
func TestTxnReadCommittedPastHighWatermark(t *testing.T) {
	l := openTxnLog(t, filepath.Join(t.TempDir(), "t-0"), false)
	defer l.Close()
	mustAppend(t, l, offsetBatch(0, 2, 1000)) // 0-1
	mustAppend(t, l, offsetBatch(0, 3, 1000)) // 2-4
	l.AdvanceHighWatermark(2)
	for _, off := range []int64{3, 5} {
		sl, err := l.Read(off, 1<<20, ReadCommitted)
		if err != nil || sl.Length != 0 {
			t.Fatalf("read_committed at %d (high watermark 2, log end 5): %d bytes, %v; want empty", off, sl.Length, err)
		}
	}
	if _, err := l.Read(6, 1<<20, ReadCommitted); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("read_committed past the log end: %v", err)
	}
	sl, err := l.Read(0, 1<<20, ReadCommitted)
	if err != nil || sl.Length == 0 {
		t.Fatalf("read_committed from 0: %d bytes, %v", sl.Length, err)
	}
	sl.Release()
}
