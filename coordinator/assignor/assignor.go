// Package assignor holds the server-side partition assignors of KIP-848 consumer groups
// (uniform, range) and of KIP-932 share groups (simple). They are pure functions of the group's
// members, their subscriptions and current assignments, and the subscribed topics' partition
// counts: no goroutines, no locks, no I/O.
package assignor

import "sort"

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

// placeholder is a deterministic round robin used until the real assignors exist.
type placeholder struct{ name string }

func (p placeholder) Name() string { return p.name }

func (p placeholder) Assign(members []Member, topics map[TopicID]Topic) (Assignment, error) {
	out := make(Assignment, len(members))
	ms := append([]Member(nil), members...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
	ids := make([]TopicID, 0, len(topics))
	for id := range topics {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return topics[ids[i]].Name < topics[ids[j]].Name })
	for _, m := range ms {
		out[m.ID] = map[TopicID][]int32{}
	}
	for _, id := range ids {
		var subs []string
		for _, m := range ms {
			for _, s := range m.Subscribed {
				if s == id {
					subs = append(subs, m.ID)
					break
				}
			}
		}
		if len(subs) == 0 {
			continue
		}
		for p := int32(0); p < topics[id].Partitions; p++ {
			m := subs[int(p)%len(subs)]
			out[m][id] = append(out[m][id], p)
		}
	}
	return out, nil
}

// Uniform is KIP-848's "uniform" assignor (the default).
func Uniform() Assignor { return placeholder{"uniform"} }

// Range is KIP-848's "range" assignor.
func Range() Assignor { return placeholder{"range"} }

// Simple is KIP-932's share group assignor ("simple").
func Simple() Assignor { return placeholder{"simple"} }
