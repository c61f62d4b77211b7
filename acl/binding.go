package acl

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Binding is one ACL: a resource pattern and an access control entry.
type Binding struct {
	ResourceType ResourceType
	Name         string
	Pattern      PatternType // LITERAL or PREFIXED
	Principal    string      // "User:alice", or WildcardPrincipal
	Host         string      // an IP address, or WildcardHost
	Operation    Operation
	Permission   Permission
}

func (b Binding) String() string {
	return fmt.Sprintf("(%s %s %q) %s %s %s from host %s", b.ResourceType, b.Pattern, b.Name, b.Principal, b.Permission, b.Operation, b.Host)
}

// ErrInvalid is wrapped by every validation error (Kafka answers INVALID_REQUEST).
var ErrInvalid = errors.New("invalid ACL")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// validPrincipal checks Kafka's principal form "type:name".
func validPrincipal(p string) bool {
	i := strings.IndexByte(p, ':')
	return i > 0
}

// Validate checks a binding to be created, as Kafka's controller does: concrete resource type,
// LITERAL or PREFIXED, a non-empty name (the cluster's is kafka-cluster), a "type:name"
// principal, a non-empty host, a concrete operation and ALLOW or DENY.
func (b Binding) Validate() error {
	switch {
	case b.ResourceType <= ResourceAny || b.ResourceType >= numResourceTypes:
		return invalid("resource type %s", b.ResourceType)
	case b.Pattern != PatternLiteral && b.Pattern != PatternPrefixed:
		return invalid("pattern type %s: an ACL is LITERAL or PREFIXED", b.Pattern)
	case b.Name == "":
		return invalid("resource name should not be empty")
	case b.ResourceType == ResourceCluster && (b.Name != ClusterName || b.Pattern != PatternLiteral):
		return invalid("the cluster resource is LITERAL %q", ClusterName)
	case !validPrincipal(b.Principal):
		return invalid("principal %q: expected a string in format principalType:principalName", b.Principal)
	case b.Host == "":
		return invalid("host should not be empty (use %q for every host)", WildcardHost)
	case b.Operation <= OpAny || b.Operation >= numOps:
		return invalid("operation %s", b.Operation)
	case b.Permission != Allow && b.Permission != Deny:
		return invalid("permission type %s: an ACL is ALLOW or DENY", b.Permission)
	}
	return nil
}

// Key is the binding's canonical key in the metadata image: equal bindings have equal keys.
func (b Binding) Key() string {
	k, _ := json.Marshal([]string{b.ResourceType.String(), b.Pattern.String(), b.Name, b.Principal, b.Host,
		b.Operation.String(), b.Permission.String()})
	return string(k)
}

// stored is a binding's value in the metadata image.
type stored struct {
	ResourceType string `json:"resourceType"`
	Name         string `json:"name"`
	Pattern      string `json:"patternType"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    string `json:"operation"`
	Permission   string `json:"permissionType"`
}

// Encode is the binding's value in the metadata image (JSON with Kafka's names).
func (b Binding) Encode() string {
	v, _ := json.Marshal(stored{b.ResourceType.String(), b.Name, b.Pattern.String(), b.Principal, b.Host,
		b.Operation.String(), b.Permission.String()})
	return string(v)
}

// Decode parses a value written by Encode.
func Decode(value string) (Binding, error) {
	var s stored
	if err := json.Unmarshal([]byte(value), &s); err != nil {
		return Binding{}, fmt.Errorf("acl record: %w", err)
	}
	var b Binding
	var err error
	b.Name, b.Principal, b.Host = s.Name, s.Principal, s.Host
	if b.ResourceType, err = ParseResourceType(s.ResourceType); err != nil {
		return Binding{}, err
	}
	if b.Pattern, err = ParsePatternType(s.Pattern); err != nil {
		return Binding{}, err
	}
	if b.Operation, err = ParseOperation(s.Operation); err != nil {
		return Binding{}, err
	}
	if b.Permission, err = ParsePermission(s.Permission); err != nil {
		return Binding{}, err
	}
	if err := b.Validate(); err != nil {
		return Binding{}, err
	}
	return b, nil
}

// Filter selects bindings (DescribeAcls, DeleteAcls). Nil strings and the ANY values match
// everything; PatternMatch matches every binding that applies to Name (literal equal or
// "*", prefixes of it).
type Filter struct {
	ResourceType ResourceType
	Name         *string
	Pattern      PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate refuses filters Kafka refuses with INVALID_REQUEST: an UNKNOWN (or out of range)
// resource type, pattern type, operation or permission.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType <= ResourceUnknown || f.ResourceType >= numResourceTypes:
		return invalid("filter resource type %s", f.ResourceType)
	case f.Pattern <= PatternUnknown || f.Pattern > PatternPrefixed:
		return invalid("filter pattern type %s", f.Pattern)
	case f.Operation <= OpUnknown || f.Operation >= numOps:
		return invalid("filter operation %s", f.Operation)
	case f.Permission <= PermissionUnknown || f.Permission > Allow:
		return invalid("filter permission type %s", f.Permission)
	}
	return nil
}

// Matches reports whether b passes the filter (Kafka's AclBindingFilter.matches).
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if !f.matchesPattern(b) {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	return f.Permission == PermissionAny || f.Permission == b.Permission
}

func (f Filter) matchesPattern(b Binding) bool {
	if f.Pattern != PatternAny && f.Pattern != PatternMatch && f.Pattern != b.Pattern {
		return false
	}
	if f.Name == nil {
		return true
	}
	name := *f.Name
	if f.Pattern != PatternMatch {
		return name == b.Name
	}
	switch b.Pattern {
	case PatternLiteral:
		return name == b.Name || b.Name == WildcardResource
	case PatternPrefixed:
		return strings.HasPrefix(name, b.Name)
	}
	return false
}
