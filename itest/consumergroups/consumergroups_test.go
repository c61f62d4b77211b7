// Package consumergroups tests KIP-848 consumer groups end to end: real weir brokers started in
// the test process (internal/testcluster/inproc), driven by franz-go clients in the consumer
// group protocol (kgo.ServerSideBalancer). It has no goroutines or state of its own beyond each
// test's clients; every load loop is bounded in records and time.
package consumergroups

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// fastGroups are broker keys that make consumer groups react within a second or two.
var fastGroups = map[string]string{
	"group.consumer.min.heartbeat.interval.ms": "200",
	"group.consumer.heartbeat.interval.ms":     "300",
	"group.consumer.min.session.timeout.ms":    "2000",
	"group.consumer.session.timeout.ms":        "6000",
	"offsets.topic.num.partitions":             "4",
}

func props(extra map[string]string) map[string]string {
	p := map[string]string{}
	for k, v := range fastGroups {
		p[k] = v
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// ownership is the per-partition log of which member owned it when, from the clients'
// OnPartitionsAssigned / Revoked / Lost callbacks.
type ownership struct {
	mu     sync.Mutex
	events []event
}

type event struct {
	at     time.Time
	member string
	topic  string
	part   int32
	owned  bool
}

func (o *ownership) add(member string, owned bool, m map[string][]int32) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			o.events = append(o.events, event{at: now, member: member, topic: t, part: p, owned: owned})
		}
	}
}

// check fails if a partition was owned by two members at once.
func (o *ownership) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	type tp struct {
		topic string
		part  int32
	}
	owner := map[tp]string{}
	evs := append([]event(nil), o.events...)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	for _, e := range evs {
		k := tp{e.topic, e.part}
		if e.owned {
			if cur, ok := owner[k]; ok && cur != e.member {
				t.Fatalf("%s/%d assigned to %s at %s while %s owns it", e.topic, e.part, e.member, e.at.Format("15:04:05.000"), cur)
			}
			owner[k] = e.member
		} else if owner[k] == e.member {
			delete(owner, k)
		}
	}
}

type consumed struct {
	mu   sync.Mutex
	seen map[string]bool // "partition/offset"
}

func (c *consumed) add(r *kgo.Record) {
	c.mu.Lock()
	c.seen[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = true
	c.mu.Unlock()
}

func (c *consumed) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// member is one consumer of the group, polling until stopped.
type member struct {
	name string
	cl   *kgo.Client
	done chan struct{}
}

func startMember(t *testing.T, addr, group, topic, name string, own *ownership, got *consumed, extra ...kgo.Opt) *member {
	t.Helper()
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ServerSideBalancer(),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.add(name, true, m) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.add(name, false, m) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.add(name, false, m) }),
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	m := &member{name: name, cl: cl, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			fs := cl.PollFetches(ctx)
			cancel()
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(got.add)
		}
	}()
	return m
}

func (m *member) stop() {
	m.cl.Close() // revokes (committing) and leaves the group
	<-m.done
}

// describe returns the group as ConsumerGroupDescribe answers it.
func describe(t *testing.T, addr, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 {
		t.Fatalf("describe: %d groups", len(resp.Groups))
	}
	return resp.Groups[0]
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func createTopic(t *testing.T, addr, topic string, parts int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
}

// produce writes n records to topic, spread over its partitions, at about rate a second.
func produce(t *testing.T, addr, topic string, n int, every time.Duration) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)}).FirstErr()
		cancel()
		if err != nil {
			t.Errorf("produce: %v", err)
			return
		}
		if every > 0 {
			time.Sleep(every)
		}
	}
}

// TestConsumerGroupChurn: consumers join and leave every second or so while records flow; no
// partition is ever owned by two members at once, every record is consumed, and the group
// settles (Stable, every member at the group epoch) within a few heartbeats of the last change.
func TestConsumerGroupChurn(t *testing.T) {
	b := inproc.Start(t, props(nil))
	addr := b.Addr()
	const topic, group, parts, records = "churn", "churn-g", 8, 600
	createTopic(t, addr, topic, parts)
	own := &ownership{}
	got := &consumed{seen: map[string]bool{}}

	var prodWG sync.WaitGroup
	prodWG.Add(1)
	go func() {
		defer prodWG.Done()
		produce(t, addr, topic, records, 10*time.Millisecond) // about 6s of traffic
	}()

	var live []*member
	next := 0
	add := func() {
		next++
		live = append(live, startMember(t, addr, group, topic, fmt.Sprintf("m%d", next), own, got))
	}
	for range 3 {
		add()
	}
	// Churn: every 800ms a member leaves or joins, bounded to 8 changes.
	for i := range 8 {
		time.Sleep(800 * time.Millisecond)
		if i%2 == 0 && len(live) > 1 {
			m := live[0]
			live = live[1:]
			m.stop()
		} else {
			add()
		}
	}
	prodWG.Wait()
	start := time.Now()
	waitUntil(t, 20*time.Second, "the group to settle", func() bool {
		g := describe(t, addr, group)
		if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != len(live) {
			return false
		}
		n := 0
		for _, m := range g.Members {
			if m.MemberEpoch != g.Epoch {
				return false
			}
			for _, a := range m.Assignment.TopicPartitions {
				n += len(a.Partitions)
			}
		}
		return n == parts
	})
	t.Logf("settled %v after the last change", time.Since(start).Round(time.Millisecond))
	waitUntil(t, 20*time.Second, "every record consumed", func() bool { return got.count() >= records })
	for _, m := range live {
		m.stop()
	}
	own.check(t)
	waitUntil(t, 10*time.Second, "the group to be empty", func() bool { return describe(t, addr, group).State == "Empty" })
}

// TestConsumerGroupRestart: a broker restart keeps the group (epochs, members, assignments):
// the members carry on at their epochs without a rebalance.
func TestConsumerGroupRestart(t *testing.T) {
	dir := t.TempDir()
	p := props(map[string]string{"log.dirs": dir, "listeners": "PLAINTEXT://127.0.0.1:42011"})
	b, stop := inproc.StartStoppable(t, p)
	addr := b.Addr()
	const topic, group = "restart", "restart-g"
	createTopic(t, addr, topic, 4)
	own := &ownership{}
	got := &consumed{seen: map[string]bool{}}
	m1 := startMember(t, addr, group, topic, "a", own, got)
	m2 := startMember(t, addr, group, topic, "b", own, got)
	var before kmsg.ConsumerGroupDescribeResponseGroup
	waitUntil(t, 20*time.Second, "a stable group", func() bool {
		before = describe(t, addr, group)
		return before.State == "Stable" && len(before.Members) == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b2, _ := inproc.StartStoppable(t, p)
	var after kmsg.ConsumerGroupDescribeResponseGroup
	waitUntil(t, 20*time.Second, "the group after the restart", func() bool {
		after = describe(t, b2.Addr(), group)
		return after.ErrorCode == 0 && len(after.Members) == 2
	})
	if after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch {
		t.Fatalf("epochs after restart %d/%d, before %d/%d", after.Epoch, after.AssignmentEpoch, before.Epoch, before.AssignmentEpoch)
	}
	// The members reconnect and keep heartbeating at the same epoch.
	time.Sleep(2 * time.Second)
	again := describe(t, b2.Addr(), group)
	if again.Epoch != before.Epoch || again.State != "Stable" || len(again.Members) != 2 {
		t.Fatalf("group after the members reconnected: %+v (before: epoch %d)", again, before.Epoch)
	}
	m1.stop()
	m2.stop()
	own.check(t)
}
