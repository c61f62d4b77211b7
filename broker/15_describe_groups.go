package broker

// DescribeGroups (key 15), v0-v6. Per group: state, protocol type, and the members with client
// id and host; the selected protocol, each member's metadata and assignment only when the group
// is Stable (as Kafka). A group that does not exist, or is not a classic group (a KIP-848
// consumer group or a share group: ConsumerGroupDescribe and ShareGroupDescribe describe those),
// is described as Dead with no error up to v5; v6 (KIP-1043) answers it GROUP_ID_NOT_FOUND with
// Kafka's message ("Group X not found." / "Group X is not a classic group."). v3+ may ask for
// authorized operations: the principal's operations on the group (ACLs; every group operation
// with the authorizer off). A group the principal may not DESCRIBE answers
// GROUP_AUTHORIZATION_FAILED. v4+ lists group.instance.id.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 15, min: 0, max: 6, handle: handleDescribeGroups})
}

func handleDescribeGroups(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	resp.SetVersion(r.Version)
	for _, id := range req.Groups {
		if e := b.authorize(r, acl.OpDescribe, acl.ResourceGroup, id); e != nil { // ACL: DESCRIBE on the group
			resp.Groups = append(resp.Groups, describeGroupDenied(id, e))
			continue
		}
		d := b.groups.coord.Describe(id)
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.State, g.ProtocolType, g.Protocol = id, d.State, d.ProtocolType, d.Protocol
		switch {
		case d.Err != nil:
			g.ErrorCode = d.Err.Code
		case d.NotFound != "" && r.Version >= 6:
			g.ErrorCode = kerr.GroupIDNotFound.Code
			msg := d.NotFound
			g.ErrorMessage = &msg
		}
		if req.IncludeAuthorizedOperations && g.ErrorCode == 0 { // as KafkaApis: only for a group described without error
			g.AuthorizedOperations = b.authorizedOps(r, acl.ResourceGroup, id)
		}
		for _, m := range d.Members {
			gm := kmsg.NewDescribeGroupsResponseGroupMember()
			gm.MemberID, gm.InstanceID, gm.ClientID, gm.ClientHost = m.MemberID, m.InstanceID, m.ClientID, m.ClientHost
			gm.ProtocolMetadata, gm.MemberAssignment = m.Metadata, m.Assignment
			if gm.ProtocolMetadata == nil {
				gm.ProtocolMetadata = []byte{}
			}
			if gm.MemberAssignment == nil {
				gm.MemberAssignment = []byte{}
			}
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return netio.Reply{Response: resp}
}
