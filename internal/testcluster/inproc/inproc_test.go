package inproc_test

import (
	"context"
	"net/http"
	"testing"
	"time"

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
