package broker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
)

// newTestSessionCache is a cache with slots and a clock the test moves.
func newTestSessionCache(slots int) (*fetchSessionCache, *int64) {
	now := new(int64)
	c := &fetchSessionCache{nowMs: func() int64 { return *now }}
	c.init(int64(slots))
	return c, now
}

// sessionItems is n answered partitions of topic id {tag}.
func sessionItems(tag byte, n int) []fetchItem {
	items := make([]fetchItem, n)
	for i := range items {
		items[i] = fetchItem{id: [16]byte{tag}, partition: int32(i), maxBytes: 1 << 20,
			p: fetchPartition{hw: 10, lso: 10, logStart: 0}}
	}
	return items
}

func (c *fetchSessionCache) has(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id] != nil
}

// TestFetchSessionCacheEviction follows Kafka's eviction rules: a full cache evicts a stale
// session (unused for 120 s) first; otherwise a follower's (privileged) session evicts the
// smallest consumer session, a consumer's session evicts only a smaller session older than
// 120 s, and nothing is evicted for a session worth less.
func TestFetchSessionCacheEviction(t *testing.T) {
	c, now := newTestSessionCache(2)
	consumer := &fetchContext{kind: fetchFull, topicIDs: true}
	follower := &fetchContext{kind: fetchFull, topicIDs: true, privileged: true}

	a := c.createSession(consumer, sessionItems(1, 3))
	b := c.createSession(consumer, sessionItems(2, 5))
	if a == 0 || b == 0 || a == b {
		t.Fatalf("session ids %d, %d", a, b)
	}
	if got := c.numPartitions.Load(); got != 8 {
		t.Fatalf("cached partitions %d, want 8", got)
	}
	// Full, nothing stale, nothing old: a consumer's new session gets no slot.
	*now = 10_000
	if id := c.createSession(consumer, sessionItems(3, 10)); id != 0 {
		t.Fatalf("a consumer session evicted a young one (id %d)", id)
	}
	// A follower's session evicts the smallest consumer session.
	d := c.createSession(follower, sessionItems(4, 1))
	if d == 0 || c.has(a) || !c.has(b) {
		t.Fatalf("follower session %d; a present %v, b present %v", d, c.has(a), c.has(b))
	}
	if c.evictions.Load() != 1 {
		t.Fatalf("evictions %d", c.evictions.Load())
	}
	// A follower's young session is not evictable by another follower.
	*now = 20_000
	c.touch(b)
	if id := c.createSession(follower, sessionItems(5, 100)); id == 0 || c.has(b) || !c.has(d) {
		t.Fatalf("second follower session %d: b present %v, d present %v", id, c.has(b), c.has(d))
	}
	if id := c.createSession(follower, sessionItems(6, 100)); id != 0 {
		t.Fatalf("a follower evicted a young follower session (id %d)", id)
	}
	// Stale (unused for more than 120 s): the least recently used session goes first.
	*now = 20_000 + fetchSessionEvictionMs + 1
	e := c.createSession(consumer, sessionItems(7, 1))
	if e == 0 || c.has(d) {
		t.Fatalf("stale eviction: new %d, d present %v", e, c.has(d))
	}
	// A consumer session evicts an old (created > 120 s ago, as of its last use), smaller one.
	c2, now2 := newTestSessionCache(1)
	old := c2.createSession(consumer, sessionItems(1, 2))
	*now2 = fetchSessionEvictionMs + 10
	c2.touch(old) // used now: not stale, but old
	if id := c2.createSession(consumer, sessionItems(2, 1)); id != 0 {
		t.Fatal("a smaller session evicted a larger one")
	}
	if id := c2.createSession(consumer, sessionItems(2, 3)); id == 0 || c2.has(old) {
		t.Fatalf("a larger session did not evict an old smaller one")
	}
	if c2.numSessions.Load() != 1 || c2.numPartitions.Load() != 3 {
		t.Fatalf("sessions %d partitions %d", c2.numSessions.Load(), c2.numPartitions.Load())
	}
	// No slots: no sessions.
	c0, _ := newTestSessionCache(0)
	if id := c0.createSession(consumer, sessionItems(1, 1)); id != 0 {
		t.Fatal("a session with 0 slots")
	}
}

func (c *fetchSessionCache) touch(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[id]
	s.mu.Lock()
	c.touchLocked(s, c.nowMs())
	s.mu.Unlock()
}

