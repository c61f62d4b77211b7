package broker

// The share-state persister's batched calls (sharestate.Batcher): the keys of one operation
// are grouped by the broker coordinating them (the leader of their __share_group_state
// partition) and by group; this broker's keys are served locally one by one, every other
// (coordinator, group) gets one InitializeShareGroupState, DeleteShareGroupState or
// ReadShareGroupStateSummary request naming all its keys, at most
// maxShareStateRequestPartitions each. Keys whose answer is retriable (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, network errors) are grouped again
// and retried with call's backoff within the caller's deadline.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/sharecoord"
	"github.com/weir-mq/weir/sharestate"
)

// shareBatchDest is the keys (indexes into the call's keys) one request carries.
type shareBatchDest struct {
	leader int32
	group  string
}

// batch runs an operation on keys: local(i) for the keys this broker coordinates, remote(ctx,
// leader, addr, idx) for each other coordinator and group (idx: the keys' indexes; it returns
// one error per index), retrying the retriable failures. It returns one error per key.
func (p *sharePersister) batch(ctx context.Context, keys []sharestate.Key, local func(i int) error,
	remote func(ctx context.Context, leader int32, addr string, idx []int) []error) []error {
	b := p.b
	errs := make([]error, len(keys))
	if len(keys) == 0 {
		return errs
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, shareRetryTimeout)
		defer cancel()
	}
	pending := make([]int, len(keys))
	for i := range pending {
		pending[i] = i
	}
	backoff := shareRetryBackoff
	for {
		dests := map[shareBatchDest][]int{}
		var order []shareBatchDest
		for _, i := range pending {
			leader, err := b.shareStateLeader(keys[i])
			switch {
			case err != nil:
				errs[i] = err
			case leader == b.nodeID:
				errs[i] = local(i)
			default:
				d := shareBatchDest{leader: leader, group: keys[i].Group}
				if _, ok := dests[d]; !ok {
					order = append(order, d)
				}
				dests[d] = append(dests[d], i)
			}
		}
		for _, d := range order {
			idx := dests[d]
			e, ok := b.brokerAddr(b.ctl.Image(), d.leader, b.interBrokerName)
			if !ok {
				for _, i := range idx {
					errs[i] = fmt.Errorf("broker %d has no address: %w", d.leader, kerr.CoordinatorNotAvailable)
				}
				continue
			}
			addr := fmt.Sprintf("%s:%d", e.Host, e.Port)
			for len(idx) > 0 {
				n := min(len(idx), maxShareStateRequestPartitions)
				for j, err := range remote(ctx, d.leader, addr, idx[:n]) {
					errs[idx[j]] = err
				}
				idx = idx[n:]
			}
		}
		next := pending[:0]
		for _, i := range pending {
			if errs[i] != nil && shareRetriable(errs[i]) {
				next = append(next, i)
			}
		}
		if len(next) == 0 {
			return errs
		}
		pending = next
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			for _, i := range pending {
				errs[i] = fmt.Errorf("share state of %s: %v (gave up: %v)", sharecoord.CoordinatorKey(keys[i]), errs[i], ctx.Err())
			}
			return errs
		case <-b.shareCoord.ctx.Done():
			t.Stop()
			for _, i := range pending {
				errs[i] = fmt.Errorf("share state of %s: broker shutting down: %w", sharecoord.CoordinatorKey(keys[i]), kerr.NotCoordinator)
			}
			return errs
		case <-t.C:
		}
		backoff = min(2*backoff, shareRetryBackoffMax)
	}
}

// shareTopicIndex groups idx's keys by topic id in first-seen order: the topics' ids and, per
// topic, the indexes of its keys.
func shareTopicIndex(keys []sharestate.Key, idx []int) ([][16]byte, map[[16]byte][]int) {
	var ids [][16]byte
	by := map[[16]byte][]int{}
	for _, i := range idx {
		id := keys[i].TopicID
		if _, ok := by[id]; !ok {
			ids = append(ids, id)
		}
		by[id] = append(by[id], i)
	}
	return ids, by
}

// shareAnswers maps an answer's (topic id, partition) to the index of the key it answers; a
// key left unanswered gets missing.
type shareAnswers struct {
	keys []sharestate.Key
	pos  map[sharestate.Key]int
}

func newShareAnswers(keys []sharestate.Key, idx []int) shareAnswers {
	a := shareAnswers{keys: keys, pos: make(map[sharestate.Key]int, len(idx))}
	for j, i := range idx {
		a.pos[keys[i]] = j
	}
	return a
}

// at returns the position in idx of the key (group, id, partition) answers, or -1.
func (a shareAnswers) at(group string, id [16]byte, partition int32) int {
	if j, ok := a.pos[sharestate.Key{Group: group, TopicID: id, Partition: partition}]; ok {
		return j
	}
	return -1
}

// transportErrs is one error per index: a request that failed as a whole.
func transportErrs(n int, err error) []error {
	out := make([]error, n)
	for j := range out {
		out[j] = err
	}
	return out
}

// unanswered marks the results no partition of the answer filled.
func unanswered(out []error, seen []bool, api string) {
	for j := range out {
		if !seen[j] {
			out[j] = fmt.Errorf("%s answer without the partition: %w", api, kerr.UnknownServerError)
		}
	}
}

