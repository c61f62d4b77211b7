package coordinator

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicSet is a mutable topic table for Config.Topics.
type topicSet struct {
	mu sync.Mutex
	m  map[string]TopicMeta
}

func (s *topicSet) get() map[string]TopicMeta {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]TopicMeta, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

func (s *topicSet) set(name string, id byte, parts int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]TopicMeta{}
	}
	s.m[name] = TopicMeta{ID: [16]byte{id}, Partitions: parts}
}

func newCGHarness(t *testing.T, ts *topicSet, store *memStore) *harness {
	cfg := Config{Topics: ts.get, ConsumerSessionTimeout: 45 * time.Second, ConsumerHeartbeatInterval: 5 * time.Second}
	if store != nil {
		cfg.Store = store
	}
	return newHarness(t, cfg)
}

// cgMemberState is what a test member believes it owns.
type cgClient struct {
	id    string
	epoch int32
	owned partitions
	// can is the client's principal's DESCRIBE check (nil: every topic).
	can func(string) bool
}

func (h *harness) cgJoin(group, id string, topics ...string) (*cgClient, ConsumerHeartbeatResult) {
	h.t.Helper()
	r := h.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: group, MemberID: id, MemberEpoch: 0, RebalanceTimeoutMs: 30000,
		SubscribedTopicNames: topics, OwnedTopics: []ConsumerTopicPartitions{}, Version: 1, ClientID: "c", ClientHost: "/127.0.0.1"})()
	c := &cgClient{id: id, owned: partitions{}}
	if r.Err == nil {
		c.epoch = r.MemberEpoch
		c.apply(r)
	}
	return c, r
}

func (c *cgClient) apply(r ConsumerHeartbeatResult) {
	if r.HasAssign {
		c.owned = partitions{}
		for _, t := range r.Assignment {
			c.owned[t.TopicID] = append([]int32(nil), t.Partitions...)
		}
	}
	c.epoch = r.MemberEpoch
}

// cgBeat heartbeats as c (owned partitions sent) and applies the answer.
func (h *harness) cgBeat(group string, c *cgClient) ConsumerHeartbeatResult {
	h.t.Helper()
	owned := []ConsumerTopicPartitions{}
	for _, t := range c.owned.sortedTopics() {
		owned = append(owned, ConsumerTopicPartitions{TopicID: t, Partitions: c.owned[t]})
	}
	r := h.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: group, MemberID: c.id, MemberEpoch: c.epoch,
		RebalanceTimeoutMs: -1, OwnedTopics: owned, Version: 1, ClientID: "c", ClientHost: "/127.0.0.1", CanDescribe: c.can})()
	if r.Err == nil {
		c.apply(r)
	}
	return r
}

// noOverlap fails if two clients believe they own the same partition.
func noOverlap(t *testing.T, cs ...*cgClient) {
	t.Helper()
	seen := map[tpKey]string{}
	for _, c := range cs {
		for tid, ps := range c.owned {
			for _, p := range ps {
				k := tpKey{tid, p}
				if o, ok := seen[k]; ok {
					t.Fatalf("partition %v/%d owned by %s and %s", tid[0], p, o, c.id)
				}
				seen[k] = c.id
			}
		}
	}
}

func settle(t *testing.T, h *harness, group string, cs ...*cgClient) {
	t.Helper()
	for range 10 {
		for _, c := range cs {
			if r := h.cgBeat(group, c); r.Err != nil {
				t.Fatalf("heartbeat of %s: %v %s", c.id, r.Err, r.ErrMessage)
			}
			noOverlap(t, cs...)
		}
		if h.c.ConsumerDescribe(group).State == "Stable" {
			return
		}
	}
	t.Fatalf("group did not settle: %+v", h.c.ConsumerDescribe(group))
}

