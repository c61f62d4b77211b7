package broker

// InitializeShareGroupState (key 83), v0: the group coordinator sets a share partition's state
// epoch and start offset (its first assignment, or AlterShareGroupOffsets). An inter-broker API
// served by the share coordinator (sharecoord.Coordinator.Initialize) for the keys whose
// __share_group_state partition this broker leads (NOT_COORDINATOR for the others,
// COORDINATOR_LOAD_IN_PROGRESS while loading). CLUSTER_ACTION on the cluster is required (else
// every partition answers CLUSTER_AUTHORIZATION_FAILED, as Kafka's KafkaApis). Each partition is
// answered once its record is durable. At most maxShareStateRequestPartitions partitions are
// served (INVALID_REQUEST past them).

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/sharestate"
)

func init() {
	register(apiDef{key: 83, min: 0, max: 0, handle: handleInitializeShareGroupState})
}

func handleInitializeShareGroupState(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.InitializeShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.InitializeShareGroupStateResponse)
	resp.SetVersion(r.Version)
	pre := b.shareStateRequestCheck(authErrOrNil(b.authorizeCluster(r, acl.OpClusterAction))) // ACL: CLUSTER_ACTION on the cluster
	group := strings.Clone(req.GroupID)
	return netio.Reply{Deferred: func() netio.Reply {
		n := 0
		for _, rt := range req.Topics {
			st := kmsg.NewInitializeShareGroupStateResponseTopic()
			st.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewInitializeShareGroupStateResponseTopicPartition()
				sp.Partition = rp.Partition
				var err error
				switch n++; {
				case pre != nil:
					err = pre
				case n > maxShareStateRequestPartitions:
					err = kerr.InvalidRequest
				default:
					ctx, cancel := b.shareStateCtx()
					err = b.shareCoord.coord.Initialize(ctx, sharestate.Key{Group: group, TopicID: rt.TopicID, Partition: rp.Partition}, rp.StateEpoch, rp.StartOffset)
					cancel()
				}
				sp.ErrorCode, sp.ErrorMessage = shareStateErr(err)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return netio.Reply{Response: resp}
	}}
}
