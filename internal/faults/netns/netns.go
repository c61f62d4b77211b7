package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// MaxNodes bounds Create's n: node addresses are .1 to .MaxNodes of the /24, the clients' is .254.
const MaxNodes = 250

// clientHost is the last byte of the clients' address (the bridge's own address).
const clientHost = 254

// runDir is where iproute2 keeps its named namespaces (bind mounts of /proc/PID/ns/net).
const runDir = "/run/netns"

// commandTimeout bounds one ip or tc invocation.
const commandTimeout = 30 * time.Second

// ErrInUse is Create's error when a set of that name belongs to a process that still runs.
var ErrInUse = errors.New("namespace set in use")

// validName is what Create accepts as a name: it becomes part of namespace names and file names.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.]{0,31}$`)

// Net is a set of network namespaces made by Create: a bridge namespace (the clients') and one
// namespace per node. Its methods may be called from several goroutines.
type Net struct {
	name   string
	n      int
	prefix string // "10.231.X.", the /24 every address lies in
	ip, tc string // paths of the ip and tc binaries

	fdMu   sync.RWMutex // guards fds and closed; held for reading while a goroutine is inside a namespace
	fds    []int        // fds[i]: an open descriptor of namespace i (0: the bridge's), for setns
	closed bool

	mu sync.Mutex // guards blocked and dirty, and serialises tc runs, so that blocked matches the filters
	// blocked is the set of directed cuts: packets from -> to are dropped (0 is the clients).
	// Invariant: unless dirty, each pair has exactly one filter installed and no other filter exists.
	blocked map[pair]bool
	dirty   bool // a tc run failed midway: the installed filters may differ from blocked until Heal
}

// pair is a directed cut: packets from a host to another (0 is the clients, 1..n the nodes).
type pair struct{ from, to int }

var available struct {
	once sync.Once
	err  error
}

// Available says whether Create can work here: nil, or why not (not root, no ip or tc binary,
// no namespace, veth, bridge or tc classifier support in the kernel). The answer comes from
// building and removing a small probe namespace once per process.
func Available() error {
	available.once.Do(func() { available.err = probe() })
	return available.err
}

func probe() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root (euid is " + strconv.Itoa(os.Geteuid()) + ")")
	}
	ip, tc, err := tools()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("weirprobe%d", os.Getpid())
	_ = run(ip, "", "netns", "del", name) // a leftover of this very pid
	if err := run(ip, "", "netns", "add", name); err != nil {
		return fmt.Errorf("cannot make network namespaces: %w", err)
	}
	defer func() { _ = run(ip, "", "netns", "del", name) }()
	script := "link set lo up\nlink add br0 type bridge\nlink add a0 type veth peer name a1\nlink set a0 master br0\n"
	if err := runBatch(ip, name, script); err != nil {
		return fmt.Errorf("cannot make a bridge and a veth pair in a namespace: %w", err)
	}
	script = "qdisc add dev a0 clsact\nfilter add dev a0 ingress protocol ip prio 1 u32 match ip dst 10.0.0.1/32 action mirred egress redirect dev a1\n"
	if err := runBatch(tc, name, script); err != nil {
		return fmt.Errorf("no tc clsact/u32/mirred support: %w", err)
	}
	return nil
}

// tools finds the ip and tc binaries.
func tools() (ip, tc string, err error) {
	if ip, err = exec.LookPath("ip"); err != nil {
		return "", "", fmt.Errorf("no ip command (iproute2): %w", err)
	}
	if tc, err = exec.LookPath("tc"); err != nil {
		return "", "", fmt.Errorf("no tc command (iproute2): %w", err)
	}
	return ip, tc, nil
}

// Create makes the namespaces "<name>-br" (a bridge br0 with the clients' address) and
// "<name>-1" .. "<name>-<n>" (node i with Addr(i) on eth0, cabled to the bridge by a veth pair).
// A set of the same name left by a process that no longer runs is removed first; one whose
// process still runs is an error. On error nothing is left behind.
func Create(name string, n int) (*Net, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("netns: name %q: want 1 to 32 letters, digits, '_' or '.'", name)
	}
	if n < 1 || n > MaxNodes {
		return nil, fmt.Errorf("netns: %d nodes: want 1 to %d", n, MaxNodes)
	}
	if err := Available(); err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	ip, tc, err := tools()
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	nt := &Net{name: name, n: n, prefix: fmt.Sprintf("10.231.%d.", h.Sum32()%256), ip: ip, tc: tc,
		blocked: map[pair]bool{}}
	if err := nt.removeStale(); err != nil {
		return nil, err
	}
	if err := nt.build(); err != nil {
		nt.deleteAll()
		return nil, fmt.Errorf("netns: create %s: %w", name, err)
	}
	return nt, nil
}

