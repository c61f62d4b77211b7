package netns

import (
	"fmt"
	"sort"
	"strings"
)

// Isolate cuts node i off from everyone: the other nodes and the clients. To cut it off from the
// other nodes only, with clients still reaching it, use Split([]int{i}, others).
func (nt *Net) Isolate(i int) error {
	if err := nt.valid(i); err != nil {
		return fmt.Errorf("netns: isolate: %w", err)
	}
	var cuts []pair
	for j := 0; j <= nt.n; j++ { // 0: the clients
		if j != i {
			cuts = append(cuts, pair{i, j}, pair{j, i})
		}
	}
	if err := nt.cut(cuts); err != nil {
		return fmt.Errorf("netns: isolate %d: %w", i, err)
	}
	return nil
}

// Split partitions the nodes into groups: no packet passes between nodes of different groups.
// A node may be in at most one group; a node in none stays connected to every node. Clients reach
// every node, as in Jepsen's partitions, which are between servers.
func (nt *Net) Split(groups ...[]int) error {
	cuts, err := nt.splitCuts(groups)
	if err != nil {
		return fmt.Errorf("netns: split %v: %w", groups, err)
	}
	if err := nt.cut(cuts); err != nil {
		return fmt.Errorf("netns: split %v: %w", groups, err)
	}
	return nil
}

// Bridge cuts side a from side b, both ways, while node mid, in neither, still reaches (and is
// reached by) both: Jepsen's bridge, two majorities that share one node. Clients reach every node.
func (nt *Net) Bridge(a, b []int, mid int) error {
	if err := nt.valid(mid); err != nil {
		return fmt.Errorf("netns: bridge: %w", err)
	}
	for _, side := range [][]int{a, b} {
		for _, i := range side {
			if i == mid {
				return fmt.Errorf("netns: bridge %v | %d | %v: the middle node is on a side", a, mid, b)
			}
		}
	}
	cuts, err := nt.splitCuts([][]int{a, b})
	if err != nil {
		return fmt.Errorf("netns: bridge %v | %d | %v: %w", a, mid, b, err)
	}
	if err := nt.cut(cuts); err != nil {
		return fmt.Errorf("netns: bridge %v | %d | %v: %w", a, mid, b, err)
	}
	return nil
}

// OneWay drops the packets node from sends to node to; those to sends to from are delivered.
// A TCP connection between them needs both directions, so it stalls whichever side opened it;
// what to still hears is from's silence, not from's data.
func (nt *Net) OneWay(from, to int) error {
	if err := nt.valid(from); err != nil {
		return fmt.Errorf("netns: one-way: %w", err)
	}
	if err := nt.valid(to); err != nil {
		return fmt.Errorf("netns: one-way: %w", err)
	}
	if from == to {
		return fmt.Errorf("netns: one-way %d -> %d: one node", from, to)
	}
	if err := nt.cut([]pair{{from, to}}); err != nil {
		return fmt.Errorf("netns: one-way %d -> %d: %w", from, to, err)
	}
	return nil
}

// Heal removes every cut: all packets pass again. Connections that stalled resume once their
// retransmissions get through.
func (nt *Net) Heal() error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	var script strings.Builder
	for i := 1; i <= nt.n; i++ {
		fmt.Fprintf(&script, "filter del dev p%d ingress\nfilter del dev p%d egress\n", i, i)
	}
	if err := runBatch(nt.tc, nt.ns(0), script.String()); err != nil {
		return fmt.Errorf("netns: heal %s: %w", nt.name, err)
	}
	nt.blocked = map[pair]bool{}
	nt.dirty = false
	return nil
}

// Method says how the faults are made.
func (nt *Net) Method() string {
	return "tc in namespace " + nt.ns(0) + ": a clsact qdisc on each bridge port pI (the veth to node I); " +
		"a u32 filter per cut, matching IPv4 dst on pI's ingress (packets node I sends) or the clients' src " +
		"on pI's egress (packets to node I), with a mirred action redirecting the packet into the veth " +
		"sink0->sink1, where it is discarded: silent drops, no ICMP, no error seen by the sender"
}

// Cuts describes the current cuts, "1->2 2->1 c->3" (c: the clients), sorted; "" when healed.
// After a failed fault it ends in "partial": some of that fault's cuts may be in place.
func (nt *Net) Cuts() string {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	ps := make([]pair, 0, len(nt.blocked))
	for p := range nt.blocked {
		ps = append(ps, p)
	}
	sortPairs(ps)
	host := func(i int) string {
		if i == 0 {
			return "c"
		}
		return fmt.Sprint(i)
	}
	parts := make([]string, len(ps))
	for k, p := range ps {
		parts[k] = host(p.from) + "->" + host(p.to)
	}
	if nt.dirty {
		parts = append(parts, "partial")
	}
	return strings.Join(parts, " ")
}

// valid checks a node number.
func (nt *Net) valid(i int) error {
	if i < 1 || i > nt.n {
		return fmt.Errorf("node %d: want 1 to %d", i, nt.n)
	}
	return nil
}

// splitCuts is every directed pair of nodes in different groups.
func (nt *Net) splitCuts(groups [][]int) ([]pair, error) {
	group := map[int]int{}
	for g, nodes := range groups {
		for _, i := range nodes {
			if err := nt.valid(i); err != nil {
				return nil, err
			}
			if h, ok := group[i]; ok {
				return nil, fmt.Errorf("node %d in groups %d and %d", i, h, g)
			}
			group[i] = g
		}
	}
	var cuts []pair
	for i, gi := range group {
		for j, gj := range group {
			if gi != gj {
				cuts = append(cuts, pair{i, j})
			}
		}
	}
	return cuts, nil
}

// cut installs a filter for each pair not cut yet.
func (nt *Net) cut(cuts []pair) error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	var fresh []pair
	seen := map[pair]bool{}
	for _, p := range cuts {
		if !nt.blocked[p] && !seen[p] {
			seen[p] = true
			fresh = append(fresh, p)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	sortPairs(fresh)
	var script strings.Builder
	for _, p := range fresh {
		script.WriteString(nt.filterLocked(p))
	}
	if err := runBatch(nt.tc, nt.ns(0), script.String()); err != nil {
		// tc stops at the first failing line: the ones before it are installed. Heal
		// removes every filter whatever is recorded.
		nt.dirty = true
		return err
	}
	for _, p := range fresh {
		nt.blocked[p] = true
	}
	return nil
}

// filterLocked is the tc batch line that drops p's packets. Packets a node sends enter the bridge
// namespace on its port's ingress; packets from the clients (the bridge's own address) leave it
// on the destination node's port's egress.
func (nt *Net) filterLocked(p pair) string {
	const drop = "action mirred egress redirect dev sink0"
	if p.from == 0 {
		return fmt.Sprintf("filter add dev p%d egress protocol ip prio 1 u32 match ip src %s/32 %s\n", p.to, nt.ClientAddr(), drop)
	}
	to := nt.ClientAddr()
	if p.to != 0 {
		to = nt.Addr(p.to)
	}
	return fmt.Sprintf("filter add dev p%d ingress protocol ip prio 1 u32 match ip dst %s/32 %s\n", p.from, to, drop)
}

func sortPairs(ps []pair) {
	sort.Slice(ps, func(a, b int) bool {
		if ps[a].from != ps[b].from {
			return ps[a].from < ps[b].from
		}
		return ps[a].to < ps[b].to
	})
}
