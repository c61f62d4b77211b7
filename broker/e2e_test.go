package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startBroker runs an in-process broker on a random loopback port with data in a temp dir.
func startBroker(t testing.TB, props map[string]string) *Broker {
	t.Helper()
	p := map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir()}
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
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
	})
	return b
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
