package coordinator

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/sharestate"
)

// sgTopics is a ShareTopics test double.
type sgTopics struct {
	mu sync.Mutex
	m  map[string]ShareTopic // guarded by mu
}

func newSGTopics(ts ...ShareTopic) *sgTopics {
	s := &sgTopics{m: map[string]ShareTopic{}}
	for _, t := range ts {
		s.m[t.Name] = t
	}
	return s
}

func (s *sgTopics) TopicByName(n string) (ShareTopic, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.m[n]
	return t, ok
}

func (s *sgTopics) TopicByID(id [16]byte) (ShareTopic, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.m {
		if t.ID == id {
			return t, true
		}
	}
	return ShareTopic{}, false
}

func (s *sgTopics) remove(n string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, n)
}

var (
	sgTopicA = ShareTopic{ID: [16]byte{1}, Name: "a", Partitions: 4}
	sgTopicB = ShareTopic{ID: [16]byte{2}, Name: "b", Partitions: 2}
)

func newShareHarness(t *testing.T, topics *sgTopics, p sharestate.Persister, store *memStore) *harness {
	cfg := Config{Share: ShareConfig{Topics: topics, Persister: p}}
	if store != nil {
		cfg.Store = store
	}
	return newHarness(t, cfg)
}

func (h *harness) shareHB(group, member string, epoch int32, topics ...string) ShareHeartbeatResult {
	h.t.Helper()
	req := ShareHeartbeatRequest{Group: group, MemberID: member, MemberEpoch: epoch, ClientID: "c", ClientHost: "/127.0.0.1"}
	if topics != nil {
		req.Subscribed = topics
	}
	return h.c.ShareHeartbeat(req)
}

func countParts(as ...map[[16]byte][]int32) map[[16]byte]int {
	out := map[[16]byte]int{}
	for _, a := range as {
		for id, ps := range a {
			out[id] += len(ps)
		}
	}
	return out
}

func TestShareJoinAssignLeave(t *testing.T) {
	h := newShareHarness(t, newSGTopics(sgTopicA, sgTopicB), nil, nil)
	r1 := h.shareHB("sg", "m1", 0, "a")
	wantErr(t, "join m1", r1.Err, nil)
	if r1.MemberEpoch != 1 || !r1.HasAssignment || len(r1.Assignment[sgTopicA.ID]) != 4 {
		t.Fatalf("m1 join: %+v", r1)
	}
	if r1.HeartbeatIntervalMs != 5000 {
		t.Fatalf("heartbeat interval %d", r1.HeartbeatIntervalMs)
	}
	r2 := h.shareHB("sg", "m2", 0, "b", "a")
	wantErr(t, "join m2", r2.Err, nil)
	if r2.MemberEpoch != 2 {
		t.Fatalf("m2 epoch %d", r2.MemberEpoch)
	}
	// m1 at epoch 1 catches up to epoch 2 with its new assignment at once.
	r1 = h.shareHB("sg", "m1", 1, nil...)
	wantErr(t, "m1 heartbeat", r1.Err, nil)
	if r1.MemberEpoch != 2 || !r1.HasAssignment {
		t.Fatalf("m1 after m2 joined: %+v", r1)
	}
	n := countParts(r1.Assignment, r2.Assignment)
	if n[sgTopicA.ID] != 4 || n[sgTopicB.ID] != 2 || len(r1.Assignment[sgTopicB.ID]) != 0 {
		t.Fatalf("assignments m1 %v m2 %v", r1.Assignment, r2.Assignment)
	}
	// A heartbeat with nothing new carries no assignment.
	r1 = h.shareHB("sg", "m1", 2, nil...)
	if r1.Err != nil || r1.HasAssignment || r1.MemberEpoch != 2 {
		t.Fatalf("steady heartbeat: %+v", r1)
	}
	d := h.c.ShareDescribe("sg")
	if d.Err != nil || d.State != "Stable" || d.GroupEpoch != 2 || d.AssignmentEpoch != 2 || len(d.Members) != 2 || d.Assignor != "simple" {
		t.Fatalf("describe: %+v", d)
	}
	ls, _ := h.c.List(nil, []string{"share"})
	if len(ls) != 1 || ls[0].Type != "share" || ls[0].ProtocolType != "share" || ls[0].State != "Stable" {
		t.Fatalf("list: %+v", ls)
	}
	// Leave: epoch bumped; m2 gets everything at its next heartbeat.
	lv := h.shareHB("sg", "m1", -1, nil...)
	if lv.Err != nil || lv.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", lv)
	}
	r2 = h.shareHB("sg", "m2", 2, nil...)
	if r2.Err != nil || r2.MemberEpoch != 3 || len(r2.Assignment[sgTopicA.ID]) != 4 || len(r2.Assignment[sgTopicB.ID]) != 2 {
		t.Fatalf("m2 after m1 left: %+v", r2)
	}
	wantErr(t, "second leave", h.shareHB("sg", "m1", -1, nil...).Err, kerr.UnknownMemberID)
	h.shareHB("sg", "m2", -1, nil...)
	if d := h.c.ShareDescribe("sg"); d.State != "Empty" || len(d.Members) != 0 {
		t.Fatalf("describe after all left: %+v", d)
	}
}

