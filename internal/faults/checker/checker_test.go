package checker

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/weir-mq/weir/internal/faults/history"
)

// hist builds small histories by hand.
type hist struct {
	lines []history.Op
	now   int64
}

// line appends one line (100 ms after the previous one) and returns its index.
func (h *hist) line(op history.Op) int64 {
	h.now += 1e8
	op.Index = int64(len(h.lines))
	op.Time = h.now
	h.lines = append(h.lines, op)
	return op.Index
}

// invoke appends op's invoke line: op itself with Type invoke (send offsets unknown).
func (h *hist) invoke(op history.Op) int64 {
	op.Type = history.Invoke
	if op.F == history.FSend || op.F == history.FTxn {
		op.Mops = slices.Clone(op.Mops)
		for i := range op.Mops {
			op.Mops[i].Offset = -1
		}
	}
	if op.F == history.FPoll || op.F == history.FFetchOffsets || op.F == history.FShareDeliver {
		op.Mops = nil
	}
	return h.line(op)
}

// op appends op's invoke and completion lines and returns the completion's index.
func (h *hist) op(op history.Op) int64 {
	h.invoke(op)
	return h.line(op)
}

func m(p int32, off, v int64) history.Mop {
	return history.Mop{Topic: "t", Partition: p, Offset: off, Value: v}
}

func send(proc int, typ history.Type, mops ...history.Mop) history.Op {
	return history.Op{Process: proc, Type: typ, F: history.FSend, Mops: mops}
}

func txn(proc int, typ history.Type, mops ...history.Mop) history.Op {
	return history.Op{Process: proc, Type: typ, F: history.FTxn, Mops: mops}
}

func poll(proc int, rc bool, mops ...history.Mop) history.Op {
	op := history.Op{Process: proc, Type: history.OK, F: history.FPoll, Mops: mops}
	if rc {
		op.Isolation = readCommitted
	}
	return op
}

func assign(proc int, mops ...history.Mop) history.Op {
	return history.Op{Process: proc, Type: history.OK, F: history.FAssign, Mops: mops}
}

// only asserts that the result has exactly the given safety anomaly kinds and returns the first
// example of the first.
func only(t *testing.T, r Result, kinds ...string) Example {
	t.Helper()
	var got []string
	for _, a := range r.Anomalies {
		if a.Count > 0 && a.Safety {
			got = append(got, a.Kind)
		}
	}
	slices.Sort(got)
	want := slices.Clone(kinds)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("anomalies %v, want %v\n%s", got, want, r.Summary())
	}
	if r.Valid() != (len(kinds) == 0) {
		t.Fatalf("Valid() = %v with anomalies %v", r.Valid(), got)
	}
	if len(kinds) == 0 {
		return Example{}
	}
	return r.anomaly(kinds[0]).Examples[0]
}

func wantOps(t *testing.T, ex Example, ops ...int64) {
	t.Helper()
	if !slices.Equal(ex.Ops, ops) {
		t.Fatalf("example ops %v, want %v (%s)", ex.Ops, ops, ex)
	}
}

func TestCleanHistory(t *testing.T) {
	var h hist
	h.op(send(0, history.OK, m(0, 0, 1), m(0, 1, 2)))
	h.op(send(1, history.OK, m(1, 0, 3)))
	h.op(assign(2, m(0, 0, 0), m(1, 0, 0)))
	h.op(poll(2, false, m(0, 0, 1), m(1, 0, 3)))
	h.op(poll(2, false, m(0, 1, 2)))
	r := Check(h.lines, Options{Idempotent: true})
	only(t, r)
	if r.Count(KindUnseen) != 0 || r.Mops != 8 {
		t.Fatalf("unseen %d, mops %d\n%s", r.Count(KindUnseen), r.Mops, r.Summary())
	}
	if _, err := json.Marshal(r); err != nil {
		t.Fatal(err)
	}
}

func TestLostWrite(t *testing.T) {
	var h hist
	s := h.op(send(0, history.OK, m(0, 0, 1), m(0, 1, 2), m(0, 2, 3)))
	h.op(send(0, history.Info, m(0, -1, 4))) // unknown and never read: not lost
	p := h.op(poll(1, false, m(0, 0, 1)))
	p2 := h.op(poll(2, false, m(0, 2, 3)))
	r := Check(h.lines, Options{})
	ex := only(t, r, KindLost)
	if r.Count(KindLost) != 1 || ex.Value != 2 || ex.Offset != 1 {
		t.Fatalf("lost %d, example %+v", r.Count(KindLost), ex)
	}
	wantOps(t, ex, s, p2)
	_ = p
}

