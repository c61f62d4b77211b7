package broker

// DescribeClientQuotas (key 48), v0-v1 (v1 flexible), as Kafka 4.4 serves it (KIP-546). The
// filter is a list of components (entity type; match EXACT name, DEFAULT, or SPECIFIED = any
// non-default name); non-strict: every entity that matches each component, whatever other
// types it has; strict: only entities of exactly the filter's types. INVALID_REQUEST for an
// entity type other than user, client-id and ip, a type named twice, an unknown match type, an
// EXACT match without a name, or ip combined with user or client-id (weir keeps no ip quotas,
// so an ip filter matches nothing). Needs DESCRIBE_CONFIGS on the cluster
// (CLUSTER_AUTHORIZATION_FAILED otherwise), as Kafka.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 48, min: 0, max: 1, handle: handleDescribeClientQuotas})
}

// Match types of a DescribeClientQuotas filter component.
const (
	quotaMatchExact     = 0
	quotaMatchDefault   = 1
	quotaMatchSpecified = 2
)

// maxQuotaFilterComponents bounds a filter from the network (there are three entity types).
const maxQuotaFilterComponents = 16

func handleDescribeClientQuotas(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	resp.SetVersion(r.Version)
	fail := func(e *kerr.Error, msg string) netio.Reply {
		resp.ErrorCode = e.Code
		resp.ErrorMessage = &msg
		resp.Entries = nil
		return netio.Reply{Response: resp}
	}
	if e := b.authorizeCluster(r, acl.OpDescribeConfigs); e != nil { // ACL: DESCRIBE_CONFIGS on the cluster
		return fail(e, "Cluster authorization failed.")
	}
	if len(req.Components) > maxQuotaFilterComponents {
		return fail(kerr.InvalidRequest, "Too many filter components")
	}
	seen := map[string]bool{}
	for _, c := range req.Components {
		switch c.EntityType {
		case quotaEntityUser, quotaEntityClientID, quotaEntityIP:
		default:
			return fail(kerr.InvalidRequest, "Custom entity type '"+c.EntityType+"' not supported")
		}
		if seen[c.EntityType] {
			return fail(kerr.InvalidRequest, "Entity type "+c.EntityType+" cannot appear more than once in the filter.")
		}
		seen[c.EntityType] = true
		switch c.MatchType {
		case quotaMatchExact:
			if c.Match == nil {
				return fail(kerr.InvalidRequest, "Exact match of "+c.EntityType+" needs a name")
			}
		case quotaMatchDefault, quotaMatchSpecified:
		default:
			return fail(kerr.InvalidRequest, "Unknown match type")
		}
	}
	if seen[quotaEntityIP] && (seen[quotaEntityUser] || seen[quotaEntityClientID]) {
		return fail(kerr.InvalidRequest, "Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.")
	}
	// Never null when there is no error: null entries mean an error to Kafka's admin client
	// (DescribeClientQuotasResponse.complete), so no match is an empty array.
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	t := b.quotaTable()
	for _, e := range t.sortedEntities() {
		if !quotaFilterMatches(e, req.Components, req.Strict) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, c := range e.components() {
			ec := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ec.Type, ec.Name = c.Type, c.Name
			entry.Entity = append(entry.Entity, ec)
		}
		vals := t.entries[e]
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, vals[k]
			entry.Values = append(entry.Values, v)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return netio.Reply{Response: resp}
}

// quotaFilterMatches reports whether entity e passes the filter (components validated).
func quotaFilterMatches(e quotaEntity, comps []kmsg.DescribeClientQuotasRequestComponent, strict bool) bool {
	types := 0
	if e.HasUser {
		types++
	}
	if e.HasClient {
		types++
	}
	if strict && types != len(comps) {
		return false
	}
	for _, c := range comps {
		var has, def bool
		var name string
		switch c.EntityType {
		case quotaEntityUser:
			has, def, name = e.HasUser, e.UserDefault, e.User
		case quotaEntityClientID:
			has, def, name = e.HasClient, e.ClientDefault, e.Client
		default: // ip: weir keeps no ip quotas
			return false
		}
		if !has {
			return false
		}
		switch c.MatchType {
		case quotaMatchExact:
			if def || name != *c.Match {
				return false
			}
		case quotaMatchDefault:
			if !def {
				return false
			}
		case quotaMatchSpecified:
			if def {
				return false
			}
		}
	}
	return true
}
