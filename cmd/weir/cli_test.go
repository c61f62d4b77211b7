package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// startTestBroker runs an in-process broker (testcluster/inproc) and returns its address;
// props are set over inproc's defaults.
func startTestBroker(t *testing.T, props ...map[string]string) string {
	t.Helper()
	p := map[string]string{}
	for _, m := range props {
		for k, v := range m {
			p[k] = v
		}
	}
	return inproc.Start(t, p).Addr()
}

func TestCLITopicProduceConsume(t *testing.T) {
	addr := startTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := topicCmd(ctx, append(args, "--bootstrap", addr), &out); err != nil {
			t.Fatalf("weir topic %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}

	// Flags after the topic name, as people type them.
	if out := run("create", "orders", "--partitions", "1", "--config", "retention.ms=60000"); !strings.Contains(out, "Created topic orders") {
		t.Fatalf("create: %q", out)
	}
	run("create", "--partitions", "2", "other")
	if out := run("list"); out != "orders\nother\n" {
		t.Fatalf("list: %q", out)
	}
	out := run("describe", "orders")
	for _, want := range []string{"Topic: orders\t", "PartitionCount: 1\t", "ReplicationFactor: 1\t", "Configs: retention.ms=60000\n", "\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tLeaderEpoch: 0\tOffline: \n"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe output %q lacks %q", out, want)
		}
	}

	var stderr bytes.Buffer
	in := strings.NewReader("k1:first\nk2:second value\nk3:third:with:colons\n")
	if err := produceCmd(ctx, []string{"--topic", "orders", "--key-separator", ":", "--bootstrap", addr}, in, &stderr); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if !strings.Contains(stderr.String(), "produced 3 records") {
		t.Errorf("produce reported %q", stderr.String())
	}

	consume := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := consumeCmd(ctx, append(args, "--topic", "orders", "--bootstrap", addr), &out); err != nil {
			t.Fatalf("consume %v: %v", args, err)
		}
		return out.String()
	}
	if got, want := consume("--from", "beginning", "--max", "3", "--format", `%k\t%v\n`), "k1\tfirst\nk2\tsecond value\nk3\tthird:with:colons\n"; got != want {
		t.Fatalf("consume: got %q, want %q", got, want)
	}
	if got, want := consume("--from", "1", "--max", "2", "--format", `%t/%p@%o %k 100%%\n`), "orders/0@1 k2 100%\norders/0@2 k3 100%\n"; got != want {
		t.Fatalf("consume from offset 1: got %q, want %q", got, want)
	}
	if got := consume("--from", "beginning", "--max", "1", "--format", `%T`); len(got) < 13 || strings.Trim(got, "0123456789") != "" {
		t.Fatalf("timestamp %q", got)
	}

	// acks=1 without keys, then --from end sees only what comes after it starts.
	if err := produceCmd(ctx, []string{"--topic", "orders", "--acks", "1", "--bootstrap", addr}, strings.NewReader("plain\n"), &stderr); err != nil {
		t.Fatalf("produce acks=1: %v", err)
	}
	if got := consume("--from", "3", "--max", "1", "--format", `[%k]%v`); got != "[]plain" {
		t.Fatalf("unkeyed record: %q", got)
	}
	endCtx, endCancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer endCancel()
	var endOut bytes.Buffer
	if err := consumeCmd(endCtx, []string{"--topic", "orders", "--from", "end", "--bootstrap", addr}, &endOut); err != nil || endOut.Len() != 0 {
		t.Fatalf("consume --from end printed %q (%v)", endOut.String(), err)
	}

	if out := run("delete", "orders"); out != "Deleted topic orders.\n" {
		t.Fatalf("delete: %q", out)
	}
	if out := run("list"); out != "other\n" {
		t.Fatalf("list after delete: %q", out)
	}
	err := topicCmd(ctx, []string{"delete", "orders", "--bootstrap", addr}, &bytes.Buffer{})
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("deleting a deleted topic: %v", err)
	}
}

func TestCLIBadInput(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{"--topic", "t", "--format", "%x"},
		{"--topic", "t", "--from", "middle"},
		{"--from", "beginning"},
	} {
		if err := consumeCmd(ctx, args, &bytes.Buffer{}); err == nil {
			t.Errorf("consume %v: no error", args)
		}
	}
	if err := produceCmd(ctx, []string{"--topic", "t", "--acks", "2"}, strings.NewReader(""), &bytes.Buffer{}); err == nil {
		t.Error("produce --acks 2: no error")
	}
	if err := topicCmd(ctx, []string{"rename", "a"}, &bytes.Buffer{}); err == nil {
		t.Error("topic rename: no error")
	}
	if err := topicCmd(ctx, []string{"create"}, &bytes.Buffer{}); err == nil {
		t.Error("topic create without a name: no error")
	}
}

func TestParseRecordFormat(t *testing.T) {
	pieces, err := parseRecordFormat(`a\tb%%%v\\n\n`)
	if err != nil {
		t.Fatal(err)
	}
	var lits []string
	for _, p := range pieces {
		if p.verb == 0 {
			lits = append(lits, p.literal)
		} else {
			lits = append(lits, "%"+string(p.verb))
		}
	}
	if got := strings.Join(lits, "|"); got != "a\tb%|%v|\\n\n" {
		t.Fatalf("pieces %q", got)
	}
	if _, err := parseRecordFormat("%"); err == nil {
		t.Fatal("lone % accepted")
	}
}
