package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
)

func TestBenchClusterBadArgs(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"nope"},
		{"failover"}, // no --dir
		{"catchup", "--dir", "/x", "--bytes", "lots"}, // bad size
		{"failover", "--dir", "/x", "--set", "novalue"},
	} {
		var out, errOut bytes.Buffer
		if err := benchClusterCmd(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("bench cluster %v: no error", args)
		}
	}
}

// TestBenchClusterRuns runs both measurements briefly (one failover cycle, an 8 MiB catch-up)
// against a freshly built weir and checks their result.json.
func TestBenchClusterRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3-node clusters of weir processes")
	}
	bin := tbcluster.Binary(t)
	for _, tc := range []struct {
		mode string
		args []string
		key  string
	}{
		{"failover", []string{"--cycles", "1", "--rate", "300"}, "failover"},
		{"catchup", []string{"--bytes", "8MiB", "--partitions", "2"}, "catchup_mb_per_s"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			dir := t.TempDir()
			base := freePortRange(t, 203)
			args := append([]string{tc.mode, "--weir", bin, "--dir", dir, "--port-base", strconv.Itoa(base), "--timeout", "2m"}, tc.args...)
			var out, errOut bytes.Buffer
			if err := benchClusterCmd(context.Background(), args, &out, &errOut); err != nil {
				t.Fatalf("%v\n%s\n%s", err, out.String(), errOut.String())
			}
			b, err := os.ReadFile(filepath.Join(dir, "result.json"))
			if err != nil {
				t.Fatal(err)
			}
			var res map[string]any
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			if _, ok := res[tc.key]; !ok {
				t.Fatalf("result.json lacks %s: %s", tc.key, b)
			}
			for i := 1; i <= 3; i++ {
				log, err := os.ReadFile(filepath.Join(dir, "node-"+strconv.Itoa(i), "weir.log"))
				if err != nil || !strings.Contains(string(log), "weir broker started") {
					t.Errorf("node %d weir.log: %v", i, err)
				}
			}
			t.Logf("%s", out.String())
		})
	}
}
