package main

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnTestProps keeps __transaction_state small so the first transactional id is served fast.
var txnTestProps = map[string]string{"transaction.state.log.num.partitions": "1"}

// readCommittedValues reads n records of partition 0 of topic with a read_committed consumer.
func readCommittedValues(t *testing.T, ctx context.Context, addr, topic string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed %s: got %q before %v", topic, got, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// stableAndEnd returns partition 0's last stable offset (read_committed ListOffsets) and
// high watermark.
func stableAndEnd(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) (int64, int64) {
	t.Helper()
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	hw, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := lso.Lookup(topic, 0)
	h, _ := hw.Lookup(topic, 0)
	if l.Err != nil || h.Err != nil {
		t.Fatalf("list offsets of %s: %v %v", topic, l.Err, h.Err)
	}
	return l.Offset, h.Offset
}

// TestProduceTransactional: weir produce --transactional-id commits every --commit-every
// records and at EOF; a read_committed consumer sees every line in order; a bad line aborts the
// open transaction and nothing of it becomes visible; weir txn list/describe show the id.
func TestProduceTransactional(t *testing.T) {
	addr := startTestBroker(t, txnTestProps)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := topicCmd(ctx, []string{"create", "txt", "--partitions", "1", "--bootstrap", addr}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	in := strings.NewReader("l1\nl2\nl3\nl4\nl5\n")
	if err := produceCmd(ctx, []string{"--topic", "txt", "--transactional-id", "cli-tx", "--commit-every", "2", "--bootstrap", addr}, in, &stderr); err != nil {
		t.Fatalf("produce --transactional-id: %v", err)
	}
	if !strings.Contains(stderr.String(), "produced 5 records to txt in 3 committed transactions") {
		t.Fatalf("produce reported %q", stderr.String())
	}
	if got, want := readCommittedValues(t, ctx, addr, "txt", 5), []string{"l1", "l2", "l3", "l4", "l5"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed %q, want %q", got, want)
	}

	// A line without the key separator: the open transaction (k:6) is aborted.
	err := produceCmd(ctx, []string{"--topic", "txt", "--transactional-id", "cli-tx", "--key-separator", ":", "--bootstrap", addr},
		strings.NewReader("k:6\nno separator\n"), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad line: %v", err)
	}
	// One more committed transaction (no --commit-every: all of stdin in one).
	stderr.Reset()
	if err := produceCmd(ctx, []string{"--topic", "txt", "--transactional-id", "cli-tx", "--bootstrap", addr},
		strings.NewReader("l7\nl8\n"), &stderr); err != nil || !strings.Contains(stderr.String(), "in 1 committed transactions") {
		t.Fatalf("produce: %v %q", err, stderr.String())
	}
	if got, want := readCommittedValues(t, ctx, addr, "txt", 7), []string{"l1", "l2", "l3", "l4", "l5", "l7", "l8"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed after an aborted transaction %q, want %q", got, want)
	}

	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := txnCmd(ctx, append(args, "--bootstrap", addr), &out)
		return out.String(), err
	}
	out, err := run("list")
	if err != nil || !strings.Contains(out, "cli-tx") || !strings.Contains(out, "TRANSACTIONAL-ID") {
		t.Fatalf("txn list: %v\n%s", err, out)
	}
	t.Logf("weir txn list:\n%s", out)
	if out, err = run("list", "--state", "Ongoing"); err != nil || strings.Contains(out, "cli-tx") {
		t.Fatalf("txn list --state Ongoing: %v\n%s", err, out)
	}
	out, err = run("describe", "cli-tx")
	if err != nil || !strings.Contains(out, "cli-tx") || !strings.Contains(out, "Commit") { // PrepareCommit until the markers are written
		t.Fatalf("txn describe: %v\n%s", err, out)
	}
	if _, err := run("describe", "no-such-tx"); err == nil {
		t.Fatal("describe of an unknown id succeeded")
	}

	for _, args := range [][]string{
		{"--topic", "txt", "--commit-every", "2"},
		{"--topic", "txt", "--transactional-id", "x", "--commit-every", "-1"},
		{"--topic", "txt", "--transactional-id", "x", "--acks", "1"},
	} {
		if err := produceCmd(ctx, args, strings.NewReader(""), &bytes.Buffer{}); err == nil {
			t.Errorf("produce %v: no error", args)
		}
	}
}

// TestTxnAbortHanging: a franz-go transactional producer leaves a transaction open (it never
// ends it); the last stable offset stays at its first record until weir txn abort --start-offset
// writes the ABORT marker, after which a read_committed consumer gets past it.
func TestTxnAbortHanging(t *testing.T) {
	addr := startTestBroker(t, txnTestProps)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := topicCmd(ctx, []string{"create", "hang", "--partitions", "1", "--bootstrap", addr}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	plain, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("hang"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.ProduceSync(ctx, kgo.StringRecord("before")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The coordinator would abort it after its timeout: keep that far beyond the test.
	hanging, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("hang"),
		kgo.TransactionalID("hang-tx"), kgo.TransactionTimeout(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer hanging.Close()
	if err := hanging.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := hanging.ProduceSync(ctx, kgo.StringRecord("hanging")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(plain)
	if lso, hw := stableAndEnd(t, ctx, adm, "hang"); lso != 1 || hw != 3 {
		t.Fatalf("with the transaction open: last stable offset %d, high watermark %d; want 1, 3", lso, hw)
	}

	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := txnCmd(ctx, append(args, "--bootstrap", addr), &out)
		return out.String(), err
	}
	out, err := run("list", "--state", "Ongoing")
	if err != nil || !strings.Contains(out, "hang-tx") || !strings.Contains(out, "Ongoing") {
		t.Fatalf("txn list --state Ongoing: %v\n%s", err, out)
	}
	out, err = run("describe", "hang-tx")
	if err != nil || !strings.Contains(out, "Ongoing") || !strings.Contains(out, "hang-0") {
		t.Fatalf("txn describe: %v\n%s", err, out)
	}
	t.Logf("weir txn describe hang-tx:\n%s", out)
	if _, err := run("abort", "--topic", "hang", "--partition", "0", "--start-offset", "2"); err == nil ||
		!strings.Contains(err.Error(), "no open transaction starts at offset 2") {
		t.Fatalf("abort at a wrong start offset: %v", err)
	}
	out, err = run("abort", "--topic", "hang", "--partition", "0", "--start-offset", "1")
	if err != nil || !strings.Contains(out, "aborted the transaction of producer") {
		t.Fatalf("txn abort: %v\n%s", err, out)
	}
	t.Logf("weir txn abort: %s", out)
	if lso, hw := stableAndEnd(t, ctx, adm, "hang"); lso != 4 || hw != 4 {
		t.Fatalf("after the abort: last stable offset %d, high watermark %d; want 4, 4 (the marker at 3)", lso, hw)
	}
	if got, want := readCommittedValues(t, ctx, addr, "hang", 2), []string{"before", "after"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed %q, want %q", got, want)
	}
	// The coordinator still has hang-tx open: ending it writes its own ABORT marker after
	// weir's, which the partition takes.
	if err := hanging.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("ending the aborted transaction at its coordinator: %v", err)
	}
	// (Its markers are written after EndTxn is answered: wait for the one at 4.)
	for {
		lso, hw := stableAndEnd(t, ctx, adm, "hang")
		if lso == 5 && hw == 5 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after the coordinator's abort: last stable offset %d, high watermark %d; want 5, 5", lso, hw)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The explicit form: producer id and epoch from DescribeProducers, coordinator epoch -1
	// (sent as 0, as Kafka's tool does).
	hanging2, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("hang"),
		kgo.TransactionalID("hang-tx2"), kgo.TransactionTimeout(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer hanging2.Close()
	if err := hanging2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := hanging2.ProduceSync(ctx, kgo.StringRecord("hanging2")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctx, kgo.StringRecord("last")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	set := kadm.TopicsSet{}
	set.Add("hang", 0)
	dps, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	var pid, epoch int64 = -1, -1
	for _, p := range dps["hang"].Partitions[0].ActiveProducers.Sorted() {
		if p.CurrentTxnStartOffset == 5 {
			pid, epoch = p.ProducerID, int64(p.ProducerEpoch)
		}
	}
	if pid < 0 {
		t.Fatalf("DescribeProducers: no transaction starting at 5: %+v", dps)
	}
	if out, err := run("abort", "--topic", "hang", "--partition", "0", "--producer-id", strconv.FormatInt(pid, 10),
		"--producer-epoch", strconv.FormatInt(epoch, 10), "--coordinator-epoch", "-1"); err != nil {
		t.Fatalf("txn abort with explicit producer: %v\n%s", err, out)
	}
	if lso, hw := stableAndEnd(t, ctx, adm, "hang"); lso != 8 || hw != 8 {
		t.Fatalf("after the second abort: last stable offset %d, high watermark %d; want 8, 8", lso, hw)
	}
	if got, want := readCommittedValues(t, ctx, addr, "hang", 3), []string{"before", "after", "last"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed %q, want %q", got, want)
	}
}

func TestTxnBadInput(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"describe"},
		{"list", "extra"},
		{"list", "--producer-id", "x"},
		{"abort", "--partition", "0", "--start-offset", "1"},
		{"abort", "--topic", "t", "--start-offset", "1"},
		{"abort", "--topic", "t", "--partition", "0"},
		{"abort", "--topic", "t", "--partition", "0", "--producer-id", "5", "--producer-epoch", "0"},
		{"abort", "--topic", "t", "--partition", "0", "--start-offset", "1", "--producer-id", "5"},
		{"abort", "--topic", "t", "--partition", "0", "--producer-id", "5", "--producer-epoch", "70000", "--coordinator-epoch", "0"},
		{"abort", "--topic", "t", "--partition", "0", "--producer-id", "-5", "--producer-epoch", "1", "--coordinator-epoch", "0"},
		{"abort", "--topic", "t", "--partition", "0", "--start-offset", "-1"},
	} {
		if err := txnCmd(ctx, append(args, "--bootstrap", "127.0.0.1:1"), &bytes.Buffer{}); err == nil {
			t.Errorf("txn %v: no error", args)
		}
	}
}