// ns is namespace i's name (0: the bridge's).
func (nt *Net) ns(i int) string {
	if i == 0 {
		return nt.name + "-br"
	}
	return nt.name + "-" + strconv.Itoa(i)
}

// owner is the alias on br0 that names the process owning the set.
func owner(pid int) string { return "weir-netns pid=" + strconv.Itoa(pid) }

var ownerPid = regexp.MustCompile(`alias weir-netns pid=(\d+)`)

// removeStale deletes a set of this name whose owner process is gone: the bridge namespace and
// every "<name>-<digits>" namespace.
func (nt *Net) removeStale() error {
	entries, err := os.ReadDir(runDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	node := regexp.MustCompile(`^` + regexp.QuoteMeta(nt.name) + `-(br|[0-9]+)$`)
	var stale []string
	for _, e := range entries {
		if node.MatchString(e.Name()) {
			stale = append(stale, e.Name())
		}
	}
	if len(stale) == 0 {
		return nil
	}
	var out bytes.Buffer
	cmd := exec.Command(nt.ip, "-n", nt.ns(0), "link", "show", "dev", "br0")
	cmd.Stdout = &out
	if cmd.Run() == nil {
		if m := ownerPid.FindSubmatch(out.Bytes()); m != nil {
			pid, _ := strconv.Atoi(string(m[1]))
			if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
				return fmt.Errorf("netns: %w: namespaces %s-* belong to running process %d (remove them with `ip netns del` if it is not a weir test)", ErrInUse, nt.name, pid)
			}
		}
	}
	slog.Info("netns: removing a stale namespace set", "name", nt.name, "namespaces", stale)
	var errs []error
	for _, s := range stale {
		if err := run(nt.ip, "", "netns", "del", s); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("netns: remove stale set %s: %w", nt.name, err)
	}
	return nil
}

// build makes the namespaces, links and addresses, and opens each namespace for setns.
func (nt *Net) build() error {
	var add strings.Builder
	for i := 0; i <= nt.n; i++ {
		fmt.Fprintf(&add, "netns add %s\n", nt.ns(i))
	}
	if err := runBatch(nt.ip, "", add.String()); err != nil {
		return err
	}
	var br strings.Builder
	fmt.Fprintf(&br, "link set lo up\nlink add br0 type bridge\nlink set br0 alias %q\n", owner(os.Getpid()))
	fmt.Fprintf(&br, "addr add %s/24 dev br0\nlink set br0 up\n", nt.ClientAddr())
	br.WriteString("link add sink0 type veth peer name sink1\nlink set sink0 up\nlink set sink1 up\n")
	for i := 1; i <= nt.n; i++ {
		fmt.Fprintf(&br, "link add p%d type veth peer name eth0 netns %s\nlink set p%d master br0 up\n", i, nt.ns(i), i)
	}
	if err := runBatch(nt.ip, nt.ns(0), br.String()); err != nil {
		return err
	}
	for i := 1; i <= nt.n; i++ {
		script := fmt.Sprintf("link set lo up\naddr add %s/24 dev eth0\nlink set eth0 up\n", nt.Addr(i))
		if err := runBatch(nt.ip, nt.ns(i), script); err != nil {
			return err
		}
	}
	var tcs strings.Builder
	for i := 1; i <= nt.n; i++ {
		fmt.Fprintf(&tcs, "qdisc add dev p%d clsact\n", i)
	}
	if err := runBatch(nt.tc, nt.ns(0), tcs.String()); err != nil {
		return err
	}
	nt.fdMu.Lock()
	defer nt.fdMu.Unlock()
	for i := 0; i <= nt.n; i++ {
		fd, err := unix.Open(filepath.Join(runDir, nt.ns(i)), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open namespace %s: %w", nt.ns(i), err)
		}
		nt.fds = append(nt.fds, fd)
	}
	return nil
}

