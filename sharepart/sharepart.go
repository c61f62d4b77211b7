// Package sharepart owns the share-partition leader's state (KIP-932): for each (share group,
// topic partition) this broker leads, a Partition that hands records to share consumers under
// acquisition locks and tracks their delivery state, persisted through a sharestate.Persister.
//
// A Partition tracks the window [start, end): start is the share-partition start offset (SPSO:
// every record below it is done), end is one past the last offset ever acquired (the
// share-partition end offset SPEO is end-1). Each offset of the window has a state (AVAILABLE,
// ACQUIRED by a member until a deadline, ACKNOWLEDGED or ARCHIVED) and a delivery count, kept
// in one slice indexed by offset-start (no allocation per record; the slice is reused as start
// moves). A record is acquired by a fetch (its delivery count goes up), then acknowledged by its
// member: ACCEPT makes it ACKNOWLEDGED, RELEASE makes it AVAILABLE again, REJECT (and GAP, an
// offset with no record) ARCHIVED, RENEW extends its lock. An acquisition lock that expires
// makes the record AVAILABLE again; a record released or expired at the delivery count limit is
// ARCHIVED instead. start advances over the done prefix. New records are acquired only while
// the window holds fewer than the in-flight limit (a whole log batch is acquired at once, so
// the window may pass the limit by one batch).
//
// Goroutines: none of its own; a Partition arms one time.Timer (AfterFunc) for its earliest
// lock deadline, and the timer's goroutine expires locks. Lock deadlines are on the monotonic
// clock by default (Options.Now), so a step of the wall clock neither breaks nor stretches a
// lock. Invariants: every field of a
// Partition is guarded by its mu; state that must survive a failover (acknowledgements,
// releases, archives, expired locks, start moves) is written to the persister before the
// operation that changed it returns, and restored in memory when the write fails; a closed
// Partition (dropped by the Manager, or fenced) changes nothing more (ErrClosed), so of the
// Partitions ever loaded for one share partition only the Manager's current one changes its
// state.
package sharepart

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/sharestate"
)

// Record states (Kafka's RecordState ids, as persisted).
const (
	Available    = sharestate.Available
	Acquired     = sharestate.Acquired
	Acknowledged = sharestate.Acknowledged
	Archived     = sharestate.Archived
)

// Acknowledge types of ShareFetch/ShareAcknowledge (KIP-932; RENEW is KIP-1222, v2).
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4
)

// Config is a share partition's limits, resolved from the broker's and the group's configs.
type Config struct {
	// LockDuration is the acquisition lock duration (share.record.lock.duration.ms).
	LockDuration time.Duration
	// DeliveryLimit is the delivery count at which a released or expired record is archived
	// (group.share.delivery.count.limit).
	DeliveryLimit int16
	// MaxInFlight bounds the window: no new records are acquired while end-start reaches it
	// (group.share.partition.max.record.locks).
	MaxInFlight int64
}

// Range is an inclusive offset range; for a log batch, its base and last offsets.
type Range struct {
	First, Last int64
	// Skip marks a batch whose records are never delivered: a control batch (transaction
	// markers), or, reading committed records only, a batch of an aborted transaction.
	Skip bool
}

// AcquiredRange is a run of acquired offsets with one delivery count (ShareFetch's
// AcquiredRecords).
type AcquiredRange struct {
	First, Last   int64
	DeliveryCount int16
}

// rec is one offset's state in the window.
type rec struct {
	deadline int64  // lock deadline, UnixNano of the partition's clock (ACQUIRED only)
	member   string // the member holding the lock (ACQUIRED only)
	count    int16
	state    int8
}

// maxWindow is a hard bound on the window whatever MaxInFlight says: a whole batch past the
// limit is still acquired, and a log batch has at most this many records as Kafka builds them.
const maxWindow = 1 << 20

// ErrFenced marks a Partition whose persisted state was taken over by another leader or state
// epoch: the caller drops it.
var ErrFenced = errors.New("share partition fenced")

// ErrClosed is the answer of an operation on a Partition that was closed (its share partition
// dropped: leadership moved, or a write was fenced) by the time it got the lock: it changes
// nothing, since a new Partition may have loaded the state meanwhile and would not see it.
var ErrClosed = fmt.Errorf("share partition no longer held by this partition leader: %w", kerr.NotLeaderForPartition)

