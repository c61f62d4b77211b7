package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weir-mq/weir/internal/faults/history"
	"github.com/weir-mq/weir/internal/testcluster"
)

// OpCounts are the completions of one kind of client op.
type OpCounts struct {
	OK   int `json:"ok"`
	Fail int `json:"fail"`
	Info int `json:"info"`
}

// Report is what a run did and what the check found.
type Report struct {
	Dir string `json:"dir"`
	// Broker is the broker tested (BrokerWeir, BrokerKafka).
	Broker   string `json:"broker"`
	Workload string `json:"workload"`
	Seed     int64  `json:"seed"`
	// Nemeses are the families asked for; Unavailable says why each one that could not run
	// did not (those were skipped).
	Nemeses     []string          `json:"nemeses"`
	Unavailable map[string]string `json:"unavailable,omitempty"`
	// Network is the network's Method ("" on plain 127.0.0.1).
	Network string `json:"network,omitempty"`
	// Duration is the whole run, start of the cluster to the check.
	Duration time.Duration `json:"duration_ns"`
	// Ops are the client ops' completions by function (send, poll, txn, ...); Total sums them.
	Ops   map[string]OpCounts `json:"ops"`
	Total OpCounts            `json:"total"`
	// Faults are the faults injected, in order.
	Faults []Fault `json:"faults"`
	// MaxUnavailable is the longest time, while the workload ran, without an acknowledged write
	// (an ok send or a committed transaction).
	MaxUnavailable time.Duration `json:"max_unavailable_ns"`
	// HealError says what did not recover after the faults (a node not restarted, the cluster not
	// in sync within HealTimeout); FinalReadError why the final read fell short.
	HealError      string `json:"heal_error,omitempty"`
	FinalReadError string `json:"final_read_error,omitempty"`
	// Valid, Summary and Verdict are the check's result.
	Valid   bool   `json:"valid"`
	Summary string `json:"summary"`
	Verdict any    `json:"verdict"`
}

// FaultCounts is the number of faults injected per family.
func (r *Report) FaultCounts() map[string]int {
	m := map[string]int{}
	for _, f := range r.Faults {
		if f.Error == "" || f.End > f.Start {
			m[f.Family]++
		}
	}
	return m
}

// Files a run writes in its directory.
const (
	HistoryFile = "history.jsonl"
	VerdictFile = "verdict.json"
	ReportFile  = "report.json"
	ClusterDir  = "cluster"
)

