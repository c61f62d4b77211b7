package acl

import (
	"net/netip"
	"sort"
	"strings"
)

// Config is the authorizer's configuration (Kafka's super.users and
// allow.everyone.if.no.acl.found).
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything, whatever the ACLs say.
	SuperUsers []string
	// AllowEveryoneIfNoACL allows an operation on a resource no ACL applies to (of any
	// principal or operation); by default such an operation is denied.
	AllowEveryoneIfNoACL bool
}

// Authorizer answers authorization checks against a fixed set of bindings. It is immutable:
// build a new one when the bindings change. Authorize does not allocate.
type Authorizer struct {
	super        map[string]struct{}
	allowIfNoACL bool
	types        [numResourceTypes]*typeIndex
	bindings     []Binding
}

// entry is one ACL of a resource pattern and principal, reduced to what a check needs.
type entry struct {
	host    netip.Addr
	anyHost bool
	allow   bool
	mask    uint32 // operations granted (allow) or denied (deny)
}

// resourceACLs are the ACLs of one resource pattern, by principal (WildcardPrincipal too).
type resourceACLs struct {
	byPrincipal map[string][]entry
}

// prefixEntry is a PREFIXED resource pattern; parent is the index of the longest other prefix
// in the sorted list that is a prefix of this one (-1 if none).
type prefixEntry struct {
	name   string
	acls   *resourceACLs
	parent int
}

// typeIndex holds the bindings of one resource type: literal names (the wildcard "*" among
// them) in a map, prefixes in a sorted slice.
type typeIndex struct {
	literal  map[string]*resourceACLs
	prefixes []prefixEntry
}

// New builds an authorizer over bindings (invalid ones are ignored).
func New(cfg Config, bindings []Binding) *Authorizer {
	a := &Authorizer{super: map[string]struct{}{}, allowIfNoACL: cfg.AllowEveryoneIfNoACL}
	for _, s := range cfg.SuperUsers {
		if s = strings.TrimSpace(s); s != "" {
			a.super[s] = struct{}{}
		}
	}
	prefixed := make([]map[string]*resourceACLs, numResourceTypes)
	for _, b := range bindings {
		if b.Validate() != nil {
			continue
		}
		a.bindings = append(a.bindings, b)
		ti := a.types[b.ResourceType]
		if ti == nil {
			ti = &typeIndex{literal: map[string]*resourceACLs{}}
			a.types[b.ResourceType] = ti
			prefixed[b.ResourceType] = map[string]*resourceACLs{}
		}
		m := ti.literal
		if b.Pattern == PatternPrefixed {
			m = prefixed[b.ResourceType]
		}
		r := m[b.Name]
		if r == nil {
			r = &resourceACLs{byPrincipal: map[string][]entry{}}
			m[b.Name] = r
		}
		e := entry{allow: b.Permission == Allow}
		if b.Host == WildcardHost {
			e.anyHost = true
		} else if ip, err := netip.ParseAddr(b.Host); err == nil {
			e.host = ip.Unmap()
		} // else: a host that is not an IP address matches no connection
		if e.allow {
			e.mask = allowMask(b.Operation)
		} else {
			e.mask = denyMask(b.Operation)
		}
		r.byPrincipal[b.Principal] = append(r.byPrincipal[b.Principal], e)
	}
	for t, m := range prefixed {
		if len(m) == 0 {
			continue
		}
		ti := a.types[t]
		for name, r := range m {
			ti.prefixes = append(ti.prefixes, prefixEntry{name: name, acls: r, parent: -1})
		}
		sort.Slice(ti.prefixes, func(i, j int) bool { return ti.prefixes[i].name < ti.prefixes[j].name })
		// In sorted order, every prefix of an entry comes before it, and the entries between
		// a prefix and its extensions all extend it: a stack of open prefixes finds parents.
		var stack []int
		for i := range ti.prefixes {
			for len(stack) > 0 && !strings.HasPrefix(ti.prefixes[i].name, ti.prefixes[stack[len(stack)-1]].name) {
				stack = stack[:len(stack)-1]
			}
			if len(stack) > 0 {
				ti.prefixes[i].parent = stack[len(stack)-1]
			}
			stack = append(stack, i)
		}
	}
	return a
}

// Bindings returns the authorizer's bindings (do not modify).
func (a *Authorizer) Bindings() []Binding { return a.bindings }

// match accumulates a check over the ACLs of every pattern that applies to a resource.
type match struct {
	found, allowed, denied bool
}

func (m *match) check(r *resourceACLs, principal string, host netip.Addr, bit uint32) {
	m.found = true
	m.scan(r.byPrincipal[principal], host, bit)
	if principal != WildcardPrincipal && !m.denied {
		m.scan(r.byPrincipal[WildcardPrincipal], host, bit)
	}
}

