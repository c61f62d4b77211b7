package broker

// ShareGroupHeartbeat (key 76), v1 (Kafka 4.1+; v0 was Kafka 4.0's early access, which Kafka
// no longer serves). A KIP-932 share group member joins (epoch 0, with its client-generated
// member id and its subscribed topics), heartbeats, and leaves (epoch -1); the answer carries
// its member epoch, the heartbeat interval and, when it changed, its assignment (topic ids and
// partitions). As Kafka's KafkaApis: READ on the group (GROUP_AUTHORIZATION_FAILED), a member id
// of 1 to 36 characters (INVALID_REQUEST), then DESCRIBE on every subscribed topic
// (TOPIC_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 76, min: 1, max: 1, handle: handleShareGroupHeartbeat})
}

func handleShareGroupHeartbeat(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	resp.SetVersion(r.Version)
	if e := b.authorize(r, acl.OpRead, acl.ResourceGroup, req.GroupID); e != nil { // ACL: READ on the group
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	if n := javaLength(req.MemberID); n == 0 || n > 36 { // KafkaApis.isMemberIdValid
		resp.ErrorCode = kerr.InvalidRequest.Code
		msg := "Invalid member id in the request."
		resp.ErrorMessage = &msg
		return netio.Reply{Response: resp}
	}
	if denied := b.topicDenied(r, acl.OpDescribe); denied != nil { // ACL: DESCRIBE on each subscribed topic
		for _, t := range req.SubscribedTopicNames {
			if denied(t) {
				resp.ErrorCode = denialError(acl.ResourceTopic).Code
				msg := "The group has subscribed topic(s) that the client is not authorized to describe."
				resp.ErrorMessage = &msg
				return netio.Reply{Response: resp}
			}
		}
	}
	hr := coordinator.ShareHeartbeatRequest{
		Group: req.GroupID, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch, RackID: req.RackID,
		Subscribed: req.SubscribedTopicNames, ClientID: r.ClientID, ClientHost: clientHost(r.Conn.Remote),
	}
	return netio.Reply{Deferred: func() netio.Reply {
		res := b.groups.coord.ShareHeartbeat(hr)
		resp.MemberID = &res.MemberID
		resp.MemberEpoch = res.MemberEpoch
		resp.HeartbeatIntervalMillis = res.HeartbeatIntervalMs
		if res.Err != nil {
			resp.ErrorCode = res.Err.Code
			if res.ErrMessage != "" {
				msg := res.ErrMessage
				resp.ErrorMessage = &msg
			}
			return netio.Reply{Response: resp}
		}
		if res.HasAssignment {
			a := kmsg.NewShareGroupHeartbeatResponseAssignment()
			for _, id := range sortedTopicIDKeys(res.Assignment) {
				tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
				tp.TopicID, tp.Partitions = id, res.Assignment[id]
				a.TopicPartitions = append(a.TopicPartitions, tp)
			}
			resp.Assignment = &a
		}
		return netio.Reply{Response: resp}
	}}
}

// sortedTopicIDKeys returns m's topic ids in byte order (stable answers).
func sortedTopicIDKeys(m map[[16]byte][]int32) [][16]byte {
	ids := make([][16]byte, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && string(ids[j][:]) < string(ids[j-1][:]); j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
	return ids
}

// javaLength is the length of s as Java's String.length counts it (UTF-16 code units; an
// invalid UTF-8 byte decodes to one replacement character).
func javaLength(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}
