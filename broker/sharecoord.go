package broker

// Wiring of the share coordinator (package sharecoord, KIP-932): its configuration from the
// broker's keys, its store (__share_group_state over the broker's partition logs), and the
// persister the share-partition leaders and the group coordinator use (sharestate.Persister):
// local calls for the keys whose __share_group_state partition this broker leads, else the
// inter-broker RPCs InitializeShareGroupState (83), ReadShareGroupState (84),
// WriteShareGroupState (85), DeleteShareGroupState (86) and ReadShareGroupStateSummary (87) to
// that partition's leader over the inter-broker listener with its security (one connection per
// peer for these RPCs, one request at a time on it: sendPeer).
//
// __share_group_state is created on first use (FindCoordinator for a share key, or the first
// persister call) with share.coordinator.state.topic.num.partitions partitions,
// cleanup.policy=compact, no time retention, share.coordinator.state.topic.segment.bytes and
// min.insync.replicas = share.coordinator.state.topic.min.isr (capped at the replication
// factor). Its replication factor is share.coordinator.state.topic.replication.factor (3),
// capped at the unfenced brokers registered when it is created, with a warning (internalrf.go).
//
// The coordinator leads the partitions of __share_group_state this broker leads: the replica
// manager's reconcile calls shareStateImageChanged after applying the leadership of an image,
// next to the group and transaction coordinators.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/sharecoord"
	"github.com/weir-mq/weir/sharestate"
)

// shareStateTopic is Kafka's internal topic of share-partition state.
const shareStateTopic = sharecoord.StateTopic

// peerShareState is the connection to a peer for the share-state RPCs (values 0 and 1 are
// txnstate.go's).
const peerShareState peerPurpose = 8

// shareCoordState is the broker's share coordinator (embedded in Broker as shareCoord).
type shareCoordState struct {
	coord *sharecoord.Coordinator
	// createMu serializes the creation of __share_group_state; ready is set once it exists.
	createMu sync.Mutex
	ready    atomic.Bool
	// ctx ends when the broker shuts down: persister calls in their retry loop stop.
	ctx    context.Context
	cancel context.CancelFunc
}

// openShareCoord creates the share coordinator.
func (b *Broker) openShareCoord() error {
	upd := keyShareSnapshotUpdateRecords.Get(b.cfg)
	if upd == 0 {
		upd = -1 // sharecoord reads 0 as "default", negative as 0
	}
	c, err := sharecoord.New(sharecoord.Config{
		Store:              &shareStore{b: b},
		Now:                clock.Now, // CreateTimestamp, WriteTimestamp, batch timestamps
		Logger:             slog.Default().With("component", "sharecoord"),
		UpdatesPerSnapshot: upd,
		PartitionExists: func(id [16]byte, p int32) bool {
			t, ok := b.topics.getByID(id)
			return ok && p >= 0 && p < t.Partitions
		},
	})
	if err != nil {
		return err
	}
	b.shareCoord.coord = c
	b.shareCoord.ctx, b.shareCoord.cancel = context.WithCancel(context.Background())
	return nil
}

func (b *Broker) closeShareCoord() {
	if b.shareCoord.cancel != nil {
		b.shareCoord.cancel()
	}
	if b.shareCoord.coord != nil {
		b.shareCoord.coord.Close()
	}
}

// ShareCoordinator exposes the share coordinator (tests, tools).
func (b *Broker) ShareCoordinator() *sharecoord.Coordinator { return b.shareCoord.coord }

// shareStateImageChanged gives the share coordinator the __share_group_state partitions this
// broker leads (at their leader epoch) and takes away the others.
func (b *Broker) shareStateImageChanged(img *controller.Image) {
	c := b.shareCoord.coord
	if c == nil {
		return
	}
	t, ok := img.Topics[shareStateTopic]
	for p := int32(0); p < c.Partitions(); p++ {
		if ok && p < int32(len(t.Partitions)) && t.Partitions[p].Leader == b.nodeID {
			if _, hosted := b.logs.Log(engine.TopicPartition{Topic: shareStateTopic, Partition: p}); hosted {
				c.Elect(p, t.Partitions[p].LeaderEpoch)
				continue
			}
		}
		c.Resign(p)
	}
}

