package controller

import (
	"testing"
	"time"
)

// TestRecords: keyed records are stored, replaced and deleted atomically, and survive a restart.
func TestRecords(t *testing.T) {
	dir := t.TempDir()
	c := startSingle(t, dir)
	ctx := ctxT(t, 10*time.Second)
	if err := c.PutRecords(ctx, "acl", map[string]string{"a": "1", "b": "2"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.PutRecords(ctx, "acl", map[string]string{"c": "3"}, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if err := c.PutRecords(ctx, "scram", map[string]string{"alice": "x"}, nil); err != nil {
		t.Fatal(err)
	}
	check := func(img *Image) {
		t.Helper()
		acl := img.Records["acl"]
		if len(acl) != 2 || acl["b"] != "2" || acl["c"] != "3" {
			t.Fatalf("acl records %v", acl)
		}
		if img.Records["scram"]["alice"] != "x" {
			t.Fatalf("scram records %v", img.Records["scram"])
		}
	}
	check(c.Image())
	if err := c.PutRecords(ctx, "", nil, nil); err == nil {
		t.Fatal("records without a kind accepted")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := startSingle(t, dir)
	check(c2.Image())
}
