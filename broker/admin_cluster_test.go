package broker

// Cluster tests of the admin part of issue 14 (real weir processes on ports 41000-41099):
// replacing a controller voter at run time, DescribeQuorum's voters and observers,
// cluster-wide dynamic broker configs on every broker, internal topics waiting for enough
// brokers for their replication factor.

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
)

// adminCluster lays out n nodes on ports base.. (Kafka), base+10.. (controller), base+20..
// (metrics) where the first voters nodes are the controller quorum's voters and the others
// start as observers (controller.listener set, not in controller.quorum.voters). It starts
// the first start nodes.
func adminCluster(t *testing.T, base, n, voters, start int, props map[string]string) *testcluster.Cluster {
	t.Helper()
	base = adminPortBlock(t, base)
	p := map[string]string{"group.initial.rebalance.delay.ms": "0"}
	for k, v := range props {
		p[k] = v
	}
	var tc *testcluster.Cluster
	cfg := testcluster.Config{
		N: n, Props: p,
		NodeProps: func(nd *testcluster.Node) map[string]string {
			if tc == nil { // testcluster.New checking the layout
				return nil
			}
			var vs []string
			for _, v := range tc.Nodes()[:voters] {
				vs = append(vs, fmt.Sprintf("%d@%s", v.ID, v.ControllerAddr()))
			}
			m := map[string]string{"controller.quorum.voters": strings.Join(vs, ",")}
			if int(nd.ID) > voters {
				m["controller.listener"] = nd.ControllerAddr()
			}
			return m
		},
	}
	if base > 0 {
		cfg.BasePort, cfg.ControllerBasePort, cfg.MetricsBasePort = base, base+10, base+20
	}
	tc = tbcluster.New(t, cfg)
	if testing.Short() {
		t.Skip("runs a cluster of weir processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, nd := range tc.Nodes()[:start] {
		if err := nd.Spawn(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.WaitReady(ctx, tc.Nodes()[:start]...); err != nil {
		t.Fatal(err)
	}
	return tc
}

// adminPortBlock returns the first block of 30 ports, from preferred on among this part's
// three (41000, 41030, 41060), whose ports are all free now (a port of the range may be held
// as the local port of some connection), or 0 when none is.
func adminPortBlock(t *testing.T, preferred int) int {
	t.Helper()
	blocks := []int{preferred}
	for _, b := range []int{41000, 41030, 41060} {
		if b != preferred {
			blocks = append(blocks, b)
		}
	}
	for _, b := range blocks {
		free := true
		for p := b; p < b+30 && free; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				free = false
				continue
			}
			l.Close()
		}
		if free {
			return b
		}
	}
	// Every block has a port held (this machine's ephemeral ports overlap the range): take
	// free ports the kernel picks, as the other cluster tests do.
	t.Logf("no free block of 30 ports in 41000-41089: using free ports")
	return 0
}

func adminClient(t *testing.T, nodes ...*testcluster.Node) *kgo.Client {
	t.Helper()
	var seeds []string
	for _, n := range nodes {
		seeds = append(seeds, n.Addr())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// describeQuorum asks node n's broker for the quorum.
func describeQuorum(t *testing.T, cl *kgo.Client) (kmsg.DescribeQuorumResponseTopicPartition, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = clusterMetadataTopic
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.DescribeQuorumResponseTopicPartition{}, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return kmsg.DescribeQuorumResponseTopicPartition{}, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return kmsg.DescribeQuorumResponseTopicPartition{}, fmt.Errorf("answer %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions[0], nil
}

func replicaIDs(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, strconv.Itoa(int(r.ReplicaID)))
	}
	return strings.Join(ids, ",")
}

// TestClusterReplaceVoter: 3 voters and a 4th node started as an observer. DescribeQuorum shows
// the voters (with their log ends, from the heartbeats) and the observer; node 3 is stopped for
// good, node 4 is added as a voter and node 3 removed (AddRaftVoter / RemoveRaftVoter); the
// quorum {1,2,4} then survives the kill of one more voter, and keeps its voters across a
// restart.
func TestClusterReplaceVoter(t *testing.T) {
	tc := adminCluster(t, 41000, 4, 3, 4, nil)
	nodes := tc.Nodes()
	cl := adminClient(t, nodes[0], nodes[1], nodes[3])
	var q kmsg.DescribeQuorumResponseTopicPartition
	waitFor(t, 20*time.Second, "quorum with 3 voters with log ends and 1 observer", func() (bool, string) {
		var err error
		if q, err = describeQuorum(t, cl); err != nil {
			return false, err.Error()
		}
		if replicaIDs(q.CurrentVoters) != "1,2,3" || replicaIDs(q.Observers) != "4" {
			return false, fmt.Sprintf("voters %s observers %s", replicaIDs(q.CurrentVoters), replicaIDs(q.Observers))
		}
		for _, r := range append(q.CurrentVoters, q.Observers...) {
			if r.LogEndOffset < 1 || r.LastFetchTimestamp < 0 {
				return false, fmt.Sprintf("replica %+v", r)
			}
		}
		return true, ""
	})
	t.Logf("quorum: leader %d epoch %d hw %d voters %s observers %s", q.LeaderID, q.LeaderEpoch, q.HighWatermark, replicaIDs(q.CurrentVoters), replicaIDs(q.Observers))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Adding a voter that is already one is DUPLICATE_VOTER.
	add := kmsg.NewPtrAddRaftVoterRequest()
	add.VoterID = 1
	if resp, err := add.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.DuplicateVoter.Code {
		t.Fatalf("add voter 1: %v %+v", err, resp)
	}

	if err := nodes[2].Kill(); err != nil { // node 3 is gone for good
		t.Fatal(err)
	}
	add = kmsg.NewPtrAddRaftVoterRequest()
	add.VoterID = 4
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = "CONTROLLER", "127.0.0.1", uint16(nodes[3].ControllerPort)
	add.Listeners = append(add.Listeners, l)
	if resp, err := add.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("add voter 4: %v %+v", err, resp)
	}
	rm := kmsg.NewPtrRemoveRaftVoterRequest()
	rm.VoterID = 3
	if resp, err := rm.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("remove voter 3: %v %+v", err, resp)
	}
	rm = kmsg.NewPtrRemoveRaftVoterRequest()
	rm.VoterID = 3
	if resp, err := rm.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.VoterNotFound.Code {
		t.Fatalf("remove voter 3 again: %v %+v", err, resp)
	}
	waitFor(t, 20*time.Second, "voters 1,2,4", func() (bool, string) {
		q, err := describeQuorum(t, cl)
		if err != nil {
			return false, err.Error()
		}
		return replicaIDs(q.CurrentVoters) == "1,2,4", replicaIDs(q.CurrentVoters)
	})

	// Kill one more voter, the leader: {2,4} or {1,4} or {1,2} must still elect and commit.
	q, err := describeQuorum(t, cl)
	if err != nil {
		t.Fatal(err)
	}
	victim := tc.Node(q.LeaderID)
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	var alive []*testcluster.Node
	for _, n := range []*testcluster.Node{nodes[0], nodes[1], nodes[3]} {
		if n != victim {
			alive = append(alive, n)
		}
	}
	cl2 := adminClient(t, alive...)
	adm := kadm.NewClient(cl2)
	waitFor(t, 30*time.Second, "a new leader among the remaining voters and a topic created", func() (bool, string) {
		q, err := describeQuorum(t, cl2)
		if err != nil {
			return false, err.Error()
		}
		if q.LeaderID == victim.ID || q.LeaderID < 0 {
			return false, fmt.Sprintf("leader %d", q.LeaderID)
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		resp, err := adm.CreateTopic(cctx, 1, 2, nil, "after-replace")
		if err != nil {
			return false, err.Error()
		}
		if resp.Err != nil && resp.Err != kerr.TopicAlreadyExists {
			return false, resp.Err.Error()
		}
		return true, ""
	})
	t.Logf("killed voter %d; the quorum of the other two elected a leader and committed", victim.ID)

	// The configuration is in raft's log: after restarting the killed voter the voters are
	// still 1,2,4.
	if err := victim.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "voters 1,2,4 after a restart, DescribeCluster naming the quorum's leader", func() (bool, string) {
		q, err := describeQuorum(t, cl2)
		if err != nil {
			return false, err.Error()
		}
		if replicaIDs(q.CurrentVoters) != "1,2,4" {
			return false, replicaIDs(q.CurrentVoters)
		}
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(dctx, cl2)
		if err != nil || dc.ControllerID != q.LeaderID {
			return false, fmt.Sprintf("DescribeCluster controller %v (err %v), quorum leader %d", dc, err, q.LeaderID)
		}
		return true, ""
	})
}