func (m *match) scan(es []entry, host netip.Addr, bit uint32) {
	for i := range es {
		e := &es[i]
		if e.mask&bit == 0 || (!e.anyHost && e.host != host) {
			continue
		}
		if !e.allow {
			m.denied = true
			return
		}
		m.allowed = true
	}
}

// Authorize reports whether principal, connected from host, may perform op on the resource
// of type rt named name, with Kafka's semantics: super users may do anything; a DENY ACL that
// applies wins over any ALLOW; an ALLOW ACL for op, for ALL, or for an operation implying op
// (READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
// with no ACL at all on the resource (literal name, "*", or a prefix of the name),
// allow.everyone.if.no.acl.found decides. ACLs apply to the principal or User:*, from the
// host or "*". host should be unmapped (netip.Addr.Unmap). It does not allocate.
func (a *Authorizer) Authorize(principal string, host netip.Addr, op Operation, rt ResourceType, name string) bool {
	if _, ok := a.super[principal]; ok {
		return true
	}
	if rt < 0 || rt >= numResourceTypes || op <= OpAll || op >= numOps {
		return false
	}
	ti := a.types[rt]
	if ti == nil {
		return a.allowIfNoACL
	}
	bit := opBit(op)
	var m match
	if r := ti.literal[name]; r != nil {
		if m.check(r, principal, host, bit); m.denied {
			return false
		}
	}
	if name != WildcardResource {
		if r := ti.literal[WildcardResource]; r != nil {
			if m.check(r, principal, host, bit); m.denied {
				return false
			}
		}
	}
	if ps := ti.prefixes; len(ps) > 0 {
		// The greatest prefix <= name: every prefix of name in the list is a prefix of it
		// (the strings between a prefix of name and name all start with that prefix), so the
		// parent chain from it holds every matching prefix.
		lo, hi := 0, len(ps)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if ps[mid].name <= name {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		i := lo - 1
		for i >= 0 && !strings.HasPrefix(name, ps[i].name) {
			i = ps[i].parent
		}
		for ; i >= 0; i = ps[i].parent {
			if m.check(ps[i].acls, principal, host, bit); m.denied {
				return false
			}
		}
	}
	if m.allowed {
		return true
	}
	return !m.found && a.allowIfNoACL
}

// AuthorizeAny reports whether principal may perform op on at least one resource of type rt
// (Kafka's Authorizer.authorizeByResourceType, which InitProducerId uses: WRITE on any topic
// allows an idempotent producer, KIP-679). Super users, and principals allowed op on a
// resource no ACL applies to under allow.everyone.if.no.acl.found, are allowed. Otherwise some
// ALLOW ACL for op (or ALL) must apply to the principal and host and not be overridden by a
// DENY: a literal "*" deny, a deny of the same literal name, or a deny prefix of the allowed
// name or prefix. Linear in the bindings of rt: not for hot paths.
func (a *Authorizer) AuthorizeAny(principal string, host netip.Addr, op Operation, rt ResourceType) bool {
	if a.Authorize(principal, host, op, rt, "hardcode") {
		return true
	}
	applies := func(b Binding) bool {
		if b.ResourceType != rt || (b.Operation != op && b.Operation != OpAll) {
			return false
		}
		if b.Principal != principal && b.Principal != WildcardPrincipal {
			return false
		}
		if b.Host == WildcardHost {
			return true
		}
		ip, err := netip.ParseAddr(b.Host)
		return err == nil && ip.Unmap() == host
	}
	denyLiteral := map[string]bool{}
	var denyPrefixes, allowLiterals, allowPrefixes []string
	for _, b := range a.bindings {
		if !applies(b) {
			continue
		}
		switch {
		case b.Permission == Deny && b.Pattern == PatternLiteral:
			if b.Name == WildcardResource {
				return false
			}
			denyLiteral[b.Name] = true
		case b.Permission == Deny:
			denyPrefixes = append(denyPrefixes, b.Name)
		case b.Pattern == PatternLiteral:
			allowLiterals = append(allowLiterals, b.Name)
		default:
			allowPrefixes = append(allowPrefixes, b.Name)
		}
	}
	deniedByPrefix := func(name string) bool {
		for _, p := range denyPrefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
	for _, p := range allowPrefixes {
		if !deniedByPrefix(p) {
			return true
		}
	}
	for _, n := range allowLiterals {
		if n == WildcardResource || (!denyLiteral[n] && !deniedByPrefix(n)) {
			return true
		}
	}
	return false
}

// AuthorizedOperations is the bit field (1 << operation code) of the operations of
// SupportedOperations(rt) that principal may perform on the resource (the
// authorized_operations fields of Metadata, DescribeGroups, DescribeCluster).
func (a *Authorizer) AuthorizedOperations(principal string, host netip.Addr, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range SupportedOperations(rt) {
		if a.Authorize(principal, host, op, rt, name) {
			bits |= 1 << uint(op)
		}
	}
	return bits
}