// fetchReq builds a Fetch request for a session: parts maps a topic id tag to partitions.
func fetchReq(sessionID, epoch int32, parts map[byte][]int32, forget map[byte][]int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SessionID, req.SessionEpoch = sessionID, epoch
	for tag, ps := range parts {
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = [16]byte{tag}
		rt.Topic = fmt.Sprintf("t%d", tag)
		for _, p := range ps {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	for tag, ps := range forget {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.TopicID = [16]byte{tag}
		ft.Topic = fmt.Sprintf("t%d", tag)
		ft.Partitions = ps
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// TestFetchSessionContexts: Kafka's FetchManager.newContext for each kind of request metadata.
func TestFetchSessionContexts(t *testing.T) {
	c, _ := newTestSessionCache(10)
	wantErr := func(ctx fetchContext, err *kerr.Error) {
		t.Helper()
		if ctx.kind != fetchSessionError || ctx.err != err {
			t.Fatalf("context %v %v, want error %v", ctx.kind, ctx.err, err)
		}
	}
	if ctx := c.newContext(13, fetchReq(0, -1, nil, nil), false); ctx.kind != fetchSessionless {
		t.Fatalf("epoch -1: %v", ctx.kind)
	}
	if ctx := c.newContext(6, fetchReq(0, 0, nil, nil), false); ctx.kind != fetchSessionless {
		t.Fatalf("v6: %v", ctx.kind)
	}
	ctx := c.newContext(13, fetchReq(0, 0, map[byte][]int32{1: {0, 1, 2}}, nil), false)
	if ctx.kind != fetchFull {
		t.Fatalf("epoch 0: %v", ctx.kind)
	}
	id := c.createSession(&ctx, sessionItems(1, 3))
	wantErr(c.newContext(13, fetchReq(id+1, 1, nil, nil), false), kerr.FetchSessionIDNotFound)
	wantErr(c.newContext(13, fetchReq(0, 1, nil, nil), false), kerr.FetchSessionIDNotFound)
	wantErr(c.newContext(13, fetchReq(id, 2, nil, nil), false), kerr.InvalidFetchSessionEpoch)
	wantErr(c.newContext(13, fetchReq(id, -7, nil, nil), false), kerr.InvalidFetchSessionEpoch)
	wantErr(c.newContext(12, fetchReq(id, 1, nil, nil), false), kerr.FetchSessionTopicIDError)
	// Epoch 1: a new partition (tag 2, 0), forget (1, 1).
	ctx = c.newContext(13, fetchReq(id, 1, map[byte][]int32{2: {0}}, map[byte][]int32{1: {1}}), false)
	if ctx.kind != fetchIncremental || ctx.epoch != 2 {
		t.Fatalf("epoch 1: %v epoch %d", ctx.kind, ctx.epoch)
	}
	items, ok := ctx.session.snapshot(ctx.epoch, nil)
	if !ok || len(items) != 3 {
		t.Fatalf("snapshot: %v, %d items", ok, len(items))
	}
	got := []string{}
	for _, it := range items {
		got = append(got, fmt.Sprintf("%d-%d", it.id[0], it.partition))
	}
	if strings.Join(got, ",") != "1-0,1-2,2-0" {
		t.Fatalf("session partitions %v", got)
	}
	if c.numPartitions.Load() != 3 {
		t.Fatalf("cached partitions %d", c.numPartitions.Load())
	}
	// The same epoch again (a duplicate) is refused; the snapshot of an old epoch too.
	wantErr(c.newContext(13, fetchReq(id, 1, nil, nil), false), kerr.InvalidFetchSessionEpoch)
	// One fetch at a time: the next epoch is refused until the fetch in flight is finished.
	wantErr(c.newContext(13, fetchReq(id, 2, nil, nil), false), kerr.InvalidFetchSessionEpoch)
	ctx.session.finish()
	ctx3 := c.newContext(13, fetchReq(id, 2, nil, nil), false)
	if ctx3.kind != fetchIncremental {
		t.Fatalf("epoch 2: %v %v", ctx3.kind, ctx3.err)
	}
	ctx3.session.finish()
	if _, ok := ctx.session.snapshot(ctx.epoch, nil); ok {
		t.Fatal("snapshot at an old epoch")
	}
	if ctx.session.respond(ctx.epoch, items) {
		t.Fatal("respond at an old epoch")
	}
	// Forgetting everything closes the session: sessionless.
	ctx4 := c.newContext(13, fetchReq(id, ctx3.epoch, nil, map[byte][]int32{1: {0, 2}, 2: {0}}), false)
	if ctx4.kind != fetchSessionless || c.has(id) || c.numPartitions.Load() != 0 || c.numSessions.Load() != 0 {
		t.Fatalf("after forgetting all: %v, present %v, %d partitions", ctx4.kind, c.has(id), c.numPartitions.Load())
	}
	// A full fetch (epoch 0 or -1) naming a session closes it.
	for _, epoch := range []int32{0, -1} {
		ctx := c.newContext(13, fetchReq(0, 0, nil, nil), false)
		id := c.createSession(&ctx, sessionItems(1, 2))
		c.newContext(13, fetchReq(id, epoch, nil, nil), false)
		if c.has(id) {
			t.Fatalf("epoch %d did not close session %d", epoch, id)
		}
	}
	// Epochs wrap from MaxInt32 to 1; -1 stays -1.
	if nextFetchEpoch(1<<31-1) != 1 || nextFetchEpoch(-1) != -1 || nextFetchEpoch(0) != 1 {
		t.Fatal("nextFetchEpoch")
	}
}

// TestFetchSessionRespond: an incremental response carries partitions with records, a changed
// high watermark, LSO or log start offset, or an error; partitions that returned records move
// to the end of the session's order.
func TestFetchSessionRespond(t *testing.T) {
	c, _ := newTestSessionCache(10)
	full := c.newContext(13, fetchReq(0, 0, nil, nil), false)
	id := c.createSession(&full, sessionItems(1, 5))
	ctx := c.newContext(13, fetchReq(id, 1, nil, nil), false)
	items, _ := ctx.session.snapshot(ctx.epoch, nil)
	for i := range items {
		items[i].p = fetchPartition{partition: items[i].partition, hw: 10, lso: 10, logStart: 0}
	}
	items[1].p.slice.Length = 100 // records
	items[2].p.hw, items[2].p.lso = 11, 11
	items[3].p.errorCode = kerr.NotLeaderForPartition.Code
	items[4].p.logStart = 5
	if !ctx.session.respond(ctx.epoch, items) {
		t.Fatal("respond")
	}
	want := []bool{false, true, true, true, true}
	for i, it := range items {
		if it.include != want[i] {
			t.Errorf("partition %d included %v, want %v", i, it.include, want[i])
		}
	}
	ctx.session.finish()
	ctx = c.newContext(13, fetchReq(id, 2, nil, nil), false)
	items, _ = ctx.session.snapshot(ctx.epoch, items[:0])
	order := []int32{}
	for i := range items {
		order = append(order, items[i].partition)
		// What was answered last time: partition 2's high watermark, 4's log start.
		p := fetchPartition{partition: items[i].partition, hw: 10, lso: 10, logStart: 0}
		switch items[i].partition {
		case 2:
			p.hw, p.lso = 11, 11
		case 4:
			p.logStart = 5
		}
		items[i].p = p
	}
	if fmt.Sprint(order) != "[0 2 3 4 1]" {
		t.Fatalf("order %v, want partition 1 (records) last", order)
	}
	ctx.session.respond(ctx.epoch, items)
	for _, it := range items {
		// Only partition 3, whose error went away, is carried.
		if it.include != (it.partition == 3) {
			t.Errorf("second response: partition %d included %v", it.partition, it.include)
		}
	}
}

// sessionFetcher sends Fetch requests on one connection for topic fs.
type sessionFetcher struct {
	t     *testing.T
	w     *wireConn
	topic Topic
}

// fetch sends a Fetch at version with session id and epoch, the partitions at their offsets,
// and the partitions to forget.
func (f *sessionFetcher) fetch(version int16, replica, id, epoch int32, parts map[int32]int64, forget []int32, maxWait int32) *kmsg.FetchResponse {
	f.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID = replica, replica
	req.SessionID, req.SessionEpoch = id, epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, 1, 1<<20
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = f.topic.Name, f.topic.ID
		for p := int32(0); p < f.topic.Partitions; p++ {
			if off, ok := parts[p]; ok {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = f.topic.Name, f.topic.ID, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return wireRoundTrip[*kmsg.FetchResponse](f.w, req, version)
}

// parts summarizes a response: "p<partition>:hw<hw>[:rec][:err<code>]" in response order.
func sessionParts(resp *kmsg.FetchResponse) string {
	var out []string
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			s := fmt.Sprintf("p%d:hw%d", rp.Partition, rp.HighWatermark)
			if len(rp.RecordBatches) > 0 {
				s += ":rec"
			}
			if rp.ErrorCode != 0 {
				s += fmt.Sprintf(":err%d", rp.ErrorCode)
			}
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

// TestFetchSessionWire drives sessions over the wire: a full fetch opens one, incremental
// fetches carry only what changed, the long poll wakes on new data in a partition the request
// did not name, duplicate epochs, version changes and unknown ids get Kafka's errors, forgotten
// partitions leave, names (v<13) work as ids do, epoch -1 closes the session, and a replica's
// fetch (replica id set) uses a privileged session.
func TestFetchSessionWire(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	createTopic(t, addr, "fs", 4, nil)
	topic, _ := b.topics.get("fs")
	prod := newKgo(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("fs"))
	produce := func(p int32, n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(2, 3)
	f := &sessionFetcher{t: t, w: dialWire(t, addr), topic: topic}
	expect := func(resp *kmsg.FetchResponse, code int16, want string) {
		t.Helper()
		if resp.ErrorCode != code {
			t.Fatalf("error code %d, want %d", resp.ErrorCode, code)
		}
		if got := sessionParts(resp); got != want {
			t.Fatalf("response partitions %q, want %q", got, want)
		}
	}
	all := map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}
	resp := f.fetch(13, -1, 0, 0, all, nil, 0)
	expect(resp, 0, "p0:hw0 p1:hw0 p2:hw3:rec p3:hw0")
	id := resp.SessionID
	if id == 0 {
		t.Fatal("no session opened")
	}
	// The client moved partition 2 past its records: nothing to say.
	expect(f.fetch(13, -1, id, 1, map[int32]int64{2: 3}, nil, 0), 0, "")
	produce(3, 2)
	expect(f.fetch(13, -1, id, 2, nil, nil, 0), 0, "p3:hw2:rec")
	// A long poll naming only partition 3 wakes on data in partition 0.
	go func() {
		time.Sleep(300 * time.Millisecond)
		produce(0, 1)
	}()
	start := time.Now()
	resp = f.fetch(13, -1, id, 3, map[int32]int64{3: 2}, nil, 5000)
	if el := time.Since(start); el < 250*time.Millisecond || el > 4*time.Second {
		t.Fatalf("long poll answered after %v", el)
	}
	expect(resp, 0, "p0:hw1:rec")
	if resp.SessionID != id {
		t.Fatalf("session id %d, want %d", resp.SessionID, id)
	}
	expect(f.fetch(13, -1, id, 3, nil, nil, 0), kerr.InvalidFetchSessionEpoch.Code, "")
	expect(f.fetch(12, -1, id, 4, nil, nil, 0), kerr.FetchSessionTopicIDError.Code, "")
	// Forget partition 0 (which still has records at the cached offset 0).
	expect(f.fetch(13, -1, id, 4, nil, []int32{0}, 0), 0, "")
	// Partition 0 is back: new to the session, it is answered in full.
	expect(f.fetch(13, -1, id, 5, map[int32]int64{0: 1}, nil, 0), 0, "p0:hw1")
	resp = f.fetch(13, -1, id+1, 1, nil, nil, 0)
	expect(resp, kerr.FetchSessionIDNotFound.Code, "")
	if resp.SessionID != 0 {
		t.Fatalf("session error names session %d, want 0", resp.SessionID)
	}
	// Epoch -1 closes the session and is answered without one.
	resp = f.fetch(13, -1, id, -1, map[int32]int64{1: 0}, nil, 0)
	expect(resp, 0, "p1:hw0")
	if resp.SessionID != 0 {
		t.Fatalf("sessionless answer names session %d", resp.SessionID)
	}
	expect(f.fetch(13, -1, id, 6, nil, nil, 0), kerr.FetchSessionIDNotFound.Code, "")

	// By name (v12).
	resp = f.fetch(12, -1, 0, 0, map[int32]int64{0: 1, 1: 0}, nil, 0)
	expect(resp, 0, "p0:hw1 p1:hw0")
	named := resp.SessionID
	produce(1, 1)
	expect(f.fetch(12, -1, named, 1, nil, nil, 0), 0, "p1:hw1:rec")
	expect(f.fetch(13, -1, named, 2, nil, nil, 0), kerr.FetchSessionTopicIDError.Code, "")

	// A replica's session: privileged, reads to the log end.
	resp = f.fetch(17, 2, 0, 0, map[int32]int64{2: 0}, nil, 0)
	expect(resp, 0, "p2:hw3:rec")
	b.fetchSessions.mu.Lock()
	s := b.fetchSessions.sessions[resp.SessionID]
	b.fetchSessions.mu.Unlock()
	if s == nil || !s.privileged {
		t.Fatalf("replica session %d: %v", resp.SessionID, s)
	}
	expect(f.fetch(17, 2, resp.SessionID, 1, map[int32]int64{2: 3}, nil, 0), 0, "")
	produce(2, 1)
	expect(f.fetch(17, 2, resp.SessionID, 2, nil, nil, 0), 0, "p2:hw4:rec")

	fs := &b.fetchSessions
	if fs.requests[fetchIncremental].Load() < 8 || fs.requests[fetchFull].Load() < 3 || fs.requests[fetchSessionError].Load() < 5 {
		t.Fatalf("counted requests: %v %v %v", fs.requests[fetchIncremental].Load(), fs.requests[fetchFull].Load(), fs.requests[fetchSessionError].Load())
	}
}

// TestFetchSessionIncrementalNoAlloc: an incremental fetch that changes nothing allocates the
// same with 1 partition as with 64 (nothing per partition), and a full fetch's response is not
// rebuilt per partition either.
func TestFetchSessionIncrementalNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under the race detector")
	}
	b := startBroker(t, nil)
	allocs := func(n int32) float64 {
		topic := fmt.Sprintf("na%d", n)
		createTopic(t, b.Addr(), topic, n, nil)
		tp, _ := b.topics.get(topic)
		full := kmsg.NewPtrFetchRequest()
		full.SessionEpoch, full.MaxBytes = 0, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = tp.ID
		for p := range n {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		full.Topics = append(full.Topics, rt)
		rep := handleFetch(b, &netio.Request{Key: 1, Version: 13, Body: full})
		rep.Body.Release()
		inc := kmsg.NewPtrFetchRequest()
		inc.MaxBytes = 1 << 20
		inc.SessionID = b.fetchSessions.newestID()
		inc.SessionEpoch = 1
		return testing.AllocsPerRun(200, func() {
			rep := handleFetch(b, &netio.Request{Key: 1, Version: 13, Body: inc})
			if rep.Body == nil || len(rep.Body.Bytes()) != 4+2+4+1+1 { // throttle, error, session id, no topics, no tags
				t.Fatalf("incremental response of %d bytes", len(rep.Body.Bytes()))
			}
			rep.Body.Release()
			inc.SessionEpoch++
		})
	}
	one, many := allocs(1), allocs(64)
	t.Logf("allocations per idle incremental fetch: %v with 1 partition, %v with 64", one, many)
	if many > one {
		t.Fatalf("an idle incremental fetch allocates per partition: %v with 1 partition, %v with 64", one, many)
	}
}

// newestID is the id of the most recently used session (tests).
func (c *fetchSessionCache) newestID() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tail.id
}

// TestFetchSessionOneFetchAtATime: a second incremental fetch pipelined behind a parked one on
// the same session answers INVALID_FETCH_SESSION_EPOCH and leaves the epoch; the first is
// answered normally and the session goes on.
func TestFetchSessionOneFetchAtATime(t *testing.T) {
	b := startBroker(t, nil)
	createTopic(t, b.Addr(), "one", 2, nil)
	topic, _ := b.topics.get("one")
	f := &sessionFetcher{t: t, w: dialWire(t, b.Addr()), topic: topic}
	resp := f.fetch(13, -1, 0, 0, map[int32]int64{0: 0, 1: 0}, nil, 0)
	id := resp.SessionID
	if id == 0 {
		t.Fatal("no session")
	}
	send := func(epoch int32) int32 {
		req := kmsg.NewPtrFetchRequest()
		req.SessionID, req.SessionEpoch = id, epoch
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, 1<<20
		return f.w.send(req, 13)
	}
	recv := func(corr int32) *kmsg.FetchResponse {
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(13)
		f.w.recv(corr, resp)
		return resp
	}
	c1, c2 := send(1), send(2)
	if r := recv(c1); r.ErrorCode != 0 || r.SessionID != id {
		t.Fatalf("first: error %d session %d", r.ErrorCode, r.SessionID)
	}
	if r := recv(c2); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("second: error %d", r.ErrorCode)
	}
	if r := f.fetch(13, -1, id, 2, nil, nil, 0); r.ErrorCode != 0 || r.SessionID != id {
		t.Fatalf("after: error %d session %d", r.ErrorCode, r.SessionID)
	}
}

// FuzzFetchSessionCache drives the cache with a byte-coded sequence of full fetches (opening
// sessions of followers and consumers), incremental fetches (adding, updating and forgetting
// partitions, right and wrong ids and epochs), finished fetches and clock moves, and checks
// after each step: never more sessions than slots, the cached-partition count equals the
// sessions' partitions and stays within the bound, the LRU list holds exactly the cached
// sessions, and every session's index, order and partitions agree.
func FuzzFetchSessionCache(f *testing.F) {
	f.Add([]byte{0, 3, 0, 5, 1, 0, 1, 2, 3, 2, 0, 4, 0, 200, 0, 1, 1, 9})
	f.Add([]byte{0, 1, 0, 1, 0, 2, 0, 3, 0, 4, 5, 1, 6, 0, 1, 0, 1, 1, 1, 7, 2, 3})
	f.Add([]byte{0, 255, 1, 255, 4, 255, 0, 1, 1, 0, 0, 3, 2, 1, 5, 2, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		c, now := newTestSessionCache(4)
		var ids []int32
		var inflight []*fetchSession
		next := func() byte {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return b
		}
		for len(ops) > 0 {
			switch next() % 6 {
			case 0: // full fetch: privileged?, partitions
				priv := next()%2 == 1
				n := int(next())
				ctx := fetchContext{kind: fetchFull, privileged: priv, topicIDs: true}
				if id := c.createSession(&ctx, sessionItems(next(), n)); id != 0 {
					ids = append(ids, id)
				}
			case 1, 2: // incremental: which session, epoch delta, adds, forgets
				var id int32 = 12345
				if len(ids) > 0 {
					id = ids[int(next())%len(ids)]
				}
				c.mu.Lock()
				epoch := int32(1)
				if s := c.sessions[id]; s != nil {
					s.mu.Lock()
					epoch = s.epoch
					s.mu.Unlock()
				}
				c.mu.Unlock()
				epoch += int32(next()%3) - 1
				adds := map[byte][]int32{}
				for range next() % 4 {
					adds[next()%3] = append(adds[next()%3], int32(next()%8))
				}
				forgets := map[byte][]int32{}
				for range next() % 4 {
					forgets[next()%3] = append(forgets[next()%3], int32(next()%8))
				}
				ctx := c.newContext(13, fetchReq(id, epoch, adds, forgets), false)
				if ctx.kind == fetchIncremental {
					items, ok := ctx.session.snapshot(ctx.epoch, nil)
					if !ok || !ctx.session.respond(ctx.epoch, items) {
						t.Fatal("fresh context refused")
					}
					inflight = append(inflight, ctx.session)
				}
			case 3: // finish the fetches in flight
				for _, s := range inflight {
					s.finish()
				}
				inflight = inflight[:0]
			case 4: // the clock
				*now += int64(next()) * 1000
			case 5: // close by epoch -1
				if len(ids) > 0 {
					c.newContext(13, fetchReq(ids[int(next())%len(ids)], -1, nil, nil), false)
				}
			}
			checkSessionCache(t, c)
		}
	})
}

func checkSessionCache(t *testing.T, c *fetchSessionCache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) > c.slots {
		t.Fatalf("%d sessions, %d slots", len(c.sessions), c.slots)
	}
	parts, listed := 0, 0
	for s := c.head; s != nil; s = s.next {
		listed++
		if c.sessions[s.id] != s {
			t.Fatalf("session %d listed but not cached", s.id)
		}
		if listed > len(c.sessions) {
			t.Fatal("LRU list loops")
		}
	}
	if listed != len(c.sessions) {
		t.Fatalf("%d sessions listed, %d cached", listed, len(c.sessions))
	}
	for _, s := range c.sessions {
		s.mu.Lock()
		if s.cachedSize != len(s.parts) || len(s.index) != len(s.parts) || len(s.order) != len(s.parts) {
			t.Fatalf("session %d: cached size %d, %d parts, %d indexed, %d ordered", s.id, s.cachedSize, len(s.parts), len(s.index), len(s.order))
		}
		seen := make([]bool, len(s.parts))
		for _, idx := range s.order {
			if seen[idx] {
				t.Fatalf("session %d: part %d ordered twice", s.id, idx)
			}
			seen[idx] = true
		}
		for k, idx := range s.index {
			if s.parts[idx].key() != k || s.parts[idx].gone {
				t.Fatalf("session %d: index %v -> %d holds %v", s.id, k, idx, s.parts[idx].key())
			}
		}
		parts += len(s.parts)
		s.mu.Unlock()
	}
	if parts != c.partitions || int64(parts) != c.numPartitions.Load() || int64(len(c.sessions)) != c.numSessions.Load() {
		t.Fatalf("partitions %d counted %d (gauge %d), sessions %d gauge %d", parts, c.partitions, c.numPartitions.Load(), len(c.sessions), c.numSessions.Load())
	}
	if parts > maxFetchSessionCachedPartitions {
		t.Fatalf("%d partitions cached", parts)
	}
}

// TestFetchLongPollExpiry: a long poll that expires with nothing new answers what its first read
// saw (an incremental one: no partition), and one during which a partition's log start offset
// moved (DeleteRecords, which wakes no fetch) answers the new log start: the expiry reads again
// whenever anything it would report changed.
func TestFetchLongPollExpiry(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	createTopic(t, addr, "lpx", 2, nil)
	topic, _ := b.topics.get("lpx")
	prod := newKgo(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("lpx"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	f := &sessionFetcher{t: t, w: dialWire(t, addr), topic: topic}
	atEnd := map[int32]int64{0: 3, 1: 0}
	resp := f.fetch(13, -1, 0, 0, atEnd, nil, 0)
	id := resp.SessionID
	if resp.ErrorCode != 0 || id == 0 || sessionParts(resp) != "p0:hw3 p1:hw0" {
		t.Fatalf("full fetch: error %d, session %d, %q", resp.ErrorCode, id, sessionParts(resp))
	}
	timed := func(epoch int32) (*kmsg.FetchResponse, time.Duration) {
		start := time.Now()
		resp := f.fetch(13, -1, id, epoch, nil, nil, 300)
		return resp, time.Since(start)
	}
	// Nothing new: answered at max_wait_ms with no partition.
	resp, el := timed(1)
	if resp.ErrorCode != 0 || sessionParts(resp) != "" || el < 250*time.Millisecond {
		t.Fatalf("idle long poll: error %d, %q after %v", resp.ErrorCode, sessionParts(resp), el)
	}
	// The log start of partition 0 moves while the fetch waits.
	l, ok := b.logs.Log(engine.TopicPartition{Topic: "lpx", Partition: 0})
	if !ok {
		t.Fatal("no log for lpx-0")
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		if _, err := l.DeleteRecordsBefore(2); err != nil {
			t.Error(err)
		}
	}()
	resp, el = timed(2)
	if resp.ErrorCode != 0 || sessionParts(resp) != "p0:hw3" || el < 250*time.Millisecond {
		t.Fatalf("long poll across DeleteRecords: error %d, %q after %v", resp.ErrorCode, sessionParts(resp), el)
	}
	if got := resp.Topics[0].Partitions[0].LogStartOffset; got != 2 {
		t.Fatalf("log start offset %d, want 2", got)
	}
	// Sessionless: every partition, as the first read saw them.
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.ReplicaState.ID = -1, -1
	req.SessionEpoch = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 300, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = topic.ID
	for p, off := range []int64{3, 0} {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), off, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	start := time.Now()
	resp = wireRoundTrip[*kmsg.FetchResponse](f.w, req, 13)
	if el := time.Since(start); resp.ErrorCode != 0 || sessionParts(resp) != "p0:hw3 p1:hw0" || el < 250*time.Millisecond {
		t.Fatalf("sessionless long poll: error %d, %q after %v", resp.ErrorCode, sessionParts(resp), el)
	}
	if got := resp.Topics[0].Partitions[0].LogStartOffset; got != 2 {
		t.Fatalf("sessionless: log start offset %d, want 2", got)
	}
}

// TestFetchSessionTopicRecreated: a session naming a topic by name (v12) that is deleted and
// created again reads the new topic's partition, not the replica it cached for the old one.
func TestFetchSessionTopicRecreated(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	createTopic(t, addr, "again", 1, nil)
	prod := newKgo(t, addr, kgo.DefaultProduceTopic("again"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	topic, _ := b.topics.get("again")
	f := &sessionFetcher{t: t, w: dialWire(t, addr), topic: topic}
	resp := f.fetch(12, -1, 0, 0, map[int32]int64{0: 3}, nil, 0)
	id := resp.SessionID
	if resp.ErrorCode != 0 || id == 0 || sessionParts(resp) != "p0:hw3" {
		t.Fatalf("full fetch: error %d, session %d, %q", resp.ErrorCode, id, sessionParts(resp))
	}
	if got := sessionParts(f.fetch(12, -1, id, 1, nil, nil, 0)); got != "" {
		t.Fatalf("idle incremental fetch: %q", got)
	}
	adm := kadm.NewClient(newKgo(t, addr))
	if _, err := adm.DeleteTopics(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := adm.CreateTopic(ctx, 1, 1, nil, "again")
		if err == nil && resp.Err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("recreate: %v %v", err, resp.Err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The new partition is empty: offset 3 is out of its range (or, while its replica is not
	// there yet, it is not led here); never the old log's high watermark 3.
	for epoch := int32(2); ; epoch++ {
		got := sessionParts(f.fetch(12, -1, id, epoch, nil, nil, 0))
		if got == fmt.Sprintf("p0:hw0:err%d", kerr.OffsetOutOfRange.Code) {
			break
		}
		if strings.Contains(got, "hw3") || ctx.Err() != nil {
			t.Fatalf("after the topic was recreated: %q", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFetchLongPollWake: a long poll over many partitions woken by a record in one answers that
// record, the new log start of a partition whose log start moved meanwhile, and the unchanged
// offsets of the others (sessionless: every partition; incremental: only what changed).
func TestFetchLongPollWake(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	createTopic(t, addr, "lpw", 8, nil)
	topic, _ := b.topics.get("lpw")
	prod := newKgo(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic("lpw"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	produce := func(p int32, n int) {
		t.Helper()
		for range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Error(err)
			}
		}
	}
	produce(2, 3)
	l2, _ := b.logs.Log(engine.TopicPartition{Topic: "lpw", Partition: 2})
	f := &sessionFetcher{t: t, w: dialWire(t, addr), topic: topic}
	atEnd := map[int32]int64{0: 0, 1: 0, 2: 3, 3: 0, 4: 0, 5: 0, 6: 0, 7: 0}
	wake := func(logStart int64, fetch func() *kmsg.FetchResponse) *kmsg.FetchResponse {
		t.Helper()
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(150 * time.Millisecond)
			if _, err := l2.DeleteRecordsBefore(logStart); err != nil {
				t.Error(err)
			}
			time.Sleep(50 * time.Millisecond)
			produce(5, 1)
		}()
		start := time.Now()
		resp := fetch()
		el := time.Since(start)
		// The fetch may answer once the record is appended, before the producer has its
		// acknowledgement: wait for it, so the producer is not closed under it.
		<-done
		if el < 150*time.Millisecond || el > 4*time.Second {
			t.Fatalf("long poll answered after %v", el)
		}
		return resp
	}
	// Sessionless.
	resp := wake(1, func() *kmsg.FetchResponse { return f.fetch(13, -1, 0, -1, atEnd, nil, 5000) })
	if got, want := sessionParts(resp), "p0:hw0 p1:hw0 p2:hw3 p3:hw0 p4:hw0 p5:hw1:rec p6:hw0 p7:hw0"; got != want {
		t.Fatalf("sessionless wake: %q, want %q", got, want)
	}
	if got := resp.Topics[0].Partitions[2].LogStartOffset; got != 1 {
		t.Fatalf("sessionless wake: log start of partition 2 is %d, want 1", got)
	}
	// Incremental.
	atEnd[5] = 1
	resp = f.fetch(13, -1, 0, 0, atEnd, nil, 0)
	id := resp.SessionID
	if id == 0 {
		t.Fatal("no session")
	}
	resp = wake(2, func() *kmsg.FetchResponse { return f.fetch(13, -1, id, 1, nil, nil, 5000) })
	if got, want := sessionParts(resp), "p2:hw3 p5:hw2:rec"; got != want {
		t.Fatalf("incremental wake: %q, want %q", got, want)
	}
	if got := resp.Topics[0].Partitions[0].LogStartOffset; got != 2 {
		t.Fatalf("incremental wake: log start of partition 2 is %d, want 2", got)
	}
}

// TestFetchSessionCreateConcurrent: sessions created from many goroutines at once (each built
// outside the cache lock) never overfill the cache, and the cache's bookkeeping stays exact.
func TestFetchSessionCreateConcurrent(t *testing.T) {
	c, now := newTestSessionCache(4)
	*now = 1_000_000 // every session is old: any new one may evict a smaller one
	var wg sync.WaitGroup
	var made atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				ctx := &fetchContext{kind: fetchFull, topicIDs: true, privileged: (g+i)%3 == 0}
				if c.createSession(ctx, sessionItems(byte(g), 1+(g*7+i)%40)) != 0 {
					made.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if made.Load() < 4 {
		t.Fatalf("only %d sessions created", made.Load())
	}
	checkSessionCache(t, c)
}

// TestFetchSessionLeadershipChange: a session that skips the leader check of partitions it
// found led (at an unchanged replica generation) still answers NOT_LEADER_OR_FOLLOWER once the
// broker stops leading one, and reads it again once it leads it anew. At Fetch v10: from v11 a
// consumer may read from a follower (KIP-392, racks.go).
func TestFetchSessionLeadershipChange(t *testing.T) {
	b := startBroker(t, nil)
	addr := b.Addr()
	createTopic(t, addr, "lead", 2, nil)
	topic, _ := b.topics.get("lead")
	f := &sessionFetcher{t: t, w: dialWire(t, addr), topic: topic}
	resp := f.fetch(10, -1, 0, 0, map[int32]int64{0: 0, 1: 0}, nil, 0)
	id := resp.SessionID
	if resp.ErrorCode != 0 || id == 0 || sessionParts(resp) != "p0:hw0 p1:hw0" {
		t.Fatalf("full fetch: error %d, session %d, %q", resp.ErrorCode, id, sessionParts(resp))
	}
	if got := sessionParts(f.fetch(10, -1, id, 1, nil, nil, 0)); got != "" {
		t.Fatalf("idle incremental fetch: %q", got)
	}
	r := b.rm.get(engine.TopicPartition{Topic: "lead", Partition: 1})
	r.mu.Lock()
	info := r.info
	r.mu.Unlock()
	other := info
	other.Leader = b.nodeID + 100
	other.LeaderEpoch++
	r.apply(other)
	want := fmt.Sprintf("p1:hw-1:err%d", kerr.NotLeaderForPartition.Code)
	if got := sessionParts(f.fetch(10, -1, id, 2, nil, nil, 0)); got != want {
		t.Fatalf("after losing the lead: %q, want %q", got, want)
	}
	back := info
	back.LeaderEpoch = other.LeaderEpoch + 1
	r.apply(back)
	if got := sessionParts(f.fetch(10, -1, id, 3, nil, nil, 0)); got != "p1:hw0" {
		t.Fatalf("after leading again: %q, want %q", got, "p1:hw0")
	}
	if got := sessionParts(f.fetch(10, -1, id, 4, nil, nil, 0)); got != "" {
		t.Fatalf("idle again: %q", got)
	}
}
