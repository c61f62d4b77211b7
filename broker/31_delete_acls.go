package broker

// DeleteAcls (key 31), v1-v3 (Kafka 4 removed v0; v1 adds the pattern type, v2+ flexible).
// The caller needs ALTER on the cluster (every result CLUSTER_AUTHORIZATION_FAILED); with the
// authorizer off every result is SECURITY_DISABLED. Each filter (INVALID_REQUEST when a field
// is UNKNOWN) answers the bindings it matched; all of them are removed from the metadata log
// in one change.

import (
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 31, min: 1, max: 3, handle: handleDeleteACLs})
}

func handleDeleteACLs(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.SetVersion(r.Version)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	setAll := func(e *kerr.Error, msg string) netio.Reply {
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
			resp.Results[i].ErrorCode = e.Code
			resp.Results[i].ErrorMessage = &msg
		}
		return netio.Reply{Response: resp}
	}
	if err := b.authorizeCluster(r, acl.OpAlter); err != nil {
		return setAll(err, "deleting ACLs needs ALTER on the cluster")
	}
	az := b.authorizer()
	if az == nil {
		return setAll(kerr.SecurityDisabled, "no authorizer is configured (authorizer.class.name)")
	}
	var deletes []string
	seen := map[string]bool{}
	var matchedAny []int
	for i, rf := range req.Filters {
		res := &resp.Results[i]
		*res = kmsg.NewDeleteACLsResponseResult()
		f := acl.Filter{ResourceType: acl.ResourceType(rf.ResourceType), Name: rf.ResourceName,
			Pattern: acl.PatternType(rf.ResourcePatternType), Principal: rf.Principal, Host: rf.Host,
			Operation: acl.Operation(rf.Operation), Permission: acl.Permission(rf.PermissionType)}
		if err := f.Validate(); err != nil {
			res.ErrorCode = kerr.InvalidRequest.Code
			msg := err.Error()
			res.ErrorMessage = &msg
			continue
		}
		var matched []acl.Binding
		for _, bd := range az.Bindings() {
			if f.Matches(bd) {
				matched = append(matched, bd)
			}
		}
		sortBindings(matched)
		for _, bd := range matched {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType = kmsg.ACLResourceType(bd.ResourceType)
			m.ResourceName = bd.Name
			m.ResourcePatternType = kmsg.ACLResourcePatternType(bd.Pattern)
			m.Principal, m.Host = bd.Principal, bd.Host
			m.Operation = kmsg.ACLOperation(bd.Operation)
			m.PermissionType = kmsg.ACLPermissionType(bd.Permission)
			res.MatchingACLs = append(res.MatchingACLs, m)
			if k := bd.Key(); !seen[k] {
				seen[k] = true
				deletes = append(deletes, k)
				slog.Info("deleting ACL", "acl", bd.String(), "by", b.principal(r))
			}
		}
		if len(matched) > 0 {
			matchedAny = append(matchedAny, i)
		}
	}
	if len(deletes) == 0 {
		return netio.Reply{Response: resp}
	}
	ctx, cancel := b.requestCtx()
	defer cancel()
	if err := b.ctl.PutRecords(ctx, aclRecordKind, nil, deletes); err != nil {
		msg := fmt.Sprintf("removing ACLs: %v", err)
		code := errorCode(err)
		for _, i := range matchedAny {
			resp.Results[i].ErrorCode = code
			resp.Results[i].ErrorMessage = &msg
			resp.Results[i].MatchingACLs = nil
		}
	}
	return netio.Reply{Response: resp}
}
