package engine

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// flushState is a log's group-commit flusher. One goroutine per log runs flush cycles; a cycle
// snapshots the log end under the append lock, then (without it) seals rolled segments, syncs the
// directory when segments were created, fdatasyncs the active segment, and publishes the flushed
// offset, waking every appender waiting for an offset at or below it. N appenders waiting at once
// share one fdatasync. Per-partition goroutines let syncs of different partitions run in parallel.
type flushState struct {
	// flushed is the offset below which everything is durable (the recovery point).
	flushed atomic.Int64
	// done is closed and replaced after each flush cycle (or failure); waiters block on it.
	done atomic.Pointer[chan struct{}]

	kick    chan struct{}
	quit    chan struct{}
	exited  chan struct{}
	stopped sync.Once

	// sealMu is held while rolled segments are sealed, so a truncation never reactivates a
	// segment that is being sealed. Lock order: the log's mu, then sealMu.
	sealMu sync.Mutex

	// Guarded by the log's mu.
	pendingSeal      []*segment.Segment
	pendingSnapshots []snapshotJob
	dirSyncNeeded    bool
	unflushed        int64 // messages appended since the last flush snapshot
	appendsUnflushed int
	// lowestTruncation is the lowest log end set by a truncation since the last snapshot, or -1.
	lowestTruncation int64

	// refused is the error of the last cycle when it failed for lack of a resource (a descriptor
	// to sync the directory or write a snapshot, AIO slots): the cycle's work was put back and is
	// retried shortly, and waiters get this retriable error instead of waiting. Cleared by the
	// next cycle that succeeds.
	refused atomic.Pointer[error]
}

// resourceRetryDelay is how soon a flush cycle refused for lack of a resource is tried again.
const resourceRetryDelay = 100 * time.Millisecond

func (f *flushState) init(l *Log, flushed int64) {
	f.flushed.Store(flushed)
	ch := make(chan struct{})
	f.done.Store(&ch)
	f.kick = make(chan struct{}, 1)
	f.quit = make(chan struct{})
	f.exited = make(chan struct{})
	f.lowestTruncation = -1
	go f.loop(l)
}

// appendedLocked counts an append and reports whether a flush is due. Requires l.mu.
func (f *flushState) appendedLocked(l *Log, messages int64) bool {
	f.unflushed += messages
	f.appendsUnflushed++
	c := l.config()
	return f.unflushed >= c.FlushIntervalMessages || c.FlushOnAppend
}

func (f *flushState) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// rolled queues the segment that stopped being active for sealing and wakes the flusher, so a
// roll is sealed soon whatever the flush policy (Kafka flushes a rolled segment asynchronously
// too). Without the wake, a page-cache log (flush.messages large, no flush.ms timer) would keep every
// rolled segment unsynced, its index untrimmed, its directory entry unsynced and, after retention
// deleted it, its file open and its blocks allocated, until the log closed. Requires l.mu (wake
// does not block).
func (f *flushState) rolled(old *segment.Segment) {
	if old.Acquire() {
		f.pendingSeal = append(f.pendingSeal, old)
	}
	f.dirSyncNeeded = true
	f.wake()
}

// snapshotJob is a producer-state snapshot to write for a rolled segment.
type snapshotJob struct {
	offset int64
	data   []byte
}

// snapshotLocked queues the producer-state snapshot taken at a roll; the flusher writes it after
// sealing the rolled segment. Requires l.mu.
func (f *flushState) snapshotLocked(offset int64, data []byte) {
	f.pendingSnapshots = append(f.pendingSnapshots, snapshotJob{offset: offset, data: data})
}

// reactivating waits for any seal in progress and drops s from the segments waiting to be
// sealed: a truncation is making it the active segment again. Requires l.mu.
func (f *flushState) reactivating(s *segment.Segment) {
	f.sealMu.Lock()
	defer f.sealMu.Unlock()
	kept := f.pendingSeal[:0]
	for _, p := range f.pendingSeal {
		if p == s {
			p.Release()
			continue
		}
		kept = append(kept, p)
	}
	f.pendingSeal = kept
	f.dirSyncNeeded = true
}

// truncated records a truncation to newEnd. Requires l.mu.
func (f *flushState) truncated(newEnd int64) {
	if f.lowestTruncation < 0 || newEnd < f.lowestTruncation {
		f.lowestTruncation = newEnd
	}
	if f.flushed.Load() > newEnd {
		f.flushed.Store(newEnd)
	}
	f.publish() // waiters for offsets that no longer exist re-check (see WaitFlushed)
}

func (f *flushState) loop(l *Log) {
	defer close(f.exited)
	var ticker *time.Ticker
	var tick <-chan time.Time
	var interval int64
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	for {
		// flush.ms may change at run time (SetConfig wakes this loop).
		if ms := l.config().FlushIntervalMs; ms != interval {
			if ticker != nil {
				ticker.Stop()
				ticker, tick = nil, nil
			}
			if interval = ms; ms > 0 {
				ticker = time.NewTicker(time.Duration(ms) * time.Millisecond)
				tick = ticker.C
			}
		}
		select {
		case <-f.kick:
		case <-tick:
		case <-f.quit:
			f.cycle(l)
			return
		}
		f.cycle(l)
	}
}

