package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestDevClusterNodeArgs(t *testing.T) {
	c, err := parseDevClusterArgs([]string{"-n", "3", "--dir", "/d", "--base-port", "7000",
		"--controller-base-port", "8000", "--set", "min.insync.replicas=1", "--set", "log.retention.ms=1000"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.nodeArgs(2), " ")
	want := "serve" +
		" --set controller.quorum.voters=1@127.0.0.1:8000,2@127.0.0.1:8001,3@127.0.0.1:8002" +
		" --set default.replication.factor=3" +
		" --set listeners=PLAINTEXT://127.0.0.1:7001" +
		" --set log.dirs=/d/node-2" +
		" --set log.retention.ms=1000" +
		" --set metrics.listener=127.0.0.1:9645" +
		" --set min.insync.replicas=1" +
		" --set node.id=2" +
		" --set offsets.topic.replication.factor=3" +
		" --set share.coordinator.state.topic.replication.factor=3" +
		" --set transaction.state.log.replication.factor=3"
	if got != want {
		t.Fatalf("node 2 args:\n got %s\nwant %s", got, want)
	}
	if got, want := c.bootstrap(), "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"; got != want {
		t.Fatalf("bootstrap %s, want %s", got, want)
	}
	if got, want := c.logPath(3), "/d/node-3/weir.log"; got != want {
		t.Fatalf("log path %s, want %s", got, want)
	}

	// The defaults follow n: replication factor min(3,n), min.insync.replicas min(2,n).
	for _, tc := range []struct{ n, rf, misr int }{{1, 1, 1}, {2, 2, 2}, {3, 3, 2}, {5, 3, 2}} {
		c, err := parseDevClusterArgs([]string{"-n", strconv.Itoa(tc.n)}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= tc.n; i++ {
			p := c.nodeProps(i)
			if p["default.replication.factor"] != strconv.Itoa(tc.rf) || p["offsets.topic.replication.factor"] != strconv.Itoa(tc.rf) ||
				p["transaction.state.log.replication.factor"] != strconv.Itoa(tc.rf) ||
				p["share.coordinator.state.topic.replication.factor"] != strconv.Itoa(tc.rf) ||
				p["min.insync.replicas"] != strconv.Itoa(tc.misr) {
				t.Errorf("n=%d node %d: %v", tc.n, i, p)
			}
			if p["node.id"] != strconv.Itoa(i) || p["listeners"] != fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", 9092+i-1) ||
				p["log.dirs"] != filepath.Join("data-cluster", "node-"+strconv.Itoa(i)) {
				t.Errorf("n=%d node %d: %v", tc.n, i, p)
			}
			if voters := strings.Split(p["controller.quorum.voters"], ","); len(voters) != tc.n ||
				voters[tc.n-1] != fmt.Sprintf("%d@127.0.0.1:%d", tc.n, 19093+tc.n-1) {
				t.Errorf("n=%d voters %v", tc.n, voters)
			}
		}
	}
}

func TestDevClusterBadArgs(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "0"},
		{"--set", "node.id=4"},
		{"--set", "listeners=PLAINTEXT://127.0.0.1:1"},
		{"--set", "log.dirs=/tmp/x"},
		{"--set", "controller.quorum.voters=1@127.0.0.1:1"},
		{"--set", "metrics.listener=127.0.0.1:1"},
		{"--set", "min.insync.replicas=two"},
		{"--base-port", "9092", "--controller-base-port", "9094"},
		{"--base-port", "65534"},
		{"extra"},
	} {
		if _, err := parseDevClusterArgs(args, &bytes.Buffer{}); err == nil {
			t.Errorf("dev-cluster %v: no error", args)
		}
	}
}