func TestShareHeartbeatErrors(t *testing.T) {
	h := newShareHarness(t, newSGTopics(sgTopicA), nil, nil)
	for _, c := range []struct {
		name string
		req  ShareHeartbeatRequest
		want *kerr.Error
	}{
		{"empty group", ShareHeartbeatRequest{MemberID: "m", Subscribed: []string{"a"}}, kerr.InvalidRequest},
		{"empty member", ShareHeartbeatRequest{Group: "g"}, kerr.InvalidRequest},
		{"join without topics", ShareHeartbeatRequest{Group: "g", MemberID: "m"}, kerr.InvalidRequest},
		{"bad epoch", ShareHeartbeatRequest{Group: "g", MemberID: "m", MemberEpoch: -2}, kerr.InvalidRequest},
		{"empty rack", ShareHeartbeatRequest{Group: "g", MemberID: "m", RackID: new(string), Subscribed: []string{"a"}}, kerr.InvalidRequest},
		{"unknown group", ShareHeartbeatRequest{Group: "nope", MemberID: "m", MemberEpoch: 3}, kerr.GroupIDNotFound},
	} {
		wantErr(t, c.name, h.c.ShareHeartbeat(c.req).Err, c.want)
	}
	if ls, _ := h.c.List(nil, nil); len(ls) != 0 {
		t.Fatalf("failed requests left groups: %+v", ls)
	}
	r := h.shareHB("g", "m", 0, "a")
	wantErr(t, "join", r.Err, nil)
	wantErr(t, "epoch ahead", h.shareHB("g", "m", r.MemberEpoch+1, nil...).Err, kerr.FencedMemberEpoch)
	wantErr(t, "unknown member", h.shareHB("g", "x", 1, nil...).Err, kerr.UnknownMemberID)
	// A fenced member rejoins with epoch 0 and its id, and gets its full assignment.
	r = h.shareHB("g", "m", 0, "a")
	if r.Err != nil || !r.HasAssignment || len(r.Assignment[sgTopicA.ID]) != 4 {
		t.Fatalf("rejoin: %+v", r)
	}
	if d := h.c.ShareDescribe("nope"); d.Err != kerr.GroupIDNotFound {
		t.Fatalf("describe unknown: %+v", d)
	}
}

func TestShareGroupTypeConflicts(t *testing.T) {
	h := newShareHarness(t, newSGTopics(sgTopicA), nil, nil)
	// A classic group's id is not a share group's.
	j := h.join(joinReq("classic", ""))
	wantErr(t, "classic join", j.Err, nil)
	wantErr(t, "share heartbeat on a classic group", h.shareHB("classic", "m", 0, "a").Err, kerr.GroupIDNotFound)
	wantErr(t, "share describe of a classic group", h.c.ShareDescribe("classic").Err, kerr.GroupIDNotFound)
	// And the other way round.
	wantErr(t, "share join", h.shareHB("sh", "m", 0, "a").Err, nil)
	wantErr(t, "classic join on a share group", h.join(joinReq("sh", "")).Err, kerr.InconsistentGroupProtocol)
	if d := h.c.Describe("sh"); d.State != "Dead" || d.Err != nil || d.NotFound != "Group sh is not a classic group." {
		t.Fatalf("DescribeGroups of a share group: %+v", d)
	}
	res := h.c.Commit(CommitRequest{Group: "sh", Generation: -1, Partitions: []CommitPartition{{TopicPartition: TopicPartition{"a", 0}, Offset: 1}}})()
	wantErr(t, "commit to a share group", res.Errors[0], kerr.GroupIDNotFound)
	ls, _ := h.c.List(nil, []string{"classic"})
	if len(ls) != 1 || ls[0].Group != "classic" {
		t.Fatalf("list classic: %+v", ls)
	}
}

