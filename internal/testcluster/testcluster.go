package testcluster

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
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MaxNodes bounds Config.N.
const MaxNodes = 99

// DefaultStartTimeout is how long Start and Restart wait for /readyz when Config.StartTimeout is 0.
const DefaultStartTimeout = 60 * time.Second

// Config says what cluster to start.
type Config struct {
	// Binary is the weir binary every node runs (`Binary serve --set ...`); see Build. Unused
	// with Command.
	Binary string
	// Command, when set, returns node n's argv (program first) instead of Binary and Args: a
	// broker other than weir, such as Apache Kafka for comparison runs (internal/faults). Its
	// program must be the broker process itself, so that signals reach it; Wrap applies after.
	Command func(n *Node) []string
	// Ready, when set, polls node n's readiness once (nil: ready) instead of its /readyz: for a
	// Command broker, which has no weir admin listener.
	Ready func(ctx context.Context, n *Node) error
	// N is the number of nodes (1 to MaxNodes). Node ids are 1..N; every node is a broker and a
	// controller quorum voter.
	N int
	// Single, with N 1, leaves controller.quorum.voters empty: the broker is its own one-node
	// quorum, as `weir serve` is by default (ControllerPort is then unused).
	Single bool
	// Dir is the parent of the node directories Dir/node-i; node i's log.dirs is Dir/node-i.
	Dir string
	// BasePort, ControllerBasePort and MetricsBasePort: node i listens on base+i-1 for Kafka
	// clients, the controller quorum and the admin HTTP listener. 0 picks free loopback ports.
	BasePort, ControllerBasePort, MetricsBasePort int
	// ExtraPorts is how many more free loopback ports each node gets (Node.ExtraPorts), for
	// listeners beyond the first one.
	ExtraPorts int
	// Props are set on every node, over the defaults: node.id, listeners
	// (PLAINTEXT://127.0.0.1:Port), log.dirs, controller.quorum.voters and metrics.listener.
	Props map[string]string
	// NodeProps, when set, returns node n's own keys, set over Props.
	NodeProps func(n *Node) map[string]string
	// LogFile appends each node's output to Dir/node-i/weir.log; else it is kept in memory.
	LogFile bool
	// SysProcAttr, when set, returns each node process's attributes (process group, parent-death
	// signal, ...).
	SysProcAttr func() *syscall.SysProcAttr
	// Wrap, when set, turns node n's argv (binary first) into the argv to run, for example under
	// `sh -c 'ulimit -n 200 && exec "$0" "$@"'` or in n's network namespace. The wrapper must
	// exec the binary, so that signals reach the broker itself.
	Wrap func(n *Node, argv []string) []string
	// Host, when set, returns node id's IP address, used instead of 127.0.0.1 for its listeners,
	// advertised address, controller.quorum.voters entry and metrics.listener (for example an
	// address inside a network namespace). Free ports (zero bases) are still found on 127.0.0.1.
	Host func(id int) string
	// DialContext, when set, makes the harness's own connections to nodes (the "already in use"
	// probe and /readyz), for example from inside a network namespace; nil is net.Dialer's.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// OnExit, when set, is called (on the node's wait goroutine) each time a node process exits.
	OnExit func(n *Node)
	// StartTimeout bounds Start and Restart; 0 means DefaultStartTimeout.
	StartTimeout time.Duration
}

// Cluster is a set of nodes started from one Config.
type Cluster struct {
	cfg    Config
	voters string
	nodes  []*Node
	http   *http.Client // for /readyz, through cfg.DialContext when set
}

// Node is one `weir serve` process of a cluster, across its restarts.
type Node struct {
	ID             int32
	Host           string // IP address of every listener: Config.Host's, else 127.0.0.1
	Port           int    // Kafka listener (the first listener, PLAINTEXT unless Props say otherwise)
	ControllerPort int    // controller quorum (Raft) port
	MetricsPort    int    // admin HTTP listener: /readyz, /metrics
	ExtraPorts     []int  // Config.ExtraPorts free ports
	Dir            string

	c *Cluster

	mu      sync.Mutex // guards cmd, exited, exitErr, runFrom and logFrom
	cmd     *exec.Cmd  // the current (or last) process; nil before the first start
	exited  chan struct{}
	exitErr error
	out     syncBuffer // every run's output when !LogFile
	runFrom int        // out's length when the current run started
	logFrom int64      // weir.log's size when the current run started (LogFile)
}

