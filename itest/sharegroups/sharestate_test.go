package sharegroups

// Share coordinator tests (__share_group_state): the inter-broker RPCs 83-87 driven with kmsg
// against real brokers, the persister across a 3-broker cluster while a state partition's
// leader moves, and durability across a SIGKILL of child-process brokers.

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
	"github.com/weir-mq/weir/sharecoord"
	"github.com/weir-mq/weir/sharestate"
)

// scClient is a kgo client of the brokers at addrs.
func scClient(t *testing.T, addrs ...string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RequestRetries(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// scCreateTopic creates topic with partitions and rf replicas and returns its id.
func scCreateTopic(t *testing.T, cl *kgo.Client, topic string, partitions int32, rf int16) [16]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if d, ok := md.Topics[topic]; ok && d.Err == nil && len(d.Partitions) == int(partitions) {
				return [16]byte(d.ID)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s not in metadata: %v", topic, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// scCoordinator asks for k's share coordinator (FindCoordinator v6, key type 2) until one
// answers, and returns its node id.
func scCoordinator(t *testing.T, cl *kgo.Client, k sharestate.Key) int32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 2
		req.CoordinatorKeys = []string{sharecoord.CoordinatorKey(k)}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err == nil && len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0 {
			return resp.Coordinators[0].NodeID
		}
		if time.Now().After(deadline) {
			t.Fatalf("no share coordinator for %s: %v %+v", sharecoord.CoordinatorKey(k), err, resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scSend sends req to broker node, retrying the coordinator-moving errors the answer's first
// partition carries (errCode reads it) for a bounded time.
func scSend[R kmsg.Response](t *testing.T, cl *kgo.Client, k sharestate.Key, req kmsg.Request, errCode func(R) int16) R {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		node := scCoordinator(t, cl, k)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := cl.Broker(int(node)).Request(ctx, req)
		cancel()
		if err == nil {
			r := resp.(R)
			switch errCode(r) {
			case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code:
			default:
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s to %d: %v", kmsg.NameForKey(req.Key()), node, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func scInitialize(t *testing.T, cl *kgo.Client, k sharestate.Key, stateEpoch int32, start int64) int16 {
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewInitializeShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.StartOffset = k.Partition, stateEpoch, start
	rt.Partitions = []kmsg.InitializeShareGroupStateRequestTopicPartition{rp}
	req.Topics = []kmsg.InitializeShareGroupStateRequestTopic{rt}
	return scSend(t, cl, k, req, func(r *kmsg.InitializeShareGroupStateResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode }).
		Topics[0].Partitions[0].ErrorCode
}

func scWrite(t *testing.T, cl *kgo.Client, k sharestate.Key, st sharestate.State) int16 {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.Version = 1
	req.GroupID = k.Group
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.DeliveryCompleteCount = k.Partition, st.StateEpoch, st.LeaderEpoch, st.StartOffset, st.DeliveryCompleteCount
	for _, b := range st.Batches {
		rb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		rb.FirstOffset, rb.LastOffset, rb.DeliveryState, rb.DeliveryCount = b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount
		rp.StateBatches = append(rp.StateBatches, rb)
	}
	rt.Partitions = []kmsg.WriteShareGroupStateRequestTopicPartition{rp}
	req.Topics = []kmsg.WriteShareGroupStateRequestTopic{rt}
	return scSend(t, cl, k, req, func(r *kmsg.WriteShareGroupStateResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode }).
		Topics[0].Partitions[0].ErrorCode
}

func scRead(t *testing.T, cl *kgo.Client, k sharestate.Key, leaderEpoch int32) (sharestate.State, int16) {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, leaderEpoch
	rt.Partitions = []kmsg.ReadShareGroupStateRequestTopicPartition{rp}
	req.Topics = []kmsg.ReadShareGroupStateRequestTopic{rt}
	sp := scSend(t, cl, k, req, func(r *kmsg.ReadShareGroupStateResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode }).
		Topics[0].Partitions[0]
	st := sharestate.State{StateEpoch: sp.StateEpoch, StartOffset: sp.StartOffset}
	for _, b := range sp.StateBatches {
		st.Batches = append(st.Batches, sharestate.Batch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset, DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
	}
	return st, sp.ErrorCode
}

func scSummary(t *testing.T, cl *kgo.Client, k sharestate.Key) kmsg.ReadShareGroupStateSummaryResponseTopicPartition {
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.Version = 1
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = k.Partition, -1
	rt.Partitions = []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{rp}
	req.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{rt}
	return scSend(t, cl, k, req, func(r *kmsg.ReadShareGroupStateSummaryResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode }).
		Topics[0].Partitions[0]
}

func scDelete(t *testing.T, cl *kgo.Client, k sharestate.Key) int16 {
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewDeleteShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
	rp.Partition = k.Partition
	rt.Partitions = []kmsg.DeleteShareGroupStateRequestTopicPartition{rp}
	req.Topics = []kmsg.DeleteShareGroupStateRequestTopic{rt}
	return scSend(t, cl, k, req, func(r *kmsg.DeleteShareGroupStateResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode }).
		Topics[0].Partitions[0].ErrorCode
}

// scState is the state the tests write for share partition i.
func scState(i int) sharestate.State {
	base := int64(10 * i)
	return sharestate.State{StateEpoch: 1, LeaderEpoch: 2, StartOffset: base, DeliveryCompleteCount: 3, Batches: []sharestate.Batch{
		{FirstOffset: base, LastOffset: base + 2, DeliveryState: sharestate.Acknowledged, DeliveryCount: 1},
		{FirstOffset: base + 3, LastOffset: base + 4, DeliveryState: sharestate.Available, DeliveryCount: 2},
		{FirstOffset: base + 5, LastOffset: base + 5, DeliveryState: sharestate.Archived, DeliveryCount: 5},
	}}
}

// scCheckRead reads k over the RPC and compares it with want.
func scCheckRead(t *testing.T, cl *kgo.Client, k sharestate.Key, want sharestate.State) {
	t.Helper()
	got, code := scRead(t, cl, k, want.LeaderEpoch)
	if code != 0 {
		t.Fatalf("read %s: error %v", sharecoord.CoordinatorKey(k), kerr.ErrorForCode(code))
	}
	if got.StateEpoch != want.StateEpoch || got.StartOffset != want.StartOffset || !reflect.DeepEqual(got.Batches, want.Batches) {
		t.Fatalf("read %s = %+v, want %+v", sharecoord.CoordinatorKey(k), got, want)
	}
}

func TestShareStateRPCs(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{"log.dirs": dir}
	b, stop := inproc.StartStoppable(t, props)
	cl := scClient(t, b.Addr())
	id := scCreateTopic(t, cl, "sc-rpc", 2, 1)
	k := sharestate.Key{Group: "sc-group", TopicID: id, Partition: 0}
	other := sharestate.Key{Group: "sc-group", TopicID: id, Partition: 1}

	if _, code := scRead(t, cl, k, 0); code != kerr.InvalidRequest.Code {
		t.Fatalf("read before initialize: %v", kerr.ErrorForCode(code))
	}
	if sum := scSummary(t, cl, k); sum.ErrorCode != 0 || sum.StartOffset != -1 || sum.StateEpoch != 0 {
		t.Fatalf("summary before initialize: %+v", sum)
	}
	if code := scInitialize(t, cl, k, 1, 0); code != 0 {
		t.Fatalf("initialize: %v", kerr.ErrorForCode(code))
	}
	st := scState(0)
	if code := scWrite(t, cl, k, st); code != 0 {
		t.Fatalf("write: %v", kerr.ErrorForCode(code))
	}
	scCheckRead(t, cl, k, st)
	if sum := scSummary(t, cl, k); sum.ErrorCode != 0 || sum.StateEpoch != 1 || sum.LeaderEpoch != 2 || sum.DeliveryCompleteCount != 3 {
		t.Fatalf("summary: %+v", sum)
	}
	stale := st
	stale.LeaderEpoch = 1
	if code := scWrite(t, cl, k, stale); code != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("write at an older leader epoch: %v", kerr.ErrorForCode(code))
	}
	if code := scInitialize(t, cl, k, 0, 0); code != kerr.FencedStateEpoch.Code {
		t.Fatalf("initialize at an older state epoch: %v", kerr.ErrorForCode(code))
	}
	if code := scWrite(t, cl, other, st); code != kerr.InvalidRequest.Code {
		t.Fatalf("write before initialize: %v", kerr.ErrorForCode(code))
	}
	unknown := sharestate.Key{Group: "sc-group", TopicID: [16]byte{9}, Partition: 0}
	if code := scInitialize(t, cl, unknown, 1, 0); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("initialize of an unknown topic: %v", kerr.ErrorForCode(code))
	}

	// The state is on disk: a restarted broker loads it.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, _ = inproc.StartStoppable(t, props)
	cl = scClient(t, b.Addr())
	scCheckRead(t, cl, k, st)

	if code := scDelete(t, cl, k); code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	if _, code := scRead(t, cl, k, -1); code != kerr.InvalidRequest.Code {
		t.Fatalf("read after delete: %v", kerr.ErrorForCode(code))
	}
}

func TestShareStateCluster(t *testing.T) {
	bs := inproc.StartCluster(t, 3, nil)
	cl := scClient(t, bs[0].Addr(), bs[1].Addr(), bs[2].Addr())
	id := scCreateTopic(t, cl, "sc-cluster", 8, 3)
	keys := make([]sharestate.Key, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Through broker 1's persister: keys whose state partition another broker leads go over
	// the inter-broker RPCs.
	p1 := bs[0].SharePersister()
	for i := range keys {
		keys[i] = sharestate.Key{Group: "sc-cluster-group", TopicID: id, Partition: int32(i)}
		if err := p1.Initialize(ctx, keys[i], 1, int64(10*i)); err != nil {
			t.Fatalf("initialize %d: %v", i, err)
		}
		if err := p1.Write(ctx, keys[i], scState(i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	remote := 0
	for i := range keys {
		if node := scCoordinator(t, cl, keys[i]); node != 1 {
			remote++
		}
		st, err := bs[1].SharePersister().Read(ctx, keys[i], 2)
		if err != nil || st.StartOffset != int64(10*i) || !reflect.DeepEqual(st.Batches, scState(i).Batches) {
			t.Fatalf("read %d through broker 2: %+v %v", i, st, err)
		}
	}
	t.Logf("%d of %d keys coordinated by another broker than 1", remote, len(keys))
	if _, err := p1.Read(ctx, sharestate.Key{Group: "sc-none", TopicID: id, Partition: 0}, 0); !errors.Is(err, sharestate.ErrNotInitialized) {
		t.Fatalf("read of an uninitialized key: %v", err)
	}
	if err := p1.Write(ctx, keys[0], sharestate.State{StateEpoch: 1, LeaderEpoch: 1, StartOffset: -1}); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("write at an older leader epoch: %v", err)
	}

	// The leader of keys[0]'s state partition stops: another replica takes the partition over,
	// loads it, and answers with the same state.
	leader := scCoordinator(t, cl, keys[0])
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	if err := bs[leader-1].Shutdown(sctx); err != nil {
		t.Logf("shutdown of broker %d: %v", leader, err)
	}
	scancel()
	survivor := bs[leader%3]
	for i := range keys {
		st, err := survivor.SharePersister().Read(ctx, keys[i], 2)
		if err != nil || st.StartOffset != int64(10*i) || !reflect.DeepEqual(st.Batches, scState(i).Batches) {
			t.Fatalf("read %d after broker %d stopped: %+v %v", i, leader, st, err)
		}
	}
	if node := scCoordinator(t, scClient(t, survivor.Addr()), keys[0]); node == leader {
		t.Fatalf("coordinator still %d after it stopped", leader)
	}
}
