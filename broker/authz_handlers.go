package broker

// The per-API authorization rules that need more than one authorize call (authz.go), kept
// here so each handler's check stays a short, separate call.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

// topicNameOf is the name to authorize a topic by: the resolved name when the request named
// it by id.
func topicNameOf(requested, resolved string, byID bool) string {
	if byID {
		return resolved
	}
	return requested
}

// allDenied denies every topic.
func allDenied(string) bool { return true }

// fetchDenied tells the topics a Fetch may not read: a replica's fetch (replica id >= 0) needs
// CLUSTER_ACTION on the cluster (else every partition is TOPIC_AUTHORIZATION_FAILED), a
// consumer's READ on each topic. Nil when nothing is denied.
func (b *Broker) fetchDenied(r *netio.Request, req *kmsg.FetchRequest) func(string) bool {
	if b.authorizer() == nil {
		return nil
	}
	replicaID := req.ReplicaID
	if r.Version >= 15 {
		replicaID = req.ReplicaState.ID
	}
	if replicaID >= 0 {
		if b.authorized(r, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName) {
			return nil
		}
		return allDenied
	}
	return b.topicDenied(r, acl.OpRead)
}

// clusterActionOrTopicDenied tells the topics an OffsetForLeaderEpoch may not ask about:
// CLUSTER_ACTION on the cluster (followers) allows all, else DESCRIBE on each topic
// (consumers, KIP-320).
func (b *Broker) clusterActionOrTopicDenied(r *netio.Request) func(string) bool {
	if b.authorizer() == nil || b.authorized(r, acl.OpClusterAction, acl.ResourceCluster, acl.ClusterName) {
		return nil
	}
	return b.topicDenied(r, acl.OpDescribe)
}

// authorizeCreateTopic checks CREATE on the cluster or on the topic (CreateTopics, Metadata's
// auto-creation).
func (b *Broker) authorizeCreateTopic(r *netio.Request, topic string) *kerr.Error {
	if b.authorized(r, acl.OpCreate, acl.ResourceCluster, acl.ClusterName) {
		return nil
	}
	return b.authorize(r, acl.OpCreate, acl.ResourceTopic, topic)
}

// authorizeConfigResource checks op (DESCRIBE_CONFIGS, ALTER_CONFIGS) on a config resource: a
// topic, or the cluster for broker (and broker logger) resources.
func (b *Broker) authorizeConfigResource(r *netio.Request, op acl.Operation, rt kmsg.ConfigResourceType, name string) *kerr.Error {
	if rt == kmsg.ConfigResourceTypeTopic {
		return b.authorize(r, op, acl.ResourceTopic, name)
	}
	if rt == kmsg.ConfigResourceTypeGroupConfig {
		return b.authorize(r, op, acl.ResourceGroup, name)
	}
	return b.authorizeCluster(r, op)
}

// authorizeIdempotentProducer checks InitProducerId without a transactional id:
// IDEMPOTENT_WRITE on the cluster, or WRITE on any topic (KIP-679); CLUSTER_AUTHORIZATION_FAILED.
func (b *Broker) authorizeIdempotentProducer(r *netio.Request) *kerr.Error {
	if b.authorized(r, acl.OpIdempotentWrite, acl.ResourceCluster, acl.ClusterName) ||
		b.authorizedAny(r, acl.OpWrite, acl.ResourceTopic) {
		return nil
	}
	return kerr.ClusterAuthorizationFailed
}

// listGroupsDenied tells the groups ListGroups hides: none with DESCRIBE on the cluster, else
// those without DESCRIBE on the group.
func (b *Broker) listGroupsDenied(r *netio.Request) func(group string) bool {
	az := b.authorizer()
	if az == nil || b.authorized(r, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName) {
		return nil
	}
	principal, host := b.principal(r), remoteIP(r)
	return func(g string) bool { return !az.Authorize(principal, host, acl.OpDescribe, acl.ResourceGroup, g) }
}

