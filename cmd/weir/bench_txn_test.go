package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/benchmarks"
)

// TestBenchTxn: weir bench txn commits every --commit-every records (and aborts the
// --abort-ratio share), writes publish/commit/txn .hgrm files and a summary that `weir bench
// report` reads; a read_committed consumer sees exactly the records of committed transactions.
// A --commit-interval run at a fixed rate ends transactions by age.
func TestBenchTxn(t *testing.T) {
	addr := startTestBroker(t, txnTestProps)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()

	var stdout, stderr bytes.Buffer
	out := filepath.Join(dir, "count")
	err := benchCmd(ctx, []string{"txn", "--bootstrap", addr, "--topic", "bt", "--partitions", "3", "--message-size", "100",
		"--commit-every", "50", "--abort-ratio", "0.25", "--duration", "20s", "--warmup", "0s",
		"--max-messages", "2000", "--out", out, "--broker-name", "weir", "--flush-mode", "durable"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench txn: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	res := readSummary(t, out)["results"].(map[string]any)
	num := func(k string) int64 { return int64(res[k].(float64)) }
	if num("sent") != 2000 || num("acked") != 2000 || num("failed") != 0 {
		t.Fatalf("counts %v", res)
	}
	// 2000 records in transactions of 50: 40 transactions, one in four aborted.
	if num("committed_txns") != 30 || num("aborted_txns") != 10 || num("messages") != 1500 {
		t.Fatalf("transactions %v", res)
	}
	for _, name := range []string{"publish", "commit", "txn"} {
		h, err := benchmarks.ParseHgrmFile(filepath.Join(out, name+".hgrm"))
		if err != nil {
			t.Fatal(err)
		}
		want := int64(40)
		if name == "publish" {
			want = 2000
		}
		if h.Count != want || h.ValueAt(0.5) <= 0 {
			t.Errorf("%s.hgrm: %d values (want %d), p50 %v", name, h.Count, want, h.ValueAt(0.5))
		}
	}
	if c := res["commit"].(map[string]any); c["p99_ms"].(float64) <= 0 || c["hgrm"] != "commit.hgrm" {
		t.Errorf("commit summary %v", c)
	}
	if !strings.Contains(stdout.String(), "transactions committed 30, aborted 10") || !strings.Contains(stdout.String(), "commit ") {
		t.Errorf("output %q", stdout.String())
	}
	// read_committed: the committed records only.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("bt"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// EndTxn answers once the coordinator has decided; the markers follow (as in Kafka), so
	// the last stable offsets reach the high watermarks shortly after.
	var stable, end int64
	for deadline := time.Now().Add(10 * time.Second); ; {
		lso, err := adm.ListCommittedOffsets(ctx, "bt")
		if err != nil {
			t.Fatal(err)
		}
		ends, err := adm.ListEndOffsets(ctx, "bt")
		if err != nil {
			t.Fatal(err)
		}
		stable, end = 0, 0
		lso.Each(func(o kadm.ListedOffset) { stable += o.Offset })
		ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
		if stable == end || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if stable != end || end < 2040 { // 2000 records and a marker per transaction and partition it wrote to
		t.Errorf("last stable offsets sum %d, high watermarks %d (want equal, at least 2040)", stable, end)
	}
	got := 0
	for got < 1500 {
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		n := fs.NumRecords()
		if n == 0 {
			break
		}
		got += n
	}
	if got != 1500 {
		t.Errorf("read_committed read %d records, want 1500", got)
	}

	// report: the txn run has its own table with the commit latency.
	stdout.Reset()
	if err := benchCmd(ctx, []string{"report", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("bench report: %v", err)
	}
	if !strings.Contains(stdout.String(), "commit p50") || !strings.Contains(stdout.String(), "txn acks=all") {
		t.Errorf("report:\n%s", stdout.String())
	}

	// By age, two producers: 100 msg/s each for 2 s, a transaction every 250 ms: about 8 each.
	stdout.Reset()
	out = filepath.Join(dir, "interval")
	err = benchCmd(ctx, []string{"txn", "--bootstrap", addr, "--topic", "bt2", "--message-size", "64", "--rate", "200", "--producers", "2",
		"--commit-every", "0", "--commit-interval", "250ms", "--duration", "2s", "--warmup", "0s", "--out", out, "--quiet"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench txn --commit-interval: %v\n%s", err, stdout.String())
	}
	res = readSummary(t, out)["results"].(map[string]any)
	if c := num("committed_txns"); c < 12 || c > 20 || num("aborted_txns") != 0 || num("messages") < 300 {
		t.Errorf("interval run %v", res)
	}

	// Bad flags.
	for _, args := range [][]string{
		{"--acks", "1"},
		{"--commit-every", "0"},
		{"--abort-ratio", "2"},
		{"--null-sink"},
	} {
		a := append([]string{"txn", "--bootstrap", addr, "--duration", "1s"}, args...)
		if err := benchCmd(ctx, a, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("bench %v succeeded", a)
		}
	}
}
