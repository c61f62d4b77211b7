package faults

import (
	"math/rand/v2"
	"time"
)

// variants are each family's kinds of fault; the scheduler picks one at random per fault.
var variants = map[string][]string{
	// SIGSTOP then SIGCONT of a partition leader, the active controller, the group coordinator;
	// leader-isolated: a leader paused and cut off at once, resumed while still cut off (it wakes
	// believing it leads and cannot learn otherwise), then healed.
	NemesisPause: {"leader", "controller", "coordinator", "leader-isolated"},
	// SIGKILL then restart of a partition leader or the active controller.
	NemesisKill: {"leader", "controller"},
	// Through Network: cut a leader or the controller off, a majority/minority split, a bridge, a
	// one-way loss, a flapping split (healed and split again every 5-15 s while it lasts).
	NemesisPartition: {"isolate-leader", "isolate-controller", "majority", "bridge", "one-way", "flap"},
	// Preferred leader election of every workload partition; a reassignment that reorders a
	// partition's replicas (a new preferred leader) followed by a preferred election.
	NemesisMembership: {"elect-preferred", "reassign"},
	// Through the nodes' fault control (nemesis_disk.go, nemesis_clock.go).
	NemesisDisk:  diskVariants,
	NemesisClock: clockVariants,
}

// fault is one scheduled fault.
type fault struct {
	Family  string
	Variant string
	// Gap is the quiet time before the fault; Hold how long it lasts (pause, partition,
	// downtime of a killed node; membership changes do not hold).
	Gap, Hold time.Duration
	// Pick seeds the fault's own choices (which partition, which nodes), so a schedule and its
	// targets follow from the run's seed.
	Pick uint64
}

// scheduler yields a run's faults: rounds in which every family comes once, in a random order,
// each fault after a random gap and held a random time. It is deterministic given its seed and
// not safe for concurrent use.
type scheduler struct {
	rng       *rand.Rand
	families  []string
	round     []string // what is left of the current round
	gap, hold [2]time.Duration
}

func newScheduler(seed int64, families []string, gap, hold [2]time.Duration) *scheduler {
	return &scheduler{rng: rand.New(rand.NewPCG(uint64(seed), 0x6661756c7473)), families: families, gap: gap, hold: hold}
}

// next is the next fault; ok is false when there are no families.
func (s *scheduler) next() (f fault, ok bool) {
	if len(s.families) == 0 {
		return fault{}, false
	}
	if len(s.round) == 0 {
		s.round = append(s.round[:0], s.families...)
		s.rng.Shuffle(len(s.round), func(i, j int) { s.round[i], s.round[j] = s.round[j], s.round[i] })
	}
	f.Family, s.round = s.round[0], s.round[1:]
	vs := variants[f.Family]
	if len(vs) > 0 {
		f.Variant = vs[s.rng.IntN(len(vs))]
	}
	f.Gap = between(s.rng, s.gap)
	f.Hold = between(s.rng, s.hold)
	f.Pick = s.rng.Uint64()
	return f, true
}

// between is a uniformly random duration in [b[0], b[1]], at millisecond granularity.
func between(rng *rand.Rand, b [2]time.Duration) time.Duration {
	span := (b[1] - b[0]) / time.Millisecond
	if span <= 0 {
		return b[0]
	}
	return b[0] + time.Duration(rng.Int64N(int64(span)+1))*time.Millisecond
}
