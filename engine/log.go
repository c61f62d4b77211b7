package engine

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// Log is one partition's log on disk: an ordered list of segments, the last one active.
//
// Invariant: logStartOffset <= highWatermark <= logEndOffset; flushed <= logEndOffset.
// The segment list, log end, high watermark, log start and flushed offset are published
// atomically: readers never take the append lock.
type Log struct {
	dir       string
	topic     string
	partition int32
	fsys      vfs.FS
	logDir    *LogDir
	// budget refuses rolls past the process's descriptor and mapping budget (nil = none).
	budget *Budget
	// cfg is the configuration, swapped whole by SetConfig; read it with config().
	cfg atomic.Pointer[Config]

	// structMu (compaction) excludes the operations that change which sealed segments the log
	// holds or what is in them (TruncateTo, DeleteExpiredSegments, DeleteRecordsBefore, Close)
	// from a cleaner's segment swap; appends and reads never take it. Lock order: structMu,
	// then mu, then hwMu.
	structMu sync.Mutex
	// clean is the compaction state (cleaner.go).
	clean cleanState

	// mu is the append lock: one appender (or truncation, roll, retention) at a time.
	mu sync.Mutex
	// active is the last segment. Guarded by mu.
	active *segment.Segment
	// rollJitterMs is the active segment's roll jitter (segment.jitter.ms), drawn when it became
	// active, as Kafka draws a segment's rollJitterMs when it creates or loads it. Guarded by mu.
	rollJitterMs int64
	// nextOffset is the log end offset. Guarded by mu; published in end.
	nextOffset int64
	// leaderEpoch is stamped into appended batches. Guarded by mu.
	leaderEpoch int32
	// producers is the idempotent and transactional producer table. Guarded by mu.
	producers *producerState
	// snaps is the set of producer-state snapshot files in dir (its own lock).
	snaps snapshotFiles
	// replaying is set while loadProducerState replays batches. Guarded by mu.
	replaying bool
	// txnIndexed names the segments that had a .txnindex at open (checked, then dropped);
	// rebuildTxnFrom is the first segment recovery rebuilt at open (-1 none).
	txnIndexed     map[int64]bool
	rebuildTxnFrom int64
	// txnView is a copy of producers.txns published for readers (LastStableOffset): the unstable
	// transactions in first-offset order, nil when none. Written under mu.
	txnView atomic.Pointer[[]txnState]
	closed  bool
	// frozen (move.go): the log is being replaced by its future copy in another log dir; it
	// takes no write, Close still to run. Guarded by mu.
	frozen bool
	// moved (move.go): the log was replaced by its copy in another log dir; a read that finds
	// its segments closed answers NOT_LEADER_OR_FOLLOWER (the reader looks the log up again),
	// not OFFSET_OUT_OF_RANGE.
	moved atomic.Bool
	// truncations counts the truncations that removed batches (move.go: a copy of the log
	// being made starts over when it changes).
	truncations atomic.Uint64
	// epochs is the leader epoch cache (epochs.go); changed under mu, its file written after.
	epochs epochCache

	segments atomic.Pointer[[]*segment.Segment]
	// rolledSegs is the list the last roll published (publishRolledLocked). Guarded by mu.
	rolledSegs *[]*segment.Segment
	// written is the Manager's list of logs appended to (nil outside a Manager); listed says
	// this log is on it (manager.go, writtenLogs).
	written atomic.Pointer[writtenLogs]
	listed  atomic.Bool
	// ckptRecovery is the recovery point in the log dir's checkpoint file as last written
	// (Manager.checkpointRolled).
	ckptRecovery   atomic.Int64
	end            position // log end offset and its place
	hw             position // high watermark and its place
	hwMu           sync.Mutex
	hwChanged      watch
	endChanged     watch // fired when the log end moves (appends, truncation)
	logStartOffset atomic.Int64

	flush flushState
}

// AppendInfo describes an appended batch.
type AppendInfo struct {
	BaseOffset   int64
	LastOffset   int64
	MaxTimestamp int64
	// LogAppendTime is the time stamped into the batch when the log's message.timestamp.type
	// is LogAppendTime, else -1 (Kafka's Produce response field log_append_time_ms).
	LogAppendTime int64
	// Position is the batch's byte position in its segment, SegmentBase that segment's base offset.
	Position    int64
	SegmentBase int64
	Records     int32
	// Duplicate reports a retried idempotent batch that was already stored: nothing was written
	// and the offsets are the original ones.
	Duplicate bool
}

// Isolation bounds a read.
type Isolation int

