package consumergroups

// Online migration between classic groups and KIP-848 consumer groups
// (group.consumer.migration.policy), driven by franz-go classic consumers (eager range and
// cooperative-sticky) and a franz-go KIP-848 consumer in one group.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/broker"
	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// migrationProps make classic groups react quickly too.
func migrationProps(extra map[string]string) map[string]string {
	p := props(map[string]string{
		"group.initial.rebalance.delay.ms": "0",
		"group.min.session.timeout.ms":     "2000",
	})
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// startClassic starts a consumer of the classic protocol with balancers bals (its protocols, in
// order of preference).
func startClassic(t *testing.T, addr, group, topic, name string, own *ownership, got *consumed, bals ...kgo.GroupBalancer) *member {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(bals...),
		kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.add(name, true, m) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.add(name, false, m) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.add(name, false, m) }),
	)
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

// assignedTo reports whether member was ever assigned a partition.
func (o *ownership) assignedTo(member string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range o.events {
		if e.member == member && e.owned {
			return true
		}
	}
	return false
}

// listedType is the group's type as ListGroups v5 reports it ("" if not listed).
func listedType(t *testing.T, addr, group string) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 5
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range resp.Groups {
		if g.Group == group {
			return g.GroupType
		}
	}
	return ""
}

// classicStable reports whether DescribeGroups shows group Stable with n members.
func classicStable(t *testing.T, addr, group string, n int) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gs, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err != nil {
		return false
	}
	g, ok := gs[group]
	return ok && g.Err == nil && g.State == "Stable" && len(g.Members) == n && g.ProtocolType == "consumer"
}

// mixedStable reports whether ConsumerGroupDescribe shows group Stable with classic members
// of the classic protocol and cons of the consumer protocol, every partition assigned.
func mixedStable(t *testing.T, addr, group string, classic, cons, parts int) bool {
	t.Helper()
	g := describe(t, addr, group)
	if g.ErrorCode != 0 || g.State != "Stable" || len(g.Members) != classic+cons {
		return false
	}
	nc, n := 0, 0
	for _, m := range g.Members {
		if m.MemberType == 0 {
			nc++
		}
		if m.MemberEpoch != g.Epoch {
			return false
		}
		for _, a := range m.Assignment.TopicPartitions {
			n += len(a.Partitions)
		}
	}
	return nc == classic && n == parts
}

// TestMigrationOnline: two classic consumers share a topic; a KIP-848 consumer joins (the group
// becomes a consumer group, the classic members keep consuming through JoinGroup/SyncGroup);
// it leaves (the group is classic again and rebalances). Every record is consumed and no
// partition is owned by two members at once.
func TestMigrationOnline(t *testing.T) {
	for _, tc := range []struct {
		name string
		bal  func() kgo.GroupBalancer
	}{
		{"eager", kgo.RangeBalancer},
		{"cooperative", kgo.CooperativeStickyBalancer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := inproc.Start(t, migrationProps(nil))
			addr := b.Addr()
			topic, group := "mig-"+tc.name, "mig-g-"+tc.name
			const parts, records = 6, 400
			createTopic(t, addr, topic, parts)
			own := &ownership{}
			got := &consumed{seen: map[string]bool{}}
			var prodWG sync.WaitGroup
			prodWG.Add(1)
			go func() {
				defer prodWG.Done()
				produce(t, addr, topic, records, 15*time.Millisecond) // about 6s of traffic
			}()

			c1 := startClassic(t, addr, group, topic, "classic-1", own, got, tc.bal())
			c2 := startClassic(t, addr, group, topic, "classic-2", own, got, tc.bal())
			waitUntil(t, 20*time.Second, "a stable classic group", func() bool { return classicStable(t, addr, group, 2) })

			k := startMember(t, addr, group, topic, "kip848", own, got)
			waitUntil(t, 30*time.Second, "a stable mixed consumer group", func() bool { return mixedStable(t, addr, group, 2, 1, parts) })
			if typ := listedType(t, addr, group); typ != "consumer" {
				t.Fatalf("group type %q with the KIP-848 member in", typ)
			}
			for _, m := range describe(t, addr, group).Members {
				if len(m.Assignment.TopicPartitions) == 0 {
					t.Fatalf("member %s (type %d) has no partition in the mixed group", m.MemberID, m.MemberType)
				}
			}
			// The client learns of its partitions at its next heartbeat.
			waitUntil(t, 10*time.Second, "the KIP-848 consumer's partitions", func() bool { return own.assignedTo("kip848") })
			time.Sleep(time.Second) // records flow to the three members

			k.stop()
			waitUntil(t, 30*time.Second, "a stable classic group again", func() bool {
				return listedType(t, addr, group) == "classic" && classicStable(t, addr, group, 2)
			})
			prodWG.Wait()
			waitUntil(t, 20*time.Second, "every record consumed", func() bool { return got.count() >= records })
			c1.stop()
			c2.stop()
			own.check(t)
		})
	}
}

