package broker

// Consumer groups with real clients: franz-go (range, roundrobin, cooperative-sticky), sarama and
// kafka-go; membership changes (leave, vanish, static restart), commits across restarts (clean
// and SIGKILL), auto.offset.reset, and a larger run with members joining and leaving.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupProps are broker settings for group tests: no initial rebalance delay, short sessions.
var groupProps = map[string]string{
	"group.initial.rebalance.delay.ms": "0",
	"group.min.session.timeout.ms":     "1000",
}

func startGroupBroker(t testing.TB, extra map[string]string) *Broker {
	t.Helper()
	p := map[string]string{}
	for k, v := range groupProps {
		p[k] = v
	}
	for k, v := range extra {
		p[k] = v
	}
	b := startBroker(t, p)
	// Tests that speak the wire directly do not retry COORDINATOR_LOAD_IN_PROGRESS as clients do.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Coordinator().WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

// produceN writes n records (values "0".."n-1", keys spread) to topic and waits for the acks.
func produceN(t testing.TB, addr, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newKgo(t, addr, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond))
	var failed atomic.Value
	var wg sync.WaitGroup
	for i := from; i < from+n; i++ {
		wg.Add(1)
		v := []byte(strconv.Itoa(i))
		cl.Produce(ctx, &kgo.Record{Key: v, Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// groupMember is a franz-go group consumer that tracks its assignment and what it consumed.
type groupMember struct {
	cl   *kgo.Client
	name string

	mu       sync.Mutex
	owned    map[int32]bool
	assigns  int // OnPartitionsAssigned calls with partitions
	revokes  int // OnPartitionsRevoked / Lost calls with partitions
	seen     map[int]int
	firstOff map[int32]int64

	stop chan struct{}
	done chan struct{}
}

func (m *groupMember) assigned(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range flatten(ps) {
		m.owned[p] = true
	}
	if len(flatten(ps)) > 0 {
		m.assigns++
	}
}

func (m *groupMember) revoked(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range flatten(ps) {
		delete(m.owned, p)
	}
	if len(flatten(ps)) > 0 {
		m.revokes++
	}
}

func flatten(ps map[string][]int32) []int32 {
	var out []int32
	for _, p := range ps {
		out = append(out, p...)
	}
	return out
}

func (m *groupMember) ownedSet() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.owned {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// startMember starts a consumer in group on topic that polls in the background, recording every
// record value it sees.
func startMember(t testing.TB, addr, group, topic, name string, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{name: name, owned: map[int32]bool{}, seen: map[int]int{}, firstOff: map[int32]int64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	base := []kgo.Opt{
		kgo.SeedBrokers(addr), kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(250 * time.Millisecond),
		kgo.RebalanceTimeout(10 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(m.assigned), kgo.OnPartitionsRevoked(m.revoked), kgo.OnPartitionsLost(m.revoked),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			if fs.IsClientClosed() {
				return
			}
			m.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				v, _ := strconv.Atoi(string(r.Value))
				m.seen[v]++
				if _, ok := m.firstOff[r.Partition]; !ok {
					m.firstOff[r.Partition] = r.Offset
				}
			})
			m.mu.Unlock()
		}
	}()
	t.Cleanup(func() { m.close(false) })
	return m
}

// close stops polling and closes the client (leaving the group unless it is static).
func (m *groupMember) close(commit bool) {
	select {
	case <-m.stop:
		return
	default:
	}
	close(m.stop)
	<-m.done
	if commit {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = m.cl.CommitUncommittedOffsets(ctx)
		cancel()
	}
	m.cl.Close()
}

// waitCover waits until the group is Stable with exactly members members whose assignments
// (as the broker holds them) are disjoint and cover partitions 0..n-1 of topic.
func waitCover(t testing.TB, addr, group, topic string, n int32, members int, within time.Duration) kadm.DescribedGroup {
	t.Helper()
	adm := kadm.NewClient(newKgo(t, addr))
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		gs, err := adm.DescribeGroups(ctx, group)
		cancel()
		if err == nil {
			d := gs[group]
			last = fmt.Sprintf("state %s, %d members", d.State, len(d.Members))
			if d.Err == nil && d.State == "Stable" && len(d.Members) == members {
				owner := map[int32]string{}
				ok := true
				for _, mb := range d.Members {
					ca, isConsumer := mb.Assigned.AsConsumer()
					if !isConsumer {
						ok = false
						break
					}
					for _, tp := range ca.Topics {
						for _, p := range tp.Partitions {
							if tp.Topic != topic || owner[p] != "" {
								ok = false
							}
							owner[p] = mb.MemberID
						}
					}
				}
				if ok && len(owner) == int(n) {
					return d
				}
				last += fmt.Sprintf(", owners %v", owner)
			}
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("group %s did not settle on %d members covering %d partitions within %v: %s", group, members, n, within, last)
	return kadm.DescribedGroup{}
}

// waitClientsCover waits until the members' own views of their assignments are disjoint and
// cover 0..n-1.
func waitClientsCover(t testing.TB, ms []*groupMember, n int32, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		seen := map[int32]string{}
		ok := true
		var parts []string
		for _, m := range ms {
			owned := m.ownedSet()
			parts = append(parts, fmt.Sprintf("%s=%v", m.name, owned))
			for _, p := range owned {
				if seen[p] != "" {
					ok = false
				}
				seen[p] = m.name
			}
		}
		if ok && len(seen) == int(n) {
			return
		}
		last = fmt.Sprint(parts)
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("clients did not cover %d partitions disjointly within %v: %s", n, within, last)
}

func TestGroupKgoBalancers(t *testing.T) {
	b := startGroupBroker(t, nil)
	addr := b.Addr()
	for _, bal := range []struct {
		name string
		b    kgo.GroupBalancer
	}{{"range", kgo.RangeBalancer()}, {"roundrobin", kgo.RoundRobinBalancer()}, {"cooperative-sticky", kgo.CooperativeStickyBalancer()}} {
		t.Run(bal.name, func(t *testing.T) {
			topic, group := "bal-"+bal.name, "g-"+bal.name
			createTopic(t, addr, topic, 6, nil)
			var ms []*groupMember
			for i := range 3 {
				ms = append(ms, startMember(t, addr, group, topic, fmt.Sprintf("%s-%d", bal.name, i), kgo.Balancers(bal.b)))
			}
			d := waitCover(t, addr, group, topic, 6, 3, 20*time.Second)
			if d.Protocol != bal.name {
				t.Fatalf("protocol %q, want %q", d.Protocol, bal.name)
			}
			waitClientsCover(t, ms, 6, 10*time.Second)

			// A member leaves: the other two cover everything.
			ms[0].close(true)
			waitCover(t, addr, group, topic, 6, 2, 20*time.Second)
			waitClientsCover(t, ms[1:], 6, 10*time.Second)
		})
	}
}

// killableDialer hands out connections it can later cut all at once (and refuse new ones):
// a client that vanishes without a LeaveGroup.
type killableDialer struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (d *killableDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return nil, errors.New("killed")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *killableDialer) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead = true
	for _, c := range d.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		_ = c.Close()
	}
}

func TestGroupMemberVanishes(t *testing.T) {
	b := startGroupBroker(t, nil)
	addr := b.Addr()
	topic, group := "vanish", "g-vanish"
	createTopic(t, addr, topic, 6, nil)
	d := &killableDialer{}
	victim := startMember(t, addr, group, topic, "victim", kgo.Dialer(d.dial), kgo.SessionTimeout(1500*time.Millisecond))
	a := startMember(t, addr, group, topic, "a")
	c := startMember(t, addr, group, topic, "c")
	waitCover(t, addr, group, topic, 6, 3, 20*time.Second)
	killed := time.Now()
	d.kill()
	// The victim never leaves: only its session timeout (1.5 s) removes it.
	waitCover(t, addr, group, topic, 6, 2, 20*time.Second)
	if took := time.Since(killed); took < time.Second {
		t.Fatalf("rebalanced %v after the kill: before the session timeout", took)
	}
	waitClientsCover(t, []*groupMember{a, c}, 6, 10*time.Second)
	victim.close(false)
}

func TestGroupAutoOffsetReset(t *testing.T) {
	b := startGroupBroker(t, nil)
	addr := b.Addr()
	createTopic(t, addr, "reset", 2, nil)
	produceN(t, addr, "reset", 0, 100)

	early := startMember(t, addr, "g-earliest", "reset", "early")
	late := startMember(t, addr, "g-latest", "reset", "late", kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	waitClientsCover(t, []*groupMember{early}, 2, 15*time.Second)
	waitClientsCover(t, []*groupMember{late}, 2, 15*time.Second)
	// Probe records until the latest consumer is positioned (it sees one), then 50 more: it
	// must get all of those and none of the 100 produced before it joined.
	next := 100
	for deadline := time.Now().Add(20 * time.Second); ; {
		produceN(t, addr, "reset", next, 1)
		next++
		time.Sleep(100 * time.Millisecond)
		late.mu.Lock()
		positioned := len(late.seen) > 0
		late.mu.Unlock()
		if positioned {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the latest consumer never saw a new record")
		}
	}
	produceN(t, addr, "reset", next, 50)
	waitSeen(t, []*groupMember{early}, 0, next+50, 20*time.Second)
	waitSeen(t, []*groupMember{late}, next, next+50, 20*time.Second)
	late.mu.Lock()
	defer late.mu.Unlock()
	for v := range late.seen {
		if v < 100 {
			t.Fatalf("latest consumer got old record %d", v)
		}
	}
}

// waitSeen waits until the members together consumed every value in [from, to).
func waitSeen(t testing.TB, ms []*groupMember, from, to int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	missing := 0
	for time.Now().Before(deadline) {
		missing = 0
		for v := from; v < to; v++ {
			found := false
			for _, m := range ms {
				m.mu.Lock()
				found = found || m.seen[v] > 0
				m.mu.Unlock()
				if found {
					break
				}
			}
			if !found {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%d of the records %d..%d never consumed within %v", missing, from, to-1, within)
}

// TestGroupStaticMemberRestart restarts the static follower: Kafka guarantees it gets its old
// assignment back with no rebalance. (A restarted static leader is told SkipAssignment, but
// franz-go recomputes the plan and rejoins when its sticky plan differs from the stored one, so
// the leader's restart may legitimately rebalance.)
func TestGroupStaticMemberRestart(t *testing.T) {
	b := startGroupBroker(t, nil)
	addr := b.Addr()
	topic, group := "static", "g-static"
	createTopic(t, addr, topic, 4, nil)
	static := func(name string) *groupMember {
		return startMember(t, addr, group, topic, name, kgo.InstanceID(name), kgo.SessionTimeout(6*time.Second))
	}
	members := map[string]*groupMember{"static-a": static("static-a"), "static-b": static("static-b")}
	all := []*groupMember{members["static-a"], members["static-b"]}
	waitCover(t, addr, group, topic, 4, 2, 20*time.Second)
	waitClientsCover(t, all, 4, 10*time.Second)
	gen, _ := b.Coordinator().Generation(group)
	leader, _ := b.Coordinator().Leader(group)
	restart, stay := "static-a", "static-b"
	if strings.HasPrefix(leader, "static-a-") {
		restart, stay = "static-b", "static-a"
	}
	a, other := members[restart], members[stay]
	before := a.ownedSet()
	other.mu.Lock()
	assigns, revokes := other.assigns, other.revokes
	other.mu.Unlock()

	a.close(true) // a static member does not leave the group on close
	a2 := static(restart)
	waitClientsCover(t, []*groupMember{a2, other}, 4, 10*time.Second)
	if got := a2.ownedSet(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("restarted static member %s owns %v, had %v", restart, got, before)
	}
	time.Sleep(time.Second) // a rebalance, if one were coming, would show by now
	if g2, _ := b.Coordinator().Generation(group); g2 != gen {
		t.Fatalf("generation moved from %d to %d: the static restart of %s rebalanced", gen, g2, restart)
	}
	other.mu.Lock()
	defer other.mu.Unlock()
	if other.assigns != assigns || other.revokes != revokes {
		t.Fatalf("the other member saw a rebalance: assigns %d->%d revokes %d->%d", assigns, other.assigns, revokes, other.revokes)
	}
}

// committedOffsets returns the group's committed offsets of topic by partition.
func committedOffsets(t testing.TB, addr, group string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(newKgo(t, addr))
	var out map[int32]int64
	for ctx.Err() == nil {
		os, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			out = map[int32]int64{}
			os.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
			return out
		}
		time.Sleep(100 * time.Millisecond) // COORDINATOR_LOAD_IN_PROGRESS right after a restart
	}
	t.Fatalf("fetch offsets of %s: %v", group, ctx.Err())
	return nil
}

// consumeAndCommit consumes exactly want records of topic in group (one member), commits their
// offsets and closes; it returns the committed offsets.
func consumeAndCommit(t testing.TB, addr, group, topic string, want int) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := 0
	for got < want {
		fs := cl.PollRecords(ctx, want-got)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, want, err)
		}
		for _, r := range fs.Records() {
			if err := cl.CommitRecords(ctx, r); err != nil {
				t.Fatalf("commit: %v", err)
			}
			got++
		}
	}
	return committedOffsets(t, addr, group)
}

// checkResume starts a new consumer in group and checks that its first record of each partition
// is exactly the committed offset.
func checkResume(t testing.TB, addr, group, topic string, committed map[int32]int64) {
	t.Helper()
	m := startMember(t, addr, group, topic, "resumer")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		m.mu.Lock()
		all := true
		for p := range committed {
			_, seen := m.firstOff[p]
			all = all && seen
		}
		m.mu.Unlock()
		if all {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for p, off := range committed {
		if got, ok := m.firstOff[p]; !ok || got != off {
			t.Fatalf("partition %d: resumed at %d (seen %v), committed %d", p, got, ok, off)
		}
	}
}

func TestGroupCommitsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{"log.dirs": dir}
	b := startGroupBroker(t, props)
	addr := b.Addr()
	createTopic(t, addr, "durable", 3, nil)
	produceN(t, addr, "durable", 0, 300)
	committed := consumeAndCommit(t, addr, "g-durable", "durable", 120)
	var sum int64
	for _, o := range committed {
		sum += o
	}
	if sum != 120 || len(committed) == 0 {
		t.Fatalf("committed %v (sum %d), want 120 records' worth", committed, sum)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()

	b2 := startGroupBroker(t, props)
	if got := committedOffsets(t, b2.Addr(), "g-durable"); fmt.Sprint(got) != fmt.Sprint(committed) {
		t.Fatalf("after restart committed %v, before %v", got, committed)
	}
	produceN(t, b2.Addr(), "durable", 300, 300) // every partition has records past its commit
	checkResume(t, b2.Addr(), "g-durable", "durable", committed)
}

func TestGroupCommitsSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the weir binary")
	}
	bin := buildWeir(t, t.TempDir())
	dir := t.TempDir()
	port := freePort(t)
	p := startWeirGroups(t, bin, dir, port)
	createTopic(t, p.addr, "killed", 2, nil)
	produceN(t, p.addr, "killed", 0, 200)
	committed := consumeAndCommit(t, p.addr, "g-killed", "killed", 77)
	if err := p.stop(t, syscall.SIGKILL, 10*time.Second); err == nil {
		t.Fatal("SIGKILL: the process exited cleanly?")
	}
	p2 := startWeirGroups(t, bin, dir, port)
	if got := committedOffsets(t, p2.addr, "g-killed"); fmt.Sprint(got) != fmt.Sprint(committed) {
		t.Fatalf("after SIGKILL committed %v, before %v", got, committed)
	}
	produceN(t, p2.addr, "killed", 200, 200)
	checkResume(t, p2.addr, "g-killed", "killed", committed)
}

// startWeirGroups runs `weir serve` like startWeir, with groupProps set.
func startWeirGroups(t *testing.T, bin, dir string, port int) *weirProc {
	t.Helper()
	return startSingle(t, bin, dir, port, groupProps, nil)
}

// saramaHandler records every message value and marks it consumed.
type saramaHandler struct {
	mu   sync.Mutex
	seen map[int]int
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		v, _ := strconv.Atoi(string(msg.Value))
		h.mu.Lock()
		h.seen[v]++
		h.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

func (h *saramaHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen)
}

func TestGroupSarama(t *testing.T) {
	b := startGroupBroker(t, nil)
	addr := b.Addr()
	const n = 300
	createTopic(t, addr, "sarama-group", 3, nil)
	produceN(t, addr, "sarama-group", 0, n)
	for _, v := range []struct {
		name string
		v    sarama.KafkaVersion
	}{{"default", sarama.DefaultVersion}, {"v1.0", sarama.V1_0_0_0}, {"max", sarama.MaxVersion}} {
		t.Run(v.name, func(t *testing.T) {
			group := "sarama-" + v.name
			cfg := sarama.NewConfig()
			cfg.Version = v.v
			cfg.ClientID = "weir-test"
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
			cfg.Consumer.Group.Session.Timeout = 6 * time.Second
			cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
			cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
			h := &saramaHandler{seen: map[int]int{}}
			var wg sync.WaitGroup
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var cgs []sarama.ConsumerGroup
			for range 2 {
				cg, err := sarama.NewConsumerGroup([]string{addr}, group, cfg)
				if err != nil {
					t.Fatal(err)
				}
				cgs = append(cgs, cg)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						if err := cg.Consume(ctx, []string{"sarama-group"}, h); err != nil && ctx.Err() == nil {
							t.Errorf("consume: %v", err)
							return
						}
					}
				}()
			}
			for h.count() < n && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
			if got := h.count(); got != n {
				t.Fatalf("sarama group consumed %d distinct records of %d", got, n)
			}
			// Marked offsets are committed: every partition's commit reaches the log end.
			deadline := time.Now().Add(10 * time.Second)
			for {
				var sum int64
				for _, o := range committedOffsets(t, addr, group) {
					sum += o
				}
				if sum == n {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("sarama committed %d records' worth, want %d", sum, n)
				}
				time.Sleep(100 * time.Millisecond)
			}
			cancel()
			wg.Wait()
			for _, cg := range cgs {
				_ = cg.Close()
			}
		})
	}
}

