package engine

// Fault injection with vfs.FaultFS: a failed write or fsync takes the log dir offline for good
// (KAFKA_STORAGE_ERROR, nothing retried, earlier data still readable and recovered on restart); a
// simulated power loss keeps every acknowledged batch; bad input is refused without touching the
// log.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/vfs"
)

func faultConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 << 10
	cfg.IndexIntervalBytes = 512
	cfg.MaxIndexBytes = 4 << 10
	return cfg
}

func openTestLog(t *testing.T, fsys vfs.FS, ld *LogDir, dir string, cfg Config, clean bool, rp int64) *Log {
	t.Helper()
	l, err := OpenLog(OpenOptions{FS: fsys, LogDir: ld, Dir: dir, Topic: filepath.Base(dir), Config: cfg, CleanShutdown: clean, RecoveryPoint: rp})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return l
}

// appendAcked appends n offset batches one by one, each acknowledged, and records them in acked.
func appendAcked(t *testing.T, l *Log, n int, acked map[int64]int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		base := l.LogEndOffset()
		info, err := l.Append(offsetBatch(base, 1+i%7, time.Now().UnixMilli()))
		if err != nil {
			t.Fatalf("append at %d: %v", base, err)
		}
		if info.BaseOffset != base {
			t.Fatalf("append at %d landed at %d", base, info.BaseOffset)
		}
		if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
			t.Fatalf("await durable %d: %v", info.LastOffset, err)
		}
		acked[info.BaseOffset] = info.LastOffset
	}
}

func wantStorageError(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("%s: got %v, want KAFKA_STORAGE_ERROR", what, err)
	}
}

// logFileSizes returns the size of every segment .log of dir.
func logFileSizes(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, p := range m {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = st.Size()
	}
	return out
}