// New lays out a cluster (ports, directories, command lines) without starting it.
func New(cfg Config) (*Cluster, error) {
	if cfg.Binary == "" && cfg.Command == nil {
		return nil, errors.New("testcluster: no weir binary")
	}
	if cfg.N < 1 || cfg.N > MaxNodes {
		return nil, fmt.Errorf("testcluster: %d nodes: want 1 to %d", cfg.N, MaxNodes)
	}
	if cfg.Single && cfg.N != 1 {
		return nil, fmt.Errorf("testcluster: Single with %d nodes: a single broker is one node", cfg.N)
	}
	if cfg.Dir == "" {
		return nil, errors.New("testcluster: no directory")
	}
	if cfg.ExtraPorts < 0 || cfg.ExtraPorts > 8 {
		return nil, fmt.Errorf("testcluster: %d extra ports: want 0 to 8", cfg.ExtraPorts)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("testcluster: %w", err)
	}
	cfg.Dir = dir
	c := &Cluster{cfg: cfg, http: readyClient}
	if cfg.DialContext != nil {
		c.http = &http.Client{Timeout: readyClient.Timeout,
			Transport: &http.Transport{DisableKeepAlives: true, DialContext: cfg.DialContext}}
	}
	// Free ports are held open until all are chosen, so that no two nodes get the same one.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	port := func(base, i int) (int, error) {
		if base > 0 {
			if p := base + i - 1; p <= 65535 {
				return p, nil
			}
			return 0, fmt.Errorf("testcluster: port %d+%d is not a valid port", base, i-1)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("testcluster: free port: %w", err)
		}
		held = append(held, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	var voters []string
	for i := 1; i <= cfg.N; i++ {
		n := &Node{ID: int32(i), Host: "127.0.0.1", Dir: filepath.Join(cfg.Dir, "node-"+strconv.Itoa(i)), c: c}
		if cfg.Host != nil {
			if n.Host = cfg.Host(i); net.ParseIP(n.Host) == nil {
				return nil, fmt.Errorf("testcluster: node %d: host %q is not an IP address", i, n.Host)
			}
		}
		if n.Port, err = port(cfg.BasePort, i); err != nil {
			return nil, err
		}
		if n.ControllerPort, err = port(cfg.ControllerBasePort, i); err != nil {
			return nil, err
		}
		if n.MetricsPort, err = port(cfg.MetricsBasePort, i); err != nil {
			return nil, err
		}
		for range cfg.ExtraPorts {
			p, err := port(0, 0)
			if err != nil {
				return nil, err
			}
			n.ExtraPorts = append(n.ExtraPorts, p)
		}
		c.nodes = append(c.nodes, n)
		voters = append(voters, fmt.Sprintf("%d@%s", i, n.ControllerAddr()))
	}
	if !cfg.Single {
		c.voters = strings.Join(voters, ",")
	}
	for _, n := range c.nodes {
		if got, want := n.Props()["metrics.listener"], n.MetricsAddr(); got != want {
			return nil, fmt.Errorf("testcluster: node %d: metrics.listener=%q: readiness is read from /readyz on %s, so the harness sets it", n.ID, got, want)
		}
	}
	return c, nil
}

// Start starts every node and waits (bounded by ctx and StartTimeout) until each one is ready
// (ReadyState). On error, nodes already started keep running: call Close.
func (c *Cluster) Start(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := n.Spawn(); err != nil {
			return err
		}
	}
	return c.WaitReady(ctx, c.nodes...)
}

// Nodes are the cluster's nodes, node id i at index i-1.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the node with id, or nil.
func (c *Cluster) Node(id int32) *Node {
	if id < 1 || int(id) > len(c.nodes) {
		return nil
	}
	return c.nodes[id-1]
}

// Voters is the controller.quorum.voters value every node gets ("" with Config.Single).
func (c *Cluster) Voters() string { return c.voters }

// Dir is the parent of the node directories.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Bootstrap is every node's Kafka address (Host:Port).
func (c *Cluster) Bootstrap() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Output is every node's output of its current run, node by node.
func (c *Cluster) Output() string {
	var sb strings.Builder
	for _, n := range c.nodes {
		sb.WriteString(n.Output())
	}
	return sb.String()
}

// Close SIGKILLs every running node (continuing a paused one) and waits for it. It does not
// remove the node directories.
func (c *Cluster) Close() {
	for _, n := range c.nodes {
		_ = n.Kill()
	}
}