// fakeNode writes a shell script standing in for the weir binary.
func fakeNode(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-weir")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeNodeEnv makes the test binary stand in for `weir serve` (see TestMain): it prints its
// arguments, serves /readyz (200) on its metrics.listener (node 1 after 0.5 s) and runs until a
// signal ends it (SIGTERM's default action, as a shell script's sleep would).
const fakeNodeEnv = "WEIR_TEST_FAKE_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeNodeEnv) != "" {
		runFakeNode(os.Args[1:])
		return
	}
	os.Exit(m.Run())
}

func runFakeNode(args []string) {
	var metrics string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "metrics.listener="); ok {
			metrics = v
		}
	}
	fmt.Println("weir broker started", strings.Join(args, " "))
	if slices.Contains(args, "node.id=1") {
		time.Sleep(500 * time.Millisecond)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	go func() { _ = http.ListenAndServe(metrics, mux) }()
	time.Sleep(60 * time.Second)
	os.Exit(4)
}

// readyFakeNode is the test binary as a fake node that becomes ready (fakeNodeEnv).
func readyFakeNode(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeNodeEnv, "1")
	return exe
}

func fakeConfig(t *testing.T, n int) *devClusterConfig {
	return &devClusterConfig{n: n, dir: t.TempDir(), basePort: 1, controllerBasePort: 100, sets: map[string]string{},
		startTimeout: 5 * time.Second, stopTimeout: 5 * time.Second}
}

