package sharegroups

// Share consumers across a broker SIGKILL, end to end: child-process brokers
// (internal/testcluster), franz-go share consumers that accept, release and reject records,
// a log of every delivery and of every acknowledgement the broker confirmed, and checks
// that no confirmed acknowledgement is lost when a broker is killed and comes back (or its
// partitions move to other brokers).

import (
	"context"
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

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
	"github.com/weir-mq/weir/sharecoord"
	"github.com/weir-mq/weir/sharestate"
)

// skTP is a topic partition; skRec one record of it.
type skTP struct {
	topic string
	part  int32
}

type skRec struct {
	skTP
	off int64
}

// skDelivery is one delivery of a record to a consumer; seq orders the polls of the run. A
// poll may return records its client fetched a while before (franz-go buffers fetches), even
// from a broker process that died since: acquired is when the broker's answer acquiring the
// record was decoded (its acquisition deadline less the lock duration), and the checks order
// deliveries by it.
type skDelivery struct {
	seq      int
	consumer int
	count    int32
	acquired time.Time
}

// skAck is an acknowledgement the broker confirmed: of the delivery with seq delivered, sent at
// sent.
type skAck struct {
	status    kgo.AckStatus
	delivered int
	count     int32
	sent      time.Time
}

// skLock is the acquisition lock duration of the tests' share groups (the broker default).
const skLock = 30 * time.Second

// acquiredAt is when r was acquired for the client (see skDelivery).
func acquiredAt(r *kgo.Record) time.Time {
	if d := r.AcquisitionDeadline(); !d.IsZero() {
		return d.Add(-skLock)
	}
	return time.Now()
}

// firstAfter returns the delivery of ds acquired first after t, or nil.
func firstAfter(ds []skDelivery, t time.Time) *skDelivery {
	var out *skDelivery
	for i := range ds {
		if ds[i].acquired.After(t) && (out == nil || ds[i].acquired.Before(out.acquired)) {
			out = &ds[i]
		}
	}
	return out
}

// skLog is the run's record of deliveries and confirmed acknowledgements.
type skLog struct {
	mu         sync.Mutex // guards every field
	seq        int
	deliveries map[skRec][]skDelivery
	confirmed  map[skRec][]skAck
	done       int // records with a confirmed ACCEPT or REJECT
	// held are the records each kill round found acquired and not acknowledged, with the
	// delivery seq and the leader of their partition at the kill.
	held []skHeld
}

type skHeld struct {
	rec    skRec
	seq    int
	count  int32
	leader int32     // the partition's leader at the kill
	victim int32     // the broker killed
	killed time.Time // when the kill was done
}

func (l *skLog) deliver(consumer int, r *kgo.Record) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	k := skRec{skTP{r.Topic, r.Partition}, r.Offset}
	l.deliveries[k] = append(l.deliveries[k], skDelivery{seq: l.seq, consumer: consumer, count: r.DeliveryCount(), acquired: acquiredAt(r)})
	return l.seq
}

func (l *skLog) confirm(k skRec, a skAck) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	l.confirmed[k] = append(l.confirmed[k], a)
	if a.status != kgo.AckRelease {
		l.done++
	}
}

func (l *skLog) doneCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// skHold coordinates a kill round: consumers that poll records while it is armed keep them
// unacknowledged and wait until the round resumes them.
type skHold struct {
	mu      sync.Mutex // guards armed, holding, resume
	armed   bool
	holding int
	resume  chan struct{}
	pending map[int][]skHeld // consumer -> records it holds (leader filled in at the kill)
}

func (h *skHold) arm() {
	h.mu.Lock()
	h.armed, h.holding, h.resume, h.pending = true, 0, make(chan struct{}), map[int][]skHeld{}
	h.mu.Unlock()
}

// take is called by a consumer with the records it just polled: when the hold is armed and
// this consumer holds nothing yet, it records them as held and returns the channel to wait on.
func (h *skHold) take(consumer int, recs []skHeld) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.armed {
		return nil
	}
	if _, ok := h.pending[consumer]; ok {
		return nil
	}
	h.pending[consumer] = recs
	h.holding++
	return h.resume
}

func (h *skHold) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holding
}

func (h *skHold) release() map[int][]skHeld {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = false
	close(h.resume)
	return h.pending
}

