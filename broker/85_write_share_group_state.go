package broker

// WriteShareGroupState (key 85), v0-v1: a share-partition leader writes a share partition's
// changed state (start offset, the batches whose delivery state or count changed; v1 adds the
// delivery-complete count, KIP-1226). Fenced by leader epoch and state epoch; a share partition
// never initialized answers INVALID_REQUEST; a write of more than the coordinator's bound of
// batches answers INVALID_REQUEST. Answered once the record is durable. Inter-broker:
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
	register(apiDef{key: 85, min: 0, max: 1, handle: handleWriteShareGroupState})
}

func handleWriteShareGroupState(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.WriteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.WriteShareGroupStateResponse)
	resp.SetVersion(r.Version)
	pre := b.shareStateRequestCheck(authErrOrNil(b.authorizeCluster(r, acl.OpClusterAction))) // ACL: CLUSTER_ACTION on the cluster
	group := strings.Clone(req.GroupID)
	return netio.Reply{Deferred: func() netio.Reply {
		n := 0
		for _, rt := range req.Topics {
			st := kmsg.NewWriteShareGroupStateResponseTopic()
			st.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
				sp.Partition = rp.Partition
				var err error
				switch n++; {
				case pre != nil:
					err = pre
				case n > maxShareStateRequestPartitions:
					err = kerr.InvalidRequest
				case len(rp.StateBatches) > b.shareCoord.coord.MaxBatches():
					err = kerr.InvalidRequest
				default:
					s := sharestate.State{StateEpoch: rp.StateEpoch, LeaderEpoch: rp.LeaderEpoch, StartOffset: rp.StartOffset,
						DeliveryCompleteCount: rp.DeliveryCompleteCount, Batches: make([]sharestate.Batch, len(rp.StateBatches))}
					for i, x := range rp.StateBatches {
						s.Batches[i] = sharestate.Batch{FirstOffset: x.FirstOffset, LastOffset: x.LastOffset, DeliveryState: x.DeliveryState, DeliveryCount: x.DeliveryCount}
					}
					if r.Version < 1 {
						s.DeliveryCompleteCount = -1
					}
					ctx, cancel := b.shareStateCtx()
					err = b.shareCoord.coord.Write(ctx, sharestate.Key{Group: group, TopicID: rt.TopicID, Partition: rp.Partition}, s)
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