const (
	// ReadUpToHighWatermark is what consumers see.
	ReadUpToHighWatermark Isolation = iota
	// ReadUpToLogEnd is what followers fetch.
	ReadUpToLogEnd
	// ReadCommitted is what read_committed consumers see: up to the last stable offset.
	ReadCommitted
)

// Topic, Partition and Dir identify the log.
func (l *Log) Topic() string    { return l.topic }
func (l *Log) Partition() int32 { return l.partition }
func (l *Log) Dir() string      { return l.dir }

// Config returns the log's configuration.
func (l *Log) Config() Config { return *l.config() }

func (l *Log) config() *Config { return l.cfg.Load() }

// Durable reports whether the log's acknowledgements wait for fdatasync (Config.Durable),
// without copying the configuration as Config does: the produce path asks it per batch.
func (l *Log) Durable() bool { return l.config().Durable() }

// SetConfig changes the log's configuration at run time (a topic config change): later appends,
// rolls, flushes and retention runs use it; existing segments keep their index settings; a new
// segment.jitter.ms or segment.ms draws the active segment's roll jitter again. Zero
// retention values are kept as given (0 = delete at once), unlike OpenLog's defaults; the clock,
// observer and high-watermark mode carry over when c leaves them unset.
func (l *Log) SetConfig(c Config) {
	old := l.config()
	retentionMs, retentionBytes := c.RetentionMs, c.RetentionBytes
	c.fillDefaults()
	c.RetentionMs, c.RetentionBytes = retentionMs, retentionBytes
	if c.Now == nil {
		c.Now = old.Now
	}
	if c.Nanotime == nil {
		c.Nanotime = old.Nanotime
	}
	if c.Observer == nil {
		c.Observer = old.Observer
	}
	l.cfg.Store(&c)
	if c.SegmentJitterMs != old.SegmentJitterMs || c.SegmentMs != old.SegmentMs {
		// The active segment draws its roll jitter again from the new bounds (Kafka keeps a
		// segment's jitter; a log configured right after its creation would otherwise keep
		// the jitter drawn from the defaults).
		l.mu.Lock()
		l.rollJitterMs = c.randomSegmentJitter()
		l.mu.Unlock()
	}
	l.flush.wake() // a new flush.ms or flush.messages takes effect now
}

// LogEndOffset is the offset the next appended batch gets.
func (l *Log) LogEndOffset() int64 { o, _, _ := l.end.load(); return o }

// LogStartOffset is the first offset a reader may fetch.
func (l *Log) LogStartOffset() int64 { return l.logStartOffset.Load() }

// HighWatermark is the upper bound of consumer reads.
func (l *Log) HighWatermark() int64 { o, _, _ := l.hw.load(); return o }

// RecoveryPoint is the offset below which everything is fdatasync'd.
func (l *Log) RecoveryPoint() int64 { return l.flush.flushed.Load() }

// Segments returns the current segment list (do not modify it; Acquire before using a segment
// that retention might delete).
func (l *Log) Segments() []*segment.Segment { return *l.segments.Load() }

// Size is the total size of the log's segments in bytes.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.Segments() {
		n += s.Size()
	}
	return n
}

// SetLeaderEpoch sets the partition leader epoch stamped into appended batches.
func (l *Log) SetLeaderEpoch(epoch int32) {
	l.mu.Lock()
	l.leaderEpoch = epoch
	l.mu.Unlock()
}

// Append validates batch (one RecordBatch v2, as a Produce request carries it), assigns its
// offsets by writing baseOffset and the leader epoch into the header in place, and writes it to
// the active segment, rolling first when needed. It returns once the bytes are in the page cache;
// AwaitDurable waits for the fdatasync when the log's policy is durable. batch is modified in
// place and not retained.
func (l *Log) Append(batch []byte) (AppendInfo, error) { return l.append(batch, NoVerificationGuard) }

