package replication

import (
	"slices"
	"time"
)

// DefaultLagTimeMax is Kafka's default replica.lag.time.max.ms, used when
// LeaderConfig.LagTimeMax is not positive.
const DefaultLagTimeMax = 30 * time.Second

// LeaderConfig describes one partition at the moment the local broker becomes its leader.
type LeaderConfig struct {
	LocalID        int32         // the leader's own broker id
	Replicas       []int32       // the assigned replicas (the leader included)
	ISR            []int32       // the committed ISR (the leader included)
	LeaderEpoch    int32         // current leader epoch
	PartitionEpoch int32         // current partition epoch
	LagTimeMax     time.Duration // replica.lag.time.max.ms (Kafka default 30s); <= 0 means DefaultLagTimeMax
}

// ISRChange is an ISR change proposed to the controller (an AlterPartition request).
// ISR is the complete proposed ISR; the epochs are the ones the leader currently holds.
type ISRChange struct {
	ISR            []int32
	LeaderEpoch    int32
	PartitionEpoch int32
}

// leaderFollower is what the leader knows about one follower (Kafka's ReplicaState).
type leaderFollower struct {
	end                int64 // the follower's log end offset (its last fetch offset); valid when known
	known              bool  // the follower has fetched at least once under this leadership
	lastFetchLeaderEnd int64 // the leader's end offset at the follower's previous fetch; -1 when unknown
	lastFetchTime      time.Time
	lastCaughtUp       time.Time
}

// LeaderState is one partition's replication state on its leader: the followers' log end
// offsets, the ISR and the high watermark, with Kafka's semantics (Partition.scala,
// Replica.scala). It is a deterministic state machine: it starts no goroutines, does no I/O
// and never reads the clock; time is passed in by the caller.
//
// ISR changes follow KIP-497: at most one change is in flight at a time. While a change is
// pending, the high watermark is computed over the "maximal ISR", the committed ISR plus any
// pending additions (a pending removal keeps counting the removed replica until committed).
// A pending change ends only when a committed state with a newer partition epoch arrives
// (ApplyPartition) or when the controller refused it for good (AbortPending); the committed
// state seen again at the current epochs leaves it pending.
//
// Invariant (no acknowledged record lost, given a sender that aborts a change only on a
// definite refusal): the high watermark never exceeds the end of any replica in the
// controller's ISR or in a change the controller may still commit, since both are within the
// maximal ISR.
//
// A new leader epoch (re-election) should be modelled by creating a new LeaderState, since it
// comes with a new epoch start offset and resets every follower's state.
//
// LeaderState is not safe for concurrent use: its owner serializes the calls (the broker holds
// the replica's mutex around each).
type LeaderState struct {
	localID          int32
	replicas         []int32
	isr              []int32 // committed ISR
	leaderEpoch      int32
	partitionEpoch   int32
	lagTimeMax       time.Duration
	localEnd         int64
	hw               int64
	epochStartOffset int64
	followers        map[int32]*leaderFollower
	pending          *ISRChange // the in-flight proposal, nil if none
	now              time.Time  // the latest time passed in
}

// NewLeaderState returns the state of a partition whose leadership starts at now, with the
// leader's end offset localEnd, the high watermark hw (it never goes below this) and the
// leader epoch's start offset epochStartOffset. Every follower starts with its last caught-up
// time set to now (ISR members get the benefit of the doubt at leadership start) and an
// unknown end offset.
func NewLeaderState(cfg LeaderConfig, localEnd int64, hw int64, epochStartOffset int64, now time.Time) *LeaderState {
	s := &LeaderState{
		localID:          cfg.LocalID,
		replicas:         dedupLeaderIDs(cfg.Replicas),
		isr:              dedupLeaderIDs(cfg.ISR),
		leaderEpoch:      cfg.LeaderEpoch,
		partitionEpoch:   cfg.PartitionEpoch,
		lagTimeMax:       cfg.LagTimeMax,
		localEnd:         localEnd,
		hw:               hw,
		epochStartOffset: epochStartOffset,
		followers:        make(map[int32]*leaderFollower),
		now:              now,
	}
	if s.lagTimeMax <= 0 {
		s.lagTimeMax = DefaultLagTimeMax
	}
	for _, id := range s.replicas {
		s.track(id, now)
	}
	for _, id := range s.isr {
		s.track(id, now)
	}
	s.maybeIncrementHW()
	return s
}

// track adds a follower record for id (if it is not the leader and not yet tracked).
func (s *LeaderState) track(id int32, now time.Time) {
	if id == s.localID {
		return
	}
	if _, ok := s.followers[id]; ok {
		return
	}
	s.followers[id] = &leaderFollower{
		lastFetchLeaderEnd: -1,
		lastFetchTime:      now,
		lastCaughtUp:       now,
	}
}