func TestUnseenAndFinalRead(t *testing.T) {
	var h hist
	s := h.op(send(0, history.OK, m(0, 0, 1), m(0, 1, 2)))
	h.op(poll(1, false, m(0, 0, 1)))
	r := Check(h.lines, Options{})
	only(t, r)
	if r.Count(KindUnseen) != 1 || r.anomaly(KindUnseen).Examples[0].Value != 2 {
		t.Fatalf("unseen: %+v", r.anomaly(KindUnseen))
	}
	// An ok final read reads every partition to its end: what it did not see is lost.
	fr := h.op(history.Op{Process: 9, Type: history.OK, F: history.FFinalRead})
	r = Check(h.lines, Options{})
	ex := only(t, r, KindLost)
	if ex.Value != 2 || r.Count(KindUnseen) != 1 {
		t.Fatalf("lost %+v, unseen %d", ex, r.Count(KindUnseen))
	}
	wantOps(t, ex, s, fr)
}

func TestDuplicate(t *testing.T) {
	var h hist
	s := h.op(send(0, history.OK, m(0, 0, 1)))
	h.op(send(0, history.OK, m(0, 1, 2)))
	p := h.op(poll(1, false, m(0, 0, 1), m(0, 1, 2), m(0, 2, 1)))
	r := Check(h.lines, Options{Idempotent: true})
	ex := only(t, r, KindDuplicate)
	if ex.Value != 1 || !slices.Equal(ex.Offsets, []int64{0, 2}) {
		t.Fatalf("example %+v", ex)
	}
	wantOps(t, ex, s, p)
	// Without idempotence a duplicate is counted but is no anomaly.
	r = Check(h.lines, Options{})
	only(t, r)
	if r.Count(KindDuplicate) != 1 {
		t.Fatal(r.Summary())
	}
}

func TestInconsistentOffsets(t *testing.T) {
	var h hist
	s := h.op(send(0, history.OK, m(0, 0, 1)))
	s2 := h.op(send(0, history.Info, m(0, -1, 2)))
	p := h.op(poll(1, false, m(0, 0, 2)))
	r := Check(h.lines, Options{})
	// Value 1 was acknowledged at offset 0 but 2 was read there: also a lost write? No later
	// offset was read, so value 1 is unseen, not lost.
	ex := only(t, r, KindInconsistentOffsets)
	if ex.Offset != 0 || !slices.Equal(ex.Values, []int64{1, 2}) {
		t.Fatalf("example %+v", ex)
	}
	wantOps(t, ex, s, s2, p)
}

func TestNonmonotonicPoll(t *testing.T) {
	var h hist
	h.op(send(0, history.OK, m(0, 0, 1), m(0, 1, 2), m(0, 2, 3)))
	h.op(assign(1, m(0, 0, 0)))
	p1 := h.op(poll(1, false, m(0, 0, 1), m(0, 1, 2)))
	p2 := h.op(poll(1, false, m(0, 1, 2), m(0, 2, 3)))
	r := Check(h.lines, Options{})
	ex := only(t, r, KindNonmonotonicPoll)
	if !slices.Equal(ex.Offsets, []int64{1, 1}) {
		t.Fatalf("example %+v", ex)
	}
	wantOps(t, ex, p1, p2)

	// An assignment resets the position: reading again from 0 is fine.
	var g hist
	g.op(send(0, history.OK, m(0, 0, 1), m(0, 1, 2)))
	g.op(assign(1, m(0, 0, 0)))
	g.op(poll(1, false, m(0, 0, 1), m(0, 1, 2)))
	g.op(assign(1, m(0, 0, 0)))
	g.op(poll(1, false, m(0, 0, 1)))
	only(t, Check(g.lines, Options{}))

	// Within one poll.
	var k hist
	k.op(send(0, history.OK, m(0, 0, 1), m(0, 1, 2)))
	k.op(poll(1, false, m(0, 1, 2), m(0, 0, 1)))
	only(t, Check(k.lines, Options{}), KindNonmonotonicPoll)
}

