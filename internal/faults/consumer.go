package faults

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/faults/history"
)

// Isolation levels as the history names them.
const (
	readCommitted   = "read_committed"
	readUncommitted = "read_uncommitted"
)

// pollTimeout bounds one poll; minPollInterval spaces polls so that a consumer records at most
// 20 polls a second.
const (
	pollTimeout     = 2 * time.Second
	minPollInterval = 50 * time.Millisecond
)

// assignConsumer is a consumer with direct assignment (no group): it reads a random non-empty
// subset of the topic's partitions, and every 5-15 s takes a new subset, resuming each partition
// after the last record it read there (or from the start when it has read none). Each
// assignment is an assign op; each poll a poll op.
type assignConsumer struct {
	c          *cluster
	rec        *recorder
	topic      string
	partitions int
	isolation  string
	rng        *rand.Rand
	// next is the offset after the last record read, per partition (absent: none read yet).
	next map[int32]int64
}

func (a *assignConsumer) run(ctx context.Context) {
	a.next = map[int32]int64{}
	for ctx.Err() == nil {
		var ps []int32
		for p := range int32(a.partitions) {
			if a.rng.IntN(2) == 0 {
				ps = append(ps, p)
			}
		}
		if len(ps) == 0 {
			ps = []int32{int32(a.rng.IntN(a.partitions))}
		}
		a.session(ctx, ps, between(a.rng, [2]time.Duration{5 * time.Second, 15 * time.Second}))
	}
}

// assignOp records an assignment of ps (each at next, or -1 for unknown: the log start).
func (a *assignConsumer) assignOp(proc int, ps []int32) {
	op := history.Op{Process: proc, F: history.FAssign}
	for _, p := range ps {
		o, ok := a.next[p]
		if !ok {
			o = -1
		}
		op.Mops = append(op.Mops, history.Mop{Topic: a.topic, Partition: p, Offset: o})
	}
	op = a.rec.invoke(op)
	a.rec.complete(op, history.OK)
}

// session reads ps with one client for d (or until ctx ends or a partition needs a reset).
func (a *assignConsumer) session(ctx context.Context, ps []int32, d time.Duration) {
	proc := a.rec.process()
	offsets := map[int32]kgo.Offset{}
	for _, p := range ps {
		if o, ok := a.next[p]; ok {
			offsets[p] = kgo.NewOffset().At(o)
		} else {
			offsets[p] = kgo.NewOffset().AtStart()
		}
	}
	level := kgo.ReadUncommitted()
	if a.isolation == readCommitted {
		level = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(a.c.clientOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{a.topic: offsets}),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		sleepCtx(ctx, time.Second)
		return
	}
	defer cl.Close()
	a.assignOp(proc, ps)
	end := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(end) {
		started := time.Now()
		op := a.rec.invoke(history.Op{Process: proc, F: history.FPoll, Isolation: a.isolation})
		pctx, cancel := context.WithTimeout(ctx, pollTimeout)
		fs := cl.PollFetches(pctx)
		cancel()
		var reset, fatal []int32
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, r := range fp.Records {
				op.Mops = append(op.Mops, recordMop(r))
			}
			var loss *kgo.ErrDataLoss
			switch {
			case errors.As(fp.Err, &loss):
				// The client moved its position back to the log end (a truncated log).
				reset = append(reset, fp.Partition)
				a.next[fp.Partition] = loss.ResetTo
			case errors.Is(fp.Err, kerr.OffsetOutOfRange):
				fatal = append(fatal, fp.Partition)
			}
		})
		for _, m := range op.Mops {
			a.next[m.Partition] = m.Offset + 1
		}
		a.rec.complete(op, history.OK)
		if len(fatal) > 0 {
			// The partition stops with NoResetOffset: read it again from its start.
			for _, p := range fatal {
				delete(a.next, p)
			}
			return
		}
		if len(reset) > 0 {
			a.assignOp(proc, ps)
		}
		sleepCtx(ctx, minPollInterval-time.Since(started))
	}
}

// recordMop is a polled record as a history mop; a value that is not a decimal int64 is -1.
func recordMop(r *kgo.Record) history.Mop {
	v, err := strconv.ParseInt(string(r.Value), 10, 64)
	if err != nil {
		v = -1
	}
	return history.Mop{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: v}
}

// sortedPartitions are the keys of m in order.
func sortedPartitions[V any](m map[int32]V) []int32 {
	ps := make([]int32, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}