// TestClusterDefaultBrokerConfigs: a cluster-wide default set through one broker applies on
// every broker (DYNAMIC_DEFAULT_BROKER_CONFIG), a per-broker override stays on its broker, and
// a broker restarted later takes both from the metadata log.
func TestClusterDefaultBrokerConfigs(t *testing.T) {
	tc := adminCluster(t, 41030, 3, 3, 3, nil)
	nodes := tc.Nodes()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(adminClient(t, nodes...))
	// The legacy AlterConfigs on the resource "" (the whole cluster-wide state).
	if resps, err := adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: admStr("5400000")}}); err != nil || resps[0].Err != nil {
		t.Fatalf("cluster default: %v %+v", err, resps)
	}
	// kadm sends a broker-specific change to that broker.
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: admStr("600000")}}, 2); err != nil || resps[0].Err != nil {
		t.Fatalf("per-broker override: %v %+v", err, resps)
	}
	check := func(want map[int32][2]string) {
		t.Helper()
		waitFor(t, 20*time.Second, "log.retention.ms on every broker", func() (bool, string) {
			for id, w := range want {
				rcs, err := adm.DescribeBrokerConfigs(ctx, id)
				if err != nil {
					return false, err.Error()
				}
				rc, err := rcs.On(strconv.Itoa(int(id)), nil)
				if err != nil || rc.Err != nil {
					return false, fmt.Sprint(err, rc.Err)
				}
				for _, c := range rc.Configs {
					if c.Key == "log.retention.ms" && (c.MaybeValue() != w[0] || c.Source.String() != w[1]) {
						return false, fmt.Sprintf("broker %d: %s from %v", id, c.MaybeValue(), c.Source)
					}
				}
			}
			return true, ""
		})
	}
	want := map[int32][2]string{
		1: {"5400000", "DYNAMIC_DEFAULT_BROKER_CONFIG"},
		2: {"600000", "DYNAMIC_BROKER_CONFIG"},
		3: {"5400000", "DYNAMIC_DEFAULT_BROKER_CONFIG"},
	}
	check(want)
	// Broker 3 was down while the default changed: it takes the new one when it comes back.
	if err := nodes[2].Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// IncrementalAlterConfigs on the resource "".
	if resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: admStr("1800000")}}); err != nil || resps[0].Err != nil {
		t.Fatalf("cluster default: %v %+v", err, resps)
	}
	if err := nodes[2].Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	want[1], want[3] = [2]string{"1800000", "DYNAMIC_DEFAULT_BROKER_CONFIG"}, [2]string{"1800000", "DYNAMIC_DEFAULT_BROKER_CONFIG"}
	check(want)
}