// Partition is one share partition's in-memory state.
type Partition struct {
	mu sync.Mutex // guards every field below

	key         sharestate.Key
	persister   sharestate.Persister
	leaderEpoch int32
	stateEpoch  int32
	cfg         Config
	now         func() time.Time
	timers      bool
	onAvail     func()

	start int64
	recs  []rec // recs[i] is offset start+i; len(recs) == end-start
	// timer fires at the earliest lock deadline (armedAt); nil when none is armed.
	timer   *time.Timer
	armedAt int64
	// fenced is set (under mu) once a write found the partition fenced or it was closed; read
	// without mu by the Manager.
	fenced atomic.Bool
	// undo holds the records an operation changed, to restore them if the write fails.
	undo []undoRec
}

type undoRec struct {
	off int64
	r   rec
}

// Options configure a Partition.
type Options struct {
	Key         sharestate.Key
	Persister   sharestate.Persister
	LeaderEpoch int32
	Config      Config
	// Now is the clock of lock deadlines; tests use a fake one. Nil: the monotonic clock
	// (internal/clock.Nanotime as a time.Time), so a wall-clock step neither expires every lock
	// at once nor holds a lock for the length of a backward step (Kafka's acquisition-lock
	// timers run on a monotonic clock too). Only durations between its readings matter.
	Now func() time.Time
	// NoTimers: lock deadlines are checked only by ExpireLocks (tests with a fake clock).
	NoTimers bool
	// OnAvailable is called (under the partition's lock: it must not call back) when records
	// become available again: released, or their lock expired.
	OnAvailable func()
	// ResolveStart returns the start offset of a share partition that has no state yet
	// (share.auto.offset.reset); called at most once, by Load.
	ResolveStart func() (int64, error)
}

// monotonicNow is the default lock clock: the monotonic clock's nanoseconds as a time.Time
// (its wall reading is meaningless; only differences are used).
func monotonicNow() time.Time { return time.Unix(0, clock.Nanotime()) }

// maxInitAttempts bounds Load's initializations that find the state initialized meanwhile.
const maxInitAttempts = 3

// Load reads k's state from the persister (with the partition's leader epoch) and returns its
// Partition; a share partition with no state is initialized at ResolveStart's offset. Acquired
// batches of the stored state (a leader that failed) are available again.
func Load(ctx context.Context, o Options) (*Partition, error) {
	p := &Partition{key: o.Key, persister: o.Persister, leaderEpoch: o.LeaderEpoch, cfg: o.Config, now: o.Now,
		timers: !o.NoTimers, onAvail: o.OnAvailable}
	if p.now == nil {
		p.now = monotonicNow
	}
	st, err := o.Persister.Read(ctx, o.Key, o.LeaderEpoch)
	start, resolved := int64(0), false
	for attempt := 0; errors.Is(err, sharestate.ErrNotInitialized) || (err == nil && st.StartOffset < 0); attempt++ {
		if o.ResolveStart == nil {
			return nil, fmt.Errorf("share partition %s/%x/%d has no state and no start: %w", o.Key.Group, o.Key.TopicID, o.Key.Partition, kerr.UnknownServerError)
		}
		if !resolved {
			var rerr error
			if start, rerr = o.ResolveStart(); rerr != nil {
				return nil, fmt.Errorf("share partition %s/%d: resolve start offset: %w", o.Key.Group, o.Key.Partition, rerr)
			}
			resolved = true
		}
		epoch := int32(0)
		if err == nil {
			epoch = st.StateEpoch
		}
		ierr := o.Persister.Initialize(ctx, o.Key, epoch, start)
		if errors.Is(ierr, kerr.FencedStateEpoch) && attempt < maxInitAttempts {
			// Initialized at a newer state epoch since the read (the group coordinator
			// initializes the partitions it assigns): read it again.
			st, err = o.Persister.Read(ctx, o.Key, o.LeaderEpoch)
			continue
		}
		if ierr != nil {
			return nil, fmt.Errorf("share partition %s/%d: initialize at %d: %w", o.Key.Group, o.Key.Partition, start, ierr)
		}
		st, err = o.Persister.Read(ctx, o.Key, o.LeaderEpoch)
		break
	}
	if err != nil {
		return nil, fmt.Errorf("share partition %s/%d: read state: %w", o.Key.Group, o.Key.Partition, err)
	}
	p.stateEpoch = st.StateEpoch
	p.start = st.StartOffset
	end := p.start
	for _, b := range st.Batches {
		if b.LastOffset+1 > end {
			end = b.LastOffset + 1
		}
	}
	if end-p.start > maxWindow {
		end = p.start + maxWindow
	}
	p.recs = make([]rec, end-p.start)
	for _, b := range st.Batches {
		for o := max(b.FirstOffset, p.start); o <= b.LastOffset && o < end; o++ {
			s := b.DeliveryState
			if s == Acquired {
				s = Available
			}
			p.recs[o-p.start] = rec{state: s, count: b.DeliveryCount}
		}
	}
	p.dropLocked(p.donePrefixLocked())
	return p, nil
}

