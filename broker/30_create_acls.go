package broker

// CreateAcls (key 30), v1-v3 (Kafka 4 removed v0; v1 adds the pattern type, v2+ flexible).
// The caller needs ALTER on the cluster (every result CLUSTER_AUTHORIZATION_FAILED); with the
// authorizer off every result is SECURITY_DISABLED. Each creation is validated (concrete
// resource type, LITERAL or PREFIXED, a non-empty name, "type:name" principal, a host,
// a concrete operation, ALLOW or DENY; INVALID_REQUEST otherwise); the valid ones are written
// to the metadata log in one change, so they reach every broker together and survive
// restarts. Creating a binding that exists succeeds and changes nothing.

import (
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 30, min: 1, max: 3, handle: handleCreateACLs})
}

func handleCreateACLs(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.SetVersion(r.Version)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	setAll := func(e *kerr.Error, msg string) netio.Reply {
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewCreateACLsResponseResult()
			resp.Results[i].ErrorCode = e.Code
			resp.Results[i].ErrorMessage = &msg
		}
		return netio.Reply{Response: resp}
	}
	if err := b.authorizeCluster(r, acl.OpAlter); err != nil {
		return setAll(err, "creating ACLs needs ALTER on the cluster")
	}
	if b.authorizer() == nil {
		return setAll(kerr.SecurityDisabled, "no authorizer is configured (authorizer.class.name)")
	}
	puts := map[string]string{}
	var created []int
	for i, c := range req.Creations {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		bd := acl.Binding{ResourceType: acl.ResourceType(c.ResourceType), Name: c.ResourceName,
			Pattern: acl.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)}
		if err := bd.Validate(); err != nil {
			resp.Results[i].ErrorCode = kerr.InvalidRequest.Code
			msg := err.Error()
			resp.Results[i].ErrorMessage = &msg
			continue
		}
		puts[bd.Key()] = bd.Encode()
		created = append(created, i)
		slog.Info("creating ACL", "acl", bd.String(), "by", b.principal(r))
	}
	if len(puts) == 0 {
		return netio.Reply{Response: resp}
	}
	ctx, cancel := b.requestCtx()
	defer cancel()
	if err := b.ctl.PutRecords(ctx, aclRecordKind, puts, nil); err != nil {
		msg := fmt.Sprintf("storing ACLs: %v", err)
		code := errorCode(err)
		for _, i := range created {
			resp.Results[i].ErrorCode = code
			resp.Results[i].ErrorMessage = &msg
		}
	}
	return netio.Reply{Response: resp}
}
