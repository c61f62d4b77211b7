package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxLineBytes bounds one input line (one record).
const maxLineBytes = 64 << 20

// produceCmd runs `weir produce`: every line of stdin becomes a record of --topic (with
// --key-separator, the text before the first separator is the key). Records are sent in order
// and the command returns once every one is acknowledged, or with the first failure.
//
// With --transactional-id the records are produced in transactions (acks=all, idempotent, as
// Kafka requires): a transaction is committed after every --commit-every records (0, the
// default: one transaction for all of stdin) and at the end of the input. On any failure the
// open transaction is aborted, so a read_committed consumer sees whole transactions only; the
// transactions committed before stay committed.
func produceCmd(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	topic := fs.String("topic", "", "topic to produce to (required)")
	sep := fs.String("key-separator", "", "split each line into key and value at the first occurrence of this separator")
	acks := fs.String("acks", "all", "acknowledgement: all (durable on every in-sync replica), 1 (leader) or 0 (none)")
	txnID := fs.String("transactional-id", "", "produce in transactions with this transactional id (needs --acks all)")
	commitEvery := fs.Int("commit-every", 0, "with --transactional-id: commit after every N records (0: one transaction for the whole input)")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("produce: unexpected arguments %q", rest)
	}
	if *topic == "" {
		return errors.New("produce: --topic is required")
	}
	if *commitEvery < 0 {
		return fmt.Errorf("produce: --commit-every must be >= 0, not %d", *commitEvery)
	}
	if *commitEvery > 0 && *txnID == "" {
		return errors.New("produce: --commit-every needs --transactional-id")
	}
	if *txnID != "" && *acks != "all" && *acks != "-1" {
		return fmt.Errorf("produce: --transactional-id needs --acks all, not %q", *acks)
	}
	opts := []kgo.Opt{kgo.DefaultProduceTopic(*topic), kgo.AllowAutoTopicCreation()}
	switch *acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return fmt.Errorf("produce: --acks must be all, 1 or 0, not %q", *acks)
	}
	if *txnID != "" {
		opts = append(opts, kgo.TransactionalID(*txnID))
		return produceTxn(ctx, cf, opts, *topic, *sep, *commitEvery, stdin, stderr)
	}
	cl, err := cf.client(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var mu sync.Mutex
	var firstErr error
	var acked int
	done := func(_ *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil && firstErr == nil {
			firstErr = err
		} else if err == nil {
			acked++
		}
	}
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	for line := 1; sc.Scan(); line++ {
		r, err := lineRecord(sc.Text(), *sep)
		if err != nil {
			// Like Kafka's console producer, stop; the lines before are still sent.
			_ = cl.Flush(ctx)
			return fmt.Errorf("produce: line %d: %w", line, err)
		}
		cl.Produce(ctx, r, done)
		mu.Lock()
		err = firstErr
		mu.Unlock()
		if err != nil {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("produce: reading input: %w", err)
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("produce to %s: %w", *topic, firstErr)
	}
	fmt.Fprintf(stderr, "produced %d records to %s\n", acked, *topic)
	return nil
}

// lineRecord makes the record of one input line: with sep, the text before its first
// occurrence is the key.
func lineRecord(text, sep string) (*kgo.Record, error) {
	r := &kgo.Record{}
	if sep != "" {
		k, v, ok := strings.Cut(text, sep)
		if !ok {
			return nil, fmt.Errorf("no key separator %q", sep)
		}
		r.Key = []byte(k)
		text = v
	}
	r.Value = []byte(text)
	return r, nil
}

// txnAbortWait bounds the abort of the open transaction after a failure.
const txnAbortWait = 30 * time.Second

// produceTxn is `weir produce --transactional-id`: stdin's lines in transactions of
// commitEvery records (0: one), each ended with EndTransaction(TryCommit) once its records
// are flushed. A failure aborts the open transaction (kgo.TryAbort after the records in
// flight are settled) and is returned with the count of records committed before it.
func produceTxn(ctx context.Context, cf clientFlags, opts []kgo.Opt, topic, sep string, commitEvery int, stdin io.Reader, stderr io.Writer) error {
	cl, err := cf.client(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var mu sync.Mutex // guards firstErr
	var firstErr error
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	}
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return firstErr
	}
	var committed, txns, inTxn int
	open := false
	abort := func(cause error) error {
		if open {
			// Settle what is in flight first: EndTransaction needs no buffered records. The abort
			// runs even when ctx is cancelled (Ctrl-C), bounded by txnAbortWait.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txnAbortWait)
			defer cancel()
			_ = cl.AbortBufferedRecords(actx)
			if err := cl.EndTransaction(actx, kgo.TryAbort); err != nil {
				cause = fmt.Errorf("%w (and aborting the transaction: %v)", cause, err)
			}
		}
		return fmt.Errorf("produce to %s: %w (%d records committed in %d transactions before)", topic, cause, committed, txns)
	}
	commit := func() error {
		if err := cl.Flush(ctx); err != nil {
			return abort(err)
		}
		if err := failed(); err != nil {
			return abort(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return abort(fmt.Errorf("committing: %w", err))
		}
		open = false
		committed += inTxn
		txns++
		inTxn = 0
		return nil
	}
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	for line := 1; sc.Scan(); line++ {
		r, err := lineRecord(sc.Text(), sep)
		if err != nil {
			// Unlike the plain producer, nothing of the open transaction is kept.
			return abort(fmt.Errorf("line %d: %w", line, err))
		}
		if !open {
			if err := cl.BeginTransaction(); err != nil {
				return abort(fmt.Errorf("beginning a transaction: %w", err))
			}
			open = true
		}
		cl.Produce(ctx, r, done)
		inTxn++
		if err := failed(); err != nil {
			return abort(err)
		}
		if commitEvery > 0 && inTxn >= commitEvery {
			if err := commit(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return abort(fmt.Errorf("reading input: %w", err))
	}
	if open {
		if err := commit(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "produced %d records to %s in %d committed transactions\n", committed, topic, txns)
	return nil
}
