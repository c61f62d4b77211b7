package faults

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/faults/history"
	"github.com/weir-mq/weir/internal/testcluster"
)

// fakeNetwork records the faults it is asked for.
type fakeNetwork struct {
	mu    sync.Mutex // guards calls
	calls []string
}

func (f *fakeNetwork) call(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	return nil
}
func (f *fakeNetwork) Isolate(n int) error     { return f.call(fmt.Sprintf("isolate %d", n)) }
func (f *fakeNetwork) Split(gs ...[]int) error { return f.call(fmt.Sprintf("split %v", gs)) }
func (f *fakeNetwork) Bridge(a, b []int, mid int) error {
	return f.call(fmt.Sprintf("bridge %v %v %d", a, b, mid))
}
func (f *fakeNetwork) OneWay(from, to int) error {
	return f.call(fmt.Sprintf("oneway %d %d", from, to))
}
func (f *fakeNetwork) Heal() error    { return f.call("heal") }
func (f *fakeNetwork) Method() string { return "fake" }

// TestPartitionNemesis: each network-only partition variant asks the Network for a fault over
// all the nodes, heals it, and is one nemesis invoke/ok pair in the history; a run cancelled
// mid-fault still heals. The nodes are laid out, never started: these variants need no
// metadata.
func TestPartitionNemesis(t *testing.T) {
	tc, err := testcluster.New(testcluster.Config{Binary: "/nonexistent/weir", N: 3, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), HistoryFile)
	w, err := history.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(w)
	net := &fakeNetwork{}
	cfg := &RunConfig{Network: net, Partitions: 3, Logger: slog.New(slog.DiscardHandler)}
	n := newNemesis(cfg, &cluster{tc: tc}, rec, "q", "", "")
	hold := 30 * time.Millisecond
	for _, v := range []string{"majority", "bridge", "one-way", "flap"} {
		n.inject(context.Background(), fault{Family: NemesisPartition, Variant: v, Hold: hold, Pick: 7})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n.inject(ctx, fault{Family: NemesisPartition, Variant: "majority", Hold: time.Hour, Pick: 8})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	calls := strings.Join(net.calls, "; ")
	for _, want := range []string{"split [[", "bridge [", "oneway ", "heal"} {
		if !strings.Contains(calls, want) {
			t.Errorf("calls %q lack %q", calls, want)
		}
	}
	if net.calls[len(net.calls)-1] != "heal" {
		t.Errorf("last call %q, want heal", net.calls[len(net.calls)-1])
	}
	// Every split names each node once.
	for _, c := range net.calls {
		if !strings.HasPrefix(c, "split") {
			continue
		}
		var nodes []string
		for _, f := range strings.FieldsFunc(strings.TrimPrefix(c, "split "), func(r rune) bool { return r == '[' || r == ']' || r == ' ' }) {
			nodes = append(nodes, f)
		}
		slices.Sort(nodes)
		if strings.Join(nodes, ",") != "1,2,3" {
			t.Errorf("%q does not split nodes 1-3", c)
		}
	}
	ops, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 10 {
		t.Fatalf("%d ops, want 5 invoke/ok pairs: %+v", len(ops), ops)
	}
	for i := 0; i < len(ops); i += 2 {
		inv, end := ops[i], ops[i+1]
		if inv.F != history.FNemesis || inv.Type != history.Invoke || end.Type != history.OK {
			t.Errorf("ops %d, %d: %+v, %+v", i, i+1, inv, end)
		}
	}
	if got := len(n.injected()); got != 5 {
		t.Errorf("%d faults reported, want 5", got)
	}
}
