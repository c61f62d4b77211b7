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

// flushState is a log's part of group commit. The log dir's flusher (dirFlusher) runs flush
// cycles: a cycle snapshots the log end under the append lock, then (without it) seals rolled
// segments, syncs the directory when segments were created, fdatasyncs the active segment, and
// publishes the flushed offset, waking every appender waiting for an offset at or below it. N
// appenders waiting at once share one fdatasync, and the logs of a dir with pending appends share
// one round: their fdatasyncs are in flight together and the flusher waits once for all of them.
type flushState struct {
	// flushed is the offset below which everything is durable (the recovery point).
	flushed atomic.Int64
	// done fires after each flush cycle (or failure); waiters block on it. Its channel is made
	// only when someone waits, so a cycle nobody waits for allocates nothing.
	done watch

	// log is the log this state belongs to (set by init).
	log *Log
	// exited is closed once the log's last cycle ran (stop).
	exited chan struct{}

	// Guarded by the dir flusher's mu (dirFlusher.mu).
	queued   bool // in the flusher's queue, or due another cycle once busy ends
	busy     bool // a cycle of this log runs now
	stopping bool // stop asked for a last cycle
	gone     bool // the last cycle ran: the flusher never touches the log again

	// timerMu guards timer and interval, the flush.ms timer (a cycle every interval ms).
	timerMu  sync.Mutex
	timer    *time.Timer
	interval int64

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
	f.log = l
	f.exited = make(chan struct{})
	f.lowestTruncation = -1
	l.logDir.flusher.register()
	f.setTimer(l)
}

// appendedLocked counts an append and reports whether a flush is due. Requires l.mu.
func (f *flushState) appendedLocked(l *Log, messages int64) bool {
	f.unflushed += messages
	f.appendsUnflushed++
	c := l.config()
	return f.unflushed >= c.FlushIntervalMessages || c.FlushOnAppend
}

// wake asks the log dir's flusher for a cycle of this log. It never blocks (appenders call it
// under the log's mu).
func (f *flushState) wake() {
	f.log.logDir.flusher.enqueue(f.log)
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

// setTimer keeps the flush.ms timer in step with the log's config: a cycle every flush.ms when
// it is set (it may change at run time: SetConfig wakes the flusher, whose cycle calls this).
func (f *flushState) setTimer(l *Log) {
	ms := l.config().FlushIntervalMs
	f.timerMu.Lock()
	defer f.timerMu.Unlock()
	if ms == f.interval || f.interval < 0 { // unchanged, or stopped for good (stopTimer)
		return
	}
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if f.interval = ms; ms > 0 {
		d := time.Duration(ms) * time.Millisecond
		var t *time.Timer
		t = time.AfterFunc(d, func() {
			f.wake()
			f.timerMu.Lock()
			if f.timer == t { // not replaced or stopped meanwhile
				t.Reset(d)
			}
			f.timerMu.Unlock()
		})
		f.timer = t
	}
}

// stopTimer stops the flush.ms timer for good (the last cycle's setTimer keeps it stopped).
func (f *flushState) stopTimer() {
	f.timerMu.Lock()
	defer f.timerMu.Unlock()
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	f.interval = -1
}

// flushJob is one cycle's work for a log, taken under the append lock by prepare.
type flushJob struct {
	target            int64
	seal              []*segment.Segment
	snapshots         []snapshotJob
	keepSnapshotsFrom int64
	dirSync           bool
	appends           int
	active            *segment.Segment // acquired; nil when there is nothing to sync
	start             time.Time
	final             bool // the last cycle (stop)
}

// slow reports whether the job has more than the active segment to sync (a roll's seal,
// directory sync and snapshot): such a job runs on its own goroutine so it never delays the
// other logs' acknowledgements.
func (j *flushJob) slow() bool { return len(j.seal) > 0 || j.dirSync || len(j.snapshots) > 0 }

// prepare takes the cycle's work under the append lock. ok is false when there is nothing to do
// (nothing appended since the last sync, or the log closed or its dir offline: then waiters were
// woken to see it).
func (f *flushState) prepare(l *Log) (j flushJob, ok bool) {
	f.setTimer(l)
	l.mu.Lock()
	j.target = l.nextOffset
	j.seal = f.pendingSeal
	f.pendingSeal = nil
	j.snapshots = f.pendingSnapshots
	f.pendingSnapshots = nil
	j.keepSnapshotsFrom = l.Segments()[0].BaseOffset()
	j.dirSync = f.dirSyncNeeded
	f.dirSyncNeeded = false
	j.appends = f.appendsUnflushed
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
		for _, s := range j.seal {
			s.Release()
		}
		f.publish()
		return j, false
	}
	if j.target <= f.flushed.Load() && !j.slow() {
		active.Release()
		return j, false
	}
	j.active = active
	j.start = time.Now()
	return j, true
}