// observe records now as the latest time seen (time passed in never moves s.now backwards).
func (s *LeaderState) observe(now time.Time) {
	if now.After(s.now) {
		s.now = now
	}
}

// UpdateLocal sets the leader's own end offset that counts for replication (the caller passes
// its durable/flushed end when acks are durable) and reports whether the high watermark moved.
func (s *LeaderState) UpdateLocal(end int64) (hwChanged bool) {
	s.localEnd = end
	return s.maybeIncrementHW()
}

// UpdateFollower records that follower id fetched from fetchOffset (its log end offset) at now.
// It updates the follower's last caught-up time (Kafka's Replica.updateFetchState), proposes
// adding the follower to the ISR if it is eligible and no change is pending, and recomputes the
// high watermark. Fetches from ids that are not followers of this partition are ignored.
func (s *LeaderState) UpdateFollower(id int32, fetchOffset int64, now time.Time) (hwChanged bool, expand *ISRChange) {
	f, ok := s.followers[id]
	if !ok {
		return false, nil
	}
	s.observe(now)

	// Kafka: caught up to the leader's end now => caught up now; caught up to the leader's
	// end at the previous fetch => caught up as of the previous fetch.
	if fetchOffset >= s.localEnd {
		f.lastCaughtUp = laterTime(f.lastCaughtUp, now)
	} else if fetchOffset >= f.lastFetchLeaderEnd {
		f.lastCaughtUp = laterTime(f.lastCaughtUp, f.lastFetchTime)
	}
	f.end = fetchOffset
	f.known = true
	f.lastFetchLeaderEnd = max(f.lastFetchLeaderEnd, s.localEnd)
	f.lastFetchTime = now

	// Kafka's maybeExpandIsr runs before maybeIncrementLeaderHW.
	if s.pending == nil && !s.inMaximalISR(id) && fetchOffset >= s.hw && fetchOffset >= s.epochStartOffset {
		isr := append(slices.Clone(s.isr), id)
		s.pending = &ISRChange{ISR: isr, LeaderEpoch: s.leaderEpoch, PartitionEpoch: s.partitionEpoch}
		expand = cloneISRChange(s.pending)
	}
	return s.maybeIncrementHW(), expand
}

// Tick checks the committed ISR for followers out of sync at now and, when there are some and
// no change is pending, proposes removing them. A follower is out of sync when its end differs
// from the leader's end and it has not been caught up for more than LagTimeMax (Kafka's
// getOutOfSyncReplicas / ReplicaState.isCaughtUp). The leader itself is never removed.
func (s *LeaderState) Tick(now time.Time) (shrink *ISRChange) {
	s.observe(now)
	if s.pending != nil {
		return nil
	}
	var keep []int32
	removed := false
	for _, id := range s.isr {
		if id != s.localID && s.outOfSync(id, now) {
			removed = true
			continue
		}
		keep = append(keep, id)
	}
	if !removed || len(keep) == 0 {
		return nil
	}
	s.pending = &ISRChange{ISR: keep, LeaderEpoch: s.leaderEpoch, PartitionEpoch: s.partitionEpoch}
	// The maximal ISR is unchanged (removals count until committed), so the HW does not move.
	return cloneISRChange(s.pending)
}

func (s *LeaderState) outOfSync(id int32, now time.Time) bool {
	f, ok := s.followers[id]
	if !ok {
		return false
	}
	if f.known && f.end == s.localEnd {
		return false
	}
	return now.Sub(f.lastCaughtUp) > s.lagTimeMax
}

// HighWatermark returns the high watermark.
func (s *LeaderState) HighWatermark() int64 { return s.hw }

// ISR returns a copy of the committed ISR.
func (s *LeaderState) ISR() []int32 { return slices.Clone(s.isr) }

// ISRSize returns the size of the committed ISR (len(ISR()) without the copy).
func (s *LeaderState) ISRSize() int { return len(s.isr) }