// append is Append; a transactional batch that begins its producer's transaction on the
// partition must carry the producer's current verification guard unless guard is
// NoVerificationGuard (producerstate.go: AppendVerified).
func (l *Log) append(batch []byte, guard VerificationGuard) (AppendInfo, error) {
	cfg := l.config()
	policy := cfg.producePolicy()
	h, err := record.ValidateProduce(batch, &policy)
	if err != nil {
		return AppendInfo{}, err
	}
	if int64(len(batch)) > cfg.SegmentBytes {
		return AppendInfo{}, fmt.Errorf("batch of %d bytes exceeds segment.bytes %d: %w", len(batch), l.config().SegmentBytes, kerr.RecordListTooLarge)
	}
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	if err := l.producers.check(&h, guard); err != nil {
		l.mu.Unlock()
		var dup *duplicateError
		if errors.As(err, &dup) {
			return AppendInfo{BaseOffset: dup.first, LastOffset: dup.last, MaxTimestamp: h.MaxTimestamp, LogAppendTime: -1, Records: h.RecordCount, Duplicate: true}, nil
		}
		return AppendInfo{}, err
	}
	h.BaseOffset = l.nextOffset
	h.PartitionLeaderEpoch = l.leaderEpoch
	record.SetBaseOffset(batch, h.BaseOffset)
	record.SetPartitionLeaderEpoch(batch, h.PartitionLeaderEpoch)
	info, err := l.appendLocked(batch, &h)
	if policy.LogAppendTime {
		info.LogAppendTime = policy.Now
	}
	newEpoch := false
	if err == nil {
		txns := len(l.producers.txns)
		nanos := int64(noNanos) // only producers' writes are stamped (no clock read per plain batch)
		if h.ProducerID >= 0 {
			nanos = l.config().nanotime()
		}
		l.producers.update(&h, nanos)
		if len(l.producers.txns) != txns { // a transaction began
			l.publishTxnsLocked()
		}
		if h.PartitionLeaderEpoch > l.epochs.latest { // rare: the first append of a new epoch
			newEpoch = l.epochs.assignLocked(h.PartitionLeaderEpoch, h.BaseOffset)
		}
	}
	due := err == nil && l.flush.appendedLocked(l, int64(h.RecordCount))
	l.mu.Unlock()
	if due {
		l.flush.wake()
	}
	if newEpoch {
		if perr := l.persistEpochs(); perr != nil {
			return info, perr
		}
	}
	if err == nil && l.config().LocalHighWatermark && !l.config().Durable() {
		_ = l.AdvanceHighWatermark(info.LastOffset + 1)
	}
	return info, err
}

// AppendStored appends batches whose offsets were assigned elsewhere (a follower copying its
// leader, or tools): each batch is checked like a stored one and must start at or after the
// log end. It returns the info of the last batch.
//
// A batch carrying a leader epoch newer than the latest cached one starts that epoch in the
// leader epoch cache (at its base offset); the checkpoint file is written before AppendStored
// returns, outside the append lock.
func (l *Log) AppendStored(batches []byte) (info AppendInfo, err error) {
	newEpoch := false
	l.mu.Lock()
	defer func() {
		due := info.Records > 0 && l.flush.appendedLocked(l, int64(info.Records))
		l.mu.Unlock()
		if due {
			l.flush.wake()
		}
		if newEpoch {
			if perr := l.persistEpochs(); perr != nil && err == nil {
				err = perr
			}
		}
	}()
	if err := l.writableLocked(); err != nil {
		return info, err
	}
	records := int32(0)
	for len(batches) > 0 {
		h, err := record.CheckStored(batches)
		if err != nil {
			return info, err
		}
		if h.BaseOffset < l.nextOffset {
			return info, fmt.Errorf("stored batch at offset %d below log end %d: %w", h.BaseOffset, l.nextOffset, kerr.InvalidRecord)
		}
		b := batches[:h.Size()]
		batches = batches[h.Size():]
		if h.IsControl() && h.ProducerID >= 0 {
			// A malformed marker is refused before it is stored (the producer state could
			// not follow it).
			if _, err := record.ParseEndTxnMarker(b); err != nil && !errors.Is(err, record.ErrNotEndTxnMarker) {
				return info, fmt.Errorf("stored control batch at offset %d: %w", h.BaseOffset, err)
			}
		}
		in, err := l.appendLocked(b, &h)
		if err != nil {
			return info, err
		}
		if err := l.applyBatchLocked(b, &h); err != nil {
			return info, err
		}
		if h.PartitionLeaderEpoch > l.epochs.latest {
			newEpoch = l.epochs.assignLocked(h.PartitionLeaderEpoch, h.BaseOffset) || newEpoch
		}
		records += h.RecordCount
		info = in
		info.Records = records
	}
	return info, nil
}

func (l *Log) writableLocked() error {
	if l.closed || l.frozen {
		return fmt.Errorf("log %s is closed: %w", l.dir, kerr.NotLeaderForPartition)
	}
	return l.logDir.Err()
}

