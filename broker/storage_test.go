package broker

// Storage hardening at the broker: the log dirs are locked for the broker's life, and everything
// the broker writes under its data directory is private to its user whatever the umask.

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/segment"
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
	b := startBroker(t, map[string]string{"log.dirs": dir, "metrics.listener": ""})
	createTopic(t, b.Addr(), "modes", 2, map[string]*string{"internal.segment.bytes": admStr("16384")}) // below segment.bytes' 1 MiB minimum
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

// A broker with a small descriptor budget refuses topics and partitions past it with a clear
// POLICY_VIOLATION, before the controller is asked; existing partitions keep serving and the log
// dir stays online.
func TestPartitionBudgetRefusesCreation(t *testing.T) {
	files, _ := segment.Usage()
	// Room for five more segments in this process.
	budget := files + 5*segment.DescriptorsPerSegment
	// With the descriptor cache on, idle partitions hold no descriptor of their own and the
	// budget checks room for one segment (engine.Budget.Settling): off here, every partition
	// counts, as in Kafka.
	b := startBroker(t, map[string]string{"metrics.listener": "", "storage.descriptor.budget": strconv.FormatInt(budget, 10), "storage.descriptor.cache.size": "0"})
	createTopic(t, b.Addr(), "fits", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, b.Addr()))
	checkRefusal := func(what string, err error, msg string) {
		t.Helper()
		if !errors.Is(err, kerr.PolicyViolation) {
			t.Fatalf("%s: %v, want POLICY_VIOLATION", what, err)
		}
		if !strings.Contains(msg, "partition budget exhausted") || !strings.Contains(msg, "RLIMIT_NOFILE=") {
			t.Fatalf("%s: message %q does not say why", what, msg)
		}
	}
	resps, err := adm.CreateTopics(ctx, 3, 1, nil, "toomany")
	if err != nil {
		t.Fatal(err)
	}
	resp := resps["toomany"]
	checkRefusal("create topic past the budget", resp.Err, resp.ErrMessage)
	// Creating a topic that exists still answers TOPIC_ALREADY_EXISTS.
	if resps, err := adm.CreateTopics(ctx, 3, 1, nil, "fits"); err != nil || !errors.Is(resps["fits"].Err, kerr.TopicAlreadyExists) {
		t.Fatalf("create an existing topic with the budget exhausted: %v %v", err, resps["fits"].Err)
	}
	cp, err := adm.CreatePartitions(ctx, 3, "fits")
	if err != nil {
		t.Fatal(err)
	}
	checkRefusal("create partitions past the budget", cp["fits"].Err, cp["fits"].ErrMessage)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("toomany") || len(topics["fits"].Partitions) != 3 {
		t.Fatalf("refused creations took effect: %v", topics.Names())
	}
	// The existing partitions serve, the dir is online, and what fits is still created.
	produceN(t, b.Addr(), "fits", 0, 100)
	if got := consumeKgo(t, b.Addr(), "fits", 100, 20*time.Second); len(got) == 0 {
		t.Fatal("nothing consumed from the existing topic")
	}
	for _, d := range b.Logs().Dirs() {
		if d.Err() != nil {
			t.Fatalf("log dir %s offline: %v", d.Path, d.Err())
		}
	}
	createTopic(t, b.Addr(), "lastfits", 2, nil)
}

// A separate metadata.log.dir is locked too.
func TestMetadataLogDirLocked(t *testing.T) {
	meta := t.TempDir()
	startBroker(t, map[string]string{"metrics.listener": "", "metadata.log.dir": meta})
	cfg, err := NewConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir(), "metadata.log.dir": meta, "metrics.listener": ""})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := New(cfg); err == nil {
		b.Shutdown(context.Background())
		t.Fatal("a second broker started on a metadata.log.dir in use")
	} else if !strings.Contains(err.Error(), meta) {
		t.Fatalf("refusal %q does not name the dir", err)
	}
}