// cycle runs one flush. Disk I/O happens without the append lock.
//
// It first yields the processor once: the appenders the previous cycle woke are runnable on this
// P, and letting them append before the snapshot puts them in this cycle's fdatasync. Without it,
// N closed-loop appenders settle into two alternating groups of about N/2 per fdatasync (measured
// in BenchmarkDurableAppend: 4 appenders 1.9 appends per fsync without, 3.7 with).
func (f *flushState) cycle(l *Log) {
	runtime.Gosched()
	l.mu.Lock()
	target := l.nextOffset
	seal := f.pendingSeal
	f.pendingSeal = nil
	snapshots := f.pendingSnapshots
	f.pendingSnapshots = nil
	keepSnapshotsFrom := l.Segments()[0].BaseOffset()
	dirSync := f.dirSyncNeeded
	f.dirSyncNeeded = false
	appends := f.appendsUnflushed
	f.appendsUnflushed = 0
	f.unflushed = 0
	f.lowestTruncation = -1
	active := l.active
	closed := l.closed || l.logDir.Err() != nil
	if !closed && !active.Acquire() {
		closed = true
	}
	l.mu.Unlock()
	if closed {
		for _, s := range seal {
			s.Release()
		}
		f.publish()
		return
	}
	defer active.Release()
	if target <= f.flushed.Load() && len(seal) == 0 && !dirSync && len(snapshots) == 0 {
		return
	}
	start := time.Now()
	err := f.syncAll(l, seal, dirSync, active)
	written := 0
	for _, sn := range snapshots {
		if err != nil {
			break
		}
		if err = l.snaps.write(l.fsys, l.dir, sn.offset, sn.data, keepSnapshotsFrom); err == nil {
			written++
		}
	}
	if err != nil && vfs.IsResourceExhausted(err) {
		// Not a disk failure: put the work back, let waiters fail with a retriable error, and
		// try again shortly.
		refused := l.logDir.Refuse(err)
		l.mu.Lock()
		for _, s := range seal {
			if s == l.active || l.closed {
				s.Release() // reactivated by a truncation meanwhile, or closing
				continue
			}
			f.pendingSeal = append(f.pendingSeal, s)
		}
		f.dirSyncNeeded = f.dirSyncNeeded || dirSync
		f.pendingSnapshots = append(snapshots[written:len(snapshots):len(snapshots)], f.pendingSnapshots...)
		l.mu.Unlock()
		f.refused.Store(&refused)
		f.publish()
		time.AfterFunc(resourceRetryDelay, f.wake)
		return
	}
	for _, s := range seal {
		s.Release()
	}
	if err != nil {
		l.logDir.Fail(err)
		f.publish()
		return
	}
	if f.refused.Load() != nil {
		f.refused.Store(nil)
	}
	if o := l.config().Observer; o != nil {
		o.ObserveFsync(time.Since(start), appends)
	}
	l.mu.Lock()
	if f.lowestTruncation >= 0 && f.lowestTruncation < target {
		target = f.lowestTruncation // bytes past a truncation point are not what we synced
	}
	if target > f.flushed.Load() {
		f.flushed.Store(target)
	}
	l.mu.Unlock()
	// The high watermark moves before the waiters wake, so a record is visible to a read sent
	// right after its acknowledgement.
	if l.config().LocalHighWatermark && l.config().Durable() {
		_ = l.AdvanceHighWatermark(target)
	}
	f.publish()
}

func (f *flushState) syncAll(l *Log, seal []*segment.Segment, dirSync bool, active *segment.Segment) error {
	var firstErr error
	f.sealMu.Lock()
	defer f.sealMu.Unlock()
	for _, s := range seal {
		if firstErr == nil {
			firstErr = s.Seal()
		}
	}
	if firstErr != nil {
		return firstErr
	}
	if dirSync {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return err
		}
	}
	return active.Sync()
}

// publish wakes every waiter (they re-check the flushed offset and the log dir's error).
func (f *flushState) publish() {
	ch := make(chan struct{})
	old := f.done.Swap(&ch)
	close(*old)
}

// stop ends the flusher after a last cycle.
func (f *flushState) stop(l *Log) {
	f.stopped.Do(func() { close(f.quit) })
	<-f.exited
}

// AwaitDurable blocks until every offset below upTo is fdatasync'd, when the log's policy is
// durable (flush.messages = 1); otherwise it returns at once. It fails with KAFKA_STORAGE_ERROR
// if the log dir went offline.
func (l *Log) AwaitDurable(upTo int64) error {
	if !l.config().Durable() {
		return nil
	}
	return l.WaitFlushed(upTo)
}

// WaitFlushed blocks until every offset below upTo is fdatasync'd, whatever the policy.
func (l *Log) WaitFlushed(upTo int64) error {
	f := &l.flush
	for {
		ch := f.done.Load()
		if f.flushed.Load() >= upTo {
			return nil
		}
		if err := l.logDir.Err(); err != nil {
			return err
		}
		if p := f.refused.Load(); p != nil {
			return *p
		}
		if end := l.LogEndOffset(); upTo > end {
			// A truncation removed offsets being waited for (the log is following a new
			// leader): they will never be flushed; Kafka answers such a produce so.
			return fmt.Errorf("log %s truncated to %d before offset %d was flushed: %w", l.dir, end, upTo, kerr.NotLeaderForPartition)
		}
		select {
		case <-f.exited:
			if f.flushed.Load() >= upTo {
				return nil
			}
			return fmt.Errorf("log %s closed before offset %d was flushed", l.dir, upTo)
		default:
		}
		f.wake()
		select {
		case <-*ch:
		case <-f.exited:
		}
	}
}

// Flush makes everything appended so far durable.
func (l *Log) Flush() error { return l.WaitFlushed(l.LogEndOffset()) }
