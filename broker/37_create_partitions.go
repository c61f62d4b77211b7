package broker

// CreatePartitions (key 37), v0-v3 (v1 is v0 with a throttle change, v2+ flexible, v3 is v2).
// Partitions can only be added: a count equal to or below the current one is INVALID_PARTITIONS,
// as is one above the broker's partition limit. Manual assignments (one replica list per new
// partition) must have exactly count - current entries and may name only this broker, once
// each, as many times as the existing partitions have replicas (1): anything else is
// INVALID_REPLICA_ASSIGNMENT. An unknown topic is UNKNOWN_TOPIC_OR_PARTITION, a topic named
// twice INVALID_REQUEST. validate_only checks without creating. The new partitions' logs are
// created before the topic's partition count is raised, so Metadata never announces a
// partition without a log. Internal topics get INVALID_TOPIC_EXCEPTION (Kafka 4 adds partitions
// to them, which remaps every consumer group to another partition and loses its offsets).

import (
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 37, min: 0, max: 3, handle: handleCreatePartitions})
}

func handleCreatePartitions(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	resp.SetVersion(r.Version)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	mq := b.mutationQuota(r, r.Version >= 3) // controller_mutation_rate (quotas.go)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		if seen[rt.Topic] > 1 {
			err = fmt.Errorf("duplicate topic name %s: %w", rt.Topic, kerr.InvalidRequest)
		} else if e := b.authorize(r, acl.OpAlter, acl.ResourceTopic, rt.Topic); e != nil { // ACL: ALTER on the topic
			err = e
		} else if mq.exceeded() {
			err = errThrottlingQuotaExceeded
		} else {
			before, _ := b.topics.get(rt.Topic)
			if err = b.createPartitions(rt, req.ValidateOnly); err == nil && !req.ValidateOnly {
				mq.record(rt.Count - before.Partitions)
			}
		}
		if err != nil {
			st.ErrorCode = errorCode(err)
			msg := err.Error()
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	rep := netio.Reply{Response: resp}
	mq.finish(&rep)
	return rep
}

// createPartitions raises a topic's partition count to rt.Count.
func (b *Broker) createPartitions(rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	b.topicMu.Lock()
	defer b.topicMu.Unlock()
	t, ok := b.topicFresh(rt.Topic)
	if !ok {
		return fmt.Errorf("topic %s: %w", rt.Topic, kerr.UnknownTopicOrPartition)
	}
	switch {
	case isInternalTopic(t.Name):
		// Kafka 4's controller adds them; weir refuses: groups are mapped to partitions by the
		// partition count (abs(hash) % count), so more partitions would move every group and
		// orphan its committed offsets.
		return fmt.Errorf("cannot add partitions to internal topic %s: each group's partition is chosen by the partition count: %w", t.Name, kerr.InvalidTopicException)
	case rt.Count < t.Partitions:
		return fmt.Errorf("topic %s currently has %d partitions; %d would not be an increase: %w", t.Name, t.Partitions, rt.Count, kerr.InvalidPartitions)
	case rt.Count == t.Partitions:
		return fmt.Errorf("topic %s already has %d partitions: %w", t.Name, t.Partitions, kerr.InvalidPartitions)
	case rt.Count > maxPartitions:
		return fmt.Errorf("%d partitions exceed the limit of %d: %w", rt.Count, maxPartitions, kerr.InvalidPartitions)
	}
	var assignment [][]int32
	if rt.Assignment != nil {
		if added := rt.Count - t.Partitions; int32(len(rt.Assignment)) != added {
			return fmt.Errorf("attempted to add %d partitions, but %d assignments were given: %w", added, len(rt.Assignment), kerr.InvalidReplicaAssignment)
		}
		for i, a := range rt.Assignment {
			if err := b.checkAssignment(t.Partitions+int32(i), a.Replicas); err != nil {
				return err
			}
			if rf := len(t.Assign[0].Replicas); len(a.Replicas) != rf {
				return fmt.Errorf("assignment of partition %d has %d replicas, the topic's partitions have %d: %w", t.Partitions+int32(i), len(a.Replicas), rf, kerr.InvalidReplicaAssignment)
			}
			assignment = append(assignment, a.Replicas)
		}
	}
	if err := b.checkPartitionBudget(b.localReplicas(rt.Count-t.Partitions, int16(len(t.Assign[0].Replicas)), assignment)); err != nil {
		return fmt.Errorf("topic %s: %w", t.Name, err)
	}
	if validateOnly {
		return nil
	}
	ctx, cancel := b.requestCtx()
	defer cancel()
	if err := b.ctl.CreatePartitions(ctx, t.Name, rt.Count, assignment); err != nil {
		return err
	}
	if err := b.waitImage(ctx, func(img *controller.Image) bool {
		it, ok := img.Topics[t.Name]
		return ok && int32(len(it.Partitions)) >= rt.Count
	}); err != nil {
		return err
	}
	slog.Info("created partitions", "topic", t.Name, "from", t.Partitions, "to", rt.Count)
	return nil
}
