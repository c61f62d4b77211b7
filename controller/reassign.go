package controller

// Partition reassignment (KIP-455), as Kafka's controller does it (ReplicationControlManager,
// PartitionReassignmentReplicas, PartitionChangeBuilder):
//
//   - Starting a reassignment of a partition to a target replica list: with current = the
//     partition's original replicas (Replicas less any AddingReplicas of a reassignment in
//     progress), AddingReplicas = target - current, RemovingReplicas = current - target, and
//     Replicas = target followed by the removing ones. The ISR and the leader do not change. The adding
//     brokers create the log and follow the leader (the broker's replica manager follows
//     Replicas); the leader adds them to the ISR once they caught up (AlterPartition).
//   - Completion, checked whenever the partition's ISR changes (alterPartition) and when the
//     reassignment starts: once every target replica is in the ISR, Replicas = target, ISR =
//     ISR ∩ target, Adding/Removing are cleared, and if the leader is not a target replica the
//     leadership moves to the first target replica in the ISR that is alive (leader epoch
//     bumped). The removed brokers stop following and delete their replica's log.
//   - Cancelling reverts to the original replicas (Replicas - AddingReplicas), ISR ∩ original;
//     if no ISR member would remain it is refused (Kafka: it would need an unclean election).
//     Cancelling a partition that is not being reassigned is NO_REASSIGNMENT_IN_PROGRESS.
//   - A new target for a partition in reassignment replaces the old one as above: replicas
//     that were being added and are not in the new target are dropped at once (and leave the
//     ISR; a dropped leader hands over to the first remaining ISR replica), and asking again
//     for the same target changes nothing (a retried request is harmless).
//
// Every change bumps the partition epoch. The checks are done twice: on the raft leader when
// the request is planned (so the caller gets Kafka's error code), and again when the command is
// applied (the image may have moved in between).

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

const (
	opReassign  = "reassign"
	reqReassign = "reassign"
)

// ReassignRequest starts, replaces or (Cancel) cancels the reassignment of one partition.
type ReassignRequest struct {
	Topic     string
	Partition int32
	// Target is the new replica list (its first replica is the preferred leader); unused when
	// Cancel is set.
	Target []int32 `json:",omitempty"`
	Cancel bool    `json:",omitempty"`
}

// Reassigning reports whether a reassignment of the partition is in progress.
func (p *PartitionInfo) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// TargetReplicas is the replica list the partition will have when its reassignment completes
// (Replicas when none is in progress).
func (p *PartitionInfo) TargetReplicas() []int32 {
	out := make([]int32, 0, len(p.Replicas))
	for _, r := range p.Replicas {
		if !slices.Contains(p.RemovingReplicas, r) {
			out = append(out, r)
		}
	}
	return out
}

// OriginalReplicas is the replica list before the reassignment (Replicas when none is in
// progress): what a cancel reverts to.
func (p *PartitionInfo) OriginalReplicas() []int32 {
	out := make([]int32, 0, len(p.Replicas))
	for _, r := range p.Replicas {
		if !slices.Contains(p.AddingReplicas, r) {
			out = append(out, r)
		}
	}
	return out
}

// AlterPartitionReassignment starts, replaces or cancels the reassignment of one partition and
// returns once this broker's image has the change.
func (c *Controller) AlterPartitionReassignment(ctx context.Context, r ReassignRequest) error {
	_, err := c.submit(ctx, &request{Op: reqReassign, Reassign: &r})
	return err
}

// planReassign checks r against img on the raft leader and returns its command.
func planReassign(img *Image, r *ReassignRequest) (*command, error) {
	if r == nil {
		return nil, kerrf(kerr.InvalidRequest, "reassign without a request")
	}
	b := newBuilder(img)
	if _, err := b.reassign(r); err != nil {
		return nil, err
	}
	return &command{Op: opReassign, Reassign: r}, nil
}

// validateReassignShape bounds a reassign request from the network.
func validateReassignShape(r *ReassignRequest) error {
	if r == nil {
		return kerrf(kerr.InvalidRequest, "reassign without a request")
	}
	if len(r.Topic) > maxNameLen || r.Partition < 0 || len(r.Target) > maxReplicas || (r.Cancel && r.Target != nil) {
		return kerrf(kerr.InvalidRequest, "bad reassign request")
	}
	return nil
}

