package assignor

import "slices"

// simpleAssignor is KIP-932's share group assignor as Kafka 4.4's SimpleAssignor does it. Share
// group members may share a partition (records are handed out one by one under acquisition
// locks), so the assignor balances members per partition as well as partitions per member:
//
//   - desired sharing: each partition goes to ceil(members/partitions) members, so with more
//     members than partitions every member gets a partition and some partitions several
//     members; with fewer, each partition goes to one member;
//   - desired count: member i (in member order) gets ceil(D*(i+1)/M) - ceil(D*i/M) partitions,
//     D = sharing*partitions (these add up to D and differ by at most one);
//   - sticky: a member keeps its current partitions of subscribed topics, then partitions shared
//     by more members than desired lose members (overfilled members first), members over their
//     count lose partitions (their highest), and members under their count take, in turn, the
//     partitions with fewer members than desired that they do not hold yet.
//
// Homogeneous groups (every member subscribes to the same topics) are balanced over all their
// partitions at once; heterogeneous groups topic by topic, over each topic's subscribers (so a
// member's total is the sum of its per-topic shares, as in Kafka).
type simpleAssignor struct{}

func (simpleAssignor) Name() string { return "simple" }

func (simpleAssignor) Assign(members []Member, topics map[TopicID]Topic) (Assignment, error) {
	g := newGroup(members, topics)
	out := emptyAssignment(members)
	if len(g.members) == 0 || len(g.topics) == 0 {
		return out, nil
	}
	add := func(m, gp int) {
		t := g.topicOf(gp)
		ma := out[g.members[m].ID]
		id := g.topics[t].ID
		ma[id] = append(ma[id], int32(gp-g.base[t]))
	}
	var buf []int
	if g.homogeneous() {
		all := make([]int, len(g.members))
		held := make([][]int, len(g.members))
		for m := range g.members {
			all[m] = m
			buf = g.current(m, buf)
			held[m] = slices.Clone(buf)
		}
		res := simpleBalance(g.total(), held, true)
		for m, ps := range res {
			for _, gp := range ps {
				add(all[m], gp)
			}
		}
	} else {
		for t := range g.topics {
			subs := g.subscribers[t]
			if len(subs) == 0 {
				continue
			}
			held := make([][]int, len(subs))
			for i, m := range subs {
				for _, p := range g.currentTopic(m, t) {
					held[i] = append(held[i], int(p))
				}
			}
			res := simpleBalance(int(g.topics[t].Partitions), held, false)
			for i, ps := range res {
				for _, p := range ps {
					add(subs[i], g.base[t]+p)
				}
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

// simpleBalance computes the simple assignor's result over nparts partitions (0..nparts-1) and
// len(held) members, held[i] being member i's current partitions (ascending, distinct, in
// range). sharedFirst selects Kafka's homogeneous order of the revocation steps (over-shared
// partitions, then overfilled members); the heterogeneous builder does them the other way round.
// It returns each member's partitions (ascending).
func simpleBalance(nparts int, held [][]int, sharedFirst bool) [][]int {
	nm := len(held)
	if nparts == 0 || nm == 0 {
		return make([][]int, nm)
	}
	sharing := (nm + nparts - 1) / nparts
	d := sharing * nparts
	desired := make([]int, nm)
	for i := range desired {
		desired[i] = ceilDiv(d*(i+1), nm) - ceilDiv(d*i, nm)
	}
	holders := make([][]int, nparts)
	for m, ps := range held {
		for _, p := range ps {
			holders[p] = append(holders[p], m)
		}
	}
	remove := func(m, p int) {
		held[m] = slices.DeleteFunc(held[m], func(x int) bool { return x == p })
		holders[p] = slices.DeleteFunc(holders[p], func(x int) bool { return x == m })
	}
	revokeOvershared := func() {
		for p := range holders {
			// Overfilled holders give the partition up first, then the others.
			for _, over := range []bool{true, false} {
				for i := 0; i < len(holders[p]) && len(holders[p]) > sharing; {
					m := holders[p][i]
					if (len(held[m]) > desired[m]) == over {
						remove(m, p)
						continue
					}
					i++
				}
			}
		}
	}
	revokeOverfilled := func() {
		for m := range held {
			for len(held[m]) > desired[m] {
				remove(m, held[m][len(held[m])-1])
			}
		}
	}
	if sharedFirst {
		revokeOvershared()
		revokeOverfilled()
	} else {
		revokeOverfilled()
		revokeOvershared()
	}

	// Members under their count take, in turn, partitions with fewer holders than desired.
	var ring []int
	for m := range held {
		if len(held[m]) < desired[m] {
			ring = append(ring, m)
		}
	}
	pos := 0
	for p := 0; p < nparts && len(ring) > 0; p++ {
		need := sharing - len(holders[p])
		for tried := 0; need > 0 && len(ring) > 0 && tried < len(ring); {
			if pos >= len(ring) {
				pos = 0
			}
			m := ring[pos]
			if slices.Contains(holders[p], m) {
				pos++
				tried++
				continue
			}
			holders[p] = append(holders[p], m)
			held[m] = append(held[m], p)
			need--
			tried = 0
			if len(held[m]) >= desired[m] {
				ring = slices.Delete(ring, pos, pos+1)
			} else {
				pos++
			}
		}
	}
	for m := range held {
		slices.Sort(held[m])
	}
	return held
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
