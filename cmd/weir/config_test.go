package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-mq/weir/broker"
)

func TestConfigDocs(t *testing.T) {
	var out strings.Builder
	if err := configCmd([]string{"docs"}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != broker.ConfigReference() {
		t.Error("weir config docs differs from broker.ConfigReference")
	}
	if !strings.Contains(out.String(), "| `metrics.listener` |") {
		t.Error("metrics.listener missing from the reference")
	}
	if err := configCmd(nil, &out); err == nil {
		t.Error("weir config without a subcommand succeeded")
	}
}

// TestServeRefusesBadValue: weir serve stops on an out-of-range value, naming the file, the
// line and the key, and on a bad --set, naming --set; nothing is started.
func TestServeRefusesBadValue(t *testing.T) {
	defer slog.SetDefault(slog.Default()) // serve installs its own handler
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte("log.dirs="+t.TempDir()+"\nlog.retention.hours=168\nlog.segment.bytes=10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := serve([]string{"--config", path, "--log-level", "error"})
	if err == nil || err.Error() != path+":3: log.segment.bytes=10: value must be at least 1048576" {
		t.Errorf("serve --config: %v", err)
	}
	err = serve([]string{"--config", path, "--set", "log.segment.bytes=1048576", "--set", "log.message.timestamp.type=Now", "--log-level", "error"})
	if err == nil || !strings.HasPrefix(err.Error(), "--set: log.message.timestamp.type=Now: value must be one of: CreateTime, LogAppendTime") {
		t.Errorf("serve --set: %v", err)
	}
}
