package faults

import (
	"fmt"
	"sort"
	"strings"

	"github.com/weir-mq/weir/internal/faults/history"
)

// BasicVerdict is BasicCheck's finding: anomaly counts by kind and a few examples of each.
type BasicVerdict struct {
	// Acked is how many values were acknowledged (ok sends, committed transactions' sends).
	Acked int `json:"acked"`
	// FinalRead is how many records the final read returned.
	FinalRead int `json:"final_read"`
	// Anomalies counts each kind: "lost" (acknowledged, not in the final read at its offset),
	// "offset-conflict" (two values read or acknowledged at one offset), "duplicate" (one value
	// at two offsets), "aborted-read" (a value of an aborted transaction read under
	// read_committed), "no-final-read" (the history has no completed final read).
	Anomalies map[string]int      `json:"anomalies"`
	Examples  map[string][]string `json:"examples,omitempty"`
}

// maxExamples bounds the examples kept per anomaly kind.
const maxExamples = 10

func (v *BasicVerdict) add(kind, example string) {
	v.Anomalies[kind]++
	if len(v.Examples[kind]) < maxExamples {
		v.Examples[kind] = append(v.Examples[kind], example)
	}
}

type tpo struct {
	t string
	p int32
	o int64
}

func (k tpo) String() string { return fmt.Sprintf("%s/%d@%d", k.t, k.p, k.o) }

// BasicCheck is the runner's own minimal check, used until a full checker is given
// (RunConfig.Check): every acknowledged value is in the final read at its acknowledged offset,
// no offset holds two values, no value sits at two offsets (the producers are idempotent or
// transactional, and values are unique), and read_committed polls see no aborted transaction's
// value. It needs a final read (a final-read op that completed ok or info, with its polls).
func BasicCheck(ops []history.Op) (valid bool, summary string, verdict any) {
	v := &BasicVerdict{Anomalies: map[string]int{}, Examples: map[string][]string{}}
	finalProcs := map[int]bool{}
	finalDone := false
	for _, op := range ops {
		if op.F == history.FFinalRead {
			finalProcs[op.Process] = true
			if op.Type == history.OK || op.Type == history.Info {
				finalDone = true
			}
		}
	}
	if !finalDone {
		v.add("no-final-read", "the history has no completed final-read op")
	}
	atOffset := map[tpo]int64{}           // the value read or acknowledged at each offset
	offsetsOf := map[int64]map[tpo]bool{} // the offsets each value was read at
	final := map[tpo]int64{}
	aborted := map[int64]bool{}
	var acked []history.Mop
	see := func(k tpo, val int64, what string) {
		if old, ok := atOffset[k]; ok && old != val {
			v.add("offset-conflict", fmt.Sprintf("%v holds %d and %d (%s)", k, old, val, what))
			return
		}
		atOffset[k] = val
	}
	for _, op := range ops {
		switch {
		case op.F == history.FSend && op.Type == history.OK, op.F == history.FTxn && op.Type == history.OK:
			for _, m := range op.Mops {
				acked = append(acked, m)
				see(tpo{m.Topic, m.Partition, m.Offset}, m.Value, fmt.Sprintf("acknowledged by op %d", op.Index))
			}
		case op.F == history.FTxn && op.Type == history.Fail:
			for _, m := range op.Mops {
				aborted[m.Value] = true
			}
		}
	}
	for _, op := range ops {
		if op.F != history.FPoll || op.Type != history.OK {
			continue
		}
		for _, m := range op.Mops {
			k := tpo{m.Topic, m.Partition, m.Offset}
			see(k, m.Value, fmt.Sprintf("read by op %d", op.Index))
			if offsetsOf[m.Value] == nil {
				offsetsOf[m.Value] = map[tpo]bool{}
			}
			offsetsOf[m.Value][k] = true
			if finalProcs[op.Process] {
				final[k] = m.Value
			}
			if op.Isolation == readCommitted && aborted[m.Value] {
				v.add("aborted-read", fmt.Sprintf("value %d of an aborted transaction read at %v by op %d", m.Value, k, op.Index))
			}
		}
	}
	v.Acked, v.FinalRead = len(acked), len(final)
	if finalDone {
		for _, m := range acked {
			k := tpo{m.Topic, m.Partition, m.Offset}
			if got, ok := final[k]; !ok || got != m.Value {
				v.add("lost", fmt.Sprintf("value %d acknowledged at %v, final read has %s", m.Value, k, finalAt(final, k)))
			}
		}
	}
	var dupValues []int64
	for val, ks := range offsetsOf {
		if len(ks) > 1 && val >= 0 {
			dupValues = append(dupValues, val)
		}
	}
	sort.Slice(dupValues, func(i, j int) bool { return dupValues[i] < dupValues[j] })
	for _, val := range dupValues {
		var where []string
		for k := range offsetsOf[val] {
			where = append(where, k.String())
		}
		sort.Strings(where)
		v.add("duplicate", fmt.Sprintf("value %d at %s", val, strings.Join(where, ", ")))
	}
	valid = len(v.Anomalies) == 0
	var kinds []string
	for k, n := range v.Anomalies {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	if valid {
		summary = fmt.Sprintf("valid: %d acknowledged values all in the final read (%d records); no offset conflicts, duplicates or aborted reads", v.Acked, v.FinalRead)
	} else {
		summary = fmt.Sprintf("INVALID: %s (%d acknowledged, %d records in the final read)", strings.Join(kinds, ", "), v.Acked, v.FinalRead)
	}
	return valid, summary, v
}

func finalAt(final map[tpo]int64, k tpo) string {
	if got, ok := final[k]; ok {
		return fmt.Sprintf("%d there", got)
	}
	return "nothing there"
}
