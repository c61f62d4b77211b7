package diskfault_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/vfs"
)

// BenchmarkPageCachePowerLoss measures what a coordinated power loss of all three nodes loses
// when acknowledgements come from the page cache (log.flush.interval.messages=max, as Kafka's
// default): an acks=all producer runs for a few seconds, every node loses its unsynced bytes at
// once and restarts, and the acknowledged records that cannot be read back are counted. A
// measurement, not a check (what page-cache acknowledgement loses is configuration, not a bug):
//
//	go test -run '^$' -bench PageCachePowerLoss -benchtime 1x ./internal/faults/diskfault/
func BenchmarkPageCachePowerLoss(b *testing.B) {
	for range b.N {
		lost, acked := pageCachePowerLoss(b)
		b.ReportMetric(float64(lost), "lost-records")
		b.ReportMetric(float64(acked), "acked-records")
	}
}

func pageCachePowerLoss(t testing.TB) (lost, acked int) {
	c, adm := startDiskCluster(t, map[string]string{"log.flush.interval.messages": "9223372036854775807"})
	// Default segments (1 GiB): a roll syncs the rolled segment, so small segments would bound
	// the loss by their size.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topicG); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topicG, err, resp.Err)
	}
	waitFullISROf(t, adm, topicG)
	p := newProducer(t, c)
	p.switchTo(topicG)
	p.mu.Lock()
	delete(p.topics, topic)
	p.mu.Unlock()
	stop := p.background(50)
	time.Sleep(3 * time.Second) // the measured load: 3 s of produce
	var wg sync.WaitGroup
	errs := make([]error, 3)
	stats := make([]vfs.CrashStats, 3)
	for i, n := range c.Nodes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stats[i], errs[i] = powerLoss(n)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	acked, _, _ = p.stats()
	t.Logf("%d records acknowledged before the power loss; it dropped %+v", acked, stats)
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop()
	waitFullISROf(t, adm, topicG)
	lost = countLost(t, c, p)
	t.Logf("page-cache acks: %d of %d acknowledged records lost by a coordinated power loss", lost, acked)
	return lost, acked
}