func sameSizes(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestFaultWriteENOSPC: a write failing with ENOSPC fails that Append with KAFKA_STORAGE_ERROR and
// takes the whole log dir offline: later appends to any of its logs fail without writing, the
// failed write is never retried, data stored before stays readable, and a restart recovers it.
func TestFaultWriteENOSPC(t *testing.T) {
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(vfs.OS)
	hfs := newHaltFS(ffs)
	ld := NewLogDir(dir)
	dirA, dirB := filepath.Join(dir, "a-0"), filepath.Join(dir, "b-0")
	la := openTestLog(t, hfs, ld, dirA, faultConfig(), false, 0)
	lb := openTestLog(t, hfs, ld, dirB, faultConfig(), false, 0)
	ackedA, ackedB := map[int64]int64{}, map[int64]int64{}
	appendAcked(t, la, 100, ackedA) // several segments
	appendAcked(t, lb, 10, ackedB)
	if len(la.Segments()) < 3 {
		t.Fatalf("want rolls, have %d segments", len(la.Segments()))
	}
	leoA, leoB := la.LogEndOffset(), lb.LogEndOffset()
	sizesA, sizesB := logFileSizes(t, dirA), logFileSizes(t, dirB)

	ffs.FailNextWrite(syscall.ENOSPC)
	writes, syncs := hfs.writes.Load(), hfs.syncs.Load()
	_, err := la.Append(offsetBatch(leoA, 3, time.Now().UnixMilli()))
	wantStorageError(t, "append hitting ENOSPC", err)
	if ld.Err() == nil {
		t.Fatal("log dir still online after a failed write")
	}
	if got := hfs.writes.Load(); got != writes+1 {
		t.Fatalf("%d writes for one failed append", got-writes)
	}

	// Sticky: every later write to any log of the dir fails, and nothing reaches the disk.
	for i := 0; i < 3; i++ {
		_, err = la.Append(offsetBatch(leoA, 1, time.Now().UnixMilli()))
		wantStorageError(t, "append to the same log after ENOSPC", err)
		_, err = lb.Append(offsetBatch(leoB, 1, time.Now().UnixMilli()))
		wantStorageError(t, "append to another log of the dir after ENOSPC", err)
	}
	wantStorageError(t, "roll after ENOSPC", la.Roll())
	wantStorageError(t, "truncate after ENOSPC", la.TruncateTo(1))
	wantStorageError(t, "await durable past the log end after ENOSPC", la.AwaitDurable(leoA+1))
	if got := hfs.writes.Load(); got != writes+1 {
		t.Fatalf("the failed write was retried or another write happened: %d writes since the fault", got-writes)
	}
	if la.LogEndOffset() != leoA || lb.LogEndOffset() != leoB {
		t.Fatalf("log ends moved: %d->%d, %d->%d", leoA, la.LogEndOffset(), leoB, lb.LogEndOffset())
	}
	if !sameSizes(sizesA, logFileSizes(t, dirA)) || !sameSizes(sizesB, logFileSizes(t, dirB)) {
		t.Fatal("segment files changed after the failed write")
	}

	// What was stored before stays readable and durable.
	checkOffsetLog(t, la, ackedA, 0)
	checkOffsetLog(t, lb, ackedB, 0)
	if err := la.AwaitDurable(leoA); err != nil {
		t.Fatalf("offsets made durable before the fault: %v", err)
	}
	if err := la.Close(); err != nil {
		t.Logf("close after ENOSPC: %v", err)
	}
	if err := lb.Close(); err != nil {
		t.Logf("close after ENOSPC: %v", err)
	}
	if hfs.writes.Load() != writes+1 || hfs.syncs.Load() != syncs {
		t.Fatalf("writes or syncs after the fault: %d writes, %d syncs", hfs.writes.Load()-writes, hfs.syncs.Load()-syncs)
	}

	// Restart: a fresh filesystem and log dir; nothing is lost and appends work again.
	ffs2 := vfs.NewFaultFS(vfs.OS)
	ld2 := NewLogDir(dir)
	for _, c := range []struct {
		dir   string
		acked map[int64]int64
		leo   int64
	}{{dirA, ackedA, leoA}, {dirB, ackedB, leoB}} {
		l := openTestLog(t, ffs2, ld2, c.dir, faultConfig(), false, 0)
		checkOffsetLog(t, l, c.acked, 0)
		if l.LogEndOffset() != c.leo {
			t.Fatalf("%s: log end %d after restart, want %d", c.dir, l.LogEndOffset(), c.leo)
		}
		appendAcked(t, l, 5, c.acked)
		checkOffsetLog(t, l, c.acked, 0)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFaultSyncEIO: an fdatasync failing with EIO fails every appender waiting for it with
// KAFKA_STORAGE_ERROR, takes the log dir offline for good, and is never retried.
func TestFaultSyncEIO(t *testing.T) {
	dir := t.TempDir()
	ffs := vfs.NewFaultFS(vfs.OS)
	hfs := newHaltFS(ffs)
	ld := NewLogDir(dir)
	dirA, dirB := filepath.Join(dir, "a-0"), filepath.Join(dir, "b-0")
	la := openTestLog(t, hfs, ld, dirA, faultConfig(), false, 0)
	lb := openTestLog(t, hfs, ld, dirB, faultConfig(), false, 0)
	ackedA, ackedB := map[int64]int64{}, map[int64]int64{}
	appendAcked(t, la, 20, ackedA)
	appendAcked(t, lb, 5, ackedB)
	leoA := la.LogEndOffset()

	ffs.FailNextSync(syscall.EIO)
	syncs := hfs.syncs.Load()
	const appenders = 6
	var (
		mu          sync.Mutex // predicts offsets
		wg          sync.WaitGroup
		appendErrs  = make([]error, appenders)
		durableErrs = make([]error, appenders)
		start       = make(chan struct{})
	)
	for i := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			mu.Lock()
			info, err := la.Append(offsetBatch(la.LogEndOffset(), 1+i, time.Now().UnixMilli()))
			mu.Unlock()
			if err != nil {
				appendErrs[i] = err
				return
			}
			durableErrs[i] = la.AwaitDurable(info.LastOffset + 1)
		}()
	}
	close(start)
	wg.Wait()
	waited := 0
	for i := range appenders {
		switch {
		case appendErrs[i] != nil:
			wantStorageError(t, "append after the failed sync", appendErrs[i])
		case durableErrs[i] != nil:
			wantStorageError(t, "await durable across the failed sync", durableErrs[i])
			waited++
		default:
			t.Fatalf("appender %d acknowledged although its fdatasync failed", i)
		}
	}
	if waited == 0 {
		t.Fatal("no appender was waiting in AwaitDurable when the sync failed")
	}
	if got := hfs.syncs.Load() - syncs; got != 1 {
		t.Fatalf("%d sync attempts since the fault, want exactly the failed one", got)
	}

	// Sticky across the dir's logs; the earlier durable offsets stay durable and readable.
	_, err := lb.Append(offsetBatch(lb.LogEndOffset(), 1, time.Now().UnixMilli()))
	wantStorageError(t, "append to another log after the failed sync", err)
	_, err = la.Append(offsetBatch(la.LogEndOffset(), 1, time.Now().UnixMilli()))
	wantStorageError(t, "append to the log after the failed sync", err)
	wantStorageError(t, "flush after the failed sync", la.Flush())
	if err := la.AwaitDurable(leoA); err != nil {
		t.Fatalf("await durable of an offset flushed before the fault: %v", err)
	}
	checkOffsetLog(t, la, ackedA, 0)
	checkOffsetLog(t, lb, ackedB, 0)
	la.Close()
	lb.Close()
	if got := hfs.syncs.Load() - syncs; got != 1 {
		t.Fatalf("the failed sync was retried: %d sync attempts since the fault", got)
	}

	// Restart: everything acknowledged before the fault is there; appends work again.
	ffs2 := vfs.NewFaultFS(vfs.OS)
	ld2 := NewLogDir(dir)
	for _, c := range []struct {
		dir   string
		acked map[int64]int64
	}{{dirA, ackedA}, {dirB, ackedB}} {
		l := openTestLog(t, ffs2, ld2, c.dir, faultConfig(), false, 0)
		checkOffsetLog(t, l, c.acked, 0)
		appendAcked(t, l, 3, c.acked)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// crashLog halts the process behind l and simulates a power loss, then closes what is left of l.
func crashLog(t *testing.T, l *Log, hfs *haltFS, ffs *vfs.FaultFS) {
	t.Helper()
	if err := hfs.halt(ffs.Crash); err != nil {
		t.Fatalf("crash: %v", err)
	}
	l.Close() // fails: the process is gone; this only releases descriptors and mappings
}

// TestFaultCrashDurableAcks: four appenders with durable acknowledgements on small segments; a
// simulated power loss at a random moment (every unsynced byte and every file not yet in a synced
// directory gone); recovery without the clean-shutdown marker from a recovery point the log had
// reached. Every acknowledged batch survives, the log is a contiguous valid prefix, and it takes
// appends. Eight crashes in a row on the same directory.
func TestFaultCrashDurableAcks(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	dir := filepath.Join(t.TempDir(), "c-0")
	cfg := faultConfig()
	cfg.SegmentBytes = 16 << 10
	acked := map[int64]int64{}
	var ackMu sync.Mutex
	rp := int64(0)
	total := 0
	for round := range 8 {
		ffs := vfs.NewFaultFS(vfs.OS)
		hfs := newHaltFS(ffs)
		l := openTestLog(t, hfs, nil, dir, cfg, false, rp)
		checkOffsetLog(t, l, acked, 0)
		target := 10 + rng.IntN(150)
		var (
			mu       sync.Mutex
			wg       sync.WaitGroup
			count    int
			reached  = make(chan struct{})
			appended int
		)
		for a := range 4 {
			arng := rand.New(rand.NewPCG(seed, uint64(round*4+a)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					base := l.LogEndOffset()
					info, err := l.Append(offsetBatch(base, 1+arng.IntN(20), time.Now().UnixMilli()))
					if err == nil {
						appended++
					}
					mu.Unlock()
					if err != nil {
						return
					}
					if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
						return
					}
					ackMu.Lock()
					acked[info.BaseOffset] = info.LastOffset
					count++
					if count == target {
						close(reached)
					}
					ackMu.Unlock()
				}
			}()
		}
		select {
		case <-reached:
		case <-time.After(20 * time.Second):
			ackMu.Lock()
			n := count
			ackMu.Unlock()
			t.Fatalf("round %d: %d acknowledgements in 20s", round, n)
		}
		// Crash from anywhere up to 2 ms later, in the middle of appends and flushes.
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		crashLog(t, l, hfs, ffs)
		wg.Wait()
		// A checkpoint may lag: recover from any point the log had made durable.
		rp = rng.Int64N(l.RecoveryPoint() + 1)
		mu.Lock()
		total += appended
		mu.Unlock()
	}
	l := openTestLog(t, vfs.NewFaultFS(vfs.OS), nil, dir, cfg, false, rp)
	checkOffsetLog(t, l, acked, 0)
	appendAcked(t, l, 3, acked)
	segs := len(l.Segments())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d batches appended, %d acknowledged, %d segments", total, len(acked), segs)
}

// TestFaultCrashAfterRoll crashes right after an append rolled the log: before the flusher ran
// (the new segment file was never made durable and vanishes), after it sealed the old segment but
// before the directory sync, and after the rolled batch was acknowledged.
func TestFaultCrashAfterRoll(t *testing.T) {
	for _, c := range []struct {
		name  string
		pause string // what the flusher is stopped at when the crash hits ("" = nothing)
		await bool   // the rolled batch is acknowledged before the crash
	}{
		{"before-flush", "sync", false},
		{"before-dir-sync", "syncdir", false},
		{"acknowledged", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "r-0")
			cfg := faultConfig()
			cfg.SegmentBytes = 4 << 10
			ffs := vfs.NewFaultFS(vfs.OS)
			hfs := newHaltFS(ffs)
			l := openTestLog(t, hfs, nil, dir, cfg, false, 0)
			acked := map[int64]int64{}
			appendAcked(t, l, 12, acked)
			// Append until an append rolls.
			var info AppendInfo
			for {
				var blocked <-chan struct{}
				var resume func()
				if c.pause != "" {
					blocked, resume = hfs.pause(c.pause)
				}
				before := l.active.BaseOffset()
				var err error
				base := l.LogEndOffset()
				info, err = l.Append(offsetBatch(base, 4, time.Now().UnixMilli()))
				if err != nil {
					t.Fatal(err)
				}
				if info.SegmentBase != before {
					if resume != nil {
						if c.pause == "syncdir" {
							// Let the flusher seal the old segment and stop at the directory sync.
							<-blocked
						}
						if err := hfs.halt(ffs.Crash); err != nil {
							t.Fatal(err)
						}
						resume()
					}
					break
				}
				if resume != nil {
					resume()
				}
				if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
					t.Fatal(err)
				}
				acked[info.BaseOffset] = info.LastOffset
			}
			want := info.BaseOffset
			if c.await {
				if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
					t.Fatal(err)
				}
				acked[info.BaseOffset] = info.LastOffset
				want = info.LastOffset + 1
				crashLog(t, l, hfs, ffs)
			} else {
				l.Close()
			}
			l = openTestLog(t, vfs.NewFaultFS(vfs.OS), nil, dir, cfg, false, l.RecoveryPoint())
			checkOffsetLog(t, l, acked, 0)
			if l.LogEndOffset() != want {
				t.Fatalf("log end %d after the crash, want %d", l.LogEndOffset(), want)
			}
			if last := l.Segments()[len(l.Segments())-1]; c.await != (last.BaseOffset() == info.BaseOffset) {
				t.Fatalf("last segment starts at %d (rolled at %d, acknowledged %v)", last.BaseOffset(), info.BaseOffset, c.await)
			}
			appendAcked(t, l, 3, acked)
			checkOffsetLog(t, l, acked, 0)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFaultCrashPageCacheAcks: with page-cache acknowledgement (large flush.messages) appends are
// acknowledged before any fdatasync. A power loss keeps exactly what Flush made durable: appends
// acknowledged after it (across rolls, whose seals are held back here) are lost, and the
// recovered log is the valid prefix up to the flush.
func TestFaultCrashPageCacheAcks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p-0")
	cfg := faultConfig()
	cfg.SegmentBytes = 4 << 10
	cfg.FlushIntervalMessages = 1 << 40
	flushedBatches := map[int64]int64{}
	for round := range 3 {
		ffs := vfs.NewFaultFS(vfs.OS)
		hfs := newHaltFS(ffs)
		l := openTestLog(t, hfs, nil, dir, cfg, false, 0)
		checkOffsetLog(t, l, flushedBatches, 0)
		// Page-cache acknowledgement: AwaitDurable does not wait for an fdatasync.
		pending := map[int64]int64{}
		appendAcked(t, l, 25+round*10, pending)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		flushed := l.LogEndOffset()
		if rp := l.RecoveryPoint(); rp != flushed {
			t.Fatalf("recovery point %d after Flush, log end %d", rp, flushed)
		}
		for b, e := range pending {
			flushedBatches[b] = e
		}
		// More acknowledged appends, with rolls; no fdatasync gets through before the crash.
		_, resume := hfs.pause("sync")
		segsBefore := len(l.Segments())
		appendAcked(t, l, 30, map[int64]int64{})
		if len(l.Segments()) == segsBefore {
			t.Fatal("no roll after the flush")
		}
		end := l.LogEndOffset()
		if err := hfs.halt(ffs.Crash); err != nil {
			t.Fatal(err)
		}
		resume()
		l.Close()

		l = openTestLog(t, vfs.NewFaultFS(vfs.OS), nil, dir, cfg, false, 0)
		checkOffsetLog(t, l, flushedBatches, 0)
		if leo := l.LogEndOffset(); leo != flushed {
			t.Fatalf("round %d: log end %d after the crash; flushed up to %d, acknowledged up to %d", round, leo, flushed, end)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAppendRefusesBadBatches: each malformed batch is refused with its Kafka error; the log end,
// the files and the refused bytes are untouched, the dir stays online, and a valid append works.
func TestAppendRefusesBadBatches(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v-0")
	ffs := vfs.NewFaultFS(vfs.OS)
	hfs := newHaltFS(ffs)
	cfg := faultConfig()
	cfg.MaxMessageBytes = 2000
	ld := NewLogDir(filepath.Dir(dir))
	l := openTestLog(t, hfs, ld, dir, cfg, false, 0)
	acked := map[int64]int64{}
	appendAcked(t, l, 5, acked)

	valid := func() []byte { return offsetBatch(l.LogEndOffset(), 5, time.Now().UnixMilli()) }
	be := binary.BigEndian
	cases := []struct {
		name   string
		batch  func() []byte
		reason error
	}{
		{"crc of the records", func() []byte { b := valid(); b[len(b)-1] ^= 0x40; return b }, kerr.CorruptMessage},
		{"crc field", func() []byte { b := valid(); b[record.CRCOffset] ^= 1; return b }, kerr.CorruptMessage},
		{"crc of the attributes", func() []byte { b := valid(); b[record.AttributesOffset+1] ^= 0x08; return b }, kerr.CorruptMessage},
		{"magic 1", func() []byte { b := valid(); b[record.MagicOffset] = 1; return b }, kerr.UnsupportedForMessageFormat},
		{"magic 0", func() []byte { b := valid(); b[record.MagicOffset] = 0; return b }, kerr.UnsupportedForMessageFormat},
		{"batchLength too large", func() []byte {
			b := valid()
			be.PutUint32(b[record.BatchLengthOffset:], be.Uint32(b[record.BatchLengthOffset:])+1)
			return b
		}, kerr.CorruptMessage},
		{"batchLength too small", func() []byte {
			b := valid()
			be.PutUint32(b[record.BatchLengthOffset:], be.Uint32(b[record.BatchLengthOffset:])-1)
			return b
		}, kerr.CorruptMessage},
		{"bytes missing", func() []byte { b := valid(); return b[:len(b)-3] }, kerr.CorruptMessage},
		{"two batches", func() []byte { return append(valid(), valid()...) }, kerr.CorruptMessage},
		{"short header", func() []byte { return valid()[:record.HeaderSize-1] }, kerr.CorruptMessage},
		{"more records declared than present", func() []byte {
			b := valid()
			be.PutUint32(b[record.RecordCountOffset:], 6)
			be.PutUint32(b[record.LastOffsetDeltaOffset:], 5)
			record.SetChecksum(b)
			return b
		}, kerr.InvalidRecord},
		{"fewer records declared than present", func() []byte {
			b := valid()
			be.PutUint32(b[record.RecordCountOffset:], 4)
			be.PutUint32(b[record.LastOffsetDeltaOffset:], 3)
			record.SetChecksum(b)
			return b
		}, kerr.InvalidRecord},
		{"lastOffsetDelta disagrees with the count", func() []byte {
			b := valid()
			be.PutUint32(b[record.LastOffsetDeltaOffset:], 7)
			record.SetChecksum(b)
			return b
		}, kerr.InvalidRecord},
		{"no records", func() []byte {
			b := valid()
			be.PutUint32(b[record.RecordCountOffset:], 0)
			record.SetChecksum(b)
			return b
		}, kerr.InvalidRecord},
		{"larger than max.message.bytes", func() []byte {
			return offsetBatch(l.LogEndOffset(), 40, time.Now().UnixMilli())
		}, kerr.MessageTooLarge},
	}
	for _, c := range cases {
		b := c.batch()
		in := bytes.Clone(b)
		leo, writes, sizes := l.LogEndOffset(), hfs.writes.Load(), logFileSizes(t, dir)
		_, err := l.Append(b)
		if !errors.Is(err, c.reason) {
			t.Fatalf("%s: got %v, want %v", c.name, err, c.reason)
		}
		if l.LogEndOffset() != leo || hfs.writes.Load() != writes || !sameSizes(sizes, logFileSizes(t, dir)) {
			t.Fatalf("%s: the refused batch changed the log (end %d->%d, %d writes)", c.name, leo, l.LogEndOffset(), hfs.writes.Load()-writes)
		}
		if !bytes.Equal(b, in) {
			t.Fatalf("%s: the refused batch was modified", c.name)
		}
		if ld.Err() != nil {
			t.Fatalf("%s: bad input took the log dir offline: %v", c.name, ld.Err())
		}
		appendAcked(t, l, 1, acked)
	}
	checkOffsetLog(t, l, acked, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTestLog(t, vfs.OS, nil, dir, cfg, false, 0)
	checkOffsetLog(t, l, acked, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFaultFSCrashDuringWrites: a simulated crash racing writers loses every unsynced byte: no
// write that began before the crash lands after it (it used to, about once in a hundred crashes).
func TestFaultFSCrashDuringWrites(t *testing.T) {
	dir := t.TempDir()
	for iter := 0; iter < 100; iter++ {
		ffs := vfs.NewFaultFS(vfs.OS)
		name := filepath.Join(dir, "f")
		f, err := ffs.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, 100), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := ffs.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					f.WriteAt(make([]byte, 512), int64(100+w<<20+i*512))
				}
			}()
		}
		time.Sleep(time.Duration(iter%5) * 50 * time.Microsecond)
		if err := ffs.Crash(); err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		f.Close()
		st, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != 100 {
			t.Fatalf("crash %d: file of %d bytes after the crash, synced 100", iter, st.Size())
		}
	}
}

// TestCleanOpenOfCorruptTail: a clean-shutdown open trusts the indexes and walks only the batch
// headers after the last index entry. A corrupt batchLength there (zero-size or negative batch)
// used to make that walk loop forever, hanging the broker at start; now the walk fails, the
// segment is recovered, and the log ends before the corrupt batch.
func TestCleanOpenOfCorruptTail(t *testing.T) {
	for _, length := range []int32{-12, -13, 0, 48, -1 << 31} {
		dir := filepath.Join(t.TempDir(), "h-0")
		l := openTestLog(t, vfs.OS, nil, dir, faultConfig(), false, 0)
		acked := map[int64]int64{}
		appendAcked(t, l, 4, acked)
		leo := l.LogEndOffset()
		last := l.Segments()[len(l.Segments())-1]
		info, err := l.Append(offsetBatch(leo, 3, time.Now().UnixMilli()))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		path := last.LogPath()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		binary.BigEndian.PutUint32(data[info.Position+record.BatchLengthOffset:], uint32(length))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan *Log, 1)
		go func() {
			l, err := OpenLog(OpenOptions{Dir: dir, Topic: "h", Config: faultConfig(), CleanShutdown: true})
			if err != nil {
				t.Errorf("batchLength %d: clean open: %v", length, err)
			}
			done <- l
		}()
		select {
		case l = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("batchLength %d: clean open still running after 10s", length)
		}
		if l == nil {
			t.FailNow()
		}
		checkOffsetLog(t, l, acked, 0)
		if l.LogEndOffset() != leo {
			t.Fatalf("batchLength %d: log end %d, want %d (before the corrupt batch)", length, l.LogEndOffset(), leo)
		}
		appendAcked(t, l, 1, acked)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
