package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/faults/history"
)

// commitShare is the share of transactions a transactional producer commits; it aborts the rest.
const commitShare = 0.7

// txnIDOf is transactional producer i's transactional id.
func txnIDOf(i int) string { return fmt.Sprintf("faults-txn-%d", i) }

// txnProducer runs transactions (a txn op each) until ctx ends or it ran MaxOps: each sends one
// record to each of 2 or 3 distinct partitions, then commits or aborts at random. ok = committed
// (the mops carry the offsets), fail = aborted (by choice, or after a send failed), info =
// unknown (the end's outcome was not confirmed). After info the client is replaced: its new
// InitProducerId fences the old epoch and ends whatever it left open.
func (w *workload) txnProducer(ctx context.Context, id int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	newClient := func() (*kgo.Client, error) {
		return kgo.NewClient(w.c.clientOpts(
			kgo.DefaultProduceTopic(w.topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.TransactionalID(txnIDOf(id)),
			kgo.TransactionTimeout(10*time.Second),
			kgo.ProducerLinger(0),
			kgo.RecordDeliveryTimeout(deliveryTimeout),
		)...)
	}
	cl, err := newClient()
	if err != nil {
		w.cfg.Logger.Error("txn producer", "err", err)
		return
	}
	defer func() { cl.Close() }()
	proc := w.rec.process()
	pace := newPacer(w.cfg.OpsPerSecond / 2)
	for i := 0; i < w.cfg.MaxOps && pace.wait(ctx); i++ {
		n := min(2+rng.IntN(2), w.cfg.Partitions)
		ps := rng.Perm(w.cfg.Partitions)[:n]
		op := history.Op{Process: proc, F: history.FTxn}
		recs := make([]*kgo.Record, n)
		for j, p := range ps {
			v := w.values.Add(1)
			op.Mops = append(op.Mops, history.Mop{Topic: w.topic, Partition: int32(p), Offset: -1, Value: v})
			recs[j] = &kgo.Record{Partition: int32(p), Value: []byte(strconv.FormatInt(v, 10))}
		}
		op = w.rec.invoke(op)
		typ := w.txn(cl, &op, recs, rng.Float64() < commitShare)
		w.rec.complete(op, typ)
		if typ == history.Info {
			proc = w.rec.process()
			cl.Close()
			if cl, err = newClient(); err != nil {
				w.cfg.Logger.Error("txn producer", "err", err)
				return
			}
		}
	}
}

// txn runs one transaction of recs, filling op's offsets and error, and says how it ended.
func (w *workload) txn(cl *kgo.Client, op *history.Op, recs []*kgo.Record, commit bool) history.Type {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		op.Error = "begin: " + err.Error()
		return history.Fail // nothing was sent
	}
	rs := cl.ProduceSync(ctx, recs...)
	if err := rs.FirstErr(); err != nil {
		op.Error = "send: " + err.Error()
		return w.abort(ctx, cl, op)
	}
	// Results come in the order the sends completed; each record carries its own offset.
	for j, r := range recs {
		op.Mops[j].Offset = r.Offset
	}
	if !commit {
		op.Error = "aborted by choice"
		return w.abort(ctx, cl, op)
	}
	err := cl.EndTransaction(ctx, kgo.TryCommit)
	switch {
	case err == nil:
		return history.OK
	case errors.Is(err, kerr.OperationNotAttempted) || errors.Is(err, kerr.TransactionAbortable):
		op.Error = "commit not attempted: " + err.Error()
		return w.abort(ctx, cl, op)
	default:
		op.Error = "commit: " + err.Error()
		return history.Info
	}
}

// abort ends the open transaction with an abort: fail once confirmed, else info.
func (w *workload) abort(ctx context.Context, cl *kgo.Client, op *history.Op) history.Type {
	if err := cl.AbortBufferedRecords(ctx); err != nil {
		op.Error += "; abort buffered: " + err.Error()
		return history.Info
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		op.Error += "; abort: " + err.Error()
		return history.Info
	}
	return history.Fail
}
