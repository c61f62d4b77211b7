package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/benchmarks"
)

func TestHgrmRoundTrip(t *testing.T) {
	h := benchmarks.NewMicrosHistogram()
	for i := 1; i <= 10000; i++ {
		benchmarks.RecordMicros(h, time.Duration(i)*time.Microsecond) // 1 µs .. 10 ms uniformly
	}
	var buf bytes.Buffer
	if err := benchmarks.WriteHgrm(&buf, h); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), " Value\tPercentile\tTotalCount\t1/(1-Percentile)") || !strings.Contains(buf.String(), "#[Mean    =") {
		t.Fatalf("not the .hgrm format:\n%.300s", buf.String())
	}
	p, err := benchmarks.ParseHgrm(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if p.Count != 10000 {
		t.Errorf("count %d, want 10000", p.Count)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > want*0.002+0.001 {
			t.Errorf("%s = %.4f, want %.4f", name, got, want)
		}
	}
	near("max", p.Max, float64(h.Max())/1000)
	near("mean", p.Mean, h.Mean()/1000)
	near("p50", p.ValueAt(0.5), float64(h.ValueAtQuantile(50))/1000)
	near("p90", p.ValueAt(0.9), float64(h.ValueAtQuantile(90))/1000)
	near("p99", p.ValueAt(0.99), float64(h.ValueAtQuantile(99))/1000)
	near("p50 (known)", p.ValueAt(0.5), 5.0)
	near("max (known)", p.Max, 10.0)

	// The Java HistogramLogProcessor's layout (spaces, "inf" last line) parses too.
	java := `       Value     Percentile TotalCount 1/(1-Percentile)

       1.000 0.000000000000          1           1.00
       2.000 0.500000000000          5           2.00
       4.000 0.990000000000          9         100.00
       8.000 1.000000000000         10
#[Mean    =        2.500, StdDeviation   =        1.000]
#[Max     =        8.000, Total count    =           10]
#[Buckets =           20, SubBuckets     =         2048]
`
	jp, err := benchmarks.ParseHgrm(strings.NewReader(java))
	if err != nil {
		t.Fatal(err)
	}
	if jp.Count != 10 || jp.Max != 8 || jp.ValueAt(0.5) != 2 || jp.ValueAt(0.99) != 4 || jp.ValueAt(0.999) != 8 || jp.Mean != 2.5 {
		t.Errorf("java file parsed as %+v", jp)
	}
	if _, err := benchmarks.ParseHgrm(strings.NewReader("hello\n")); err == nil {
		t.Error("garbage parsed")
	}
}

