package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/metrics"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/replication"
)

// counterValue reads a counter of reg by its full name.
func counterValue(t *testing.T, reg *metrics.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Prometheus().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// answerTestReplica returns the leader (broker 1) of a partition replicated on brokers 1, 2 and
// 3, outside a cluster (tests give the answers to its ISR changes directly), with its leader
// state, and a function returning the next ISR change it proposes: a shrink to the leader
// alone, the followers not having fetched for an hour.
func answerTestReplica(t *testing.T, reg *metrics.Registry) (*replica, *replication.LeaderState, func() *replication.ISRChange) {
	t.Helper()
	cfg, err := NewConfig(map[string]string{"log.dirs": t.TempDir(), "node.id": "1"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := engine.OpenLog(engine.OpenOptions{Dir: filepath.Join(t.TempDir(), "t-0"), Topic: "t", Config: engine.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	b := &Broker{cfg: cfg, nodeID: 1}
	b.obs.reg = reg
	r := &replica{rm: &replicaManager{b: b}, tp: engine.TopicPartition{Topic: "t"}, log: l, epoch: -1}
	r.apply(controller.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1})
	t.Cleanup(func() { r.mu.Lock(); r.resignLocked(); r.mu.Unlock() })
	r.mu.Lock()
	state := r.state
	r.mu.Unlock()
	propose := func() *replication.ISRChange {
		t.Helper()
		r.mu.Lock()
		defer r.mu.Unlock()
		c := state.Tick(time.Now().Add(time.Hour))
		if c == nil {
			t.Fatalf("no ISR shrink proposed (pending %v)", state.Pending())
		}
		return c
	}
	return r, state, propose
}

// TestAlterPartitionRefusal: CLUSTER_AUTHORIZATION_FAILED (the controller's answer when this
// broker's principal may not act for its id) to the first send of an ISR change is a definite
// refusal: nothing of the change reached the controller's log, so it is aborted and not sent
// again; it was once sent again every 500 ms for as long as the leadership lasted. The same
// refusal after an earlier send whose outcome is unknown leaves the change pending and sends it
// again: the earlier send may have committed.
func TestAlterPartitionRefusal(t *testing.T) {
	r, state, propose := answerTestReplica(t, metrics.New())
	pending := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return state.Pending()
	}
	refused := fmt.Errorf("broker 1 is configured for principal User:b1, not User:x (controller.broker.principals): %w", kerr.ClusterAuthorizationFailed)
	c := propose()
	if again := r.isrChangeAnswered(state, c, controller.PartitionInfo{}, refused, 1); again || pending() {
		t.Fatalf("CLUSTER_AUTHORIZATION_FAILED to the first send: sent again %v, still pending %v; want the change aborted", again, pending())
	}
	c = propose()
	if again := r.isrChangeAnswered(state, c, controller.PartitionInfo{}, refused, 2); !again || !pending() {
		t.Errorf("CLUSTER_AUTHORIZATION_FAILED after an unknown outcome: sent again %v, still pending %v; want it pending and sent again", again, pending())
	}
}

// TestAlterPartitionStaleAnswerNotCounted: a committed answer whose state newer metadata
// installed first changes nothing and is not counted in weir_isr_shrinks_total (it once was,
// whatever the answer said); an answer installed is counted once.
func TestAlterPartitionStaleAnswerNotCounted(t *testing.T) {
	reg := metrics.New()
	r, state, propose := answerTestReplica(t, reg)
	c := propose()
	r.mu.Lock()
	state.ApplyPartition([]int32{1, 3}, 1, 3) // the metadata: the shrink, then another change
	r.mu.Unlock()
	if again := r.isrChangeAnswered(state, c, controller.PartitionInfo{ISR: c.ISR, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 2}, nil, 1); again {
		t.Error("a committed answer was sent again")
	}
	if n := counterValue(t, reg, "weir_isr_shrinks_total"); n != 0 {
		t.Errorf("weir_isr_shrinks_total %v after an answer older than the installed metadata, want 0", n)
	}
	r.mu.Lock()
	isr := state.ISR()
	r.mu.Unlock()
	if len(isr) != 2 {
		t.Errorf("ISR %v after a stale answer, want the metadata's [1 3]", isr)
	}

	c = propose()
	if again := r.isrChangeAnswered(state, c, controller.PartitionInfo{ISR: c.ISR, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 4}, nil, 1); again {
		t.Error("a committed answer was sent again")
	}
	if n := counterValue(t, reg, "weir_isr_shrinks_total"); n != 1 {
		t.Errorf("weir_isr_shrinks_total %v after one installed shrink, want 1", n)
	}
}

// TestAlterPartitionSenderEndsOnClose: an ISR change whose send hangs (the controller does not
// answer) does not outlive the broker: Shutdown cancels the send and waits for its sender. The
// sender was once not waited for and its send ran on for alterPartitionTimeout after the
// broker had closed.
func TestAlterPartitionSenderEndsOnClose(t *testing.T) {
	brokers := startInprocCluster(t, 2, map[string]string{"auto.leader.rebalance.enable": "false"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, follower := brokers[0], brokers[1]
	const topic = "sender-close"
	if _, err := leader.ctl.CreateTopic(ctx, controller.CreateTopicRequest{Name: topic, Partitions: 1, ReplicationFactor: 2,
		Assignment: [][]int32{{leader.nodeID, follower.nodeID}}}); err != nil {
		t.Fatal(err)
	}
	tp := engine.TopicPartition{Topic: topic, Partition: 0}
	var lrep *replica
	waitFor(t, 30*time.Second, fmt.Sprintf("broker %d leading %s with an ISR of 2", leader.nodeID, tp), func() (bool, string) {
		lrep = leader.rm.get(tp)
		if lrep == nil {
			return false, "no replica"
		}
		_, leading := lrep.leaderEpoch()
		return leading && lrep.isrSize() == 2, fmt.Sprintf("leading %v isr %d", leading, lrep.isrSize())
	})
	called := make(chan struct{})
	var calls, returned atomic.Int32
	hook := alterPartitionFunc(func(ctx context.Context, req controller.AlterPartitionRequest) (controller.PartitionInfo, error) {
		if req.Topic != topic {
			return leader.ctl.AlterPartition(ctx, req)
		}
		if calls.Add(1) == 1 {
			close(called)
		}
		<-ctx.Done() // the controller never answers
		returned.Add(1)
		return controller.PartitionInfo{}, fmt.Errorf("no answer: %w", kerr.RequestTimedOut)
	})
	leader.rm.alterPartitionHook.Store(&hook)
	// The follower stops fetching (its image watcher held so nothing restarts it) and misses a
	// record: the leader proposes to remove it.
	follower.rm.reconcileMu.Lock()
	var releaseFollower sync.Once
	defer releaseFollower.Do(follower.rm.reconcileMu.Unlock)
	follower.rm.fetchers.Set(nil)
	if _, _, err := lrep.appendAsLeader(record.Build(nil, record.BuildOptions{ProducerID: -1, BaseSequence: -1}, []record.Record{{Value: []byte("v")}})); err != nil {
		t.Fatal(err)
	}
	// Once the record counts for the leader's end (flushed), the lag check proposes the shrink.
	waitFor(t, 10*time.Second, "an ISR shrink proposed", func() (bool, string) {
		lrep.mu.Lock()
		defer lrep.mu.Unlock()
		if c := lrep.state.Tick(time.Now().Add(time.Hour)); c != nil {
			lrep.proposeLocked(c)
			return true, ""
		}
		return false, fmt.Sprintf("pending %v isr %v", lrep.state.Pending(), lrep.state.ISR())
	})
	select {
	case <-called:
	case <-ctx.Done():
		t.Fatal("the ISR change was not sent")
	}
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	start := time.Now()
	if err := leader.Shutdown(sctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("shutdown: %v", err)
	}
	if n, m := calls.Load(), returned.Load(); n != m {
		t.Errorf("after Shutdown (%v): %d sends of the ISR change, %d returned; want every send ended", time.Since(start), n, m)
	}
}
