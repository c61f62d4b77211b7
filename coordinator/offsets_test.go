package coordinator

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func commit(h *harness, group string, gen int32, member string, tp TopicPartition, offset int64, md *string) *kerr.Error {
	h.t.Helper()
	r := h.c.Commit(CommitRequest{Group: group, Generation: gen, MemberID: member, RetentionMs: -1,
		Partitions: []CommitPartition{{TopicPartition: tp, Offset: offset, LeaderEpoch: 4, Metadata: md}}})()
	return r.Errors[0]
}

func fetchOne(h *harness, group string, tp TopicPartition) FetchedOffset {
	h.t.Helper()
	r := h.c.Fetch(group, []FetchTopic{{tp.Topic, []int32{tp.Partition}}})()
	if r.Err != nil {
		h.t.Fatal(r.Err)
	}
	return r.Offsets[0]
}

func TestCommitValidation(t *testing.T) {
	h := newHarness(t, Config{})
	tp := TopicPartition{"t", 0}
	md := "hello"
	wantErr(t, "admin commit to a new group", commit(h, "simple", -1, "", tp, 5, &md), nil)
	if f := fetchOne(h, "simple", tp); f.Offset != 5 || f.Metadata != "hello" || f.LeaderEpoch != 4 {
		t.Fatalf("fetched %+v", f)
	}
	if f := fetchOne(h, "nobody", tp); f.Offset != -1 || f.LeaderEpoch != -1 || f.Metadata != "" {
		t.Fatalf("unknown group: %+v", f)
	}
	if f := fetchOne(h, "simple", TopicPartition{"t", 9}); f.Offset != -1 {
		t.Fatalf("unknown partition: %+v", f)
	}
	wantErr(t, "member commit to unknown group", commit(h, "nog", 3, "m", tp, 1, nil), kerr.IllegalGeneration)
	ids, gen := stableGroup(t, h, "g", 2)
	wantErr(t, "member commit", commit(h, "g", gen, ids[1], tp, 7, nil), nil)
	wantErr(t, "stale generation", commit(h, "g", gen-1, ids[1], tp, 8, nil), kerr.IllegalGeneration)
	wantErr(t, "unknown member", commit(h, "g", gen, "ghost", tp, 8, nil), kerr.UnknownMemberID)
	wantErr(t, "admin commit to a live group", commit(h, "g", -1, "", tp, 8, nil), kerr.UnknownMemberID)
	long := string(make([]byte, 4097))
	wantErr(t, "metadata too large", commit(h, "g", gen, ids[1], tp, 8, &long), kerr.OffsetMetadataTooLarge)
	if f := fetchOne(h, "g", tp); f.Offset != 7 || f.Metadata != "" {
		t.Fatalf("fetched %+v", f)
	}
	// During PreparingRebalance the current generation may still commit (revocation commits).
	startJoin(h, joinReq("g", ids[0]))
	wantErr(t, "commit while preparing", commit(h, "g", gen, ids[1], tp, 9, nil), nil)
	all := h.c.Fetch("g", nil)()
	if len(all.Offsets) != 1 || all.Offsets[0].Offset != 9 {
		t.Fatalf("all offsets: %+v", all.Offsets)
	}
}

func TestCommitAppendFailure(t *testing.T) {
	h := newHarness(t, Config{})
	tp := TopicPartition{"t", 0}
	wantErr(t, "first", commit(h, "g", -1, "", tp, 1, nil), nil)
	l, _ := h.store.Log(PartitionFor("g", 8))
	l.(*memLog).fail = kerr.KafkaStorageError
	wantErr(t, "storage error", commit(h, "g", -1, "", tp, 2, nil), kerr.NotCoordinator)
	if f := fetchOne(h, "g", tp); f.Offset != 1 {
		t.Fatalf("a failed commit changed the offset: %+v", f)
	}
	l.(*memLog).fail = nil
	huge := make([]CommitPartition, 20000)
	for i := range huge {
		huge[i] = CommitPartition{TopicPartition: TopicPartition{"a-rather-long-topic-name-for-a-big-commit", int32(i)}, Offset: 1, LeaderEpoch: -1}
	}
	r := h.c.Commit(CommitRequest{Group: "g", Generation: -1, RetentionMs: -1, Partitions: huge})()
	wantErr(t, "commit larger than a batch", r.Errors[0], kerr.InvalidCommitOffsetSize)
}

