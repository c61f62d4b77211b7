// Package clockjump tests the broker under wall-clock jumps: a real broker started in the test
// process (internal/testcluster/inproc), an idempotent acks=all franz-go producer and a
// consumer-group consumer running while internal/clock/clockctl steps the broker's wall clock
// (internal/clock) by +1 day and -1 day and strobes it by ±200 ms. The clock is per process, so
// the tests of this package do not run in parallel. Every load loop is bounded in records and
// time; the package has no goroutines or state of its own beyond each test's clients.
package clockjump

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/broker"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/internal/clock/clockctl"
	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

const (
	day      = 24 * time.Hour
	topic    = "jump"  // LogAppendTime, retention.ms 7 days: nothing may be deleted
	short    = "short" // LogAppendTime, retention.ms 12 hours: a +1 day step expires it
	group    = "jumpers"
	perPhase = 120 // records produced per phase
)

// acked is one record the broker acknowledged.
type acked struct {
	offset int64
	value  string
	phase  int
}

// phase is one clock setting under which records were produced, with the real-time bounds of
// its production (for the LogAppendTime check).
type phase struct {
	name        string
	offset      time.Duration // the clock's offset while producing (strobes: none checked)
	strobe      bool
	first, last time.Time // real wall time around the phase's production
}

// consumed is what the group consumer read: one value and timestamp per offset.
type consumed struct {
	mu      sync.Mutex
	byOff   map[int64]string
	tsByOff map[int64]int64
	dups    []string // an offset read twice with different values
	lost    atomic.Int32
	revoked atomic.Int32
	maxOff  atomic.Int64
}

