package broker

// OffsetForLeaderEpoch (key 23), v2-v4 (Kafka 4 removed v0-v1). For each partition this broker
// leads: where the requested leader epoch ends in the local log (the start of the next larger
// epoch, or the log end for the current one) and the largest epoch at or below the requested
// one (UNDEFINED -1/-1 when the log knows no such epoch). A follower uses it to truncate a
// divergent tail before fetching from a new leader; consumers use it (KIP-320) to detect log
// truncation after a leader change. current_leader_epoch is checked as Fetch checks it
// (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), and only the leader answers
// (NOT_LEADER_OR_FOLLOWER).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 23, min: 2, max: 4, handle: handleOffsetForLeaderEpoch})
}

func handleOffsetForLeaderEpoch(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.SetVersion(r.Version)
	denied := b.clusterActionOrTopicDenied(r) // ACL: CLUSTER_ACTION on the cluster, or DESCRIBE on each topic
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t, ok := b.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			switch {
			case denied != nil && denied(rt.Topic):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !ok || rp.Partition < 0 || rp.Partition >= t.Partitions:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				rep := b.rm.get(engine.TopicPartition{Topic: t.Name, Partition: rp.Partition})
				if rep == nil {
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
					break
				}
				if err := rep.checkLeader(rp.CurrentLeaderEpoch); err != nil {
					sp.ErrorCode = errorCode(err)
					break
				}
				sp.EndOffset, sp.LeaderEpoch = rep.log.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return netio.Reply{Response: resp}
}
