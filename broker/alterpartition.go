package broker

// The AlterPartition sender: an ISR change a partition leader proposes (replication.ISRChange,
// from a follower catching up or the lag check) goes to the controller, and the answer decides
// what becomes of the change, as Kafka's AlterPartitionManager and Partition's
// handleAlterPartitionError do:
//
//   - committed: the controller's new state (the next partition epoch) is installed, unless
//     newer metadata installed it (or a later one) first; only an installed answer counts in
//     the ISR shrink/expand metrics;
//   - refused for good (INELIGIBLE_REPLICA): the controller checked the request at the
//     partition epoch it was made at and did not apply it. Every commit bumps the partition
//     epoch, so no earlier send of it committed either, and none will: the change is aborted
//     and may be proposed again later. OPERATION_NOT_ATTEMPTED, Kafka's controller's other such
//     answer, is treated alike, though weir's controller never gives it;
//   - refused before the controller looked at the partition (CLUSTER_AUTHORIZATION_FAILED: this
//     broker's principal may not act for its id, controller.broker.principals or the principal
//     that registered it, controller/requests.go authorizeRequest; POLICY_VIOLATION: a
//     metadata command too large): that send was not applied, and it is logged as an error. On
//     a first send nothing of the change can have committed, so it is aborted (and not sent
//     again). After an earlier send whose outcome is unknown, that send may have committed: the
//     change stays pending and is sent again as below, so that a resend once the refusal is
//     lifted either commits it or finds the partition epoch moved on;
//   - refused because the leader's view is out of date (FENCED_LEADER_EPOCH,
//     INVALID_UPDATE_VERSION, NOT_LEADER_FOR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION,
//     UNKNOWN_TOPIC_ID, INVALID_REQUEST, NEW_LEADER_ELECTED): the change stays pending and is
//     not sent again; the metadata image with a newer partition or leader epoch resolves it.
//     INVALID_UPDATE_VERSION is also the answer to a resend of a change whose first send
//     committed and whose answer was lost. (A request that fails the controller RPC's
//     validation closes the connection: an unknown outcome, below.);
//   - anything else (the request timed out, no controller was reachable, the controller lost
//     its leadership after appending the change): the outcome is unknown, so the same request
//     is sent again after a pause, for as long as the change is pending and this leadership
//     lasts. The resend either commits the change or finds the partition epoch moved on. The
//     pause grows exponentially from alterPartitionRetryBackoffInitial to
//     alterPartitionRetryBackoffMax, with jitter; the warning is logged for the first such
//     answer and then at most once per alterPartitionRetryWarnEvery per partition, with the
//     count of the ones held back.
//
// Invariant (no acknowledged record lost): a change the controller may have committed is never
// dropped on the leader before a newer committed state replaces it, so the high watermark, the
// minimum over the maximal ISR (committed ISR plus pending additions), never passes the end of
// a replica the controller has in the ISR and could elect.
//
// Goroutines: one per change in flight (proposeLocked), counted in the replica manager's wait
// group. It ends when the change is answered for good or resolved by newer metadata (checked
// before every send and after every answer), when the leadership it was proposed under ends
// (checked at the same points), or when the replica manager closes (rm.quit: a pause ends at
// once and a send in flight is cancelled); replicaManager.close waits for it. No sender starts
// once close began.

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/replication"
)

const (
	// alterPartitionTimeout bounds one send of an ISR change (the controller client retries
	// within it, across controller elections).
	alterPartitionTimeout = 10 * time.Second
	// The pause before a change whose outcome is unknown is sent again: the first one, and
	// the most it grows to (alterPartitionRetryBackoff).
	alterPartitionRetryBackoffInitial = 200 * time.Millisecond
	alterPartitionRetryBackoffMax     = 5 * time.Second
	// alterPartitionRetryWarnEvery bounds how often a partition's sender warns that it sends a
	// change again.
	alterPartitionRetryWarnEvery = 30 * time.Second
)

