package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestCLIPartition: `weir partition elect` and `weir partition leaders` against one broker, and
// the arguments they refuse.
func TestCLIPartition(t *testing.T) {
	addr := startTestBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := topicCmd(ctx, []string{"create", "pt", "--partitions", "2", "--bootstrap", addr}, &out); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := partitionCmd(ctx, append(args, "--bootstrap", addr), &out)
		return out.String(), err
	}
	got, err := run("elect", "--type", "preferred", "--topic", "pt")
	if err != nil || !strings.Contains(got, "pt-0: not needed") || !strings.Contains(got, "pt-1: not needed") || !strings.Contains(got, "0 elected, 2 not needed, 0 failed") {
		t.Fatalf("elect --topic: %v\n%s", err, got)
	}
	if got, err = run("elect", "--type", "unclean", "--all"); err != nil || !strings.Contains(got, "0 elected, 0 not needed, 0 failed") {
		t.Fatalf("elect --all: %v\n%s", err, got)
	}
	if got, err = run("elect", "--type", "preferred", "--topic", "pt", "--partition", "9"); err == nil || !strings.Contains(got, "pt-9: failed: UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("elect of an unknown partition: %v\n%s", err, got)
	}
	if got, err = run("leaders"); err != nil || !strings.Contains(got, "PREFERRED-NOT-LED") || !strings.Contains(got, "1 ") {
		t.Fatalf("leaders: %v\n%s", err, got)
	}
	for _, args := range [][]string{
		{"elect", "--topic", "pt"},                                // no --type
		{"elect", "--type", "fast", "--all"},                      // bad type
		{"elect", "--type", "preferred"},                          // neither --all nor --topic
		{"elect", "--type", "preferred", "--all", "--topic", "x"}, // both
		{"elect", "--type", "preferred", "--partition", "1"},      // --partition without --topic
		{"move"},
	} {
		if _, err := run(args...); err == nil {
			t.Errorf("partition %v: no error", args)
		}
	}
}
