// Package assignor holds the server-side partition assignors of KIP-848 consumer groups
// (uniform, range) and of KIP-932 share groups (simple). They are pure functions of the group's
// members, their subscriptions and current assignments, and the subscribed topics' partition
// counts: no goroutines, no locks, no I/O, no shared state. The same input always gives the same
// output: members are taken in member-id order and topics in name order (then id), whatever the
// order of the input slices and maps.
//
// Invariants of every result: each member of the input has an entry; a member is given only
// partitions of topics it subscribes to that exist in topics (0 <= partition < Partitions);
// partition lists are sorted ascending with no duplicates. Uniform and Range give every
// subscribed partition to exactly one member; Simple gives every subscribed partition to at least
// one member and, when there are more members than partitions, to several.
package assignor

// TopicID is a topic's UUID.
type TopicID = [16]byte

// Topic is one subscribed topic as the assignor sees it.
type Topic struct {
	ID         TopicID
	Name       string
	Partitions int32
	// Racks, when not nil, lists the racks of each partition's replicas (rack-aware assignment).
	Racks [][]string
}

// Member is one member of the group being assigned.
type Member struct {
	ID         string
	InstanceID *string
	Rack       string // "" when none
	// Subscribed is the topics the member subscribes to (resolved from names and regular
	// expressions by the coordinator), sorted.
	Subscribed []TopicID
	// Current is the member's current (or target) assignment: the stickiness input.
	Current map[TopicID][]int32
}

// Assignment is, per member id, the partitions of each topic it is given (partition lists
// sorted ascending).
type Assignment map[string]map[TopicID][]int32

// Assignor computes a group's target assignment.
type Assignor interface {
	// Name is the assignor's name as clients select it (ConsumerGroupHeartbeat's
	// ServerAssignor, group.consumer.assignors).
	Name() string
	// Assign returns the target assignment of members over topics. Every member gets an entry
	// (possibly empty); a topic a member subscribes to that is not in topics is ignored.
	Assign(members []Member, topics map[TopicID]Topic) (Assignment, error)
}

// Uniform is KIP-848's "uniform" assignor (the default): balanced, then sticky. See uniform.go.
func Uniform() Assignor { return uniformAssignor{} }

// Range is KIP-848's "range" assignor: per topic, contiguous ranges in member order, sticky. See
// rangeassign.go.
func Range() Assignor { return rangeAssignor{} }

// Simple is KIP-932's share group assignor ("simple"). See simple.go.
func Simple() Assignor { return simpleAssignor{} }
