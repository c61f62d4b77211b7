package faults

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/weir-mq/weir/internal/faults/history"
)

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 4)) }

// countOps counts the client ops' completions by function, and in total. Nemesis and
// final-read markers are not client ops.
func countOps(ops []history.Op) (map[string]OpCounts, OpCounts) {
	by := map[string]OpCounts{}
	var total OpCounts
	for _, op := range ops {
		if op.F == history.FNemesis || op.F == history.FFinalRead {
			continue
		}
		c := by[op.F]
		switch op.Type {
		case history.OK:
			c.OK++
			total.OK++
		case history.Fail:
			c.Fail++
			total.Fail++
		case history.Info:
			c.Info++
			total.Info++
		}
		by[op.F] = c
	}
	return by, total
}

// maxUnavailable is the longest stretch without an acknowledged write (ok send or txn) from the
// first write's invocation to the last write's invocation (the workload's span).
func maxUnavailable(ops []history.Op) time.Duration {
	var first, last int64 = -1, -1
	var acks []int64
	for _, op := range ops {
		if op.F != history.FSend && op.F != history.FTxn {
			continue
		}
		switch op.Type {
		case history.Invoke:
			if first < 0 {
				first = op.Time
			}
			last = op.Time
		case history.OK:
			acks = append(acks, op.Time)
		}
	}
	if first < 0 {
		return 0
	}
	slices.Sort(acks)
	longest, prev := int64(0), first
	for _, t := range acks {
		if t > last {
			break
		}
		longest = max(longest, t-prev)
		prev = max(prev, t)
	}
	longest = max(longest, last-prev)
	return time.Duration(longest)
}