func TestClockJumpsKeepTheInvariants(t *testing.T) {
	t.Cleanup(clockctl.Reset)
	clockctl.Reset()
	b := inproc.Start(t, map[string]string{
		"group.initial.rebalance.delay.ms": "0",
		"offsets.topic.num.partitions":     "1",
		// The test applies retention and producer expiry itself, right after each step.
		"log.retention.check.interval.ms":          "3600000",
		"producer.id.expiration.check.interval.ms": "3600000",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	admCl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	for name, retention := range map[string]time.Duration{topic: 7 * day, short: 12 * time.Hour} {
		ms := strconv.FormatInt(retention.Milliseconds(), 10)
		r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
			"message.timestamp.type": kadm.StringPtr("LogAppendTime"),
			"retention.ms":           &ms,
			"internal.segment.bytes": kadm.StringPtr("1024"),
			"index.interval.bytes":   kadm.StringPtr("256"),
		}, name)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.RecordRetries(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	got := &consumed{byOff: map[int64]string{}, tsByOff: map[int64]int64{}}
	got.maxOff.Store(-1)
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.OnPartitionsRevoked(func(context.Context, *kgo.Client, map[string][]int32) { got.revoked.Add(1) }),
		kgo.OnPartitionsLost(func(context.Context, *kgo.Client, map[string][]int32) { got.lost.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				got.mu.Lock()
				if v, ok := got.byOff[r.Offset]; ok && v != string(r.Value) {
					got.dups = append(got.dups, fmt.Sprintf("offset %d: %q then %q", r.Offset, v, r.Value))
				}
				got.byOff[r.Offset], got.tsByOff[r.Offset] = string(r.Value), r.Timestamp.UnixMilli()
				got.mu.Unlock()
				got.maxOff.Store(max(got.maxOff.Load(), r.Offset))
			})
			if err := cons.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("commit: %v", err)
			}
		}
	}()
	defer func() { cancel(); <-consumerDone; cons.Close() }()

	var (
		all       []acked
		phases    []phase
		committed int64 = -1
	)
	produce := func(p int, n int) {
		t.Helper()
		for i := 0; i < n; i += 10 {
			recs := make([]*kgo.Record, 0, 20)
			for j := i; j < i+10 && j < n; j++ {
				v := fmt.Sprintf("p%d-%d", p, j)
				recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v)}, &kgo.Record{Topic: short, Value: []byte(v)})
			}
			for _, r := range prod.ProduceSync(ctx, recs...) {
				if r.Err != nil {
					t.Fatalf("phase %d: produce: %v", p, r.Err)
				}
				if r.Record.Topic == topic {
					all = append(all, acked{offset: r.Record.Offset, value: string(r.Record.Value), phase: p})
				}
			}
		}
	}
	runPhase := func(name string, off time.Duration, strobe bool, during func()) {
		t.Helper()
		p := len(phases)
		phases = append(phases, phase{name: name, offset: off, strobe: strobe, first: time.Now()})
		if during != nil {
			during()
		}
		produce(p, perPhase)
		phases[p].last = time.Now()
	}
	jumpLog := logOf(t, b, topic)
	shortLog := logOf(t, b, short)
	// afterStep applies retention and producer-id expiry at the new clock, then checks what no
	// step may change: nothing of the 7-day topic deleted, the active producer not forgotten,
	// the group's committed offset never back.
	afterStep := func(what string) {
		t.Helper()
		if _, err := b.Logs().RunRetention(); err != nil {
			t.Fatalf("%s: retention: %v", what, err)
		}
		if ls := jumpLog.LogStartOffset(); ls != 0 {
			t.Fatalf("%s: retention moved %s's log start to %d (retention.ms 7 days, data at most a day old)", what, topic, ls)
		}
		if n := jumpLog.RemoveExpiredProducers(); n != 0 {
			t.Fatalf("%s: %d producers of %s expired while producing (a retried batch would then be a duplicate)", what, n, topic)
		}
		b.Coordinator().ExpireOffsets()
		waitFor(t, ctx, what+": the consumer reads up to the high watermark", func() bool { return got.maxOff.Load() >= jumpLog.HighWatermark()-1 })
		waitFor(t, ctx, what+": the group commits the high watermark", func() bool {
			o, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return false
			}
			c, ok := o.Lookup(topic, 0)
			if !ok {
				return false
			}
			if c.At < committed {
				t.Fatalf("%s: the committed offset went back from %d to %d", what, committed, c.At)
			}
			committed = c.At
			return c.At >= jumpLog.HighWatermark()
		})
	}

	runPhase("before", 0, false, nil)
	afterStep("before")
	shortEnd := shortLog.HighWatermark()

	runPhase("+1 day", day, false, func() {
		clockctl.Step(day)
		// The producer's last batch is now a day old by the wall clock, but it produced a
		// moment ago: forgetting it would let a retry of its last batch be appended twice.
		if n := jumpLog.RemoveExpiredProducers(); n != 0 {
			t.Fatalf("+1 day: %d active producers of %s expired (a retried batch would then be a duplicate)", n, topic)
		}
	})
	afterStep("+1 day")
	// The step reached retention: the 12-hour topic's closed segments from before it are gone.
	if ls := shortLog.LogStartOffset(); ls == 0 || ls > shortEnd {
		t.Fatalf("after +1 day: %s's log start %d, want in (0, %d]: retention did not see the step", short, ls, shortEnd)
	}

	runPhase("back", 0, false, func() { clockctl.Step(-day) })
	afterStep("back to 0")
	runPhase("-1 day", -day, false, func() { clockctl.Step(-day) })
	afterStep("-1 day")
	runPhase("strobe", -day, true, func() {
		for _, delta := range []time.Duration{200 * time.Millisecond, -200 * time.Millisecond} {
			done, err := clockctl.Strobe(delta, 7*time.Millisecond, 400*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			produce(len(phases)-1, perPhase/2)
			<-done
		}
	})
	afterStep("strobe")
	runPhase("reset", 0, false, func() { clockctl.Reset() })
	afterStep("reset")

	// No acknowledged record lost, no two values at one offset.
	got.mu.Lock()
	defer got.mu.Unlock()
	if len(got.dups) > 0 {
		t.Fatalf("offsets read with two values: %v", got.dups)
	}
	for _, a := range all {
		if v, ok := got.byOff[a.offset]; !ok || v != a.value {
			t.Fatalf("acked %q at offset %d (phase %s): read %q (present %v)", a.value, a.offset, phases[a.phase].name, v, ok)
		}
	}
	// LogAppendTime follows the clock of each step.
	for _, a := range all {
		ph := phases[a.phase]
		if ph.strobe {
			continue
		}
		ts := got.tsByOff[a.offset]
		lo, hi := ph.first.Add(ph.offset).Add(-time.Second).UnixMilli(), ph.last.Add(ph.offset).Add(time.Second).UnixMilli()
		if ts < lo || ts > hi {
			t.Fatalf("offset %d (phase %s): LogAppendTime %d outside [%d, %d]", a.offset, ph.name, ts, lo, hi)
		}
	}
	checkTimeIndexes(t, jumpLog)
	checkTimestampLookups(ctx, t, adm, got.tsByOff, phases)
	if n := got.lost.Load() + got.revoked.Load(); n != 0 {
		t.Fatalf("the consumer lost or gave up its partitions %d times across the jumps (session timeouts are monotonic)", n)
	}
}

