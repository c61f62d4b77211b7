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

func TestCLIGroup(t *testing.T) {
	addr := startTestBroker(t, map[string]string{"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := groupCmd(ctx, append(args, "--bootstrap", addr), &out)
		return out.String(), err
	}
	if err := topicCmd(ctx, []string{"create", "events", "--partitions", "2", "--bootstrap", addr}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// A live consumer that reads everything and commits.
	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("readers"), kgo.ConsumeTopics("events"),
		kgo.ClientID("reader-1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(3*time.Second),
		kgo.HeartbeatInterval(200*time.Millisecond), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 20; {
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
	if err != nil || !strings.Contains(out, "readers") || !strings.Contains(out, "Stable") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if _, err := run("describe", "no-such-group"); err == nil || !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") {
		t.Fatalf("describe of a missing group: %v", err)
	}
	out, err = run("describe", "readers")
	if err != nil || !strings.Contains(out, "reader-1") || !strings.Contains(out, "events:0,1") ||
		!strings.Contains(out, "total lag 0") || !strings.Contains(out, "state Stable") {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	if _, err := run("delete", "readers"); err == nil || !strings.Contains(err.Error(), "NON_EMPTY_GROUP") {
		t.Fatalf("delete of a live group: %v", err)
	}
	if _, err := run("reset-offsets", "readers", "--topic", "events", "--to-earliest", "--execute"); err == nil {
		t.Fatal("reset-offsets of a live group succeeded")
	}
	cons.Close() // leaves: the group is empty

	out, err = run("reset-offsets", "readers", "--topic", "events:1", "--shift-by", "-4")
	if err != nil || !strings.Contains(out, "dry run") || !strings.Contains(out, "events  1          10              6") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if _, err := run("reset-offsets", "readers", "--topic", "events", "--to-earliest", "--execute"); err != nil {
		t.Fatal(err)
	}
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, "readers")
	if err != nil {
		t.Fatal(err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.At != 0 {
			t.Errorf("after reset to earliest: partition %d at %d", o.Partition, o.At)
		}
	})
	out, err = run("describe", "readers")
	if err != nil || !strings.Contains(out, "state Empty") || !strings.Contains(out, "total lag 20") {
		t.Fatalf("describe after reset: %v\n%s", err, out)
	}
	if out, err = run("delete", "readers"); err != nil || !strings.Contains(out, "deleted group readers") {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	out, _ = run("list")
	if strings.Contains(out, "readers") {
		t.Fatalf("deleted group still listed:\n%s", out)
	}
	if _, err := run("describe"); err == nil {
		t.Fatal("describe with no group succeeded")
	}
	if _, err := run("frobnicate"); err == nil {
		t.Fatal("unknown subcommand succeeded")
	}
}
