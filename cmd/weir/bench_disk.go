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

	"github.com/weir-mq/weir/benchmarks"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type diskLatency struct {
	Kind string `json:"kind"`
	latencySummary
	OpsPerSec float64 `json:"ops_per_s"`
}

type diskResult struct {
	Dir          string        `json:"dir"`
	Filesystem   string        `json:"filesystem"`
	Latencies    []diskLatency `json:"latencies"`
	AppendMBps   float64       `json:"append_mb_per_s"`
	ColdReadMBps float64       `json:"cold_read_mb_per_s"`
	WarmReadMBps float64       `json:"warm_read_mb_per_s"`
	ReadBytes    int64         `json:"read_bytes"`
}

// benchDisk runs `weir bench disk --dir A [--dir B ...]`: the storage benchmark per directory.
func benchDisk(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench disk", flag.ContinueOnError)
	var dirs stringList
	fs.Var(&dirs, "dir", "directory on the disk to measure (repeat for several disks)")
	duration := fs.Duration("duration", 5*time.Second, "time limit of each measurement")
	maxOps := fs.Int64("max-ops", 1_000_000, "operation limit of each latency measurement")
	maxBytes := fs.Int64("append-bytes", 2<<30, "byte limit of the append throughput measurement (and so of the reads)")
	appenders := fs.String("appenders", "1,16,64", "concurrent durable appenders, comma-separated")
	size := fs.Int("message-size", 1024, "record value bytes (durable appends: one record per batch; throughput: 100 per batch)")
	out := fs.String("out", "", "directory for <disk>-<kind>.hgrm files and summary.json")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	dirs = append(dirs, rest...)
	if len(dirs) == 0 {
		return errors.New("bench disk: give at least one --dir")
	}
	var counts []int
	for _, s := range strings.Split(*appenders, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n < 1 {
			return fmt.Errorf("bench disk: bad --appenders %q", *appenders)
		}
		counts = append(counts, n)
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
	}
	lim := benchmarks.DiskLimits{Duration: *duration, MaxOps: *maxOps, MaxBytes: *maxBytes}
	one := benchmarks.Batch(1, *size)
	hundred := benchmarks.Batch(100, *size)
	var results []diskResult
	for _, dir := range dirs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r := diskResult{Dir: dir, Filesystem: benchmarks.FilesystemType(dir)}
		label := benchmarks.DiskLabel(dir)
		add := func(kind string, h *hdrhistogram.Histogram, elapsed time.Duration) error {
			s := summarize(h)
			if *out != "" {
				s.File = label + "-" + kind + ".hgrm"
				if err := benchmarks.WriteHgrmFile(filepath.Join(*out, s.File), h); err != nil {
					return err
				}
			}
			r.Latencies = append(r.Latencies, diskLatency{Kind: kind, latencySummary: s, OpsPerSec: float64(h.TotalCount()) / elapsed.Seconds()})
			return nil
		}
		fmt.Fprintf(stderr, "%s (%s): fdatasync latency...\n", dir, r.Filesystem)
		t0 := time.Now()
		h, err := benchmarks.FdatasyncLatency(dir, lim)
		if err != nil {
			return fmt.Errorf("%s: fdatasync: %w", dir, err)
		}
		if err := add("fdatasync", h, time.Since(t0)); err != nil {
			return err
		}
		for _, n := range counts {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(stderr, "%s: durable append latency, %d appenders...\n", dir, n)
			t0 := time.Now()
			h, err := benchmarks.DurableAppendLatency(dir, n, one, lim)
			if err != nil {
				return fmt.Errorf("%s: durable append: %w", dir, err)
			}
			if err := add(fmt.Sprintf("append-durable-%d", n), h, time.Since(t0)); err != nil {
				return err
			}
		}
		fmt.Fprintf(stderr, "%s: append and read throughput...\n", dir)
		mbps, logDir, err := benchmarks.AppendThroughput(dir, hundred, lim)
		if err != nil {
			return fmt.Errorf("%s: append: %w", dir, err)
		}
		r.AppendMBps = mbps
		r.ColdReadMBps, r.ReadBytes, err = benchmarks.ReadThroughput(logDir, true)
		if err == nil {
			r.WarmReadMBps, _, err = benchmarks.ReadThroughput(logDir, false)
		}
		os.RemoveAll(filepath.Dir(logDir))
		if err != nil {
			return fmt.Errorf("%s: read: %w", dir, err)
		}
		results = append(results, r)
	}

	fmt.Fprintf(stdout, "%-24s %-20s %10s %9s %9s %9s %9s %10s\n", "dir", "kind", "count", "p50", "p99", "p99.9", "max", "ops/s")
	for _, r := range results {
		for _, l := range r.Latencies {
			fmt.Fprintf(stdout, "%-24s %-20s %10d %9.3f %9.3f %9.3f %9.3f %10.0f\n", r.Dir, l.Kind, l.Count, l.P50, l.P99, l.P999, l.Max, l.OpsPerSec)
		}
	}
	fmt.Fprintln(stdout, "(latency in milliseconds)")
	fmt.Fprintf(stdout, "\n%-24s %-40s %12s %12s %12s %10s\n", "dir", "filesystem", "append MB/s", "cold read", "warm read", "read MiB")
	for _, r := range results {
		fmt.Fprintf(stdout, "%-24s %-40s %12.1f %12.1f %12.1f %10.0f\n", r.Dir, r.Filesystem, r.AppendMBps, r.ColdReadMBps, r.WarmReadMBps, float64(r.ReadBytes)/(1<<20))
	}
	if *out != "" {
		sum := map[string]any{"mode": "disk", "started": time.Now().UTC(), "command": "weir bench disk " + strings.Join(args, " "),
			"machine": machine(""), "limits": lim, "message_size": *size, "results": results}
		if err := writeJSON(filepath.Join(*out, "summary.json"), sum); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", *out)
	}
	return nil
}