// ensureShareStateTopic returns __share_group_state, creating it on first use.
func (b *Broker) ensureShareStateTopic() (Topic, error) {
	if b.shareCoord.ready.Load() {
		if t, ok := b.topics.get(shareStateTopic); ok {
			return t, nil
		}
		b.shareCoord.ready.Store(false)
	}
	rf := b.internalTopicRF(shareStateTopic, "share.coordinator.state.topic.replication.factor", keyShareStateReplicationFactor.Get(b.cfg)) // internalrf.go
	if err := b.internalTopicAwaitsBrokers(shareStateTopic, "share.coordinator.state.topic.replication.factor", rf); err != nil {
		return Topic{}, err
	}
	b.shareCoord.createMu.Lock()
	defer b.shareCoord.createMu.Unlock()
	if t, ok := b.topics.get(shareStateTopic); ok {
		b.rm.reconcile()
		b.shareCoord.ready.Store(true)
		return t, nil
	}
	minISR := min(keyShareStateMinISR.Get(b.cfg), rf)
	t, err := b.createTopic(shareStateTopic, int32(keyShareStateNumPartitions.Get(b.cfg)), int16(rf), nil, map[string]string{
		"cleanup.policy":      "compact",
		"retention.ms":        "-1",
		"segment.bytes":       strconv.Itoa(keyShareStateSegmentBytes.Get(b.cfg)),
		"min.insync.replicas": strconv.Itoa(minISR),
	}, nil)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		if t, ok := b.topics.get(shareStateTopic); ok {
			return t, nil
		}
	}
	if err != nil {
		return t, b.internalTopicUnavailable(shareStateTopic, "share.coordinator.state.topic.replication.factor", rf, err)
	}
	b.shareCoord.ready.Store(true)
	return t, nil
}

// shareStore is sharecoord.Store over the broker's logs.
type shareStore struct{ b *Broker }

func (s *shareStore) Partitions() int32 {
	if t, ok := s.b.topics.get(shareStateTopic); ok {
		return t.Partitions
	}
	return int32(keyShareStateNumPartitions.Get(s.b.cfg))
}

func (s *shareStore) Log(p int32) (sharecoord.Log, error) {
	t, ok := s.b.topics.get(shareStateTopic)
	if !ok || p < 0 || p >= t.Partitions {
		return nil, fmt.Errorf("%s-%d does not exist: %w", shareStateTopic, p, kerr.UnknownTopicOrPartition)
	}
	l, ok := s.b.logs.Log(engine.TopicPartition{Topic: shareStateTopic, Partition: p})
	if !ok {
		return nil, fmt.Errorf("%s-%d has no log: %w", shareStateTopic, p, kerr.UnknownTopicOrPartition)
	}
	// Kafka's coordinator runtime appends with acks=-1: min.insync.replicas applies.
	return offsetsLog{l: l, b: s.b, minISR: keyMinInsyncReplicas.Topic(s.b.cfg, t.Configs)}, nil
}

// shareStateLeader returns the broker leading k's __share_group_state partition (creating the
// topic on first use), or a retriable error.
func (b *Broker) shareStateLeader(k sharestate.Key) (int32, error) {
	t, err := b.ensureShareStateTopic()
	if err != nil {
		return -1, fmt.Errorf("%s: %v: %w", shareStateTopic, err, kerr.CoordinatorNotAvailable)
	}
	p := sharecoord.PartitionFor(k, t.Partitions)
	if p >= int32(len(t.Assign)) || t.Assign[p].Leader < 0 {
		return -1, fmt.Errorf("%s-%d has no leader: %w", shareStateTopic, p, kerr.CoordinatorNotAvailable)
	}
	return t.Assign[p].Leader, nil
}

// sharePersister is sharestate.Persister over the share coordinators of the cluster.
type sharePersister struct{ b *Broker }

