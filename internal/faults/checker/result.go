package checker

import (
	"fmt"
	"sort"
	"strings"
)

// Anomaly kinds, in the order a Result lists them. doc.go defines each.
const (
	KindLost                = "lost-write"
	KindUnseen              = "unseen"
	KindDuplicate           = "duplicate"
	KindInconsistentOffsets = "inconsistent-offsets"
	KindNonmonotonicSend    = "nonmonotonic-send"
	KindNonmonotonicPoll    = "nonmonotonic-poll"
	KindSkippedPoll         = "skipped-poll"
	KindAbortedRead         = "aborted-read"
	KindUncommittedRead     = "uncommitted-read"
	KindPhantomRead         = "phantom-read"
	KindG1c                 = "G1c"
	KindCommitRegression    = "committed-offset-regression"
	KindFencedCommit        = "fenced-commit-accepted"
	KindShareRedelivered    = "share-redelivered-after-accept"
	KindShareDeliveryCount  = "share-delivery-count-exceeded"
)

// kinds lists every kind in order; safety says whether it counts against Valid (duplicates do
// only with Options.Idempotent, decided in result()).
var kinds = []struct {
	kind   string
	safety bool
}{
	{KindLost, true},
	{KindUnseen, false},
	{KindDuplicate, true},
	{KindInconsistentOffsets, true},
	{KindNonmonotonicSend, true},
	{KindNonmonotonicPoll, true},
	{KindSkippedPoll, true},
	{KindAbortedRead, true},
	{KindUncommittedRead, false},
	{KindPhantomRead, true},
	{KindG1c, true},
	{KindCommitRegression, true},
	{KindFencedCommit, true},
	{KindShareRedelivered, true},
	{KindShareDeliveryCount, true},
}

// maxExamples bounds the examples kept per anomaly kind.
const maxExamples = 20

// Result is what Check found. It marshals to JSON.
type Result struct {
	// Anomalies has one entry per kind, in a fixed order, including kinds with no cases.
	Anomalies []Anomaly `json:"anomalies"`
	// Ops counts completed operations by function and outcome.
	Ops []OpCount `json:"ops"`
	// Mops is the number of micro-operations in the history's completed ops.
	Mops int `json:"mops"`
	// Faults are the nemesis windows, in order, each with its unavailability.
	Faults []Fault `json:"faults"`
	// FaultCounts counts the nemesis windows by kind (the first word of their Value).
	FaultCounts map[string]int `json:"fault_counts"`
	// LongestUnavailableSec is the longest interval of the run (from its first line to the
	// final read, or the last line) in which no send or txn completed ok; it starts at
	// LongestUnavailableAtSec.
	LongestUnavailableSec   float64 `json:"longest_unavailable_s"`
	LongestUnavailableAtSec float64 `json:"longest_unavailable_at_s"`
}

// Anomaly is one kind of anomaly: how many cases and a few examples.
type Anomaly struct {
	Kind string `json:"kind"`
	// Safety: a case of this kind makes the result invalid.
	Safety   bool      `json:"safety"`
	Count    int       `json:"count"`
	Examples []Example `json:"examples,omitempty"`
}

