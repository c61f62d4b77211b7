package faults

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/faults/history"
)

// opTimeout bounds a client op whose outcome is then unknown (info); deliveryTimeout is the
// producers' record delivery timeout, under it.
const (
	opTimeout       = 15 * time.Second
	deliveryTimeout = 10 * time.Second
)

// workload is what the workload goroutines share.
type workload struct {
	cfg    *RunConfig
	c      *cluster
	rec    *recorder
	topic  string
	values *atomic.Int64 // the last value handed out; values are unique in a run
}

// definiteProduceError says whether a produce error means the record was certainly not
// written: the broker refused it for what it is, before any append.
func definiteProduceError(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.InvalidRecord, kerr.CorruptMessage, kerr.RecordListTooLarge,
		kerr.InvalidTopicException, kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
		kerr.InvalidRequiredAcks, kerr.TransactionalIDAuthorizationFailed, kgo.ErrMaxBuffered} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// pacer spaces a loop's iterations at a rate per second.
type pacer struct {
	every time.Duration
	next  time.Time
}

func newPacer(perSecond float64) *pacer {
	return &pacer{every: time.Duration(float64(time.Second) / perSecond), next: time.Now()}
}

// wait waits for the next slot; false when ctx ended.
func (p *pacer) wait(ctx context.Context) bool {
	p.next = p.next.Add(p.every)
	if d := time.Until(p.next); d > 0 {
		return sleepCtx(ctx, d)
	}
	p.next = time.Now() // fell behind (a slow op): do not burst to catch up
	return ctx.Err() == nil
}