// The process handling, with shell scripts for nodes: a node that fails at start, one that
// never starts, and a clean start and stop.
func TestDevClusterProcesses(t *testing.T) {
	t.Run("exits at start", func(t *testing.T) {
		c := fakeConfig(t, 2)
		var out bytes.Buffer
		err := runDevCluster(context.Background(), c, fakeNode(t, `case "$*" in *node.id=2*) echo boom; exit 3;; esac; exec sleep 30`), &out)
		if err == nil || !strings.Contains(err.Error(), "node 2 exited at start (exit status 3)") || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("err %v\n%s", err, out.String())
		}
	})
	t.Run("start timeout", func(t *testing.T) {
		c := fakeConfig(t, 2)
		c.startTimeout = 300 * time.Millisecond
		var out bytes.Buffer
		err := runDevCluster(context.Background(), c, fakeNode(t, `exec sleep 30`), &out)
		if err == nil || !strings.Contains(err.Error(), "node(s) 1,2 did not start within 300ms") {
			t.Fatalf("err %v\n%s", err, out.String())
		}
	})
	t.Run("start and stop", func(t *testing.T) {
		c := fakeConfig(t, 3)
		// A stale start line from an earlier run in the log changes nothing: readiness is /readyz.
		if err := os.MkdirAll(c.nodeDir(1), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(c.logPath(1), []byte("old run: weir broker started\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &lockedBuffer{}
		done := make(chan error, 1)
		go func() {
			done <- runDevCluster(ctx, c, readyFakeNode(t), out)
		}()
		waitOutput(t, out, "all 3 nodes started", 10*time.Second, done)
		if log := readLogFrom(c.logPath(1), 0); !strings.Contains(log, "old run") || !strings.Contains(log, "node.id=1") {
			t.Fatalf("node 1 log %q", log)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("dev-cluster did not stop")
		}
		for i := 1; i <= 3; i++ {
			if want := fmt.Sprintf("node %d (pid ", i); !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if n := strings.Count(out.String(), "exited: signal: terminated"); n != 3 {
			t.Errorf("%d nodes reported terminated:\n%s", n, out.String())
		}
		for _, pid := range nodePIDs(out.String()) {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("node pid %d: %v", pid, err)
			}
		}
	})
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitOutput waits until out contains s (failing if done delivers first).
func waitOutput(t *testing.T, out *lockedBuffer, s string, within time.Duration, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(out.String(), s) {
		select {
		case err := <-done:
			t.Fatalf("dev-cluster ended (%v) before %q:\n%s", err, s, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %v:\n%s", s, within, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var nodePIDRe = regexp.MustCompile(`(?m)^  node \d+: pid (\d+),`)

func nodePIDs(out string) []int {
	var pids []int
	for _, m := range nodePIDRe.FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

// freePortRange finds n consecutive free loopback ports, none of them in avoid.
func freePortRange(t *testing.T, n int, avoid ...int) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := ln.Addr().(*net.TCPAddr).Port
		lns := []net.Listener{ln}
		ok := base+n-1 <= 65535
		for p := base + 1; ok && p < base+n; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, l)
		}
		for _, a := range avoid {
			if a >= base && a < base+n {
				ok = false
			}
		}
		for _, l := range lns {
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// TestDevClusterIntegration runs `weir dev-cluster -n 3` from a freshly built binary, creates
// an RF 3 topic, checks `weir cluster info` and `weir topic describe`, SIGKILLs a node and sees
// its partitions reported under-replicated, then stops dev-cluster with SIGTERM.
func TestDevClusterIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds weir and runs a 3-node cluster")
	}
	start := time.Now()
	bin := filepath.Join(t.TempDir(), "weir")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built in %v", time.Since(start).Round(time.Millisecond))
	dir := t.TempDir()
	bp := freePortRange(t, 3)
	cp := freePortRange(t, 3, bp, bp+1, bp+2)
	out := &lockedBuffer{}
	cmd := exec.Command(bin, "dev-cluster", "-n", "3", "--dir", dir, "--base-port", strconv.Itoa(bp),
		"--controller-base-port", strconv.Itoa(cp), "--metrics-base-port", "0", "--stop-timeout", "20s")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			<-done
			for _, pid := range nodePIDs(out.String()) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			t.Logf("dev-cluster output:\n%s", out.String())
			for i := 1; i <= 3; i++ {
				log := readLogFrom(filepath.Join(dir, fmt.Sprintf("node-%d", i), "weir.log"), 0)
				t.Logf("--- node %d log ---\n%s", i, lastLines(log, 30))
			}
		}
	})
	waitOutput(t, out, "all 3 nodes started", 30*time.Second, done)
	t.Logf("cluster started after %v", time.Since(start).Round(time.Millisecond))
	bootstrap := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", bp, bp+1, bp+2)
	if !strings.Contains(out.String(), "bootstrap: "+bootstrap+"\n") {
		t.Fatalf("no bootstrap line for %s", bootstrap)
	}
	for i := 1; i <= 3; i++ {
		if want := filepath.Join(dir, fmt.Sprintf("node-%d", i), "weir.log"); !strings.Contains(out.String(), "log "+want+"\n") {
			t.Errorf("output lacks the log path %s", want)
		}
	}
	pids := nodePIDs(out.String())
	if len(pids) != 3 {
		t.Fatalf("node pids %v", pids)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 3, 3, nil, "repl")
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}

	run := func(cmd func(context.Context, []string, io.Writer) error, args ...string) string {
		t.Helper()
		var b bytes.Buffer
		if err := cmd(ctx, append(args, "--bootstrap", bootstrap), &b); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, b.String())
		}
		return b.String()
	}
	// try is run for polling: errors (a broker that has not seen the topic yet) mean "not yet".
	try := func(cmd func(context.Context, []string, io.Writer) error, args ...string) string {
		var b bytes.Buffer
		if err := cmd(ctx, append(args, "--bootstrap", bootstrap), &b); err != nil {
			return fmt.Sprintf("%s\nerror: %v", b.String(), err)
		}
		return b.String()
	}
	// waitInfo polls `weir cluster info` until it shows want: the brokers apply the metadata log
	// each at its own pace, and each call may ask another one.
	waitInfo := func(want map[string]string) map[string]string {
		t.Helper()
		var info map[string]string
		pollUntil(t, 20*time.Second, fmt.Sprint("cluster info ", want), func() bool {
			info = parseInfo(try(clusterCmd, "info"))
			for k, v := range want {
				if info[k] != v {
					return false
				}
			}
			return true
		}, func() string { return fmt.Sprint(info) })
		return info
	}
	partLine := regexp.MustCompile(`(?m)^\tTopic: repl\tPartition: (\d)\tLeader: (-?\d+)\tReplicas: ([\d,]*)\tIsr: ([\d,]*)\tLeaderEpoch: (\d+)\tOffline: ([\d,]*)(.*)$`)

	// Every partition gets a leader and a full ISR.
	var desc string
	pollUntil(t, 20*time.Second, "3 partitions led with an ISR of 3", func() bool {
		desc = try(topicCmd, "describe", "repl")
		ms := partLine.FindAllStringSubmatch(desc, -1)
		if len(ms) != 3 {
			return false
		}
		for _, m := range ms {
			if m[2] == "-1" || len(strings.Split(m[3], ",")) != 3 || len(strings.Split(m[4], ",")) != 3 || m[6] != "" || m[7] != "" {
				return false
			}
		}
		return true
	}, func() string { return desc })
	if !strings.Contains(desc, "Topic: repl\tTopicId: ") || !strings.Contains(desc, "PartitionCount: 3\tReplicationFactor: 3\t") {
		t.Errorf("topic line: %q", desc)
	}
	if got := run(topicCmd, "describe", "--under-replicated"); got != "" {
		t.Errorf("under-replicated with every replica in sync: %q", got)
	}
	info := waitInfo(map[string]string{"Brokers": "3", "Partitions": "3", "Topics": "1", "Leaderless partitions": "0",
		"Under-replicated": "0", "With offline replicas": "0"})
	if id := info["Cluster ID"]; id == "" {
		t.Errorf("no cluster id: %v", info)
	}
	if ctl, err := strconv.Atoi(info["Active controller"]); err != nil || ctl < 1 || ctl > 3 {
		t.Errorf("active controller %q", info["Active controller"])
	}
	for i := 0; i < 3; i++ {
		if want := fmt.Sprintf("127.0.0.1:%d", bp+i); !strings.Contains(info["brokers"], want) {
			t.Errorf("brokers %q lack %s", info["brokers"], want)
		}
	}

	// SIGKILL node 3: its replicas go offline and out of the ISR, so every partition is
	// under-replicated; dev-cluster reports the exit and keeps the others running.
	if err := syscall.Kill(pids[2], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, out, fmt.Sprintf("node 3 (pid %d) exited: signal: killed", pids[2]), 10*time.Second, done)
	var under string
	pollUntil(t, 20*time.Second, "3 under-replicated partitions", func() bool {
		under = try(topicCmd, "describe", "--under-replicated")
		ms := partLine.FindAllStringSubmatch(under, -1)
		if len(ms) != 3 {
			return false
		}
		for _, m := range ms {
			if m[2] == "3" || m[2] == "-1" || strings.Contains(m[4], "3") || !strings.Contains(m[7], "UNDER-REPLICATED") {
				return false
			}
		}
		return true
	}, func() string { return under })
	waitInfo(map[string]string{"Brokers": "2", "Partitions": "3", "Leaderless partitions": "0", "Under-replicated": "3",
		"With offline replicas": "3"})

	// SIGTERM stops the two others; every node process is gone when dev-cluster returns.
	stopAt := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		exited = true
		if err != nil {
			t.Errorf("dev-cluster exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev-cluster did not exit within 30s of SIGTERM")
	}
	t.Logf("stopped in %v", time.Since(stopAt).Round(time.Millisecond))
	for i := 1; i <= 2; i++ {
		if want := fmt.Sprintf("node %d (pid %d) exited: exit status 0", i, pids[i-1]); !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("node pid %d still there: %v", pid, err)
		}
	}
}

// parseInfo turns `weir cluster info` output into label -> value; "brokers" holds the broker lines.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "  ") {
			m["brokers"] += line + "\n"
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func pollUntil(t *testing.T, within time.Duration, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s not reached within %v; last:\n%s", what, within, state())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
