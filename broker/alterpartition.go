package broker

// The AlterPartition sender: an ISR change a partition leader proposes (replication.ISRChange,
// from a follower catching up or the lag check) goes to the controller, and the answer decides
// what becomes of the change, as Kafka's AlterPartitionManager and Partition's
// handleAlterPartitionError do:
//
//   - committed: the controller's new state (the next partition epoch) is installed;
//   - refused for good (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED): the controller checked the
//     request at the partition epoch it was made at and did not apply it. Every commit bumps
//     the partition epoch, so no earlier send of it committed either, and none will: the change
//     is aborted and may be proposed again later;
//   - refused because the leader's view is out of date (FENCED_LEADER_EPOCH,
//     INVALID_UPDATE_VERSION, NOT_LEADER_FOR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION,
//     UNKNOWN_TOPIC_ID, INVALID_REQUEST, NEW_LEADER_ELECTED): the change stays pending and is
//     not sent again; the metadata image with a newer partition or leader epoch resolves it.
//     INVALID_UPDATE_VERSION is also the answer to a resend of a change whose first send
//     committed and whose answer was lost;
//   - anything else (the request timed out, no controller was reachable, the controller lost
//     its leadership after appending the change): the outcome is unknown, so the same request
//     is sent again after a pause, for as long as the change is pending and this leadership
//     lasts. The resend either commits the change or finds the partition epoch moved on.
//
// Invariant (no acknowledged record lost): a change the controller may have committed is never
// dropped on the leader before a newer committed state replaces it, so the high watermark, the
// minimum over the maximal ISR (committed ISR plus pending additions), never passes the end of
// a replica the controller has in the ISR and could elect.
//
// Goroutines: one per change in flight (proposeLocked), which ends when the change is answered
// for good, the leadership it was proposed under ends, or the broker closes.

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/replication"
)

const (
	// alterPartitionTimeout bounds one send of an ISR change (the controller client retries
	// within it, across controller elections).
	alterPartitionTimeout = 10 * time.Second
	// alterPartitionRetryBackoff is the pause before a change whose outcome is unknown is sent
	// again.
	alterPartitionRetryBackoff = 500 * time.Millisecond
)

// alterPartitionFunc sends an AlterPartition request to the controller.
type alterPartitionFunc func(ctx context.Context, req controller.AlterPartitionRequest) (controller.PartitionInfo, error)

// alterPartitionOutcome is what the leader does with a change after an AlterPartition answer.
type alterPartitionOutcome int

const (
	alterAbort alterPartitionOutcome = iota // refused for good: abort the change
	alterAwait                              // stale view: keep it pending, wait for newer metadata
	alterRetry                              // outcome unknown: send it again
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

// proposeLocked sends the ISR change c, which the leader state returned, to the controller.
// Requires r.mu.
func (r *replica) proposeLocked(c *replication.ISRChange) {
	go r.sendISRChange(r.state, c)
}

// sendISRChange sends c until it is answered for good, its leadership (state) ends or the
// broker closes.
func (r *replica) sendISRChange(state *replication.LeaderState, c *replication.ISRChange) {
	req := controller.AlterPartitionRequest{Topic: r.tp.Topic, Partition: r.tp.Partition, LeaderID: r.rm.b.nodeID,
		LeaderEpoch: c.LeaderEpoch, PartitionEpoch: c.PartitionEpoch, ISR: c.ISR}
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), alterPartitionTimeout)
		pi, err := r.rm.alterPartition(ctx, req)
		cancel()
		if !r.isrChangeAnswered(state, c, pi, err, attempt) {
			return
		}
		select {
		case <-time.After(alterPartitionRetryBackoff):
		case <-r.rm.quit:
			return
		}
	}
}

// isrChangeAnswered applies the answer (pi, err) to the change c and reports whether to send
// it again.
func (r *replica) isrChangeAnswered(state *replication.LeaderState, c *replication.ISRChange, pi controller.PartitionInfo, err error, attempt int) (again bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != state {
		return false // the leadership changed meanwhile
	}
	log := slog.With("topic", r.tp.Topic, "partition", r.tp.Partition, "isr", c.ISR, "partition_epoch", c.PartitionEpoch)
	if err == nil {
		log.Info("ISR changed", "committed_isr", pi.ISR, "committed_partition_epoch", pi.PartitionEpoch)
		r.rm.b.observeISRChange(state.ISR(), pi.ISR) // metrics: ISR shrinks/expands (metrics.go)
		state.ApplyPartition(pi.ISR, pi.LeaderEpoch, pi.PartitionEpoch)
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
	default:
		log.Warn("ISR change outcome unknown; sending it again", "attempt", attempt, "err", err)
		return true
	}
}