// authzOffsetFetchTopics applies OffsetFetch's topic rule (DESCRIBE on the topic) to one group's
// answer: requested topics the principal may not describe answer TOPIC_AUTHORIZATION_FAILED;
// when every committed offset was asked for, they are left out.
func authzOffsetFetchTopics(rg *kmsg.OffsetFetchResponseGroup, denied func(string) bool, all bool) {
	if denied == nil {
		return
	}
	kept := rg.Topics[:0]
	for _, t := range rg.Topics {
		if !denied(t.Topic) {
			kept = append(kept, t)
			continue
		}
		if all {
			continue
		}
		for i := range t.Partitions {
			p := &t.Partitions[i]
			p.Offset, p.LeaderEpoch, p.Metadata = -1, -1, nil
			p.ErrorCode = kerr.TopicAuthorizationFailed.Code
		}
		kept = append(kept, t)
	}
	rg.Topics = kept
}

// metadataDeniedTopic is Metadata's answer for a topic the principal may not describe (by
// name) or create (auto-creation): TOPIC_AUTHORIZATION_FAILED. Named by id, the name stays
// null (ids are not sensitive, names are).
func metadataDeniedTopic(name *string, id [16]byte, e *kerr.Error) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = name, id
	mt.ErrorCode = e.Code
	return mt
}

// metadataAuthorizedOps fills the authorized operations Metadata v8+ asks for: each described
// topic's, and (v8-v10) the cluster's (0 without DESCRIBE on the cluster).
func (b *Broker) metadataAuthorizedOps(r *netio.Request, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if r.Version < 8 {
		return
	}
	if req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			if t := &resp.Topics[i]; t.ErrorCode == 0 && t.Topic != nil {
				t.AuthorizedOperations = b.authorizedOps(r, acl.ResourceTopic, *t.Topic)
			}
		}
	}
	if req.IncludeClusterAuthorizedOperations && r.Version <= 10 {
		resp.AuthorizedOperations = b.clusterAuthorizedOps(r)
	}
}

// clusterAuthorizedOps is the cluster's authorized-operations field: 0 without DESCRIBE on
// the cluster, as Kafka answers.
func (b *Broker) clusterAuthorizedOps(r *netio.Request) int32 {
	if !b.authorized(r, acl.OpDescribe, acl.ResourceCluster, acl.ClusterName) {
		return 0
	}
	return b.authorizedOps(r, acl.ResourceCluster, acl.ClusterName)
}

// joinGroupDenied is JoinGroup's answer without READ on the group.
func joinGroupDenied(req *kmsg.JoinGroupRequest, version int16, e *kerr.Error) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.SetVersion(version)
	resp.ErrorCode = e.Code
	resp.Generation = -1
	resp.MemberID = req.MemberID
	if version < 7 {
		empty := ""
		resp.Protocol = &empty // a plain string before v7
	}
	return resp
}

// syncGroupDenied is SyncGroup's answer without READ on the group.
func syncGroupDenied(req *kmsg.SyncGroupRequest, version int16, e *kerr.Error) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.SetVersion(version)
	resp.ErrorCode = e.Code
	resp.MemberAssignment = []byte{}
	return resp
}

// describeGroupDenied is DescribeGroups' entry for a group without DESCRIBE.
func describeGroupDenied(id string, e *kerr.Error) kmsg.DescribeGroupsResponseGroup {
	g := kmsg.NewDescribeGroupsResponseGroup()
	g.Group, g.ErrorCode = id, e.Code
	return g
}

// deleteTopicDenied reports whether DeleteTopics may not delete the topic ref names (DELETE
// on the topic; an unknown id is left to the deletion, which answers UNKNOWN_TOPIC_ID).
func (b *Broker) deleteTopicDenied(r *netio.Request, ref deleteTopicRef) bool {
	if b.authorizer() == nil {
		return false
	}
	name := ""
	if ref.name != nil {
		name = *ref.name
	} else if t, ok := b.topics.getByID(ref.id); ok {
		name = t.Name
	} else {
		return false
	}
	return !b.authorized(r, acl.OpDelete, acl.ResourceTopic, name)
}
