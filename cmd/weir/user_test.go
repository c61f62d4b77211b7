package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/broker"
	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// TestCLIUser creates users through a PLAINTEXT listener (the documented bootstrap), lists
// them, then manages them through the SASL listener authenticated as one of them, and deletes.
func TestCLIUser(t *testing.T) {
	b := inproc.Start(t, map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := userCmd(ctx, args, &out)
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("weir user %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	plainAddr := b.Addr()
	must("create", "admin", "--password", "s3cret", "--bootstrap", plainAddr)
	must("create", "app", "--password", "app-pw", "--mechanism", "SCRAM-SHA-512", "--iterations", "4096", "--bootstrap", plainAddr)
	if out := must("list", "--bootstrap", plainAddr); out != "admin\tSCRAM-SHA-256 (8192 iterations), SCRAM-SHA-512 (8192 iterations)\napp\tSCRAM-SHA-512 (4096 iterations)\n" {
		t.Fatalf("list: %q", out)
	}
	if _, err := run("create", "x", "--password", "p", "--iterations", "100", "--bootstrap", plainAddr); err == nil || !strings.Contains(err.Error(), "iterations") {
		t.Fatalf("100 iterations: %v", err)
	}
	// Over SASL, as admin (SCRAM and PLAIN).
	sasl := []string{"--bootstrap", saslListener(t, b), "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "admin", "--sasl-password", "s3cret"}
	must(append([]string{"delete", "app"}, sasl...)...)
	if out := must(append([]string{"list"}, sasl...)...); strings.Contains(out, "app") {
		t.Fatalf("after delete: %q", out)
	}
	bad := []string{"--bootstrap", saslListener(t, b), "--sasl-mechanism", "PLAIN", "--sasl-user", "admin", "--sasl-password", "wrong"}
	if _, err := run(append([]string{"list"}, bad...)...); err == nil {
		t.Fatal("list with a wrong password succeeded")
	}
	if _, err := run("delete", "nobody", "--mechanism", "SCRAM-SHA-256", "--bootstrap", plainAddr); err == nil {
		t.Fatal("deleting a missing user succeeded")
	}
}

// saslListener is the broker's SASL_PLAINTEXT listener address.
func saslListener(t *testing.T, b *broker.Broker) string {
	t.Helper()
	addr, ok := b.ListenerAddr("SASL_PLAINTEXT")
	if !ok {
		t.Fatal("no SASL_PLAINTEXT listener")
	}
	return addr
}
