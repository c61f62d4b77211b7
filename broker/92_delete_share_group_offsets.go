package broker

// DeleteShareGroupOffsets (key 92), v0. Deletes the share-partition state of topics of an empty
// share group (NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND for a group that does
// not exist or is not a share group) through the share-partition state persister; the group
// forgets the topics' partitions. An unknown topic answers UNKNOWN_TOPIC_OR_PARTITION. ACLs as
// Kafka's KafkaApis: DELETE on the group (GROUP_AUTHORIZATION_FAILED), READ on each topic
// (TOPIC_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 92, min: 0, max: 0, handle: handleDeleteShareGroupOffsets})
}

func handleDeleteShareGroupOffsets(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	resp.SetVersion(r.Version)
	if e := b.authorize(r, acl.OpDelete, acl.ResourceGroup, req.GroupID); e != nil { // ACL: DELETE on the group
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	denied := b.topicDenied(r, acl.OpRead) // ACL: READ on each topic
	var topics []coordinator.ShareTopic
	var slots []int
	for i, rt := range req.Topics {
		t, known := b.topics.get(rt.Topic)
		out := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		out.Topic, out.TopicID = rt.Topic, t.ID
		switch {
		case i >= maxSharePartitionsPerRequest:
			out.ErrorCode = kerr.InvalidRequest.Code
		case denied != nil && denied(rt.Topic):
			out.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case !known:
			out.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			topics = append(topics, coordinator.ShareTopic{ID: t.ID, Name: t.Name, Partitions: t.Partitions})
			slots = append(slots, i)
		}
		resp.Topics = append(resp.Topics, out)
	}
	group := req.GroupID
	return netio.Reply{Deferred: func() netio.Reply {
		gerr, msg, errs := b.groups.coord.DeleteShareOffsets(group, topics)
		if gerr != nil {
			resp.ErrorCode = gerr.Code
			if msg != "" {
				resp.ErrorMessage = &msg
			}
			resp.Topics = nil
			return netio.Reply{Response: resp}
		}
		for i, s := range slots {
			if errs[i] != nil {
				resp.Topics[s].ErrorCode = errs[i].Code
			}
		}
		return netio.Reply{Response: resp}
	}}
}
