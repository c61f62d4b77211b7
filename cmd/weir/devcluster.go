package main

// weir dev-cluster: n `weir serve` child processes of this binary on 127.0.0.1, every one a
// broker and a controller quorum voter, for trying replication on one machine.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weir-mq/weir/broker"
)

const devClusterUsage = `usage: weir dev-cluster [-n 3] [--dir ./data-cluster] [--base-port 9092] [--controller-base-port 19093] [--set key=value ...]

Starts n brokers on 127.0.0.1, every one also a controller quorum voter: node i listens on
base-port+i-1 (controller on controller-base-port+i-1) with data and its log (weir.log) in
DIR/node-i. Unless --set says otherwise, default.replication.factor and
offsets.topic.replication.factor are min(3,n) and min.insync.replicas is min(2,n). Ctrl-C
(SIGINT) or SIGTERM stops every node with SIGTERM (SIGKILL after --stop-timeout).
`

// devStartedMarker is the line a broker logs once it serves its listeners.
const devStartedMarker = "weir broker started"

// devNodeKeys are the config keys dev-cluster sets per node; --set may not override them.
var devNodeKeys = map[string]string{
	"node.id":                  "-n",
	"broker.id":                "-n",
	"listeners":                "--base-port",
	"advertised.listeners":     "--base-port",
	"log.dirs":                 "--dir",
	"log.dir":                  "--dir",
	"metadata.log.dir":         "--dir",
	"controller.quorum.voters": "--controller-base-port",
	"controller.listener":      "--controller-base-port",
}

// devClusterConfig is what `weir dev-cluster` was asked for.
type devClusterConfig struct {
	n                  int
	dir                string
	basePort           int
	controllerBasePort int
	metricsBasePort    int
	sets               map[string]string
	startTimeout       time.Duration
	stopTimeout        time.Duration
}

func parseDevClusterArgs(args []string, stdout io.Writer) (*devClusterConfig, error) {
	fs := flag.NewFlagSet("dev-cluster", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		fmt.Fprint(stdout, devClusterUsage, "\nflags:\n")
		fs.PrintDefaults()
	}
	c := &devClusterConfig{sets: setFlags{}}
	fs.IntVar(&c.n, "n", 3, "number of nodes")
	fs.StringVar(&c.dir, "dir", "./data-cluster", "parent of the node directories DIR/node-i")
	fs.IntVar(&c.basePort, "base-port", 9092, "broker port of node 1 (node i: base-port+i-1)")
	fs.IntVar(&c.controllerBasePort, "controller-base-port", 19093, "controller (Raft) port of node 1 (node i: controller-base-port+i-1)")
	fs.IntVar(&c.metricsBasePort, "metrics-base-port", 9644, "metrics.listener port of node 1 (node i: metrics-base-port+i-1; 0: no metrics listeners)")
	fs.Var(setFlags(c.sets), "set", "config key=value for every node (repeatable), as weir serve --set")
	fs.DurationVar(&c.startTimeout, "start-timeout", 60*time.Second, "how long to wait for every node to start")
	fs.DurationVar(&c.stopTimeout, "stop-timeout", 30*time.Second, "how long to wait for the nodes after SIGTERM before SIGKILL")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() != 0 {
		return nil, fmt.Errorf("dev-cluster takes no arguments, got %q\n%s", fs.Args(), devClusterUsage)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *devClusterConfig) validate() error {
	if c.n < 1 || c.n > 99 {
		return fmt.Errorf("-n %d: want 1 to 99 nodes", c.n)
	}
	if c.dir == "" {
		return errors.New("--dir is empty")
	}
	for _, p := range []struct {
		flag string
		base int
	}{{"--base-port", c.basePort}, {"--controller-base-port", c.controllerBasePort}} {
		if p.base < 1 || p.base+c.n-1 > 65535 {
			return fmt.Errorf("%s %d: ports %d-%d are not all valid", p.flag, p.base, p.base, p.base+c.n-1)
		}
	}
	if c.basePort < c.controllerBasePort+c.n && c.controllerBasePort < c.basePort+c.n {
		return fmt.Errorf("broker ports %d-%d overlap controller ports %d-%d",
			c.basePort, c.basePort+c.n-1, c.controllerBasePort, c.controllerBasePort+c.n-1)
	}
	for k := range c.sets {
		if f, ok := devNodeKeys[k]; ok {
			return fmt.Errorf("--set %s: dev-cluster sets it per node (use %s)", k, f)
		}
	}
	for i := 1; i <= c.n; i++ {
		if _, err := broker.NewConfig(c.nodeProps(i)); err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
	}
	return nil
}

func (c *devClusterConfig) nodeDir(i int) string {
	return filepath.Join(c.dir, "node-"+strconv.Itoa(i))
}

func (c *devClusterConfig) logPath(i int) string {
	return filepath.Join(c.nodeDir(i), "weir.log")
}

func (c *devClusterConfig) brokerAddr(i int) string {
	return "127.0.0.1:" + strconv.Itoa(c.basePort+i-1)
}

func (c *devClusterConfig) controllerAddr(i int) string {
	return "127.0.0.1:" + strconv.Itoa(c.controllerBasePort+i-1)
}

// bootstrap is every node's broker address, comma-separated.
func (c *devClusterConfig) bootstrap() string {
	addrs := make([]string, c.n)
	for i := range addrs {
		addrs[i] = c.brokerAddr(i + 1)
	}
	return strings.Join(addrs, ",")
}

func (c *devClusterConfig) voters() string {
	v := make([]string, c.n)
	for i := range v {
		v[i] = strconv.Itoa(i+1) + "@" + c.controllerAddr(i+1)
	}
	return strings.Join(v, ",")
}

// nodeProps is node i's (1-based) configuration: the cluster-wide defaults, the --set
// overrides, then the per-node keys.
func (c *devClusterConfig) nodeProps(i int) map[string]string {
	rf := strconv.Itoa(min(3, c.n))
	props := map[string]string{
		"default.replication.factor":       rf,
		"offsets.topic.replication.factor": rf,
		"min.insync.replicas":              strconv.Itoa(min(2, c.n)),
		"metrics.listener":                 "",
	}
	if c.metricsBasePort > 0 {
		props["metrics.listener"] = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.metricsBasePort+i-1))
	}
	for k, v := range c.sets {
		props[k] = v
	}
	props["node.id"] = strconv.Itoa(i)
	props["listeners"] = "PLAINTEXT://" + c.brokerAddr(i)
	props["log.dirs"] = c.nodeDir(i)
	props["controller.quorum.voters"] = c.voters()
	return props
}

