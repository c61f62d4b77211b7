package broker

// FindCoordinator (key 10), v0-v6. Key type 0 (group): this broker coordinates every group (a
// single broker leads every partition of __consumer_offsets, which is created here on first
// use, as Kafka does). v4+ batches keys in coordinator_keys with a result per key. Key type 1
// (transaction) answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as InitProducerId does for a
// transactional id: weir has no transaction coordinator, and a non-retriable error makes
// transactional clients fail fast instead of retrying until their timeout; any
// other type is INVALID_REQUEST. A group id longer than Kafka's records can hold is
// INVALID_GROUP_ID.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 10, min: 0, max: 6, handle: handleFindCoordinator})
}

func handleFindCoordinator(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.SetVersion(r.Version)
	find := func(key string) (nodeID int32, host string, port int32, err *kerr.Error) {
		switch req.CoordinatorType {
		case 0:
		case 1:
			// Not retriable, unlike COORDINATOR_NOT_AVAILABLE: a transactional client fails at
			// once with a clear error instead of retrying until its timeout.
			return -1, "", -1, kerr.TransactionalIDAuthorizationFailed
		default:
			return -1, "", -1, kerr.InvalidRequest
		}
		if len(key) > 32767 {
			return -1, "", -1, kerr.InvalidGroupID
		}
		if e := b.authorize(r, acl.OpDescribe, acl.ResourceGroup, key); e != nil { // ACL: DESCRIBE on the group
			return -1, "", -1, e
		}
		t, e := b.ensureOffsetsTopic()
		if e != nil {
			return -1, "", -1, kerr.CoordinatorNotAvailable
		}
		p := b.groups.coord.PartitionFor(key)
		if p >= t.Partitions {
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