// Persister retry timing: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE and network errors are retried with a backoff doubling from
// shareRetryBackoff to shareRetryBackoffMax until the caller's context ends (or
// shareRetryTimeout when it has no deadline), as Kafka's PersisterStateManager does.
const (
	shareRetryBackoff    = 50 * time.Millisecond
	shareRetryBackoffMax = 2 * time.Second
	shareRetryTimeout    = 60 * time.Second
)

// retriable reports whether a persister call that failed with err is tried again.
func shareRetriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.NotCoordinator, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable,
			kerr.NetworkException, kerr.RequestTimedOut:
			return true
		}
		return false
	}
	return !errors.Is(err, sharestate.ErrNotInitialized) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// call runs one operation on k at its coordinator: local when this broker leads k's partition,
// else remote(leader, addr), retrying the retriable failures.
func (p *sharePersister) call(ctx context.Context, k sharestate.Key, local func() error, remote func(ctx context.Context, leader int32, addr string) error) error {
	b := p.b
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, shareRetryTimeout)
		defer cancel()
	}
	backoff := shareRetryBackoff
	for {
		var err error
		leader, lerr := b.shareStateLeader(k)
		switch {
		case lerr != nil:
			err = lerr
		case leader == b.nodeID:
			err = local()
		default:
			e, ok := b.brokerAddr(b.ctl.Image(), leader, b.interBrokerName)
			if !ok {
				err = fmt.Errorf("broker %d has no address: %w", leader, kerr.CoordinatorNotAvailable)
				break
			}
			err = remote(ctx, leader, fmt.Sprintf("%s:%d", e.Host, e.Port))
		}
		if err == nil || !shareRetriable(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("share state of %s: %v (gave up: %v)", sharecoord.CoordinatorKey(k), err, ctx.Err())
		case <-b.shareCoord.ctx.Done():
			t.Stop()
			return fmt.Errorf("share state of %s: broker shutting down: %w", sharecoord.CoordinatorKey(k), kerr.NotCoordinator)
		case <-t.C:
		}
		backoff = min(2*backoff, shareRetryBackoffMax)
	}
}

// send sends a share-state RPC to a peer broker; a transport failure is NETWORK_EXCEPTION.
func (p *sharePersister) send(ctx context.Context, leader int32, addr string, req kmsg.Request) (kmsg.Response, error) {
	resp, err := p.b.sendPeer(ctx, peerKey{leader, peerShareState}, addr, req)
	if err != nil {
		return nil, fmt.Errorf("share state RPC to broker %d: %v: %w", leader, err, kerr.NetworkException)
	}
	return resp, nil
}

// partError is the error of one partition's answer (nil for code 0). INVALID_REQUEST on a read
// or write is the coordinator's answer for a share partition never initialized.
func partError(code int16, msg *string, uninit bool) error {
	if code == 0 {
		return nil
	}
	ke := kerrFor(code)
	m := ""
	if msg != nil {
		m = *msg
	}
	if uninit && ke == kerr.InvalidRequest {
		return fmt.Errorf("%s: %w: %w", m, sharestate.ErrNotInitialized, ke)
	}
	if m != "" {
		return fmt.Errorf("%s: %w", m, ke)
	}
	return ke
}

func (p *sharePersister) Initialize(ctx context.Context, k sharestate.Key, stateEpoch int32, startOffset int64) error {
	c := p.b.shareCoord.coord
	return p.call(ctx, k, func() error { return c.Initialize(ctx, k, stateEpoch, startOffset) },
		func(ctx context.Context, leader int32, addr string) error {
			req := kmsg.NewPtrInitializeShareGroupStateRequest()
			req.GroupID = k.Group
			rt := kmsg.NewInitializeShareGroupStateRequestTopic()
			rt.TopicID = k.TopicID
			rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
			rp.Partition, rp.StateEpoch, rp.StartOffset = k.Partition, stateEpoch, startOffset
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			r, err := p.send(ctx, leader, addr, req)
			if err != nil {
				return err
			}
			for _, t := range r.(*kmsg.InitializeShareGroupStateResponse).Topics {
				for _, sp := range t.Partitions {
					if t.TopicID == k.TopicID && sp.Partition == k.Partition {
						return partError(sp.ErrorCode, sp.ErrorMessage, false)
					}
				}
			}
			return fmt.Errorf("InitializeShareGroupState answer without the partition: %w", kerr.UnknownServerError)
		})
}

