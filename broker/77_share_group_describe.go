package broker

// ShareGroupDescribe (key 77), v0-v1. Per group: state (Empty, Stable, Dead), group epoch,
// assignment epoch, assignor ("simple") and the members with their member epoch, rack, client
// id and host, subscribed topics and assignment (topic ids and names). A group that does not
// exist, or is not a share group, answers GROUP_ID_NOT_FOUND. ACLs as Kafka's KafkaApis:
// DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED); TOPIC_AUTHORIZATION_FAILED for a group
// whose members are assigned a topic the principal may not DESCRIBE (Kafka 4.4 checks the
// assigned topics, at every version). Authorized operations on request.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 77, min: 0, max: 1, handle: handleShareGroupDescribe})
}

func handleShareGroupDescribe(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	resp.SetVersion(r.Version)
	ids := req.GroupIDs
	return netio.Reply{Deferred: func() netio.Reply {
		denied := b.topicDenied(r, acl.OpDescribe)
		for _, id := range ids {
			g := kmsg.NewShareGroupDescribeResponseGroup()
			g.GroupID = id
			if e := b.authorize(r, acl.OpDescribe, acl.ResourceGroup, id); e != nil { // ACL: DESCRIBE on the group
				g.ErrorCode = e.Code
				resp.Groups = append(resp.Groups, g)
				continue
			}
			d := b.groups.coord.ShareDescribe(id)
			if d.Err != nil {
				g.ErrorCode = d.Err.Code
				if d.ErrMessage != "" {
					msg := d.ErrMessage
					g.ErrorMessage = &msg
				}
				resp.Groups = append(resp.Groups, g)
				continue
			}
			g.GroupState, g.GroupEpoch, g.AssignmentEpoch, g.Assignor = d.State, d.GroupEpoch, d.AssignmentEpoch, d.Assignor
			if req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = b.authorizedOps(r, acl.ResourceGroup, id)
			}
			topicDenied := false
			for _, m := range d.Members {
				gm := kmsg.NewShareGroupDescribeResponseGroupMember()
				gm.MemberID, gm.RackID, gm.MemberEpoch = m.MemberID, m.RackID, m.MemberEpoch
				gm.ClientID, gm.ClientHost = m.ClientID, m.ClientHost
				gm.SubscribedTopicNames = m.Subscribed
				if gm.SubscribedTopicNames == nil {
					gm.SubscribedTopicNames = []string{}
				}
				for _, tid := range sortedTopicIDKeys(m.Assignment) {
					tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
					tp.TopicID, tp.Partitions = tid, m.Assignment[tid]
					if t, ok := b.topics.getByID(tid); ok {
						tp.Topic = t.Name
						if denied != nil && denied(t.Name) {
							topicDenied = true
						}
					}
					gm.Assignment.TopicPartitions = append(gm.Assignment.TopicPartitions, tp)
				}
				g.Members = append(g.Members, gm)
			}
			if topicDenied {
				g = kmsg.NewShareGroupDescribeResponseGroup()
				g.GroupID = id
				g.ErrorCode = denialError(acl.ResourceTopic).Code
				msg := "The group has described topic(s) that the client is not authorized to describe."
				g.ErrorMessage = &msg
			}
			resp.Groups = append(resp.Groups, g)
		}
		return netio.Reply{Response: resp}
	}}
}