func TestConsumerGroupJoinRevokeAssign(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 1, 6)
	h := newCGHarness(t, ts, nil)
	a, r := h.cgJoin("g", "A", "t")
	if r.Err != nil || r.MemberEpoch != 1 || !r.HasAssign || a.owned.count() != 6 {
		t.Fatalf("first join: %+v", r)
	}
	b, r := h.cgJoin("g", "B", "t")
	if r.Err != nil || r.MemberEpoch != 2 || b.owned.count() != 0 {
		t.Fatalf("second join: %+v (owned %v)", r, b.owned)
	}
	if s := h.c.ConsumerDescribe("g").State; s != "Reconciling" {
		t.Fatalf("state %s, want Reconciling", s)
	}
	// A is asked to revoke first; until it acknowledges, B gets nothing.
	r = h.cgBeat("g", a)
	if r.MemberEpoch != 1 || a.owned.count() >= 6 {
		t.Fatalf("A not asked to revoke: %+v owned %v", r, a.owned)
	}
	noOverlap(t, a, b)
	if r = h.cgBeat("g", b); b.owned.count() != 0 {
		t.Fatalf("B got partitions A still owns: %v", b.owned)
	}
	settle(t, h, "g", a, b)
	if a.owned.count()+b.owned.count() != 6 || a.owned.count() == 0 || b.owned.count() == 0 {
		t.Fatalf("final assignment A %v B %v", a.owned, b.owned)
	}
	d := h.c.ConsumerDescribe("g")
	if d.Epoch != 2 || d.AssignmentEpoch != 2 || len(d.Members) != 2 || d.AssignorName != "uniform" {
		t.Fatalf("describe: %+v", d)
	}
	// B leaves: A gets everything at the next epoch.
	r = h.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "B", MemberEpoch: -1, RebalanceTimeoutMs: -1, Version: 1})()
	if r.Err != nil || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	b.owned = partitions{}
	settle(t, h, "g", a)
	if a.owned.count() != 6 || a.epoch != 3 {
		t.Fatalf("after leave: A %v epoch %d", a.owned, a.epoch)
	}
	gs, _ := h.c.List(nil, []string{"consumer"})
	if len(gs) != 1 || gs[0].Type != "consumer" || gs[0].State != "Stable" || gs[0].ProtocolType != "consumer" {
		t.Fatalf("list: %+v", gs)
	}
}

