package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
)

func TestClassifyAlterPartitionError(t *testing.T) {
	for _, c := range []struct {
		err  error
		want alterPartitionOutcome
	}{
		{fmt.Errorf("t-0: replica 3 is fenced: %w", kerr.IneligibleReplica), alterAbort},
		{kerr.OperationNotAttempted, alterAbort},
		{fmt.Errorf("broker 2 is registered by another principal than User:x: %w", kerr.ClusterAuthorizationFailed), alterRefused},
		{kerr.PolicyViolation, alterRefused},
		{fmt.Errorf("t-0: partition epoch 6, current 7: %w", kerr.InvalidUpdateVersion), alterAwait},
		{kerr.FencedLeaderEpoch, alterAwait},
		{kerr.NotLeaderForPartition, alterAwait},
		{kerr.UnknownTopicOrPartition, alterAwait},
		{kerr.InvalidRequest, alterAwait},
		{fmt.Errorf("metadata command not applied in time: %w", kerr.RequestTimedOut), alterRetry},
		{fmt.Errorf("controller closed: %w", kerr.BrokerNotAvailable), alterRetry},
		{kerr.NotController, alterRetry},
		{errors.New("controller rpc to 127.0.0.1:1: connection refused"), alterRetry},
	} {
		if got := classifyAlterPartitionError(c.err); got != c.want {
			t.Errorf("%v: outcome %d, want %d", c.err, got, c.want)
		}
	}
}

