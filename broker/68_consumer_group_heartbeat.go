package broker

// ConsumerGroupHeartbeat (key 68), v0-v1: KIP-848 consumer groups (coordinator/consumer.go).
// v0 lets the coordinator generate a member id on the first heartbeat; v1 requires the client's
// own (and adds SubscribedTopicRegex, resolved on the broker with RE2/J's full-match
// semantics). Authorized as Kafka's KafkaApis does: READ on the group (else
// GROUP_AUTHORIZATION_FAILED), DESCRIBE on every subscribed topic name (else
// TOPIC_AUTHORIZATION_FAILED naming them). A regex resolves only to topics the principal of the
// heartbeat that triggered its resolution may DESCRIBE (Kafka 4.x, KAFKA-18813; the group
// coordinator's cgResolveRegexes says when a resolution is triggered). With group.version finalized below 1 the API answers
// UNSUPPORTED_VERSION, as Kafka does when the consumer rebalance protocol is off. The reply
// waits until the records the heartbeat wrote are durable.

import (
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 68, min: 0, max: 1, handle: handleConsumerGroupHeartbeat})
}

func handleConsumerGroupHeartbeat(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.SetVersion(r.Version)
	fail := func(e *kerr.Error, msg string) netio.Reply {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return netio.Reply{Response: resp}
	}
	if b.finalizedLevel(b.ctl.Image(), groupVersionFeature) < 1 {
		return fail(kerr.UnsupportedVersion, "The consumer rebalance protocol is disabled (group.version is 0).")
	}
	if e := b.authorize(r, acl.OpRead, acl.ResourceGroup, req.Group); e != nil { // ACL: READ on the group
		return fail(e, "")
	}
	if len(req.SubscribedTopicNames) > 0 {
		if denied := b.topicDenied(r, acl.OpDescribe); denied != nil { // ACL: DESCRIBE on each topic
			var bad []string
			for _, t := range req.SubscribedTopicNames {
				if denied(t) {
					bad = append(bad, t)
				}
			}
			if len(bad) > 0 {
				sort.Strings(bad)
				return fail(kerr.TopicAuthorizationFailed, "The group has subscribed to topics that it is not authorized to describe: ["+strings.Join(bad, ", ")+"]")
			}
		}
	}
	hr := coordinator.ConsumerHeartbeatRequest{
		Group: req.Group, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch,
		InstanceID: req.InstanceID, RackID: req.RackID, RebalanceTimeoutMs: req.RebalanceTimeoutMillis,
		SubscribedTopicNames: req.SubscribedTopicNames, ServerAssignor: req.ServerAssignor,
		ClientID: r.ClientID, ClientHost: clientHost(r.Conn.Remote), Version: r.Version,
	}
	if r.Version >= 1 {
		hr.SubscribedTopicRegex = req.SubscribedTopicRegex
	}
	if denied := b.topicDenied(r, acl.OpDescribe); denied != nil {
		// A regex refresh this heartbeat triggers keeps the topics this principal may DESCRIBE.
		hr.CanDescribe = func(topic string) bool { return !denied(topic) }
	}
	if req.Topics != nil {
		hr.OwnedTopics = make([]coordinator.ConsumerTopicPartitions, 0, len(req.Topics))
		for _, t := range req.Topics {
			hr.OwnedTopics = append(hr.OwnedTopics, coordinator.ConsumerTopicPartitions{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	wait := b.groups.coord.ConsumerHeartbeat(hr)
	return netio.Reply{Deferred: func() netio.Reply {
		res := wait()
		if res.Err != nil {
			return fail(res.Err, res.ErrMessage)
		}
		id := res.MemberID
		resp.MemberID = &id
		resp.MemberEpoch = res.MemberEpoch
		resp.HeartbeatIntervalMillis = res.HeartbeatIntervalMs
		if res.HasAssign {
			a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
			a.Topics = make([]kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic, 0, len(res.Assignment))
			for _, t := range res.Assignment {
				at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
				at.TopicID, at.Partitions = t.TopicID, t.Partitions
				a.Topics = append(a.Topics, at)
			}
			resp.Assignment = &a
		}
		return netio.Reply{Response: resp}
	}}
}
