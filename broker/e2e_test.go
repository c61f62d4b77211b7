package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/testcluster"
)

// startBroker runs an in-process broker on a random loopback port with data in a temp dir and
// props over those defaults, waits for its /readyz, and shuts it down when t ends. It is the
// broker package's one in-process start helper (outside this package: testcluster/inproc, which
// this package's tests cannot import, since it imports broker).
func startBroker(t testing.TB, props map[string]string) *Broker {
	t.Helper()
	b, _ := startStoppableBroker(t, props)
	return b
}

// startStoppableBroker is startBroker that also returns stop: a bounded Shutdown, run at most
// once (later calls return the first's result), for tests that restart a broker on one log dir.
func startStoppableBroker(t testing.TB, props map[string]string) (*Broker, func() error) {
	t.Helper()
	p := map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir(), "metrics.listener": "127.0.0.1:0"}
	for k, v := range props {
		p[k] = v
	}
	cfg, err := NewConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
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
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	if addr := b.MetricsAddr(); addr != "" {
		if err := testcluster.WaitReadyz(context.Background(), addr, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return b, stop
}

func TestFranzGoProduceConsume(t *testing.T) {
	b := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	admin := kadm.NewClient(adm)
	if _, err := admin.CreateTopic(ctx, 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	const n = 2000
	for i := 0; i < n; i++ {
		prod.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%10)), Value: []byte(fmt.Sprintf("v%d", i))}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	perKey := map[string]int{}
	for got < n {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll after %d records: %v", got, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var i int
			fmt.Sscanf(string(r.Value), "v%d", &i)
			k := string(r.Key)
			if i < perKey[k] {
				t.Errorf("key %s: record %d after %d", k, i, perKey[k])
			}
			perKey[k] = i
			got++
		})
	}
	if got != n {
		t.Fatalf("consumed %d, want %d", got, n)
	}
}
