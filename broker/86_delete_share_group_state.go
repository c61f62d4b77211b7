package broker

// DeleteShareGroupState (key 86), v0: the group coordinator deletes share partitions' state
// (DeleteGroups, DeleteShareGroupOffsets): tombstones on __share_group_state, answered once
// durable; a share partition with no state answers no error. Inter-broker: CLUSTER_ACTION on
// the cluster, served by the coordinator of the key as for InitializeShareGroupState
// (83_initialize_share_group_state.go), bounded the same way.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/sharestate"
)

func init() {
	register(apiDef{key: 86, min: 0, max: 0, handle: handleDeleteShareGroupState})
}

func handleDeleteShareGroupState(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DeleteShareGroupStateRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupStateResponse)
	resp.SetVersion(r.Version)
	pre := b.shareStateRequestCheck(authErrOrNil(b.authorizeCluster(r, acl.OpClusterAction))) // ACL: CLUSTER_ACTION on the cluster
	group := strings.Clone(req.GroupID)
	return netio.Reply{Deferred: func() netio.Reply {
		n := 0
		for _, rt := range req.Topics {
			st := kmsg.NewDeleteShareGroupStateResponseTopic()
			st.TopicID = rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewDeleteShareGroupStateResponseTopicPartition()
				sp.Partition = rp.Partition
				var err error
				switch n++; {
				case pre != nil:
					err = pre
				case n > maxShareStateRequestPartitions:
					err = kerr.InvalidRequest
				default:
					ctx, cancel := b.shareStateCtx()
					err = b.shareCoord.coord.Delete(ctx, sharestate.Key{Group: group, TopicID: rt.TopicID, Partition: rp.Partition})
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
