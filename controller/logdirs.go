package controller

// Log-dir failures (Kafka's handling of a broker's offline log directories): a broker whose log
// dir went offline reports the replicas it held there (ReportOfflineReplicas, the
// log_dirs_offline request). The controller removes that broker from those partitions' ISRs
// (unless it is the last member, as fencing does) and moves the leadership of those it leads to
// another live ISR member, or to no leader when there is none: only the partitions of the failed
// dir are affected, the broker's others keep their roles. The broker reports again while the
// image still shows it leading such a partition or in its ISR with others, so a lost report or
// a new controller converges.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Offline replica reports (log_dirs_offline).
const (
	opLogDirsOffline  = "log_dirs_offline"
	reqLogDirsOffline = "log_dirs_offline"
	// MaxOfflineReplicasPerReport bounds one report; a broker sends more in several.
	MaxOfflineReplicasPerReport = 1000
)

// PartitionRef names one partition.
type PartitionRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// ReportOfflineReplicas tells the controller that this broker's replicas of parts are in an
// offline log dir (at most MaxOfflineReplicasPerReport). It returns once the change is applied.
func (c *Controller) ReportOfflineReplicas(ctx context.Context, parts []PartitionRef) error {
	if len(parts) == 0 {
		return nil
	}
	if len(parts) > MaxOfflineReplicasPerReport {
		return kerrf(kerr.InvalidRequest, "%d offline replicas in one report, at most %d", len(parts), MaxOfflineReplicasPerReport)
	}
	_, err := c.submit(ctx, &request{Op: reqLogDirsOffline, BrokerID: c.cfg.NodeID, OfflineReplicas: parts})
	return err
}

// validateOfflineReplicas bounds a log_dirs_offline request's list.
func validateOfflineReplicas(parts []PartitionRef) error {
	if len(parts) > MaxOfflineReplicasPerReport {
		return kerrf(kerr.InvalidRequest, "%d offline replicas, at most %d", len(parts), MaxOfflineReplicasPerReport)
	}
	for _, p := range parts {
		if p.Topic == "" || len(p.Topic) > maxNameLen || p.Partition < 0 {
			return kerrf(kerr.InvalidRequest, "bad offline replica %q %d", p.Topic, p.Partition)
		}
	}
	return nil
}

// NeedsOfflineReport reports whether the image still counts broker id's replica of pi as
// usable: it leads it, or is in its ISR with other members.
func NeedsOfflineReport(pi *PartitionInfo, id int32) bool {
	if !slices.Contains(pi.Replicas, id) {
		return false
	}
	return pi.Leader == id || (slices.Contains(pi.ISR, id) && len(pi.ISR) > 1)
}

// logDirsOffline applies a report: broker id's replicas of parts are offline.
func (b *builder) logDirsOffline(id int32, parts []PartitionRef) {
	if _, ok := b.img.Brokers[id]; !ok {
		return
	}
	for _, ref := range parts {
		t := b.img.Topics[ref.Topic]
		if t == nil || ref.Partition < 0 || int(ref.Partition) >= len(t.Partitions) {
			continue
		}
		p := t.Partitions[ref.Partition]
		if !NeedsOfflineReport(&p, id) {
			continue
		}
		if slices.Contains(p.ISR, id) && len(p.ISR) > 1 {
			p.ISR = without(p.ISR, id)
		}
		if p.Leader == id {
			p.Leader = -1
			for _, r := range p.Replicas {
				if r != id && slices.Contains(p.ISR, r) && b.img.alive(r) {
					p.Leader = r
					break
				}
			}
			p.LeaderEpoch++
		}
		p.PartitionEpoch++
		b.mutTopic(ref.Topic).Partitions[ref.Partition] = p
		b.changed = true
	}
}
