package faults

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/faults/history"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
)

// TestFaultSmoke is a short fault run on 3 brokers: the queue workload (idempotent producers,
// assigned consumers, a group consumer committing offsets) while each available nemesis family
// strikes once (pause, kill, membership, disk and clock through the fault control of a -tags
// faults build; partition too when a Network is wired). The run
// must heal, read every partition to its end, and pass the checker (internal/faults/checker).
// The nodes run in network namespaces (the partition family) where they can be made: CI runs as
// root; elsewhere the run says why partitions were not made.
func TestFaultSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3 broker processes for about a minute")
	}
	dir := t.TempDir()
	cfg := RunConfig{
		Binary:       tbcluster.BinaryTags(t, "faults"),
		Dir:          dir,
		Workload:     WorkloadQueue,
		Nemeses:      []string{NemesisPause, NemesisKill, NemesisPartition, NemesisMembership, NemesisDisk, NemesisClock},
		TimeLimit:    45 * time.Second,
		Seed:         1,
		MaxFaults:    5,
		FaultGap:     [2]time.Duration{2 * time.Second, 4 * time.Second},
		FaultHold:    [2]time.Duration{2 * time.Second, 5 * time.Second},
		OpsPerSecond: 20,
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	netErr := error(nil)
	if closeNet, err := UseNetns(&cfg, netnsName("wsmk", int64(os.Getpid()))); err != nil {
		netErr = err
		t.Logf("partitions not made, nodes on 127.0.0.1: %v", err)
	} else {
		cfg.MaxFaults = 6
		t.Cleanup(func() {
			if err := closeNet(); err != nil {
				t.Error(err)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ops (%+v), faults %v, max unavailable %v: %s", rep.Total.OK+rep.Total.Fail+rep.Total.Info, rep.Total,
		rep.FaultCounts(), rep.MaxUnavailable, rep.Summary)
	for _, f := range rep.Faults {
		t.Logf("fault %s/%s: %s (%s)", f.Family, f.Variant, f.Value, f.Error)
	}
	families := []string{NemesisPause, NemesisKill, NemesisMembership, NemesisDisk, NemesisClock}
	if netErr != nil {
		if _, ok := rep.Unavailable[NemesisPartition]; !ok {
			t.Errorf("partition without a Network is not reported unavailable: %v", rep.Unavailable)
		}
	} else {
		families = append(families, NemesisPartition)
	}
	counts := rep.FaultCounts()
	for _, fam := range families {
		if _, out := rep.Unavailable[fam]; out {
			t.Errorf("%s faults unavailable: %s", fam, rep.Unavailable[fam])
		} else if counts[fam] < 1 {
			t.Errorf("%s faults injected: %d, want 1 (faults %+v)", fam, counts[fam], rep.Faults)
		}
	}
	if rep.HealError != "" || rep.FinalReadError != "" {
		t.Errorf("heal: %q; final read: %q", rep.HealError, rep.FinalReadError)
	}
	if rep.Ops[history.FSend].OK < 100 || rep.Ops[history.FPoll].OK == 0 || rep.Ops[history.FCommit].OK == 0 {
		t.Errorf("too little work: %+v", rep.Ops)
	}
	if !rep.Valid {
		t.Errorf("verdict: %s\n%+v", rep.Summary, rep.Verdict)
	}
	for _, f := range []string{HistoryFile, VerdictFile, ReportFile, filepath.Join(ClusterDir, "node-1", "weir.log")} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// testWriter sends a logger's lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}
