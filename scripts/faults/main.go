// Command faults runs fault runs (internal/faults) against a 3-node weir cluster, or a 3-node
// Apache Kafka cluster for comparison, and writes a summary of them: scripts/faults.sh builds
// weir and this program and runs it.
//
//	faults --bin WEIR [--nemesis partition,pause,kill,membership,disk,clock] [--time-limit 300]
//	       [--runs 1] [--workload queue|txn] [--seed S] [--out DIR]
//	faults --broker kafka --kafka-libs JARS [...]
//
// Each run writes OUT/run-N/ (history.jsonl, verdict.json, report.json, cluster/node-i/weir.log
// and data); OUT/summary.md is a markdown table of the runs: workload, nemeses, seconds, client
// ops ok/fail/info, faults injected by family, anomalies, the longest time without an
// acknowledged write. Nemeses that cannot run here are listed under the table with the reason,
// never dropped silently. The exit status is 1 when a run could not run or its check failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/weir-mq/weir/internal/faults"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
}

// options are the command line's settings.
type options struct {
	broker    string
	bin       string
	kafkaLibs string
	nemeses   []string
	timeLimit time.Duration
	runs      int
	workload  string
	seed      int64
	out       string
	net       string
}

func parse(args []string) (options, error) {
	fs := flag.NewFlagSet("faults", flag.ContinueOnError)
	var o options
	var nemeses string
	var seconds int
	fs.StringVar(&o.broker, "broker", faults.BrokerWeir, "the broker under test: weir, or kafka (Apache Kafka 4.x in KRaft mode, for comparison)")
	fs.StringVar(&o.bin, "bin", "", "the weir binary (required for --broker weir)")
	fs.StringVar(&o.kafkaLibs, "kafka-libs", os.Getenv("WEIR_KAFKA_LIBS"), "Kafka's jar folder (or several, ':'-separated), for --broker kafka (default $WEIR_KAFKA_LIBS; scripts/kafka-libs.sh prints one)")
	fs.StringVar(&nemeses, "nemesis", "pause,kill,membership", "comma-separated nemesis families: "+strings.Join(faults.Families, ","))
	fs.IntVar(&seconds, "time-limit", 300, "seconds of workload and faults per run")
	fs.IntVar(&o.runs, "runs", 1, "number of runs")
	fs.StringVar(&o.workload, "workload", faults.WorkloadQueue, "queue or txn")
	fs.Int64Var(&o.seed, "seed", 0, "seed of the first run (run i uses seed+i); 0 picks one from the clock")
	fs.StringVar(&o.out, "out", "", "output directory (required)")
	fs.StringVar(&o.net, "net", "auto", "netns (nodes in network namespaces: partitions), loopback (127.0.0.1, no partitions), or auto (netns where it can be made)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() != 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch o.broker {
	case faults.BrokerWeir:
		if o.bin == "" {
			return o, fmt.Errorf("--bin is required for --broker weir")
		}
	case faults.BrokerKafka:
		if o.kafkaLibs == "" {
			return o, fmt.Errorf("--kafka-libs (or WEIR_KAFKA_LIBS) is required for --broker kafka")
		}
	default:
		return o, fmt.Errorf("unknown --broker %q: want weir or kafka", o.broker)
	}
	if o.out == "" {
		return o, fmt.Errorf("--out is required")
	}
	if seconds <= 0 || o.runs <= 0 {
		return o, fmt.Errorf("--time-limit %d and --runs %d: want positive numbers", seconds, o.runs)
	}
	o.timeLimit = time.Duration(seconds) * time.Second
	for _, n := range strings.Split(nemeses, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if !slices.Contains(faults.Families, n) {
			return o, fmt.Errorf("unknown nemesis %q: want some of %s", n, strings.Join(faults.Families, ","))
		}
		o.nemeses = append(o.nemeses, n)
	}
	if o.net != "auto" && o.net != "netns" && o.net != "loopback" {
		return o, fmt.Errorf("unknown --net %q: want auto, netns or loopback", o.net)
	}
	if o.workload != faults.WorkloadQueue && o.workload != faults.WorkloadTxn {
		return o, fmt.Errorf("unknown workload %q: want queue or txn", o.workload)
	}
	if o.seed == 0 {
		o.seed = time.Now().UnixNano() % 1_000_000_000
	}
	return o, nil
}