// runSlow does a job with seals, a directory sync or snapshots, then finishes it.
func (f *flushState) runSlow(l *Log, j *flushJob) {
	err := f.syncAll(l, j.seal, j.dirSync, j.active)
	written := 0
	for _, sn := range j.snapshots {
		if err != nil {
			break
		}
		if err = l.snaps.write(l.fsys, l.dir, sn.offset, sn.data, j.keepSnapshotsFrom); err == nil {
			written++
		}
	}
	f.finish(l, j, err, written)
	f.publish()
}

// finish ends a job whose I/O returned err (written of its snapshots written): on success the
// flushed offset (and a local high watermark) moves to the job's target. The caller publishes.
func (f *flushState) finish(l *Log, j *flushJob, err error, written int) {
	defer j.active.Release()
	if err != nil && vfs.IsResourceExhausted(err) {
		// Not a disk failure: put the work back, let waiters fail with a retriable error, and
		// try again shortly.
		refused := l.logDir.Refuse(err)
		l.mu.Lock()
		for _, s := range j.seal {
			if s == l.active || l.closed {
				s.Release() // reactivated by a truncation meanwhile, or closing
				continue
			}
			f.pendingSeal = append(f.pendingSeal, s)
		}
		f.dirSyncNeeded = f.dirSyncNeeded || j.dirSync
		f.pendingSnapshots = append(j.snapshots[written:len(j.snapshots):len(j.snapshots)], f.pendingSnapshots...)
		l.mu.Unlock()
		f.refused.Store(&refused)
		time.AfterFunc(resourceRetryDelay, f.wake)
		return
	}
	for _, s := range j.seal {
		s.Release()
	}
	if err != nil {
		l.logDir.Fail(err)
		return
	}
	if f.refused.Load() != nil {
		f.refused.Store(nil)
	}
	if o := l.config().Observer; o != nil {
		o.ObserveFsync(time.Since(j.start), j.appends)
	}
	target := j.target
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
func (f *flushState) publish() { f.done.fire() }

// stop runs a last cycle of the log and detaches it from the log dir's flusher.
func (f *flushState) stop(l *Log) {
	if f.exited == nil {
		return // never started (init not reached)
	}
	l.logDir.flusher.stop(l)
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
		ch := f.done.wait()
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
		case <-ch:
		case <-f.exited:
		}
	}
}

// Flush makes everything appended so far durable.
func (l *Log) Flush() error { return l.WaitFlushed(l.LogEndOffset()) }