// StopAll sends SIGTERM to every running node (SIGCONT first, so a paused one can act on it),
// waits up to timeout for them all, then SIGKILLs the rest. report, when set, is called for each
// node that was running, with whether it had to be killed.
func (c *Cluster) StopAll(timeout time.Duration, report func(n *Node, killed bool)) {
	var running []*Node
	for _, n := range c.nodes {
		if n.Running() {
			running = append(running, n)
			_ = n.Signal(syscall.SIGCONT)
			_ = n.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, n := range running {
		select {
		case <-n.Exited():
		case <-deadline.C:
		}
	}
	for _, n := range running {
		killed := n.Running()
		if killed {
			_ = n.Kill()
		}
		if report != nil {
			report(n, killed)
		}
	}
}

// Addr is the node's Kafka address.
func (n *Node) Addr() string { return net.JoinHostPort(n.Host, strconv.Itoa(n.Port)) }

// ControllerAddr is the node's controller quorum address.
func (n *Node) ControllerAddr() string {
	return net.JoinHostPort(n.Host, strconv.Itoa(n.ControllerPort))
}

// MetricsAddr is the node's admin HTTP listener address.
func (n *Node) MetricsAddr() string { return net.JoinHostPort(n.Host, strconv.Itoa(n.MetricsPort)) }

// LogPath is the node's weir.log (written only with Config.LogFile).
func (n *Node) LogPath() string { return filepath.Join(n.Dir, "weir.log") }

// Props is the node's configuration: the defaults, then Config.Props, then Config.NodeProps.
func (n *Node) Props() map[string]string {
	p := map[string]string{
		"node.id":          strconv.Itoa(int(n.ID)),
		"listeners":        "PLAINTEXT://" + n.Addr(),
		"log.dirs":         n.Dir,
		"metrics.listener": n.MetricsAddr(),
	}
	if n.c.voters != "" {
		p["controller.quorum.voters"] = n.c.voters
	}
	for k, v := range n.c.cfg.Props {
		p[k] = v
	}
	if n.c.cfg.NodeProps != nil {
		for k, v := range n.c.cfg.NodeProps(n) {
			p[k] = v
		}
	}
	return p
}

// Args is the command line after the binary that starts the node: `serve` and one --set per
// key, in key order.
func (n *Node) Args() []string {
	props := n.Props()
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]string, 0, 1+2*len(keys))
	args = append(args, "serve")
	for _, k := range keys {
		args = append(args, "--set", k+"="+props[k])
	}
	return args
}

// Start starts the node's process (again, after an exit) and waits until it is ready.
func (n *Node) Start(ctx context.Context) error {
	if err := n.Spawn(); err != nil {
		return err
	}
	return n.c.WaitReady(ctx, n)
}

// Restart is Start for a node that was stopped or killed; a node still running is an error.
func (n *Node) Restart(ctx context.Context) error { return n.Start(ctx) }

// Spawn starts the node's process (again, after an exit) without waiting for readiness (see
// Cluster.WaitReady). A node still running is an error.
func (n *Node) Spawn() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.exited:
		default:
			return fmt.Errorf("node %d is running (pid %d)", n.ID, n.cmd.Process.Pid)
		}
	}
	// A port something already listens on would be a start failure at best and, for the admin
	// port, another process's /readyz mistaken for this node's readiness at worst.
	for _, addr := range []string{n.Addr(), n.ControllerAddr(), n.MetricsAddr()} {
		if n.c.listening(addr) {
			return fmt.Errorf("node %d: %s is already in use", n.ID, addr)
		}
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return fmt.Errorf("node %d: %w", n.ID, err)
	}
	var argv []string
	if n.c.cfg.Command != nil {
		argv = n.c.cfg.Command(n)
	} else {
		argv = append([]string{n.c.cfg.Binary}, n.Args()...)
	}
	if n.c.cfg.Wrap != nil {
		argv = n.c.cfg.Wrap(n, argv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	banner := fmt.Sprintf("--- testcluster: starting node %d at %s ---\n", n.ID, time.Now().Format(time.RFC3339))
	if n.c.cfg.LogFile {
		logf, err := os.OpenFile(n.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("node %d: %w", n.ID, err)
		}
		defer logf.Close() // the child has its own copy
		st, err := logf.Stat()
		if err != nil {
			return fmt.Errorf("node %d: %w", n.ID, err)
		}
		n.logFrom = st.Size()
		_, _ = io.WriteString(logf, banner)
		cmd.Stdout, cmd.Stderr = logf, logf
	} else {
		n.runFrom = n.out.Len()
		_, _ = n.out.Write([]byte(banner))
		cmd.Stdout, cmd.Stderr = &n.out, &n.out
	}
	if n.c.cfg.SysProcAttr != nil {
		cmd.SysProcAttr = n.c.cfg.SysProcAttr()
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node %d: %w", n.ID, err)
	}
	exited := make(chan struct{})
	n.cmd, n.exited, n.exitErr = cmd, exited, nil
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		n.exitErr = err
		n.mu.Unlock()
		close(exited)
		if n.c.cfg.OnExit != nil {
			n.c.cfg.OnExit(n)
		}
	}()
	return nil
}