func TestConsumerGroupErrors(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 1, 2)
	h := newCGHarness(t, ts, nil)
	hb := func(r ConsumerHeartbeatRequest) ConsumerHeartbeatResult {
		if r.Version == 0 {
			r.Version = 1
		}
		return h.c.ConsumerHeartbeat(r)()
	}
	wantErr(t, "empty member id", hb(ConsumerHeartbeatRequest{Group: "g", RebalanceTimeoutMs: 1, SubscribedTopicNames: []string{"t"}, OwnedTopics: []ConsumerTopicPartitions{}}).Err, kerr.InvalidRequest)
	wantErr(t, "no rebalance timeout", hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMs: -1, SubscribedTopicNames: []string{"t"}, OwnedTopics: []ConsumerTopicPartitions{}}).Err, kerr.InvalidRequest)
	wantErr(t, "owned on join", hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMs: 1, SubscribedTopicNames: []string{"t"}, OwnedTopics: []ConsumerTopicPartitions{{TopicID: [16]byte{1}, Partitions: []int32{0}}}}).Err, kerr.InvalidRequest)
	wantErr(t, "no subscription", hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMs: 1, OwnedTopics: []ConsumerTopicPartitions{}}).Err, kerr.InvalidRequest)
	wantErr(t, "bad epoch", hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m", MemberEpoch: -3}).Err, kerr.InvalidRequest)
	bad := "("
	wantErr(t, "bad regex", hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMs: 1, SubscribedTopicRegex: &bad, OwnedTopics: []ConsumerTopicPartitions{}}).Err, kerr.InvalidRegularExpression)
	asg := "sticky"
	wantErr(t, "assignor", hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "m", RebalanceTimeoutMs: 1, ServerAssignor: &asg, SubscribedTopicNames: []string{"t"}, OwnedTopics: []ConsumerTopicPartitions{}}).Err, kerr.UnsupportedAssignor)
	wantErr(t, "unknown group", hb(ConsumerHeartbeatRequest{Group: "nope", MemberID: "m", MemberEpoch: 3}).Err, kerr.UnknownMemberID)

	// v0: the coordinator generates the member id.
	r := h.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", RebalanceTimeoutMs: 1000, SubscribedTopicNames: []string{"t"}, OwnedTopics: []ConsumerTopicPartitions{}, Version: 0, ClientID: "cl"})()
	if r.Err != nil || r.MemberID == "" {
		t.Fatalf("v0 join: %+v", r)
	}
	a, _ := h.cgJoin("g", "A", "t")
	wantErr(t, "greater epoch", hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "A", MemberEpoch: a.epoch + 1, RebalanceTimeoutMs: -1}).Err, kerr.FencedMemberEpoch)
	wantErr(t, "unknown member", hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "Z", MemberEpoch: 1, RebalanceTimeoutMs: -1}).Err, kerr.UnknownMemberID)
	wantErr(t, "unknown leave", hb(ConsumerHeartbeatRequest{Group: "g", MemberID: "Z", MemberEpoch: -1}).Err, kerr.UnknownMemberID)

	// A commit with a stale epoch; the current one works; a classic JoinGroup is refused.
	commit := func(epoch int32, version int16) *kerr.Error {
		return h.c.Commit(CommitRequest{Group: "g", Generation: epoch, MemberID: "A", RetentionMs: -1, Version: version,
			Partitions: []CommitPartition{{TopicPartition: TopicPartition{"t", 0}, Offset: 5, LeaderEpoch: -1}}})().Errors[0]
	}
	wantErr(t, "stale commit", commit(a.epoch-1, 9), kerr.StaleMemberEpoch)
	wantErr(t, "old commit version", commit(a.epoch, 8), kerr.UnsupportedVersion)
	wantErr(t, "commit", commit(a.epoch, 9), nil)
	id := "A"
	if f := h.c.FetchMember("g", nil, false, &id, a.epoch-1)(); f.Err != kerr.StaleMemberEpoch {
		t.Fatalf("stale fetch: %+v", f)
	}
	if f := h.c.FetchMember("g", nil, false, &id, a.epoch)(); f.Err != nil || len(f.Offsets) != 1 || f.Offsets[0].Offset != 5 {
		t.Fatalf("fetch: %+v", f)
	}
	jreq := joinReq("g", "")
	jreq.ProtocolType = "connect"
	jr := h.join(jreq)
	wantErr(t, "classic join of another protocol type", jr.Err, kerr.InconsistentGroupProtocol)
	if d := h.c.Describe("g"); d.State != "Dead" || d.NotFound != "Group g is not a classic group." {
		t.Fatalf("DescribeGroups of a consumer group: %+v", d)
	}
	wantErr(t, "delete non-empty", h.c.DeleteGroup("g")(), kerr.NonEmptyGroup)
}

