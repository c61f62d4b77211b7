package broker

// LeaveGroup (key 13), v0-v5. v0-v2 name one member; v3+ a batch of members, each by member id
// or (static members, administratively) by group.instance.id alone, with an error per member;
// v5+ a reason per member. A stable group rebalances without the members that left.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 13, min: 0, max: 5, handle: handleLeaveGroup})
}

func handleLeaveGroup(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	resp.SetVersion(r.Version)
	if e := b.authorize(r, acl.OpRead, acl.ResourceGroup, req.Group); e != nil { // ACL: READ on the group
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	var members []coordinator.LeaveMember
	if r.Version < 3 {
		members = []coordinator.LeaveMember{{MemberID: req.MemberID}}
	} else {
		for _, m := range req.Members {
			lm := coordinator.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID}
			if m.Reason != nil {
				lm.Reason = *m.Reason
			}
			members = append(members, lm)
		}
	}
	res := b.groups.coord.Leave(req.Group, members)
	if res.Err != nil {
		resp.ErrorCode = res.Err.Code
		return netio.Reply{Response: resp}
	}
	if r.Version < 3 {
		if len(res.Members) == 1 && res.Members[0] != nil {
			resp.ErrorCode = res.Members[0].Code
		}
		return netio.Reply{Response: resp}
	}
	for i, m := range req.Members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
		if e := res.Members[i]; e != nil {
			rm.ErrorCode = e.Code
		}
		resp.Members = append(resp.Members, rm)
	}
	return netio.Reply{Response: resp}
}