// reassign applies r to the builder's image and returns the partition's new state.
func (b *builder) reassign(r *ReassignRequest) (*PartitionInfo, error) {
	if r == nil {
		return nil, kerrf(kerr.InvalidRequest, "reassign without a request")
	}
	t := b.img.Topics[r.Topic]
	if t == nil || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return nil, kerrf(kerr.UnknownTopicOrPartition, "%s-%d", r.Topic, r.Partition)
	}
	p := t.Partitions[r.Partition]
	if r.Cancel {
		if !p.Reassigning() {
			return nil, kerrf(kerr.NoReassignmentInProgress, "%s-%d is not being reassigned", r.Topic, r.Partition)
		}
		orig := p.OriginalReplicas()
		isr := intersect(p.ISR, orig)
		if len(isr) == 0 {
			return nil, kerrf(kerr.InvalidReplicaAssignment, "cannot cancel the reassignment of %s-%d: no replica of the original set %v is in the ISR %v (it would need an unclean election)", r.Topic, r.Partition, orig, p.ISR)
		}
		p.Replicas, p.ISR, p.AddingReplicas, p.RemovingReplicas = orig, isr, nil, nil
		b.moveLeaderIfGone(&p)
	} else {
		if err := validateTarget(b.img, r); err != nil {
			return nil, err
		}
		cur := p.OriginalReplicas()
		target := slices.Clone(r.Target)
		p.AddingReplicas = difference(target, cur)
		p.RemovingReplicas = difference(cur, target)
		p.Replicas = append(target, p.RemovingReplicas...)
		if len(p.AddingReplicas) == 0 {
			p.AddingReplicas = nil
		}
		if len(p.RemovingReplicas) == 0 {
			p.RemovingReplicas = nil
		}
		// Replicas an earlier reassignment was adding and this one drops leave the ISR.
		if isr := intersect(p.ISR, p.Replicas); len(isr) > 0 {
			p.ISR = isr
		}
		if !completeReassignment(b.img, &p) {
			moveLeader(b.img, &p)
		}
	}
	p.PartitionEpoch++
	b.mutTopic(r.Topic).Partitions[r.Partition] = p
	b.changed = true
	out := clonePartition(p)
	return &out, nil
}

// validateTarget checks a reassignment's target replicas (Kafka's
// validateManualPartitionAssignment): not empty, no broker twice, every broker registered.
func validateTarget(img *Image, r *ReassignRequest) error {
	if len(r.Target) == 0 {
		return kerrf(kerr.InvalidReplicaAssignment, "%s-%d: the target replica list is empty", r.Topic, r.Partition)
	}
	for i, id := range r.Target {
		if slices.Contains(r.Target[:i], id) {
			return kerrf(kerr.InvalidReplicaAssignment, "%s-%d: the target replicas %v name broker %d twice", r.Topic, r.Partition, r.Target, id)
		}
		if _, ok := img.Brokers[id]; !ok {
			return kerrf(kerr.InvalidReplicaAssignment, "%s-%d: the target replicas %v name broker %d, but no such broker is registered", r.Topic, r.Partition, r.Target, id)
		}
	}
	return nil
}

// completeReassignment finishes p's reassignment if every target replica is in the ISR, and
// reports whether it did.
func completeReassignment(img *Image, p *PartitionInfo) bool {
	if !p.Reassigning() {
		return false
	}
	target := p.TargetReplicas()
	for _, id := range target {
		if !slices.Contains(p.ISR, id) {
			return false
		}
	}
	p.Replicas, p.ISR = target, intersect(p.ISR, target)
	p.AddingReplicas, p.RemovingReplicas = nil, nil
	moveLeader(img, p)
	return true
}

// moveLeaderIfGone is moveLeader on the builder's image.
func (b *builder) moveLeaderIfGone(p *PartitionInfo) { moveLeader(b.img, p) }

// moveLeader elects a new leader (first replica in the ISR and alive; none: -1) when the
// current one is no longer a replica or not in the ISR, bumping the leader epoch.
func moveLeader(img *Image, p *PartitionInfo) {
	if p.Leader >= 0 && slices.Contains(p.Replicas, p.Leader) && slices.Contains(p.ISR, p.Leader) {
		return
	}
	p.Leader = electLeader(img, p)
	p.LeaderEpoch++
}

// maybeCompleteReassignment is called after a partition's ISR changed (alterPartition): it
// completes the partition's reassignment if every target replica has joined the ISR.
func (b *builder) maybeCompleteReassignment(topic string, partition int32) *PartitionInfo {
	t := b.img.Topics[topic]
	if t == nil || int(partition) >= len(t.Partitions) {
		return nil
	}
	p := t.Partitions[partition]
	if !completeReassignment(b.img, &p) {
		return nil
	}
	p.PartitionEpoch++
	b.mutTopic(topic).Partitions[partition] = p
	b.changed = true
	return &p
}

// intersect returns the members of a that are in b, in a's order.
func intersect(a, b []int32) []int32 {
	out := make([]int32, 0, len(a))
	for _, v := range a {
		if slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}

// difference returns the members of a that are not in b, in a's order.
func difference(a, b []int32) []int32 {
	out := make([]int32, 0, len(a))
	for _, v := range a {
		if !slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	return out
}