func TestConsumerGroupMaxSizeAndStatic(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 1, 4)
	h := newHarness(t, Config{Topics: ts.get, ConsumerMaxSize: 2})
	inst := "i1"
	join := func(id string) ConsumerHeartbeatResult {
		return h.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: id, InstanceID: &inst, RebalanceTimeoutMs: 1000,
			SubscribedTopicNames: []string{"t"}, OwnedTopics: []ConsumerTopicPartitions{}, Version: 1})()
	}
	if r := join("S1"); r.Err != nil {
		t.Fatal(r.Err)
	}
	wantErr(t, "instance held", join("S2").Err, kerr.UnreleasedInstanceID)
	b, _ := h.cgJoin("g", "B", "t")
	_, r := h.cgJoin("g", "C", "t")
	wantErr(t, "max size", r.Err, kerr.GroupMaxSizeReached)
	_ = b
	// S1 leaves for now (-2) and comes back as S2 with its assignment.
	before := h.c.ConsumerDescribe("g")
	r = h.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "S1", InstanceID: &inst, MemberEpoch: -2, RebalanceTimeoutMs: -1, Version: 1})()
	if r.Err != nil || r.MemberEpoch != -2 {
		t.Fatalf("static leave: %+v", r)
	}
	var target []ConsumerTopicPartitions
	for _, m := range before.Members {
		if m.MemberID == "S1" {
			target = m.TargetAssignment
		}
	}
	r = join("S2")
	if r.Err != nil {
		t.Fatalf("static rejoin: %+v", r)
	}
	d := h.c.ConsumerDescribe("g")
	if d.Epoch != before.Epoch || len(d.Members) != 2 {
		t.Fatalf("static rejoin bumped or lost members: before %+v after %+v", before, d)
	}
	for _, m := range d.Members {
		if m.MemberID == "S2" && len(m.TargetAssignment) != len(target) {
			t.Fatalf("S2 target %v, want S1's %v", m.TargetAssignment, target)
		}
		if m.MemberID == "S1" {
			t.Fatal("S1 still a member")
		}
	}
}

func TestConsumerGroupTimeouts(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 1, 4)
	h := newCGHarness(t, ts, nil)
	a, _ := h.cgJoin("g", "A", "t")
	b, _ := h.cgJoin("g", "B", "t")
	// A is told to revoke but never does: fenced after its rebalance timeout (30s) while B
	// keeps heartbeating.
	h.cgBeat("g", a)
	for range 7 {
		h.clock.Advance(5 * time.Second)
		h.cgBeat("g", b)
	}
	if len(h.c.ConsumerDescribe("g").Members) != 1 {
		t.Fatalf("A not fenced after its rebalance timeout: %+v", h.c.ConsumerDescribe("g"))
	}
	wantErr(t, "fenced member", h.cgBeat("g", a).Err, kerr.UnknownMemberID)
	settle(t, h, "g", b)
	if b.owned.count() != 4 {
		t.Fatalf("B owns %v", b.owned)
	}
	// B stops heartbeating: its session (45s) expires.
	h.clock.Advance(46 * time.Second)
	waitFor(t, func() bool { return h.c.ConsumerDescribe("g").State == "Empty" })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 200 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met")
}

func TestConsumerGroupRegexAndMetadata(t *testing.T) {
	ts := &topicSet{}
	ts.set("orders-1", 1, 2)
	ts.set("xorders-1", 2, 2)
	h := newCGHarness(t, ts, nil)
	re := "orders-.*"
	r := h.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "A", RebalanceTimeoutMs: 1000,
		SubscribedTopicRegex: &re, OwnedTopics: []ConsumerTopicPartitions{}, Version: 1})()
	if r.Err != nil || len(r.Assignment) != 1 || r.Assignment[0].TopicID != [16]byte{1} {
		t.Fatalf("regex join: %+v", r)
	}
	a := &cgClient{id: "A"}
	a.apply(r)
	// A new matching topic and more partitions: the group epoch moves and A gets them.
	ts.set("orders-2", 3, 3)
	h.c.MetadataChanged()
	settle(t, h, "g", a)
	if a.owned.count() != 5 || a.epoch != 2 {
		t.Fatalf("after a new topic: %v epoch %d", a.owned, a.epoch)
	}
	ts.set("orders-2", 3, 4)
	h.c.MetadataChanged()
	settle(t, h, "g", a)
	if a.owned.count() != 6 {
		t.Fatalf("after new partitions: %v", a.owned)
	}
	// No change: no new epoch.
	h.c.MetadataChanged()
	settle(t, h, "g", a)
	if a.epoch != 3 {
		t.Fatalf("epoch %d after no change", a.epoch)
	}
}

