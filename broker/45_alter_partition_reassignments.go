package broker

// AlterPartitionReassignments (key 45), v0-v1 (flexible; v1 adds allow_replication_factor_change,
// KIP-860), as Kafka 4.4 serves it. Authorization: ALTER on CLUSTER; without it every partition
// (and the top-level error) is CLUSTER_AUTHORIZATION_FAILED. Each partition is one change of the
// metadata log (controller/reassign.go): replicas = the new target starts (or replaces) a
// reassignment, null cancels one (NO_REASSIGNMENT_IN_PROGRESS when there is none). Errors per
// partition as Kafka's: UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty target, a
// broker twice or unregistered), INVALID_REPLICATION_FACTOR (v1 with the option off and a target
// of another size than the partition's replica count), INVALID_REQUEST (a partition named twice).
// The response comes once this broker's metadata image has every accepted change; the data moves
// after it (ListPartitionReassignments shows what is still in progress).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 45, min: 0, max: 1, handle: handleAlterPartitionReassignments})
}

// maxReassignPartitions bounds the partitions of one AlterPartitionReassignments request.
const maxReassignPartitions = 100000

func handleAlterPartitionReassignments(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.SetVersion(r.Version)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	allowRF := r.Version < 1 || req.AllowReplicationFactorChange
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	var all error
	if e := b.authorizeCluster(r, acl.OpAlter); e != nil { // ACL: ALTER on the cluster
		all = e
		resp.ErrorCode = e.Code
	} else if n > maxReassignPartitions {
		all = fmt.Errorf("%d partitions in one request, at most %d: %w", n, maxReassignPartitions, kerr.PolicyViolation)
		resp.ErrorCode = kerr.PolicyViolation.Code
	}
	if all != nil {
		msg := all.Error()
		resp.ErrorMessage = &msg
	}
	seen := make(map[string]map[int32]int, len(req.Topics))
	for _, rt := range req.Topics {
		if seen[rt.Topic] == nil {
			seen[rt.Topic] = map[int32]int{}
		}
		for _, rp := range rt.Partitions {
			seen[rt.Topic][rp.Partition]++
		}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			err := all
			switch {
			case err != nil:
			case seen[rt.Topic][rp.Partition] > 1:
				err = fmt.Errorf("partition %s-%d is named more than once: %w", rt.Topic, rp.Partition, kerr.InvalidRequest)
			default:
				err = b.reassignPartition(rt.Topic, rp.Partition, rp.Replicas, allowRF)
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				msg := err.Error()
				sp.ErrorMessage = &msg
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return netio.Reply{Response: resp}
}

// reassignPartition starts (target set) or cancels (target nil) one partition's reassignment.
func (b *Broker) reassignPartition(topic string, partition int32, target []int32, allowRF bool) error {
	img := b.ctl.Image()
	if !allowRF && target != nil {
		if t, ok := img.Topics[topic]; ok && partition >= 0 && int(partition) < len(t.Partitions) {
			p := t.Partitions[partition]
			if cur := len(p.OriginalReplicas()); cur != len(target) {
				return fmt.Errorf("%s-%d: the target has %d replicas, the partition %d, and the request does not allow a replication factor change: %w", topic, partition, len(target), cur, kerr.InvalidReplicationFactor)
			}
		}
	}
	if len(target) > 1000 {
		return fmt.Errorf("%s-%d: %d target replicas: %w", topic, partition, len(target), kerr.InvalidReplicaAssignment)
	}
	rctx, cancel := b.requestCtx()
	defer cancel()
	return b.ctl.AlterPartitionReassignment(rctx, controller.ReassignRequest{Topic: topic, Partition: partition, Target: target, Cancel: target == nil})
}
