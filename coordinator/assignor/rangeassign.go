package assignor

import "slices"

// rangeAssignor is Kafka's server-side RangeAssignor (KIP-848), topic by topic:
//
//   - A topic's P partitions are shared by its S subscribers: each gets P/S and the first P%S
//     (in member order) get one more.
//   - Sticky: a subscriber keeps its lowest current partitions of the topic up to P/S, and one
//     more when it had more than P/S and an extra slot is left.
//   - The partitions left go, ascending, in contiguous runs to the subscribers below their share
//     in member order (the remaining extra slots going to the first of them).
//
// With the same members subscribing to co-partitioned topics and no history, partition i of
// every topic goes to the same member: members are taken in the same (id) order for every topic.
type rangeAssignor struct{}

func (rangeAssignor) Name() string { return "range" }

func (rangeAssignor) Assign(members []Member, topics map[TopicID]Topic) (Assignment, error) {
	g := newGroup(members, topics)
	out := emptyAssignment(members)
	type unfilled struct {
		m, remaining int
	}
	var pending []unfilled
	var taken []bool
	add := func(m, t int, ps ...int32) {
		if len(ps) == 0 {
			return
		}
		ma := out[g.members[m].ID]
		id := g.topics[t].ID
		ma[id] = append(ma[id], ps...)
	}
	for t, tp := range g.topics {
		subs := g.subscribers[t]
		if len(subs) == 0 || tp.Partitions == 0 {
			continue
		}
		n := int(tp.Partitions)
		minQ, extra := n/len(subs), n%len(subs)
		taken = slices.Grow(taken[:0], n)[:n]
		clear(taken)
		pending = pending[:0]
		for _, m := range subs {
			cur := g.currentTopic(m, t)
			// A partition an earlier member already kept is not this member's to keep.
			valid := cur[:0]
			for _, p := range cur {
				if !taken[p] {
					valid = append(valid, p)
				}
			}
			keep := min(len(valid), minQ)
			for _, p := range valid[:keep] {
				taken[p] = true
			}
			add(m, t, valid[:keep]...)
			remaining := minQ - len(valid)
			if remaining < 0 && extra > 0 {
				extra--
				taken[valid[minQ]] = true
				add(m, t, valid[minQ])
			} else {
				pending = append(pending, unfilled{m, remaining})
			}
		}
		next := int32(0)
		for _, u := range pending {
			r := u.remaining
			if extra > 0 {
				r++
				extra--
			}
			for ; r > 0; r-- {
				for next < int32(n) && taken[next] {
					next++
				}
				if next == int32(n) {
					break
				}
				taken[next] = true
				add(u.m, t, next)
			}
		}
	}
	for _, ma := range out {
		for id, ps := range ma {
			slices.Sort(ps)
			ma[id] = ps
		}
	}
	return out, nil
}