func (p *sharePersister) InitializeBatch(ctx context.Context, keys []sharestate.Key, stateEpoch int32, startOffsets []int64) []error {
	c := p.b.shareCoord.coord
	return p.batch(ctx, keys, func(i int) error { return c.Initialize(ctx, keys[i], stateEpoch, startOffsets[i]) },
		func(ctx context.Context, leader int32, addr string, idx []int) []error {
			req := kmsg.NewPtrInitializeShareGroupStateRequest()
			req.GroupID = keys[idx[0]].Group
			ids, by := shareTopicIndex(keys, idx)
			for _, id := range ids {
				rt := kmsg.NewInitializeShareGroupStateRequestTopic()
				rt.TopicID = id
				for _, i := range by[id] {
					rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
					rp.Partition, rp.StateEpoch, rp.StartOffset = keys[i].Partition, stateEpoch, startOffsets[i]
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			r, err := p.send(ctx, leader, addr, req)
			if err != nil {
				return transportErrs(len(idx), err)
			}
			out, seen, ans := make([]error, len(idx)), make([]bool, len(idx)), newShareAnswers(keys, idx)
			for _, t := range r.(*kmsg.InitializeShareGroupStateResponse).Topics {
				for _, sp := range t.Partitions {
					if j := ans.at(req.GroupID, t.TopicID, sp.Partition); j >= 0 && !seen[j] {
						seen[j], out[j] = true, partError(sp.ErrorCode, sp.ErrorMessage, false)
					}
				}
			}
			unanswered(out, seen, "InitializeShareGroupState")
			return out
		})
}

func (p *sharePersister) DeleteBatch(ctx context.Context, keys []sharestate.Key) []error {
	c := p.b.shareCoord.coord
	return p.batch(ctx, keys, func(i int) error { return c.Delete(ctx, keys[i]) },
		func(ctx context.Context, leader int32, addr string, idx []int) []error {
			req := kmsg.NewPtrDeleteShareGroupStateRequest()
			req.GroupID = keys[idx[0]].Group
			ids, by := shareTopicIndex(keys, idx)
			for _, id := range ids {
				rt := kmsg.NewDeleteShareGroupStateRequestTopic()
				rt.TopicID = id
				for _, i := range by[id] {
					rp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
					rp.Partition = keys[i].Partition
					rt.Partitions = append(rt.Partitions, rp)
				}
				req.Topics = append(req.Topics, rt)
			}
			r, err := p.send(ctx, leader, addr, req)
			if err != nil {
				return transportErrs(len(idx), err)
			}
			out, seen, ans := make([]error, len(idx)), make([]bool, len(idx)), newShareAnswers(keys, idx)
			for _, t := range r.(*kmsg.DeleteShareGroupStateResponse).Topics {
				for _, sp := range t.Partitions {
					if j := ans.at(req.GroupID, t.TopicID, sp.Partition); j >= 0 && !seen[j] {
						seen[j], out[j] = true, partError(sp.ErrorCode, sp.ErrorMessage, false)
					}
				}
			}
			unanswered(out, seen, "DeleteShareGroupState")
			return out
		})
}

func (p *sharePersister) ReadSummaryBatch(ctx context.Context, keys []sharestate.Key, leaderEpoch int32) ([]sharestate.Summary, []error) {
	c := p.b.shareCoord.coord
	sums := make([]sharestate.Summary, len(keys))
	errs := p.batch(ctx, keys, func(i int) error {
		var err error
		sums[i], err = c.ReadSummary(ctx, keys[i], leaderEpoch)
		return err
	}, func(ctx context.Context, leader int32, addr string, idx []int) []error {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.Version = 1
		req.GroupID = keys[idx[0]].Group
		ids, by := shareTopicIndex(keys, idx)
		for _, id := range ids {
			rt := kmsg.NewReadShareGroupStateSummaryRequestTopic()
			rt.TopicID = id
			for _, i := range by[id] {
				rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
				rp.Partition, rp.LeaderEpoch = keys[i].Partition, leaderEpoch
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		r, err := p.send(ctx, leader, addr, req)
		if err != nil {
			return transportErrs(len(idx), err)
		}
		out, seen, ans := make([]error, len(idx)), make([]bool, len(idx)), newShareAnswers(keys, idx)
		for _, t := range r.(*kmsg.ReadShareGroupStateSummaryResponse).Topics {
			for _, sp := range t.Partitions {
				j := ans.at(req.GroupID, t.TopicID, sp.Partition)
				if j < 0 || seen[j] {
					continue
				}
				seen[j] = true
				switch err := partError(sp.ErrorCode, sp.ErrorMessage, false); {
				case err != nil:
					out[j] = err
				case summaryUninitialized(sp.StateEpoch, sp.LeaderEpoch, sp.StartOffset):
					out[j] = sharestate.ErrNotInitialized
				default:
					sums[idx[j]] = sharestate.Summary{StateEpoch: sp.StateEpoch, LeaderEpoch: sp.LeaderEpoch,
						StartOffset: sp.StartOffset, DeliveryCompleteCount: sp.DeliveryCompleteCount}
				}
			}
		}
		unanswered(out, seen, "ReadShareGroupStateSummary")
		return out
	})
	return sums, errs
}

var _ sharestate.Batcher = (*sharePersister)(nil)
