// Package tbcluster wires a testcluster.Cluster into a test: it builds the weir binary once per
// test binary, puts the nodes under tb.TempDir(), starts them, kills them when the test ends and
// then prints the end of each node's output if the test failed (or always, with
// WEIR_CLUSTER_LOGS=1). It is the only part of the harness that imports testing, so that
// testcluster itself can be linked into the weir binary (weir dev-cluster, weir bench cluster).
package tbcluster

import (
	"context"
	"os"
	"testing"

	"github.com/weir-mq/weir/internal/testcluster"
)

// LogsEnv, when set to anything, prints every node's output at the end of a test that passed too.
const LogsEnv = "WEIR_CLUSTER_LOGS"

// Binary builds cmd/weir once per test binary and returns its path (tb.Fatal on a build error).
func Binary(tb testing.TB) string {
	tb.Helper()
	bin, err := testcluster.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// BinaryTags is Binary built with build tags, e.g. BinaryTags(tb, "faults") for a binary serving
// the fault control (internal/faultctl); set it as the Config's Binary.
func BinaryTags(tb testing.TB, tags ...string) string {
	tb.Helper()
	bin, err := testcluster.BuildTags(tags...)
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// New lays out cfg's cluster, filling in Binary (built once; not for a Command cluster) and Dir (a
// tb.TempDir()) when they are empty, and registers the clean-up (kill every node, print logs on failure). It does not
// start the nodes.
func New(tb testing.TB, cfg testcluster.Config) *testcluster.Cluster {
	tb.Helper()
	if cfg.Binary == "" && cfg.Command == nil {
		cfg.Binary = Binary(tb)
	}
	if cfg.Dir == "" {
		cfg.Dir = tb.TempDir()
	}
	c, err := testcluster.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close()
		if tb.Failed() || os.Getenv(LogsEnv) != "" {
			for _, n := range c.Nodes() {
				tb.Logf("--- broker %d output ---\n%s", n.ID, testcluster.LastLines(n.AllOutput(), 60))
			}
		}
	})
	return c
}

// Start is New and then starting every node, waiting for each one's /readyz (tb.Fatal when a
// node exits first or does not become ready within cfg.StartTimeout). In -short mode the test is
// skipped: it runs real broker processes.
func Start(tb testing.TB, cfg testcluster.Config) *testcluster.Cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("runs a cluster of weir processes")
	}
	c := New(tb, cfg)
	if err := c.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return c
}
