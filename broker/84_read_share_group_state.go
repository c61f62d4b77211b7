package broker

// ReadShareGroupState (key 84), v0: a share-partition leader reads a share partition's state
// when it starts serving it, recording its leader epoch (a newer one is written to
// __share_group_state before the answer; an older one is FENCED_LEADER_EPOCH). A share
// partition never initialized answers INVALID_REQUEST, as Kafka's coordinator. Inter-broker:
// CLUSTER_ACTION on the cluster, served by the coordinator of the key as for
// InitializeShareGroupState (83_initialize_share_group_state.go), bounded the same way.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/sharestate"
)

func init() {
	register(apiDef{key: 84, min: 0, max: 0, handle: handleReadShareGroupState})
}

func handleReadShareGroupState(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ReadShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateResponse)
	resp.SetVersion(r.Version)
	pre := b.shareStateRequestCheck(authErrOrNil(b.authorizeCluster(r, acl.OpClusterAction))) // ACL: CLUSTER_ACTION on the cluster
	group := strings.Clone(req.GroupID)
	return netio.Reply{Deferred: func() netio.Reply {
		n := 0
		for _, rt := range req.Topics {
			st := kmsg.NewReadShareGroupStateResponseTopic()
			st.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewReadShareGroupStateResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.StartOffset = -1
				var err error
				switch n++; {
				case pre != nil:
					err = pre
				case n > maxShareStateRequestPartitions:
					err = kerr.InvalidRequest
				default:
					ctx, cancel := b.shareStateCtx()
					var s sharestate.State
					s, err = b.shareCoord.coord.Read(ctx, sharestate.Key{Group: group, TopicID: rt.TopicID, Partition: rp.Partition}, rp.LeaderEpoch)
					cancel()
					if err == nil {
						sp.StateEpoch, sp.StartOffset = s.StateEpoch, s.StartOffset
						sp.StateBatches = make([]kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch, len(s.Batches))
						for i, x := range s.Batches {
							rb := &sp.StateBatches[i]
							rb.Default()
							rb.FirstOffset, rb.LastOffset, rb.DeliveryState, rb.DeliveryCount = x.FirstOffset, x.LastOffset, x.DeliveryState, x.DeliveryCount
						}
					}
				}
				sp.ErrorCode, sp.ErrorMessage = shareStateErr(err)
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return netio.Reply{Response: resp}
	}}
}
