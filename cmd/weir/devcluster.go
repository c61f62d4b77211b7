package main

// weir dev-cluster: n `weir serve` child processes of this binary on 127.0.0.1, every one a
// broker and a controller quorum voter, for trying replication on one machine. The processes
// are started, waited for (each node's /readyz) and stopped by internal/testcluster, the harness
// the cluster tests and `weir bench cluster` use too.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/weir-mq/weir/broker"
	"github.com/weir-mq/weir/internal/testcluster"
)

const devClusterUsage = `usage: weir dev-cluster [-n 3] [--dir ./data-cluster] [--base-port 9092] [--controller-base-port 19093] [--racks a,b,c] [--log-dirs-per-node 1] [--set key=value ...]

Starts n brokers on 127.0.0.1, every one also a controller quorum voter: node i listens on
base-port+i-1 (controller on controller-base-port+i-1) with data and its log (weir.log) in
DIR/node-i. Unless --set says otherwise, default.replication.factor and the internal topics'
replication factors (offsets.topic.replication.factor,
transaction.state.log.replication.factor, share.coordinator.state.topic.replication.factor)
are min(3,n) and min.insync.replicas is min(2,n). Ctrl-C
(SIGINT) or SIGTERM stops every node with SIGTERM (SIGKILL after --stop-timeout).
`

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
	"metrics.listener":         "--metrics-base-port",
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
	// racks (--racks a,b,c; issue 14): node i's broker.rack is racks[(i-1) mod len]; nil: none.
	racks []string
	// logDirsPerNode (jbod) is --log-dirs-per-node: more than 1 gives each node that many log
	// dirs, DIR/node-i/disk-1..N.
	logDirsPerNode int
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
	fs.IntVar(&c.metricsBasePort, "metrics-base-port", 9644, "metrics.listener port of node 1 (node i: metrics-base-port+i-1; 0: a free port each). Every node has one: readiness is read from its /readyz")
	fs.Var(setFlags(c.sets), "set", "config key=value for every node (repeatable), as weir serve --set")
	fs.DurationVar(&c.startTimeout, "start-timeout", 60*time.Second, "how long to wait for every node to start")
	fs.DurationVar(&c.stopTimeout, "stop-timeout", 30*time.Second, "how long to wait for the nodes after SIGTERM before SIGKILL")
	racks := fs.String("racks", "", "broker.rack of the nodes, comma-separated: node i takes the i-th, cycling (a,b,c with -n 6: a,b,c,a,b,c); empty: no racks")
	fs.IntVar(&c.logDirsPerNode, "log-dirs-per-node", 1, "log dirs of each node (more than 1: DIR/node-i/disk-1..N, as log.dirs)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *racks != "" {
		c.racks = strings.Split(*racks, ",")
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
	if c.logDirsPerNode < 0 || c.logDirsPerNode > 16 { // 0: one, as 1
		return fmt.Errorf("--log-dirs-per-node %d: want 1 to 16", c.logDirsPerNode)
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
	for _, r := range c.racks {
		if r == "" {
			return errors.New("--racks: an empty rack name")
		}
	}
	if _, ok := c.sets["broker.rack"]; ok && len(c.racks) > 0 {
		return errors.New("--set broker.rack and --racks: give one of them")
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

// nodeLogDirs is node i's log.dirs: its directory, or with --log-dirs-per-node N > 1 the
// directories disk-1..N in it.
func (c *devClusterConfig) nodeLogDirs(i int) string {
	if c.logDirsPerNode <= 1 {
		return c.nodeDir(i)
	}
	dirs := make([]string, c.logDirsPerNode)
	for j := range dirs {
		dirs[j] = filepath.Join(c.nodeDir(i), "disk-"+strconv.Itoa(j+1))
	}
	return strings.Join(dirs, ",")
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
		// A cluster creates its internal topics with exactly these factors, waiting for as many
		// brokers (broker/internalrf.go): they must not exceed n.
		"transaction.state.log.replication.factor":         rf,
		"share.coordinator.state.topic.replication.factor": rf,
		"min.insync.replicas":                              strconv.Itoa(min(2, c.n)),
	}
	if c.metricsBasePort > 0 {
		props["metrics.listener"] = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.metricsBasePort+i-1))
	}
	for k, v := range c.sets {
		props[k] = v
	}
	props["node.id"] = strconv.Itoa(i)
	props["listeners"] = "PLAINTEXT://" + c.brokerAddr(i)
	props["log.dirs"] = c.nodeLogDirs(i)
	props["controller.quorum.voters"] = c.voters()
	if len(c.racks) > 0 {
		props["broker.rack"] = c.racks[(i-1)%len(c.racks)]
	}
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

// runDevCluster starts the nodes with internal/testcluster (each node's output appended to its
// weir.log; a node is started when its /readyz answers 200) and supervises them until ctx ends.
func runDevCluster(ctx context.Context, c *devClusterConfig, exe string, stdout io.Writer) error {
	abs, err := filepath.Abs(c.dir)
	if err != nil {
		return err
	}
	c.dir = abs
	exits := make(chan *testcluster.Node, c.n) // every node, once it has exited (each exits once)
	cl, err := testcluster.New(testcluster.Config{
		Binary: exe, N: c.n, Dir: c.dir,
		BasePort: c.basePort, ControllerBasePort: c.controllerBasePort, MetricsBasePort: c.metricsBasePort,
		NodeProps:    func(n *testcluster.Node) map[string]string { return c.nodeProps(int(n.ID)) },
		LogFile:      true,
		SysProcAttr:  devSysProcAttr,
		OnExit:       func(n *testcluster.Node) { exits <- n },
		StartTimeout: c.startTimeout,
	})
	if err != nil {
		return err
	}
	// started: the node became ready and its exit is not reported yet. Only this goroutine
	// reads or writes it.
	started := make(map[int32]bool, c.n)
	stop := func(out io.Writer) {
		cl.StopAll(c.stopTimeout, func(n *testcluster.Node, killed bool) {
			if killed {
				fmt.Fprintf(out, "node %d (pid %d) still running after %v: SIGKILL\n", n.ID, n.Pid(), c.stopTimeout)
			} else if started[n.ID] {
				fmt.Fprintf(out, "node %d (pid %d) exited: %s\n", n.ID, n.Pid(), n.ExitString())
			}
			started[n.ID] = false
		})
	}
	defer stop(io.Discard) // whatever happened, leave no child running

	fmt.Fprintf(stdout, "weir dev-cluster: %d nodes, data in %s\n", c.n, c.dir)
	for _, n := range cl.Nodes() {
		if err := n.Spawn(); err != nil {
			stop(stdout)
			return err
		}
		fmt.Fprintf(stdout, "  node %d: pid %d, broker %s, controller %s, metrics %s, log %s\n",
			n.ID, n.Pid(), n.Addr(), n.ControllerAddr(), n.MetricsAddr(), n.LogPath())
	}
	fmt.Fprintf(stdout, "bootstrap: %s\n", c.bootstrap())

	if err := cl.WaitReady(ctx, cl.Nodes()...); err != nil {
		fmt.Fprintf(stdout, "stopping: %v\n", err)
		stop(stdout)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	for _, n := range cl.Nodes() {
		started[n.ID] = true
	}
	fmt.Fprintf(stdout, "all %d nodes started; Ctrl-C stops them. Try:\n", c.n)
	fmt.Fprintf(stdout, "  weir cluster info --bootstrap %s\n", c.bootstrap())
	fmt.Fprintf(stdout, "  weir topic create demo --partitions 3 --bootstrap %s\n", c.bootstrap())
	fmt.Fprintf(stdout, "  weir topic describe demo --bootstrap %s\n", c.bootstrap())

	// Run until told to stop; a node that exits (killed on purpose, say) is reported and the
	// others keep running.
	alive := c.n // every one started, and each exit arrives on exits once
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stdout, "stopping %d nodes (SIGTERM)\n", alive)
			stop(stdout)
			return nil
		case n := <-exits:
			if !started[n.ID] {
				continue
			}
			started[n.ID] = false // reported
			alive--
			fmt.Fprintf(stdout, "node %d (pid %d) exited: %s; see %s\n", n.ID, n.Pid(), n.ExitString(), n.LogPath())
			if alive == 0 {
				return errors.New("every node has exited")
			}
		}
	}
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

func lastLines(s string, n int) string { return testcluster.LastLines(s, n) }