func TestHistCompareAndPlot(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i, scale := range []int{1, 2, 5} {
		h := benchmarks.NewMicrosHistogram()
		for v := 1; v <= 5000; v++ {
			benchmarks.RecordMicros(h, time.Duration(v*scale)*time.Microsecond)
		}
		f := filepath.Join(dir, []string{"a", "b", "c"}[i]+".hgrm")
		if err := benchmarks.WriteHgrmFile(f, h); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	for _, tc := range []struct {
		files []string
		plot  string
	}{{files[:1], "one.png"}, {files, "three.png"}, {files[:2], "two.svg"}, {files, "logy.png"}} {
		var out bytes.Buffer
		plot := filepath.Join(dir, tc.plot)
		args := append([]string{"compare", "--plot", plot}, tc.files...)
		if tc.plot == "logy.png" {
			args = append(args, "--log-y")
		}
		if err := histCmd(args, &out); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(plot)
		if err != nil || st.Size() < 1000 {
			t.Fatalf("plot %s: %v, %v", plot, st, err)
		}
		if tc.plot == "three.png" {
			// a: p50 2.5 ms, c: 12.5 ms; count 5000 each.
			lines := strings.Split(out.String(), "\n")
			if len(lines) < 5 || !strings.Contains(lines[1], "/a ") || !strings.Contains(lines[1], " 2.50") ||
				!strings.Contains(lines[3], " 12.5") || !strings.Contains(lines[3], " 5000") || !strings.Contains(lines[4], "5.00x") {
				t.Errorf("compare table:\n%s", out.String())
			}
		}
	}
	var out bytes.Buffer
	if err := histCmd([]string{"show", files[0]}, &out); err != nil || !strings.Contains(out.String(), "count 5000") {
		t.Errorf("show: %v\n%s", err, out.String())
	}
}

func readSummary(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBenchProduceE2EConsume(t *testing.T) {
	addr := startTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()

	// produce: 2 s at 250 msg/s.
	var stdout, stderr bytes.Buffer
	out := filepath.Join(dir, "produce")
	err := benchCmd(ctx, []string{"produce", "--bootstrap", addr, "--topic", "bp", "--partitions", "3", "--message-size", "100",
		"--rate", "250", "--duration", "2s", "--warmup", "0s", "--max-messages", "10000", "--out", out, "--data-dir", dir}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench produce: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	h, err := benchmarks.ParseHgrmFile(filepath.Join(out, "publish.hgrm"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Count < 300 || h.Count > 501 { // 500 unless the generator fell behind at the deadline
		t.Errorf("publish.hgrm counts %d messages, want about 500", h.Count)
	}
	s := readSummary(t, out)
	res := s["results"].(map[string]any)
	if res["messages"].(float64) != float64(h.Count) || res["sent"] != res["acked"] || res["failed"].(float64) != 0 {
		t.Errorf("results %v, hgrm count %d", res, h.Count)
	}
	if pub := res["publish"].(map[string]any); pub["count"].(float64) != float64(h.Count) || pub["p99_ms"].(float64) <= 0 {
		t.Errorf("publish summary %v", pub)
	}
	sentBP := int64(res["sent"].(float64))
	if s["broker"].(map[string]any)["api_max_versions"].(map[string]any)["Produce"] == nil {
		t.Errorf("no ApiVersions in %v", s["broker"])
	}
	if m := s["machine"].(map[string]any); m["kernel"] == "" || m["data_dir_filesystem"] == "" {
		t.Errorf("machine %v", m)
	}
	if !strings.Contains(stderr.String(), "publish p99") {
		t.Errorf("no progress line: %q", stderr.String())
	}

	// e2e: sent = acked = consumed.
	stdout.Reset()
	out = filepath.Join(dir, "e2e")
	err = benchCmd(ctx, []string{"e2e", "--bootstrap", addr, "--topic", "be", "--partitions", "2", "--message-size", "64",
		"--rate", "500", "--duration", "1s", "--warmup", "0s", "--acks", "1", "--compression", "lz4", "--out", out, "--quiet"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench e2e: %v\n%s", err, stdout.String())
	}
	res = readSummary(t, out)["results"].(map[string]any)
	if res["sent"] != res["acked"] || res["acked"] != res["consumed"] || res["sent"].(float64) < 300 {
		t.Errorf("e2e counts %v", res)
	}
	if e, err := benchmarks.ParseHgrmFile(filepath.Join(out, "e2e.hgrm")); err != nil || e.Count != int64(res["messages"].(float64)) {
		t.Errorf("e2e.hgrm: %v %+v", err, e)
	}

	// consume from the beginning: every message of the produce run.
	stdout.Reset()
	if err := benchCmd(ctx, []string{"consume", "--bootstrap", addr, "--topic", "bp", "--duration", "10s"}, &stdout, &stderr); err != nil {
		t.Fatalf("bench consume: %v", err)
	}
	if want := fmt.Sprintf("consume bp: 3 partitions, %d of %d messages", sentBP, sentBP); !strings.Contains(stdout.String(), want) {
		t.Errorf("consume: %q, want %q", stdout.String(), want)
	}
}

func TestBenchFlags(t *testing.T) {
	ctx := context.Background()
	var o bytes.Buffer
	if err := benchCmd(ctx, []string{"produce", "--workload", "nope"}, &o, &o); err == nil || !strings.Contains(err.Error(), "1topic-16part-1kb-50k") {
		t.Errorf("unknown workload: %v", err)
	}
	var f loadFlags
	fs := newFlagSetForTest(&f)
	if err := f.parse(fs, []string{"--workload", "1topic-100part-1kb-maxrate", "--partitions", "7"}); err != nil {
		t.Fatal(err)
	}
	if f.partitions != 7 || f.size != 1024 || f.rate != 0 {
		t.Errorf("preset applied as %+v", f)
	}
}

func newFlagSetForTest(f *loadFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f.register(fs)
	return fs
}

func TestBenchDisk(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	var stdout, stderr bytes.Buffer
	err := benchCmd(context.Background(), []string{"disk", "--dir", dir, "--duration", "150ms", "--max-ops", "2000",
		"--appenders", "1,4", "--append-bytes", "4000000", "--out", out}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench disk: %v\n%s", err, stderr.String())
	}
	label := benchmarks.DiskLabel(dir)
	for _, kind := range []string{"fdatasync", "append-durable-1", "append-durable-4"} {
		h, err := benchmarks.ParseHgrmFile(filepath.Join(out, label+"-"+kind+".hgrm"))
		if err != nil || h.Count == 0 {
			t.Errorf("%s: %v %+v", kind, err, h)
		}
		if !strings.Contains(stdout.String(), kind) {
			t.Errorf("table lacks %s:\n%s", kind, stdout.String())
		}
	}
	res := readSummary(t, out)["results"].([]any)[0].(map[string]any)
	if res["append_mb_per_s"].(float64) <= 0 || res["cold_read_mb_per_s"].(float64) <= 0 || res["warm_read_mb_per_s"].(float64) <= 0 {
		t.Errorf("throughputs %v", res)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("left behind %v", left)
	}
}
