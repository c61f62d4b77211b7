package broker

// FindCoordinator (key 10), v0-v6. Key type 0 (group): the leader of the group's
// __consumer_offsets partition (the topic is created here on first use, as Kafka does); DESCRIBE
// on the group. Key type 1 (transaction): the leader of the transactional id's
// __transaction_state partition (created here on first use: txnstate.go); DESCRIBE on the
// transactional id; an empty id is INVALID_REQUEST as in Kafka. Key type 2 (share, KIP-932):
// the leader of the __share_group_state partition of the key "group:topicId:partition"
// (created here on first use: sharecoord.go); CLUSTER_ACTION on the cluster (brokers ask it for
// their persister, as Kafka's KafkaApis requires); a key not of that form is INVALID_REQUEST.
// Any other type is INVALID_REQUEST. v4+ batches keys in coordinator_keys with a result per key. A key longer than
// Kafka's records can hold is INVALID_GROUP_ID (groups) or INVALID_REQUEST (transactional ids).
// While the topic cannot be created (too few brokers for its replication factor) or a partition
// has no leader, COORDINATOR_NOT_AVAILABLE (clients retry).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/sharecoord"
)

func init() {
	register(apiDef{key: 10, min: 0, max: 6, handle: handleFindCoordinator})
}

func handleFindCoordinator(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.SetVersion(r.Version)
	find := func(key string) (nodeID int32, host string, port int32, err *kerr.Error) {
		var t Topic
		var p int32
		switch req.CoordinatorType {
		case 0:
			if len(key) > 32767 {
				return -1, "", -1, kerr.InvalidGroupID
			}
			if e := b.authorize(r, acl.OpDescribe, acl.ResourceGroup, key); e != nil { // ACL: DESCRIBE on the group
				return -1, "", -1, e
			}
			var e error
			if t, e = b.ensureOffsetsTopic(); e != nil {
				return -1, "", -1, kerr.CoordinatorNotAvailable
			}
			p = b.groups.coord.PartitionFor(key)
		case 1:
			if key == "" || len(key) > 32767 {
				return -1, "", -1, kerr.InvalidRequest
			}
			if e := b.authorize(r, acl.OpDescribe, acl.ResourceTransactionalID, key); e != nil { // ACL: DESCRIBE on the transactional id
				return -1, "", -1, e
			}
			var e error
			if t, e = b.ensureTxnStateTopic(); e != nil {
				return -1, "", -1, kerr.CoordinatorNotAvailable
			}
			p = b.txns.coord.PartitionFor(key)
		case 2:
			if e := b.authorizeCluster(r, acl.OpClusterAction); e != nil { // ACL: CLUSTER_ACTION on the cluster
				return -1, "", -1, kerr.ClusterAuthorizationFailed
			}
			k, e := sharecoord.ParseCoordinatorKey(key)
			if e != nil || len(k.Group) > 32767 {
				return -1, "", -1, kerr.InvalidRequest
			}
			if t, e = b.ensureShareStateTopic(); e != nil {
				return -1, "", -1, kerr.CoordinatorNotAvailable
			}
			p = sharecoord.PartitionFor(k, t.Partitions)
		default:
			return -1, "", -1, kerr.InvalidRequest
		}
		if p >= t.Partitions || p >= int32(len(t.Assign)) {
			return -1, "", -1, kerr.CoordinatorNotAvailable
		}
		leader := t.Assign[p].Leader
		if leader < 0 {
			return -1, "", -1, kerr.CoordinatorNotAvailable
		}
		for _, be := range b.liveBrokers(b.ctl.Image(), r.Conn.Listener) {
			if be.id == leader {
				return be.id, be.host, be.port, nil
			}
		}
		return -1, "", -1, kerr.CoordinatorNotAvailable
	}
	if r.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			var err *kerr.Error
			c.NodeID, c.Host, c.Port, err = find(key)
			if err != nil {
				c.ErrorCode = err.Code
				msg := err.Message
				c.ErrorMessage = &msg
			}
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return netio.Reply{Response: resp}
	}
	var err *kerr.Error
	resp.NodeID, resp.Host, resp.Port, err = find(req.CoordinatorKey)
	if err != nil {
		resp.ErrorCode = err.Code
		msg := err.Message
		resp.ErrorMessage = &msg
	}
	return netio.Reply{Response: resp}
}
