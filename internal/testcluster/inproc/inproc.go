// Package inproc starts brokers inside the test process: the in-process mode of the test
// harness (internal/testcluster starts `weir serve` child processes). It imports broker, so only
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