func TestShareSessionTimeout(t *testing.T) {
	h := newShareHarness(t, newSGTopics(sgTopicA), nil, nil)
	wantErr(t, "join", h.shareHB("g", "m1", 0, "a").Err, nil)
	r2 := h.shareHB("g", "m2", 0, "a")
	wantErr(t, "join m2", r2.Err, nil)
	last := r2.Assignment
	for range 10 { // m2 keeps heartbeating, m1 does not
		h.clock.Advance(5 * time.Second)
		r2 = h.shareHB("g", "m2", r2.MemberEpoch, nil...)
		wantErr(t, "m2 heartbeat", r2.Err, nil)
		if r2.HasAssignment {
			last = r2.Assignment
		}
	}
	d := h.c.ShareDescribe("g")
	if len(d.Members) != 1 || d.Members[0].MemberID != "m2" {
		t.Fatalf("after m1's session expired: %+v", d)
	}
	if len(last[sgTopicA.ID]) != 4 {
		t.Fatalf("m2 should hold every partition: %+v", last)
	}
	wantErr(t, "expired member", h.shareHB("g", "m1", 1, nil...).Err, kerr.UnknownMemberID)
	h.clock.Advance(46 * time.Second)
	if d := h.c.ShareDescribe("g"); d.State != "Empty" {
		t.Fatalf("state %s", d.State)
	}
}

func TestShareMaxSize(t *testing.T) {
	h := newHarness(t, Config{Share: ShareConfig{Topics: newSGTopics(sgTopicA), MaxSize: 2}})
	wantErr(t, "m1", h.shareHB("g", "m1", 0, "a").Err, nil)
	wantErr(t, "m2", h.shareHB("g", "m2", 0, "a").Err, nil)
	wantErr(t, "m3", h.shareHB("g", "m3", 0, "a").Err, kerr.GroupMaxSizeReached)
	wantErr(t, "m1 rejoin", h.shareHB("g", "m1", 0, "a").Err, nil)
}