// alterPartitionRetryBackoff returns the pause after send number attempt (from 1) of a change
// whose outcome is unknown: alterPartitionRetryBackoffInitial doubled per earlier attempt, at
// most alterPartitionRetryBackoffMax, then drawn uniformly from its upper half, so leaders that
// lost the controller together do not all resend in step.
func alterPartitionRetryBackoff(attempt int) time.Duration {
	d := alterPartitionRetryBackoffMax
	if attempt <= 16 {
		d = min(alterPartitionRetryBackoffInitial<<max(attempt-1, 0), d)
	}
	return d/2 + rand.N(d/2+1)
}

// warnLimiter lets a repeated warning through the first time, then at most once per interval,
// and counts the ones held back. Not safe for concurrent use: its owner's lock guards it.
type warnLimiter struct {
	last       time.Time // when a warning was last let through; zero before the first
	suppressed int       // warnings held back since last
}

// allow reports whether to log the warning at now, given at most one per every, and how many
// were held back since the last one logged.
func (l *warnLimiter) allow(now time.Time, every time.Duration) (ok bool, suppressed int) {
	if !l.last.IsZero() && now.Sub(l.last) < every {
		l.suppressed++
		return false, 0
	}
	suppressed = l.suppressed
	l.last, l.suppressed = now, 0
	return true, suppressed
}

// alterPartitionFunc sends an AlterPartition request to the controller.
type alterPartitionFunc func(ctx context.Context, req controller.AlterPartitionRequest) (controller.PartitionInfo, error)

// alterPartitionOutcome is what the leader does with a change after an AlterPartition answer.
type alterPartitionOutcome int

const (
	alterAbort   alterPartitionOutcome = iota // refused for good: abort the change
	alterAwait                                // stale view: keep it pending, wait for newer metadata
	alterRetry                                // outcome unknown: send it again
	alterRefused                              // this send refused before the partition was looked at
)

// classifyAlterPartitionError maps a failed send to what the leader does with the change.
func classifyAlterPartitionError(err error) alterPartitionOutcome {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return alterRetry
	}
	switch ke {
	case kerr.IneligibleReplica, kerr.OperationNotAttempted:
		return alterAbort
	case kerr.ClusterAuthorizationFailed, kerr.PolicyViolation:
		return alterRefused
	case kerr.FencedLeaderEpoch, kerr.InvalidUpdateVersion, kerr.NotLeaderForPartition,
		kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.InvalidRequest, kerr.NewLeaderElected:
		return alterAwait
	}
	return alterRetry
}

// alterPartition sends req to the controller (or to a test's stand-in).
func (rm *replicaManager) alterPartition(ctx context.Context, req controller.AlterPartitionRequest) (controller.PartitionInfo, error) {
	if h := rm.alterPartitionHook.Load(); h != nil {
		return (*h)(ctx, req)
	}
	return rm.b.ctl.AlterPartition(ctx, req)
}

// proposeLocked sends the ISR change c, which the leader state returned, to the controller,
// unless the replica manager is closing (c then stays pending, and the leadership ends with
// the broker). Requires r.mu.
func (r *replica) proposeLocked(c *replication.ISRChange) {
	rm := r.rm
	rm.sendersMu.Lock()
	defer rm.sendersMu.Unlock()
	select {
	case <-rm.quit:
		return
	default:
	}
	rm.wg.Add(1)
	go func(state *replication.LeaderState) {
		defer rm.wg.Done()
		r.sendISRChange(state, c)
	}(r.state)
}

