package checker

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weir-mq/weir/internal/faults/history"
)

// TestRandomValidHistories checks that simulated histories of a correct system are valid.
func TestRandomValidHistories(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	for seed := range uint64(seeds) {
		lines := newSim(seed, 1+int(seed%4)).run(300+int(seed%7)*100, seed%5 != 0)
		r := Check(lines, Options{Idempotent: true})
		if !r.Valid() {
			t.Fatalf("seed %d: %d lines\n%s", seed, len(lines), r.Summary())
		}
		if seed%5 != 0 && r.Count(KindUnseen) != 0 {
			t.Fatalf("seed %d: unseen after a final read\n%s", seed, r.Summary())
		}
	}
}

// TestRandomHistoriesCoverTheModel guards the generator: over many seeds it must produce the
// situations the checker has to tolerate.
func TestRandomHistoriesCoverTheModel(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(40) {
		lines := newSim(seed, 3).run(800, true)
		r := Check(lines, Options{Idempotent: true})
		if r.Count(KindUncommittedRead) > 0 {
			seen["uncommitted-read"] = true
		}
		for _, o := range r.Ops {
			if o.OK > 0 {
				seen[o.F+" ok"] = true
			}
			if o.Fail > 0 {
				seen[o.F+" fail"] = true
			}
			if o.Info > 0 {
				seen[o.F+" info"] = true
			}
		}
	}
	for _, w := range []string{"send ok", "send fail", "send info", "txn ok", "txn fail", "txn info", "poll ok",
		"poll info", "assign ok", "commit ok", "commit fail", "fetch-offsets ok", "share-deliver ok", "share-ack ok",
		"share-ack fail", "nemesis ok", "final-read ok"} {
		if !seen[w] {
			t.Errorf("no %s in 40 histories", w)
		}
	}
}

// injection mutates a valid history into one with an anomaly of kind; it returns false when the
// history offers no place for it.
type injection struct {
	kind   string
	inject func(lines []history.Op) ([]history.Op, bool)
}

// completions returns the positions of ok completion lines of f, with their invoke positions.
func completions(lines []history.Op, f string) (comps []int) {
	for i, l := range lines {
		if l.F == f && l.Type == history.OK {
			comps = append(comps, i)
		}
	}
	return comps
}

// appendOp appends an invoke and an ok line of op by a fresh process.
func appendOp(lines []history.Op, op history.Op) []history.Op {
	op.Process = 5000 + len(lines)
	inv := op
	inv.Type, inv.Mops = history.Invoke, nil
	return append(lines, inv, op)
}

// reindex numbers lines and gives inserted ones a time between their neighbours'.
func reindex(lines []history.Op) []history.Op {
	for i := range lines {
		lines[i].Index = int64(i)
		if i > 0 && lines[i].Time < lines[i-1].Time {
			lines[i].Time = lines[i-1].Time
		}
	}
	return lines
}

