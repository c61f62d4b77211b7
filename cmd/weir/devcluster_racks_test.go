package main

import (
	"bytes"
	"testing"
)

// --racks gives node i the i-th rack, cycling; it and --set broker.rack exclude each other.
func TestDevClusterRacks(t *testing.T) {
	c, err := parseDevClusterArgs([]string{"-n", "6", "--racks", "a,b,c"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"a", "b", "c", "a", "b", "c"} {
		if got := c.nodeProps(i + 1)["broker.rack"]; got != want {
			t.Errorf("node %d: broker.rack %q, want %q", i+1, got, want)
		}
	}
	c, err = parseDevClusterArgs([]string{"-n", "2"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := c.nodeProps(1)["broker.rack"]; ok {
		t.Errorf("no --racks: broker.rack %q", r)
	}
	for _, args := range [][]string{
		{"--racks", "a,,b"},
		{"--racks", "a", "--set", "broker.rack=x"},
	} {
		if _, err := parseDevClusterArgs(args, &bytes.Buffer{}); err == nil {
			t.Errorf("dev-cluster %v: no error", args)
		}
	}
}
