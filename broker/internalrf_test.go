package broker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestInternalTopicsWaitForReplicationFactor: on a cluster of 2 brokers with the default
// offsets.topic.replication.factor and transaction.state.log.replication.factor (3), neither
// __consumer_offsets nor __transaction_state is created with fewer replicas: FindCoordinator
// answers COORDINATOR_NOT_AVAILABLE (clients retry), as Kafka does until enough brokers are
// registered, and an OffsetCommit sent anyway is not accepted (TestClusterInternalTopicsWaitForBrokers
// shows the coordinator found once the third broker arrives). The answer is decided from the
// local metadata image, without asking the controller to create the topic (Kafka's
// AutoTopicCreationManager checks the alive brokers first too).
func TestInternalTopicsWaitForReplicationFactor(t *testing.T) {
	brokers := startInprocCluster(t, 2, nil)
	cl := validateTestClient(t, brokers[0])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	until := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatal(what)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	until("broker 2 never unfenced in broker 1's image", func() bool { return len(brokers[0].ctl.Image().UnfencedBrokers()) == 2 })
	find := func(keyType int8, key string) int16 {
		t.Helper()
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = keyType, []string{key}
		resp, err := req.RequestWith(ctx, cl.Broker(1))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Coordinators[0].ErrorCode
	}
	for range 3 {
		if code := find(0, "g"); code != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("group coordinator with 2 of 3 brokers: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
		}
		if code := find(1, "txn"); code != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("transaction coordinator with 2 of 3 brokers: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
		}
	}
	// The answer comes from the local image's count of unfenced brokers, without a CreateTopic
	// request to the controller: it does not wait for the creation locks (held here), under
	// which that request is made.
	b1 := brokers[0]
	for _, b := range brokers {
		if b.nodeID == 1 {
			b1 = b
		}
	}
	locks := []*sync.Mutex{&b1.groups.createMu, &b1.txns.createMu, &b1.shareCoord.createMu}
	for _, mu := range locks {
		mu.Lock()
	}
	var unlockOnce sync.Once
	unlock := func() {
		unlockOnce.Do(func() {
			for _, mu := range locks {
				mu.Unlock()
			}
		})
	}
	defer unlock()
	for _, c := range []struct {
		keyType int8
		key     string
	}{{0, "g"}, {1, "txn"}, {2, "g:AAAAAAAAAAAAAAAAAAAAAA:0"}} {
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = c.keyType, []string{c.key}
		resp, err := req.RequestWith(qctx, cl.Broker(1))
		qcancel()
		if err != nil {
			t.Fatalf("coordinator type %d with 2 of 3 brokers and the creation lock held: %v (it asked the controller)", c.keyType, err)
		}
		if code := resp.Coordinators[0].ErrorCode; code != kerr.CoordinatorNotAvailable.Code {
			t.Fatalf("coordinator type %d with 2 of 3 brokers: %v, want COORDINATOR_NOT_AVAILABLE", c.keyType, kerr.ErrorForCode(code))
		}
	}
	unlock()

	if r, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 2, nil, "data"); err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	until("broker 1 never learnt of the topic", func() bool { _, ok := brokers[0].topics.get("data"); return ok })
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "g", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "data"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset = 5
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if code := cresp.Topics[0].Partitions[0].ErrorCode; code != kerr.CoordinatorNotAvailable.Code && code != kerr.NotCoordinator.Code {
		t.Fatalf("OffsetCommit with 2 of 3 brokers: %v, want COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR", kerr.ErrorForCode(code))
	}
	for _, b := range brokers {
		for _, name := range []string{offsetsTopic, txnStateTopic} {
			if it, ok := b.ctl.Image().Topics[name]; ok {
				t.Fatalf("%s created with %d replicas on a cluster of 2 brokers (replication factor 3)", name, len(it.Partitions[0].Replicas))
			}
		}
	}
}