// logOf is the broker's log of topic's partition 0.
func logOf(t *testing.T, b *broker.Broker, topic string) *engine.Log {
	t.Helper()
	l, ok := b.Logs().Log(engine.TopicPartition{Topic: topic, Partition: 0})
	if !ok {
		t.Fatalf("no log for %s-0", topic)
	}
	return l
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out: %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkTimeIndexes reads every .timeindex of l from disk: Kafka's time index holds the largest
// timestamp so far, so its timestamps strictly increase and its offsets never decrease, however
// the clock that stamped LogAppendTime moved.
func checkTimeIndexes(t *testing.T, l *engine.Log) {
	t.Helper()
	entries := 0
	for _, s := range l.Segments() {
		path := s.LogPath()
		path = path[:len(path)-len(filepath.Ext(path))] + ".timeindex"
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		prevTs, prevOff := int64(-1), int32(-1)
		for i := 0; i+12 <= len(raw); i += 12 {
			ts, rel := int64(binary.BigEndian.Uint64(raw[i:])), int32(binary.BigEndian.Uint32(raw[i+8:]))
			if ts == 0 && rel == 0 {
				break // the preallocated tail of the active segment's index
			}
			if ts <= prevTs || rel < prevOff {
				t.Fatalf("%s entry %d: (%d, +%d) after (%d, +%d): the time index must only grow", path, i/12, ts, rel, prevTs, prevOff)
			}
			prevTs, prevOff = ts, rel
			entries++
		}
	}
	if entries == 0 {
		t.Fatal("no time index entries: the test does not exercise the time index")
	}
}

// checkTimestampLookups asks ListOffsets for the first offset at or after timestamps around
// each phase's (some stamped a day ahead of later ones) and compares with the records read:
// the answer is the first offset whose timestamp is >= the target (Kafka's semantics, which the
// time index of maxima so far serves).
func checkTimestampLookups(ctx context.Context, t *testing.T, adm *kadm.Client, ts map[int64]int64, phases []phase) {
	t.Helper()
	offs := make([]int64, 0, len(ts))
	for o := range ts {
		offs = append(offs, o)
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	want := func(target int64) int64 {
		for _, o := range offs {
			if ts[o] >= target {
				return o
			}
		}
		return -1
	}
	var targets []int64
	for _, ph := range phases {
		at := ph.first.Add(ph.offset).UnixMilli()
		targets = append(targets, at-1, at, at+500)
	}
	for _, target := range targets {
		w := want(target)
		if w < 0 {
			continue // past every record: ListOffsets answers the end offset
		}
		lo, err := adm.ListOffsetsAfterMilli(ctx, target, topic)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := lo.Lookup(topic, 0)
		if !ok || got.Err != nil {
			t.Fatalf("ListOffsets(%d): %+v", target, got)
		}
		if got.Offset != w {
			t.Fatalf("ListOffsets(timestamp %d) = offset %d, want %d (the first record stamped at or after it)", target, got.Offset, w)
		}
	}
}