func (p *sharePersister) Read(ctx context.Context, k sharestate.Key, leaderEpoch int32) (sharestate.State, error) {
	c := p.b.shareCoord.coord
	var st sharestate.State
	err := p.call(ctx, k, func() error {
		var err error
		st, err = c.Read(ctx, k, leaderEpoch)
		return err
	}, func(ctx context.Context, leader int32, addr string) error {
		req := kmsg.NewPtrReadShareGroupStateRequest()
		req.GroupID = k.Group
		rt := kmsg.NewReadShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = k.Partition, leaderEpoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := p.send(ctx, leader, addr, req)
		if err != nil {
			return err
		}
		for _, t := range r.(*kmsg.ReadShareGroupStateResponse).Topics {
			for _, sp := range t.Partitions {
				if t.TopicID != k.TopicID || sp.Partition != k.Partition {
					continue
				}
				if err := partError(sp.ErrorCode, sp.ErrorMessage, true); err != nil {
					return err
				}
				// The answer carries no leader epoch or delivery-complete count: the leader
				// epoch is the one this read recorded.
				st = sharestate.State{StateEpoch: sp.StateEpoch, LeaderEpoch: leaderEpoch, StartOffset: sp.StartOffset, DeliveryCompleteCount: -1}
				for _, b := range sp.StateBatches {
					st.Batches = append(st.Batches, sharestate.Batch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
						DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
				}
				return nil
			}
		}
		return fmt.Errorf("ReadShareGroupState answer without the partition: %w", kerr.UnknownServerError)
	})
	return st, err
}

func (p *sharePersister) Write(ctx context.Context, k sharestate.Key, st sharestate.State) error {
	c := p.b.shareCoord.coord
	return p.call(ctx, k, func() error { return c.Write(ctx, k, st) },
		func(ctx context.Context, leader int32, addr string) error {
			req := kmsg.NewPtrWriteShareGroupStateRequest()
			req.Version = 1
			req.GroupID = k.Group
			rt := kmsg.NewWriteShareGroupStateRequestTopic()
			rt.TopicID = k.TopicID
			rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
			rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = k.Partition, st.StateEpoch, st.LeaderEpoch, st.StartOffset
			rp.DeliveryCompleteCount = st.DeliveryCompleteCount
			for _, b := range st.Batches {
				rb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
				rb.FirstOffset, rb.LastOffset, rb.DeliveryState, rb.DeliveryCount = b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount
				rp.StateBatches = append(rp.StateBatches, rb)
			}
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			r, err := p.send(ctx, leader, addr, req)
			if err != nil {
				return err
			}
			for _, t := range r.(*kmsg.WriteShareGroupStateResponse).Topics {
				for _, sp := range t.Partitions {
					if t.TopicID == k.TopicID && sp.Partition == k.Partition {
						return partError(sp.ErrorCode, sp.ErrorMessage, true)
					}
				}
			}
			return fmt.Errorf("WriteShareGroupState answer without the partition: %w", kerr.UnknownServerError)
		})
}

func (p *sharePersister) Delete(ctx context.Context, k sharestate.Key) error {
	c := p.b.shareCoord.coord
	return p.call(ctx, k, func() error { return c.Delete(ctx, k) },
		func(ctx context.Context, leader int32, addr string) error {
			req := kmsg.NewPtrDeleteShareGroupStateRequest()
			req.GroupID = k.Group
			rt := kmsg.NewDeleteShareGroupStateRequestTopic()
			rt.TopicID = k.TopicID
			rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
			rp.Partition = k.Partition
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			r, err := p.send(ctx, leader, addr, req)
			if err != nil {
				return err
			}
			for _, t := range r.(*kmsg.DeleteShareGroupStateResponse).Topics {
				for _, sp := range t.Partitions {
					if t.TopicID == k.TopicID && sp.Partition == k.Partition {
						return partError(sp.ErrorCode, sp.ErrorMessage, false)
					}
				}
			}
			return fmt.Errorf("DeleteShareGroupState answer without the partition: %w", kerr.UnknownServerError)
		})
}

func (p *sharePersister) ReadSummary(ctx context.Context, k sharestate.Key, leaderEpoch int32) (sharestate.Summary, error) {
	c := p.b.shareCoord.coord
	var sum sharestate.Summary
	err := p.call(ctx, k, func() error {
		var err error
		sum, err = c.ReadSummary(ctx, k, leaderEpoch)
		return err
	}, func(ctx context.Context, leader int32, addr string) error {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.Version = 1
		req.GroupID = k.Group
		rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = k.Partition, leaderEpoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		r, err := p.send(ctx, leader, addr, req)
		if err != nil {
			return err
		}
		for _, t := range r.(*kmsg.ReadShareGroupStateSummaryResponse).Topics {
			for _, sp := range t.Partitions {
				if t.TopicID != k.TopicID || sp.Partition != k.Partition {
					continue
				}
				if err := partError(sp.ErrorCode, sp.ErrorMessage, false); err != nil {
					return err
				}
				if summaryUninitialized(sp.StateEpoch, sp.LeaderEpoch, sp.StartOffset) {
					return sharestate.ErrNotInitialized
				}
				sum = sharestate.Summary{StateEpoch: sp.StateEpoch, LeaderEpoch: sp.LeaderEpoch, StartOffset: sp.StartOffset,
					DeliveryCompleteCount: sp.DeliveryCompleteCount}
				return nil
			}
		}
		return fmt.Errorf("ReadShareGroupStateSummary answer without the partition: %w", kerr.UnknownServerError)
	})
	return sum, err
}

// maxShareStateRequestPartitions bounds the partitions one share-state RPC may name; those past
// it answer INVALID_REQUEST. Kafka's persister sends one group's partitions per request.
const maxShareStateRequestPartitions = 10000

// shareStatePart is the answer of one partition of a share-state RPC.
func shareStateErr(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	code := errorCode(err)
	if errors.Is(err, sharestate.ErrNotInitialized) {
		code = kerr.InvalidRequest.Code
	}
	msg := err.Error()
	return code, &msg
}

// shareStateRequestCheck returns the error every partition of a share-state RPC answers before
// any is looked at (CLUSTER_AUTHORIZATION_FAILED without CLUSTER_ACTION: these are inter-broker
// APIs), or nil.
func (b *Broker) shareStateRequestCheck(authErr error) error {
	if authErr != nil {
		return authErr
	}
	if b.shareCoord.coord == nil {
		return kerr.CoordinatorNotAvailable
	}
	return nil
}

// shareStateCtx bounds one partition's operation inside a share-state RPC.
func (b *Broker) shareStateCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.shareCoord.ctx, markerRequestTimeout)
}

// summaryUninitialized reports whether a ReadShareGroupStateSummary answer with no error is
// the one for a share partition with no state (start offset -1 at state epoch 0, leader epoch
// -1: what this coordinator answers, as Kafka's PartitionFactory defaults).
func summaryUninitialized(stateEpoch, leaderEpoch int32, startOffset int64) bool {
	return stateEpoch == 0 && leaderEpoch == -1 && startOffset == -1
}

// authErrOrNil turns a nil *kerr.Error into a nil error.
func authErrOrNil(e *kerr.Error) error {
	if e == nil {
		return nil
	}
	return e
}

// SharePersister returns a persister over the cluster's share coordinators, as the
// share-partition leaders use (tests, tools).
func (b *Broker) SharePersister() sharestate.Persister { return b.newSharePersister() }