// valueAt finds a value of an op completing ok with function f matching ok, and its mop.
func findMop(lines []history.Op, f string, typ history.Type, ok func(history.Op, history.Mop) bool) (int, int, bool) {
	for i, l := range lines {
		if l.F != f || l.Type != typ {
			continue
		}
		for j, m := range l.Mops {
			if ok(l, m) {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

var injections = []injection{
	{KindLost, func(lines []history.Op) ([]history.Op, bool) {
		// Drop every read of an acknowledged value that is not its partition's last.
		i, j, ok := findMop(lines, history.FSend, history.OK, func(_ history.Op, m history.Mop) bool { return m.Offset == 0 })
		if !ok {
			return nil, false
		}
		v := lines[i].Mops[j]
		for k := range lines {
			if lines[k].F == history.FPoll {
				lines[k].Mops = slices.DeleteFunc(slices.Clone(lines[k].Mops), func(m history.Mop) bool {
					return m.Value == v.Value && m.Partition == v.Partition
				})
			}
		}
		return lines, true
	}},
	{KindDuplicate, func(lines []history.Op) ([]history.Op, bool) {
		i, j, ok := findMop(lines, history.FPoll, history.OK, func(history.Op, history.Mop) bool { return true })
		if !ok {
			return nil, false
		}
		m := lines[i].Mops[j]
		m.Offset += 1 << 30
		return appendOp(lines, history.Op{Type: history.OK, F: history.FPoll, Mops: []history.Mop{m}}), true
	}},
	{KindInconsistentOffsets, func(lines []history.Op) ([]history.Op, bool) {
		i, j, ok := findMop(lines, history.FSend, history.OK, func(history.Op, history.Mop) bool { return true })
		if !ok {
			return nil, false
		}
		m := lines[i].Mops[j]
		m.Value = 1 << 40
		lines = appendOp(lines, history.Op{Type: history.OK, F: history.FSend, Mops: []history.Mop{m}})
		return lines, true
	}},
	{KindNonmonotonicSend, func(lines []history.Op) ([]history.Op, bool) {
		i, j, ok := findMop(lines, history.FSend, history.OK, func(_ history.Op, m history.Mop) bool { return m.Offset > 0 })
		if !ok {
			return nil, false
		}
		m := lines[i].Mops[j]
		m.Offset, m.Value = m.Offset-1, 1<<42
		return appendOp(lines, history.Op{Type: history.OK, F: history.FSend, Mops: []history.Mop{m}}), true
	}},
	{KindNonmonotonicPoll, func(lines []history.Op) ([]history.Op, bool) {
		i, j, ok := findMop(lines, history.FPoll, history.OK, func(l history.Op, m history.Mop) bool { return len(l.Mops) >= 2 })
		if !ok {
			return nil, false
		}
		ms := slices.Clone(lines[i].Mops)
		// Read the same record twice in one poll.
		lines[i].Mops = slices.Insert(ms, j+1, ms[j])
		return lines, true
	}},
	{KindSkippedPoll, func(lines []history.Op) ([]history.Op, bool) {
		// A poll that drops the middle of three consecutive reads of a partition.
		i, j, ok := findMop(lines, history.FPoll, history.OK, func(l history.Op, m history.Mop) bool {
			n := 0
			for _, o := range l.Mops {
				if o.Partition == m.Partition {
					n++
				}
			}
			return n >= 3
		})
		if !ok {
			return nil, false
		}
		ms := slices.Clone(lines[i].Mops)
		for k := j + 1; k < len(ms); k++ {
			if ms[k].Partition == ms[j].Partition {
				lines[i].Mops = slices.Delete(ms, k, k+1)
				return lines, true
			}
		}
		return nil, false
	}},
	{KindAbortedRead, func(lines []history.Op) ([]history.Op, bool) {
		i, j, ok := findMop(lines, history.FTxn, history.Fail, func(history.Op, history.Mop) bool { return true })
		if !ok {
			return nil, false
		}
		m := lines[i].Mops[j]
		return appendOp(lines, history.Op{Type: history.OK, F: history.FPoll, Isolation: readCommitted, Mops: []history.Mop{m}}), true
	}},
	{KindPhantomRead, func(lines []history.Op) ([]history.Op, bool) {
		return appendOp(lines, history.Op{Type: history.OK, F: history.FPoll, Mops: []history.Mop{{Topic: "t", Offset: 1 << 40, Value: 1 << 41}}}), true
	}},
	{KindG1c, func(lines []history.Op) ([]history.Op, bool) {
		// A read_committed poll that returned a committed txn's record before the txn began.
		i, j, ok := findMop(lines, history.FTxn, history.OK, func(history.Op, history.Mop) bool { return true })
		if !ok {
			return nil, false
		}
		m := lines[i].Mops[j]
		p := history.Op{Process: 6000, Type: history.Invoke, F: history.FPoll, Isolation: readCommitted, Time: lines[0].Time}
		done := p
		done.Type, done.Mops = history.OK, []history.Mop{m}
		return reindex(slices.Insert(lines, 0, p, done)), true
	}},
	{KindCommitRegression, func(lines []history.Op) ([]history.Op, bool) {
		i, j, ok := findMop(lines, history.FCommit, history.OK, func(_ history.Op, m history.Mop) bool { return m.Offset > 0 })
		if !ok {
			return nil, false
		}
		m := lines[i].Mops[j]
		m.Offset = 0
		return appendOp(lines, history.Op{Type: history.OK, F: history.FFetchOffsets, Group: lines[i].Group, Mops: []history.Mop{m}}), true
	}},
	{KindFencedCommit, func(lines []history.Op) ([]history.Op, bool) {
		last := int32(0)
		for _, l := range lines {
			if l.F == history.FAssign && l.Type == history.OK && l.Group == "g" {
				last = l.Generation
			}
		}
		if last < 2 {
			return nil, false
		}
		return appendOp(lines, history.Op{Type: history.OK, F: history.FCommit, Group: "g", Generation: last - 1,
			Mops: []history.Mop{{Topic: "t", Offset: 0}}}), true
	}},
	{KindShareRedelivered, func(lines []history.Op) ([]history.Op, bool) {
		i, j, ok := findMop(lines, history.FShareAck, history.OK, func(_ history.Op, m history.Mop) bool { return m.Ack == "accept" })
		if !ok {
			return nil, false
		}
		m := lines[i].Mops[j]
		m.Ack, m.DeliveryCount = "", 2
		return appendOp(lines, history.Op{Type: history.OK, F: history.FShareDeliver, Group: lines[i].Group, Mops: []history.Mop{m}}), true
	}},
	{KindShareDeliveryCount, func(lines []history.Op) ([]history.Op, bool) {
		return appendOp(lines, history.Op{Type: history.OK, F: history.FShareDeliver, Group: "sg",
			Mops: []history.Mop{{Topic: "s", Offset: 1 << 40, DeliveryCount: 6}}}), true
	}},
}

// TestRandomInjectedAnomalies injects each anomaly into valid simulated histories: the checker
// must find it.
func TestRandomInjectedAnomalies(t *testing.T) {
	for _, inj := range injections {
		t.Run(inj.kind, func(t *testing.T) {
			found := 0
			for seed := range uint64(30) {
				lines := newSim(seed, 1+int(seed%3)).run(600, true)
				mut, ok := inj.inject(slices.Clone(lines))
				if !ok {
					continue
				}
				found++
				r := Check(mut, Options{Idempotent: true})
				if r.Count(inj.kind) == 0 || r.Valid() {
					t.Fatalf("seed %d: %s not found\n%s", seed, inj.kind, r.Summary())
				}
			}
			if found < 10 {
				t.Fatalf("only %d of 30 histories had a place for %s", found, inj.kind)
			}
		})
	}
}

// BenchmarkCheck checks a simulated history of about a million mops.
func BenchmarkCheck(b *testing.B) {
	s := newSim(1, 8)
	lines := s.run(270_000, true)
	mops := 0
	for _, l := range lines {
		mops += len(l.Mops)
	}
	b.Logf("%d lines, %d mops", len(lines), mops)
	b.ResetTimer()
	for range b.N {
		r := Check(lines, Options{Idempotent: true})
		if !r.Valid() {
			b.Fatal(fmt.Sprint(r.Summary()))
		}
	}
}
