package coordinator

// Read-only statistics for the broker's metrics: group states at scrape time and rebalance
// counters bumped by group state transitions.

import "sync/atomic"

// coordStats counts group state transitions (the Coordinator's stats field).
type coordStats struct {
	preparing atomic.Uint64 // transitions into PreparingRebalance: rebalances started
	completed atomic.Uint64 // transitions into CompletingRebalance: join phases that made a generation
}

// transition is called by group.transition on the group's goroutine.
func (s *coordStats) transition(to State) {
	switch to {
	case PreparingRebalance:
		s.preparing.Add(1)
	case CompletingRebalance:
		s.completed.Add(1)
	}
}

// RebalanceCounts returns how many rebalances this coordinator started (groups entering
// PreparingRebalance) and completed (groups entering CompletingRebalance with a new generation).
func (c *Coordinator) RebalanceCounts() (started, completed uint64) {
	return c.stats.preparing.Load(), c.stats.completed.Load()
}

// GroupStateCounts returns how many of the groups this coordinator owns are in each state, by
// Kafka's state name (Empty, PreparingRebalance, CompletingRebalance, Stable); Dead groups are
// not counted. Each group is asked on its own goroutine, so the answer is consistent per group.
func (c *Coordinator) GroupStateCounts() map[string]int {
	out := map[string]int{}
	for _, g := range c.allGroups() {
		var s State
		if g.do(func() { s = g.state }) && s != Dead {
			out[s.String()]++
		}
	}
	return out
}
