package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// TestCLIQuota sets, describes and deletes client quotas with weir quota.
func TestCLIQuota(t *testing.T) {
	b := inproc.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := quotaCmd(ctx, append(args, "--bootstrap", b.Addr()), &out)
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("weir quota %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	must("set", "--client-id", "c1", "--producer-byte-rate", "1048576", "--consumer-byte-rate", "2048")
	must("set", "--user", "alice", "--client-id-default", "--request-percentage", "12.5")
	must("set", "--user-default", "--controller-mutation-rate", "3")
	if out := must("set", "--client-id", "c2", "--producer-byte-rate", "5", "--validate-only"); !strings.Contains(out, "valid") {
		t.Fatalf("validate-only: %q", out)
	}
	want := "client-id=c1\tconsumer_byte_rate=2048 producer_byte_rate=1048576\n" +
		"user=<default>\tcontroller_mutation_rate=3\n" +
		"user=alice client-id=<default>\trequest_percentage=12.5\n"
	if out := must("describe"); out != want {
		t.Fatalf("describe:\n%s\nwant:\n%s", out, want)
	}
	if out := must("describe", "--client-id", "c1"); out != "client-id=c1\tconsumer_byte_rate=2048 producer_byte_rate=1048576\n" {
		t.Fatalf("describe --client-id c1: %q", out)
	}
	if _, err := run("set", "--client-id", "c1", "--producer-byte-rate", "1.5"); err == nil || !strings.Contains(err.Error(), "INVALID_REQUEST") {
		t.Fatalf("fractional byte rate: %v", err)
	}
	must("delete", "--client-id", "c1", "--key", "producer_byte_rate")
	must("delete", "--user-default")
	want = "client-id=c1\tconsumer_byte_rate=2048\n" +
		"user=alice client-id=<default>\trequest_percentage=12.5\n"
	if out := must("describe"); out != want {
		t.Fatalf("after delete:\n%s\nwant:\n%s", out, want)
	}
	if _, err := run("delete", "--client-id", "nobody"); err == nil {
		t.Fatal("deleting the quotas of an entity without any succeeded")
	}
}
