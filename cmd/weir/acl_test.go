package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestCLIACL(t *testing.T) {
	addr := startTestBroker(t, map[string]string{"authorizer.enable": "true", "super.users": "User:ANONYMOUS"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := aclCmd(ctx, append(args, "--bootstrap", addr), &out)
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("weir acl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	out := must("add", "--allow", "--principal", "User:alice", "--operation", "READ,DESCRIBE", "--topic", "orders")
	if strings.Count(out, "Added ACL") != 2 {
		t.Errorf("add: %q", out)
	}
	must("add", "--allow", "--principal", "User:alice", "--operation", "READ", "--topic", "team-a.", "--prefixed")
	must("add", "--deny", "--principal", "User:*", "--operation", "write", "--cluster", "--host", "10.0.0.1")
	must("add", "--allow", "--principal", "User:bob", "--operation", "READ", "--group", "g1")

	out = must("list")
	for _, want := range []string{"RESOURCE", "TOPIC     LITERAL   orders", "TOPIC     PREFIXED  team-a.", "CLUSTER   LITERAL   kafka-cluster  User:*", "10.0.0.1", "GROUP     LITERAL   g1"} {
		if !strings.Contains(out, want) {
			t.Errorf("list: missing %q in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 6 {
		t.Errorf("list: %d lines, want a header and 5 ACLs:\n%s", n, out)
	}
	out = must("list", "--principal", "User:alice", "--topic", "team-a.orders", "--pattern", "match")
	if !strings.Contains(out, "team-a.") || strings.Contains(out, "orders  User") {
		t.Errorf("list matching team-a.orders:\n%s", out)
	}

	if _, err := run("add", "--principal", "User:alice", "--operation", "READ", "--topic", "x"); err == nil {
		t.Error("add without --allow/--deny succeeded")
	}
	if _, err := run("add", "--allow", "--principal", "alice", "--operation", "READ", "--topic", "x"); err == nil {
		t.Error("add with a principal without type succeeded")
	}
	if _, err := run("remove"); err == nil {
		t.Error("remove without a filter succeeded")
	}

	out = must("remove", "--principal", "User:alice")
	if strings.Count(out, "Removed ACL") != 3 {
		t.Errorf("remove alice: %q", out)
	}
	out = must("list")
	if strings.Contains(out, "alice") || strings.Count(out, "\n") != 3 {
		t.Errorf("list after remove:\n%s", out)
	}
	must("remove", "--all")
	if out = must("list"); strings.Count(out, "\n") != 1 {
		t.Errorf("list after remove --all:\n%s", out)
	}
}
