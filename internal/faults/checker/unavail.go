package checker

import (
	"slices"
	"sort"
	"strings"

	"github.com/weir-mq/weir/internal/faults/history"
)

// fOrder is the order of functions in Result.Ops; others follow by name.
var fOrder = []string{
	history.FSend, history.FTxn, history.FPoll, history.FAssign, history.FCommit,
	history.FFetchOffsets, history.FShareDeliver, history.FShareAck, history.FNemesis, history.FFinalRead,
}

// countAndUnavailability counts ops by function and outcome, lists the nemesis windows, and
// measures the longest intervals without an ok send or txn completing.
func (c *check) countAndUnavailability() {
	counts := make(map[string]*OpCount)
	var okTimes []int64
	for i := range c.ops {
		o := int32(i)
		f := c.inv(o).F
		oc := counts[f]
		if oc == nil {
			oc = &OpCount{F: f}
			counts[f] = oc
		}
		switch c.ops[i].typ {
		case history.OK:
			oc.OK++
			if f == history.FSend || f == history.FTxn {
				okTimes = append(okTimes, c.comp(o).Time)
			}
		case history.Fail:
			oc.Fail++
		default:
			oc.Info++
		}
	}
	fs := make([]string, 0, len(counts))
	for f := range counts {
		fs = append(fs, f)
	}
	rank := func(f string) int {
		if i := slices.Index(fOrder, f); i >= 0 {
			return i
		}
		return len(fOrder)
	}
	sort.Slice(fs, func(i, j int) bool {
		if ri, rj := rank(fs[i]), rank(fs[j]); ri != rj {
			return ri < rj
		}
		return fs[i] < fs[j]
	})
	for _, f := range fs {
		c.res.Ops = append(c.res.Ops, *counts[f])
	}

	if len(c.lines) == 0 {
		return
	}
	slices.Sort(okTimes)
	last := c.lines[len(c.lines)-1].Time
	for i := range c.ops {
		o := int32(i)
		if c.inv(o).F != history.FNemesis {
			continue
		}
		start, end := c.inv(o).Time, last
		if c.ops[i].comp >= 0 && c.ops[i].comp != c.ops[i].inv {
			end = c.comp(o).Time
		}
		value := c.inv(o).Value
		if value == "" {
			value = c.comp(o).Value
		}
		kind := "unknown"
		if w := strings.Fields(value); len(w) > 0 {
			kind = w[0]
		}
		c.res.FaultCounts[kind]++
		gap, _ := longestGap(okTimes, start, end)
		c.res.Faults = append(c.res.Faults, Fault{
			Value: value, Index: c.inv(o).Index,
			StartSec: secs(start), Duration: secs(end - start), LongestUnavailableSec: secs(gap),
		})
	}
	runEnd := last
	for i := range c.lines {
		if c.lines[i].F == history.FFinalRead && c.lines[i].Type == history.Invoke {
			runEnd = c.lines[i].Time
			break
		}
	}
	gap, at := longestGap(okTimes, c.lines[0].Time, runEnd)
	c.res.LongestUnavailableSec, c.res.LongestUnavailableAtSec = secs(gap), secs(at)
}

// longestGap returns the longest interval in [start, end] containing none of the sorted times,
// and where it starts.
func longestGap(times []int64, start, end int64) (gap, at int64) {
	if end <= start {
		return 0, start
	}
	i := sort.Search(len(times), func(i int) bool { return times[i] > start })
	prev := start
	for ; i < len(times) && times[i] < end; i++ {
		if d := times[i] - prev; d > gap {
			gap, at = d, prev
		}
		prev = times[i]
	}
	if d := end - prev; d > gap {
		gap, at = d, prev
	}
	return gap, at
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }

// result finishes the Result.
func (c *check) result() Result {
	c.res.anomaly(KindDuplicate).Safety = c.opts.Idempotent
	c.res.Mops = c.mops
	return c.res
}