func run(args []string, stdout io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var rows []row
	failed := 0
	for i := range o.runs {
		cfg := faults.RunConfig{
			Broker:    o.broker,
			Binary:    o.bin,
			KafkaLibs: o.kafkaLibs,
			Dir:       filepath.Join(o.out, fmt.Sprintf("run-%d", i+1)),
			Workload:  o.workload,
			Nemeses:   o.nemeses,
			TimeLimit: o.timeLimit,
			Seed:      o.seed + int64(i),
			Logger:    logger.With("run", i+1),
		}
		var closeNet func() error
		if o.net != "loopback" {
			c, err := faults.UseNetns(&cfg, fmt.Sprintf("wf%d", os.Getpid()%100000))
			switch {
			case err == nil:
				closeNet = c
			case o.net == "netns":
				return err
			default:
				logger.Warn("nodes on 127.0.0.1: no partitions", "why", err)
			}
		}
		rep, err := faults.Run(ctx, cfg)
		if closeNet != nil {
			if cerr := closeNet(); cerr != nil && err == nil {
				err = cerr
			}
		}
		r := row{n: i + 1, rep: rep, err: err}
		if err != nil || !rep.Valid {
			failed++
		}
		rows = append(rows, r)
		fmt.Fprintf(stdout, "run %d: %s\n", i+1, r.result())
		if err := os.WriteFile(filepath.Join(o.out, "summary.md"), []byte(summary(o, rows)), 0o644); err != nil {
			return err
		}
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Fprint(stdout, summary(o, rows))
	if failed > 0 {
		return fmt.Errorf("%d of %d runs failed or found anomalies (see %s)", failed, len(rows), filepath.Join(o.out, "summary.md"))
	}
	return nil
}

// row is one run of the summary.
type row struct {
	n   int
	rep faults.Report
	err error
}

func (r row) result() string {
	if r.err != nil {
		return "ERROR: " + r.err.Error()
	}
	return r.rep.Summary
}

// summary is the markdown table of the runs, then the nemeses that could not run.
func summary(o options, rows []row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Fault runs: broker %s, workload %s, nemeses %s, %v each\n\n", o.broker, o.workload, strings.Join(o.nemeses, ","), o.timeLimit)
	b.WriteString("| run | seed | nemeses | seconds | ops ok/fail/info | faults injected | anomalies | max unavailable | dir |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	unavailable := map[string]string{}
	for _, r := range rows {
		rep := r.rep
		for f, why := range rep.Unavailable {
			unavailable[f] = why
		}
		var ran []string
		for _, n := range rep.Nemeses {
			if _, ok := rep.Unavailable[n]; !ok {
				ran = append(ran, n)
			}
		}
		counts := rep.FaultCounts()
		var injected []string
		for _, f := range faults.Families {
			if counts[f] > 0 {
				injected = append(injected, fmt.Sprintf("%s %d", f, counts[f]))
			}
		}
		anomalies := "none"
		if r.err != nil {
			anomalies = "run error: " + r.err.Error()
		} else if !rep.Valid {
			anomalies = rep.Summary
		}
		if rep.HealError != "" {
			anomalies += "; heal: " + rep.HealError
		}
		if rep.FinalReadError != "" {
			anomalies += "; final read: " + rep.FinalReadError
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %.0f | %d/%d/%d | %s | %s | %.1f s | %s |\n", r.n, rep.Seed, strings.Join(ran, ","),
			rep.Duration.Seconds(), rep.Total.OK, rep.Total.Fail, rep.Total.Info, strings.Join(injected, ", "),
			strings.ReplaceAll(anomalies, "|", "/"), rep.MaxUnavailable.Seconds(), rep.Dir)
	}
	if len(unavailable) > 0 {
		b.WriteString("\nNemeses not run:\n")
		for _, f := range faults.Families {
			if why, ok := unavailable[f]; ok {
				fmt.Fprintf(&b, "- %s: %s\n", f, why)
			}
		}
	}
	return b.String()
}