// skConsumer is one franz-go share consumer and the acknowledgement results its callback saw.
type skConsumer struct {
	id int
	cl *kgo.Client

	mu      sync.Mutex // guards results
	results []kgo.ShareAckResult
}

// skRun is one end-to-end run.
type skRun struct {
	t       *testing.T
	tc      *testcluster.Cluster
	group   string
	topics  map[string]int32 // topic -> partitions
	perPart int              // records per partition
	log     *skLog
	hold    *skHold
	stop    atomic.Bool
	notes   atomic.Int64 // diagnostics logged
}

const skConsumers = 3

// skDirEnv, when set, is the directory the kill tests' brokers keep their data and weir.log
// in (left in place after the test, for a look at a failure); else a test temporary directory.
const skDirEnv = "WEIR_SHAREKILL_DIR"

// skDir is the test's directory under skDirEnv, or "" (a temporary one).
func skDir(t *testing.T) string {
	if d := os.Getenv(skDirEnv); d != "" {
		return filepath.Join(d, t.Name())
	}
	return ""
}

// note reports whether one more diagnostic line may be logged (the first 20 of a run).
func (r *skRun) note() bool { return r.notes.Add(1) <= 20 }

// skAckFor is the acknowledgement a consumer gives a delivery: the first delivery of every
// tenth record is released, every thirteenth record is rejected, the rest accepted.
func skAckFor(off int64, count int32) kgo.AckStatus {
	switch {
	case off%10 == 3 && count == 1:
		return kgo.AckRelease
	case off%13 == 5:
		return kgo.AckReject
	}
	return kgo.AckAccept
}

func skStart(t *testing.T, tc *testcluster.Cluster, group string, perPart int) *skRun {
	r := &skRun{t: t, tc: tc, group: group, perPart: perPart,
		topics: map[string]int32{group + "-one": 1, group + "-three": 3},
		log:    &skLog{deliveries: map[skRec][]skDelivery{}, confirmed: map[skRec][]skAck{}},
		hold:   &skHold{}}
	cl := scClient(t, tc.Bootstrap()...)
	rf := int16(min(3, len(tc.Nodes())))
	for topic, parts := range r.topics {
		scCreateTopic(t, cl, topic, parts, rf)
	}
	if kerr, msg := sgAlterGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest"); kerr != nil {
		t.Fatalf("share.auto.offset.reset: %v %s", kerr, msg)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(tc.Bootstrap()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.RequestRetries(10))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for topic, parts := range r.topics {
		for p := range parts {
			for i := 0; i < perPart; i += 200 {
				var rs []*kgo.Record
				for j := i; j < min(i+200, perPart); j++ {
					rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(j))})
				}
				if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
					t.Fatalf("produce %s/%d: %v", topic, p, err)
				}
			}
		}
	}
	return r
}

func (r *skRun) total() int {
	n := 0
	for _, p := range r.topics {
		n += int(p) * r.perPart
	}
	return n
}

// consume runs consumer id until the run stops or ctx ends: poll, log each delivery, hold
// the records when a kill round asks, else acknowledge each one, flush, and log the
// acknowledgements whose partition the broker answered without error.
func (r *skRun) consume(ctx context.Context, c *skConsumer) {
	for ctx.Err() == nil && !r.stop.Load() {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := c.cl.PollRecords(pctx, 200)
		cancel()
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil && pctx.Err() == nil && r.note() {
				r.t.Logf("consumer %d: poll %s/%d: %v", c.id, topic, p, err)
			}
		})
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		seqs := make([]int, len(recs))
		for i, rec := range recs {
			seqs[i] = r.log.deliver(c.id, rec)
		}
		held := make([]skHeld, len(recs))
		for i, rec := range recs {
			held[i] = skHeld{rec: skRec{skTP{rec.Topic, rec.Partition}, rec.Offset}, seq: seqs[i], count: rec.DeliveryCount()}
		}
		if resume := r.hold.take(c.id, held); resume != nil {
			select {
			case <-resume:
			case <-ctx.Done():
			}
			// Not acknowledged: the next poll auto-accepts them, which the broker refuses
			// (or the client drops as stale) once their acquisition died with the broker.
			continue
		}
		c.mu.Lock()
		c.results = c.results[:0]
		c.mu.Unlock()
		sent := time.Now()
		statuses := make([]kgo.AckStatus, len(recs))
		for i, rec := range recs {
			statuses[i] = skAckFor(rec.Offset, rec.DeliveryCount())
			rec.Ack(statuses[i])
		}
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.cl.FlushAcks(fctx)
		cancel()
		if err != nil {
			if r.note() {
				r.t.Logf("consumer %d: flush acknowledgements: %v", c.id, err)
			}
			continue // unconfirmed: these records may be delivered again
		}
		ok := map[skTP]bool{}
		bad := map[skTP]bool{}
		c.mu.Lock()
		for _, res := range c.results {
			tp := skTP{res.Topic, res.Partition}
			if res.Err != nil {
				bad[tp] = true
				if r.note() {
					r.t.Logf("consumer %d: acknowledgement of %s/%d: %v", c.id, res.Topic, res.Partition, res.Err)
				}
			} else {
				ok[tp] = true
			}
		}
		c.mu.Unlock()
		for i, rec := range recs {
			tp := skTP{rec.Topic, rec.Partition}
			if ok[tp] && !bad[tp] {
				r.log.confirm(skRec{tp, rec.Offset}, skAck{status: statuses[i], delivered: seqs[i], count: rec.DeliveryCount(), sent: sent})
			}
		}
	}
}

