package broker

// ListGroups (key 16), v0-v5. Every group this broker coordinates, with its protocol type; v4+
// filters by state and answers each group's state, v5+ filters by type ("classic", or "share"
// for a KIP-932 share group, whose protocol type is "share") and answers it. Filters are case-insensitive; an empty filter
// matches everything. COORDINATOR_LOAD_IN_PROGRESS while __consumer_offsets is loading.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 16, min: 0, max: 5, handle: handleListGroups})
}

func handleListGroups(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	resp.SetVersion(r.Version)
	var states, types []string
	if r.Version >= 4 {
		states = req.StatesFilter
	}
	if r.Version >= 5 {
		types = req.TypesFilter
	}
	groups, err := b.groups.coord.List(states, types)
	if err != nil {
		resp.ErrorCode = err.Code
		return netio.Reply{Response: resp}
	}
	denied := b.listGroupsDenied(r) // ACL: DESCRIBE on the cluster, or on each group listed
	for _, g := range groups {
		if denied != nil && denied(g.Group) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Group, g.ProtocolType, g.State, g.Type
		resp.Groups = append(resp.Groups, lg)
	}
	return netio.Reply{Response: resp}
}