// Key returns the partition's key.
func (p *Partition) Key() sharestate.Key { return p.key }

// LeaderEpoch returns the leader epoch the partition was loaded at.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch }

// SetConfig updates the limits (a changed group or broker config); held locks keep their
// deadlines.
func (p *Partition) SetConfig(c Config) {
	p.mu.Lock()
	p.cfg = c
	p.mu.Unlock()
}

// Fenced reports whether a write found the partition fenced: the caller drops it.
func (p *Partition) Fenced() bool { return p.fenced.Load() }

// Offsets returns the start offset and the end of the window.
func (p *Partition) Offsets() (start, end int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start, p.start + int64(len(p.recs))
}

// State returns offset's state and delivery count (done below start: ARCHIVED count 0; past
// the window: AVAILABLE 0).
func (p *Partition) State(offset int64) (state int8, count int16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if offset < p.start {
		return Archived, 0
	}
	if i := offset - p.start; i < int64(len(p.recs)) {
		return p.recs[i].state, p.recs[i].count
	}
	return Available, 0
}

// NextFetchOffset returns the offset the next fetch reads the log from: the first AVAILABLE
// offset of the window, else its end; ok false when nothing can be acquired (no available
// record and the window full).
func (p *Partition) NextFetchOffset() (offset int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.recs {
		if p.recs[i].state == Available {
			return p.start + int64(i), true
		}
	}
	end := p.start + int64(len(p.recs))
	return end, int64(len(p.recs)) < p.cfg.MaxInFlight
}

// SetLogStart archives the records below the log start offset (deleted by retention or
// DeleteRecords) and moves start past them; it persists a move.
func (p *Partition) SetLogStart(ctx context.Context, logStart int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced.Load() {
		return ErrClosed
	}
	if logStart <= p.start {
		return nil
	}
	p.undo = p.undo[:0]
	n := min(logStart-p.start, int64(len(p.recs)))
	for i := int64(0); i < n; i++ {
		p.setLocked(p.start+i, rec{state: Archived, count: p.recs[i].count})
	}
	if err := p.persistLocked(ctx); err != nil {
		return err
	}
	if p.start < logStart && len(p.recs) == 0 {
		// The whole window was below the log start: start moves on to it.
		old := p.start
		p.start = logStart
		if err := p.persistLocked(ctx); err != nil {
			p.start = old
			return err
		}
	}
	return nil
}

// Acquire acquires for member the acquirable records of the log batches read from offset from
// (sorted, as the log returns them): the AVAILABLE offsets of the window, and offsets past it
// while the window is below the in-flight limit, a whole batch at a time. It stops after the batch that brings
// the records acquired to maxRecords (0: no limit), or, strict (ShareAcquireMode record-limit,
// KIP-1206), at maxRecords exactly. The ranges acquired are appended to dst. Available offsets
// of the window the read passed over without a batch (removed by compaction) are archived.
// Acquisition is not persisted (as in Kafka: a failover makes them available again).
func (p *Partition) Acquire(member string, from int64, batches []Range, maxRecords int, strict bool, dst []AcquiredRange) []AcquiredRange {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced.Load() {
		return dst // closed: nothing is acquired here any more
	}
	now := p.now()
	deadline := now.Add(p.cfg.LockDuration).UnixNano()
	acquired := 0
	next := from
	for _, b := range batches {
		if maxRecords > 0 && acquired >= maxRecords {
			break
		}
		for o, end := max(next, p.start), min(b.First, p.start+int64(len(p.recs))); o < end; o++ {
			if r := &p.recs[o-p.start]; r.state == Available {
				*r = rec{state: Archived, count: r.count}
			}
		}
		next = max(next, b.Last+1)
		if end := p.start + int64(len(p.recs)); b.First > end && b.First-end >= p.cfg.MaxInFlight && p.donePrefixLocked() == len(p.recs) {
			// A gap (compaction) wider than the window with nothing in flight: start jumps
			// over it (written with the next write of the state).
			p.start = b.First
			p.recs = p.recs[:0]
		}
		first := max(b.First, p.start)
		if first > b.Last {
			continue
		}
		stop := false
		if end := p.start + int64(len(p.recs)); b.Last >= end {
			if int64(len(p.recs)) >= p.cfg.MaxInFlight || b.Last-p.start+1 > maxWindow {
				stop = true // no room for new records: only what the window holds
			} else {
				// Offsets between the window and the batch have no record (compaction):
				// done. A skipped batch's offsets are never delivered: done.
				for o := end; o < b.First; o++ {
					p.recs = append(p.recs, rec{state: Archived})
				}
				st := Available
				if b.Skip {
					st = Archived
				}
				for o := max(end, b.First); o <= b.Last; o++ {
					p.recs = append(p.recs, rec{state: st})
				}
			}
		}
		end := p.start + int64(len(p.recs))
		for o := first; o <= b.Last && o < end; o++ {
			if strict && maxRecords > 0 && acquired >= maxRecords {
				break
			}
			r := &p.recs[o-p.start]
			if r.state != Available || b.Skip {
				continue
			}
			r.state, r.member, r.deadline = Acquired, member, deadline
			if r.count < 1<<15-1 {
				r.count++
			}
			acquired++
			dst = appendRange(dst, o, r.count)
		}
		if stop {
			break
		}
	}
	if acquired > 0 {
		p.armLocked(deadline)
	}
	return dst
}

