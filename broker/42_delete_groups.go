package broker

// DeleteGroups (key 42), v0-v2. Only an empty group (no members) can be deleted
// (NON_EMPTY_GROUP otherwise; GROUP_ID_NOT_FOUND for an unknown one): tombstones for its offsets
// and its metadata go to __consumer_offsets and the reply waits until they are durable.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 42, min: 0, max: 3, handle: handleDeleteGroups})
}

func handleDeleteGroups(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.SetVersion(r.Version)
	waits := make([]func() *kerr.Error, len(req.Groups))
	for i, g := range req.Groups {
		if e := b.authorize(r, acl.OpDelete, acl.ResourceGroup, g); e != nil { // ACL: DELETE on the group
			waits[i] = func() *kerr.Error { return e }
			continue
		}
		waits[i] = b.groups.coord.DeleteGroup(g)
	}
	return netio.Reply{Deferred: func() netio.Reply {
		for i, g := range req.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group = g
			if err := waits[i](); err != nil {
				rg.ErrorCode = err.Code
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return netio.Reply{Response: resp}
	}}
}