// TestClusterInternalTopicsWaitForBrokers: offsets.topic.replication.factor is 3 by default; with
// two of three brokers running, FindCoordinator answers COORDINATOR_NOT_AVAILABLE and
// __consumer_offsets is not created (Kafka's behaviour, never a topic with fewer replicas than
// configured); once the third broker registers, the coordinator is found and the topic has 3
// replicas.
func TestClusterInternalTopicsWaitForBrokers(t *testing.T) {
	tc := adminCluster(t, 41060, 3, 2, 2, nil)
	nodes := tc.Nodes()
	cl := adminClient(t, nodes[:2]...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	// Each broker answers from its own image: wait until both list both.
	waitFor(t, 30*time.Second, "both brokers in every broker's metadata", func() (bool, string) {
		for id := int32(1); id <= 2; id++ {
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.Broker(int(id)))
			if err != nil {
				return false, err.Error()
			}
			if len(resp.Brokers) != 2 {
				return false, fmt.Sprintf("broker %d lists %d brokers", id, len(resp.Brokers))
			}
		}
		return true, ""
	})
	for id := 1; id <= 2; id++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{"g"}
		resp, err := req.RequestWith(ctx, cl.Broker(id))
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Coordinators[0].ErrorCode; code != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("broker %d, 2 of 3 brokers up: FindCoordinator %v, want COORDINATOR_NOT_AVAILABLE", id, kerr.ErrorForCode(code))
		}
	}
	if md, err := adm.Metadata(ctx, offsetsTopic); err != nil || md.Topics[offsetsTopic].Err == nil {
		t.Fatalf("__consumer_offsets exists with 2 of 3 brokers up: %v %+v", err, md.Topics[offsetsTopic])
	}
	if out := tc.Output(); !strings.Contains(out, "not creating an internal topic yet") {
		t.Errorf("no warning about the internal topic waiting for brokers")
	}

	if err := nodes[2].Spawn(); err != nil {
		t.Fatal(err)
	}
	if err := tc.WaitReady(ctx, nodes[2]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a group coordinator", func() (bool, string) {
		for _, r := range adm.FindGroupCoordinators(ctx, "g") {
			if r.Err != nil {
				return false, r.Err.Error()
			}
		}
		return true, ""
	})
	waitFor(t, 30*time.Second, "__consumer_offsets with 3 replicas", func() (bool, string) {
		md, err := adm.Metadata(ctx, offsetsTopic)
		if err != nil {
			return false, err.Error()
		}
		td := md.Topics[offsetsTopic]
		if td.Err != nil || len(td.Partitions) == 0 {
			return false, fmt.Sprint(td.Err)
		}
		for _, p := range td.Partitions {
			if len(p.Replicas) != 3 {
				return false, fmt.Sprintf("partition %d replicas %v", p.Partition, p.Replicas)
			}
		}
		return true, ""
	})
}