// Run runs one fault run (see the package doc) and returns its report. The error is for a run
// that could not take place (bad configuration, a cluster that did not start, an unwritable
// directory); what went wrong during the run is in the report.
func Run(ctx context.Context, cfg RunConfig) (Report, error) {
	began := time.Now()
	if err := cfg.defaults(); err != nil {
		return Report{}, err
	}
	rep := Report{Dir: cfg.Dir, Broker: cfg.Broker, Workload: cfg.Workload, Seed: cfg.Seed, Nemeses: cfg.Nemeses, Unavailable: map[string]string{}}
	if cfg.Network != nil {
		rep.Network = cfg.Network.Method()
	}
	var families []string
	for _, f := range cfg.Nemeses {
		if why := cfg.unavailable(f); why != "" {
			rep.Unavailable[f] = why
			cfg.Logger.Warn("nemesis unavailable", "family", f, "why", why)
		} else if !slices.Contains(families, f) {
			families = append(families, f)
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return rep, fmt.Errorf("faults: %w", err)
	}
	bin := cfg.Binary
	if bin == "" && cfg.Broker == BrokerWeir {
		var err error
		if bin, err = testcluster.BuildTags("faults"); err != nil {
			return rep, fmt.Errorf("faults: %w", err)
		}
	}
	hw, err := history.Create(filepath.Join(cfg.Dir, HistoryFile))
	if err != nil {
		return rep, fmt.Errorf("faults: %w", err)
	}
	defer hw.Close()
	rec := newRecorder(hw)

	tcfg := testcluster.Config{
		Binary: bin, N: cfg.Nodes, Dir: filepath.Join(cfg.Dir, ClusterDir), LogFile: true,
		StartTimeout: 90 * time.Second,
		Props:        clusterProps(),
		// Nodes die with the runner, and a terminal's Ctrl-C reaches only the runner.
		SysProcAttr: func() *syscall.SysProcAttr {
			return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		},
	}
	if cfg.Cluster != nil {
		cfg.Cluster(&tcfg)
	}
	if cfg.Broker == BrokerKafka {
		useKafka(&cfg, &tcfg)
	}
	tc, err := testcluster.New(tcfg)
	if err != nil {
		return rep, fmt.Errorf("faults: %w", err)
	}
	defer tc.StopAll(10*time.Second, nil)
	if cfg.Broker == BrokerKafka {
		if err := prepareKafka(ctx, &cfg, tc); err != nil {
			return rep, fmt.Errorf("faults: %w", err)
		}
	}
	cfg.Logger.Info("starting cluster", "broker", cfg.Broker, "dir", tcfg.Dir, "nodes", cfg.Nodes)
	if err := tc.Start(ctx); err != nil {
		return rep, fmt.Errorf("faults: start cluster: %w", err)
	}
	c, err := newCluster(tc, cfg.Dial, cfg.Broker)
	if err != nil {
		return rep, fmt.Errorf("faults: %w", err)
	}
	defer c.close()
	// Disk and clock faults need the fault control of a -tags faults binary.
	for _, f := range []struct{ family, path string }{{NemesisDisk, diskPath}, {NemesisClock, clockPath}} {
		if !slices.Contains(families, f.family) {
			continue
		}
		if why := c.hasControl(ctx, f.path); why != "" {
			rep.Unavailable[f.family] = why
			cfg.Logger.Warn("nemesis unavailable", "family", f.family, "why", why)
			families = slices.DeleteFunc(families, func(s string) bool { return s == f.family })
		}
	}
	topic := cfg.Workload
	if err := c.createTopic(ctx, topic, cfg.Partitions); err != nil {
		return rep, fmt.Errorf("faults: %w", err)
	}
	if err := c.waitInSync(ctx, []string{topic}, 60*time.Second); err != nil {
		return rep, fmt.Errorf("faults: before the run: %w", err)
	}

	// The run: workloads and the nemesis until TimeLimit.
	cfg.Logger.Info("run", "workload", cfg.Workload, "nemeses", families, "time_limit", cfg.TimeLimit, "seed", cfg.Seed)
	runCtx, stop := context.WithTimeout(ctx, cfg.TimeLimit)
	defer stop()
	w := &workload{cfg: &cfg, c: c, rec: rec, topic: topic, values: new(atomic.Int64)}
	var wg sync.WaitGroup
	seed := uint64(cfg.Seed)
	group, txnID := "", ""
	switch cfg.Workload {
	case WorkloadQueue:
		group = groupName
		for i := range cfg.Producers {
			wg.Go(func() { w.producer(runCtx, seed+uint64(i)*7919) })
		}
		wg.Go(func() { w.groupConsumer(runCtx) })
	case WorkloadTxn:
		txnID = txnIDOf(0)
		for i := range cfg.Producers {
			wg.Go(func() { w.txnProducer(runCtx, i, seed+uint64(i)*7919) })
		}
	}
	for i := range cfg.Consumers {
		iso := readUncommitted
		if cfg.Workload == WorkloadTxn {
			iso = readCommitted
		}
		a := &assignConsumer{c: c, rec: rec, topic: topic, partitions: cfg.Partitions, isolation: iso,
			rng: newRand(seed + 104729*uint64(i+1))}
		wg.Go(func() { a.run(runCtx) })
	}
	n := newNemesis(&cfg, c, rec, topic, group, txnID)
	var nwg sync.WaitGroup
	nwg.Go(func() { n.run(runCtx, newScheduler(cfg.Seed, families, cfg.FaultGap, cfg.FaultHold)) })
	<-runCtx.Done()
	nwg.Wait()

	// Heal, let the workloads finish their ops, wait for a fully in-sync cluster, read it all.
	cfg.Logger.Info("healing")
	var healErrs []error
	healErrs = append(healErrs, n.healAll())
	wg.Wait()
	healErrs = append(healErrs, c.waitInSync(ctx, []string{topic}, cfg.HealTimeout))
	if err := errors.Join(healErrs...); err != nil {
		rep.HealError = err.Error()
		cfg.Logger.Warn("heal", "err", err)
	}
	cfg.Logger.Info("final read")
	var readErrs []error
	readErrs = append(readErrs, finalRead(ctx, c, rec, topic, readUncommitted, cfg.Workload == WorkloadTxn, 2*time.Minute))
	if cfg.Workload == WorkloadTxn {
		readErrs = append(readErrs, finalRead(ctx, c, rec, topic, readCommitted, true, 2*time.Minute))
	}
	if err := errors.Join(readErrs...); err != nil {
		rep.FinalReadError = err.Error()
	}
	rep.Faults = n.injected()
	if err := hw.Close(); err != nil {
		return rep, fmt.Errorf("faults: %w", err)
	}
	if err := rec.firstErr(); err != nil {
		return rep, fmt.Errorf("faults: %w", err)
	}

	ops, err := history.ReadFile(filepath.Join(cfg.Dir, HistoryFile))
	if err != nil {
		return rep, fmt.Errorf("faults: %w", err)
	}
	rep.Ops, rep.Total = countOps(ops)
	rep.MaxUnavailable = maxUnavailable(ops)
	rep.Valid, rep.Summary, rep.Verdict = cfg.Check(ops)
	rep.Duration = time.Since(began)
	cfg.Logger.Info("checked", "valid", rep.Valid, "summary", rep.Summary)
	if err := writeJSON(filepath.Join(cfg.Dir, VerdictFile), map[string]any{
		"valid": rep.Valid, "summary": rep.Summary, "verdict": rep.Verdict}); err != nil {
		return rep, err
	}
	if err := writeJSON(filepath.Join(cfg.Dir, ReportFile), rep); err != nil {
		return rep, err
	}
	return rep, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("faults: %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	return nil
}