// MaximalISR returns the committed ISR plus any pending additions (KIP-497).
func (s *LeaderState) MaximalISR() []int32 {
	out := slices.Clone(s.isr)
	if s.pending != nil {
		for _, id := range s.pending.ISR {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// Pending reports whether an ISR change is in flight.
func (s *LeaderState) Pending() bool { return s.pending != nil }

// ApplyPartition installs the partition's committed state (the controller's answer to a
// proposal, or a new metadata image) if it is newer than the one held: a higher leader epoch,
// or the same leader epoch and a higher partition epoch. It sets the ISR and the epochs, clears
// any pending change and recomputes the high watermark (which never decreases). The controller
// bumps the partition epoch with every change, so a newer state is the outcome of the pending
// change or of one that overtook it, after which the pending one (proposed at an older epoch) can
// no longer commit.
//
// A state at older epochs is stale and ignored. A state at the epochs already held is the one
// installed (images are applied again on every change elsewhere in the cluster) and changes
// nothing: in particular it is not an answer to a pending change, which the controller may have
// committed already, so that change stays pending and its additions keep counting for the high
// watermark (Kafka's Partition.makeLeader skips older partition epochs; KRaft applies only
// partitions whose partition epoch changed).
//
// ISR members not tracked so far start with an unknown end and their last caught-up time set
// to the latest time passed in. It reports whether it installed the state (false: stale or
// already held, nothing changed).
func (s *LeaderState) ApplyPartition(isr []int32, leaderEpoch, partitionEpoch int32) (installed bool) {
	if leaderEpoch < s.leaderEpoch || (leaderEpoch == s.leaderEpoch && partitionEpoch <= s.partitionEpoch) {
		return false
	}
	s.isr = dedupLeaderIDs(isr)
	s.leaderEpoch = leaderEpoch
	s.partitionEpoch = partitionEpoch
	s.pending = nil
	for _, id := range s.isr {
		s.track(id, s.now)
	}
	s.maybeIncrementHW()
	return true
}

// SetReplicas installs the partition's assigned replicas when they change under the same
// leadership (a partition reassignment adds replicas, then removes others): new ones are tracked
// from now with an unknown end (they join the ISR once caught up, as any follower); ones that are
// no longer replicas are forgotten unless they are still in the committed ISR.
func (s *LeaderState) SetReplicas(replicas []int32) {
	s.replicas = dedupLeaderIDs(replicas)
	for _, id := range s.replicas {
		s.track(id, s.now)
	}
	for id := range s.followers {
		if !slices.Contains(s.replicas, id) && !slices.Contains(s.isr, id) {
			delete(s.followers, id)
		}
	}
}

// IsPending reports whether c (a proposal this state returned) is still the change in flight:
// neither a newer committed state nor an abort has resolved it. The sender keeps sending c only
// while it is.
func (s *LeaderState) IsPending(c *ISRChange) bool {
	return c != nil && s.pending != nil && s.pending.LeaderEpoch == c.LeaderEpoch &&
		s.pending.PartitionEpoch == c.PartitionEpoch && slices.Equal(s.pending.ISR, c.ISR)
}

// AbortPending drops the change in flight if it is c, and reports whether it did. Call it only
// when the controller definitely did not commit c and never will (it refused c at c's own
// partition epoch, e.g. INELIGIBLE_REPLICA); an answer that leaves the outcome open (a timeout,
// a lost connection, a resend refused because the partition epoch moved on) must leave c
// pending until a newer committed state arrives through ApplyPartition, since dropping it would
// compute the high watermark over a smaller ISR than the controller's. A change may be
// proposed again later.
func (s *LeaderState) AbortPending(c *ISRChange) bool {
	if !s.IsPending(c) {
		return false
	}
	s.pending = nil
	s.maybeIncrementHW()
	return true
}

// FollowerEnd returns follower id's last known end offset; false if it is unknown (no fetch yet,
// or not a follower of this partition).
func (s *LeaderState) FollowerEnd(id int32) (int64, bool) {
	f, ok := s.followers[id]
	if !ok || !f.known {
		return 0, false
	}
	return f.end, true
}

// UnderMinISR reports whether the committed ISR is smaller than minISR.
func (s *LeaderState) UnderMinISR(minISR int) bool { return len(s.isr) < minISR }

// CaughtUp reports whether the high watermark has reached target (HW >= target), e.g. the end
// offset of an acks=all produce.
func (s *LeaderState) CaughtUp(target int64) bool { return s.hw >= target }

// inMaximalISR reports whether id is in the committed ISR or a pending proposal.
func (s *LeaderState) inMaximalISR(id int32) bool {
	if slices.Contains(s.isr, id) {
		return true
	}
	return s.pending != nil && slices.Contains(s.pending.ISR, id)
}

// maybeIncrementHW sets the high watermark to the minimum end offset over the maximal ISR (the
// leader's own end included) if that is higher than the current one. A maximal-ISR follower
// with an unknown end blocks any advance.
func (s *LeaderState) maybeIncrementHW() bool {
	cand := s.localEnd
	check := func(id int32) bool {
		if id == s.localID {
			return true
		}
		f, ok := s.followers[id]
		if !ok || !f.known {
			return false
		}
		cand = min(cand, f.end)
		return true
	}
	for _, id := range s.isr {
		if !check(id) {
			return false
		}
	}
	if s.pending != nil {
		for _, id := range s.pending.ISR {
			if !slices.Contains(s.isr, id) && !check(id) {
				return false
			}
		}
	}
	if cand > s.hw {
		s.hw = cand
		return true
	}
	return false
}

func dedupLeaderIDs(ids []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func cloneISRChange(c *ISRChange) *ISRChange {
	return &ISRChange{ISR: slices.Clone(c.ISR), LeaderEpoch: c.LeaderEpoch, PartitionEpoch: c.PartitionEpoch}
}

func laterTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