// appendLocked writes one batch with offsets assigned. Requires l.mu.
func (l *Log) appendLocked(batch []byte, h *record.Header) (AppendInfo, error) {
	if l.shouldRollLocked(h, int64(len(batch))) {
		if err := l.rollLocked(h.BaseOffset); err != nil {
			refused := l.logDir.Fail(err)
			if !errors.Is(refused, ErrResourceExhausted) || !l.fitsActiveLocked(h, int64(len(batch))) {
				return AppendInfo{}, refused
			}
			// A roll that was only due (segment.ms, or segment.bytes with room left) and was
			// refused for lack of a resource: the batch still fits the active segment, so it
			// goes there; the next append tries the roll again.
		}
	}
	pos, err := l.active.Append(batch, h)
	if err != nil {
		return AppendInfo{}, l.logDir.Fail(err)
	}
	if w := l.written.Load(); w != nil && !l.listed.Load() {
		w.note(l) // for the Manager's pressure sweeps (settleUnderPressure)
	}
	l.nextOffset = h.NextOffset()
	l.end.store(l.nextOffset, l.active.BaseOffset(), pos+int64(len(batch)))
	l.endChanged.fire()
	return AppendInfo{
		BaseOffset:    h.BaseOffset,
		LastOffset:    h.LastOffset(),
		MaxTimestamp:  h.MaxTimestamp,
		LogAppendTime: -1,
		Position:      pos,
		SegmentBase:   l.active.BaseOffset(),
		Records:       h.RecordCount,
	}, nil
}

// shouldRollLocked is Kafka's roll rule: the active segment is non-empty and the batch would
// overflow segment.bytes, or segment.ms (max.compaction.lag.ms when smaller on a compacted log)
// less the segment's roll jitter has passed since its first batch, or the batch's offsets do not
// fit the segment's indexes.
func (l *Log) shouldRollLocked(h *record.Header, size int64) bool {
	s := l.active
	if s.Size() == 0 {
		return false
	}
	if s.Size() > l.config().SegmentBytes-size {
		return true
	}
	if !s.CanHold(h.LastOffset()) {
		return true
	}
	var waited int64
	if first := s.FirstBatchTimestamp(); first >= 0 && h.MaxTimestamp >= 0 {
		waited = h.MaxTimestamp - first
	} else {
		waited = l.config().now().Sub(s.Created()).Milliseconds()
	}
	cfg := l.config()
	return waited > cfg.maxSegmentMs()-l.rollJitterMs
}

// fitsActiveLocked reports whether the batch can still be appended to the active segment: its
// positions and offsets fit the indexes and the segment stays within segment.bytes.
func (l *Log) fitsActiveLocked(h *record.Header, size int64) bool {
	s := l.active
	return s.Size()+size <= l.config().SegmentBytes && s.Size()+size <= math.MaxInt32 && s.CanHold(h.LastOffset())
}

// rollLocked seals the active segment and starts a new one at baseOffset. The old segment's
// fdatasync, index trim and the directory sync happen in the flusher, off the append lock.
//
// The new segment is created first: when that fails (no descriptor or mapping left, see
// LogDir.Fail) nothing has changed, the old segment is still active and appendable, no file of the
// new one is left behind, and the next append tries the roll again.
func (l *Log) rollLocked(baseOffset int64) error {
	if err := l.reserveSegmentLocked(); err != nil {
		return fmt.Errorf("roll %s at %d: %w", l.dir, baseOffset, err)
	}
	seg, err := segment.Create(l.fsys, l.dir, baseOffset, l.config().segmentConfig(), l.config().now())
	if err != nil {
		return fmt.Errorf("roll %s at %d: %w", l.dir, baseOffset, err)
	}
	old := l.active
	if err := old.MarkInactive(); err != nil {
		_ = seg.Delete()
		return err
	}
	l.flush.rolled(old)
	l.flush.snapshotLocked(baseOffset, l.producers.encodeSnapshot())
	l.active = seg
	l.rollJitterMs = l.config().randomSegmentJitter()
	l.publishRolledLocked(seg)
	return nil
}

// publishRolledLocked publishes the segment list with seg appended. A roll appends in place
// when the published list is the one the previous roll made and has room: no published list
// reaches past its length in that array (a truncation or deletion publishes a different list,
// and the next roll copies), so readers holding an older, shorter list never see an element
// change. Copying the list at every roll made writing a log of n segments cost O(n^2) (a topic
// of 100,000 small segments copied 40 GB of pointers).
func (l *Log) publishRolledLocked(seg *segment.Segment) {
	cur := l.Segments()
	var segs []*segment.Segment
	if p := l.segments.Load(); p == l.rolledSegs && len(cur) < cap(cur) {
		segs = append(cur, seg)
	} else {
		segs = append(append(make([]*segment.Segment, 0, len(cur)+len(cur)/2+2), cur...), seg)
	}
	l.segments.Store(&segs)
	l.rolledSegs = &segs
}

