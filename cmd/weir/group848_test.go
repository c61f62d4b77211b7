package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// requireAPI skips the test when the broker at addr does not serve API key.
func requireAPI(t *testing.T, ctx context.Context, addr string, key int16, what string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if _, ok := v.KeyMaxVersion(key); !ok {
			t.Skipf("the broker does not serve %s (API key %d)", what, key)
		}
	}
}

// produceN writes n records round robin over topic's partitions.
func produceN(t *testing.T, ctx context.Context, addr, topic string, partitions, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % partitions), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCLIConsumerGroup848(t *testing.T) {
	addr := startTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	requireAPI(t, ctx, addr, 68, "ConsumerGroupHeartbeat")
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := groupCmd(ctx, append(args, "--bootstrap", addr), &out)
		return out.String(), err
	}
	if err := topicCmd(ctx, []string{"create", "kevents", "--partitions", "3", "--bootstrap", addr}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	produceN(t, ctx, addr, "kevents", 3, 30)
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("g848"), kgo.ServerSideBalancer(),
		kgo.ConsumeTopics("kevents"), kgo.ClientID("c848-a"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < 30; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	out, err := run("list")
	if err != nil || !strings.Contains(out, "g848") || !strings.Contains(out, "consumer") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, err = run("list", "--type", "classic")
	if err != nil || strings.Contains(out, "g848") {
		t.Fatalf("list --type classic: %v\n%s", err, out)
	}
	// The member's assignment converges on the target: wait for it in the describe output.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err = run("describe", "g848")
		if err == nil && strings.Contains(out, "kevents:0,1,2  kevents:0,1,2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, want := range []string{"type consumer", "assignor uniform", "c848-a", "total lag 0", "state Stable"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	cons.Close()
	deadline = time.Now().Add(20 * time.Second)
	for {
		out, err = run("describe", "g848")
		if err == nil && strings.Contains(out, "state Empty") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe after leave: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, err = run("delete", "g848"); err != nil || !strings.Contains(out, "deleted group g848") {
		t.Fatalf("delete: %v\n%s", err, out)
	}
}

func TestCLIShareGroup(t *testing.T) {
	addr := startTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	requireAPI(t, ctx, addr, 76, "ShareGroupHeartbeat")
	requireAPI(t, ctx, addr, 90, "DescribeShareGroupOffsets")
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := shareGroupCmd(ctx, append(args, "--bootstrap", addr), &out)
		return out.String(), err
	}
	if err := topicCmd(ctx, []string{"create", "sevents", "--partitions", "2", "--bootstrap", addr}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup("sg1"), kgo.ConsumeTopics("sevents"), kgo.ClientID("share-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	// Share groups start at the latest offset: wait until the member holds both partitions
	// before producing.
	deadline := time.Now().Add(20 * time.Second)
	var out string
	for {
		pollCtx, pc := context.WithTimeout(ctx, 200*time.Millisecond)
		cons.PollFetches(pollCtx)
		pc()
		out, err = run("describe", "sg1")
		if err == nil && strings.Contains(out, "sevents:0,1") {
			// A few more polls: the share-partitions start at the log end offset of the
			// first fetch, which must come before the records.
			for range 5 {
				pollCtx, pc := context.WithTimeout(ctx, 200*time.Millisecond)
				cons.PollFetches(pollCtx)
				pc()
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe: %v\n%s", err, out)
		}
	}
	for _, want := range []string{"share group sg1", "assignor simple", "share-a"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	produceN(t, ctx, addr, "sevents", 2, 20)
	for got := 0; got < 20; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 20: %v", got, ctx.Err())
		}
		got += fs.NumRecords()
	}
	// One more poll sends the acknowledgements of the records just taken.
	ackCtx, ackCancel := context.WithTimeout(ctx, 500*time.Millisecond)
	cons.PollFetches(ackCtx)
	ackCancel()
	cons.Close()

	if out, err = run("list"); err != nil || !strings.Contains(out, "sg1") || !strings.Contains(out, "share") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	// Both partitions end at 10: once the acknowledgements land the start offsets are 10.
	deadline = time.Now().Add(20 * time.Second)
	for {
		out, err = run("describe", "sg1")
		if err == nil && strings.Contains(out, "state Empty") && strings.Count(out, "  10  ") >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("describe after consuming: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	out, err = run("reset-offsets", "sg1", "--topic", "sevents", "--to-earliest")
	if err != nil || !strings.Contains(out, "dry run") || !strings.Contains(out, "sg1    sevents  0          10                    0") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if out, err = run("reset-offsets", "sg1", "--all-topics", "--to-offset", "4", "--execute"); err != nil || !strings.Contains(out, "reset 2 share-partition") {
		t.Fatalf("reset: %v\n%s", err, out)
	}
	out, err = run("describe", "sg1")
	if err != nil || !strings.Contains(out, "sevents  0          4") || !strings.Contains(out, "sevents  1          4") {
		t.Fatalf("describe after reset: %v\n%s", err, out)
	}
	if out, err = run("delete-offsets", "sg1", "--topic", "sevents"); err != nil || !strings.Contains(out, "deleted share group sg1 offsets of topic sevents") {
		t.Fatalf("delete-offsets: %v\n%s", err, out)
	}
	if out, err = run("delete", "sg1"); err != nil || !strings.Contains(out, "deleted group sg1") {
		t.Fatalf("delete: %v\n%s", err, out)
	}
}
