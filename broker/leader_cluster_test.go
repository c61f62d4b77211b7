package broker

// Leader balance and leader election on clusters of real `weir serve` processes
// (controller/elect.go, 43_elect_leaders.go): a rolling restart ends with every broker leading
// its preferred partitions (auto.leader.rebalance.enable), ElectLeaders PREFERRED moves
// leadership back after a restart with auto balance off, ElectLeaders UNCLEAN on a partition
// whose ISR is only a dead broker, and unclean.leader.election.enable turned on at run time (on
// the topic, or on the brokers) elects a live out-of-ISR replica at once.

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leaderCounts returns, per broker, how many of topic's partitions it leads and how many it is
// the preferred replica of, and whether every partition is led by its preferred replica.
func (c *testCluster) leaderCounts(adm *kadm.Client, topic string) (leads, preferred map[int32]int, balanced bool, err error) {
	ps, err := c.partitions(adm, topic)
	if err != nil {
		return nil, nil, false, err
	}
	leads, preferred, balanced = map[int32]int{}, map[int32]int{}, true
	for _, p := range ps {
		leads[p.Leader]++
		if len(p.Replicas) > 0 {
			preferred[p.Replicas[0]]++
			if p.Leader != p.Replicas[0] {
				balanced = false
			}
		}
	}
	return leads, preferred, balanced, nil
}

func (c *testCluster) logLeaders(adm *kadm.Client, topic, when string) {
	c.t.Helper()
	leads, preferred, balanced, err := c.leaderCounts(adm, topic)
	if err != nil {
		c.t.Logf("%s: %v", when, err)
		return
	}
	line := ""
	for _, n := range c.nodes {
		line += fmt.Sprintf(" broker %d leads %d (preferred %d);", n.id, leads[n.id], preferred[n.id])
	}
	c.t.Logf("%s:%s leaderless %d, balanced %v", when, line, leads[-1], balanced)
}