// reserveSegmentLocked refuses a roll that would take the process's segments past the budget
// (ErrResourceExhausted: the append fails with a retriable error, the log dir stays online).
func (l *Log) reserveSegmentLocked() error {
	return l.budget.CheckSegments(1)
}

// RemoveExpiredProducers forgets the idempotent producers whose last write is
// producer.id.expiration.ms old or older (Kafka's UnifiedLog.removeExpiredProducers) and
// returns how many it forgot. A later batch of a forgotten producer is accepted at any sequence.
func (l *Log) RemoveExpiredProducers() int {
	cfg := l.config()
	now, nowNanos := cfg.now().UnixMilli(), cfg.nanotime()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0
	}
	return l.producers.expire(now, nowNanos, cfg.ProducerIDExpirationMs)
}

// Roll forces a roll if the active segment holds data.
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if l.active.Size() == 0 {
		return nil
	}
	if err := l.rollLocked(l.nextOffset); err != nil {
		return l.logDir.Fail(err)
	}
	return nil
}

// SetHighWatermark moves the high watermark to offset, clamped to [log start, log end].
func (l *Log) SetHighWatermark(offset int64) error {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	return l.setHighWatermarkLocked(offset)
}

// AdvanceHighWatermark moves the high watermark forward to offset (clamped to the log end);
// a lower offset is ignored. Concurrent callers may arrive in any order.
func (l *Log) AdvanceHighWatermark(offset int64) error {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	if offset <= l.HighWatermark() {
		return nil
	}
	return l.setHighWatermarkLocked(offset)
}

// setHighWatermarkLocked stores the high watermark and wakes its watchers. Requires l.hwMu.
func (l *Log) setHighWatermarkLocked(offset int64) error {
	defer l.hwChanged.fire()
	endOffset, endBase, endPos := l.end.load()
	if offset >= endOffset {
		l.hw.store(endOffset, endBase, endPos)
		return nil
	}
	ls := l.logStartOffset.Load()
	if offset < ls {
		offset = ls
	}
	seg, ok := l.acquireSegmentFor(offset)
	if !ok {
		return fmt.Errorf("set high watermark of %s to %d: no segment: %w", l.dir, offset, kerr.OffsetOutOfRange)
	}
	defer seg.Release()
	pos, h, found, err := seg.TranslateOffset(offset)
	if err != nil {
		return fmt.Errorf("set high watermark of %s to %d: %w", l.dir, offset, err)
	}
	if found && h.BaseOffset < offset {
		// The watermark falls inside a batch: readers stop before that whole batch. It never
		// goes below the log start (DeleteRecordsBefore may have put that inside a batch).
		offset = max(h.BaseOffset, ls)
	}
	l.hw.store(offset, seg.BaseOffset(), pos)
	return nil
}

// acquireSegmentFor returns, with a reference held, the segment whose range holds offset (the
// last one with base <= offset).
func (l *Log) acquireSegmentFor(offset int64) (*segment.Segment, bool) {
	for {
		p := l.segments.Load()
		segs := *p
		i := sort.Search(len(segs), func(i int) bool { return segs[i].BaseOffset() > offset }) - 1
		if i < 0 {
			return nil, false
		}
		if segs[i].Acquire() {
			return segs[i], true
		}
		if l.segments.Load() == p {
			return nil, false // the list did not change: the log is closing
		}
	}
}

