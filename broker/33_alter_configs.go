package broker

// AlterConfigs (key 33), v0-v2 (v1 is v0, v2 is flexible): the legacy, non-incremental form.
// Each resource's configs become its whole set of overrides: keys not named return to their
// inherited values. Resources, validation, errors and persistence are IncrementalAlterConfigs'
// (44_incremental_alter_configs.go) with every named key a SET; a null value is INVALID_REQUEST.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 33, min: 0, max: 2, handle: handleAlterConfigs})
}

func handleAlterConfigs(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	resp.SetVersion(r.Version)
	dup := duplicateResources(len(req.Resources), func(i int) (kmsg.ConfigResourceType, string) {
		return req.Resources[i].ResourceType, req.Resources[i].ResourceName
	})
	for i, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		changes := make([]configChange, 0, len(rr.Configs))
		for _, c := range rr.Configs {
			changes = append(changes, configChange{name: c.Name, op: kmsg.IncrementalAlterConfigOpSet, value: c.Value})
		}
		if e := b.authorizeConfigResource(r, acl.OpAlterConfigs, rr.ResourceType, rr.ResourceName); e != nil { // ACL: ALTER_CONFIGS
			sr.ErrorCode = e.Code
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		sr.ErrorCode, sr.ErrorMessage = b.alterResource(dup[i], rr.ResourceType, rr.ResourceName, changes, true, req.ValidateOnly)
		resp.Resources = append(resp.Resources, sr)
	}
	return netio.Reply{Response: resp}
}
