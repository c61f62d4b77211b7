package broker

// DescribeAcls (key 29), v1-v3 (Kafka 4 removed v0; v1 adds the pattern type, v2+ flexible).
// The caller needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED); with the authorizer
// off the answer is SECURITY_DISABLED. A filter with an UNKNOWN resource type, pattern type,
// operation or permission is INVALID_REQUEST. Matching bindings are grouped by resource
// pattern, sorted.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 29, min: 1, max: 3, handle: handleDescribeACLs})
}

func handleDescribeACLs(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.SetVersion(r.Version)
	fail := func(e *kerr.Error, msg string) netio.Reply {
		resp.ErrorCode = e.Code
		resp.ErrorMessage = &msg
		return netio.Reply{Response: resp}
	}
	if err := b.authorizeCluster(r, acl.OpDescribe); err != nil {
		return fail(err, "describing ACLs needs DESCRIBE on the cluster")
	}
	az := b.authorizer()
	if az == nil {
		return fail(kerr.SecurityDisabled, "no authorizer is configured (authorizer.class.name)")
	}
	f := acl.Filter{ResourceType: acl.ResourceType(req.ResourceType), Name: req.ResourceName,
		Pattern: acl.PatternType(req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: acl.Operation(req.Operation), Permission: acl.Permission(req.PermissionType)}
	if err := f.Validate(); err != nil {
		return fail(kerr.InvalidRequest, err.Error())
	}
	var matched []acl.Binding
	for _, bd := range az.Bindings() {
		if f.Matches(bd) {
			matched = append(matched, bd)
		}
	}
	sortBindings(matched)
	for i := 0; i < len(matched); {
		bd := matched[i]
		res := kmsg.NewDescribeACLsResponseResource()
		res.ResourceType = kmsg.ACLResourceType(bd.ResourceType)
		res.ResourceName = bd.Name
		res.ResourcePatternType = kmsg.ACLResourcePatternType(bd.Pattern)
		for ; i < len(matched) && sameResource(matched[i], bd); i++ {
			a := kmsg.NewDescribeACLsResponseResourceACL()
			a.Principal, a.Host = matched[i].Principal, matched[i].Host
			a.Operation = kmsg.ACLOperation(matched[i].Operation)
			a.PermissionType = kmsg.ACLPermissionType(matched[i].Permission)
			res.ACLs = append(res.ACLs, a)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return netio.Reply{Response: resp}
}

func sameResource(a, b acl.Binding) bool {
	return a.ResourceType == b.ResourceType && a.Pattern == b.Pattern && a.Name == b.Name
}

// sortBindings orders bindings by resource pattern, then principal, host, operation and
// permission.
func sortBindings(bs []acl.Binding) {
	sort.Slice(bs, func(i, j int) bool {
		a, b := bs[i], bs[j]
		switch {
		case a.ResourceType != b.ResourceType:
			return a.ResourceType < b.ResourceType
		case a.Pattern != b.Pattern:
			return a.Pattern < b.Pattern
		case a.Name != b.Name:
			return a.Name < b.Name
		case a.Principal != b.Principal:
			return a.Principal < b.Principal
		case a.Host != b.Host:
			return a.Host < b.Host
		case a.Operation != b.Operation:
			return a.Operation < b.Operation
		}
		return a.Permission < b.Permission
	})
}
