package broker

// Storage hardening at the broker: the log dirs are locked for the broker's life, and everything
// the broker writes under its data directory is private to its user whatever the umask.

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLogDirLockRefusesSecondBroker(t *testing.T) {
	dir := t.TempDir()
	first := startBroker(t, map[string]string{"log.dirs": dir, "metrics.listener": ""})
	cfg, err := NewConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir, "metrics.listener": ""})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	second, err := New(cfg)
	if err == nil {
		second.Shutdown(context.Background())
		t.Fatal("a second broker started on a log dir in use")
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("refusal %q does not name the dir in use", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("refusal took %v; want at once", took)
	}
	// Once the first broker stops, the dir is free again.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := New(cfg)
	if err != nil {
		t.Fatalf("start after the first broker stopped: %v", err)
	}
	if err := again.Start(); err != nil {
		t.Fatal(err)
	}
	if err := again.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestDataDirFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	b := startBroker(t, map[string]string{"log.dirs": dir, "metrics.listener": "", "log.segment.bytes": "16384"})
	createTopic(t, b.Addr(), "modes", 2, nil)
	produceN(t, b.Addr(), "modes", 0, 500)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700 | fs.ModeDir
		}
		if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, info.Mode(), want)
		}
		seen[filepath.Ext(p)] = true
		seen[d.Name()] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".log", ".index", ".timeindex", ".snapshot", "meta.properties", ".lock", "raft.db", "recovery-point-offset-checkpoint", "partition.metadata"} {
		if !seen[name] {
			t.Errorf("no %s file under the data dir: the check did not cover it", name)
		}
	}
}
