package broker

// JoinGroup (key 11), v0-v9 (Kafka 4.0 removed v0-v1 and 4.1 restored them). v0 has no
// rebalance timeout (the session timeout serves); v4+ sends a new dynamic member
// MEMBER_ID_REQUIRED with the id to rejoin with; v5+ carries group.instance.id (static
// membership, KIP-345); v7+ echoes the protocol type; v8+ a reason; v9+ lets a static leader
// rejoining a stable group skip the assignment (KIP-814). The request registers the member at
// once; the reply is deferred until the join phase completes (the connection's writer waits),
// and only the leader's carries the members and their metadata.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 11, min: 0, max: 9, handle: handleJoinGroup})
}

func handleJoinGroup(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.JoinGroupRequest)
	if e := b.authorize(r, acl.OpRead, acl.ResourceGroup, req.Group); e != nil { // ACL: READ on the group
		return netio.Reply{Response: joinGroupDenied(req, r.Version, e)}
	}
	jr := coordinator.JoinRequest{
		Group: req.Group, MemberID: req.MemberID, ClientID: r.ClientID, ClientHost: clientHost(r.Conn.Remote),
		SessionTimeoutMs: req.SessionTimeoutMillis, RebalanceTimeoutMs: req.SessionTimeoutMillis,
		ProtocolType:           req.ProtocolType,
		RequireKnownMemberID:   r.Version >= 4,
		SupportsSkipAssignment: r.Version >= 9,
	}
	if r.Version >= 1 {
		jr.RebalanceTimeoutMs = req.RebalanceTimeoutMillis
	}
	if r.Version >= 5 {
		jr.InstanceID = req.InstanceID
	}
	if req.Reason != nil {
		jr.Reason = *req.Reason
	}
	for _, p := range req.Protocols {
		jr.Protocols = append(jr.Protocols, coordinator.Protocol{Name: p.Name, Metadata: p.Metadata})
	}
	wait := b.groups.coord.Join(jr)
	version := r.Version
	return netio.Reply{Deferred: func() netio.Reply {
		res := wait(r.Conn.Closing)
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.SetVersion(version)
		resp.Generation = res.Generation
		resp.LeaderID = res.Leader
		resp.MemberID = res.MemberID
		resp.SkipAssignment = res.SkipAssignment
		if res.Err != nil {
			resp.ErrorCode = res.Err.Code
		} else {
			resp.ProtocolType = res.ProtocolType
			resp.Protocol = res.Protocol
		}
		if version < 7 && resp.Protocol == nil {
			empty := ""
			resp.Protocol = &empty // a plain string before v7
		}
		for _, m := range res.Members {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID, rm.InstanceID, rm.ProtocolMetadata = m.MemberID, m.InstanceID, m.Metadata
			resp.Members = append(resp.Members, rm)
		}
		return netio.Reply{Response: resp}
	}}
}
