package broker

// OffsetCommit (key 8), v2-v9 (Kafka 4 removed v0-v1; v10 names topics by id and is not served).
// v2-v4 carry a retention time, honoured as an expire time for these offsets; v6+ a leader
// epoch per partition; v7+ group.instance.id. A commit from a group member is checked against
// the group (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID); a
// commit with generation -1 and no member id (admin tools, standalone consumers) is accepted
// only while the group is empty. In a KIP-848 consumer group the generation is the member epoch
// (STALE_MEMBER_EPOCH when it is not the member's current one; UNSUPPORTED_VERSION below v9). A partition of an unknown topic is UNKNOWN_TOPIC_OR_PARTITION,
// metadata longer than offset.metadata.max.bytes OFFSET_METADATA_TOO_LARGE. The offsets are
// appended to __consumer_offsets as one batch and the reply waits until it is fdatasync'd.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 8, min: 2, max: 9, handle: handleOffsetCommit})
}

func handleOffsetCommit(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	resp.SetVersion(r.Version)
	cr := coordinator.CommitRequest{Group: req.Group, Generation: req.Generation, MemberID: req.MemberID, RetentionMs: -1, Version: r.Version}
	if r.Version <= 4 && req.RetentionTimeMillis >= 0 {
		cr.RetentionMs = req.RetentionTimeMillis
	}
	if r.Version >= 7 {
		cr.InstanceID = req.InstanceID
	}
	type slot struct{ t, p int }
	var slots []slot
	// ACL: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), READ on each topic.
	groupErr := b.authorize(r, acl.OpRead, acl.ResourceGroup, req.Group)
	denied := b.topicDenied(r, acl.OpRead)
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		t, known := b.topics.get(rt.Topic)
		st.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			if groupErr != nil {
				sp.ErrorCode = groupErr.Code
				continue
			}
			if denied != nil && denied(rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if !known || rp.Partition < 0 || rp.Partition >= t.Partitions {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			epoch := int32(-1)
			if r.Version >= 6 {
				epoch = rp.LeaderEpoch
			}
			cr.Partitions = append(cr.Partitions, coordinator.CommitPartition{
				TopicPartition: coordinator.TopicPartition{Topic: rt.Topic, Partition: rp.Partition},
				Offset:         rp.Offset, LeaderEpoch: epoch, Metadata: rp.Metadata,
			})
			slots = append(slots, slot{i, j})
		}
	}
	if len(cr.Partitions) == 0 {
		return netio.Reply{Response: resp}
	}
	wait := b.groups.coord.Commit(cr)
	return netio.Reply{Deferred: func() netio.Reply {
		res := wait()
		for k, s := range slots {
			if e := res.Errors[k]; e != nil {
				resp.Topics[s.t].Partitions[s.p].ErrorCode = e.Code
			}
		}
		return netio.Reply{Response: resp}
	}}
}