// dirFlusher runs the flush cycles of every log of a log dir on one goroutine, in rounds: a round
// takes every log that asked for a cycle since the previous round (an append due a flush, a roll,
// a flush.ms tick, a waiter), snapshots each, syncs all their active segments at once
// (segment.Syncer: one io_submit, one wait), then stores every log's flushed offset before waking
// any waiter. A produce request that appended to several partitions of the dir therefore waits
// for one round and is woken once, where a flusher per log woke it once per partition, and the
// round costs one wake-up of the flusher instead of one per partition. Rounds are group commit
// across logs: while one round's syncs run, the appends of the next accumulate.
//
// A cycle with more than the active segment to sync (a roll: sealing the rolled segments, the
// directory sync, the producer-state snapshot) runs on a goroutine of its own, so a long seal
// (a page-cache log's rolled segment written back at once) never holds the other logs'
// acknowledgements; the log is skipped by the rounds until it ends. No lock is held across I/O.
//
// The goroutine starts with the dir's first log and exits when its last log stops.
//
// Kafka with log.flush.interval.messages=1 flushes on the request handler thread, one partition
// after the other (UnifiedLog.append then flush, FileChannel.force per segment): a produce over N
// partitions waits for N syncs in turn and shares none with other requests. weir keeps Kafka's
// meaning (an acknowledged record is on disk) and does better on both counts: the request's N
// syncs run together, and concurrent requests share them.
type dirFlusher struct {
	// mu guards queue, logs, running and the queued/busy/stopping/gone fields of every log's
	// flushState. Lock order: a log's mu, then mu.
	mu      sync.Mutex
	queue   []*Log
	spare   []*Log
	logs    int  // logs registered and not gone
	running bool // the goroutine runs
	holds   int  // FlushHolds taken: enqueue queues without waking the goroutine
	kick    chan struct{}

	// rounds counts the rounds that synced at least one log, synced the logs they synced.
	rounds, synced atomic.Int64

	// Used by the flusher goroutine only.
	syncer segment.Syncer
	jobs   []flushJob
	owners []*Log
	segs   []*segment.Segment
	errs   []error
	finals []bool
}

func (d *dirFlusher) register() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.logs++
	if d.kick == nil {
		d.kick = make(chan struct{}, 1)
	}
	if !d.running {
		d.running = true
		go d.loop()
	}
}

// enqueue asks for a cycle of l. It never blocks.
func (d *dirFlusher) enqueue(l *Log) {
	f := &l.flush
	d.mu.Lock()
	if f.queued || f.gone {
		d.mu.Unlock()
		return
	}
	f.queued = true
	if !f.busy {
		d.queue = append(d.queue, l)
	}
	held := d.holds > 0 && !f.stopping
	d.mu.Unlock()
	if held {
		return // the hold's release wakes the goroutine
	}
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *dirFlusher) hold() {
	d.mu.Lock()
	d.holds++
	d.mu.Unlock()
}

