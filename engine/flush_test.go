package engine

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/weir-mq/weir/vfs"
)

// openDirLogs opens n durable logs in one log dir.
func openDirLogs(t *testing.T, fsys vfs.FS, ld *LogDir, root string, n int, cfg Config) []*Log {
	t.Helper()
	logs := make([]*Log, n)
	for i := range logs {
		logs[i] = openTestLog(t, fsys, ld, filepath.Join(root, fmt.Sprintf("t-%d", i)), cfg, false, 0)
	}
	return logs
}

// flusherRunning reports whether the log dir's flusher goroutine runs.
func flusherRunning(ld *LogDir) bool {
	ld.flusher.mu.Lock()
	defer ld.flusher.mu.Unlock()
	return ld.flusher.running
}

// TestDirFlusherOneRound: the logs of a dir that were appended to while a round was syncing are
// synced together by the next round (one batch of syncs, one wait), and a waiter for all of them
// finds every offset durable.
func TestDirFlusherOneRound(t *testing.T) {
	dir := t.TempDir()
	hfs := newHaltFS(vfs.OS)
	ld := NewLogDir(dir)
	logs := openDirLogs(t, hfs, ld, dir, 8, DefaultConfig())
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	for _, l := range logs { // settle: every log has synced once
		appendAcked(t, l, 1, map[int64]int64{})
	}
	rounds, synced := ld.flusher.rounds.Load(), ld.flusher.synced.Load()
	blocked, resume := hfs.pause("sync")
	ends := make([]int64, len(logs))
	for i, l := range logs {
		info, err := l.Append(offsetBatch(l.LogEndOffset(), 3, time.Now().UnixMilli()))
		if err != nil {
			t.Fatal(err)
		}
		ends[i] = info.LastOffset + 1
		if i == 0 {
			<-blocked // the round of logs[0] is syncing; the others queue behind it
		}
	}
	resume()
	for i, l := range logs {
		if err := l.AwaitDurable(ends[i]); err != nil {
			t.Fatalf("log %d: %v", i, err)
		}
		if rp := l.RecoveryPoint(); rp != ends[i] {
			t.Fatalf("log %d: recovery point %d, want %d", i, rp, ends[i])
		}
	}
	if r, s := ld.flusher.rounds.Load()-rounds, ld.flusher.synced.Load()-synced; r != 2 || s != int64(len(logs)) {
		t.Fatalf("%d rounds synced %d logs, want 2 rounds (logs[0], then the other %d together)", r, s, len(logs)-1)
	}
}