func (c *testCluster) waitBalanced(adm *kadm.Client, topic string, within time.Duration) {
	c.t.Helper()
	waitFor(c.t, within, "every partition of "+topic+" led by its preferred replica", func() (bool, string) {
		leads, preferred, balanced, err := c.leaderCounts(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		return balanced, fmt.Sprintf("leads %v preferred %v", leads, preferred)
	})
}

// TestClusterLeaderRollingRestart: 3 brokers, a topic of 12 partitions rf 3; each broker in
// turn is stopped (SIGTERM: controlled shutdown moves its leaderships away) and started again.
// With auto.leader.rebalance.enable (default) and the default 300 s check interval, each
// restarted broker gets its preferred leaderships back once it rejoins the ISR, so the cluster
// ends with every broker leading its preferred partitions.
func TestClusterLeaderRollingRestart(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	adm := kadm.NewClient(c.client())
	const topic = "rolling"
	createReplicatedTopic(t, adm, topic, 12, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	c.waitBalanced(adm, topic, 30*time.Second)
	c.logLeaders(adm, topic, "before")
	for i, n := range c.nodes {
		c.signal(i, syscall.SIGTERM)
		waitFor(t, 15*time.Second, fmt.Sprintf("broker %d's leaderships moved", n.id), func() (bool, string) {
			leads, _, _, err := c.leaderCounts(adm, topic)
			if err != nil {
				return false, err.Error()
			}
			return leads[n.id] == 0 && leads[-1] == 0, fmt.Sprintf("leads %v", leads)
		})
		c.logLeaders(adm, topic, fmt.Sprintf("broker %d stopped", n.id))
		c.restart(i)
		c.waitISR(adm, topic, 3, 60*time.Second)
		inISR := time.Now()
		c.waitBalanced(adm, topic, 30*time.Second)
		c.logLeaders(adm, topic, fmt.Sprintf("broker %d restarted (balanced %v after the full ISR was seen)", n.id, time.Since(inISR).Round(time.Millisecond)))
	}
	leads, preferred, _, err := c.leaderCounts(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		if leads[n.id] != preferred[n.id] || leads[n.id] != 4 {
			t.Errorf("broker %d leads %d, preferred replica of %d", n.id, leads[n.id], preferred[n.id])
		}
	}
	c.logLeaders(adm, topic, "after the rolling restart")
}

// TestClusterElectPreferred: with auto.leader.rebalance.enable=false a restarted broker leads
// nothing; ElectLeaders PREFERRED (kadm, every partition) gives it its preferred partitions
// back, and a second election of a named partition is ELECTION_NOT_NEEDED.
func TestClusterElectPreferred(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2", "auto.leader.rebalance.enable": "false"})
	adm := kadm.NewClient(c.client())
	const topic = "elect-preferred"
	createReplicatedTopic(t, adm, topic, 6, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	c.waitBalanced(adm, topic, 30*time.Second)
	victim := c.nodes[1]
	c.signal(1, syscall.SIGTERM)
	c.restart(1)
	c.waitISR(adm, topic, 3, 60*time.Second)
	time.Sleep(2 * time.Second) // nothing moves the leaderships back by itself
	leads, preferred, balanced, err := c.leaderCounts(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	c.logLeaders(adm, topic, fmt.Sprintf("broker %d restarted", victim.id))
	if balanced || leads[victim.id] != 0 {
		t.Fatalf("auto balance off, yet broker %d leads %d (preferred %d)", victim.id, leads[victim.id], preferred[victim.id])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	if err != nil {
		t.Fatal(err)
	}
	elected := 0
	for _, ps := range res {
		for _, r := range ps {
			if r.Err != nil {
				t.Errorf("%s-%d: %v %s", r.Topic, r.Partition, r.Err, r.ErrMessage)
			}
			elected++
		}
	}
	if elected != preferred[victim.id] {
		t.Errorf("elected %d partitions, broker %d is the preferred replica of %d: %+v", elected, victim.id, preferred[victim.id], res)
	}
	c.waitBalanced(adm, topic, 10*time.Second)
	c.logLeaders(adm, topic, "after ElectLeaders PREFERRED")
	res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}, "no-such-topic": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[topic][0]; r.Err != kerr.ElectionNotNeeded {
		t.Errorf("second election of %s-0: %v", topic, r.Err)
	}
	if r := res["no-such-topic"][0]; r.Err != kerr.UnknownTopicOrPartition {
		t.Errorf("unknown topic: %v", r.Err)
	}
}

// createAssigned creates topic with one partition on the given replicas (explicit assignment).
func createAssigned(t *testing.T, cl *kgo.Client, topic string, replicas ...int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// strandReplicas picks the two brokers that are not the active controller: the replicas of
// the partitions strandPartitions strands, so that the controller quorum keeps its leader
// through it.
func (c *testCluster) strandReplicas(adm *kadm.Client) (leader, follower int32) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	var ids []int32
	for _, n := range c.nodes {
		if n.id != md.Controller {
			ids = append(ids, n.id)
		}
	}
	if len(ids) != 2 {
		c.t.Fatalf("controller %d, brokers %v", md.Controller, ids)
	}
	return ids[0], ids[1]
}

// strandPartitions leaves partition 0 of each topic (replicas [leader, follower]) leaderless
// with an ISR of only the dead leader, and the follower alive but out of the ISR: the
// follower is killed (it leaves the ISR), then the leader, then the follower is started again.
func (c *testCluster) strandPartitions(adm *kadm.Client, leader, follower int32, topics ...string) {
	c.t.Helper()
	li, fi := c.index(leader), c.index(follower)
	c.signal(fi, syscall.SIGKILL)
	for _, topic := range topics {
		waitFor(c.t, 20*time.Second, "the killed follower out of the ISR of "+topic, func() (bool, string) {
			ps, err := c.partitions(adm, topic)
			if err != nil {
				return false, err.Error()
			}
			return ps[0].Leader == leader && slices.Equal(ps[0].ISR, []int32{leader}), fmt.Sprintf("%+v", ps[0])
		})
	}
	c.signal(li, syscall.SIGKILL)
	c.restart(fi)
	for _, topic := range topics {
		waitFor(c.t, 20*time.Second, topic+" leaderless", func() (bool, string) {
			ps, err := c.partitions(adm, topic)
			if err != nil {
				return false, err.Error()
			}
			return ps[0].Leader < 0, fmt.Sprintf("%+v", ps[0])
		})
	}
}

// TestClusterUncleanElection: ElectLeaders UNCLEAN on a partition whose ISR is only a dead
// broker elects the live out-of-ISR replica (once it is unfenced); PREFERRED on it is
// PREFERRED_LEADER_NOT_AVAILABLE before.
func TestClusterUncleanElection(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "1", "auto.leader.rebalance.enable": "false"})
	cl := c.client()
	adm := kadm.NewClient(cl)
	const topic = "unclean-elect"
	leader, follower := c.strandReplicas(adm)
	createAssigned(t, cl, topic, leader, follower)
	c.waitISR(adm, topic, 2, 30*time.Second)
	c.strandPartitions(adm, leader, follower, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[topic][0]; r.Err != kerr.PreferredLeaderNotAvailable {
		t.Errorf("preferred election of a partition whose preferred replica is dead: %v", r.Err)
	}
	waitFor(t, 20*time.Second, "an unclean election", func() (bool, string) {
		res, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			return false, err.Error()
		}
		r := res[topic][0]
		return r.Err == nil, fmt.Sprintf("%v %s", r.Err, r.ErrMessage)
	})
	// Every broker answers Metadata from its own image: the restarted one may lag.
	waitFor(t, 10*time.Second, "the follower the only ISR member and leader", func() (bool, string) {
		ps, err := c.partitions(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		return ps[0].Leader == follower && slices.Equal(ps[0].ISR, []int32{follower}), fmt.Sprintf("%+v", ps[0])
	})
	res, err = adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[topic][0]; r.Err != kerr.ElectionNotNeeded {
		t.Errorf("unclean election of a led partition: %v", r.Err)
	}
}

// TestClusterUncleanDynamicEnable: unclean.leader.election.enable turned on at run time
// elects a live out-of-ISR replica of a leaderless partition at once (not at the next
// fencing): first as a topic config, then as a dynamic broker config.
func TestClusterUncleanDynamicEnable(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "1", "auto.leader.rebalance.enable": "false"})
	cl := c.client()
	adm := kadm.NewClient(cl)
	const byTopic, byBroker = "unclean-topic", "unclean-broker"
	leader, follower := c.strandReplicas(adm)
	createAssigned(t, cl, byTopic, leader, follower)
	createAssigned(t, cl, byBroker, leader, follower)
	c.waitISR(adm, byTopic, 2, 30*time.Second)
	c.waitISR(adm, byBroker, 2, 30*time.Second)
	c.strandPartitions(adm, leader, follower, byTopic, byBroker)
	time.Sleep(2 * time.Second) // still no leader: unclean election is off
	for _, topic := range []string{byTopic, byBroker} {
		if ps, err := c.partitions(adm, topic); err != nil || ps[0].Leader >= 0 {
			t.Fatalf("%s before unclean election is enabled: %+v %v", topic, ps[0], err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	on := "true"
	start := time.Now()
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "unclean.leader.election.enable", Value: &on}}, byTopic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, byTopic+" led by the follower", func() (bool, string) {
		ps, err := c.partitions(adm, byTopic)
		if err != nil {
			return false, err.Error()
		}
		return ps[0].Leader == follower, fmt.Sprintf("%+v", ps[0])
	})
	t.Logf("topic config: leader elected %v after the change", time.Since(start))
	if ps, err := c.partitions(adm, byBroker); err != nil || ps[0].Leader >= 0 {
		t.Fatalf("%s has a leader, but only %s allows unclean election: %+v %v", byBroker, byTopic, ps[0], err)
	}
	start = time.Now()
	for _, n := range c.nodes { // the live brokers; the active controller's value decides
		id := n.id
		if id == leader {
			continue
		}
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "unclean.leader.election.enable", Value: &on}}, id)
		if err == nil {
			var r kadm.AlterConfigsResponse
			if r, err = rs.On(fmt.Sprint(id), nil); err == nil {
				err = r.Err
			}
		}
		if err != nil {
			t.Fatalf("broker %d: %v", id, err)
		}
	}
	waitFor(t, 5*time.Second, byBroker+" led by the follower", func() (bool, string) {
		ps, err := c.partitions(adm, byBroker)
		if err != nil {
			return false, err.Error()
		}
		return ps[0].Leader == follower, fmt.Sprintf("%+v", ps[0])
	})
	t.Logf("broker config: leader elected %v after the change", time.Since(start))
}