func TestSkippedPoll(t *testing.T) {
	var h hist
	h.op(send(0, history.OK, m(0, 0, 1), m(0, 1, 2), m(0, 2, 3)))
	h.op(poll(2, false, m(0, 1, 2)))
	h.op(assign(1, m(0, 0, 0)))
	p1 := h.op(poll(1, false, m(0, 0, 1)))
	p2 := h.op(poll(1, false, m(0, 2, 3)))
	r := Check(h.lines, Options{})
	ex := only(t, r, KindSkippedPoll)
	if ex.Offset != 1 || !slices.Equal(ex.Offsets, []int64{1}) {
		t.Fatalf("example %+v", ex)
	}
	wantOps(t, ex, p1, p2)

	// From the assigned offset: the first read must be the first record at or after it.
	var a hist
	a.op(send(0, history.OK, m(0, 0, 1), m(0, 1, 2), m(0, 2, 3)))
	a.op(poll(2, false, m(0, 0, 1), m(0, 1, 2)))
	a.op(assign(1, m(0, 1, 0)))
	a.op(poll(1, false, m(0, 2, 3)))
	only(t, Check(a.lines, Options{}), KindSkippedPoll)

	// Under read_committed, aborted records and control records leave gaps legitimately, but a
	// committed record must not be skipped.
	build := func(outcome history.Type) []history.Op {
		var g hist
		g.op(txn(0, history.OK, m(0, 0, 1)))  // control record at 1
		g.op(txn(0, outcome, m(0, 2, 2)))     // control record at 3
		g.op(send(3, history.OK, m(0, 4, 3))) // not transactional
		g.op(poll(2, false, m(0, 0, 1), m(0, 2, 2), m(0, 4, 3)))
		g.op(assign(1, m(0, 0, 0)))
		g.op(poll(1, true, m(0, 0, 1)))
		g.op(poll(1, true, m(0, 4, 3)))
		return g.lines
	}
	only(t, Check(build(history.Fail), Options{}))
	ex = only(t, Check(build(history.OK), Options{}), KindSkippedPoll)
	if ex.Offset != 2 {
		t.Fatalf("example %+v", ex)
	}
}

func TestAbortedAndUncommittedReads(t *testing.T) {
	var h hist
	tf := h.op(txn(0, history.Fail, m(0, 0, 1)))
	h.op(poll(1, false, m(0, 0, 1))) // read_uncommitted may see aborted records
	r := Check(h.lines, Options{})
	only(t, r)

	p := h.op(poll(2, true, m(0, 0, 1)))
	r = Check(h.lines, Options{})
	ex := only(t, r, KindAbortedRead)
	wantOps(t, ex, tf, p)

	var g hist
	sf := g.op(send(0, history.Fail, m(0, -1, 1)))
	p = g.op(poll(1, false, m(0, 0, 1)))
	ex = only(t, Check(g.lines, Options{}), KindAbortedRead)
	wantOps(t, ex, sf, p)

	var u hist
	ti := u.op(txn(0, history.Info, m(0, -1, 1)))
	p = u.op(poll(1, true, m(0, 0, 1)))
	r = Check(u.lines, Options{})
	only(t, r) // a weaker signal, not an anomaly
	if r.Count(KindUncommittedRead) != 1 {
		t.Fatal(r.Summary())
	}
	wantOps(t, r.anomaly(KindUncommittedRead).Examples[0], ti, p)
}

func TestPhantomRead(t *testing.T) {
	var h hist
	p := h.op(poll(1, false, m(0, 0, 7)))
	ex := only(t, Check(h.lines, Options{}), KindPhantomRead)
	wantOps(t, ex, p)
}

func TestG1cCycle(t *testing.T) {
	// Process 1 reads T2's record and then commits T1; process 2 reads T1's record and then
	// commits T2: each txn's output fed the other's input.
	var h hist
	t1 := txn(1, history.OK, m(0, 0, 1))
	t2 := txn(2, history.OK, m(1, 0, 2))
	p1 := h.op(poll(1, true, m(1, 0, 2)))
	i1 := h.invoke(t1)
	p2 := h.op(poll(2, true, m(0, 0, 1)))
	i2 := h.invoke(t2)
	c1 := h.line(t1)
	c2 := h.line(t2)
	_, _ = i1, i2
	r := Check(h.lines, Options{})
	ex := only(t, r, KindG1c)
	wantOps(t, ex, p1, p2, c1, c2)
	if r.Count(KindG1c) != 1 || !strings.Contains(ex.Detail, "2 txn(s) and 2 poll(s)") {
		t.Fatalf("%d cycles: %s", r.Count(KindG1c), ex)
	}

	// Log order against real time: T2 started after T1 committed, yet its record is below T1's.
	var g hist
	a := g.op(txn(1, history.OK, m(0, 2, 1)))
	b := g.op(txn(2, history.OK, m(0, 0, 2)))
	ex = only(t, Check(g.lines, Options{}), KindG1c, KindNonmonotonicSend)
	wantOps(t, ex, a, b)

	// The same records written by concurrent txns, in either order, and read: no cycle.
	for _, swap := range []bool{false, true} {
		var k hist
		x := txn(1, history.OK, m(0, 0, 1), m(1, 1, 3))
		y := txn(2, history.OK, m(0, 1, 2), m(1, 0, 4))
		k.invoke(x)
		k.invoke(y)
		if swap {
			x, y = y, x
		}
		k.line(x)
		k.line(y)
		k.op(poll(3, true, m(0, 0, 1), m(0, 1, 2), m(1, 0, 4), m(1, 1, 3)))
		only(t, Check(k.lines, Options{}))
	}
}