// Example is one case of an anomaly. Partition and Offset are -1 where they do not apply.
type Example struct {
	Topic     string  `json:"topic,omitempty"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Value     int64   `json:"value,omitempty"`
	Values    []int64 `json:"values,omitempty"`
	Offsets   []int64 `json:"offsets,omitempty"`
	Group     string  `json:"group,omitempty"`
	// Ops are the history indexes (of the completion lines) of the operations involved.
	Ops    []int64 `json:"ops,omitempty"`
	Detail string  `json:"detail"`
}

// OpCount counts one function's completed operations by outcome. Info includes operations
// that never completed.
type OpCount struct {
	F    string `json:"f"`
	OK   int    `json:"ok"`
	Fail int    `json:"fail"`
	Info int    `json:"info"`
}

// Fault is one nemesis window (its invocation to its completion, or to the end of the history).
type Fault struct {
	Value    string  `json:"value"`
	Index    int64   `json:"index"`
	StartSec float64 `json:"start_s"`
	Duration float64 `json:"duration_s"`
	// LongestUnavailableSec is the longest interval inside the window in which no send or txn
	// completed ok.
	LongestUnavailableSec float64 `json:"longest_unavailable_s"`
}

func newResult() Result {
	r := Result{FaultCounts: map[string]int{}}
	for _, k := range kinds {
		r.Anomalies = append(r.Anomalies, Anomaly{Kind: k.kind, Safety: k.safety})
	}
	return r
}

// anomaly returns the entry of a kind.
func (r *Result) anomaly(kind string) *Anomaly {
	for i := range r.Anomalies {
		if r.Anomalies[i].Kind == kind {
			return &r.Anomalies[i]
		}
	}
	panic("checker: unknown anomaly kind " + kind)
}

// add counts one case of kind, keeping the example if there is room.
func (r *Result) add(kind string, ex Example) {
	a := r.anomaly(kind)
	a.Count++
	if len(a.Examples) < maxExamples {
		a.Examples = append(a.Examples, ex)
	}
}

// Count is the number of cases of kind.
func (r Result) Count(kind string) int {
	for _, a := range r.Anomalies {
		if a.Kind == kind {
			return a.Count
		}
	}
	return 0
}

// Valid says the history shows no safety anomaly. Unavailability is not an anomaly.
func (r Result) Valid() bool {
	for _, a := range r.Anomalies {
		if a.Safety && a.Count > 0 {
			return false
		}
	}
	return true
}

// Summary is a human-readable table: each anomaly kind with its count and first example, the
// op counts, the faults and the unavailability.
func (r Result) Summary() string {
	var b strings.Builder
	verdict := "VALID"
	if !r.Valid() {
		verdict = "INVALID"
	}
	fmt.Fprintf(&b, "%s: %d mops\n\n", verdict, r.Mops)
	fmt.Fprintf(&b, "%-32s %8s  %s\n", "anomaly", "count", "first example")
	for _, a := range r.Anomalies {
		name := a.Kind
		if !a.Safety {
			name += " (info)"
		}
		first := ""
		if len(a.Examples) > 0 {
			first = a.Examples[0].String()
		}
		fmt.Fprintf(&b, "%-32s %8d  %s\n", name, a.Count, first)
	}
	fmt.Fprintf(&b, "\n%-16s %9s %9s %9s\n", "op", "ok", "fail", "info")
	for _, o := range r.Ops {
		fmt.Fprintf(&b, "%-16s %9d %9d %9d\n", o.F, o.OK, o.Fail, o.Info)
	}
	if len(r.Faults) > 0 {
		kinds := make([]string, 0, len(r.FaultCounts))
		for k := range r.FaultCounts {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		fmt.Fprintf(&b, "\nfaults:")
		for _, k := range kinds {
			fmt.Fprintf(&b, " %s=%d", k, r.FaultCounts[k])
		}
		fmt.Fprintf(&b, "\n%9s %9s %15s  %s\n", "start_s", "dur_s", "unavailable_s", "fault")
		for _, f := range r.Faults {
			fmt.Fprintf(&b, "%9.3f %9.3f %15.3f  %s\n", f.StartSec, f.Duration, f.LongestUnavailableSec, f.Value)
		}
	}
	fmt.Fprintf(&b, "\nlongest unavailability: %.3f s at %.3f s\n", r.LongestUnavailableSec, r.LongestUnavailableAtSec)
	return b.String()
}

// String is a one-line rendering of an example.
func (e Example) String() string {
	var b strings.Builder
	if e.Partition >= 0 {
		fmt.Fprintf(&b, "%s/%d", e.Topic, e.Partition)
		if e.Offset >= 0 {
			fmt.Fprintf(&b, "@%d", e.Offset)
		}
		b.WriteString(" ")
	}
	if e.Group != "" {
		fmt.Fprintf(&b, "group %s ", e.Group)
	}
	b.WriteString(e.Detail)
	if len(e.Ops) > 0 {
		fmt.Fprintf(&b, " (ops %v)", e.Ops)
	}
	return b.String()
}
