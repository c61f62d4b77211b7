// Package acl is weir's authorizer: Kafka's ACL model (resource types, pattern types,
// operations, permissions), matching with Kafka's semantics, an index that answers an
// authorization check without allocating, and the storage codec of a binding in the cluster
// metadata. It knows nothing of the network or the broker.
package acl

import (
	"fmt"
	"strings"
)

// ResourceType is the type of a resource an ACL protects, with Kafka's codes.
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// numResourceTypes bounds the ResourceType codes.
const numResourceTypes = 8

var resourceNames = [...]string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}

func (t ResourceType) String() string {
	if t >= 0 && int(t) < len(resourceNames) {
		return resourceNames[t]
	}
	return fmt.Sprintf("ResourceType(%d)", int8(t))
}

// PatternType is how an ACL's resource name matches, with Kafka's codes. MATCH and ANY only
// appear in filters.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters: any pattern type, the exact name
	PatternMatch    PatternType = 2 // filters: every binding that applies to the name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

var patternNames = [...]string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}

func (p PatternType) String() string {
	if p >= 0 && int(p) < len(patternNames) {
		return patternNames[p]
	}
	return fmt.Sprintf("PatternType(%d)", int8(p))
}

// Operation is an ACL operation, with Kafka's codes.
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
	OpTwoPhaseCommit  Operation = 15
)

// numOps bounds the Operation codes.
const numOps = 16

var opNames = [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS",
	"TWO_PHASE_COMMIT"}

func (o Operation) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Operation(%d)", int8(o))
}

// Permission is ALLOW or DENY, with Kafka's codes.
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	Deny              Permission = 2
	Allow             Permission = 3
)

var permNames = [...]string{"UNKNOWN", "ANY", "DENY", "ALLOW"}

func (p Permission) String() string {
	if p >= 0 && int(p) < len(permNames) {
		return permNames[p]
	}
	return fmt.Sprintf("Permission(%d)", int8(p))
}

func parseName(kind, s string, names []string) (int8, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	u = strings.ReplaceAll(u, "-", "_")
	for i, n := range names {
		if n == u || strings.ReplaceAll(n, "_", "") == u {
			return int8(i), nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q (one of %s)", kind, s, strings.Join(names[1:], ", "))
}

// ParseResourceType parses a Kafka resource type name (TOPIC, GROUP, ...), case-insensitively.
func ParseResourceType(s string) (ResourceType, error) {
	v, err := parseName("resource type", s, resourceNames[:])
	return ResourceType(v), err
}

// ParsePatternType parses LITERAL, PREFIXED, MATCH or ANY.
func ParsePatternType(s string) (PatternType, error) {
	v, err := parseName("pattern type", s, patternNames[:])
	return PatternType(v), err
}

// ParseOperation parses a Kafka operation name (READ, WRITE, DESCRIBE_CONFIGS, ...).
func ParseOperation(s string) (Operation, error) {
	v, err := parseName("operation", s, opNames[:])
	return Operation(v), err
}

// ParsePermission parses ALLOW, DENY or ANY.
func ParsePermission(s string) (Permission, error) {
	v, err := parseName("permission", s, permNames[:])
	return Permission(v), err
}

// Names Kafka gives to wildcards and the cluster resource.
const (
	// ClusterName is the name of the one CLUSTER resource.
	ClusterName = "kafka-cluster"
	// WildcardResource as a LITERAL resource name matches every resource of its type.
	WildcardResource = "*"
	// WildcardPrincipal matches every principal of type User.
	WildcardPrincipal = "User:*"
	// WildcardHost matches every host.
	WildcardHost = "*"
)

// opBit is an operation's bit in a mask.
func opBit(o Operation) uint32 { return 1 << uint(o) }

// allOps is every concrete operation (what ALL grants or denies).
const allOps uint32 = (1<<numOps - 1) &^ (1<<uint(OpUnknown) | 1<<uint(OpAny) | 1<<uint(OpAll))

// allowMask is the set of operations an ALLOW ACL on op grants: ALL grants everything; READ,
// WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS (Kafka's
// implied operations).
func allowMask(op Operation) uint32 {
	switch op {
	case OpAll:
		return allOps
	case OpRead, OpWrite, OpDelete, OpAlter:
		return opBit(op) | opBit(OpDescribe)
	case OpAlterConfigs:
		return opBit(op) | opBit(OpDescribeConfigs)
	}
	return opBit(op)
}

// denyMask is the set of operations a DENY ACL on op denies: implications do not apply to DENY.
func denyMask(op Operation) uint32 {
	if op == OpAll {
		return allOps
	}
	return opBit(op)
}

// SupportedOperations lists the operations that apply to a resource type (Kafka's
// AclEntry.supportedOperations), for the authorized-operations fields of Metadata,
// DescribeGroups and DescribeCluster.
func SupportedOperations(t ResourceType) []Operation {
	switch t {
	case ResourceTopic:
		return []Operation{OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter, OpDescribeConfigs, OpAlterConfigs}
	case ResourceGroup:
		return []Operation{OpRead, OpDescribe, OpDelete}
	case ResourceCluster:
		return []Operation{OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe}
	case ResourceTransactionalID:
		return []Operation{OpDescribe, OpWrite, OpTwoPhaseCommit}
	case ResourceDelegationToken:
		return []Operation{OpDescribe}
	case ResourceUser:
		return []Operation{OpCreateTokens, OpDescribeTokens}
	}
	return nil
}