func TestCommittedOffsetRegression(t *testing.T) {
	commit := func(off int64) history.Op {
		return history.Op{Process: 1, Type: history.OK, F: history.FCommit, Group: "g", Generation: 1, Mops: []history.Mop{m(0, off, 0)}}
	}
	fetch := func(off int64) history.Op {
		return history.Op{Process: 2, Type: history.OK, F: history.FFetchOffsets, Group: "g", Mops: []history.Mop{m(0, off, 0)}}
	}
	var h hist
	c := h.op(commit(10))
	f := h.op(fetch(5))
	ex := only(t, Check(h.lines, Options{}), KindCommitRegression)
	if !slices.Equal(ex.Offsets, []int64{10, 5}) || ex.Group != "g" {
		t.Fatalf("example %+v", ex)
	}
	wantOps(t, ex, c, f)

	// A fetch concurrent with the commit may see the older offset.
	var g hist
	g.op(commit(5))
	g.invoke(fetch(5))
	g.op(commit(10))
	g.line(fetch(5))
	only(t, Check(g.lines, Options{}))
}

func TestFencedCommit(t *testing.T) {
	join := func(proc int, gen int32) history.Op {
		return history.Op{Process: proc, Type: history.OK, F: history.FAssign, Group: "g", Generation: gen, Mops: []history.Mop{m(0, 0, 0)}}
	}
	commit := history.Op{Process: 1, Type: history.OK, F: history.FCommit, Group: "g", Generation: 1, Mops: []history.Mop{m(0, 3, 0)}}
	var h hist
	h.op(join(1, 1))
	j := h.op(join(2, 2))
	c := h.op(commit)
	ex := only(t, Check(h.lines, Options{}), KindFencedCommit)
	wantOps(t, ex, j, c)

	// A commit invoked before the group moved on is not known to be stale.
	var g hist
	g.op(join(1, 1))
	g.invoke(commit)
	g.op(join(2, 2))
	g.line(commit)
	only(t, Check(g.lines, Options{}))

	// A refused commit is what should happen.
	var k hist
	k.op(join(1, 1))
	k.op(join(2, 2))
	fail := commit
	fail.Type, fail.Error = history.Fail, "ILLEGAL_GENERATION"
	k.op(fail)
	only(t, Check(k.lines, Options{}))
}

func TestShareGroups(t *testing.T) {
	deliver := func(proc int, dc int16) history.Op {
		return history.Op{Process: proc, Type: history.OK, F: history.FShareDeliver, Group: "sg",
			Mops: []history.Mop{{Topic: "s", Offset: 4, DeliveryCount: dc}}}
	}
	ack := func(proc int, a string) history.Op {
		return history.Op{Process: proc, Type: history.OK, F: history.FShareAck, Group: "sg",
			Mops: []history.Mop{{Topic: "s", Offset: 4, Ack: a}}}
	}
	var h hist
	h.op(deliver(1, 1))
	h.op(ack(1, "release"))
	h.op(deliver(2, 2))
	a := h.op(ack(2, "accept"))
	only(t, Check(h.lines, Options{}))
	d := h.op(deliver(1, 3))
	ex := only(t, Check(h.lines, Options{}), KindShareRedelivered)
	wantOps(t, ex, a, d)
	if ex.Offset != 4 || ex.Group != "sg" {
		t.Fatalf("example %+v", ex)
	}

	// A delivery concurrent with the accept, with the accepted delivery count: no anomaly.
	var g hist
	g.op(deliver(1, 1))
	g.invoke(deliver(2, 1))
	g.op(ack(1, "accept"))
	g.line(deliver(2, 1))
	only(t, Check(g.lines, Options{}))

	var k hist
	k.op(deliver(1, 5))
	only(t, Check(k.lines, Options{}))
	d = k.op(deliver(1, 6))
	ex = only(t, Check(k.lines, Options{}), KindShareDeliveryCount)
	wantOps(t, ex, d)
	only(t, Check(k.lines, Options{MaxDeliveryCount: 6}))
}