// sendISRChange sends c until it is answered for good, newer metadata resolves it, its
// leadership (state) ends or the replica manager closes.
func (r *replica) sendISRChange(state *replication.LeaderState, c *replication.ISRChange) {
	req := controller.AlterPartitionRequest{Topic: r.tp.Topic, Partition: r.tp.Partition, LeaderID: r.rm.b.nodeID,
		LeaderEpoch: c.LeaderEpoch, PartitionEpoch: c.PartitionEpoch, ISR: c.ISR}
	for attempt := 1; ; attempt++ {
		if !r.isrChangeInFlight(state, c) {
			return
		}
		ctx, cancel := context.WithTimeout(r.rm.ctx, alterPartitionTimeout)
		pi, err := r.rm.alterPartition(ctx, req)
		cancel()
		select {
		case <-r.rm.quit:
			return // the answer may be the cancellation: the broker is closing
		default:
		}
		if !r.isrChangeAnswered(state, c, pi, err, attempt) {
			return
		}
		t := time.NewTimer(alterPartitionRetryBackoff(attempt))
		select {
		case <-t.C:
		case <-r.rm.quit:
			t.Stop()
			return
		}
	}
}

// isrChangeInFlight reports whether c is still to be sent: its leadership (state) goes on and
// it is still pending there.
func (r *replica) isrChangeInFlight(state *replication.LeaderState, c *replication.ISRChange) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == state && state.IsPending(c)
}

// isrChangeAnswered applies the answer (pi, err) to send number attempt of the change c and
// reports whether to send it again.
func (r *replica) isrChangeAnswered(state *replication.LeaderState, c *replication.ISRChange, pi controller.PartitionInfo, err error, attempt int) (again bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != state {
		return false // the leadership changed meanwhile
	}
	log := slog.With("topic", r.tp.Topic, "partition", r.tp.Partition, "isr", c.ISR, "partition_epoch", c.PartitionEpoch)
	if err == nil {
		before := state.ISR()
		if state.ApplyPartition(pi.ISR, pi.LeaderEpoch, pi.PartitionEpoch) {
			log.Info("ISR changed", "committed_isr", pi.ISR, "committed_partition_epoch", pi.PartitionEpoch)
			r.rm.b.observeISRChange(before, pi.ISR) // metrics: ISR shrinks/expands (metrics.go)
		} else {
			log.Debug("ISR change committed; newer metadata had installed it or a later state already",
				"committed_isr", pi.ISR, "committed_partition_epoch", pi.PartitionEpoch)
		}
		r.publishHWLocked()
		return false
	}
	if !state.IsPending(c) {
		return false // a newer committed state resolved it
	}
	switch classifyAlterPartitionError(err) {
	case alterAbort:
		log.Warn("ISR change refused", "err", err)
		state.AbortPending(c)
		r.publishHWLocked()
		return false
	case alterAwait:
		log.Info("ISR change not applied; it stays pending until newer metadata arrives", "err", err)
		return false
	case alterRefused:
		if attempt == 1 {
			log.Error("the controller refused this broker's ISR change before looking at the partition; it is aborted and not sent again (is this broker's principal the one controller.broker.principals, or the registration, gives its node id?)",
				"node.id", r.rm.b.nodeID, "err", err)
			state.AbortPending(c)
			r.publishHWLocked()
			return false
		}
		// An earlier send's outcome is unknown: it may have committed, so c stays pending
		// and is sent again (rate-limited like any unknown outcome).
		if ok, held := r.alterRetryWarn.allow(time.Now(), alterPartitionRetryWarnEvery); ok {
			log.Error("the controller refused this broker's ISR change before looking at the partition; an earlier send of it may have committed, so it stays pending and is sent again",
				"node.id", r.rm.b.nodeID, "attempt", attempt, "warnings_held_back", held, "err", err)
		}
		return true
	default:
		if ok, held := r.alterRetryWarn.allow(time.Now(), alterPartitionRetryWarnEvery); ok {
			log.Warn("ISR change outcome unknown; sending it again", "attempt", attempt, "warnings_held_back", held, "err", err)
		} else {
			log.Debug("ISR change outcome unknown; sending it again", "attempt", attempt, "err", err)
		}
		return true
	}
}