// TestAlterPartitionRetryBackoff: the pause before a change whose outcome is unknown is sent
// again starts between half and all of alterPartitionRetryBackoffInitial, doubles per attempt and
// stays within alterPartitionRetryBackoffMax, with jitter (never the same pause every time).
func TestAlterPartitionRetryBackoff(t *testing.T) {
	for attempt := 1; attempt <= 100; attempt++ {
		want := alterPartitionRetryBackoffMax
		if attempt < 16 {
			want = min(alterPartitionRetryBackoffInitial<<(attempt-1), want)
		}
		seen := map[time.Duration]bool{}
		for range 20 {
			d := alterPartitionRetryBackoff(attempt)
			if d < want/2 || d > want {
				t.Fatalf("attempt %d: pause %v, want within [%v, %v]", attempt, d, want/2, want)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("attempt %d: the same pause 20 times: no jitter", attempt)
		}
	}
	if alterPartitionRetryBackoffInitial < 100*time.Millisecond || alterPartitionRetryBackoffInitial > 500*time.Millisecond || alterPartitionRetryBackoffMax > 5*time.Second {
		t.Errorf("backoff from %v to %v", alterPartitionRetryBackoffInitial, alterPartitionRetryBackoffMax)
	}
}

// TestWarnLimiter: the first warning passes, then at most one per interval, which reports how
// many were held back.
func TestWarnLimiter(t *testing.T) {
	var l warnLimiter
	t0 := time.Unix(1_700_000_000, 0)
	if ok, held := l.allow(t0, 30*time.Second); !ok || held != 0 {
		t.Fatalf("first warning: %v %d", ok, held)
	}
	for i := 1; i <= 5; i++ {
		if ok, _ := l.allow(t0.Add(time.Duration(i)*5*time.Second), 30*time.Second); ok {
			t.Fatalf("warning %d, %v after the first, let through", i, time.Duration(i)*5*time.Second)
		}
	}
	if ok, held := l.allow(t0.Add(30*time.Second), 30*time.Second); !ok || held != 5 {
		t.Fatalf("30 s after the first: %v, %d held back; want through, 5", ok, held)
	}
	if ok, _ := l.allow(t0.Add(31*time.Second), 30*time.Second); ok {
		t.Fatal("a second warning 1 s later let through")
	}
}

// TestISRExpansionAnswerLost: an ISR expansion commits at the controller but its answer is lost
// (the send times out) while the leader's metadata lags (its image watcher is held), and the
// rejoined replica then stops fetching. The leader must keep the expansion pending and resend
// it (the resend finds the partition epoch moved: INVALID_UPDATE_VERSION), so the high
// watermark stays within the replica's end: an acks=all write past it is not acknowledged while
// the controller's ISR holds the replica. Once the leader's image catches up, the replica is
// committed to the ISR, leaves it after replica.lag.time.max.ms (committed by the controller)
// and the write is acknowledged.
//
// The leader once dropped the expansion on any error and acknowledged records the replica, in
// the controller's ISR and electable, did not have.
func TestISRExpansionAnswerLost(t *testing.T) {
	brokers := startInprocCluster(t, 3, map[string]string{
		"auto.leader.rebalance.enable": "false",
		"replica.lag.time.max.ms":      "3000",
	})
	byID := map[int32]*Broker{}
	for _, b := range brokers {
		byID[b.nodeID] = b
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var ctrl int32 = -1
	waitFor(t, 30*time.Second, "an active controller", func() (bool, string) {
		ctrl = brokers[0].ctl.ActiveID()
		return ctrl >= 0, ""
	})
	// The joining replica n is not the active controller (its fetchers are stopped below);
	// the partition starts on the other two, led by l.
	var n, l, f int32 = -1, -1, -1
	for _, b := range brokers {
		switch {
		case n < 0 && b.nodeID != ctrl:
			n = b.nodeID
		case l < 0:
			l = b.nodeID
		default:
			f = b.nodeID
		}
	}
	const topic = "isr-answer-lost"
	if _, err := brokers[0].ctl.CreateTopic(ctx, controller.CreateTopicRequest{Name: topic, Partitions: 1, ReplicationFactor: 2, Assignment: [][]int32{{l, f}}}); err != nil {
		t.Fatal(err)
	}
	tp := engine.TopicPartition{Topic: topic, Partition: 0}
	leader := byID[l]
	var lrep *replica
	waitFor(t, 30*time.Second, "broker "+fmt.Sprint(l)+" leading with an ISR of 2", func() (bool, string) {
		lrep = leader.rm.get(tp)
		if lrep == nil {
			return false, "no replica"
		}
		_, leading := lrep.leaderEpoch()
		return leading && lrep.isrSize() == 2, fmt.Sprintf("leading %v isr %d", leading, lrep.isrSize())
	})
	produce := func(v string) (upTo int64, epoch int32) {
		t.Helper()
		info, epoch, err := lrep.appendAsLeader(record.Build(nil, record.BuildOptions{ProducerID: -1, BaseSequence: -1}, []record.Record{{Value: []byte(v)}}))
		if err != nil {
			t.Fatal(err)
		}
		return info.LastOffset + 1, epoch
	}
	waitAcked := func(upTo int64, epoch int32, within time.Duration) error {
		dl := time.NewTimer(within)
		defer dl.Stop()
		return lrep.waitCommitted(upTo, epoch, 1, dl.C, nil)
	}
	for i := range 5 {
		upTo, epoch := produce(fmt.Sprint("before-", i))
		if err := waitAcked(upTo, epoch, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// The expansion adding n commits; its answer is lost, and the leader's image watcher is
	// held from then on (its metadata lags the controller's).
	var releaseLeaderImage, releaseJoinerImage sync.Once
	var leaderImageHeld atomic.Bool
	t.Cleanup(func() {
		releaseLeaderImage.Do(func() {
			if leaderImageHeld.Load() {
				leader.rm.reconcileMu.Unlock()
			}
		})
	})
	committed := make(chan controller.PartitionInfo, 1)
	resent := make(chan error, 1)
	var sends sync.Mutex // guards calls
	calls := 0
	hook := alterPartitionFunc(func(ctx context.Context, req controller.AlterPartitionRequest) (controller.PartitionInfo, error) {
		if req.Topic != topic || !slices.Contains(req.ISR, n) {
			return leader.ctl.AlterPartition(ctx, req)
		}
		sends.Lock()
		calls++
		call := calls
		sends.Unlock()
		switch call {
		case 1:
			leader.rm.reconcileMu.Lock()
			leaderImageHeld.Store(true)
			pi, err := leader.ctl.AlterPartition(ctx, req)
			if err != nil {
				t.Errorf("the expansion was not committed: %v", err)
			}
			committed <- pi
			return controller.PartitionInfo{}, fmt.Errorf("answer lost: %w", kerr.RequestTimedOut)
		default:
			pi, err := leader.ctl.AlterPartition(ctx, req)
			if call == 2 {
				resent <- err
			}
			return pi, err
		}
	})
	leader.rm.alterPartitionHook.Store(&hook)
	if err := brokers[0].ctl.AlterPartitionReassignment(ctx, controller.ReassignRequest{Topic: topic, Partition: 0, Target: []int32{l, f, n}}); err != nil {
		t.Fatal(err)
	}
	var pi controller.PartitionInfo
	select {
	case pi = <-committed:
	case <-ctx.Done():
		t.Fatal("no ISR expansion adding the new replica was sent")
	}
	if !slices.Contains(pi.ISR, n) {
		t.Fatalf("committed ISR %v lacks broker %d", pi.ISR, n)
	}

	// The rejoined replica stops fetching (its image watcher held so nothing restarts it).
	joiner := byID[n]
	joiner.rm.reconcileMu.Lock()
	t.Cleanup(func() { releaseJoinerImage.Do(joiner.rm.reconcileMu.Unlock) })
	joiner.rm.fetchers.Set(nil)
	nEnd := joiner.rm.get(tp).log.LogEndOffset()

	select {
	case err := <-resent:
		if !errors.Is(err, kerr.InvalidUpdateVersion) {
			t.Errorf("the resent expansion was answered %v, want INVALID_UPDATE_VERSION", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the expansion whose answer was lost was not sent again")
	}
	lrep.mu.Lock()
	pending, maximal := lrep.state.Pending(), lrep.state.MaximalISR()
	lrep.mu.Unlock()
	if !pending || !slices.Contains(maximal, n) {
		t.Errorf("after the lost answer: pending %v, maximal ISR %v; want the expansion adding %d pending", pending, maximal, n)
	}
	ctlISR := leader.ctl.Image().Topics[topic].Partitions[0].ISR
	upTo, epoch := produce("after-lost-answer")
	if err := waitAcked(upTo, epoch, 3*time.Second); err == nil {
		t.Errorf("acks=all acknowledged offset %d, which broker %d (in the controller's ISR %v) does not have: its log ends at %d", upTo-1, n, ctlISR, nEnd)
	} else if !errors.Is(err, kerr.RequestTimedOut) {
		t.Errorf("waiting for the write: %v", err)
	}
	if hw := lrep.log.HighWatermark(); hw > nEnd {
		t.Errorf("leader's high watermark %d is past the end %d of broker %d in the controller's ISR %v", hw, nEnd, n, ctlISR)
	}

	// The leader's image catches up: n is in its committed ISR; once n has lagged for
	// replica.lag.time.max.ms the leader removes it through the controller and the write is
	// acknowledged.
	releaseLeaderImage.Do(leader.rm.reconcileMu.Unlock)
	waitFor(t, 10*time.Second, "the leader's ISR with broker "+fmt.Sprint(n)+" committed", func() (bool, string) {
		lrep.mu.Lock()
		defer lrep.mu.Unlock()
		if lrep.state == nil {
			return false, "not leading"
		}
		isr := lrep.state.ISR()
		return slices.Contains(isr, n) && !lrep.state.Pending() || !slices.Contains(isr, n) && len(isr) == 2, fmt.Sprintf("isr %v pending %v", isr, lrep.state.Pending())
	})
	if err := waitAcked(upTo, epoch, 30*time.Second); err != nil {
		t.Fatalf("the write was not acknowledged once broker %d left the ISR: %v", n, err)
	}
	if isr := leader.ctl.Image().Topics[topic].Partitions[0].ISR; slices.Contains(isr, n) {
		t.Errorf("acknowledged with broker %d still in the controller's ISR %v", n, isr)
	}
}