// producer sends one record at a time (idempotent, acks=all) to a random partition, each a send
// op, until ctx ends or it sent MaxOps.
func (w *workload) producer(ctx context.Context, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	cl, err := kgo.NewClient(w.c.clientOpts(
		kgo.DefaultProduceTopic(w.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(deliveryTimeout),
	)...)
	if err != nil {
		w.cfg.Logger.Error("producer", "err", err)
		return
	}
	defer cl.Close()
	proc := w.rec.process()
	pace := newPacer(w.cfg.OpsPerSecond)
	for i := 0; i < w.cfg.MaxOps && pace.wait(ctx); i++ {
		v := w.values.Add(1)
		p := int32(rng.IntN(w.cfg.Partitions))
		op := w.rec.invoke(history.Op{Process: proc, F: history.FSend,
			Mops: []history.Mop{{Topic: w.topic, Partition: p, Offset: -1, Value: v}}})
		// Not ctx: an op under way when the run stops still ends with its real outcome.
		octx, cancel := context.WithTimeout(context.Background(), opTimeout)
		r, err := cl.ProduceSync(octx, &kgo.Record{Partition: p, Value: []byte(strconv.FormatInt(v, 10))}).First()
		cancel()
		switch {
		case err == nil:
			op.Mops[0].Offset = r.Offset
			w.rec.complete(op, history.OK)
		case definiteProduceError(err):
			op.Error = err.Error()
			w.rec.complete(op, history.Fail)
		default:
			op.Error = err.Error()
			w.rec.complete(op, history.Info)
			proc = w.rec.process()
		}
	}
}

// groupName is the classic consumer group of the queue workload.
const groupName = "faults-group"

// groupConsumer consumes the topic in a classic group, without auto-commit: after each poll
// that returned records it commits the offsets after them (a commit op with the member and
// generation that sent it) and every 2 s reads the group's committed offsets back
// (fetch-offsets). Rebalances are held while a poll's records are handled
// (BlockRebalanceOnPoll), and each new assignment is an assign op before the next poll.
func (w *workload) groupConsumer(ctx context.Context) {
	var (
		mu       sync.Mutex // guards assigned and changed
		assigned = map[int32]bool{}
		changed  bool
	)
	onChange := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range m[w.topic] {
				if add {
					assigned[p] = true
				} else {
					delete(assigned, p)
				}
			}
			changed = true
		}
	}
	cl, err := kgo.NewClient(w.c.clientOpts(
		kgo.ConsumerGroup(groupName),
		kgo.ConsumeTopics(w.topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.RebalanceTimeout(20*time.Second),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.OnPartitionsAssigned(onChange(true)),
		kgo.OnPartitionsRevoked(onChange(false)),
		kgo.OnPartitionsLost(onChange(false)),
	)...)
	if err != nil {
		w.cfg.Logger.Error("group consumer", "err", err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	proc := w.rec.process()
	// takeChange returns the assignment when it changed since the last call.
	takeChange := func() ([]int32, bool) {
		mu.Lock()
		defer mu.Unlock()
		if !changed {
			return nil, false
		}
		changed = false
		return sortedPartitions(assigned), true
	}
	lastFetch := time.Now()
	for ctx.Err() == nil {
		started := time.Now()
		if ps, ok := takeChange(); ok {
			op := history.Op{Process: proc, F: history.FAssign, Group: groupName}
			for _, p := range ps {
				op.Mops = append(op.Mops, history.Mop{Topic: w.topic, Partition: p, Offset: -1})
			}
			w.rec.complete(w.rec.invoke(op), history.OK)
		}
		op := w.rec.invoke(history.Op{Process: proc, F: history.FPoll, Isolation: readUncommitted})
		pctx, cancel := context.WithTimeout(ctx, pollTimeout)
		fs := cl.PollFetches(pctx)
		cancel()
		commit := map[string]map[int32]kgo.EpochOffset{}
		fs.EachRecord(func(r *kgo.Record) {
			op.Mops = append(op.Mops, recordMop(r))
			if commit[r.Topic] == nil {
				commit[r.Topic] = map[int32]kgo.EpochOffset{}
			}
			commit[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		})
		mu.Lock()
		rebalanced := changed
		mu.Unlock()
		if rebalanced {
			// The assignment changed while the poll waited: its records may come from either
			// side of the change, so the poll's order says nothing about one assignment.
			op.Error = "rebalanced during poll"
			w.rec.complete(op, history.Info)
			proc = w.rec.process()
		} else {
			w.rec.complete(op, history.OK)
		}
		if len(commit) > 0 {
			proc = w.commit(cl, proc, commit)
		}
		cl.AllowRebalance()
		if time.Since(lastFetch) > 2*time.Second {
			lastFetch = time.Now()
			w.fetchOffsets(adm, proc)
		}
		sleepCtx(ctx, minPollInterval-time.Since(started))
	}
}

// definiteCommitCodes are the OffsetCommit errors a coordinator answers before appending
// anything: the commit certainly did not happen. Others (NOT_COORDINATOR, timeouts, ...) may
// come after the append, which can still be committed.
var definiteCommitCodes = map[int16]bool{
	kerr.IllegalGeneration.Code: true, kerr.UnknownMemberID.Code: true, kerr.RebalanceInProgress.Code: true,
	kerr.FencedInstanceID.Code: true, kerr.OffsetMetadataTooLarge.Code: true, kerr.GroupAuthorizationFailed.Code: true,
	kerr.CoordinatorLoadInProgress.Code: true, kerr.InvalidCommitOffsetSize.Code: true,
}

// commit commits offsets as one commit op and returns the process to go on with (a new one
// after an unknown outcome).
func (w *workload) commit(cl *kgo.Client, proc int, offsets map[string]map[int32]kgo.EpochOffset) int {
	member, gen := cl.GroupMetadata()
	op := history.Op{Process: proc, F: history.FCommit, Group: groupName, Member: member, Generation: gen}
	for t, ps := range offsets {
		for _, p := range sortedPartitions(ps) {
			op.Mops = append(op.Mops, history.Mop{Topic: t, Partition: p, Offset: ps[p].Offset})
		}
	}
	op = w.rec.invoke(op)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var (
		typ  history.Type
		why  string
		done = make(chan struct{})
	)
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		defer close(done)
		if req != nil && req.MemberID != "" {
			op.Member, op.Generation = req.MemberID, req.Generation
		}
		if err != nil {
			typ, why = history.Info, err.Error()
			return
		}
		oks, definite, other := 0, 0, 0
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				switch {
				case p.ErrorCode == 0:
					oks++
				case definiteCommitCodes[p.ErrorCode]:
					definite++
					why = kerr.ErrorForCode(p.ErrorCode).Error()
				default:
					other++
					why = kerr.ErrorForCode(p.ErrorCode).Error()
				}
			}
		}
		switch {
		case other == 0 && definite == 0 && oks > 0:
			typ = history.OK
		case other == 0 && oks == 0 && definite > 0:
			typ = history.Fail
		default:
			typ = history.Info
			if why == "" {
				why = "empty response"
			}
		}
	})
	<-done
	op.Error = why
	w.rec.complete(op, typ)
	if typ == history.Info {
		return w.rec.process()
	}
	return proc
}

// fetchOffsets reads the group's committed offsets (a fetch-offsets op; an error fails it: a
// read changes nothing).
func (w *workload) fetchOffsets(adm *kadm.Client, proc int) {
	op := w.rec.invoke(history.Op{Process: proc, F: history.FFetchOffsets, Group: groupName})
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	rs, err := adm.FetchOffsets(ctx, groupName)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		op.Error = err.Error()
		w.rec.complete(op, history.Fail)
		return
	}
	for _, p := range sortedPartitions(rs[w.topic]) {
		op.Mops = append(op.Mops, history.Mop{Topic: w.topic, Partition: p, Offset: rs[w.topic][p].At})
	}
	w.rec.complete(op, history.OK)
}