// TestLoadRestoresGroups writes groups and offsets through one coordinator and checks a new one
// over the same store (a restart) serves the same state.
func TestLoadRestoresGroups(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, "g", 2)
	tp := TopicPartition{"t", 3}
	md := "m"
	wantErr(t, "commit", commit(h, "g", gen, ids[0], tp, 100, &md), nil)
	wantErr(t, "commit", commit(h, "g", gen, ids[0], tp, 101, &md), nil)
	wantErr(t, "commit", commit(h, "gone", -1, "", tp, 5, nil), nil)
	if err := h.c.DeleteGroup("gone")(); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "commit", commit(h, "simple", -1, "", tp, 6, nil), nil)
	gerr, _, wait := h.c.DeleteOffsets("simple", []TopicPartition{tp})
	if gerr != nil || wait() != nil {
		t.Fatal(gerr)
	}
	h.c.Close()

	h2 := newHarness(t, Config{Store: h.store})
	h2.clock.Advance(0)
	if f := fetchOne(h2, "g", tp); f.Offset != 101 || f.Metadata != "m" || f.LeaderEpoch != 4 {
		t.Fatalf("restored offset %+v", f)
	}
	for _, g := range []string{"gone", "simple"} {
		if f := fetchOne(h2, g, tp); f.Offset != -1 {
			t.Fatalf("%s: deleted offset restored: %+v", g, f)
		}
	}
	d := h2.c.Describe("g")
	if d.State != "Stable" || len(d.Members) != 2 || d.Protocol != "range" || string(d.Members[0].Assignment) != "p0" {
		t.Fatalf("restored group %+v", d)
	}
	if d := h2.c.Describe("gone"); d.State != "Dead" {
		t.Fatalf("deleted group restored: %s", d.State)
	}
	// Members carry on in the same generation; one that never heartbeats again expires.
	wantErr(t, "heartbeat after restart", h2.heartbeat("g", ids[0], gen), nil)
	if s := h2.sync("g", ids[1], gen); s.Err != nil || string(s.Assignment) != "p1" {
		t.Fatalf("sync after restart: %+v", s)
	}
	h2.clock.Advance(6 * time.Second)
	wantErr(t, "heartbeat", h2.heartbeat("g", ids[0], gen), nil)
	h2.clock.Advance(6 * time.Second)
	wantErr(t, "b expired", h2.heartbeat("g", ids[1], gen), kerr.UnknownMemberID)
	wantErr(t, "a told to rejoin", h2.heartbeat("g", ids[0], gen), kerr.RebalanceInProgress)
}

// TestLoadKafkaRecords loads records as newer Kafka versions write them (flexible v4 values),
// plus record types weir does not own, compressed batches and an unknown value version.
func TestLoadKafkaRecords(t *testing.T) {
	store := newMemStore(1)
	l, _ := store.Log(0)
	proto, leader := "range", "m1"
	gv := &groupValue{ProtocolType: "consumer", Generation: 9, Protocol: &proto, Leader: &leader, CurrentStateTimestamp: 5,
		Members: []memberValue{{MemberID: "m1", ClientID: "c", ClientHost: "/h", RebalanceTimeout: 1000, SessionTimeout: 10000, Subscription: []byte("s"), Assignment: []byte("a")}}}
	batch := buildBatch(1, []kv{
		{Key: appendGroupKey(nil, "k"), Value: appendGroupValueV4(nil, gv)},
		{Key: appendOffsetKey(nil, "k", "t", 0), Value: appendOffsetValueV4(nil, offsetValue{Offset: 77, LeaderEpoch: 2, Metadata: "x", CommitTimestamp: 1, ExpireTimestamp: -1})},
		{Key: []byte{0, 3, 0, 1, 'k'}, Value: []byte("a KIP-848 record")},
		{Key: appendOffsetKey(nil, "k", "t", 1), Value: []byte{0, 9, 1, 2}},
	})
	if _, err := l.Append(batch); err != nil {
		t.Fatal(err)
	}
	compressed := buildBatch(1, []kv{{Key: appendOffsetKey(nil, "k", "t", 2), Value: appendOffsetValue(nil, offsetValue{Offset: 1, ExpireTimestamp: -1})}})
	compressed[22] |= 2 // snappy: skipped, not fatal
	if _, err := l.Append(compressed); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Store: store})
	if f := fetchOne(h, "k", TopicPartition{"t", 0}); f.Offset != 77 || f.LeaderEpoch != 2 || f.Metadata != "x" {
		t.Fatalf("v4 offset: %+v", f)
	}
	if d := h.c.Describe("k"); d.State != "Stable" || len(d.Members) != 1 || string(d.Members[0].Assignment) != "a" {
		t.Fatalf("v4 group: %+v", d)
	}
	if gen, _ := h.c.Generation("k"); gen != 9 {
		t.Fatalf("generation %d", gen)
	}
}

