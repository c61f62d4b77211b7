package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// create makes a set for the test, named base (or base plus this process's id when another
// process holds base), skipping the test where namespaces cannot be made. The set is closed when
// the test ends.
func create(t *testing.T, base string, n int) *Net {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip("network namespaces unavailable: " + err.Error())
	}
	nt, err := Create(base, n)
	if errors.Is(err, ErrInUse) {
		nt, err = Create(base+strconv.Itoa(os.Getpid()), n)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nt.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(runDir + "/" + nt.ns(0)); err == nil {
			t.Errorf("%s still exists after Close", nt.ns(0))
		}
	})
	return nt
}

// host is a host's address for the probes: node i's, or the clients' for 0.
func host(nt *Net, i int) string {
	if i == 0 {
		return nt.ClientAddr()
	}
	return nt.Addr(i)
}

const probePort = 7001

// prober has a UDP socket on every host (0 the clients, 1..n the nodes) and records which
// datagrams arrive: a datagram is one packet, so what arrives is exactly which directions pass.
type prober struct {
	nt    *Net
	conns []*net.UDPConn // conns[i] lives in namespace i
	mu    sync.Mutex     // guards got
	got   map[string]bool
}

func newProber(t *testing.T, nt *Net) *prober {
	p := &prober{nt: nt, got: map[string]bool{}}
	for i := 0; i <= nt.n; i++ {
		var c *net.UDPConn
		err := nt.inNamespace(i, func() error {
			var err error
			c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(host(nt, i)), Port: probePort})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		p.conns = append(p.conns, c)
		go func() {
			buf := make([]byte, 64)
			for {
				n, _, err := c.ReadFromUDP(buf)
				if err != nil {
					return
				}
				p.mu.Lock()
				p.got[string(buf[:n])] = true
				p.mu.Unlock()
			}
		}()
	}
	return p
}

// matrix sends a datagram from every host to every other (the sockets keep their namespaces)
// and returns "from->to" for each one that arrived, sorted ("c" is the clients). It waits until
// every pair in want arrived (at most 5 s), then 200 ms more for those that should not: a dropped
// packet cannot be waited for, so its absence is observed over a window many times longer than a
// veth hop takes.
func (p *prober) matrix(t *testing.T, round int, want string) string {
	t.Helper()
	name := func(i int) string {
		if i == 0 {
			return "c"
		}
		return strconv.Itoa(i)
	}
	var all []string
	for from := 0; from <= p.nt.n; from++ {
		for to := 0; to <= p.nt.n; to++ {
			if from == to {
				continue
			}
			key := fmt.Sprintf("%d:%s->%s", round, name(from), name(to))
			all = append(all, key)
			dst := &net.UDPAddr{IP: net.ParseIP(host(p.nt, to)), Port: probePort}
			if _, err := p.conns[from].WriteToUDP([]byte(key), dst); err != nil {
				t.Fatalf("send %s: %v", key, err)
			}
		}
	}
	arrived := func() string {
		p.mu.Lock()
		defer p.mu.Unlock()
		var got []string
		for _, k := range all {
			if p.got[k] {
				got = append(got, strings.SplitN(k, ":", 2)[1])
			}
		}
		return strings.Join(got, " ")
	}
	deadline := time.Now().Add(5 * time.Second)
	for arrived() != want && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	return arrived()
}

// pairs lists "from->to" for every ordered pair of hosts except those cut (given as "a->b").
func pairs(n int, cut ...string) string {
	drop := map[string]bool{}
	for _, c := range cut {
		drop[c] = true
	}
	var out []string
	for from := 0; from <= n; from++ {
		for to := 0; to <= n; to++ {
			f, tt := "c", "c"
			if from > 0 {
				f = strconv.Itoa(from)
			}
			if to > 0 {
				tt = strconv.Itoa(to)
			}
			if from != to && !drop[f+"->"+tt] {
				out = append(out, f+"->"+tt)
			}
		}
	}
	return strings.Join(out, " ")
}

// both is a->b and b->a.
func both(a, b string) []string { return []string{a + "->" + b, b + "->" + a} }

