package controller

import (
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// balanceImage: brokers 1-3 alive; topic "b" with 12 partitions rf 3, partition i's preferred
// replica (i mod 3)+1, led by the replicas given in leaders.
func balanceImage(t *testing.T, leaders []int32, isr func(i int) []int32) *Image {
	t.Helper()
	img := newImage("c")
	for i := int32(1); i <= 3; i++ {
		img = mustApply(t, img, uint64(i), &command{Op: opRegister, BrokerID: i})
	}
	topic := &TopicInfo{Name: "b", ID: [16]byte{2}}
	for i := range leaders {
		reps := []int32{int32(i%3) + 1, int32((i+1)%3) + 1, int32((i+2)%3) + 1}
		in := slices.Clone(reps)
		if isr != nil {
			in = isr(i)
		}
		topic.Partitions = append(topic.Partitions, PartitionInfo{Replicas: reps, ISR: in, Leader: leaders[i]})
	}
	return mustApply(t, img, 10, &command{Op: opCreateTopic, Topic: topic})
}

// TestImbalanceRule: Kafka's rule. A broker whose share of not-led preferred partitions is over
// the percentage gets each of them back where it is alive and in the ISR; a broker at or under
// the percentage keeps its state.
func TestImbalanceRule(t *testing.T) {
	// Broker 1 prefers 0,3,6,9 and leads none (100%); broker 2 prefers 1,4,7,10 and leads all
	// but 4 (25%); broker 3 prefers 2,5,8,11 and leads all (0%).
	leaders := []int32{2, 2, 3, 2, 3, 3, 3, 2, 3, 2, 2, 3}
	img := balanceImage(t, leaders, nil)
	imb := LeaderImbalance(img)
	if imb[1] != (BrokerImbalance{4, 4}) || imb[2] != (BrokerImbalance{4, 1}) || imb[3] != (BrokerImbalance{4, 0}) {
		t.Fatalf("imbalance %v", imb)
	}
	for _, tc := range []struct {
		pct  int
		want []int32 // partitions moved
	}{
		{10, []int32{0, 3, 4, 6, 9}},
		{25, []int32{0, 3, 6, 9}}, // 25% is not over 25%
		{99, []int32{0, 3, 6, 9}},
		{100, nil},
		{0, []int32{0, 3, 4, 6, 9}},
	} {
		var got []int32
		for _, ch := range imbalanceElections(img, tc.pct) {
			if ch.Topic != "b" || ch.Leader != int32(ch.Partition%3)+1 {
				t.Fatalf("pct %d: change %+v", tc.pct, ch)
			}
			got = append(got, ch.Partition)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("pct %d: moved %v, want %v", tc.pct, got, tc.want)
		}
	}

	// Applied, the moves leave every broker leading its preferred partitions, each with a new
	// leader and partition epoch.
	next := mustApply(t, img, 11, &command{Op: opElectLeaders, Elect: imbalanceElections(img, 10)})
	for i, p := range next.Topics["b"].Partitions {
		if p.Leader != p.Replicas[0] {
			t.Fatalf("partition %d led by %d, preferred %d", i, p.Leader, p.Replicas[0])
		}
		moved := leaders[i] != p.Replicas[0]
		if old := img.Topics["b"].Partitions[i]; moved != (p.LeaderEpoch == old.LeaderEpoch+1) || moved != (p.PartitionEpoch == old.PartitionEpoch+1) {
			t.Fatalf("partition %d: epochs %d/%d, was %d/%d", i, p.LeaderEpoch, p.PartitionEpoch, old.LeaderEpoch, old.PartitionEpoch)
		}
	}
	if imb := LeaderImbalance(next); imb[1].NotLed+imb[2].NotLed+imb[3].NotLed != 0 {
		t.Fatalf("after balance: %v", imb)
	}
}

// TestImbalanceRuleNeedsISRAndLife: a preferred replica outside the ISR or fenced is not made
// leader, even when its broker is over the percentage.
func TestImbalanceRuleNeedsISRAndLife(t *testing.T) {
	leaders := []int32{2, 2, 3, 2, 3, 3, 3, 2, 3, 2, 2, 3}
	img := balanceImage(t, leaders, func(i int) []int32 {
		if i == 0 || i == 3 {
			return []int32{2, 3} // broker 1 not yet back in the ISR of 0 and 3
		}
		return []int32{1, 2, 3}
	})
	var got []int32
	for _, ch := range imbalanceElections(img, 10) {
		got = append(got, ch.Partition)
	}
	if !slices.Equal(got, []int32{4, 6, 9}) {
		t.Fatalf("moved %v", got)
	}
	fenced := mustApply(t, img, 11, &command{Op: opFence, BrokerID: 1})
	for _, ch := range imbalanceElections(fenced, 10) {
		if ch.Leader == 1 {
			t.Fatalf("fenced broker 1 elected: %+v", ch)
		}
	}
}

// TestPlanElection: ElectLeaders' per-partition results as Kafka gives them.
func TestPlanElection(t *testing.T) {
	img := testImage(t) // t-0 [1,2,3] led by 1; t-1 [1] led by 1; t-2 [2,1] isr [2] led by 2
	img = mustApply(t, img, 11, &command{Op: opFence, BrokerID: 1})
	img = mustApply(t, img, 12, &command{Op: opUnfence, BrokerID: 1})
	// Now t-0 is led by 2 (isr [2,3]), t-1 by 1 again (it was leaderless, 1 is in its ISR).
	res, changes := planElection(img, &ElectLeadersRequest{Type: ElectPreferred, Partitions: []TopicPartition{
		{"t", 0}, {"t", 1}, {"t", 2}, {"t", 7}, {"nope", 0},
	}})
	codes := []int16{}
	for _, r := range res {
		codes = append(codes, r.Code)
	}
	want := []int16{kerr.PreferredLeaderNotAvailable.Code, kerr.ElectionNotNeeded.Code, kerr.ElectionNotNeeded.Code,
		kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code}
	if !slices.Equal(codes, want) || len(changes) != 0 {
		t.Fatalf("codes %v want %v; changes %v", codes, want, changes)
	}

	// Broker 1 back in t-0's ISR: the preferred election moves the leadership.
	p := img.Topics["t"].Partitions[0]
	img = mustApply(t, img, 13, &command{Op: opAlterPartition, Alter: &AlterPartitionRequest{Topic: "t", Partition: 0,
		LeaderID: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{2, 3, 1}}})
	res, changes = planElection(img, &ElectLeadersRequest{Type: ElectPreferred, All: true})
	if len(res) != 1 || res[0].Code != 0 || res[0].Partition != 0 || len(changes) != 1 || changes[0].Leader != 1 {
		t.Fatalf("all: %+v %+v", res, changes)
	}
	img = mustApply(t, img, 14, &command{Op: opElectLeaders, Elect: changes})
	if q := img.Topics["t"].Partitions[0]; q.Leader != 1 || q.LeaderEpoch != p.LeaderEpoch+1 {
		t.Fatalf("after election %+v (was %+v)", q, p)
	}
	// Replaying the same decision does nothing: its partition epoch is gone.
	if next, _ := apply(img, 15, &command{Op: opElectLeaders, Elect: changes}); next != nil {
		t.Fatal("a stale change was applied")
	}
}

// TestUncleanElection: UNCLEAN on a partition whose only ISR member is dead elects a live
// out-of-ISR replica; with no live replica it is ELIGIBLE_LEADERS_NOT_AVAILABLE; a led
// partition is ELECTION_NOT_NEEDED. uncleanElections does the same for topics that allow it.
func TestUncleanElection(t *testing.T) {
	img := testImage(t)
	img = mustApply(t, img, 11, &command{Op: opFence, BrokerID: 2}) // t-2 [2,1] isr [2]: leaderless
	if p := img.Topics["t"].Partitions[2]; p.Leader != -1 {
		t.Fatalf("t-2 %+v", p)
	}
	res, changes := planElection(img, &ElectLeadersRequest{Type: ElectUnclean, Partitions: []TopicPartition{{"t", 0}, {"t", 2}}})
	if res[0].Code != kerr.ElectionNotNeeded.Code || res[1].Code != 0 || len(changes) != 1 || changes[0].Leader != 1 || !slices.Equal(changes[0].ISR, []int32{1}) {
		t.Fatalf("%+v %+v", res, changes)
	}
	if got := uncleanElections(img, func(string) bool { return false }); len(got) != 0 {
		t.Fatalf("unclean not allowed: %+v", got)
	}
	got := uncleanElections(img, func(topic string) bool { return topic == "t" })
	if len(got) != 1 || got[0].Partition != 2 || got[0].Leader != 1 {
		t.Fatalf("unclean allowed: %+v", got)
	}
	img = mustApply(t, img, 12, &command{Op: opElectLeaders, Elect: got})
	if p := img.Topics["t"].Partitions[2]; p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) || p.LeaderEpoch != 2 {
		t.Fatalf("t-2 after unclean election %+v", p)
	}
	img = mustApply(t, img, 13, &command{Op: opFence, BrokerID: 1})
	img = mustApply(t, img, 14, &command{Op: opFence, BrokerID: 3})
	res, _ = planElection(img, &ElectLeadersRequest{Type: ElectUnclean, Partitions: []TopicPartition{{"t", 1}}})
	if res[0].Code != kerr.EligibleLeadersNotAvailable.Code {
		t.Fatalf("%+v", res)
	}
}