// TruncateTo removes every batch at or after offset (a batch holding offset goes whole), for a
// follower whose tail diverged from its leader. Leader epochs starting at or after the new log
// end leave the epoch cache (its file is written after the locks are released).
func (l *Log) TruncateTo(offset int64) (err error) {
	newEpochs := false
	defer func() { // runs after the unlocks below
		if newEpochs {
			if perr := l.persistEpochs(); perr != nil && err == nil {
				err = perr
			}
		}
	}()
	l.structMu.Lock() // compaction
	defer l.structMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if offset >= l.nextOffset {
		return nil
	}
	if offset < l.logStartOffset.Load() {
		offset = l.logStartOffset.Load()
	}
	l.clean.truncated(offset) // compaction: a cleaning in progress gives up
	l.truncations.Add(1)      // move.go
	segs := l.Segments()
	keep := segs[:0:0]
	var doomed []*segment.Segment
	for _, s := range segs {
		if s.BaseOffset() >= offset && s.BaseOffset() > segs[0].BaseOffset() {
			doomed = append(doomed, s)
		} else {
			keep = append(keep, s)
		}
	}
	last := keep[len(keep)-1]
	l.flush.reactivating(last)
	_, first, found, err := last.TranslateOffset(offset)
	if err != nil {
		return l.logDir.Fail(err)
	}
	next, err := last.TruncateTo(offset)
	if err != nil {
		return l.logDir.Fail(err)
	}
	start := l.logStartOffset.Load()
	if found && next < first.BaseOffset && (last.Size() == 0 || next <= start) {
		// What the segment keeps ends below the removed batches: it is empty now (an empty
		// segment's next offset is its base), or holds only batches below the log start (a
		// follower that started over at its leader's log start appends there, into a segment
		// based lower, after what it emptied). The log end is where the first removed batch
		// began, as in MemLog and Kafka's truncateTo.
		next = first.BaseOffset
	}
	if last != l.active { // an older segment is active again: it gets a jitter of its own
		l.rollJitterMs = l.config().randomSegmentJitter()
	}
	l.active = last
	l.nextOffset = next
	if next < start {
		// The batch holding the log start went whole: the log start follows the log end down.
		l.logStartOffset.Store(next)
	}
	l.segments.Store(&keep)
	l.end.store(next, last.BaseOffset(), last.Size())
	l.endChanged.fire()
	l.hwMu.Lock() // hw is a one-writer seqlock: SetHighWatermark writes it too
	if hw := l.HighWatermark(); hw >= next {
		// Also when equal: the watermark's place may name a segment just deleted, and reads
		// would then be bounded by the size of the segment appends now go to (as Kafka does,
		// refresh it from the new log end).
		l.hw.store(next, last.BaseOffset(), last.Size())
	}
	l.hwMu.Unlock()
	l.flush.truncated(next)
	newEpochs = l.epochs.truncateFromEndLocked(next)
	_ = l.snaps.removeAbove(l.fsys, l.dir, next)
	// The producer state is rebuilt as Kafka's truncateAndReload does: the newest snapshot at or
	// below the new log end, then the batches after it (ongoing transactions included; the
	// .txnindex entries of markers cut are already gone with the segments' truncation).
	if err := l.loadProducerState(l.producers); err != nil {
		return l.logDir.Fail(err)
	}
	for _, s := range doomed {
		if err := deleteSegment(l.fsys, s, l.config().FileDeleteDelayMs); err != nil {
			return l.logDir.Fail(err)
		}
	}
	return nil
}

// Read returns the bytes of the batches from offset on, at most maxBytes (but at least the whole
// first batch, as Kafka's fetch does), bounded by the high watermark, the last stable offset
// (ReadCommitted) or the log end. The result
// holds a segment reference until Slice.Release. A read at the bound returns an empty slice; an
// offset outside [log start, bound] is OFFSET_OUT_OF_RANGE, except for ReadCommitted, where it
// is outside [log start, log end] as in Kafka's LocalLog.read (the broker's fetch treats
// ReadUpToHighWatermark the same way before calling Read).
func (l *Log) Read(offset int64, maxBytes int64, iso Isolation) (segment.Slice, error) {
	var boundOffset, boundBase, boundPos int64
	switch iso {
	case ReadUpToLogEnd:
		boundOffset, boundBase, boundPos = l.end.load()
	case ReadCommitted:
		// The valid range ends at the log end, not the high watermark: a new leader's high
		// watermark can lag, for a moment after a failover, offsets consumers already read
		// from the old leader, and OFFSET_OUT_OF_RANGE would make them reset (re-read from the
		// start or skip). The records returned stop at the last stable offset (a read past it
		// is empty, as in Kafka).
		if end := l.LogEndOffset(); offset > end {
			return segment.Slice{}, fmt.Errorf("offset %d past the log end %d of %s: %w", offset, end, l.dir, kerr.OffsetOutOfRange)
		}
		var err error
		if boundOffset, boundBase, boundPos, err = l.lastStablePosition(); err != nil {
			return segment.Slice{}, err
		}
		if offset > boundOffset && offset >= l.logStartOffset.Load() {
			return segment.Slice{}, nil
		}
	default:
		boundOffset, boundBase, boundPos = l.hw.load()
	}
	if start := l.logStartOffset.Load(); offset < start || offset > boundOffset {
		return segment.Slice{}, fmt.Errorf("offset %d outside [%d, %d] of %s: %w", offset, start, boundOffset, l.dir, kerr.OffsetOutOfRange)
	}
	for offset < boundOffset {
		seg, ok := l.acquireSegmentFor(offset)
		if !ok {
			if l.moved.Load() {
				return segment.Slice{}, fmt.Errorf("read %s at %d: the log moved to another log dir: %w", l.dir, offset, kerr.NotLeaderForPartition)
			}
			return segment.Slice{}, fmt.Errorf("read %s at %d: no segment: %w", l.dir, offset, kerr.OffsetOutOfRange)
		}
		pos, h, found, err := seg.TranslateOffset(offset)
		if err != nil {
			seg.Release()
			return segment.Slice{}, fmt.Errorf("read %s at %d: %w", l.dir, offset, err)
		}
		if !found {
			// Nothing at or after offset in this segment: continue in the next one.
			next := l.nextSegmentBase(seg.BaseOffset())
			seg.Release()
			if next < 0 {
				break
			}
			offset = next
			continue
		}
		maxPos := seg.Size()
		if boundBase == seg.BaseOffset() {
			maxPos = boundPos
		}
		if pos >= maxPos {
			seg.Release()
			break
		}
		length := maxBytes
		if length < h.Size() {
			length = h.Size()
		}
		if length > maxPos-pos {
			length = maxPos - pos
		}
		sl, ok := seg.Slice(pos, length)
		seg.Release()
		if !ok {
			continue
		}
		return sl, nil
	}
	return segment.Slice{}, nil
}