// SplitAtBatches appends acq to dst with every range of more than batchSize records cut into
// batches as Kafka's SharePartition.createBatches cuts the records it acquires for a ShareFetch
// with a BatchSize (KIP-932, ShareFetch v1+): a batch ends before the first log batch (batches,
// sorted) that starts batchSize or more offsets past the batch's start. Log batches are never
// split, so a batch holds more than batchSize records when one log batch does. batchSize <= 0
// cuts nothing.
func SplitAtBatches(dst, acq []AcquiredRange, batches []Range, batchSize int) []AcquiredRange {
	for _, a := range acq {
		if batchSize <= 0 || a.Last-a.First+1 <= int64(batchSize) {
			dst = append(dst, a)
			continue
		}
		first := a.First
		for _, b := range batches {
			if b.First > a.Last {
				break
			}
			if b.First-first >= int64(batchSize) {
				dst = append(dst, AcquiredRange{First: first, Last: b.First - 1, DeliveryCount: a.DeliveryCount})
				first = b.First
			}
		}
		dst = append(dst, AcquiredRange{First: first, Last: a.Last, DeliveryCount: a.DeliveryCount})
	}
	return dst
}

// NeedsSplit reports whether SplitAtBatches would cut one of acq's ranges.
func NeedsSplit(acq []AcquiredRange, batchSize int) bool {
	for _, a := range acq {
		if batchSize > 0 && a.Last-a.First+1 > int64(batchSize) {
			return true
		}
	}
	return false
}

// appendRange adds offset o (delivery count c) to dst, extending the last range when adjacent.
func appendRange(dst []AcquiredRange, o int64, c int16) []AcquiredRange {
	if n := len(dst); n > 0 && dst[n-1].Last == o-1 && dst[n-1].DeliveryCount == c {
		dst[n-1].Last = o
		return dst
	}
	return append(dst, AcquiredRange{First: o, Last: o, DeliveryCount: c})
}

// AckBatch is one acknowledgement batch: offsets First..Last with one type for all (len(Types)
// == 1) or one per offset.
type AckBatch struct {
	First, Last int64
	Types       []int8
}

// Acknowledge applies member's acknowledgements. Every offset must be ACQUIRED by member (else
// INVALID_RECORD_STATE, and nothing is applied); the batches must be sorted (INVALID_REQUEST,
// as Kafka validates them) and the types valid: RENEW only when renew is set (IsRenewAck). The new state is persisted before it returns; a failed
// write restores the old state and returns the error.
func (p *Partition) Acknowledge(ctx context.Context, member string, acks []AckBatch, renew bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced.Load() {
		return ErrClosed
	}
	if err := p.validateLocked(member, acks, renew); err != nil {
		return err
	}
	p.undo = p.undo[:0]
	renewOnly := true
	var deadline int64
	for _, a := range acks {
		for o := a.First; o <= a.Last; o++ {
			t := a.Types[0]
			if len(a.Types) > 1 {
				t = a.Types[o-a.First]
			}
			r := p.recs[o-p.start]
			switch t {
			case AckAccept:
				r = rec{state: Acknowledged, count: r.count}
			case AckRelease:
				r = p.releasedLocked(r)
			case AckReject, AckGap:
				r = rec{state: Archived, count: r.count}
			case AckRenew:
				if deadline == 0 {
					deadline = p.now().Add(p.cfg.LockDuration).UnixNano()
				}
				r.deadline = deadline
				p.recs[o-p.start] = r
				continue
			}
			renewOnly = false
			p.setLocked(o, r)
		}
	}
	if deadline != 0 {
		p.armLocked(deadline)
	}
	if renewOnly {
		return nil
	}
	return p.persistLocked(ctx)
}