// TestElectRPCValidation: elect_leaders frames are bounded and carry only their own field.
func TestElectRPCValidation(t *testing.T) {
	if err := validateRequest(&request{Op: reqElectLeaders, Elect: &ElectLeadersRequest{Type: 2}}); err == nil {
		t.Fatal("election type 2 accepted")
	}
	if err := validateRequest(&request{Op: reqElectLeaders}); err == nil {
		t.Fatal("no election accepted")
	}
	if err := validateRequest(&request{Op: reqElectLeaders, Name: "x", Elect: &ElectLeadersRequest{}}); err == nil {
		t.Fatal("foreign field accepted")
	}
	if err := validateRequest(&request{Op: reqSync, Elect: &ElectLeadersRequest{}}); err == nil {
		t.Fatal("elect on sync accepted")
	}
	if err := validateRequest(&request{Op: reqElectLeaders, Elect: &ElectLeadersRequest{Type: ElectUnclean, Partitions: []TopicPartition{{"t", 0}}}}); err != nil {
		t.Fatal(err)
	}
}

// newBalanceCluster starts n in-process voters whose configs tweak adjusts (leader balance,
// unclean election).
func newBalanceCluster(t *testing.T, n int, tweak func(*Config)) *testCluster {
	cl := &testCluster{t: t, dirs: map[int32]string{}, addrs: map[int32]string{}, nodes: map[int32]*Controller{}, sec: map[int32]*PortSecurity{}}
	lns := map[int32]net.Listener{}
	for i := int32(1); i <= int32(n); i++ {
		lns[i] = listenRetry(t, "127.0.0.1:0")
		cl.addrs[i] = lns[i].Addr().String()
		cl.dirs[i] = t.TempDir()
		cl.voters = append(cl.voters, Voter{ID: i, Addr: cl.addrs[i]})
	}
	t.Cleanup(func() {
		for _, c := range cl.nodes {
			c.Close()
		}
	})
	for i := int32(1); i <= int32(n); i++ {
		cfg := cl.config(i, lns[i])
		tweak(&cfg)
		c, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cl.nodes[i] = c
	}
	for i, c := range cl.nodes {
		if err := c.WaitReady(ctxT(t, 15*time.Second)); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	return cl
}

// TestLeaderBalanceOnISRJoin: on a 3-voter controller with auto.leader.rebalance.enable and a
// check interval far away, a broker that comes back and rejoins the ISR of a partition it is
// the preferred replica of leads it again within a few seconds (the ISR-join trigger); with
// auto balance off it does not.
func TestLeaderBalanceOnISRJoin(t *testing.T) {
	for _, auto := range []bool{true, false} {
		t.Run(fmt.Sprintf("auto=%v", auto), func(t *testing.T) {
			cl := newBalanceCluster(t, 3, func(c *Config) {
				c.AutoLeaderRebalance = auto
				c.LeaderImbalanceCheckInterval = time.Hour
				c.LeaderImbalancePerBrokerPercentage = 10
			})
			ctx := ctxT(t, 30*time.Second)
			l := cl.leader()
			if _, err := l.CreateTopic(ctx, CreateTopicRequest{Name: "b", Assignment: [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}}); err != nil {
				t.Fatal(err)
			}
			// Broker 1 leaves (fenced after its session) and comes back: it is alive again
			// but out of the ISR of b-0, which broker 2 leads now.
			victim := cl.follower()
			vid := victim.cfg.NodeID
			part := vid - 1 // b-part has vid as preferred replica
			cl.stop(vid)
			eventually(t, 10*time.Second, "leadership moved", func() error {
				if p := cl.leader().Image().Topics["b"].Partitions[part]; p.Leader == vid || p.Leader < 0 || slices.Contains(p.ISR, vid) {
					return fmt.Errorf("%+v", p)
				}
				return nil
			})
			cl.restart(vid)
			if err := cl.nodes[vid].WaitReady(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond)
			l = cl.leader()
			p := l.Image().Topics["b"].Partitions[part]
			if p.Leader == vid {
				t.Fatalf("broker %d leads b-%d before it is back in the ISR: %+v", vid, part, p)
			}
			// Its leader takes it back into the ISR (as the data plane does once it caught up).
			if _, err := l.AlterPartition(ctx, AlterPartitionRequest{Topic: "b", Partition: part, LeaderID: p.Leader,
				LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: append(slices.Clone(p.ISR), vid)}); err != nil {
				t.Fatal(err)
			}
			if !auto {
				time.Sleep(3 * time.Second)
				if q := cl.leader().Image().Topics["b"].Partitions[part]; q.Leader == vid {
					t.Fatalf("auto balance off, yet broker %d leads b-%d again: %+v", vid, part, q)
				}
				return
			}
			start := time.Now()
			eventually(t, 5*time.Second, "preferred leader back", func() error {
				if q := cl.leader().Image().Topics["b"].Partitions[part]; q.Leader != vid || q.LeaderEpoch <= p.LeaderEpoch {
					return fmt.Errorf("%+v", q)
				}
				return nil
			})
			t.Logf("broker %d leads b-%d again %v after rejoining its ISR", vid, part, time.Since(start))
		})
	}
}

// TestUncleanTurnedOn: a leaderless partition whose topic starts allowing unclean election
// (nothing changes in the metadata: the setting is read through Config.UncleanLeaderElection)
// gets a live out-of-ISR replica as leader within the unclean check interval.
func TestUncleanTurnedOn(t *testing.T) {
	var allow atomic.Bool
	cl := newBalanceCluster(t, 3, func(c *Config) {
		c.UncleanLeaderElection = func(topic string) bool { return topic == "u" && allow.Load() }
	})
	ctx := ctxT(t, 30*time.Second)
	l := cl.leader()
	lid := l.cfg.NodeID
	f := cl.follower()
	fid := f.cfg.NodeID
	if _, err := l.CreateTopic(ctx, CreateTopicRequest{Name: "u", Assignment: [][]int32{{fid, lid}}}); err != nil {
		t.Fatal(err)
	}
	// The follower lid leaves the ISR (its leader fid says so), then fid stops: leaderless,
	// ISR [fid], lid alive and out of the ISR.
	p := l.Image().Topics["u"].Partitions[0]
	if _, err := l.AlterPartition(ctx, AlterPartitionRequest{Topic: "u", Partition: 0, LeaderID: fid,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{fid}}); err != nil {
		t.Fatal(err)
	}
	cl.stop(fid)
	eventually(t, 10*time.Second, "leaderless", func() error {
		if q := cl.leader().Image().Topics["u"].Partitions[0]; q.Leader >= 0 {
			return fmt.Errorf("%+v", q)
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond)
	if q := cl.leader().Image().Topics["u"].Partitions[0]; q.Leader >= 0 {
		t.Fatalf("unclean off, yet %+v", q)
	}
	allow.Store(true)
	start := time.Now()
	eventually(t, 5*time.Second, "unclean leader", func() error {
		if q := cl.leader().Image().Topics["u"].Partitions[0]; q.Leader != lid || !slices.Equal(q.ISR, []int32{lid}) {
			return fmt.Errorf("%+v", q)
		}
		return nil
	})
	t.Logf("unclean leader elected %v after the setting changed", time.Since(start))
}