// Close deletes every namespace of the set (their links go with them). Processes still running in
// a node's namespace keep it alive, cut off from everything. Close waits for DialContext calls
// in flight; calling it twice is no error.
func (nt *Net) Close() error {
	nt.fdMu.Lock()
	if nt.closed {
		nt.fdMu.Unlock()
		return nil
	}
	nt.closed = true
	for _, fd := range nt.fds {
		_ = unix.Close(fd)
	}
	nt.fds = nil
	nt.fdMu.Unlock()
	if err := nt.deleteAll(); err != nil {
		return fmt.Errorf("netns: close %s: %w", nt.name, err)
	}
	return nil
}

// deleteAll deletes every namespace of the set that exists.
func (nt *Net) deleteAll() error {
	var errs []error
	for i := 0; i <= nt.n; i++ {
		if _, err := os.Stat(filepath.Join(runDir, nt.ns(i))); err != nil {
			continue
		}
		if err := run(nt.ip, "", "netns", "del", nt.ns(i)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Name is the set's name, the prefix of its namespaces' names.
func (nt *Net) Name() string { return nt.name }

// N is the number of nodes.
func (nt *Net) N() int { return nt.n }

// Addr is node i's IPv4 address (1 <= i <= N).
func (nt *Net) Addr(i int) string {
	nt.check(i, false)
	return nt.prefix + strconv.Itoa(i)
}

// ClientAddr is the clients' IPv4 address, the bridge's own address in the bridge namespace.
func (nt *Net) ClientAddr() string { return nt.prefix + strconv.Itoa(clientHost) }

// Namespace is node i's namespace name (i = 0: the bridge namespace, where clients are).
func (nt *Net) Namespace(i int) string {
	nt.check(i, true)
	return nt.ns(i)
}

// check panics on a node number out of range: that is a bug in the caller.
func (nt *Net) check(i int, clientsToo bool) {
	if i < 1 && !(clientsToo && i == 0) || i > nt.n {
		panic(fmt.Sprintf("netns: node %d of %s: want 1 to %d", i, nt.name, nt.n))
	}
}

// Exec turns argv into a command line that runs it in node i's namespace (i = 0: the bridge's):
// `ip netns exec <ns> argv...`. ip execs argv in place, so the process started is argv's own
// and signals sent to it reach it.
func (nt *Net) Exec(i int, argv []string) []string {
	nt.check(i, true)
	return append([]string{nt.ip, "netns", "exec", nt.ns(i)}, argv...)
}

// DialContext dials addr from the bridge namespace, as a client: the socket is made there and
// lives there whatever thread uses it later. It has net.Dialer.DialContext's signature, for
// kgo.Dialer and http.Transport.DialContext. addr should be an IP literal (Addr(i):port): a
// name would be resolved inside the namespace, where there is no DNS.
func (nt *Net) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := nt.inNamespace(0, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// inNamespace runs fn on a new goroutine whose OS thread has joined namespace i (0: the
// bridge's), and returns fn's error. Sockets fn creates belong to that namespace. The thread
// returns to its own namespace afterwards; if it cannot, it stays locked to the goroutine and
// the runtime discards it when the goroutine ends.
func (nt *Net) inNamespace(i int, fn func() error) error {
	nt.check(i, true)
	nt.fdMu.RLock()
	defer nt.fdMu.RUnlock()
	if nt.closed {
		return fmt.Errorf("netns: %s is closed", nt.name)
	}
	target := nt.fds[i]
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: this thread's namespace: %w", err)
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: enter %s: %w", nt.ns(i), err)
			return
		}
		ferr := fn()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			// Still in the other namespace: leave the thread locked, so that it exits with
			// this goroutine instead of running other goroutines there.
			errc <- errors.Join(ferr, fmt.Errorf("netns: leave %s: %w", nt.ns(i), err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// run runs an ip or tc command (in namespace ns when not ""), bounded by commandTimeout.
func run(bin, ns string, args ...string) error {
	return runInput(bin, ns, "", args...)
}

// runBatch runs script (one command a line) with `bin [-n ns] -batch -`; it stops at the first
// failing line.
func runBatch(bin, ns, script string) error {
	return runInput(bin, ns, script, "-batch", "-")
}

func runInput(bin, ns, stdin string, args ...string) error {
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		what := filepath.Base(bin) + " " + strings.Join(args, " ")
		if stdin != "" {
			what += " <<" + strconv.Quote(stdin)
		}
		return fmt.Errorf("%s: %w: %s", what, err, strings.TrimSpace(string(out)))
	}
	return nil
}