// Pid is the current (or last) process's id, 0 before the first start.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Exited is closed once the current process has exited (already closed before the first start).
func (n *Node) Exited() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exited == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return n.exited
}

// Running says whether the node's process is started and has not exited.
func (n *Node) Running() bool {
	select {
	case <-n.Exited():
		return false
	default:
		return true
	}
}

// ExitErr is cmd.Wait's result for the last process that exited (nil: exit status 0).
func (n *Node) ExitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exitErr
}

// ExitString describes ExitErr ("exit status 0", "signal: killed", ...).
func (n *Node) ExitString() string {
	if err := n.ExitErr(); err != nil {
		return err.Error()
	}
	return "exit status 0"
}

// Signal sends sig to the running process.
func (n *Node) Signal(sig syscall.Signal) error {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd == nil || !n.Running() {
		return fmt.Errorf("node %d is not running", n.ID)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("node %d: %v: %w", n.ID, sig, err)
	}
	return nil
}

// WaitExit waits up to within for the process to exit.
func (n *Node) WaitExit(within time.Duration) error {
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-n.Exited():
		return nil
	case <-t.C:
		return fmt.Errorf("node %d (pid %d) did not exit within %v", n.ID, n.Pid(), within)
	}
}

// Kill SIGKILLs the node and waits for it to exit. A node not running is no error.
func (n *Node) Kill() error {
	if !n.Running() {
		return nil
	}
	_ = n.Signal(syscall.SIGKILL)
	return n.WaitExit(30 * time.Second)
}

// Terminate sends SIGTERM (SIGCONT first, in case it is paused) and waits up to within for the
// exit; past that the node is SIGKILLed and an error returned.
func (n *Node) Terminate(within time.Duration) error {
	if !n.Running() {
		return nil
	}
	_ = n.Signal(syscall.SIGCONT)
	if err := n.Signal(syscall.SIGTERM); err != nil && n.Running() {
		return err
	}
	if err := n.WaitExit(within); err != nil {
		_ = n.Kill()
		return fmt.Errorf("%w after SIGTERM: killed", err)
	}
	return nil
}

// Pause stops the process with SIGSTOP; Continue resumes it with SIGCONT.
func (n *Node) Pause() error { return n.Signal(syscall.SIGSTOP) }

// Continue resumes a paused process.
func (n *Node) Continue() error { return n.Signal(syscall.SIGCONT) }

// Output is the node's output of its current run (from the start banner on).
func (n *Node) Output() string {
	n.mu.Lock()
	from, logFrom := n.runFrom, n.logFrom
	n.mu.Unlock()
	if n.c.cfg.LogFile {
		return readFrom(n.LogPath(), logFrom)
	}
	s := n.out.String()
	if from > len(s) {
		return ""
	}
	return s[from:]
}

// AllOutput is the node's output of every run (in memory), or its whole weir.log (LogFile).
func (n *Node) AllOutput() string {
	if n.c.cfg.LogFile {
		return readFrom(n.LogPath(), 0)
	}
	return n.out.String()
}

// ReadyzState polls the node's /readyz once: nil when it answers 200, else why not.
func (n *Node) ReadyzState(ctx context.Context) error {
	return readyz(ctx, n.c.http, n.MetricsAddr())
}

// ReadyState polls the node's readiness once: Config.Ready when set, else /readyz (ReadyzState).
func (n *Node) ReadyState(ctx context.Context) error {
	if n.c.cfg.Ready != nil {
		return n.c.cfg.Ready(ctx, n)
	}
	return n.ReadyzState(ctx)
}