// TestDirFlusherManyAppenders: concurrent durable appenders on many logs of a dir are all
// acknowledged with their offsets durable, in fewer rounds than syncs of one log each.
func TestDirFlusherManyAppenders(t *testing.T) {
	dir := t.TempDir()
	ld := NewLogDir(dir)
	logs := openDirLogs(t, vfs.OS, ld, dir, 6, DefaultConfig())
	const perLog = 30
	errs := make(chan error, len(logs))
	for _, l := range logs {
		go func() {
			for range perLog {
				info, err := l.Append(offsetBatch(l.LogEndOffset(), 2, time.Now().UnixMilli()))
				if err == nil {
					err = l.AwaitDurable(info.LastOffset + 1)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range logs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, l := range logs {
		if rp, end := l.RecoveryPoint(), l.LogEndOffset(); rp != end || end != 2*perLog {
			t.Fatalf("log %d: recovery point %d, end %d, want %d", i, rp, end, 2*perLog)
		}
		l.Close()
	}
	t.Logf("%d rounds synced %d logs", ld.flusher.rounds.Load(), ld.flusher.synced.Load())
	if r := ld.flusher.rounds.Load(); r >= int64(len(logs)*perLog) {
		t.Fatalf("%d rounds for %d appends: no round synced two logs", r, len(logs)*perLog)
	}
}

// TestDirFlusherSyncFailure: a failed fdatasync in a round of several logs takes the dir offline
// with a sticky KAFKA_STORAGE_ERROR for every waiter whose offsets it did not cover; the logs whose
// syncs succeeded in the same round keep what they acknowledged; nothing is retried.
func TestDirFlusherSyncFailure(t *testing.T) {
	dir := t.TempDir()
	hfs := newHaltFS(vfs.OS)
	ffs := vfs.NewFaultFS(hfs) // the fault is taken before a paused sync blocks
	ld := NewLogDir(dir)
	logs := openDirLogs(t, ffs, ld, dir, 4, DefaultConfig())
	for _, l := range logs {
		appendAcked(t, l, 2, map[int64]int64{})
	}
	blocked, resume := hfs.pause("sync")
	if _, err := logs[0].Append(offsetBatch(logs[0].LogEndOffset(), 1, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	<-blocked
	ffs.FailNextSync(syscall.EIO) // the first sync of the next round: one of logs[1:]
	ends := make([]int64, len(logs))
	for i, l := range logs[1:] {
		info, err := l.Append(offsetBatch(l.LogEndOffset(), 1, time.Now().UnixMilli()))
		if err != nil {
			t.Fatal(err)
		}
		ends[i+1] = info.LastOffset + 1
	}
	resume()
	if err := logs[0].AwaitDurable(logs[0].LogEndOffset()); err != nil {
		t.Fatalf("log 0, synced before the fault: %v", err)
	}
	failed := 0
	for i, l := range logs[1:] {
		if err := l.AwaitDurable(ends[i+1]); err != nil {
			wantStorageError(t, fmt.Sprintf("log %d", i+1), err)
			failed++
		}
	}
	if failed != 1 {
		t.Fatalf("%d waiters failed, want the one whose sync failed", failed)
	}
	if ld.Err() == nil {
		t.Fatal("the log dir is online after a failed sync")
	}
	syncs := hfs.syncs.Load()
	for _, l := range logs {
		_, err := l.Append(offsetBatch(l.LogEndOffset(), 1, time.Now().UnixMilli()))
		wantStorageError(t, "append after the failed sync", err)
	}
	time.Sleep(20 * time.Millisecond)
	if got := hfs.syncs.Load() - syncs; got != 0 {
		t.Fatalf("%d syncs after the dir went offline, want none", got)
	}
	for _, l := range logs {
		l.Close()
	}
}

// TestDirFlusherStop: closing a log runs its last cycle (a page-cache log's unflushed appends
// become durable) while the dir's other logs keep being flushed; once the last log closes the
// flusher goroutine exits, and a log opened later in the same dir starts it again.
func TestDirFlusherStop(t *testing.T) {
	dir := t.TempDir()
	ld := NewLogDir(dir)
	durable := openDirLogs(t, vfs.OS, ld, dir, 3, DefaultConfig())
	pc := DefaultConfig()
	pc.FlushIntervalMessages = 1 << 62 // page-cache acknowledgement
	lazy := openTestLog(t, vfs.OS, ld, filepath.Join(dir, "lazy-0"), pc, false, 0)
	for range 5 {
		if _, err := lazy.Append(offsetBatch(lazy.LogEndOffset(), 2, time.Now().UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	errs := make(chan error, len(durable))
	for _, l := range durable {
		go func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				info, err := l.Append(offsetBatch(l.LogEndOffset(), 1, time.Now().UnixMilli()))
				if err == nil {
					err = l.AwaitDurable(info.LastOffset + 1)
				}
				if err != nil || n > 10000 {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	if rp := lazy.RecoveryPoint(); rp != 0 {
		t.Fatalf("page-cache log flushed to %d before close", rp)
	}
	if err := lazy.Close(); err != nil {
		t.Fatal(err)
	}
	if rp, end := lazy.RecoveryPoint(), lazy.LogEndOffset(); rp != end || end != 10 {
		t.Fatalf("closed log: recovery point %d, end %d, want 10", rp, end)
	}
	close(stop)
	for range durable {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range durable {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil { // twice: a no-op
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for flusherRunning(ld) {
		if time.Now().After(deadline) {
			t.Fatal("the flusher goroutine still runs after every log closed")
		}
		time.Sleep(time.Millisecond)
	}
	again := openTestLog(t, vfs.OS, ld, filepath.Join(dir, "again-0"), DefaultConfig(), false, 0)
	defer again.Close()
	appendAcked(t, again, 3, map[int64]int64{})
	if !errors.Is(again.Flush(), nil) {
		t.Fatal("flush of a reopened dir's log failed")
	}
}

// TestFlushHold: appends to several logs under a FlushHold do not wake the flusher; Release wakes
// it once and one round syncs them all. A log closing meanwhile is not held back.
func TestFlushHold(t *testing.T) {
	dir := t.TempDir()
	ld := NewLogDir(dir)
	logs := openDirLogs(t, vfs.OS, ld, dir, 5, DefaultConfig())
	for _, l := range logs {
		appendAcked(t, l, 1, map[int64]int64{})
	}
	rounds, synced := ld.flusher.rounds.Load(), ld.flusher.synced.Load()
	var h FlushHold
	ends := make([]int64, 4)
	for i, l := range logs[:4] {
		h.Add(l)
		h.Add(l) // once per dir
		info, err := l.Append(offsetBatch(l.LogEndOffset(), 2, time.Now().UnixMilli()))
		if err != nil {
			t.Fatal(err)
		}
		ends[i] = info.LastOffset + 1
	}
	time.Sleep(20 * time.Millisecond)
	for i, l := range logs[:4] {
		if rp := l.RecoveryPoint(); rp >= ends[i] {
			t.Fatalf("log %d flushed to %d while held", i, rp)
		}
	}
	h.Release()
	h.Release() // a no-op
	for i, l := range logs[:4] {
		if err := l.AwaitDurable(ends[i]); err != nil {
			t.Fatal(err)
		}
	}
	if r, s := ld.flusher.rounds.Load()-rounds, ld.flusher.synced.Load()-synced; r != 1 || s != 4 {
		t.Fatalf("%d rounds synced %d logs after the release, want 1 round of 4", r, s)
	}
	h.Add(logs[4])
	if err := logs[4].Close(); err != nil { // its last cycle runs although the dir is held
		t.Fatal(err)
	}
	h.Release()
	for _, l := range logs[:4] {
		l.Close()
	}
}

// TestDurableRequestAllocs: a durable request over several partitions (FlushHold, an append to
// each, a wait for each) allocates at most one wake-up channel per partition's flush round, and
// nothing per append (the append path's cleanup.policy check used to split the policy string).
func TestDurableRequestAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("fsyncs")
	}
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	dir := t.TempDir()
	ld := NewLogDir(dir)
	logs := openDirLogs(t, vfs.OS, ld, dir, 8, DefaultConfig())
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	batches := make([][]byte, len(logs))
	for i := range batches {
		batches[i] = offsetBatch(0, 1, 1)
	}
	ends := make([]int64, len(logs))
	req := func() {
		var h FlushHold
		for i, l := range logs {
			h.Add(l)
			info, err := l.Append(batches[i])
			if err != nil {
				t.Fatal(err)
			}
			ends[i] = info.LastOffset + 1
		}
		h.Release()
		for i, l := range logs {
			if err := l.AwaitDurable(ends[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 20 { // warm: the flusher's buffers grow to the batch
		req()
	}
	// A round that a busy machine splits in two makes a second channel for the partitions it
	// leaves to the next: the best of a few samples is the steady state.
	best := math.Inf(1)
	for range 5 {
		best = min(best, testing.AllocsPerRun(50, req))
	}
	if best > float64(len(logs))+1 {
		t.Fatalf("%.1f allocations per durable request over %d partitions, want at most one per partition", best, len(logs))
	}
}

// TestFlushMsTimer: flush.ms queues a page-cache log for a cycle every interval, a new value takes
// effect at once (0: no timer), and a closed log's timer never queues it again.
func TestFlushMsTimer(t *testing.T) {
	dir := t.TempDir()
	ld := NewLogDir(dir)
	cfg := DefaultConfig()
	cfg.FlushIntervalMessages = 1 << 62
	cfg.FlushIntervalMs = 20
	l := openTestLog(t, vfs.OS, ld, filepath.Join(dir, "timer-0"), cfg, false, 0)
	waitFlushedTo := func(want int64) bool {
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if l.RecoveryPoint() >= want {
				return true
			}
			time.Sleep(5 * time.Millisecond)
		}
		return false
	}
	if _, err := l.Append(offsetBatch(0, 3, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	if !waitFlushedTo(3) {
		t.Fatalf("flush.ms=20: recovery point %d after 3 s, want 3", l.RecoveryPoint())
	}
	cfg.FlushIntervalMs = 0
	l.SetConfig(cfg)
	time.Sleep(50 * time.Millisecond) // the cycle SetConfig asked for has run
	if _, err := l.Append(offsetBatch(3, 2, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if rp := l.RecoveryPoint(); rp != 3 {
		t.Fatalf("flush.ms off: recovery point %d, want 3 (nothing flushes a page-cache log)", rp)
	}
	cfg.FlushIntervalMs = 10
	l.SetConfig(cfg)
	if !waitFlushedTo(5) {
		t.Fatalf("flush.ms=10 again: recovery point %d, want 5", l.RecoveryPoint())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a timer firing now finds the log gone
	l.flush.timerMu.Lock()
	stopped := l.flush.timer == nil
	l.flush.timerMu.Unlock()
	if !stopped {
		t.Fatal("the flush.ms timer still runs after close")
	}
	deadline := time.Now().Add(3 * time.Second)
	for flusherRunning(ld) {
		if time.Now().After(deadline) {
			t.Fatal("the flusher goroutine runs after the dir's only log closed")
		}
		time.Sleep(time.Millisecond)
	}
}
