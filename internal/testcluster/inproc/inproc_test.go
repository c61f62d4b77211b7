package inproc_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

func TestStart(t *testing.T) {
	b := inproc.Start(t, map[string]string{"num.partitions": "2"})
	if b.Addr() == "" || b.MetricsAddr() == "" {
		t.Fatalf("addr %q, admin %q", b.Addr(), b.MetricsAddr())
	}
	resp, err := http.Get("http://" + b.MetricsAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz after Start: %s", resp.Status)
	}

	// A stoppable broker restarted on the same log dir; stop runs once.
	dir := t.TempDir()
	b1, stop := inproc.StartStoppable(t, map[string]string{"log.dirs": dir})
	admin := b1.MetricsAddr()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if err := testcluster.WaitReadyz(context.Background(), admin, 100*time.Millisecond); err == nil {
		t.Fatal("a stopped broker's /readyz answered 200")
	}
	b2, _ := inproc.StartStoppable(t, map[string]string{"log.dirs": dir})
	if b2.Addr() == "" {
		t.Fatal("no address after the restart")
	}

	// No admin listener: nothing to wait on, Start still returns a serving broker.
	if b := inproc.Start(t, map[string]string{"metrics.listener": ""}); b.MetricsAddr() != "" {
		t.Fatalf("admin listener %q with metrics.listener empty", b.MetricsAddr())
	}
}

// TestStartCluster: three in-process brokers form a cluster; an RF 3 topic takes acks=all
// writes and every broker reports the same three brokers.
func TestStartCluster(t *testing.T) {
	bs := inproc.StartCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	var seeds []string
	for _, b := range bs {
		seeds = append(seeds, b.Addr())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("rf3"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 3, nil, "rf3"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 3 {
		t.Fatalf("brokers %v", md.Brokers)
	}
}
