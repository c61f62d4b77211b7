package broker

// ConsumerGroupDescribe (key 69), v0-v1: KIP-848 consumer groups with their epochs, assignor,
// and per member its epoch, subscription, current and target assignment (v1: the member type, 1
// for the consumer protocol). A group that does not exist or is not a consumer group answers
// GROUP_ID_NOT_FOUND. Authorized as Kafka's KafkaApis does: DESCRIBE on the group (else
// GROUP_AUTHORIZATION_FAILED), and a group whose members' current or target assignments hold
// topics the principal may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED (Kafka 4.x,
// KAFKA-18813: the assigned topics are checked, not the subscribed names). v0+ may ask for the
// principal's authorized operations on each group.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 69, min: 0, max: 1, handle: handleConsumerGroupDescribe})
}

func handleConsumerGroupDescribe(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	resp.SetVersion(r.Version)
	denied := b.topicDenied(r, acl.OpDescribe)
	for _, id := range req.Groups {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group = id
		if e := b.authorize(r, acl.OpDescribe, acl.ResourceGroup, id); e != nil { // ACL: DESCRIBE on the group
			g.ErrorCode = e.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d := b.groups.coord.ConsumerDescribe(id)
		if d.Err != nil {
			g.ErrorCode = d.Err.Code
			if d.ErrMessage != "" {
				msg := d.ErrMessage
				g.ErrorMessage = &msg
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName
		topicDenied := false
		assignment := func(ps []coordinator.ConsumerTopicPartitions) kmsg.Assignment {
			var a kmsg.Assignment
			a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
			for _, t := range ps {
				var at kmsg.AssignmentTopicPartition
				at.TopicID, at.Partitions = t.TopicID, t.Partitions
				if tt, ok := b.topics.getByID(t.TopicID); ok {
					at.Topic = tt.Name
					if denied != nil && denied(tt.Name) {
						topicDenied = true
					}
				}
				a.TopicPartitions = append(a.TopicPartitions, at)
			}
			return a
		}
		for _, m := range d.Members {
			gm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			gm.MemberID, gm.InstanceID, gm.RackID, gm.MemberEpoch = m.MemberID, m.InstanceID, m.RackID, m.MemberEpoch
			gm.ClientID, gm.ClientHost = m.ClientID, m.ClientHost
			gm.SubscribedTopics = append([]string{}, m.SubscribedTopicNames...)
			gm.SubscribedTopicRegex = m.SubscribedTopicRegex
			gm.Assignment = assignment(m.Assignment)
			gm.TargetAssignment = assignment(m.TargetAssignment)
			if r.Version >= 1 {
				gm.MemberType = m.MemberType
			}
			g.Members = append(g.Members, gm)
		}
		if topicDenied {
			g = kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group = id
			g.ErrorCode = kerr.TopicAuthorizationFailed.Code
			msg := "The group has described topic(s) that the client is not authorized to describe."
			g.ErrorMessage = &msg
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = b.authorizedOps(r, acl.ResourceGroup, id)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return netio.Reply{Response: resp}
}
