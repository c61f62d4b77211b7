package broker

// OffsetDelete (key 47), v0. Deletes committed offsets of a group: any partition of an empty
// group; of a consumer group with members only partitions of topics none of them subscribes to
// (GROUP_SUBSCRIBED_TO_TOPIC otherwise); a non-consumer group with members is NON_EMPTY_GROUP.
// Unknown group: GROUP_ID_NOT_FOUND; unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 47, min: 0, max: 0, handle: handleOffsetDelete})
}

func handleOffsetDelete(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	resp.SetVersion(r.Version)
	if e := b.authorize(r, acl.OpDelete, acl.ResourceGroup, req.Group); e != nil { // ACL: DELETE on the group
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	denied := b.topicDenied(r, acl.OpRead) // ACL: READ on each topic
	type slot struct{ t, p int }
	var parts []coordinator.TopicPartition
	var slots []slot
	resp.Topics = make([]kmsg.OffsetDeleteResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		t, known := b.topics.get(rt.Topic)
		st.Partitions = make([]kmsg.OffsetDeleteResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			if denied != nil && denied(rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if !known || rp.Partition < 0 || rp.Partition >= t.Partitions {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			parts = append(parts, coordinator.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			slots = append(slots, slot{i, j})
		}
	}
	gerr, perrs, wait := b.groups.coord.DeleteOffsets(req.Group, parts)
	return netio.Reply{Deferred: func() netio.Reply {
		if gerr == nil {
			gerr = wait()
		}
		if gerr != nil {
			resp.ErrorCode = gerr.Code
			resp.Topics = nil
			return netio.Reply{Response: resp}
		}
		for k, s := range slots {
			if k < len(perrs) && perrs[k] != nil {
				resp.Topics[s.t].Partitions[s.p].ErrorCode = perrs[k].Code
			}
		}
		return netio.Reply{Response: resp}
	}}
}