// nodeArgs is the command line (after the binary) that starts node i (1-based).
func (c *devClusterConfig) nodeArgs(i int) []string {
	props := c.nodeProps(i)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := []string{"serve"}
	for _, k := range keys {
		args = append(args, "--set", k+"="+props[k])
	}
	return args
}

// devClusterCmd runs `weir dev-cluster ...` until ctx ends (SIGINT/SIGTERM in main) or every
// node has exited.
func devClusterCmd(ctx context.Context, args []string, stdout io.Writer) error {
	c, err := parseDevClusterArgs(args, stdout)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the weir binary: %w", err)
	}
	return runDevCluster(ctx, c, exe, stdout)
}

// devNode is one running child.
type devNode struct {
	id      int
	cmd     *exec.Cmd
	logFrom int64 // size of the log file before this run: older lines are not this run's
	started bool
	exited  chan struct{}
	exitErr error
}

func (n *devNode) hasExited() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

func runDevCluster(ctx context.Context, c *devClusterConfig, exe string, stdout io.Writer) error {
	abs, err := filepath.Abs(c.dir)
	if err != nil {
		return err
	}
	c.dir = abs
	nodes := make([]*devNode, 0, c.n)
	exits := make(chan *devNode, c.n) // every node, once it has exited
	defer func() {
		// Whatever happened, leave no child running.
		stopDevNodes(nodes, c.stopTimeout, io.Discard)
	}()
	fmt.Fprintf(stdout, "weir dev-cluster: %d nodes, data in %s\n", c.n, c.dir)
	for i := 1; i <= c.n; i++ {
		n, err := startDevNode(c, exe, i, exits)
		if err != nil {
			stopDevNodes(nodes, c.stopTimeout, stdout)
			return err
		}
		nodes = append(nodes, n)
		fmt.Fprintf(stdout, "  node %d: pid %d, broker %s, controller %s, log %s\n",
			i, n.cmd.Process.Pid, c.brokerAddr(i), c.controllerAddr(i), c.logPath(i))
	}
	fmt.Fprintf(stdout, "bootstrap: %s\n", c.bootstrap())

	if err := waitDevStarted(ctx, c, nodes, c.startTimeout); err != nil {
		fmt.Fprintf(stdout, "stopping: %v\n", err)
		stopDevNodes(nodes, c.stopTimeout, stdout)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	fmt.Fprintf(stdout, "all %d nodes started; Ctrl-C stops them. Try:\n", c.n)
	fmt.Fprintf(stdout, "  weir cluster info --bootstrap %s\n", c.bootstrap())
	fmt.Fprintf(stdout, "  weir topic create demo --partitions 3 --bootstrap %s\n", c.bootstrap())
	fmt.Fprintf(stdout, "  weir topic describe demo --bootstrap %s\n", c.bootstrap())

	// Run until told to stop; a node that exits (killed on purpose, say) is reported and the
	// others keep running.
	alive := len(nodes) // every one started, and each exit arrives on exits once
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stdout, "stopping %d nodes (SIGTERM)\n", alive)
			stopDevNodes(nodes, c.stopTimeout, stdout)
			return nil
		case n := <-exits:
			if !n.started {
				continue
			}
			n.started = false // reported
			alive--
			fmt.Fprintf(stdout, "node %d (pid %d) exited: %s; see %s\n", n.id, n.cmd.Process.Pid,
				exitString(n.exitErr), c.logPath(n.id))
			if alive == 0 {
				return errors.New("every node has exited")
			}
		}
	}
}