func (l *Log) nextSegmentBase(base int64) int64 {
	segs := l.Segments()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].BaseOffset() > base })
	if i >= len(segs) {
		return -1
	}
	return segs[i].BaseOffset()
}

// OffsetForTimestamp returns the first offset whose batch max timestamp is >= ts and that
// batch's max timestamp, or (-1, -1) when every batch is older. The offset returned is the
// batch's base offset (clients skip earlier records of the batch).
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, err error) {
	for _, s := range l.Segments() {
		if s.MaxTimestamp() < ts {
			continue
		}
		if !s.Acquire() {
			continue
		}
		pos, h, found, err := s.FindTimestamp(ts, l.LogStartOffset())
		s.Release()
		_ = pos
		if err != nil {
			return -1, -1, err
		}
		if found {
			o := h.BaseOffset
			if ls := l.LogStartOffset(); o < ls {
				o = ls
			}
			return o, h.MaxTimestamp, nil
		}
	}
	return -1, -1, nil
}

// DeleteRecordsBefore advances the log start offset to offset (Kafka's DeleteRecords); offset
// may not pass the high watermark. Segments wholly below it are deleted.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	if hw := l.HighWatermark(); offset > hw {
		return l.LogStartOffset(), fmt.Errorf("delete records of %s before %d past high watermark %d: %w", l.dir, offset, hw, kerr.OffsetOutOfRange)
	}
	l.structMu.Lock() // compaction
	defer l.structMu.Unlock()
	l.mu.Lock()
	if offset > l.logStartOffset.Load() {
		l.logStartOffset.Store(offset)
	}
	doomed := l.dropSegmentsLocked(func(s *segment.Segment, next int64) bool { return next <= l.logStartOffset.Load() })
	newEpochs := l.epochs.truncateFromStartLocked(l.logStartOffset.Load())
	l.mu.Unlock()
	err := l.deleteSegments(doomed)
	if newEpochs {
		err = errors.Join(err, l.persistEpochs())
	}
	return l.LogStartOffset(), err
}

// dropSegmentsLocked removes leading segments (never the active one) while keep returns true for
// them, given each segment's successor's base offset, and advances the log start offset past
// them. It returns the removed segments for deletion outside the lock.
func (l *Log) dropSegmentsLocked(drop func(s *segment.Segment, nextBase int64) bool) []*segment.Segment {
	segs := l.Segments()
	n := 0
	for n < len(segs)-1 && drop(segs[n], segs[n+1].BaseOffset()) {
		n++
	}
	if n == 0 {
		return nil
	}
	rest := append([]*segment.Segment(nil), segs[n:]...)
	l.segments.Store(&rest)
	if b := rest[0].BaseOffset(); b > l.logStartOffset.Load() {
		l.logStartOffset.Store(b)
	}
	l.hwMu.Lock() // hw is a one-writer seqlock: SetHighWatermark writes it too
	if hwOff, _, _ := l.hw.load(); hwOff < l.logStartOffset.Load() {
		l.hw.store(l.logStartOffset.Load(), rest[0].BaseOffset(), 0)
	}
	l.hwMu.Unlock()
	return segs[:n:n]
}

