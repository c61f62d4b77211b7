package benchmarks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TxnWorkload is a transactional load-generator run: Workload's producers become transactional
// producers (transactional ids TransactionalID-0 .. -(Producers-1)) that commit every
// CommitEvery records or CommitInterval after a transaction's first record, whichever comes
// first, and abort a fraction AbortRatio of their transactions instead of committing them.
type TxnWorkload struct {
	Workload
	TransactionalID string        `json:"transactional_id"`
	CommitEvery     int           `json:"commit_every"`                  // records per transaction; 0: only CommitInterval bounds it
	CommitInterval  time.Duration `json:"commit_interval_ns"`            // age of a transaction at which it is ended; 0: only CommitEvery
	AbortRatio      float64       `json:"abort_ratio,omitempty"`         // 0..1: this fraction of transactions is aborted, spread evenly
	TxnTimeout      time.Duration `json:"txn_timeout_ns,omitempty"`      // transaction.timeout.ms asked of the coordinator; 0: franz-go's default
	MetadataMinAge  time.Duration `json:"metadata_min_age_ns,omitempty"` // the producers' kgo.MetadataMinAge; 0: txnMetadataMinAge
}

// TxnResult is what a transactional run measured: LoadResult's fields (Messages and Bytes count
// only records of committed transactions) and the transactions' own figures.
type TxnResult struct {
	LoadResult
	Committed, Aborted int64                   // transactions ended, warm-up included
	MeasuredTxns       int64                   // committed transactions begun after the warm-up
	Commit             *hdrhistogram.Histogram // µs: the EndTxn round trip (EndTransaction after the records were acknowledged), committed and aborted
	Txn                *hdrhistogram.Histogram // µs: from the first record's intended send time to the end of EndTransaction
}

// maxTxnRecords bounds a transaction's records when only CommitInterval bounds it, so that a
// fast producer cannot build a transaction larger than its in-flight window allows to settle.
const maxTxnRecords = 1 << 20

// txnMetadataMinAge is the transactional producers' kgo.MetadataMinAge. Apache Kafka 4 adds a
// transaction's partitions implicitly on Produce (KIP-890 part 2) and answers a Produce that
// arrives while the previous transaction's markers are still being written with
// CONCURRENT_TRANSACTIONS; franz-go retries such a batch after a metadata refresh, which its
// default MetadataMinAge (5 s) throttles, so against Kafka 4.4 whole transactions stalled for
// about 5 s (seen in `make bench-vs-kafka` and with a bare kgo program: CONCURRENT_TRANSACTIONS
// on produce, then 4.9 s before the retry). With 100 ms the retry follows at once; the extra
// metadata requests cost a single broker nothing measurable. Kafka's Java producer does not
// wait like that, so without this the load generator, not the broker, would set Kafka's figures.
const txnMetadataMinAge = 100 * time.Millisecond

// txnInitWait bounds the producers' InitProducerId before a run.
const txnInitWait = 2 * time.Minute

// abortsTxn says whether transaction number i (from 0) of a producer is aborted at ratio r: the
// aborts are spread evenly (i*r and (i+1)*r straddle an integer), so any run of 1/r transactions
// holds one, and a run is repeatable.
func abortsTxn(i int64, r float64) bool {
	if r <= 0 {
		return false
	}
	if r >= 1 {
		return true
	}
	return int64(float64(i+1)*r) > int64(float64(i)*r)
}