func TestGroupKafkaGo(t *testing.T) {
	b := startGroupBroker(t, nil)
	addr := b.Addr()
	const n = 200
	createTopic(t, addr, "kafkago-group", 2, nil)
	produceN(t, addr, "kafkago-group", 0, n)
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: []string{addr}, GroupID: "kafkago", Topic: "kafkago-group",
		StartOffset: kafkago.FirstOffset, MaxWait: 200 * time.Millisecond,
		SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
		RebalanceTimeout: 5 * time.Second, JoinGroupBackoff: 200 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := map[int]bool{}
	for len(seen) < n {
		m, err := r.ReadMessage(ctx) // commits each message synchronously
		if err != nil {
			t.Fatalf("read after %d records: %v", len(seen), err)
		}
		v, _ := strconv.Atoi(string(m.Value))
		seen[v] = true
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, o := range committedOffsets(t, addr, "kafkago") {
		sum += o
	}
	if sum != n {
		t.Fatalf("kafka-go committed %d records' worth, want %d", sum, n)
	}
}

// TestGroupLargeRun consumes many records while members join and leave: every record is
// consumed at least once, none is skipped.
func TestGroupLargeRun(t *testing.T) {
	b := startGroupBroker(t, nil)
	addr := b.Addr()
	const n, parts = 1000000, 8
	topic, group := "large", "g-large"
	createTopic(t, addr, topic, parts, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		produceN(t, addr, topic, 0, n)
	}()
	var ms []*groupMember
	add := func(name string) { ms = append(ms, startMember(t, addr, group, topic, name)) }
	add("m0")
	add("m1")
	time.Sleep(500 * time.Millisecond)
	add("m2")
	add("m3")
	time.Sleep(500 * time.Millisecond)
	ms[0].close(true) // leaves
	time.Sleep(300 * time.Millisecond)
	add("m4")
	ms[1].close(false) // leaves without committing its last polls: those are consumed again
	<-done
	waitSeen(t, ms, 0, n, 60*time.Second)
	dups := 0
	for _, m := range ms {
		m.mu.Lock()
		for _, c := range m.seen {
			dups += c - 1
		}
		m.mu.Unlock()
	}
	t.Logf("%d records consumed by %d members joining and leaving; %d duplicates within members", n, len(ms), dups)
}