// validateLocked checks acks without changing anything.
func (p *Partition) validateLocked(member string, acks []AckBatch, renew bool) error {
	prev := int64(-1)
	for i, a := range acks {
		if a.First > a.Last || (i > 0 && a.First < prev) {
			return fmt.Errorf("acknowledgement batch %d-%d out of order: %w", a.First, a.Last, kerr.InvalidRequest)
		}
		prev = a.Last
		n := a.Last - a.First + 1
		if len(a.Types) != 1 && int64(len(a.Types)) != n {
			return fmt.Errorf("acknowledgement batch %d-%d has %d types: %w", a.First, a.Last, len(a.Types), kerr.InvalidRequest)
		}
		for _, t := range a.Types {
			if t < AckGap || t > AckRenew || (t == AckRenew && !renew) {
				return fmt.Errorf("acknowledge type %d: %w", t, kerr.InvalidRequest)
			}
		}
		if a.First < p.start || a.Last >= p.start+int64(len(p.recs)) {
			return fmt.Errorf("acknowledgement of offsets %d-%d outside the in-flight window [%d, %d): %w",
				a.First, a.Last, p.start, p.start+int64(len(p.recs)), kerr.InvalidRecordState)
		}
		for o := a.First; o <= a.Last; o++ {
			r := &p.recs[o-p.start]
			if r.state != Acquired || r.member != member {
				return fmt.Errorf("offset %d is not acquired by member %s: %w", o, member, kerr.InvalidRecordState)
			}
		}
	}
	return nil
}

// releasedLocked is r released by its member or its lock: AVAILABLE, or ARCHIVED at the
// delivery count limit.
func (p *Partition) releasedLocked(r rec) rec {
	if r.count >= p.cfg.DeliveryLimit {
		return rec{state: Archived, count: r.count}
	}
	return rec{state: Available, count: r.count}
}

// setLocked sets offset o's record, keeping the old one for undo.
func (p *Partition) setLocked(o int64, r rec) {
	i := o - p.start
	p.undo = append(p.undo, undoRec{off: o, r: p.recs[i]})
	p.recs[i] = r
}

// donePrefixLocked is the number of done (acknowledged or archived) records at the head of
// the window: start moves over them once the state that says so is persisted.
func (p *Partition) donePrefixLocked() int {
	n := 0
	for n < len(p.recs) && (p.recs[n].state == Acknowledged || p.recs[n].state == Archived) {
		n++
	}
	return n
}

// dropLocked moves start over the window's first n records.
func (p *Partition) dropLocked(n int) {
	if n == 0 {
		return
	}
	p.start += int64(n)
	m := copy(p.recs, p.recs[n:])
	clear(p.recs[m:])
	p.recs = p.recs[:m]
}

// ReleaseMember releases every record member holds (its share session closed): AVAILABLE
// again, or ARCHIVED at the delivery count limit; persisted.
func (p *Partition) ReleaseMember(ctx context.Context, member string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fenced.Load() {
		return ErrClosed
	}
	p.undo = p.undo[:0]
	for i := range p.recs {
		if r := p.recs[i]; r.state == Acquired && r.member == member {
			p.setLocked(p.start+int64(i), p.releasedLocked(r))
		}
	}
	if len(p.undo) == 0 {
		return nil
	}
	return p.persistLocked(ctx)
}

// ExpireLocks releases the records whose lock deadline is at or before now (a reading of
// Options.Now) and returns how many; persisted. The partition's timer calls it; tests with a
// fake clock call it directly.
func (p *Partition) ExpireLocks(ctx context.Context, now time.Time) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expireLocked(ctx, now.UnixNano())
}

