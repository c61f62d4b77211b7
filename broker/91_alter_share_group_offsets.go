package broker

// AlterShareGroupOffsets (key 91), v0. Sets the share-partition start offset of partitions of
// an empty share group (NON_EMPTY_GROUP while it has members; a group that does not exist is
// created empty, as Kafka's): the group coordinator initializes each partition's state at the
// given offset through the share-partition state persister and records it in the group. An
// unknown topic or partition answers UNKNOWN_TOPIC_OR_PARTITION. ACLs as Kafka's KafkaApis:
// READ on the group (GROUP_AUTHORIZATION_FAILED), READ on each topic
// (TOPIC_AUTHORIZATION_FAILED per partition).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 91, min: 0, max: 0, handle: handleAlterShareGroupOffsets})
}

func handleAlterShareGroupOffsets(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	resp.SetVersion(r.Version)
	if e := b.authorize(r, acl.OpRead, acl.ResourceGroup, req.GroupID); e != nil { // ACL: READ on the group
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	denied := b.topicDenied(r, acl.OpRead) // ACL: READ on each topic
	type slot struct{ t, p int }
	var offsets []coordinator.ShareOffset
	var slots []slot
	n := 0
	for ti, rt := range req.Topics {
		t, known := b.topics.get(rt.Topic)
		out := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		out.Topic, out.TopicID = rt.Topic, t.ID
		for pi, rp := range rt.Partitions {
			o := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			o.Partition = rp.Partition
			n++
			switch {
			case n > maxSharePartitionsPerRequest:
				o.ErrorCode = kerr.InvalidRequest.Code
			case denied != nil && denied(rt.Topic):
				o.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known || rp.Partition < 0 || rp.Partition >= t.Partitions:
				o.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				offsets = append(offsets, coordinator.ShareOffset{Topic: coordinator.ShareTopic{ID: t.ID, Name: t.Name, Partitions: t.Partitions}, Partition: rp.Partition, StartOffset: rp.StartOffset})
				slots = append(slots, slot{ti, pi})
			}
			out.Partitions = append(out.Partitions, o)
		}
		resp.Topics = append(resp.Topics, out)
	}
	group := req.GroupID
	return netio.Reply{Deferred: func() netio.Reply {
		if len(offsets) == 0 {
			return netio.Reply{Response: resp}
		}
		gerr, msg, errs := b.groups.coord.AlterShareOffsets(group, offsets)
		if gerr != nil {
			resp.ErrorCode = gerr.Code
			if msg != "" {
				resp.ErrorMessage = &msg
			}
			for _, s := range slots {
				resp.Topics[s.t].Partitions[s.p].ErrorCode = gerr.Code
			}
			return netio.Reply{Response: resp}
		}
		for i, s := range slots {
			if errs[i] != nil {
				resp.Topics[s.t].Partitions[s.p].ErrorCode = errs[i].Code
			}
		}
		return netio.Reply{Response: resp}
	}}
}