// TestMigrationRestartMixed: a broker restart while the group has members of both protocols
// loads it back (members, their types and epochs) and the members carry on.
func TestMigrationRestartMixed(t *testing.T) {
	p := migrationProps(map[string]string{"log.dirs": t.TempDir(), "listeners": "PLAINTEXT://127.0.0.1:44011"})
	b, stop := inproc.StartStoppable(t, p)
	addr := b.Addr()
	const topic, group, parts = "mig-restart", "mig-restart-g", 4
	createTopic(t, addr, topic, parts)
	own := &ownership{}
	got := &consumed{seen: map[string]bool{}}
	c1 := startClassic(t, addr, group, topic, "classic", own, got, kgo.CooperativeStickyBalancer())
	waitUntil(t, 20*time.Second, "a stable classic group", func() bool { return classicStable(t, addr, group, 1) })
	k := startMember(t, addr, group, topic, "kip848", own, got)
	var before kmsg.ConsumerGroupDescribeResponseGroup
	waitUntil(t, 30*time.Second, "a stable mixed group", func() bool {
		before = describe(t, addr, group)
		return mixedStable(t, addr, group, 1, 1, parts)
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
	if after.Epoch != before.Epoch {
		t.Fatalf("epoch after restart %d, before %d", after.Epoch, before.Epoch)
	}
	types := func(g kmsg.ConsumerGroupDescribeResponseGroup) map[string]int8 {
		m := map[string]int8{}
		for _, x := range g.Members {
			m[x.MemberID] = x.MemberType
		}
		return m
	}
	if fmt.Sprint(types(after)) != fmt.Sprint(types(before)) {
		t.Fatalf("members after restart %v, before %v", types(after), types(before))
	}
	// Both kinds of members reconnect and keep their places.
	time.Sleep(2 * time.Second)
	waitUntil(t, 20*time.Second, "the members back", func() bool { return mixedStable(t, b2.Addr(), group, 1, 1, parts) })
	k.stop()
	c1.stop()
	own.check(t)
}

// TestMigrationPolicyDisabled: with the policy disabled (any case), a KIP-848 member cannot
// join a non-empty classic group (GROUP_ID_NOT_FOUND) nor a classic member a non-empty consumer
// group (INCONSISTENT_GROUP_PROTOCOL), as Kafka 4.4 answers; a bad value stops the start naming
// the key.
func TestMigrationPolicyDisabled(t *testing.T) {
	bad := inproc.Defaults(t)
	bad["group.consumer.migration.policy"] = "sideways"
	if _, err := broker.NewConfig(bad); err == nil || !strings.Contains(err.Error(), "group.consumer.migration.policy") {
		t.Fatalf("a bad policy: %v", err)
	}

	b := inproc.Start(t, migrationProps(map[string]string{"group.consumer.migration.policy": "DISABLED"}))
	addr := b.Addr()
	const topic, group = "mig-off", "mig-off-g"
	createTopic(t, addr, topic, 2)
	own := &ownership{}
	got := &consumed{seen: map[string]bool{}}
	c1 := startClassic(t, addr, group, topic, "classic", own, got, kgo.RangeBalancer())
	defer c1.stop()
	waitUntil(t, 20*time.Second, "a stable classic group", func() bool { return classicStable(t, addr, group, 1) })

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = group, "kip848-member", 0, 10000
	req.SubscribedTopicNames = []string{topic}
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The request goes to the group's coordinator.
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != kerr.GroupIDNotFound {
		t.Fatalf("KIP-848 join of a classic group with the policy disabled: %v", err)
	}
	if typ := listedType(t, addr, group); typ != "classic" || !classicStable(t, addr, group, 1) {
		t.Fatalf("group changed: type %q", typ)
	}

	// Nor does a classic member join a non-empty consumer group: INCONSISTENT_GROUP_PROTOCOL.
	const group2 = "mig-off-g2"
	k := startMember(t, addr, group2, topic, "kip848", own, got)
	defer k.stop()
	waitUntil(t, 20*time.Second, "a consumer group", func() bool { return mixedStable(t, addr, group2, 0, 1, 2) })
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = group2, 10000, 10000, "consumer"
	sub := kmsg.ConsumerMemberMetadata{Topics: []string{topic}}
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: sub.AppendTo(nil)}}
	jresp, err := join.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(jresp.ErrorCode); err != kerr.InconsistentGroupProtocol {
		t.Fatalf("classic join of a consumer group with the policy disabled: %v", err)
	}
}