func TestUnavailabilityAndCounts(t *testing.T) {
	var h hist                                                                                  // lines 100 ms apart
	h.op(send(0, history.OK, m(0, 0, 1)))                                                       // ok at 0.2 s
	h.invoke(history.Op{Process: 9, F: history.FNemesis, Value: "pause 1 12s"})                 // 0.3 s
	h.op(send(0, history.Fail, m(0, -1, 2)))                                                    // 0.5 s
	h.op(send(0, history.Info, m(0, -1, 3)))                                                    // 0.7 s
	h.op(send(0, history.OK, m(0, 1, 4)))                                                       // ok at 0.9 s
	h.line(history.Op{Process: 9, Type: history.OK, F: history.FNemesis, Value: "pause 1 12s"}) // 1.0 s
	r := Check(h.lines, Options{})
	if len(r.Faults) != 1 || r.FaultCounts["pause"] != 1 {
		t.Fatalf("faults %+v %v", r.Faults, r.FaultCounts)
	}
	f := r.Faults[0]
	if !near(f.StartSec, 0.3) || !near(f.Duration, 0.7) || !near(f.LongestUnavailableSec, 0.6) {
		t.Fatalf("fault %+v", f)
	}
	if !near(r.LongestUnavailableSec, 0.7) || !near(r.LongestUnavailableAtSec, 0.2) {
		t.Fatalf("longest %v at %v", r.LongestUnavailableSec, r.LongestUnavailableAtSec)
	}
	want := OpCount{F: history.FSend, OK: 2, Fail: 1, Info: 1}
	if len(r.Ops) != 2 || r.Ops[0] != want {
		t.Fatalf("ops %+v", r.Ops)
	}
	s := r.Summary()
	for _, w := range []string{"VALID", KindLost, "pause 1 12s", "faults: pause=1", "longest unavailability: 0.700 s"} {
		if !strings.Contains(s, w) {
			t.Fatalf("summary lacks %q:\n%s", w, s)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

func TestPollOutcomesAndPositions(t *testing.T) {
	build := func(middle history.Type) []history.Op {
		var h hist
		h.op(send(0, history.OK, m(0, 0, 1), m(0, 1, 2), m(0, 2, 3)))
		h.op(poll(2, false, m(0, 0, 1), m(0, 1, 2), m(0, 2, 3)))
		h.op(assign(1, m(0, 0, 0)))
		h.op(poll(1, false, m(0, 0, 1)))
		p := poll(1, false)
		p.Type = middle
		h.op(p)
		h.op(poll(1, false, m(0, 2, 3)))
		return h.lines
	}
	// An info poll may have returned records the history does not show: the position is unknown.
	only(t, Check(build(history.Info), Options{}))
	// A failed poll returned nothing: the consumer skipped offset 1.
	only(t, Check(build(history.Fail), Options{}), KindSkippedPoll)
}

func TestTxnOffsetCommitRegression(t *testing.T) {
	var h hist
	// A consume-transform-produce txn commits offset 7 of t/1 for group g with its record.
	tx := txn(1, history.OK, m(0, 0, 1), m(1, 7, 0))
	tx.Group, tx.Generation = "g", 1
	c := h.op(tx)
	f := h.op(history.Op{Process: 2, Type: history.OK, F: history.FFetchOffsets, Group: "g", Mops: []history.Mop{m(1, 3, 0)}})
	ex := only(t, Check(h.lines, Options{}), KindCommitRegression)
	wantOps(t, ex, c, f)
}

func TestNonmonotonicSend(t *testing.T) {
	var h hist
	a := h.op(send(0, history.OK, m(0, 5, 1)))
	h.op(txn(1, history.Fail, m(1, 9, 2))) // another partition
	b := h.op(send(2, history.OK, m(0, 3, 3)))
	ex := only(t, Check(h.lines, Options{}), KindNonmonotonicSend)
	if !slices.Equal(ex.Offsets, []int64{5, 3}) || ex.Value != 3 {
		t.Fatalf("example %+v", ex)
	}
	wantOps(t, ex, a, b)

	// Concurrent sends may be acknowledged in any order.
	var g hist
	x := send(0, history.OK, m(0, 5, 1))
	g.invoke(x)
	g.op(send(2, history.OK, m(0, 3, 3)))
	g.line(x)
	only(t, Check(g.lines, Options{}))
}