func (p *Partition) expireLocked(ctx context.Context, now int64) (int, error) {
	p.undo = p.undo[:0]
	next := int64(0)
	for i := range p.recs {
		r := p.recs[i]
		if r.state != Acquired {
			continue
		}
		if r.deadline <= now {
			p.setLocked(p.start+int64(i), p.releasedLocked(r))
		} else if next == 0 || r.deadline < next {
			next = r.deadline
		}
	}
	n := len(p.undo)
	if next != 0 {
		p.armLocked(next)
	}
	if n == 0 {
		return 0, nil
	}
	return n, p.persistLocked(ctx)
}

// armLocked makes the timer fire by deadline (unix nanoseconds).
func (p *Partition) armLocked(deadline int64) {
	if !p.timers || p.fenced.Load() {
		return
	}
	if p.timer != nil && p.armedAt != 0 && p.armedAt <= deadline {
		return
	}
	d := time.Duration(deadline - p.now().UnixNano())
	p.armedAt = deadline
	if p.timer == nil {
		p.timer = time.AfterFunc(d, p.fire)
		return
	}
	p.timer.Reset(d)
}

// fire is the lock timer: it expires the locks due and re-arms for the next deadline.
func (p *Partition) fire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armedAt = 0
	if p.fenced.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.expireLocked(ctx, p.now().UnixNano()); err != nil && p.armedAt == 0 && !p.fenced.Load() {
		// Not persisted: the records stay acquired; try again shortly.
		p.armLocked(p.now().Add(time.Second).UnixNano())
	}
}

// Close stops the lock timer: the partition is dropped (leadership moved, or fenced).
func (p *Partition) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fenced.Store(true)
	if p.timer != nil {
		p.timer.Stop()
	}
}

// persistLocked writes the window's state, start moved over the done prefix, and then drops
// that prefix; a failed write restores the records of the undo log.
func (p *Partition) persistLocked(ctx context.Context) error {
	if p.fenced.Load() {
		for i := len(p.undo) - 1; i >= 0; i-- {
			u := p.undo[i]
			p.recs[u.off-p.start] = u.r
		}
		p.undo = p.undo[:0]
		return ErrClosed
	}
	n := p.donePrefixLocked()
	st := sharestate.State{StateEpoch: p.stateEpoch, LeaderEpoch: p.leaderEpoch, StartOffset: p.start + int64(n)}
	st.Batches = p.batchesLocked(nil, n)
	done := int32(0)
	for i := n; i < len(p.recs); i++ {
		if s := p.recs[i].state; s == Acknowledged || s == Archived {
			done++
		}
	}
	st.DeliveryCompleteCount = done
	err := p.persister.Write(ctx, p.key, st)
	if err == nil {
		avail := false
		for _, u := range p.undo {
			if u.r.state != Available && p.recs[u.off-p.start].state == Available {
				avail = true
				break
			}
		}
		p.undo = p.undo[:0]
		p.dropLocked(n)
		if avail && p.onAvail != nil {
			p.onAvail()
		}
		return nil
	}
	if errors.Is(err, kerr.FencedLeaderEpoch) || errors.Is(err, kerr.FencedStateEpoch) {
		p.fenced.Store(true)
		if p.timer != nil {
			p.timer.Stop()
		}
		err = fmt.Errorf("%w: %w", ErrFenced, err)
	}
	for i := len(p.undo) - 1; i >= 0; i-- {
		u := p.undo[i]
		p.recs[u.off-p.start] = u.r
	}
	p.undo = p.undo[:0]
	return fmt.Errorf("share partition %s/%d: write state: %w", p.key.Group, p.key.Partition, err)
}

// batchesLocked appends the window as runs of one state and delivery count (acquired records
// as available: what a new leader makes of them).
func (p *Partition) batchesLocked(dst []sharestate.Batch, from int) []sharestate.Batch {
	for i := from; i < len(p.recs); i++ {
		r := p.recs[i]
		s := r.state
		if s == Acquired {
			s = Available
		}
		o := p.start + int64(i)
		if n := len(dst); n > 0 && dst[n-1].LastOffset == o-1 && dst[n-1].DeliveryState == s && dst[n-1].DeliveryCount == r.count {
			dst[n-1].LastOffset = o
			continue
		}
		dst = append(dst, sharestate.Batch{FirstOffset: o, LastOffset: o, DeliveryState: s, DeliveryCount: r.count})
	}
	return dst
}

// Batches returns the window as persisted runs (tests, describe).
func (p *Partition) Batches() []sharestate.Batch {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.batchesLocked(nil, 0)
}
