package assignor

import (
	"cmp"
	"slices"
)

// uniformAssignor is Kafka's UniformAssignor (KIP-848's default server-side assignor). Balance
// comes first, stickiness second:
//
//   - Homogeneous groups (every member subscribes to the same topics): every member gets
//     total/members partitions and total%members members get one more, so counts differ by at
//     most one. A member keeps its current partitions up to its quota; the extra partitions go
//     first to members that already hold more than the minimum (so they keep one more), then in
//     member order. Freed and new partitions fill the members below quota in member order.
//   - Heterogeneous groups: every member keeps its current partitions of topics it still
//     subscribes to; the unassigned partitions go, topic by topic (most partitions per
//     subscriber first, then fewest subscribers), each to the subscriber with the fewest
//     partitions; then partitions move from a member to another subscriber of the same topic
//     while the giver has at least two more than the taker. The result is balanced in Kafka's
//     sense: no single move from an owner to another subscriber would narrow the gap.
//
// Kafka's uniform assignor takes no account of racks, and neither does this one.
type uniformAssignor struct{}

func (uniformAssignor) Name() string { return "uniform" }

func (uniformAssignor) Assign(members []Member, topics map[TopicID]Topic) (Assignment, error) {
	g := newGroup(members, topics)
	if len(g.members) == 0 || len(g.topics) == 0 {
		return emptyAssignment(members), nil
	}
	var owner []int32
	if g.homogeneous() {
		owner = g.uniformHomogeneous()
	} else {
		owner = g.uniformHeterogeneous()
	}
	return g.fromOwners(members, owner), nil
}

func (g *group) uniformHomogeneous() []int32 {
	total, nm := g.total(), len(g.members)
	owner := make([]int32, total)
	for i := range owner {
		owner[i] = -1
	}
	cur := make([][]int, nm)
	var buf []int
	for m := range g.members {
		buf = g.current(m, buf)
		// Claims already taken by an earlier member are dropped (each partition has one owner).
		kept := make([]int, 0, len(buf))
		for _, gp := range buf {
			if owner[gp] < 0 {
				owner[gp] = int32(m)
				kept = append(kept, gp)
			}
		}
		cur[m] = kept
	}
	minQ, extra := total/nm, total%nm
	quota := make([]int, nm)
	for m := range quota {
		quota[m] = minQ
	}
	// Extra partitions first to members holding more than the minimum.
	for m := 0; m < nm && extra > 0; m++ {
		if len(cur[m]) > minQ {
			quota[m]++
			extra--
		}
	}
	for m := 0; m < nm && extra > 0; m++ {
		if quota[m] == minQ {
			quota[m]++
			extra--
		}
	}
	for m := range cur {
		if len(cur[m]) > quota[m] {
			for _, gp := range cur[m][quota[m]:] {
				owner[gp] = -1
			}
			cur[m] = cur[m][:quota[m]]
		}
	}
	gp := 0
	for m := range cur {
		for need := quota[m] - len(cur[m]); need > 0; need-- {
			for owner[gp] >= 0 {
				gp++
			}
			owner[gp] = int32(m)
		}
	}
	return owner
}

func (g *group) uniformHeterogeneous() []int32 {
	total, nm := g.total(), len(g.members)
	owner := make([]int32, total)
	for i := range owner {
		owner[i] = -1
	}
	count := make([]int, nm)
	var buf []int
	for m := range g.members {
		buf = g.current(m, buf)
		for _, gp := range buf {
			if owner[gp] < 0 {
				owner[gp] = int32(m)
				count[m]++
			}
		}
	}

	// Unassigned partitions, ordered as Kafka orders them: by partitions per subscriber
	// descending, then subscriber count ascending, then partition number, then topic order.
	order := make([]int, 0, len(g.topics))
	for t := range g.topics {
		if len(g.subscribers[t]) > 0 {
			order = append(order, t)
		}
	}
	ratio := func(t int) float64 {
		return float64(g.topics[t].Partitions) / float64(len(g.subscribers[t]))
	}
	var unassigned []int
	for _, t := range order {
		for gp := g.base[t]; gp < g.base[t+1]; gp++ {
			if owner[gp] < 0 {
				unassigned = append(unassigned, gp)
			}
		}
	}
	slices.SortFunc(unassigned, func(a, b int) int {
		ta, tb := g.topicOf(a), g.topicOf(b)
		if ta != tb {
			if c := cmp.Compare(ratio(tb), ratio(ta)); c != 0 {
				return c
			}
			if c := cmp.Compare(len(g.subscribers[ta]), len(g.subscribers[tb])); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(a-g.base[ta], b-g.base[tb]); c != 0 {
			return c
		}
		return cmp.Compare(ta, tb)
	})
	for _, gp := range unassigned {
		m := g.leastLoaded(g.subscribers[g.topicOf(gp)], count)
		owner[gp] = int32(m)
		count[m]++
	}

	// Balance: move a partition from its owner to the least loaded subscriber of its topic while
	// the owner has at least two more. Every move lowers the sum of squared counts, so this
	// ends; the bound only guards against a mistake.
	for round := 0; round <= total; round++ {
		moved := false
		for t := range g.topics {
			subs := g.subscribers[t]
			if len(subs) < 2 {
				continue
			}
			for gp := g.base[t]; gp < g.base[t+1]; gp++ {
				o := int(owner[gp])
				m := g.leastLoaded(subs, count)
				if count[o] > count[m]+1 {
					owner[gp] = int32(m)
					count[o]--
					count[m]++
					moved = true
				}
			}
		}
		if !moved {
			break
		}
	}
	return owner
}

// leastLoaded returns the member of subs with the lowest count (the first such in member order).
func (g *group) leastLoaded(subs []int, count []int) int {
	best := subs[0]
	for _, m := range subs[1:] {
		if count[m] < count[best] {
			best = m
		}
	}
	return best
}