func TestLoadInProgress(t *testing.T) {
	store := newMemStore(4)
	store.Log(PartitionFor("g", 4))
	store.gate = make(chan struct{})
	c, err := New(Config{Store: store, Clock: newFakeClock(), RetentionCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	defer c.Close()
	r := c.Commit(CommitRequest{Group: "g", Generation: -1, RetentionMs: -1, Partitions: []CommitPartition{{TopicPartition: TopicPartition{"t", 0}}}})()
	if r.Errors[0] != kerr.CoordinatorLoadInProgress {
		t.Fatalf("commit while loading: %v", r.Errors[0])
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g"}); err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("heartbeat while loading: %v", err)
	}
	if _, err := c.List(nil, nil); err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("list while loading: %v", err)
	}
	close(store.gate)
	if err := c.WaitLoaded(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Heartbeat(HeartbeatRequest{Group: "g"}); err != kerr.UnknownMemberID {
		t.Fatalf("heartbeat after loading: %v", err)
	}
}

func TestOffsetExpiry(t *testing.T) {
	h := newHarness(t, Config{OffsetsRetention: time.Hour})
	tp := TopicPartition{"t", 0}
	// A consumer group: its offsets expire an hour after it became empty, not after the commit.
	ids, gen := stableGroup(t, h, "g", 1)
	wantErr(t, "commit", commit(h, "g", gen, ids[0], tp, 10, nil), nil)
	for range 2 * 3600 / 4 { // two hours of heartbeats
		h.clock.Advance(4 * time.Second)
		wantErr(t, "heartbeat", h.heartbeat("g", ids[0], gen), nil)
	}
	h.c.ExpireOffsets()
	if f := fetchOne(h, "g", tp); f.Offset != 10 {
		t.Fatalf("offsets of a live group expired: %+v", f)
	}
	h.c.Leave("g", []LeaveMember{{MemberID: ids[0]}})
	h.clock.Advance(59 * time.Minute)
	h.c.ExpireOffsets()
	if f := fetchOne(h, "g", tp); f.Offset != 10 {
		t.Fatalf("expired too early: %+v", f)
	}
	h.clock.Advance(2 * time.Minute)
	h.c.ExpireOffsets()
	if f := fetchOne(h, "g", tp); f.Offset != -1 {
		t.Fatalf("not expired: %+v", f)
	}
	if d := h.c.Describe("g"); d.State != "Dead" {
		t.Fatalf("empty group without offsets kept: %s", d.State)
	}
	// Tombstones went to the log: a restart does not bring the offset back.
	var tombstones int
	for _, r := range h.store.records(t, PartitionFor("g", 8)) {
		if r.Value == nil {
			tombstones++
		}
	}
	if tombstones != 2 {
		t.Fatalf("%d tombstones, want the offset's and the group's", tombstones)
	}

	// Standalone commits expire by commit time; a v2-v4 retention time wins.
	wantErr(t, "standalone", commit(h, "s", -1, "", tp, 1, nil), nil)
	r := h.c.Commit(CommitRequest{Group: "s", Generation: -1, RetentionMs: int64(10 * time.Minute / time.Millisecond),
		Partitions: []CommitPartition{{TopicPartition: TopicPartition{"t", 1}, Offset: 2, LeaderEpoch: -1}}})()
	wantErr(t, "retention commit", r.Errors[0], nil)
	h.clock.Advance(11 * time.Minute)
	h.c.ExpireOffsets()
	if f := fetchOne(h, "s", TopicPartition{"t", 1}); f.Offset != -1 {
		t.Fatalf("retention time not honoured: %+v", f)
	}
	if f := fetchOne(h, "s", tp); f.Offset != 1 {
		t.Fatalf("standalone offset expired early: %+v", f)
	}
	h.clock.Advance(time.Hour)
	h.c.ExpireOffsets()
	if f := fetchOne(h, "s", tp); f.Offset != -1 {
		t.Fatalf("standalone offset not expired: %+v", f)
	}
}