func startDevNode(c *devClusterConfig, exe string, i int, exits chan<- *devNode) (*devNode, error) {
	if err := os.MkdirAll(c.nodeDir(i), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(c.logPath(i), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	st, err := logf.Stat()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "--- weir dev-cluster: starting node %d at %s ---\n", i, time.Now().Format(time.RFC3339))
	cmd := exec.Command(exe, c.nodeArgs(i)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = devSysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start node %d: %w", i, err)
	}
	n := &devNode{id: i, cmd: cmd, logFrom: st.Size(), exited: make(chan struct{})}
	go func() {
		n.exitErr = cmd.Wait()
		close(n.exited)
		exits <- n
	}()
	return n, nil
}

// waitDevStarted waits until every node has logged devStartedMarker.
func waitDevStarted(ctx context.Context, c *devClusterConfig, nodes []*devNode, within time.Duration) error {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		waiting := 0
		for _, n := range nodes {
			if n.started {
				continue
			}
			logText := readLogFrom(c.logPath(n.id), n.logFrom)
			if strings.Contains(logText, devStartedMarker) {
				n.started = true
				continue
			}
			if n.hasExited() {
				return fmt.Errorf("node %d exited at start (%s); the end of %s:\n%s", n.id, exitString(n.exitErr),
					c.logPath(n.id), lastLines(logText, 20))
			}
			waiting++
		}
		if waiting == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var ids []string
			for _, n := range nodes {
				if !n.started {
					ids = append(ids, strconv.Itoa(n.id))
				}
			}
			return fmt.Errorf("node(s) %s did not start within %v; see their weir.log", strings.Join(ids, ","), within)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while starting: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// stopDevNodes sends SIGTERM to every running node, waits up to timeout for them, then
// SIGKILLs the rest.
func stopDevNodes(nodes []*devNode, timeout time.Duration, out io.Writer) {
	for _, n := range nodes {
		if !n.hasExited() {
			_ = n.cmd.Process.Signal(syscall.SIGCONT) // a SIGSTOPped node could not act on SIGTERM
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.After(timeout)
	for _, n := range nodes {
		select {
		case <-n.exited:
		case <-deadline:
		}
	}
	for _, n := range nodes {
		if !n.hasExited() {
			fmt.Fprintf(out, "node %d (pid %d) still running after %v: SIGKILL\n", n.id, n.cmd.Process.Pid, timeout)
			_ = n.cmd.Process.Kill()
			<-n.exited
		} else if n.started {
			fmt.Fprintf(out, "node %d (pid %d) exited: %s\n", n.id, n.cmd.Process.Pid, exitString(n.exitErr))
		}
		n.started = false
	}
}

func exitString(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// readLogFrom is the file's content from offset on ("" when it cannot be read).
func readLogFrom(path string, offset int64) string {
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

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