func TestConsumerGroupRestart(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 1, 4)
	store := newMemStore(8)
	h := newCGHarness(t, ts, store)
	a, _ := h.cgJoin("g", "A", "t")
	b, _ := h.cgJoin("g", "B", "t")
	settle(t, h, "g", a, b)
	h.c.Commit(CommitRequest{Group: "g", Generation: a.epoch, MemberID: "A", RetentionMs: -1, Version: 9,
		Partitions: []CommitPartition{{TopicPartition: TopicPartition{"t", 0}, Offset: 7, LeaderEpoch: -1}}})()
	before := h.c.ConsumerDescribe("g")
	h.c.Close()

	h2 := newCGHarness(t, ts, store)
	after := h2.c.ConsumerDescribe("g")
	if after.Err != nil || after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch || len(after.Members) != 2 {
		t.Fatalf("after restart %+v, before %+v", after, before)
	}
	for i := range after.Members {
		if after.Members[i].MemberEpoch != before.Members[i].MemberEpoch || len(after.Members[i].Assignment) != len(before.Members[i].Assignment) {
			t.Fatalf("member %d: before %+v after %+v", i, before.Members[i], after.Members[i])
		}
	}
	// Members carry on with their epochs; no rebalance.
	for _, c := range []*cgClient{a, b} {
		if r := h2.cgBeat("g", c); r.Err != nil || r.MemberEpoch != before.Epoch {
			t.Fatalf("heartbeat after restart: %+v", r)
		}
	}
	if f := h2.c.Fetch("g", nil)(); len(f.Offsets) != 1 || f.Offsets[0].Offset != 7 {
		t.Fatalf("offsets after restart: %+v", f)
	}
	// Both leave; the group can be deleted and is gone after a restart.
	for _, id := range []string{"A", "B"} {
		h2.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: id, MemberEpoch: -1, Version: 1})()
	}
	wantErr(t, "delete", h2.c.DeleteGroup("g")(), nil)
	h2.c.Close()
	h3 := newCGHarness(t, ts, store)
	if d := h3.c.ConsumerDescribe("g"); d.Err != kerr.GroupIDNotFound {
		t.Fatalf("deleted group after restart: %+v", d)
	}
}

