package assignor

import (
	"bytes"
	"cmp"
	"slices"
)

// group is the assignors' common view of their input, with members and topics numbered in a
// deterministic order: members by id, topics by name then id. Only topics that exist in the
// topic map and that at least one member subscribes to are numbered.
type group struct {
	members []*Member // sorted by ID, duplicates dropped (the first kept)
	topics  []Topic   // subscribed and known, sorted by Name then ID
	tindex  map[TopicID]int
	// base[t] is the global index of topic t's partition 0; base[len(topics)] is the total.
	base []int
	// subs[m] is member m's subscribed topics (indices, ascending).
	subs [][]int
	// subscribers[t] is topic t's subscribers (member indices, ascending).
	subscribers [][]int
}

func newGroup(members []Member, topics map[TopicID]Topic) *group {
	g := &group{tindex: map[TopicID]int{}}
	g.members = make([]*Member, 0, len(members))
	for i := range members {
		g.members = append(g.members, &members[i])
	}
	slices.SortStableFunc(g.members, func(a, b *Member) int { return cmp.Compare(a.ID, b.ID) })
	g.members = slices.CompactFunc(g.members, func(a, b *Member) bool { return a.ID == b.ID })

	seen := map[TopicID]bool{}
	for _, m := range g.members {
		for _, id := range m.Subscribed {
			if _, ok := topics[id]; ok && !seen[id] {
				seen[id] = true
				g.topics = append(g.topics, topics[id])
			}
		}
	}
	slices.SortFunc(g.topics, func(a, b Topic) int {
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
	g.base = make([]int, len(g.topics)+1)
	for t := range g.topics {
		if g.topics[t].Partitions < 0 {
			g.topics[t].Partitions = 0
		}
		g.tindex[g.topics[t].ID] = t
		g.base[t+1] = g.base[t] + int(g.topics[t].Partitions)
	}
	g.subs = make([][]int, len(g.members))
	g.subscribers = make([][]int, len(g.topics))
	for mi, m := range g.members {
		var ts []int
		for _, id := range m.Subscribed {
			if t, ok := g.tindex[id]; ok {
				ts = append(ts, t)
			}
		}
		slices.Sort(ts)
		ts = slices.Compact(ts)
		g.subs[mi] = ts
		for _, t := range ts {
			g.subscribers[t] = append(g.subscribers[t], mi)
		}
	}
	return g
}

// total is the number of partitions of all subscribed topics.
func (g *group) total() int { return g.base[len(g.topics)] }

// topicOf returns the topic index of global partition gp.
func (g *group) topicOf(gp int) int {
	// base is ascending; find the last t with base[t] <= gp.
	t, found := slices.BinarySearch(g.base, gp)
	if !found {
		t--
	}
	// Skip topics with no partitions (equal bases).
	for t+1 < len(g.base) && g.base[t+1] <= gp {
		t++
	}
	return t
}

// homogeneous reports whether every member subscribes to the same (known) topics.
func (g *group) homogeneous() bool {
	for m := 1; m < len(g.subs); m++ {
		if !slices.Equal(g.subs[m], g.subs[0]) {
			return false
		}
	}
	return true
}

// subscribes reports whether member m subscribes to topic t.
func (g *group) subscribes(m, t int) bool {
	_, ok := slices.BinarySearch(g.subs[m], t)
	return ok
}

// current returns member m's current partitions that it may keep: of topics it subscribes to,
// existing, without duplicates, as global indices in ascending order. buf is reused.
func (g *group) current(m int, buf []int) []int {
	buf = buf[:0]
	for id, ps := range g.members[m].Current {
		t, ok := g.tindex[id]
		if !ok || !g.subscribes(m, t) {
			continue
		}
		n := g.topics[t].Partitions
		for _, p := range ps {
			if p >= 0 && p < n {
				buf = append(buf, g.base[t]+int(p))
			}
		}
	}
	slices.Sort(buf)
	return slices.Compact(buf)
}

// currentTopic returns member m's current partitions of topic t that exist, ascending, without
// duplicates (nil when it does not subscribe to t).
func (g *group) currentTopic(m, t int) []int32 {
	if !g.subscribes(m, t) {
		return nil
	}
	ps := g.members[m].Current[g.topics[t].ID]
	n := g.topics[t].Partitions
	out := make([]int32, 0, len(ps))
	for _, p := range ps {
		if p >= 0 && p < n {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// emptyAssignment gives every input member an empty entry.
func emptyAssignment(members []Member) Assignment {
	out := make(Assignment, len(members))
	for _, m := range members {
		out[m.ID] = map[TopicID][]int32{}
	}
	return out
}

// fromOwners builds the assignment of a one-owner-per-partition result (owner[gp] is a member
// index, or -1 for none).
func (g *group) fromOwners(members []Member, owner []int32) Assignment {
	out := emptyAssignment(members)
	for t, tp := range g.topics {
		for p := int32(0); p < tp.Partitions; p++ {
			o := owner[g.base[t]+int(p)]
			if o < 0 {
				continue
			}
			ma := out[g.members[o].ID]
			ma[tp.ID] = append(ma[tp.ID], p)
		}
	}
	return out
}
