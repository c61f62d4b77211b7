package faults

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/faults/history"
)

// TestSchedulerRounds: every family comes once per round, gaps and holds stay in their bounds,
// variants are the family's, and one seed gives one schedule.
func TestSchedulerRounds(t *testing.T) {
	fams := Families
	gap := [2]time.Duration{5 * time.Second, 15 * time.Second}
	hold := [2]time.Duration{time.Second, 30 * time.Second}
	s := newScheduler(42, fams, gap, hold)
	var got []fault
	for round := 0; round < 60; round++ {
		var seen []string
		for range fams {
			f, ok := s.next()
			if !ok {
				t.Fatal("no fault")
			}
			seen = append(seen, f.Family)
			if f.Gap < gap[0] || f.Gap > gap[1] || f.Hold < hold[0] || f.Hold > hold[1] {
				t.Fatalf("fault %+v outside gap %v hold %v", f, gap, hold)
			}
			if !slices.Contains(variants[f.Family], f.Variant) {
				t.Fatalf("fault %+v: variant not of its family", f)
			}
			got = append(got, f)
		}
		slices.Sort(seen)
		if want := slices.Sorted(slices.Values(fams)); !slices.Equal(seen, want) {
			t.Fatalf("round %d: families %v, want each of %v once", round, seen, want)
		}
	}
	again := newScheduler(42, fams, gap, hold)
	for i, f := range got {
		if g, _ := again.next(); g != f {
			t.Fatalf("fault %d: %+v then %+v from the same seed", i, f, g)
		}
	}
	other := newScheduler(43, fams, gap, hold)
	same := true
	for _, f := range got {
		if g, _ := other.next(); g != f {
			same = false
		}
	}
	if same {
		t.Error("seeds 42 and 43 gave the same schedule")
	}
	if _, ok := newScheduler(1, nil, gap, hold).next(); ok {
		t.Error("a fault with no families")
	}
	// Every variant of a family comes up.
	kinds := map[string]bool{}
	for _, f := range got {
		kinds[f.Family+"/"+f.Variant] = true
	}
	for fam, vs := range variants {
		for _, v := range vs {
			if !kinds[fam+"/"+v] {
				t.Errorf("variant %s/%s never scheduled in %d faults", fam, v, len(got))
			}
		}
	}
}

// TestBetween: bounds are inclusive and a zero span is the lower bound.
func TestBetween(t *testing.T) {
	rng := newRand(1)
	for range 1000 {
		d := between(rng, [2]time.Duration{time.Second, 2 * time.Second})
		if d < time.Second || d > 2*time.Second {
			t.Fatalf("between 1s and 2s: %v", d)
		}
	}
	if d := between(rng, [2]time.Duration{3 * time.Second, 3 * time.Second}); d != 3*time.Second {
		t.Errorf("between 3s and 3s: %v", d)
	}
}

// TestRecorderHistory: concurrent processes write invoke/completion pairs; the file reads back
// with unique increasing indexes, each completion after its invoke with the same process,
// and the counts leave nemesis and final-read markers out.
func TestRecorderHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), HistoryFile)
	w, err := history.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(w)
	const procs, each = 8, 50
	var wg sync.WaitGroup
	for range procs {
		wg.Go(func() {
			p := rec.process()
			for i := range each {
				op := rec.invoke(history.Op{Process: p, F: history.FSend, Mops: []history.Mop{{Topic: "t", Partition: 1, Offset: -1, Value: int64(p*1000 + i)}}})
				op.Mops[0].Offset = int64(i)
				typ := history.OK
				if i%10 == 9 {
					typ = history.Info
					p = rec.process()
				}
				rec.complete(op, typ)
			}
		})
	}
	wg.Wait()
	n := rec.invoke(history.Op{Process: nemesisProcess, F: history.FNemesis, Value: "pause 1"})
	rec.complete(n, history.OK)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ops, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2*procs*each+2 {
		t.Fatalf("%d ops, want %d", len(ops), 2*procs*each+2)
	}
	open := map[int]history.Op{}
	for i, op := range ops {
		if op.Index != int64(i) {
			t.Fatalf("op %d has index %d", i, op.Index)
		}
		if op.Type == history.Invoke {
			if prev, ok := open[op.Process]; ok {
				t.Fatalf("process %d invoked op %d while op %d was open", op.Process, op.Index, prev.Index)
			}
			open[op.Process] = op
			continue
		}
		inv, ok := open[op.Process]
		if !ok || inv.F != op.F || len(inv.Mops) != len(op.Mops) || op.Time < inv.Time ||
			len(op.Mops) > 0 && inv.Mops[0].Value != op.Mops[0].Value {
			t.Fatalf("completion %+v does not match an open invoke (%+v)", op, inv)
		}
		delete(open, op.Process)
	}
	if rec.count(history.OK)+rec.count(history.Info) != procs*each || rec.count(history.Info) != procs*each/10 {
		t.Errorf("counts: ok %d info %d", rec.count(history.OK), rec.count(history.Info))
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
