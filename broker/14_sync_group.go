package broker

// SyncGroup (key 14), v0-v5. The leader sends every member's assignment; followers' requests
// are parked (the reply is deferred) until the leader's arrives and the assignment is durable
// on __consumer_offsets; then each member gets its own assignment: zero-length when the leader
// gave it none, never null. v3+ carries group.instance.id; v5+ the protocol type and name,
// checked against the group's (INCONSISTENT_GROUP_PROTOCOL) and echoed.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 14, min: 0, max: 5, handle: handleSyncGroup})
}

func handleSyncGroup(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.SyncGroupRequest)
	if e := b.authorize(r, acl.OpRead, acl.ResourceGroup, req.Group); e != nil { // ACL: READ on the group
		return netio.Reply{Response: syncGroupDenied(req, r.Version, e)}
	}
	sr := coordinator.SyncRequest{Group: req.Group, Generation: req.Generation, MemberID: req.MemberID}
	if r.Version >= 3 {
		sr.InstanceID = req.InstanceID
	}
	if r.Version >= 5 {
		sr.ProtocolType, sr.Protocol = req.ProtocolType, req.Protocol
	}
	for _, a := range req.GroupAssignment {
		sr.Assignments = append(sr.Assignments, coordinator.Assignment{MemberID: a.MemberID, Assignment: a.MemberAssignment})
	}
	wait := b.groups.coord.Sync(sr)
	version := r.Version
	return netio.Reply{Deferred: func() netio.Reply {
		res := wait(r.Conn.Closing)
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.SetVersion(version)
		resp.MemberAssignment = []byte{}
		if res.Err != nil {
			resp.ErrorCode = res.Err.Code
		} else {
			resp.ProtocolType, resp.Protocol = res.ProtocolType, res.Protocol
			if res.Assignment != nil {
				resp.MemberAssignment = res.Assignment
			}
		}
		return netio.Reply{Response: resp}
	}}
}