func cat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Each fault drops exactly the packets it names, faults add up, repeating one changes nothing, and
// Heal lets everything through again.
func TestFaults(t *testing.T) {
	nt := create(t, "wnunit", 3)
	p := newProber(t, nt)
	round := 0
	expect := func(what, want string) {
		t.Helper()
		round++
		if got := p.matrix(t, round, want); got != want {
			t.Fatalf("%s (cuts %q): packets that arrived\n got %s\nwant %s", what, nt.Cuts(), got, want)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	expect("healthy", pairs(3))

	must(nt.Split([]int{1}, []int{2, 3}))
	splitCut := cat(both("1", "2"), both("1", "3"))
	expect("split 1 | 2 3", pairs(3, splitCut...))
	cuts := nt.Cuts()
	must(nt.Split([]int{1}, []int{2, 3}))
	if nt.Cuts() != cuts {
		t.Fatalf("split twice: cuts %q, then %q", cuts, nt.Cuts())
	}
	must(nt.OneWay(2, 3))
	expect("split, then one-way 2->3", pairs(3, append(splitCut, "2->3")...))
	must(nt.Heal())
	expect("healed", pairs(3))

	must(nt.OneWay(3, 1))
	expect("one-way 3->1", pairs(3, "3->1"))
	must(nt.Heal())

	must(nt.Bridge([]int{1}, []int{3}, 2))
	expect("bridge 1 | 2 | 3", pairs(3, both("1", "3")...))
	must(nt.Heal())

	must(nt.Isolate(2))
	expect("isolate 2", pairs(3, cat(both("2", "1"), both("2", "3"), both("2", "c"))...))
	must(nt.Heal())
	expect("healed", pairs(3))

	for _, bad := range []error{nt.Split([]int{1, 2}, []int{2, 3}), nt.Isolate(4), nt.OneWay(1, 1),
		nt.Bridge([]int{1}, []int{2}, 2), nt.Split([]int{0})} {
		if bad == nil {
			t.Error("a bad fault: no error")
		}
	}
	if nt.Cuts() != "" {
		t.Fatalf("refused faults left cuts %q", nt.Cuts())
	}
}

// A cut looks like a partition to TCP: a connect through it times out (no refusal, no ICMP
// error), while clients still reach a node split from its peers.
func TestTCPThroughCut(t *testing.T) {
	nt := create(t, "wntcp", 2)
	for i := 1; i <= 2; i++ {
		var ln net.Listener
		if err := nt.inNamespace(i, func() error {
			var err error
			ln, err = net.Listen("tcp4", net.JoinHostPort(nt.Addr(i), "7000"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, strconv.Itoa(i))
				c.Close()
			}
		}()
	}
	// dial connects from namespace from to node to's listener and reads its greeting.
	dial := func(from, to int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		var c net.Conn
		err := nt.inNamespace(from, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, "tcp4", net.JoinHostPort(nt.Addr(to), "7000"))
			return err
		})
		if err != nil {
			return err
		}
		defer c.Close()
		b, err := io.ReadAll(c)
		if err != nil || string(b) != strconv.Itoa(to) {
			return fmt.Errorf("greeting %q, %v", b, err)
		}
		return nil
	}
	if err := dial(1, 2); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	if err := nt.Split([]int{1}, []int{2}); err != nil {
		t.Fatal(err)
	}
	err := dial(1, 2)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("dial across a split: %v, want a timeout", err)
	}
	// The clients' DialContext still reaches both sides of a split.
	for i := 1; i <= 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := nt.DialContext(ctx, "tcp", net.JoinHostPort(nt.Addr(i), "7000"))
		cancel()
		if err != nil {
			t.Fatalf("client to node %d during a split: %v", i, err)
		}
		c.Close()
	}
	if err := nt.Heal(); err != nil {
		t.Fatal(err)
	}
	if err := dial(2, 1); err != nil {
		t.Fatalf("healed: %v", err)
	}
}

// Exec runs the command itself (same pid, so signals reach it) inside the node's namespace.
func TestExec(t *testing.T) {
	nt := create(t, "wnexec", 1)
	argv := nt.Exec(1, []string{"ip", "-4", "-o", "addr", "show", "dev", "eth0"})
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), " "+nt.Addr(1)+"/24 ") {
		t.Fatalf("ip addr in node 1: %v\n%s", err, out)
	}
	argv = nt.Exec(1, []string{"sleep", "60"})
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// ip execs sleep in place: once the pid's command is sleep, it is in node 1's namespace.
	deadline := time.Now().Add(5 * time.Second)
	for {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d is %q, not sleep", cmd.Process.Pid, comm)
		}
		time.Sleep(5 * time.Millisecond)
	}
	want, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := nt.inNamespace(1, func() error {
		var err error
		got, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("sleep's namespace %s, node 1's %s", want, got)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "interrupt") {
		t.Fatalf("sleep after SIGINT: %v", err)
	}
}

// A set left by a process that died is removed by the next Create of that name; one whose owner
// runs is refused.
func TestStaleSet(t *testing.T) {
	nt := create(t, "wnstale", 2)
	if _, err := Create(nt.name, 2); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Create while the first is open: %v, want ErrInUse", err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	// Pretend the set's owner was a process that has exited.
	if err := run(nt.ip, nt.ns(0), "link", "set", "br0", "alias", owner(dead.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	again, err := Create(nt.name, 1)
	if err != nil {
		t.Fatalf("Create over a stale set: %v", err)
	}
	if _, err := os.Stat(runDir + "/" + nt.ns(2)); err == nil {
		again.Close()
		t.Fatalf("stale %s survived", nt.ns(2))
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}