func (r *skRun) startConsumers(ctx context.Context) *sync.WaitGroup {
	var topics []string
	for topic := range r.topics {
		topics = append(topics, topic)
	}
	var wg sync.WaitGroup
	for i := range skConsumers {
		c := &skConsumer{id: i}
		cl, err := kgo.NewClient(kgo.SeedBrokers(r.tc.Bootstrap()...), kgo.ShareGroup(r.group), kgo.ConsumeTopics(topics...),
			kgo.ClientID("sk-"+strconv.Itoa(i)), kgo.ShareMaxRecords(100),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				c.mu.Lock()
				c.results = append(c.results, rs...)
				c.mu.Unlock()
			}))
		if err != nil {
			r.t.Fatal(err)
		}
		c.cl = cl
		r.t.Cleanup(cl.Close)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.consume(ctx, c)
		}()
	}
	return &wg
}

// waitDone waits until at least n records have a confirmed ACCEPT or REJECT.
func (r *skRun) waitDone(ctx context.Context, n int) {
	r.t.Helper()
	for r.log.doneCount() < n {
		select {
		case <-ctx.Done():
			r.t.Fatalf("%d records done, waiting for %d: %v", r.log.doneCount(), n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// leaders returns the leader of every partition of the run's topics.
func (r *skRun) leaders(ctx context.Context, adm *kadm.Client) map[skTP]int32 {
	r.t.Helper()
	var names []string
	for topic := range r.topics {
		names = append(names, topic)
	}
	for {
		md, err := adm.Metadata(ctx, names...)
		out := map[skTP]int32{}
		if err == nil {
			for _, td := range md.Topics {
				for _, pd := range td.Partitions {
					if pd.Err == nil && pd.Leader >= 0 {
						out[skTP{td.Topic, pd.Partition}] = pd.Leader
					}
				}
			}
			if len(out) == r.total()/r.perPart {
				return out
			}
		}
		select {
		case <-ctx.Done():
			r.t.Fatalf("leaders: %v %v", err, out)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// killRound holds records in the consumers, SIGKILLs a broker (pick chooses it once the
// records are held, from the partitions' leaders and how many records are held on the
// partitions each one leads), optionally restarts it, and resumes the consumers.
func (r *skRun) killRound(ctx context.Context, adm *kadm.Client, pick func(leaders map[skTP]int32, held map[int32]int) int32, restart bool) int32 {
	r.t.Helper()
	r.hold.arm()
	for until := time.Now().Add(3 * time.Second); r.hold.count() < skConsumers && time.Now().Before(until); {
		time.Sleep(10 * time.Millisecond)
	}
	for until := time.Now().Add(5 * time.Second); r.hold.count() == 0 && time.Now().Before(until); {
		time.Sleep(10 * time.Millisecond)
	}
	if r.hold.count() == 0 {
		r.t.Log("no consumer acquired records to hold at the kill")
	}
	leaders := r.leaders(ctx, adm)
	r.hold.mu.Lock()
	held := map[int32]int{} // leader -> records held on its partitions
	for _, hs := range r.hold.pending {
		for _, h := range hs {
			held[leaders[h.rec.skTP]]++
		}
	}
	r.hold.mu.Unlock()
	victim := pick(leaders, held)
	if err := r.tc.Node(victim).Kill(); err != nil {
		r.t.Fatal(err)
	}
	killed := time.Now()
	r.log.mu.Lock()
	r.hold.mu.Lock()
	for _, hs := range r.hold.pending {
		for _, h := range hs {
			h.leader, h.victim, h.killed = leaders[h.rec.skTP], victim, killed
			r.log.held = append(r.log.held, h)
		}
	}
	r.hold.mu.Unlock()
	r.log.mu.Unlock()
	r.t.Logf("SIGKILL broker %d with %d consumers holding records (%d on its partitions), %d of %d records done",
		victim, r.hold.count(), held[victim], r.log.doneCount(), r.total())
	if restart {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := r.tc.Node(victim).Restart(rctx)
		cancel()
		if err != nil {
			r.t.Fatalf("restart broker %d: %v", victim, err)
		}
	}
	r.hold.release()
	return victim
}

// waitDrained waits until DescribeShareGroupOffsets shows every partition's start offset at
// its end (lag 0), checking each answer against the log: the start offset never passes a
// record held at a kill and not delivered again since.
func (r *skRun) waitDrained(ctx context.Context) {
	r.t.Helper()
	var last string
	for {
		// A new client each time: a client keeps a dead group coordinator cached for the
		// sharded admin requests.
		acl, err := kgo.NewClient(kgo.SeedBrokers(r.liveAddrs()...), kgo.RequestRetries(2))
		if err != nil {
			r.t.Fatal(err)
		}
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := kadm.NewClient(acl).DescribeShareGroupOffsets(dctx, r.group)
		dcancel()
		acl.Close()
		drained := 0
		if err == nil && d[r.group].Err == nil {
			last = ""
			for topic, parts := range r.topics {
				for p := range parts {
					o, ok := d[r.group].Offsets.Lookup(topic, p)
					switch {
					case !ok:
						last += fmt.Sprintf(" %s/%d missing", topic, p)
					case o.Err != nil:
						last += fmt.Sprintf(" %s/%d %v", topic, p, o.Err)
					case o.StartOffset == int64(r.perPart) && o.Lag == 0:
						drained++
					default:
						last += fmt.Sprintf(" %s/%d start %d lag %d", topic, p, o.StartOffset, o.Lag)
					}
				}
			}
		} else {
			last = fmt.Sprint(err, d[r.group].Err)
		}
		if drained == r.total()/r.perPart {
			return
		}
		select {
		case <-ctx.Done():
			r.t.Fatalf("share group not drained (%d of %d records done): %s", r.log.doneCount(), r.total(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// liveAddrs are the addresses of the running brokers.
func (r *skRun) liveAddrs() []string {
	var out []string
	for _, n := range r.tc.Nodes() {
		if n.Running() {
			out = append(out, n.Addr())
		}
	}
	return out
}

// check verifies the log: every record delivered; no delivery after a confirmed ACCEPT or
// REJECT; a delivery after every confirmed RELEASE, with a higher delivery count; a delivery
// after the kill of every record held on the killed broker's partitions.
func (r *skRun) check() {
	r.t.Helper()
	l := r.log
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	redelivered, increased := 0, 0
	for topic, parts := range r.topics {
		for p := range parts {
			for off := int64(0); off < int64(r.perPart); off++ {
				k := skRec{skTP{topic, p}, off}
				ds := l.deliveries[k]
				if len(ds) == 0 {
					fail("%s/%d@%d never delivered", topic, p, off)
					continue
				}
				for _, a := range l.confirmed[k] {
					next := firstAfter(ds, a.sent)
					switch a.status {
					case kgo.AckAccept, kgo.AckReject:
						if next != nil {
							fail("%s/%d@%d acquired again (%+v) after its confirmed %v of delivery %d: deliveries %+v", topic, p, off, *next, a.status, a.delivered, ds)
						}
					case kgo.AckRelease:
						if next == nil {
							fail("%s/%d@%d released (delivery count %d) and never delivered again", topic, p, off, a.count)
						} else if next.count <= a.count {
							fail("%s/%d@%d released at delivery count %d, delivered again with count %d", topic, p, off, a.count, next.count)
						}
					}
				}
			}
		}
	}
	for _, h := range l.held {
		if h.leader != h.victim {
			continue
		}
		again := firstAfter(l.deliveries[h.rec], h.killed)
		if again == nil {
			fail("%s/%d@%d acquired (count %d, delivery %d) at the kill of broker %d and never delivered again: deliveries %+v, confirmed %+v",
				h.rec.topic, h.rec.part, h.rec.off, h.count, h.seq, h.leader, l.deliveries[h.rec], l.confirmed[h.rec])
			continue
		}
		redelivered++
		if again.count > h.count {
			increased++
		}
	}
	deliveries, acks := 0, 0
	for _, ds := range l.deliveries {
		deliveries += len(ds)
	}
	for _, as := range l.confirmed {
		acks += len(as)
	}
	r.t.Logf("%d records, %d deliveries, %d confirmed acknowledgements; %d records held at a kill on the killed broker delivered again (%d with a higher delivery count)",
		r.total(), deliveries, acks, redelivered, increased)
	if len(errs) > 0 {
		sort.Strings(errs)
		r.t.Fatalf("%d violations, first ones:\n%s", len(errs), joinFirst(errs, 10))
	}
}

func joinFirst(s []string, n int) string {
	out := ""
	for i, x := range s {
		if i == n {
			break
		}
		out += x + "\n"
	}
	return out
}

// TestShareConsumersSurviveBrokerKill: one broker, three franz-go share consumers on a
// 1-partition and a 3-partition topic; the broker is SIGKILLed while the consumers hold
// acquired records, and restarted on its data directory. No confirmed acknowledgement is
// lost, released and held records are delivered again, and the share group drains.
func TestShareConsumersSurviveBrokerKill(t *testing.T) {
	tc := tbcluster.Start(t, testcluster.Config{N: 1, Single: true, LogFile: true, Dir: skDir(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := skStart(t, tc, "skone", 500)
	adm := kadm.NewClient(scClient(t, tc.Bootstrap()...))
	wg := r.startConsumers(ctx)
	r.waitDone(ctx, r.total()/3)
	r.killRound(ctx, adm, func(map[skTP]int32, map[int32]int) int32 { return 1 }, true)
	r.waitDrained(ctx)
	r.stop.Store(true)
	wg.Wait()
	r.check()
}

// TestShareConsumersSurviveClusterKills: three brokers; first the leader of the 1-partition
// topic's partition is SIGKILLed while the consumers hold records (its share partitions move
// to other brokers, loading their state from the share coordinator), then restarted; then
// the broker coordinating that share partition's state (its __share_group_state partition's
// leader) is SIGKILLed the same way.
func TestShareConsumersSurviveClusterKills(t *testing.T) {
	tc := tbcluster.Start(t, testcluster.Config{N: 3, LogFile: true, Dir: skDir(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r := skStart(t, tc, "skthree", 500)
	cl := scClient(t, tc.Bootstrap()...)
	adm := kadm.NewClient(cl)
	one := r.group + "-one"
	td, err := adm.ListTopics(ctx, one)
	if err != nil || td[one].Err != nil {
		t.Fatalf("list %s: %v %v", one, err, td[one].Err)
	}
	key := sharestate.Key{Group: r.group, TopicID: [16]byte(td[one].ID), Partition: 0}
	wg := r.startConsumers(ctx)

	r.waitDone(ctx, r.total()/4)
	v1 := r.killRound(ctx, adm, func(leaders map[skTP]int32, held map[int32]int) int32 {
		// The leader with the most records held on its partitions; the 1-partition topic's
		// leader when none are.
		v, most := leaders[skTP{one, 0}], 0
		for id, n := range held {
			if n > most {
				v, most = id, n
			}
		}
		return v
	}, false)
	r.waitDone(ctx, r.total()/2)
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	if err := tc.Node(v1).Restart(rctx); err != nil {
		t.Fatalf("restart broker %d: %v", v1, err)
	}
	rcancel()
	t.Logf("broker %d restarted", v1)

	r.waitDone(ctx, r.total()*5/8)
	r.killRound(ctx, adm, func(leaders map[skTP]int32, _ map[int32]int) int32 {
		c := scCoordinator(t, cl, key)
		t.Logf("share coordinator of %s: broker %d; leader of %s/0: broker %d", sharecoord.CoordinatorKey(key), c, one, leaders[skTP{one, 0}])
		return c
	}, false)
	r.waitDrained(ctx)
	r.stop.Store(true)
	wg.Wait()
	r.check()
}
