// Package inproc starts brokers inside the test process: the in-process mode of the test
// harness (internal/testcluster starts `weir serve` child processes). Start runs one broker
// (its own one-node quorum); StartCluster runs n brokers that form one cluster, for tests that
// need replication but no process signals. It imports broker, so only
// tests outside the broker package (cmd/weir, benchmarks, ...) and tools may use it; the broker
// package's own tests keep one local helper (startBroker in broker/e2e_test.go), since a package
// broker test importing this package would be an import cycle.
//
// A broker started here listens on 127.0.0.1:0 with data in a temporary directory and its
// admin listener on 127.0.0.1:0 (never the fixed default port, which parallel tests would fight
// over), and Start returns once its /readyz answers 200, as the process harness waits.
package inproc

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/broker"
	"github.com/weir-mq/weir/internal/testcluster"
)

// ReadyTimeout bounds the wait for /readyz after Start.
const ReadyTimeout = 30 * time.Second

// Defaults are the keys Start sets before props: listeners, log.dirs (a tb.TempDir()) and
// metrics.listener. props may override any of them; metrics.listener "" turns the admin
// listener off and the readiness wait with it.
func Defaults(tb testing.TB) map[string]string {
	return map[string]string{
		"listeners":        "PLAINTEXT://127.0.0.1:0",
		"log.dirs":         tb.TempDir(),
		"metrics.listener": "127.0.0.1:0",
	}
}

// Start runs a broker with Defaults overridden by props, waits for its /readyz and shuts it
// down (bounded) when tb ends.
func Start(tb testing.TB, props map[string]string) *broker.Broker {
	tb.Helper()
	b, stop := StartStoppable(tb, props)
	tb.Cleanup(func() { _ = stop() })
	return b
}

// StartStoppable is Start without the automatic shutdown: it returns the broker and a stop
// function (a bounded Shutdown, run at most once; later calls return the first's result), for
// tests that stop and start brokers on the same log dir. The caller stops it; tb's clean-up
// stops it too if the test forgot.
func StartStoppable(tb testing.TB, props map[string]string) (*broker.Broker, func() error) {
	tb.Helper()
	p := Defaults(tb)
	for k, v := range props {
		p[k] = v
	}
	cfg, err := broker.NewConfig(p)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := broker.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stopErr = b.Shutdown(ctx)
		})
		return stopErr
	}
	if err := b.Start(); err != nil {
		_ = stop()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = stop() })
	if addr := b.MetricsAddr(); addr != "" {
		if err := testcluster.WaitReadyz(context.Background(), addr, ReadyTimeout); err != nil {
			tb.Fatal(err)
		}
	}
	return b, stop
}

// StartCluster runs n brokers in this process as one cluster (every one a controller quorum
// voter, node ids 1..n), each on free 127.0.0.1 ports (Kafka, controller, admin) with its own
// temp data dir and props over those defaults, waits for every /readyz and shuts them all down
// when tb ends. Brokers are started concurrently: each one's New waits for the metadata quorum,
// which needs a majority of the others. Killing or pausing a node needs processes: use
// testcluster for that.
func StartCluster(tb testing.TB, n int, props map[string]string) []*broker.Broker {
	tb.Helper()
	if n < 1 || n > 9 {
		tb.Fatalf("inproc.StartCluster: %d brokers: want 1 to 9", n)
	}
	ports := freePorts(tb, 2*n)
	voters := make([]string, n)
	for i := range n {
		voters[i] = fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[n+i])
	}
	brokers := make([]*broker.Broker, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		p := Defaults(tb)
		p["listeners"] = "PLAINTEXT://127.0.0.1:" + strconv.Itoa(ports[i])
		p["node.id"] = strconv.Itoa(i + 1)
		p["controller.quorum.voters"] = strings.Join(voters, ",")
		for k, v := range props {
			p[k] = v
		}
		cfg, err := broker.NewConfig(p)
		if err != nil {
			tb.Fatalf("broker %d: %v", i+1, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := broker.New(cfg)
			if err == nil {
				err = b.Start()
				if err != nil {
					shutdown(b)
				}
			}
			brokers[i], errs[i] = b, err
		}()
	}
	wg.Wait()
	for i, b := range brokers {
		if errs[i] == nil {
			tb.Cleanup(func() { shutdown(b) })
		}
	}
	for i, err := range errs {
		if err != nil {
			tb.Fatalf("broker %d: %v", i+1, err)
		}
	}
	for _, b := range brokers {
		if addr := b.MetricsAddr(); addr != "" {
			if err := testcluster.WaitReadyz(context.Background(), addr, ReadyTimeout); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return brokers
}

// shutdown stops b, bounded.
func shutdown(b *broker.Broker) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.Shutdown(ctx)
}

// freePorts returns n distinct free loopback ports (held open until all are chosen).
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