// TestMigrationFailover: on a 3-broker cluster, the broker coordinating a group with members of
// both protocols stops; another one loads the group from its replica of __consumer_offsets
// (members, their types and epochs) and the members carry on with it.
func TestMigrationFailover(t *testing.T) {
	bs := inproc.StartCluster(t, 3, migrationProps(nil))
	addrs := []string{bs[0].Addr(), bs[1].Addr(), bs[2].Addr()}
	const topic, group, parts = "mig-failover", "mig-failover-g", 4
	adm, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ka := kadm.NewClient(adm)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := ka.CreateTopic(ctx, parts, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	stopped := make([]bool, len(bs))
	describeCG := func() (kadm.DescribedConsumerGroup, bool) {
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		defer dcancel()
		// A new client each time: no coordinator cached from before a broker stopped.
		var live []string
		for i, b := range bs {
			if !stopped[i] {
				live = append(live, b.Addr())
			}
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(live...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		gs, err := kadm.NewClient(cl).DescribeConsumerGroups(dctx, group)
		g, ok := gs[group]
		if !ok || g.Err != nil {
			lastErr = fmt.Errorf("describe: %w; group %+v", err, g)
			return g, false
		}
		return g, true
	}
	stable := func() bool {
		g, ok := describeCG()
		if !ok || g.State != "Stable" || len(g.Members) != 2 {
			return false
		}
		n, classic := 0, 0
		for _, m := range g.Members {
			if m.MemberEpoch != g.Epoch {
				return false
			}
			if m.MemberType == 0 {
				classic++
			}
			m.Assignment.Each(func(string, int32) { n++ })
		}
		return classic == 1 && n == parts
	}
	own := &ownership{}
	got := &consumed{seen: map[string]bool{}}
	seeds := addrs[0] // the clients learn the other brokers from it
	c1 := startClassic(t, seeds, group, topic, "classic", own, got, kgo.CooperativeStickyBalancer())
	waitUntil(t, 30*time.Second, "a classic member", func() bool { return listedTypeAny(t, addrs, group) == "classic" })
	k := startMember(t, seeds, group, topic, "kip848", own, got)
	waitUntil(t, 40*time.Second, "a stable mixed group", stable)
	before, _ := describeCG()

	coords := ka.FindGroupCoordinators(ctx, group)
	if coords[group].Err != nil {
		t.Fatalf("coordinator: %+v", coords)
	}
	node := coords[group].NodeID
	sctx, scancel := context.WithTimeout(ctx, 15*time.Second)
	stopped[node-1] = true
	if err := bs[node-1].Shutdown(sctx); err != nil {
		t.Logf("shutdown of broker %d: %v", node, err)
	}
	scancel()
	var after kadm.DescribedConsumerGroup
	waitUntilOr(t, 40*time.Second, "the group on another coordinator", func() bool {
		var ok bool
		after, ok = describeCG()
		if ok && (after.Coordinator.NodeID == node || len(after.Members) != 2) {
			lastErr = fmt.Errorf("coordinator %d, %d members", after.Coordinator.NodeID, len(after.Members))
		}
		return ok && after.Coordinator.NodeID != node && len(after.Members) == 2
	}, func() error { return lastErr })
	if after.Epoch < before.Epoch {
		t.Fatalf("epoch after failover %d, before %d", after.Epoch, before.Epoch)
	}
	waitUntilOr(t, 40*time.Second, "the members back", stable, func() error { return lastErr })
	k.stop()
	c1.stop()
	own.check(t)
}

// listedTypeAny is listedType through any of addrs.
func listedTypeAny(t *testing.T, addrs []string, group string) string {
	t.Helper()
	for _, a := range addrs {
		if typ := listedType(t, a, group); typ != "" {
			return typ
		}
	}
	return ""
}

// waitUntilOr is waitUntil reporting why (last) when it times out.
func waitUntilOr(t *testing.T, d time.Duration, what string, cond func() bool, last func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %v", what, last())
}

// TestMigrationMixedChurn: members of both protocols join and leave a consumer group while
// records flow (a classic member's LeaveGroup, a KIP-848 member's leave, new classic members
// joining the consumer group); no partition is owned by two members at once and every record
// is consumed.
func TestMigrationMixedChurn(t *testing.T) {
	b := inproc.Start(t, migrationProps(nil))
	addr := b.Addr()
	const topic, group, parts, records = "mig-churn", "mig-churn-g", 6, 500
	createTopic(t, addr, topic, parts)
	own := &ownership{}
	got := &consumed{seen: map[string]bool{}}
	var prodWG sync.WaitGroup
	prodWG.Add(1)
	go func() {
		defer prodWG.Done()
		produce(t, addr, topic, records, 12*time.Millisecond) // about 6s of traffic
	}()
	c1 := startClassic(t, addr, group, topic, "classic-1", own, got, kgo.CooperativeStickyBalancer())
	waitUntil(t, 20*time.Second, "a stable classic group", func() bool { return classicStable(t, addr, group, 1) })
	k1 := startMember(t, addr, group, topic, "kip848-1", own, got)
	c2 := startClassic(t, addr, group, topic, "classic-2", own, got, kgo.CooperativeStickyBalancer())
	k2 := startMember(t, addr, group, topic, "kip848-2", own, got)
	waitUntil(t, 30*time.Second, "a stable mixed group of 4", func() bool { return mixedStable(t, addr, group, 2, 2, parts) })
	// Churn, bounded to 4 changes about a second apart.
	time.Sleep(time.Second)
	c1.stop() // LeaveGroup of a classic member of a consumer group
	time.Sleep(time.Second)
	// An eager member that also speaks the protocol the other classic member uses (a member
	// with no protocol in common with them gets INCONSISTENT_GROUP_PROTOCOL).
	c3 := startClassic(t, addr, group, topic, "classic-3", own, got, kgo.RangeBalancer(), kgo.CooperativeStickyBalancer())
	time.Sleep(time.Second)
	k1.stop()
	time.Sleep(time.Second)
	k3 := startMember(t, addr, group, topic, "kip848-3", own, got)
	waitUntil(t, 30*time.Second, "a stable mixed group after the churn", func() bool { return mixedStable(t, addr, group, 2, 2, parts) })
	prodWG.Wait()
	waitUntil(t, 20*time.Second, "every record consumed", func() bool { return got.count() >= records })
	for _, m := range []*member{c2, c3, k2, k3} {
		m.stop()
	}
	own.check(t)
}