// TestConsumerRecordBytes checks the records against bytes laid out by hand from Kafka's JSON
// schemas.
func TestConsumerRecordBytes(t *testing.T) {
	// ConsumerGroupMemberMetadataKey: int16 5, string group, string member.
	if got, want := cgMemberKey("g", "m"), []byte{0, 5, 0, 1, 'g', 0, 1, 'm'}; !bytes.Equal(got, want) {
		t.Fatalf("member key % x, want % x", got, want)
	}
	// ConsumerGroupMetadataValue v0: version, epoch, tagged fields (tag 0 MetadataHash).
	if got, want := appendCGMetadataValue(nil, cgMetadataValue{Epoch: 7}), []byte{0, 0, 0, 0, 0, 7, 0}; !bytes.Equal(got, want) {
		t.Fatalf("metadata value % x, want % x", got, want)
	}
	mv, err := parseCGMetadataValue([]byte{0, 0, 0, 0, 0, 7, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 9})
	if err != nil || mv.Epoch != 7 || mv.MetadataHash != 9 {
		t.Fatalf("metadata value with hash: %+v %v", mv, err)
	}
	// ConsumerGroupMemberMetadataValue v0 (compact strings: length+1).
	inst := "i"
	mem := &cgMemberValue{InstanceID: &inst, ClientID: "c", ClientHost: "h", SubscribedTopics: []string{"t"}, RebalanceTimeoutMs: 5}
	want := []byte{0, 0, 2, 'i', 0, 2, 'c', 2, 'h', 2, 2, 't', 0, 0, 0, 0, 5, 0, 0}
	if got := appendCGMemberValue(nil, mem); !bytes.Equal(got, want) {
		t.Fatalf("member value % x, want % x", got, want)
	}
	// An unknown tagged field is skipped.
	withTag := append(append([]byte{}, want[:len(want)-1]...), 1, 5, 2, 0xAA, 0xBB)
	if got, err := parseCGMemberValue(withTag); err != nil || got.ClientID != "c" || len(got.SubscribedTopics) != 1 || got.RebalanceTimeoutMs != 5 || got.Classic != nil {
		t.Fatalf("member value with tag: %+v %v", got, err)
	}
	// The ClassicMemberMetadata tagged field (tag 0): session timeout, then the protocols
	// (compact string name, compact bytes metadata, tags), then the struct's tags.
	mem.Classic = &classicMeta{SessionTimeoutMs: 10, Protocols: []Protocol{{Name: "r", Metadata: []byte{7}}}}
	wantTagged := append(append([]byte{}, want[:len(want)-1]...), 1, 0, 11, 0, 0, 0, 10, 2, 2, 'r', 2, 7, 0, 0)
	if got := appendCGMemberValue(nil, mem); !bytes.Equal(got, wantTagged) {
		t.Fatalf("member value with classic metadata % x, want % x", got, wantTagged)
	}
	if got, err := parseCGMemberValue(wantTagged); err != nil || got.Classic == nil || got.Classic.SessionTimeoutMs != 10 ||
		len(got.Classic.Protocols) != 1 || got.Classic.Protocols[0].Name != "r" || !bytes.Equal(got.Classic.Protocols[0].Metadata, []byte{7}) {
		t.Fatalf("member value with classic metadata: %+v %v", got, err)
	}
	if _, err := parseCGMemberValue(append(append([]byte{}, want[:len(want)-1]...), 1, 0, 5, 0, 0, 0, 10, 0x7f)); err == nil {
		t.Fatal("a classic metadata claiming 126 protocols in 0 bytes parsed")
	}
	// ConsumerGroupCurrentMemberAssignmentValue v0.
	tid := [16]byte{0xAB}
	cur := &cgCurrentValue{MemberEpoch: 3, PreviousMemberEpoch: 2, State: msUnrevoked, Assigned: partitions{tid: {1, 2}}, PendingRevocation: partitions{}}
	var wb []byte
	wb = kbin.AppendInt16(wb, 0)
	wb = kbin.AppendInt32(wb, 3)
	wb = kbin.AppendInt32(wb, 2)
	wb = append(wb, 1)                         // state
	wb = append(wb, 2)                         // one topic
	wb = append(wb, tid[:]...)                 // topic id
	wb = append(wb, 3, 0, 0, 0, 1, 0, 0, 0, 2) // two partitions
	wb = append(wb, 0)                         // topic tags
	wb = append(wb, 1)                         // no pending topics
	wb = append(wb, 0)                         // tags
	if got := appendCGCurrentValue(nil, cur); !bytes.Equal(got, wb) {
		t.Fatalf("current value % x, want % x", got, wb)
	}
	back, err := parseCGCurrentValue(wb)
	if err != nil || back.MemberEpoch != 3 || back.State != msUnrevoked || !back.Assigned.equal(cur.Assigned) {
		t.Fatalf("current value back: %+v %v", back, err)
	}
	// ConsumerGroupRegularExpressionValue v0.
	rv := &cgRegexValue{Topics: []string{"a"}, Version: 1, Timestamp: 2}
	if got, want := appendCGRegexValue(nil, rv), []byte{0, 0, 2, 2, 'a', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0}; !bytes.Equal(got, want) {
		t.Fatalf("regex value % x, want % x", got, want)
	}
	// Truncated or oversized values are refused, never panic.
	for _, b := range [][]byte{nil, {0}, {0, 0, 0xff}, wb[:10], {0, 0, 0, 0, 0, 1, 0, 0, 0, 0x7f}} {
		parseCGCurrentValue(b)
		parseCGMemberValue(b)
		parseCGTargetMemberValue(b)
		parseCGRegexValue(b)
		parseCGMetadataValue(b)
	}
}