// RunTxnLoad produces w's messages in transactions through w.Producers transactional franz-go
// clients made by newClient. Each producer loops: BeginTransaction, produce until the
// transaction holds CommitEvery records or is CommitInterval old (or the run ends), Flush (every
// record acknowledged), then EndTransaction(commit), or abort for the AbortRatio share, timed on
// its own: that is the commit latency, the EndTxn round trip through the transaction
// coordinator (which writes PREPARE to its log, markers to every partition, COMPLETE). Publish
// latency runs from each record's intended send time to its acknowledgement as in RunLoad, so
// records that wait while a transaction commits are charged for it. The run is bounded by
// w.Duration (after w.Warmup) and w.MaxMessages; a transaction open at the end is committed.
// Records and transactions begun in the warm-up are not measured. A progress line goes to
// progress every second (nil: none).
func RunTxnLoad(ctx context.Context, w TxnWorkload, newClient func(...kgo.Opt) (*kgo.Client, error), progress io.Writer) (*TxnResult, error) {
	switch {
	case w.Producers < 1:
		return nil, errors.New("need at least one producer")
	case w.Duration <= 0:
		return nil, errors.New("duration must be positive")
	case w.E2E || w.NullSink:
		return nil, errors.New("transactional runs have no e2e consumer and no null sink")
	case w.TransactionalID == "":
		return nil, errors.New("need a transactional id")
	case w.CommitEvery < 0 || w.CommitInterval < 0:
		return nil, errors.New("commit-every and commit-interval cannot be negative")
	case w.CommitEvery == 0 && w.CommitInterval == 0:
		return nil, errors.New("need commit-every or commit-interval")
	case w.AbortRatio < 0 || w.AbortRatio > 1:
		return nil, fmt.Errorf("abort ratio %g is not within 0..1", w.AbortRatio)
	case w.Acks != "all" && w.Acks != "-1":
		return nil, fmt.Errorf("transactions need acks=all, not %q", w.Acks)
	case len(w.TopicNames()) > 1:
		return nil, errors.New("transactional runs use one topic")
	}
	perTxn := w.CommitEvery
	if perTxn == 0 {
		perTxn = maxTxnRecords
	}
	base, err := w.ProducerOpts()
	if err != nil {
		return nil, err
	}
	clients := make([]*kgo.Client, w.Producers)
	for i := range clients {
		// txnMetadataMinAge: see its comment; without it a Kafka 4 broker's transactions stall.
		opts := append(append([]kgo.Opt(nil), base...), kgo.TransactionalID(fmt.Sprintf("%s-%d", w.TransactionalID, i)),
			kgo.MetadataMinAge(cmp.Or(w.MetadataMinAge, txnMetadataMinAge)))
		if w.TxnTimeout > 0 {
			opts = append(opts, kgo.TransactionTimeout(w.TxnTimeout))
		}
		if clients[i], err = newClient(opts...); err != nil {
			for _, c := range clients[:i] {
				c.Close()
			}
			return nil, err
		}
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()

	// Producer ids first, before the clock starts: InitProducerId finds the transaction
	// coordinator, and on a fresh broker creates and loads __transaction_state (Kafka 4.4 took
	// 6-13 s for its 50 partitions on a loaded 2-core machine). That is set-up, like creating
	// the topic, not transaction cost.
	ictx, icancel := context.WithTimeout(ctx, txnInitWait)
	for i, cl := range clients {
		if _, _, err := cl.ProducerID(ictx); err != nil {
			icancel()
			return nil, fmt.Errorf("producer %d: initializing the transactional producer id: %w", i, err)
		}
	}
	icancel()

	payload := make([]byte, w.MessageSize)
	rng := rand.New(rand.NewPCG(2, uint64(w.MessageSize)))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}

	pub := &lockedHist{h: NewMicrosHistogram()}
	commit := &lockedHist{h: NewMicrosHistogram()}
	txnH := &lockedHist{h: NewMicrosHistogram()}
	var sent, acked, failed, measured, measuredBytes atomic.Int64
	var committed, aborted, measuredTxns atomic.Int64
	var errMu sync.Mutex // guards firstErr
	var firstErr error
	setErr := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}

	start := time.Now()
	warmEnd := start.Add(w.Warmup)
	end := warmEnd.Add(w.Duration)
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()

	progDone := make(chan struct{})
	stopProg := make(chan struct{})
	go func() {
		defer close(progDone)
		if progress == nil {
			<-stopProg
			return
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		lastAcked, lastTxns, lastT := int64(0), int64(0), start
		for {
			select {
			case <-stopProg:
				return
			case now := <-t.C:
				a, n := acked.Load(), committed.Load()+aborted.Load()
				secs := now.Sub(lastT).Seconds()
				phase := "warm-up"
				if !lastT.Before(warmEnd) {
					phase = "measure"
				}
				p99, _ := pub.p99()
				c99, cn := commit.p99()
				fmt.Fprintf(progress, "[%4.0fs %s] acked %8.0f msg/s %6.0f txn/s  publish p99 %8.3f ms  commit p99 %8.3f ms (n=%d)\n",
					now.Sub(start).Seconds(), phase, float64(a-lastAcked)/secs, float64(n-lastTxns)/secs, p99, c99, cn)
				lastAcked, lastTxns, lastT = a, n, now
			}
		}
	}()

	perRate := w.Rate / float64(w.Producers)
	var budget atomic.Int64
	budget.Store(w.MaxMessages)
	take := func() bool { return w.MaxMessages <= 0 || budget.Add(-1) >= 0 }
	var wg sync.WaitGroup
	for pi, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offset := time.Duration(0)
			if perRate > 0 {
				offset = time.Duration(float64(time.Second) / w.Rate * float64(pi))
			}
			var pErrMu sync.Mutex // guards pErr: this producer's first failed record
			var pErr error
			var i int64 // records of this producer so far: the rate schedule's index
			for txn := int64(0); runCtx.Err() == nil; txn++ {
				abort := abortsTxn(txn, w.AbortRatio)
				var first time.Time // the transaction's first record's intended send time
				inTxn := 0
				stop := false
				for inTxn < perTxn {
					var intended time.Time
					if perRate > 0 {
						intended = start.Add(offset + time.Duration(float64(i)/perRate*float64(time.Second)))
						if !intended.Before(end) {
							stop = true
							break
						}
						if inTxn > 0 && w.CommitInterval > 0 && intended.Sub(first) >= w.CommitInterval {
							break // the next record belongs to the next transaction
						}
						if d := time.Until(intended); d > 0 {
							t := time.NewTimer(d)
							select {
							case <-t.C:
							case <-runCtx.Done():
								t.Stop()
							}
							if runCtx.Err() != nil {
								stop = true
								break
							}
						}
					} else {
						intended = time.Now()
						if inTxn > 0 && w.CommitInterval > 0 && intended.Sub(first) >= w.CommitInterval {
							break
						}
						if runCtx.Err() != nil {
							stop = true
							break
						}
					}
					if !take() {
						stop = true
						break
					}
					if inTxn == 0 {
						if err := cl.BeginTransaction(); err != nil {
							setErr(fmt.Errorf("producer %d: begin transaction: %w", pi, err))
							return
						}
						first = intended
					}
					i++
					inTxn++
					inWindow := !intended.Before(warmEnd)
					sent.Add(1)
					cl.Produce(ctx, &kgo.Record{Value: payload, Timestamp: intended}, func(r *kgo.Record, err error) {
						if err != nil {
							failed.Add(1)
							pErrMu.Lock()
							if pErr == nil {
								pErr = err
							}
							pErrMu.Unlock()
							return
						}
						acked.Add(1)
						if inWindow {
							pub.record(time.Since(intended))
							if !abort {
								measured.Add(1)
								measuredBytes.Add(int64(len(r.Value)))
							}
						}
					})
				}
				if inTxn == 0 {
					return
				}
				// Every record acknowledged (or failed) before EndTxn: EndTransaction needs no
				// buffered records, and the commit latency then is the EndTxn round trip alone.
				// ctx, not runCtx: the last transaction is ended after the deadline too.
				fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
				ferr := cl.Flush(fctx)
				pErrMu.Lock()
				rerr := pErr
				pErrMu.Unlock()
				how := kgo.TryCommit
				if abort || ferr != nil || rerr != nil {
					how = kgo.TryAbort
				}
				t0 := time.Now()
				eerr := cl.EndTransaction(fctx, how)
				done := time.Now()
				fcancel()
				switch {
				case ferr != nil:
					setErr(fmt.Errorf("producer %d: flush: %w", pi, ferr))
					return
				case rerr != nil:
					setErr(fmt.Errorf("producer %d: produce: %w", pi, rerr))
					return
				case eerr != nil:
					setErr(fmt.Errorf("producer %d: end transaction (commit %v): %w", pi, how == kgo.TryCommit, eerr))
					return
				}
				if abort {
					aborted.Add(1)
				} else {
					committed.Add(1)
				}
				if !first.Before(warmEnd) {
					commit.record(done.Sub(t0))
					txnH.record(done.Sub(first))
					if !abort {
						measuredTxns.Add(1)
					}
				}
				if stop {
					return
				}
			}
		}()
	}
	wg.Wait()
	sendEnd := time.Now()
	close(stopProg)
	<-progDone

	res := &TxnResult{}
	res.Sent, res.Acked, res.Failed = sent.Load(), acked.Load(), failed.Load()
	res.Messages, res.Bytes = measured.Load(), measuredBytes.Load()
	res.Measured = sendEnd.Sub(warmEnd)
	if res.Measured <= 0 {
		res.Measured = sendEnd.Sub(start)
	}
	res.Publish = pub.h
	res.Committed, res.Aborted, res.MeasuredTxns = committed.Load(), aborted.Load(), measuredTxns.Load()
	res.Commit, res.Txn = commit.h, txnH.h
	res.FirstError = firstErr
	return res, nil
}
