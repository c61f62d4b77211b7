package testcluster_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
)

// fakeEnv makes this test binary stand in for `weir serve`: it serves /readyz on the
// metrics.listener of its command line (503 for FAKE_READY_AFTER, then 200), or exits 3 at
// once with FAKE_FAIL, and exits 0 on SIGTERM.
const fakeEnv = "TESTCLUSTER_FAKE_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) != "" {
		fakeNode()
		return
	}
	os.Exit(m.Run())
}

func fakeNode() {
	var metrics, id string
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "metrics.listener="); ok {
			metrics = v
		}
		if v, ok := strings.CutPrefix(a, "node.id="); ok {
			id = v
		}
	}
	println("fake node", id, "starting")
	if strings.Contains(os.Getenv("FAKE_FAIL"), id) {
		println("boom")
		os.Exit(3)
	}
	delay, _ := time.ParseDuration(os.Getenv("FAKE_READY_AFTER"))
	readyAt := time.Now().Add(delay)
	if os.Getenv("FAKE_NEVER_READY") != "" {
		readyAt = time.Now().Add(time.Hour)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if time.Now().Before(readyAt) {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	go func() { _ = http.ListenAndServe(metrics, mux) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	select {
	case <-sig:
		println("fake node", id, "terminated")
		os.Exit(0)
	case <-time.After(2 * time.Minute):
		os.Exit(4)
	}
}

func fakeCluster(t *testing.T, n int, env ...string) *testcluster.Cluster {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env = append([]string{fakeEnv + "=1"}, env...)
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
	return tbcluster.New(t, testcluster.Config{Binary: exe, N: n, StartTimeout: 5 * time.Second})
}

func TestConfig(t *testing.T) {
	c, err := testcluster.New(testcluster.Config{Binary: "/bin/weir", N: 3, Dir: t.TempDir(), BasePort: 7000,
		ControllerBasePort: 8000, MetricsBasePort: 9000, ExtraPorts: 1,
		Props: map[string]string{"min.insync.replicas": "2"},
		NodeProps: func(n *testcluster.Node) map[string]string {
			return map[string]string{"listeners": "A://" + n.Addr() + ",B://127.0.0.1:1"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	n := c.Node(2)
	got := strings.Join(n.Args(), " ")
	want := "serve --set controller.quorum.voters=1@127.0.0.1:8000,2@127.0.0.1:8001,3@127.0.0.1:8002" +
		" --set listeners=A://127.0.0.1:7001,B://127.0.0.1:1 --set log.dirs=" + n.Dir +
		" --set metrics.listener=127.0.0.1:9001 --set min.insync.replicas=2 --set node.id=2"
	if got != want {
		t.Fatalf("args\n got %s\nwant %s", got, want)
	}
	if len(n.ExtraPorts) != 1 || n.ExtraPorts[0] == 0 {
		t.Fatalf("extra ports %v", n.ExtraPorts)
	}
	if b := strings.Join(c.Bootstrap(), ","); b != "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002" {
		t.Fatalf("bootstrap %s", b)
	}

	// Free ports are all different.
	c, err = testcluster.New(testcluster.Config{Binary: "/bin/weir", N: 5, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, n := range c.Nodes() {
		for _, p := range []int{n.Port, n.ControllerPort, n.MetricsPort} {
			if seen[p] || p == 0 {
				t.Fatalf("port %d twice or zero", p)
			}
			seen[p] = true
		}
	}

	for _, cfg := range []testcluster.Config{
		{N: 1, Dir: "/x"},
		{Binary: "w", N: 0, Dir: "/x"},
		{Binary: "w", N: 100, Dir: "/x"},
		{Binary: "w", N: 1},
		{Binary: "w", N: 1, Dir: "/x", Props: map[string]string{"metrics.listener": ""}},
		{Binary: "w", N: 2, Dir: "/x", BasePort: 65535},
	} {
		if _, err := testcluster.New(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// Config.Host moves every address of a node; Config.DialContext carries the harness's own
// connections (busy-port probe, /readyz); Config.Wrap sees the node it wraps.
func TestHostDialWrap(t *testing.T) {
	c, err := testcluster.New(testcluster.Config{Binary: "/bin/weir", N: 2, Dir: t.TempDir(), BasePort: 7000,
		ControllerBasePort: 8000, MetricsBasePort: 9000, Host: func(id int) string { return "10.0.0." + strconv.Itoa(id) }})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Node(2).Args(), " ")
	want := "serve --set controller.quorum.voters=1@10.0.0.1:8000,2@10.0.0.2:8001 --set listeners=PLAINTEXT://10.0.0.2:7001" +
		" --set log.dirs=" + c.Node(2).Dir + " --set metrics.listener=10.0.0.2:9001 --set node.id=2"
	if got != want {
		t.Fatalf("args\n got %s\nwant %s", got, want)
	}
	if _, err := testcluster.New(testcluster.Config{Binary: "w", N: 1, Dir: "/x", Host: func(int) string { return "node1" }}); err == nil {
		t.Fatal("a host name instead of an IP address: no error")
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeEnv, "1")
	var dials atomic.Int64
	var wrapped sync.Map
	c = tbcluster.New(t, testcluster.Config{Binary: exe, N: 2, StartTimeout: 5 * time.Second,
		Host: func(id int) string { return "127.0.0." + strconv.Itoa(10+id) },
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		Wrap: func(n *testcluster.Node, argv []string) []string {
			wrapped.Store(n.ID, true)
			return argv
		}})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes() {
		if _, ok := wrapped.Load(n.ID); !ok {
			t.Errorf("node %d not wrapped", n.ID)
		}
		if !strings.HasPrefix(n.MetricsAddr(), "127.0.0.1"+strconv.Itoa(int(n.ID))+":") {
			t.Errorf("node %d metrics address %s", n.ID, n.MetricsAddr())
		}
	}
	// Two nodes: three busy-port probes and at least one /readyz each.
	if d := dials.Load(); d < 8 {
		t.Fatalf("%d dials through Config.DialContext, want at least 8", d)
	}
}

// The process handling against fake nodes: readiness from /readyz, a node that exits at start,
// one that never becomes ready, pause/continue, kill, terminate and restart.
func TestFakeNodes(t *testing.T) {
	t.Run("ready", func(t *testing.T) {
		c := fakeCluster(t, 3, "FAKE_READY_AFTER=300ms")
		start := time.Now()
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Fatalf("ready after %v, before /readyz said so", d)
		}
		n := c.Node(2)
		if err := n.Pause(); err != nil {
			t.Fatal(err)
		}
		if err := n.Continue(); err != nil {
			t.Fatal(err)
		}
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
		if n.Running() || n.ExitString() != "signal: killed" {
			t.Fatalf("after kill: running %v, %s", n.Running(), n.ExitString())
		}
		if err := n.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := n.Restart(context.Background()); err == nil {
			t.Fatal("restart of a running node: no error")
		}
		if out := n.Output(); strings.Count(out, "fake node 2 starting") != 1 {
			t.Fatalf("current run's output %q", out)
		}
		if out := n.AllOutput(); strings.Count(out, "fake node 2 starting") != 2 {
			t.Fatalf("all output %q", out)
		}
		if err := c.Node(1).Terminate(5 * time.Second); err != nil || c.Node(1).ExitString() != "exit status 0" {
			t.Fatalf("terminate: %v, %s", err, c.Node(1).ExitString())
		}
		var reported []int32
		c.StopAll(5*time.Second, func(n *testcluster.Node, killed bool) {
			if killed {
				t.Errorf("node %d killed", n.ID)
			}
			reported = append(reported, n.ID)
		})
		if len(reported) != 2 {
			t.Fatalf("StopAll reported %v, want nodes 2 and 3", reported)
		}
	})
	t.Run("exits at start", func(t *testing.T) {
		c := fakeCluster(t, 2, "FAKE_FAIL=2")
		err := c.Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), "node 2 exited at start (exit status 3)") || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("never ready", func(t *testing.T) {
		c := fakeCluster(t, 2, "FAKE_NEVER_READY=1")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := c.Start(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestFakeNodesTimeout(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeEnv, "1")
	t.Setenv("FAKE_NEVER_READY", "1")
	c := tbcluster.New(t, testcluster.Config{Binary: exe, N: 2, StartTimeout: 300 * time.Millisecond, LogFile: true})
	err = c.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "node(s) 1,2 did not start within 300ms") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("err %v", err)
	}
	if out := c.Node(1).Output(); !strings.Contains(out, "fake node 1 starting") {
		t.Fatalf("weir.log %q", out)
	}
}

// TestCommandReady: with Config.Command and Config.Ready (another broker than weir) the node runs
// the command given, without a weir binary, and its readiness is the Ready hook's, not /readyz
// (which the fake nodes here never pass).
func TestCommandReady(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeEnv, "1")
	t.Setenv("FAKE_NEVER_READY", "1")
	var polls sync.Map // node id -> *atomic.Int32
	c := tbcluster.New(t, testcluster.Config{N: 2, StartTimeout: 5 * time.Second,
		Command: func(n *testcluster.Node) []string {
			return []string{exe, "node.id=" + strconv.Itoa(int(n.ID)), "metrics.listener=" + n.MetricsAddr()}
		},
		Ready: func(_ context.Context, n *testcluster.Node) error {
			v, _ := polls.LoadOrStore(n.ID, new(atomic.Int32))
			if v.(*atomic.Int32).Add(1) < 3 {
				return errors.New("not yet")
			}
			return nil
		},
	})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes() {
		if out := n.Output(); !strings.Contains(out, "fake node "+strconv.Itoa(int(n.ID))+" starting") {
			t.Errorf("node %d output %q", n.ID, out)
		}
		if v, _ := polls.Load(n.ID); v == nil || v.(*atomic.Int32).Load() != 3 {
			t.Errorf("node %d: Ready polled %v times, want 3", n.ID, v)
		}
	}
	if err := c.Node(1).ReadyzState(context.Background()); err == nil {
		t.Error("/readyz of a never-ready fake node answered 200: readiness did not come from the hook")
	}
}

// TestRealCluster starts three real brokers, produces through them, SIGKILLs and restarts one,
// and pauses another.
func TestRealCluster(t *testing.T) {
	c := tbcluster.Start(t, testcluster.Config{N: 3, Props: map[string]string{"default.replication.factor": "3",
		"offsets.topic.replication.factor": "3", "min.insync.replicas": "2"}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, nil, "t"); err != nil {
		t.Fatal(err)
	}
	produce := func() {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce()
	n := c.Node(3)
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	produce() // two of three in sync still satisfy min.insync.replicas=2
	if err := n.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.ReadyzState(ctx); err != nil {
		t.Fatalf("restarted node not ready: %v", err)
	}
	if err := c.Node(2).Pause(); err != nil {
		t.Fatal(err)
	}
	if err := c.Node(2).Continue(); err != nil {
		t.Fatal(err)
	}
	produce()
	if err := c.Node(1).Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.Node(1).Output(), "weir broker started") {
		t.Errorf("node 1 output lacks its start line:\n%s", testcluster.LastLines(c.Node(1).Output(), 20))
	}
}

// A node whose admin port something else already serves is refused at start: that /readyz
// would not be the node's.
func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	c, err := testcluster.New(testcluster.Config{Binary: "/bin/true", N: 1, Dir: t.TempDir(),
		MetricsBasePort: ln.Addr().(*net.TCPAddr).Port})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("err %v", err)
	}
}