// listening says whether something accepts TCP connections on addr (a dial within 200 ms
// succeeds), dialing through Config.DialContext when set.
func (c *Cluster) listening(addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	dial := c.cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// WaitReadyz polls http://addr/readyz (every 5 ms) until it answers 200, for at most within or
// until ctx ends; the error names the last answer. Used for brokers that are not child processes
// (testcluster/inproc).
func WaitReadyz(ctx context.Context, addr string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		err := readyz(ctx, readyClient, addr)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %v: last /readyz: %v", addr, within, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

var readyClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func readyz(ctx context.Context, client *http.Client, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
}

// WaitReady waits until every node is ready (ReadyState: /readyz answers 200). It fails when a
// node exits first ("node N exited at start (...)" with the end of its output), when
// StartTimeout passes ("node(s) 1,2 did not start within ..." with each one's last readiness
// answer), or when ctx ends.
func (c *Cluster) WaitReady(ctx context.Context, nodes ...*Node) error {
	within := c.cfg.StartTimeout
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	ready := make(map[*Node]bool, len(nodes))
	last := make(map[*Node]error, len(nodes))
	for {
		for _, n := range nodes {
			if ready[n] {
				continue
			}
			if !n.Running() {
				where := "its output"
				if c.cfg.LogFile {
					where = n.LogPath()
				}
				return fmt.Errorf("node %d exited at start (%s); the end of %s:\n%s", n.ID, n.ExitString(), where,
					LastLines(n.Output(), 20))
			}
			err := n.ReadyState(ctx)
			if err == nil {
				ready[n] = true
				continue
			}
			last[n] = err
		}
		if len(ready) == len(nodes) {
			return nil
		}
		if time.Now().After(deadline) {
			var ids, why []string
			for _, n := range nodes {
				if !ready[n] {
					ids = append(ids, strconv.Itoa(int(n.ID)))
					why = append(why, fmt.Sprintf("node %d %s: %v", n.ID, c.probe(), last[n]))
				}
			}
			return fmt.Errorf("node(s) %s did not start within %v (%s)", strings.Join(ids, ","), within, strings.Join(why, "; "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while starting: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// probe names the readiness probe, for errors.
func (c *Cluster) probe() string {
	if c.cfg.Ready != nil {
		return "readiness"
	}
	return "/readyz"
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// readFrom is the file's content from offset on ("" when it cannot be read).
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	var b bytes.Buffer
	_, _ = b.ReadFrom(f)
	return b.String()
}

// syncBuffer is a goroutine-safe sink for a child's output.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

var built struct {
	once sync.Once
	path string
	err  error
}

// Build builds github.com/weir-mq/weir/cmd/weir once per process (with the go command found on
// PATH, in the current module) into a temporary directory and returns the binary's path. Callers
// that need it removed do so themselves; tests usually leave it for the process's lifetime.
func Build() (string, error) {
	built.once.Do(func() { built.path, built.err = buildWeir() })
	return built.path, built.err
}

// builtTagged holds the binaries BuildTags built, by their space-joined tags.
var builtTagged struct {
	mu   sync.Mutex // guards bins and serialises the builds
	bins map[string]builtBinary
}

type builtBinary struct {
	path string
	err  error
}

// BuildTags is Build with build tags (`go build -tags a,b`), e.g. BuildTags("faults") for a
// binary with the fault control of internal/faultctl. Each set of tags is built once per process.
func BuildTags(tags ...string) (string, error) {
	key := strings.Join(tags, ",")
	builtTagged.mu.Lock()
	defer builtTagged.mu.Unlock()
	if b, ok := builtTagged.bins[key]; ok {
		return b.path, b.err
	}
	path, err := buildWeir(tags...)
	if builtTagged.bins == nil {
		builtTagged.bins = map[string]builtBinary{}
	}
	builtTagged.bins[key] = builtBinary{path, err}
	return path, err
}

// buildWeir builds cmd/weir with tags into a new temporary directory.
func buildWeir(tags ...string) (string, error) {
	dir, err := os.MkdirTemp("", "weir-testcluster-bin")
	if err != nil {
		return "", fmt.Errorf("build weir: %w", err)
	}
	path := filepath.Join(dir, "weir")
	args := []string{"build", "-o", path}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "github.com/weir-mq/weir/cmd/weir")
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return path, nil
}
