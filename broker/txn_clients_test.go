package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readCommitted reads every partition of topic from the start with read_committed until want
// records arrived (then a short quiet period) or 20 s passed, and returns the values in
// partition-then-offset order.
func readCommitted(t *testing.T, addr, topic string, want int) map[int32][]string {
	t.Helper()
	cl := newKgo(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	got := map[int32][]string{}
	n := 0
	deadline := time.Now().Add(20 * time.Second)
	var quiet time.Time
	for time.Now().Before(deadline) {
		if n >= want {
			if quiet.IsZero() {
				quiet = time.Now().Add(700 * time.Millisecond)
			}
			if time.Now().After(quiet) {
				break
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	return got
}

// TestTxnFranzCommitAbort: a franz-go transactional producer commits, aborts and commits; a
// read_committed consumer sees exactly the committed records, in order; DescribeTransactions
// and ListTransactions show the id.
func TestTxnFranzCommitAbort(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "txn-franz"
	createTopic(t, b.Addr(), topic, 1, nil)
	p := newKgo(t, b.Addr(), kgo.TransactionalID("franz-tx"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(30*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(commit bool, values ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := p.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end (commit %v): %v", commit, err)
		}
	}
	run(true, "c1", "c2")
	run(false, "a1", "a2", "a3")
	run(true, "c3")
	got := readCommitted(t, b.Addr(), topic, 3)
	if want := []string{"c1", "c2", "c3"}; !slices.Equal(got[0], want) {
		t.Fatalf("read_committed %q, want %q", got[0], want)
	}

	adm := kadm.NewClient(newKgo(t, b.Addr()))
	ds, err := adm.DescribeTransactions(ctx, "franz-tx")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ds["franz-tx"]
	if !ok || d.Err != nil || d.ProducerID < 0 || (d.State != "CompleteCommit" && d.State != "PrepareCommit") {
		t.Fatalf("DescribeTransactions: %+v", ds)
	}
	ls, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ls["franz-tx"]; !ok {
		t.Fatalf("ListTransactions: %+v", ls)
	}
	// A second producer with the same id fences the first.
	p2 := newKgo(t, b.Addr(), kgo.TransactionalID("franz-tx"), kgo.DefaultProduceTopic(topic))
	if err := p2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p2.ProduceSync(ctx, kgo.StringRecord("z1")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p2.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err == nil {
		if err := p.ProduceSync(ctx, kgo.StringRecord("zombie")).FirstErr(); err == nil {
			if err := p.EndTransaction(ctx, kgo.TryCommit); err == nil {
				t.Fatal("a fenced producer committed")
			}
		}
	}
	got = readCommitted(t, b.Addr(), topic, 4)
	if want := []string{"c1", "c2", "c3", "z1"}; !slices.Equal(got[0], want) {
		t.Fatalf("after fencing: read_committed %q, want %q", got[0], want)
	}
}

// TestTxnGroupTransactSession: consume-transform-produce with franz-go's GroupTransactSession:
// every input record appears once in the output (read_committed), and the group's committed
// offsets, written in the transactions, cover the input.
func TestTxnGroupTransactSession(t *testing.T) {
	b := startBroker(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	const in, out, group, n = "txn-etl-in", "txn-etl-out", "txn-etl", 300
	createTopic(t, b.Addr(), in, 2, nil)
	createTopic(t, b.Addr(), out, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	src := newKgo(t, b.Addr(), kgo.DefaultProduceTopic(in))
	for i := 0; i < n; i++ {
		src.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := src.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(b.Addr()), kgo.TransactionalID("etl-tx"), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(out), kgo.TransactionTimeout(30*time.Second), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	done := 0
	for rounds := 0; done < n && rounds < 500 && ctx.Err() == nil; rounds++ {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollFetches(pctx)
		pcancel()
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: []byte("out-" + string(r.Value))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("End: %v", err)
		}
		if committed {
			done += fs.NumRecords()
		}
	}
	if done < n {
		t.Fatalf("transformed %d of %d records", done, n)
	}
	got := readCommitted(t, b.Addr(), out, n)
	seen := map[string]int{}
	total := 0
	for _, vs := range got {
		for _, v := range vs {
			seen[v]++
			total++
		}
	}
	if total != n || len(seen) != n {
		t.Fatalf("output has %d records, %d distinct, want %d once each", total, len(seen), n)
	}
	for i := 0; i < n; i++ {
		if seen["out-"+strconv.Itoa(i)] != 1 {
			t.Fatalf("output record out-%d seen %d times", i, seen["out-"+strconv.Itoa(i)])
		}
	}
	adm := kadm.NewClient(newKgo(t, b.Addr()))
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != n {
		t.Fatalf("group offsets sum to %d, want %d: %+v", sum, n, offs)
	}
}

// TestTxnSaramaCommitAbort: sarama's transactional producer commits and aborts; read_committed
// sees the committed records only, in order.
func TestTxnSaramaCommitAbort(t *testing.T) {
	b := startBroker(t, nil)
	const topic = "txn-sarama"
	createTopic(t, b.Addr(), topic, 1, nil)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Transaction.ID = "sarama-tx"
	cfg.Producer.Retry.Max = 5
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer([]string{b.Addr()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	run := func(commit bool, values ...string) {
		t.Helper()
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatalf("send %s: %v", v, err)
			}
		}
		var err error
		if commit {
			err = p.CommitTxn()
		} else {
			err = p.AbortTxn()
		}
		if err != nil {
			t.Fatal(fmt.Errorf("end (commit %v): %w", commit, err))
		}
	}
	run(true, "s1", "s2")
	run(false, "x1")
	run(true, "s3")
	got := readCommitted(t, b.Addr(), topic, 3)
	if want := []string{"s1", "s2", "s3"}; !slices.Equal(got[0], want) {
		t.Fatalf("read_committed %q, want %q", got[0], want)
	}
}
