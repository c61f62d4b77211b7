package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-mq/weir/benchmarks"
)

// benchTxn runs `weir bench txn`: the produce workload through transactional producers that
// commit every --commit-every records or --commit-interval, reporting records/s of committed
// records, publish latency and the commit latency (the EndTxn round trip) with the same
// summary.json and .hgrm files as the other modes (publish.hgrm, commit.hgrm, txn.hgrm).
func benchTxn(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench txn", flag.ContinueOnError)
	var f loadFlags
	f.register(fs)
	var tw benchmarks.TxnWorkload
	fs.StringVar(&tw.TransactionalID, "transactional-id", "weir-bench-txn", "transactional id prefix: producer i uses <prefix>-<i>")
	fs.IntVar(&tw.CommitEvery, "commit-every", 1000, "records per transaction (0: only --commit-interval ends one)")
	fs.DurationVar(&tw.CommitInterval, "commit-interval", 0, "end a transaction this long after its first record (0: only --commit-every); Kafka's ProducerPerformance --transaction-duration-ms")
	fs.Float64Var(&tw.AbortRatio, "abort-ratio", 0, "fraction of transactions aborted instead of committed, 0..1, spread evenly")
	fs.DurationVar(&tw.TxnTimeout, "transaction-timeout", 0, "transaction.timeout.ms asked of the coordinator (0: franz-go's default, 40s)")
	fs.DurationVar(&tw.MetadataMinAge, "metadata-min-age", 100*time.Millisecond, "the producers' franz-go MetadataMinAge: how soon a batch answered CONCURRENT_TRANSACTIONS is retried (franz-go's default is 5s)")
	if err := f.parse(fs, args); err != nil {
		return err
	}
	if f.nullSink {
		return errors.New("bench txn: --null-sink has no transaction coordinator")
	}
	if f.topics > 1 {
		return errors.New("bench txn: one topic (--topics 1)")
	}
	if f.acks != "all" && f.acks != "-1" {
		return fmt.Errorf("bench txn: transactions need --acks all, not %q", f.acks)
	}
	if tw.MetadataMinAge <= 0 {
		return errors.New("bench txn: --metadata-min-age must be positive")
	}
	tw.Workload = f.workloadOf(false)
	sum := benchSummary{Mode: "txn", Started: time.Now().UTC(), Command: "weir bench txn " + strings.Join(args, " "),
		Workload: tw.Workload, Broker: brokerInfo{Name: f.brokerName, FlushMode: f.flushMode, Bootstrap: f.cf.bootstrap}, Machine: machine(f.dataDir)}
	cl, err := f.cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	n, err := ensureTopic(ctx, adm, f.topic, f.partitions, f.replicationFactor)
	if err != nil {
		return err
	}
	if n != f.partitions {
		fmt.Fprintf(stderr, "bench: topic %s exists with %d partitions (not %d)\n", f.topic, n, f.partitions)
	}
	tw.Partitions = n
	sum.Workload = tw.Workload
	sum.Broker.APIVersions = apiVersions(ctx, adm)
	var progress io.Writer = stderr
	if f.quiet {
		progress = nil
	}
	cpu0 := processCPU()
	res, err := benchmarks.RunTxnLoad(ctx, tw, f.cf.client, progress)
	if err != nil {
		return err
	}
	cpu := (processCPU() - cpu0).Seconds()
	secs := res.Measured.Seconds()
	results := map[string]any{
		"sent": res.Sent, "acked": res.Acked, "failed": res.Failed,
		"messages": res.Messages, "bytes": res.Bytes, "duration_s": secs,
		"msgs_per_s": float64(res.Messages) / secs, "mb_per_s": float64(res.Bytes) / secs / 1e6,
		"transactional_id": tw.TransactionalID, "commit_every": tw.CommitEvery, "commit_interval_ms": tw.CommitInterval.Milliseconds(),
		"abort_ratio": tw.AbortRatio, "metadata_min_age_ms": tw.MetadataMinAge.Milliseconds(), "committed_txns": res.Committed, "aborted_txns": res.Aborted,
		"measured_txns": res.MeasuredTxns, "txns_per_s": float64(res.MeasuredTxns) / secs,
		"generator_cpu_s": cpu,
	}
	if res.Sent > 0 {
		results["generator_cpu_us_per_msg"] = cpu / float64(res.Sent) * 1e6
	}
	// At a fixed --rate a broker that cannot keep up falls further behind the schedule, and
	// records intended after the warm-up may never be sent within the run: msgs_per_s is then 0
	// although records were acknowledged. all_acked_msgs_per_s (warm-up included) shows the rate
	// it did reach.
	allSecs := secs + tw.Warmup.Seconds()
	results["all_acked_msgs_per_s"] = float64(res.Acked) / allSecs
	behind := f.rate > 0 && res.Acked > 0 && float64(res.Messages) < 0.9*f.rate*secs
	rows := []string{"publish", "commit", "txn"}
	hists := []*hdrhistogram.Histogram{res.Publish, res.Commit, res.Txn}
	sums := make([]latencySummary, len(hists))
	for i, h := range hists {
		sums[i] = summarize(h)
	}
	if res.FirstError != nil {
		results["first_error"] = res.FirstError.Error()
	}
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return err
		}
		for i, h := range hists {
			sums[i].File = rows[i] + ".hgrm"
			if err := benchmarks.WriteHgrmFile(filepath.Join(f.out, sums[i].File), h); err != nil {
				return err
			}
		}
	}
	for i, r := range rows {
		results[r] = sums[i]
	}
	sum.Results = results
	fmt.Fprintf(stdout, "txn %s: %d partitions, %d B messages, %d transactional producers, rate %s, commit every %d records / %v, abort ratio %g\n",
		f.topic, n, f.size, f.producers, rateString(f.rate), tw.CommitEvery, tw.CommitInterval, tw.AbortRatio)
	fmt.Fprintf(stdout, "sent %d, acked %d, failed %d; transactions committed %d, aborted %d\n", res.Sent, res.Acked, res.Failed, res.Committed, res.Aborted)
	fmt.Fprintf(stdout, "measured %d committed messages in %.2fs: %.0f msg/s, %.2f MB/s, %.1f txn/s (generator CPU %.2fs, %.2f µs/msg)\n",
		res.Messages, secs, float64(res.Messages)/secs, float64(res.Bytes)/secs/1e6, float64(res.MeasuredTxns)/secs, cpu, cpu/float64(max(res.Sent, 1))*1e6)
	if behind {
		results["behind_schedule"] = true
		fmt.Fprintf(stdout, "behind the --rate schedule: %.0f msg/s acknowledged over the whole run (warm-up included) against %.0f asked\n",
			float64(res.Acked)/allSecs, f.rate)
	}
	printLatencyTable(stdout, rows, sums)
	fmt.Fprintln(stdout, "(commit: the EndTxn round trip after the transaction's records were acknowledged; txn: first record's intended send time to the end of EndTxn)")
	if f.out != "" {
		if err := writeJSON(filepath.Join(f.out, "summary.json"), sum); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", f.out)
	}
	if res.FirstError != nil {
		return fmt.Errorf("bench txn: %d messages failed, first: %w", res.Failed, res.FirstError)
	}
	return nil
}
