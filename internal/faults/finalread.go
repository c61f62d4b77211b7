package faults

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/faults/history"
)

// finalIdle ends a final read that has seen no record for this long.
const finalIdle = 5 * time.Second

// stableEnds are topic's end offsets (high watermarks). With markers it waits until no
// transaction is open on any partition (the last stable offset is the high watermark): a
// committed transaction's markers are written after its EndTxn answered, and an abandoned
// one is aborted after its timeout, so the end moves until then.
func stableEnds(ctx context.Context, c *cluster, topic string, markers bool) (kadm.ListedOffsets, error) {
	for {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ends, err := c.adm.ListEndOffsets(lctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil || !markers {
			cancel()
			return ends, err
		}
		stable, err := c.adm.ListCommittedOffsets(lctx, topic)
		cancel()
		if err == nil {
			err = stable.Error()
		}
		if err != nil {
			return nil, err
		}
		open := false
		ends.Each(func(o kadm.ListedOffset) {
			if s, ok := stable.Lookup(o.Topic, o.Partition); !ok || s.Offset != o.Offset {
				open = true
			}
		})
		if !open {
			return ends, nil
		}
		if !sleepCtx(ctx, 500*time.Millisecond) {
			return nil, fmt.Errorf("transactions still open: %w", ctx.Err())
		}
	}
}

// finalRead reads every partition of topic from its start to its end (the high watermark
// once the cluster is healed, the workloads stopped and, with markers, no transaction open), with isolation, as one process: a
// final-read op whose invoke carries the end offsets (mops), the poll ops, and the final-read's
// end: ok when every partition was read to its end, info otherwise (Error says where each one
// stopped). With markers (a transactional topic), a partition whose log ends in transaction
// markers or aborted records (under read_committed) cannot be read to its end, since those are
// not returned as records: stopping short is then no error when the read went idle.
func finalRead(ctx context.Context, c *cluster, rec *recorder, topic, isolation string, markers bool, within time.Duration) error {
	proc := rec.process()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	ends, err := stableEnds(ctx, c, topic, markers)
	if err != nil {
		op := rec.invoke(history.Op{Process: proc, F: history.FFinalRead, Isolation: isolation, Value: topic})
		op.Error = "end offsets: " + err.Error()
		rec.complete(op, history.Info)
		return fmt.Errorf("final read of %s: end offsets: %w", topic, err)
	}
	end := map[int32]int64{}
	start := history.Op{Process: proc, F: history.FFinalRead, Isolation: isolation, Value: topic}
	for _, p := range sortedPartitions(ends[topic]) {
		end[p] = ends[topic][p].Offset
		start.Mops = append(start.Mops, history.Mop{Topic: topic, Partition: p, Offset: end[p]})
	}
	start = rec.invoke(start)
	level := kgo.ReadUncommitted()
	if isolation == readCommitted {
		level = kgo.ReadCommitted()
	}
	offsets := map[int32]kgo.Offset{}
	for p := range end {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(c.clientOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		start.Error = err.Error()
		rec.complete(start, history.Info)
		return fmt.Errorf("final read of %s: %w", topic, err)
	}
	defer cl.Close()
	next := map[int32]int64{} // the offset after the last record read
	done := func() bool {
		for p, e := range end {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	lastRecord := time.Now()
	for !done() && ctx.Err() == nil && time.Since(lastRecord) < finalIdle {
		op := rec.invoke(history.Op{Process: proc, F: history.FPoll, Isolation: isolation})
		pctx, pcancel := context.WithTimeout(ctx, pollTimeout)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			op.Mops = append(op.Mops, recordMop(r))
			next[r.Partition] = r.Offset + 1
		})
		if len(op.Mops) > 0 {
			lastRecord = time.Now()
		}
		rec.complete(op, history.OK)
	}
	var short []string
	for _, p := range sortedPartitions(end) {
		if next[p] < end[p] {
			short = append(short, fmt.Sprintf("%s/%d read to %d of %d", topic, p, next[p], end[p]))
		}
	}
	if len(short) > 0 {
		start.Error = strings.Join(short, ", ")
		rec.complete(start, history.Info)
		if markers && ctx.Err() == nil {
			return nil
		}
		return fmt.Errorf("final read of %s incomplete: %s", topic, start.Error)
	}
	rec.complete(start, history.OK)
	return nil
}
