package broker

// Heartbeat (key 12), v0-v4. Keeps a member's session alive; answers REBALANCE_IN_PROGRESS while
// the group prepares a rebalance (the member must rejoin), ILLEGAL_GENERATION for a stale
// generation, UNKNOWN_MEMBER_ID for a member the group does not know (or an unknown group),
// FENCED_INSTANCE_ID (v3+) when another member holds the group.instance.id.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 12, min: 0, max: 4, handle: handleHeartbeat})
}

func handleHeartbeat(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.SetVersion(r.Version)
	if e := b.authorize(r, acl.OpRead, acl.ResourceGroup, req.Group); e != nil { // ACL: READ on the group
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	hr := coordinator.HeartbeatRequest{Group: req.Group, Generation: req.Generation, MemberID: req.MemberID}
	if r.Version >= 3 {
		hr.InstanceID = req.InstanceID
	}
	if err := b.groups.coord.Heartbeat(hr); err != nil {
		resp.ErrorCode = err.Code
	}
	return netio.Reply{Response: resp}
}
