package broker

// How long a consumer's group join takes against one broker with weir's default (durable)
// acknowledgement, request by request: FindCoordinator (the first one creates
// __consumer_offsets), JoinGroup answered MEMBER_ID_REQUIRED, JoinGroup again, SyncGroup (the
// group's record fsync'd on __consumer_offsets), then the assignment callback. Kafka's
// ConsumerPerformance reports the same span as its "rebalance.time.ms".

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestTrace records every request a client sent, with its round trip.
type requestTrace struct {
	mu    sync.Mutex // guards start, lines
	start time.Time
	lines []string
}

func (h *requestTrace) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	h.mu.Lock()
	defer h.mu.Unlock()
	name := kmsg.NameForKey(key)
	h.lines = append(h.lines, fmt.Sprintf("%7.1f ms %-16s %6.1f ms", float64(time.Since(h.start).Microseconds())/1000,
		name, float64(e.DurationE2E().Microseconds())/1000))
}

func (h *requestTrace) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.lines, "\n")
}

// joinTime starts a group consumer of topic and returns the time from its creation to its first
// assignment, with the requests it sent until then.
func joinTime(t *testing.T, addr, topic, group string) (time.Duration, string) {
	t.Helper()
	tr := &requestTrace{start: time.Now()}
	assigned := make(chan struct{})
	var once sync.Once
	cl := newKgo(t, addr, kgo.WithHooks(tr), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(group),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { once.Do(func() { close(assigned) }) }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	select {
	case <-assigned:
	case <-ctx.Done():
		t.Fatalf("group %s: no assignment in 30 s; requests:\n%s", group, tr)
	}
	d := time.Since(tr.start)
	cancel()
	return d, tr.String()
}

// TestGroupJoinLatency checks that a consumer joins a new group on a broker with durable
// acknowledgement well within a second once __consumer_offsets exists (the first group creates
// it), and logs the request trace of each join (go test -v shows where the time goes).
func TestGroupJoinLatency(t *testing.T) {
	b := startBroker(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	createTopic(t, b.Addr(), "joined", 6, nil)
	produceN(t, b.Addr(), "joined", 0, 600)
	var later []time.Duration
	for i := range 4 {
		d, trace := joinTime(t, b.Addr(), "joined", fmt.Sprintf("join-%d", i))
		t.Logf("group join-%d: assigned after %s\n%s", i, d.Round(time.Millisecond), trace)
		if i > 0 {
			later = append(later, d)
		}
	}
	best := later[0]
	for _, d := range later {
		best = min(best, d)
	}
	// On an idle machine a join takes a few milliseconds; the bound leaves room for a loaded one.
	if best > 2*time.Second {
		t.Fatalf("joining an existing coordinator took at least %s", best)
	}
}