func (d *dirFlusher) release() {
	d.mu.Lock()
	d.holds--
	queued := len(d.queue) > 0
	d.mu.Unlock()
	if queued {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// FlushHold lets a request that appends to several logs have one flush round cover all of its
// appends: while held, an append queues its log for the log dir's flusher without waking it, and
// Release wakes it once. Without it an idle flusher woken by the request's first append would
// start a round at once, and the request's reply would wait for that round and the next. The
// flusher is never made to wait: a round already running takes whatever is queued when it gets
// to it, and Release always wakes it, so concurrent requests do not delay each other's rounds. The
// zero value is ready; Add each log before appending to it and call Release once, after the last
// append (a deferred call, so a failed request releases too). Hold only across appends: release
// before anything that may wait (a network round trip), since while the hold lasts other
// requests' appends to the dir do not wake an idle flusher either. A FlushHold is used by one
// goroutine; after Release it may be used again.
type FlushHold struct {
	dirs  [2]*LogDir
	n     int
	extra []*LogDir
}

// Add holds the flusher of l's log dir (once per dir).
func (h *FlushHold) Add(l *Log) {
	d := l.logDir
	for i := range h.n {
		if h.dirs[i] == d {
			return
		}
	}
	for _, e := range h.extra {
		if e == d {
			return
		}
	}
	if h.n < len(h.dirs) {
		h.dirs[h.n] = d
		h.n++
	} else {
		h.extra = append(h.extra, d)
	}
	d.flusher.hold()
}

// Release wakes every held flusher that has work queued, and ends the hold.
func (h *FlushHold) Release() {
	for i := range h.n {
		h.dirs[i].flusher.release()
		h.dirs[i] = nil
	}
	h.n = 0
	for i, e := range h.extra {
		e.flusher.release()
		h.extra[i] = nil
	}
	h.extra = h.extra[:0]
}

// stop asks for a last cycle of l; l.flush.exited is closed once it ran.
func (d *dirFlusher) stop(l *Log) {
	f := &l.flush
	d.mu.Lock()
	if f.stopping {
		d.mu.Unlock()
		return
	}
	f.stopping = true
	d.mu.Unlock()
	f.stopTimer()
	d.enqueue(l)
}

// done ends a log's cycle (final: the one stop asked for): the log is queued again if it asked
// for another cycle meanwhile, or detached after its last one.
func (d *dirFlusher) done(l *Log, final bool) {
	f := &l.flush
	d.mu.Lock()
	f.busy = false
	switch {
	case final:
		f.gone, f.queued = true, false
		d.logs--
		close(f.exited)
	case f.queued:
		d.queue = append(d.queue, l)
	default:
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *dirFlusher) loop() {
	for {
		d.mu.Lock()
		if len(d.queue) == 0 {
			if d.logs == 0 {
				// Released under mu so a goroutine started by the next register never shares
				// the syncer (io_destroy with nothing in flight: no disk I/O).
				d.syncer.Close()
				d.running = false
				d.mu.Unlock()
				return
			}
			d.mu.Unlock()
			<-d.kick
			continue
		}
		batch := d.queue
		d.queue = d.spare[:0]
		d.finals = d.finals[:0]
		for _, l := range batch {
			l.flush.queued, l.flush.busy = false, true
			d.finals = append(d.finals, l.flush.stopping)
		}
		d.mu.Unlock()
		d.round(batch)
		clear(batch)
		d.spare = batch[:0]
	}
}

// round runs one cycle of every log of batch.
//
// It first yields the processor once: the appenders the previous round woke are runnable on this
// P, and letting them append before the snapshot puts them in this round's fdatasync. Without it,
// N closed-loop appenders settle into two alternating groups of about N/2 per fdatasync (measured
// in BenchmarkDurableAppend: 4 appenders 1.9 appends per fsync without, 3.7 with).
func (d *dirFlusher) round(batch []*Log) {
	runtime.Gosched()
	d.jobs, d.owners, d.segs = d.jobs[:0], d.owners[:0], d.segs[:0]
	for i, l := range batch {
		final := d.finals[i]
		j, ok := l.flush.prepare(l)
		switch {
		case !ok:
			d.done(l, final)
		case j.slow():
			slow := j // only a slow job escapes to its goroutine
			go func() {
				l.flush.runSlow(l, &slow)
				d.done(l, final)
			}()
		default:
			j.final = final
			d.jobs = append(d.jobs, j)
			d.owners = append(d.owners, l)
			d.segs = append(d.segs, j.active)
		}
	}
	if len(d.jobs) == 0 {
		return
	}
	if cap(d.errs) < len(d.segs) {
		d.errs = make([]error, len(d.segs))
	}
	d.errs = d.errs[:len(d.segs)]
	d.syncer.SyncAll(d.segs, d.errs)
	d.rounds.Add(1)
	d.synced.Add(int64(len(d.segs)))
	// Every flushed offset is stored before any waiter wakes: a request waiting for several of
	// these logs wakes once.
	for i, l := range d.owners {
		l.flush.finish(l, &d.jobs[i], d.errs[i], 0)
	}
	for i, l := range d.owners {
		l.flush.publish()
		d.done(l, d.jobs[i].final)
		d.owners[i], d.segs[i], d.errs[i] = nil, nil, nil
		d.jobs[i] = flushJob{}
	}
}
