package benchmarks

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestAbortsTxn(t *testing.T) {
	for _, tc := range []struct {
		r    float64
		n    int64
		want int
	}{{0, 100, 0}, {1, 100, 100}, {0.25, 100, 25}, {0.1, 1000, 100}, {1.0 / 3, 99, 33}} {
		got, run := 0, 0
		for i := int64(0); i < tc.n; i++ {
			if abortsTxn(i, tc.r) {
				got++
				run = 0
			} else if run++; tc.r > 0 && float64(run) >= 1/tc.r+1 {
				t.Errorf("ratio %g: %d commits in a row at %d", tc.r, run, i)
			}
		}
		if got != tc.want {
			t.Errorf("ratio %g over %d: %d aborts, want %d", tc.r, tc.n, got, tc.want)
		}
	}
}

// TestRunTxnLoadRejects: bad workloads fail before any client is made.
func TestRunTxnLoadRejects(t *testing.T) {
	ok := TxnWorkload{Workload: Workload{Topic: "t", Producers: 1, Duration: time.Second, Acks: "all"}, TransactionalID: "x", CommitEvery: 10}
	noClient := func(...kgo.Opt) (*kgo.Client, error) {
		t.Fatal("a client was made")
		return nil, nil
	}
	for name, mut := range map[string]func(*TxnWorkload){
		"acks=1":          func(w *TxnWorkload) { w.Acks = "1" },
		"no id":           func(w *TxnWorkload) { w.TransactionalID = "" },
		"no bound":        func(w *TxnWorkload) { w.CommitEvery = 0 },
		"negative":        func(w *TxnWorkload) { w.CommitInterval = -time.Second },
		"abort ratio":     func(w *TxnWorkload) { w.AbortRatio = 1.5 },
		"e2e":             func(w *TxnWorkload) { w.E2E = true },
		"two topics":      func(w *TxnWorkload) { w.Topics = []string{"a", "b"} },
		"no producers":    func(w *TxnWorkload) { w.Producers = 0 },
		"no duration":     func(w *TxnWorkload) { w.Duration = 0 },
		"bad compression": func(w *TxnWorkload) { w.Compression = "brotli" },
	} {
		w := ok
		mut(&w)
		if _, err := RunTxnLoad(context.Background(), w, noClient, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
