package broker

// ReadShareGroupStateSummary (key 87), v0-v1: the group coordinator reads share partitions'
// state epoch, leader epoch and start offset (v1 adds the delivery-complete count, KIP-1226)
// without their batches (DescribeShareGroupOffsets). It records no leader epoch. A share
// partition with no state answers start offset -1 at state epoch 0 and leader epoch -1 with no
// error. Inter-broker: CLUSTER_ACTION on the cluster, served by the coordinator of the key as
// for InitializeShareGroupState (83_initialize_share_group_state.go), bounded the same way.

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/sharestate"
)

func init() {
	register(apiDef{key: 87, min: 0, max: 1, handle: handleReadShareGroupStateSummary})
}

func handleReadShareGroupStateSummary(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ReadShareGroupStateSummaryRequest)
	resp := req.ResponseKind().(*kmsg.ReadShareGroupStateSummaryResponse)
	resp.SetVersion(r.Version)
	pre := b.shareStateRequestCheck(authErrOrNil(b.authorizeCluster(r, acl.OpClusterAction))) // ACL: CLUSTER_ACTION on the cluster
	group := strings.Clone(req.GroupID)
	return netio.Reply{Deferred: func() netio.Reply {
		n := 0
		for _, rt := range req.Topics {
			st := kmsg.NewReadShareGroupStateSummaryResponseTopic()
			st.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.StartOffset, sp.LeaderEpoch = -1, -1
				var err error
				switch n++; {
				case pre != nil:
					err = pre
				case n > maxShareStateRequestPartitions:
					err = kerr.InvalidRequest
				default:
					ctx, cancel := b.shareStateCtx()
					var s sharestate.Summary
					s, err = b.shareCoord.coord.ReadSummary(ctx, sharestate.Key{Group: group, TopicID: rt.TopicID, Partition: rp.Partition}, rp.LeaderEpoch)
					cancel()
					switch {
					case errors.Is(err, sharestate.ErrNotInitialized):
						err = nil // the defaults above
					case err == nil:
						sp.StateEpoch, sp.LeaderEpoch, sp.StartOffset, sp.DeliveryCompleteCount = s.StateEpoch, s.LeaderEpoch, s.StartOffset, s.DeliveryCompleteCount
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