// deleteSegments deletes segments that left the log, after file.delete.delay.ms (deleteq.go).
// Requires structMu.
func (l *Log) deleteSegments(doomed []*segment.Segment) error {
	var errs []error
	delay := l.config().FileDeleteDelayMs
	for _, s := range doomed {
		if err := deleteSegment(l.fsys, s, delay); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DeleteExpiredSegments applies retention.ms (on each segment's largest timestamp) and
// retention.bytes, oldest first, whole segments only and never the active one, when the cleanup
// policy includes delete. It returns how many segments it deleted.
func (l *Log) DeleteExpiredSegments() (int, error) {
	if !l.config().PolicyDelete() { // compaction: compact-only logs keep every segment
		return 0, nil
	}
	l.structMu.Lock()
	defer l.structMu.Unlock()
	now := l.config().now().UnixMilli()
	l.mu.Lock()
	// As in Kafka, only segments wholly below the high watermark may go: retention never
	// deletes records consumers have not been allowed to see.
	hw := l.HighWatermark()
	var doomed []*segment.Segment
	if l.config().RetentionMs >= 0 {
		doomed = append(doomed, l.dropSegmentsLocked(func(s *segment.Segment, nextBase int64) bool {
			if nextBase > hw {
				return false
			}
			ts := s.MaxTimestamp()
			if ts < 0 {
				ts = s.Created().UnixMilli()
			}
			return now-ts > l.config().RetentionMs
		})...)
	}
	if l.config().RetentionBytes >= 0 {
		excess := l.Size() - l.config().RetentionBytes
		doomed = append(doomed, l.dropSegmentsLocked(func(s *segment.Segment, nextBase int64) bool {
			if nextBase > hw || excess-s.Size() < 0 {
				return false
			}
			excess -= s.Size()
			return true
		})...)
	}
	newEpochs := len(doomed) > 0 && l.epochs.truncateFromStartLocked(l.logStartOffset.Load())
	l.mu.Unlock()
	err := l.deleteSegments(doomed)
	if newEpochs {
		err = errors.Join(err, l.persistEpochs())
	}
	return len(doomed), err
}

// Close flushes (when the log is durable, or as a clean shutdown always does), trims the
// indexes and closes every segment.
// settleIfIdle settles the active segment when it took no append since the previous call and is
// durable (segment.SettleIfIdle), under the append lock as that requires. Memory logs and closed
// logs are skipped.
func (l *Log) settleIfIdle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.active == nil {
		return
	}
	l.active.SettleIfIdle()
}

// settleIfSynced settles the active segment when everything appended to it is durable
// (segment.SettleIfSynced), unless the appender holds the append lock (it is writing: its
// segment is not synced, and the pressure sweep does not wait for it). It reports whether it
// settled, and when not whether a later sweep may (the log is open and its segment not settled).
func (l *Log) settleIfSynced() (settled, retry bool) {
	if !l.mu.TryLock() {
		return false, true
	}
	defer l.mu.Unlock()
	if l.closed || l.active == nil {
		return false, false
	}
	if l.active.SettleIfSynced() {
		return true, false
	}
	return false, !l.active.IsSettled()
}

func (l *Log) Close() error {
	l.structMu.Lock() // compaction: a segment swap in progress finishes first
	defer l.structMu.Unlock()
	l.flush.stop(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	if l.logDir.Err() == nil {
		// The active segment's indexes are trusted after a clean shutdown: give the time index
		// its final entry (max timestamp so far, as Kafka's LogSegment.close does) and make them
		// durable (trimmed and synced) before the clean-shutdown marker can be written.
		if err := l.active.AppendFinalTimeIndexEntry(); err != nil {
			errs = append(errs, err)
		}
		if err := l.active.Seal(); err != nil {
			errs = append(errs, err)
		}
		// The producer state at the log end, so a restart deduplicates without replaying.
		if err := l.snaps.write(l.fsys, l.dir, l.nextOffset, l.producers.encodeSnapshot(), l.Segments()[0].BaseOffset()); err != nil {
			errs = append(errs, err)
		}
	}
	// A change an appender has not written yet (it skips the write once closed).
	if err := l.closeEpochs(l.logDir.Err() == nil); err != nil {
		errs = append(errs, err)
	}
	for _, s := range l.Segments() {
		if err := s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteFiles closes the log (its flusher and epoch cache) and deletes its segments' files; the
// caller removes the directory (Manager.CreateLog, abandoning a log it could not complete).
func (l *Log) deleteFiles() error {
	l.structMu.Lock() // compaction
	defer l.structMu.Unlock()
	l.flush.stop(l)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	_ = l.closeEpochs(false)
	var errs []error
	for _, s := range l.Segments() {
		if err := s.Delete(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