// sgWaitInitialized waits until every partition of topic t is initialized for group g.
func sgWaitInitialized(t *testing.T, p sharestate.Persister, g string, topic ShareTopic, epoch int32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok := true
		for part := int32(0); part < topic.Partitions; part++ {
			s, err := p.ReadSummary(context.Background(), sharestate.Key{Group: g, TopicID: topic.ID, Partition: part}, 0)
			if err != nil || s.StartOffset != -1 || s.StateEpoch != epoch {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("share partitions of %s not initialized", topic.Name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestShareInitializeDeleteAndReload(t *testing.T) {
	topics := newSGTopics(sgTopicA, sgTopicB)
	p := sharestate.NewMemory()
	store := newMemStore(8)
	h := newShareHarness(t, topics, p, store)
	r := h.shareHB("g", "m1", 0, "a", "b")
	wantErr(t, "join", r.Err, nil)
	sgWaitInitialized(t, p, "g", sgTopicA, 1)
	sgWaitInitialized(t, p, "g", sgTopicB, 1)
	// The bookkeeping record reaches the log once initialization is done.
	waitFor(t, func() bool {
		var st shareStateValue
		found := false
		for _, rec := range store.records(t, h.c.PartitionFor("g")) {
			if v, _ := keyVersion(rec.Key); v == recShareGroupStatePartitionMetadata && rec.Value != nil {
				st, _ = parseShareStateValue(rec.Value)
				found = true
			}
		}
		return found && len(st.Initialized[sgTopicA.ID].Partitions) == 4 && len(st.Initializing) == 0
	})
	wantErr(t, "delete of a group with members", h.c.DeleteGroup("g")(), kerr.NonEmptyGroup)

	// A new coordinator over the same log loads the group: members, epochs, assignments.
	h.c.Close()
	h2 := newShareHarness(t, topics, p, store)
	d := h2.c.ShareDescribe("g")
	if d.Err != nil || d.State != "Stable" || d.GroupEpoch != 1 || len(d.Members) != 1 || d.Members[0].MemberEpoch != 1 ||
		len(d.Members[0].Assignment[sgTopicA.ID]) != 4 || len(d.Members[0].Subscribed) != 2 {
		t.Fatalf("after reload: %+v", d)
	}
	r = h2.shareHB("g", "m1", 1, nil...)
	if r.Err != nil || r.MemberEpoch != 1 || r.HasAssignment {
		t.Fatalf("heartbeat after reload: %+v", r)
	}
	// A deleted topic's share-partition state is deleted.
	topics.remove("b")
	r = h2.shareHB("g", "m1", 1, nil...)
	wantErr(t, "heartbeat after topic b was deleted", r.Err, nil)
	waitFor(t, func() bool {
		_, err := p.ReadSummary(context.Background(), sharestate.Key{Group: "g", TopicID: sgTopicB.ID, Partition: 0}, 0)
		return errors.Is(err, sharestate.ErrNotInitialized)
	})
	// Leave, then delete: state of every partition goes, the group is gone.
	wantErr(t, "leave", h2.shareHB("g", "m1", -1, nil...).Err, nil)
	wantErr(t, "delete", h2.c.DeleteGroup("g")(), nil)
	if _, err := p.ReadSummary(context.Background(), sharestate.Key{Group: "g", TopicID: sgTopicA.ID, Partition: 2}, 0); !errors.Is(err, sharestate.ErrNotInitialized) {
		t.Fatalf("state after delete: %v", err)
	}
	wantErr(t, "describe deleted", h2.c.ShareDescribe("g").Err, kerr.GroupIDNotFound)
	h2.c.Close()
	h3 := newShareHarness(t, topics, p, store)
	wantErr(t, "describe deleted after reload", h3.c.ShareDescribe("g").Err, kerr.GroupIDNotFound)
	if ls, _ := h3.c.List(nil, nil); len(ls) != 0 {
		t.Fatalf("groups after reload: %+v", ls)
	}
}

func TestShareRecordEncodings(t *testing.T) {
	rack := "r1"
	mv := shareMemberValue{RackID: &rack, ClientID: "cid", ClientHost: "/1.2.3.4", Subscribed: []string{"a", "b"}}
	got, err := parseShareMemberValue(appendShareMemberValue(nil, mv))
	if err != nil || *got.RackID != "r1" || got.ClientID != "cid" || got.ClientHost != "/1.2.3.4" || len(got.Subscribed) != 2 {
		t.Fatalf("member value: %+v %v", got, err)
	}
	e, hash, err := parseShareGroupValue(appendShareGroupValue(nil, 7, -3))
	if err != nil || e != 7 || hash != -3 {
		t.Fatalf("group value: %d %d %v", e, hash, err)
	}
	// Kafka 4.0's ShareGroupMetadataValue has no MetadataHash.
	if e, _, err := parseShareGroupValue([]byte{0, 0, 0, 0, 0, 9, 0}); err != nil || e != 9 {
		t.Fatalf("4.0 group value: %d %v", e, err)
	}
	te, err := parseShareTargetMetaValue(appendShareTargetMetaValue(nil, 5))
	if err != nil || te != 5 {
		t.Fatalf("target metadata: %d %v", te, err)
	}
	tp := topicParts{{1}: {0, 2}, {2}: {1}}
	gt, err := parseShareTargetMemberValue(appendShareTargetMemberValue(nil, tp))
	if err != nil || !gt.equal(tp) {
		t.Fatalf("target member: %v %v", gt, err)
	}
	av := shareAssignmentValue{MemberEpoch: 4, PreviousMemberEpoch: 3, State: shareMemberStable, Assigned: tp}
	ga, err := parseShareAssignmentValue(appendShareAssignmentValue(nil, av))
	if err != nil || ga.MemberEpoch != 4 || ga.PreviousMemberEpoch != 3 || ga.State != 1 || !ga.Assigned.equal(tp) {
		t.Fatalf("assignment: %+v %v", ga, err)
	}
	sv := shareStateValue{
		Initializing: map[[16]byte]shareTopicInfo{{3}: {Name: "c", Partitions: []int32{1}}},
		Initialized:  map[[16]byte]shareTopicInfo{{1}: {Name: "a", Partitions: []int32{0, 1, 2}}},
		Deleting:     map[[16]byte]string{{9}: "gone"},
	}
	gs, err := parseShareStateValue(appendShareStateValue(nil, sv))
	if err != nil || gs.Initializing[[16]byte{3}].Name != "c" || len(gs.Initialized[[16]byte{1}].Partitions) != 3 || gs.Deleting[[16]byte{9}] != "gone" {
		t.Fatalf("state partition metadata: %+v %v", gs, err)
	}
	// Exact bytes of a small value: version 0, compact arrays, empty tagged fields.
	want := []byte{0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 2, 0, 0, 0, 7, 0, 0}
	if b := appendShareTargetMemberValue(nil, topicParts{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}: {7}}); string(b) != string(want) {
		t.Fatalf("target member bytes %v, want %v", b, want)
	}
	// Keys.
	g, m, err := parseShareKey(recShareGroupCurrentMemberAssignment, appendShareMemberKey(nil, recShareGroupCurrentMemberAssignment, "grp", "mem"))
	if err != nil || g != "grp" || m != "mem" {
		t.Fatalf("member key: %q %q %v", g, m, err)
	}
	if k := appendShareKey(nil, recShareGroupMetadata, "g"); string(k) != "\x00\x0b\x00\x01g" {
		t.Fatalf("group key %q", k)
	}
	// Truncated or corrupt values are errors, never panics or huge allocations.
	full := appendShareStateValue(nil, sv)
	for i := range full {
		_, _ = parseShareStateValue(full[:i])
	}
	if _, err := parseShareTargetMemberValue([]byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil {
		t.Fatal("a huge array length parsed")
	}
}
