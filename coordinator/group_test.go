package coordinator

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestJoinSyncHeartbeat walks two members through the protocol: MEMBER_ID_REQUIRED, the first
// joiner leads and alone gets the members, the follower's sync waits for the leader's, a member
// the leader assigned nothing gets a zero-length assignment.
func TestJoinSyncHeartbeat(t *testing.T) {
	h := newHarness(t, Config{})
	first := startJoin(h, joinReq("g", "")).get(t)
	wantErr(t, "first join", first.Err, kerr.MemberIDRequired)
	if first.MemberID == "" {
		t.Fatal("MEMBER_ID_REQUIRED without a member id")
	}
	a := startJoin(h, joinReq("g", first.MemberID)).get(t)
	wantErr(t, "rejoin", a.Err, nil)
	if a.Leader != a.MemberID || a.Generation != 1 || len(a.Members) != 1 || *a.Protocol != "range" || *a.ProtocolType != "consumer" {
		t.Fatalf("lone join: %+v", a)
	}
	sa := h.sync("g", a.MemberID, 1, Assignment{a.MemberID, []byte("all")})
	if sa.Err != nil || string(sa.Assignment) != "all" || h.state("g") != "Stable" {
		t.Fatalf("sync: %+v, state %s", sa, h.state("g"))
	}

	// b joins: a learns of the rebalance from its heartbeat and rejoins.
	bj := startJoin(h, joinReq("g", ""))
	bid := bj.get(t).MemberID
	bj = startJoin(h, joinReq("g", bid))
	bj.parked(t)
	wantErr(t, "heartbeat during rebalance", h.heartbeat("g", a.MemberID, 1), kerr.RebalanceInProgress)
	aj := startJoin(h, joinReq("g", a.MemberID)).get(t)
	b := bj.get(t)
	if aj.Err != nil || b.Err != nil || aj.Generation != 2 || b.Generation != 2 || aj.Leader != a.MemberID || b.Leader != a.MemberID {
		t.Fatalf("rebalance: leader %+v follower %+v", aj, b)
	}
	if len(aj.Members) != 2 || len(b.Members) != 0 {
		t.Fatalf("members: leader sees %d, follower %d", len(aj.Members), len(b.Members))
	}
	wantErr(t, "heartbeat while completing", h.heartbeat("g", b.MemberID, 2), nil)
	wantErr(t, "stale heartbeat", h.heartbeat("g", b.MemberID, 1), kerr.IllegalGeneration)
	fs := startSync(h, SyncRequest{Group: "g", MemberID: b.MemberID, Generation: 2})
	fs.parked(t)
	if s := h.state("g"); s != "CompletingRebalance" {
		t.Fatalf("state %s", s)
	}
	ls := h.sync("g", a.MemberID, 2, Assignment{a.MemberID, []byte("everything")})
	f := fs.get(t)
	if ls.Err != nil || f.Err != nil || string(ls.Assignment) != "everything" || f.Assignment == nil || len(f.Assignment) != 0 {
		t.Fatalf("syncs: leader %+v follower %+v", ls, f)
	}
	// A follower syncing again in Stable gets its assignment at once.
	if again := h.sync("g", b.MemberID, 2); again.Err != nil || len(again.Assignment) != 0 {
		t.Fatalf("stable sync: %+v", again)
	}
	wantErr(t, "heartbeat", h.heartbeat("g", a.MemberID, 2), nil)
	wantErr(t, "unknown member", h.heartbeat("g", "nobody", 2), kerr.UnknownMemberID)
	wantErr(t, "unknown group", h.heartbeat("nogroup", "nobody", 2), kerr.UnknownMemberID)
	if gen, _ := h.c.Generation("g"); gen != 2 {
		t.Fatalf("generation %d", gen)
	}
	// A follower rejoining a stable group unchanged gets the current generation, no rebalance.
	if r := startJoin(h, joinReq("g", b.MemberID)).get(t); r.Err != nil || r.Generation != 2 || len(r.Members) != 0 {
		t.Fatalf("follower rejoin: %+v", r)
	}
	if h.state("g") != "Stable" {
		t.Fatalf("follower rejoin rebalanced: %s", h.state("g"))
	}
}

// TestLegacyJoinNoMemberIDRequired: before v4 a new member joins at once.
func TestLegacyJoinNoMemberIDRequired(t *testing.T) {
	h := newHarness(t, Config{})
	r := joinReq("g", "")
	r.RequireKnownMemberID = false
	res := startJoin(h, r).get(t)
	if res.Err != nil || res.Generation != 1 || res.MemberID == "" {
		t.Fatalf("v3 join: %+v", res)
	}
}

func TestInitialRebalanceDelay(t *testing.T) {
	h := newHarness(t, Config{InitialRebalanceDelay: 3 * time.Second})
	r := joinReq("g", "")
	r.RequireKnownMemberID = false
	r.RebalanceTimeoutMs = 10000
	a := startJoin(h, r)
	h.clock.Advance(2 * time.Second)
	a.parked(t)
	b := startJoin(h, r) // a new member during the delay extends it
	h.clock.Advance(time.Second)
	a.parked(t)
	h.clock.Advance(2 * time.Second)
	a.parked(t)
	h.clock.Advance(time.Second)
	ra, rb := a.get(t), b.get(t)
	if ra.Err != nil || rb.Err != nil || ra.Generation != 1 || len(ra.Members)+len(rb.Members) != 2 {
		t.Fatalf("after the delay: %+v %+v", ra, rb)
	}
}

// stableGroup makes a stable group of n members and returns their ids and the generation.
func stableGroup(t *testing.T, h *harness, group string, n int) ([]string, int32) {
	t.Helper()
	var ids []string
	var waits []pending[JoinResult]
	for i := range n {
		r := joinReq(group, "")
		r.ClientID = fmt.Sprintf("c%d", i)
		res := startJoin(h, r).get(t)
		r.MemberID = res.MemberID
		ids = append(ids, res.MemberID)
		if i == 0 {
			res = startJoin(h, r).get(t)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			continue
		}
		waits = append(waits, startJoin(h, r))
	}
	var gen int32 = 1
	if n > 1 {
		lead := startJoin(h, joinReq(group, ids[0])).get(t)
		gen = lead.Generation
		for _, w := range waits {
			if r := w.get(t); r.Err != nil || r.Generation != gen {
				t.Fatalf("join: %+v", r)
			}
		}
	}
	var syncs []pending[SyncResult]
	for _, id := range ids[1:] {
		syncs = append(syncs, startSync(h, SyncRequest{Group: group, MemberID: id, Generation: gen}))
	}
	var as []Assignment
	for i, id := range ids {
		as = append(as, Assignment{id, []byte(fmt.Sprintf("p%d", i))})
	}
	if r := h.sync(group, ids[0], gen, as...); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, s := range syncs {
		if r := s.get(t); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if s := h.state(group); s != "Stable" {
		t.Fatalf("state %s", s)
	}
	return ids, gen
}

func TestSessionTimeoutRemovesMember(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, "g", 2)
	for range 3 { // a heartbeats every 3 s; b never does
		h.clock.Advance(3 * time.Second)
		wantErr(t, "a heartbeat", h.heartbeat("g", ids[0], gen), nil)
	}
	h.clock.Advance(2 * time.Second) // 11 s: b's 10 s session is over
	wantErr(t, "heartbeat after b expired", h.heartbeat("g", ids[0], gen), kerr.RebalanceInProgress)
	wantErr(t, "b heartbeat", h.heartbeat("g", ids[1], gen), kerr.UnknownMemberID)
	r := startJoin(h, joinReq("g", ids[0])).get(t)
	if r.Err != nil || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin alone: %+v", r)
	}
}

func TestRebalanceTimeoutDropsLateMembers(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, "g", 3)
	aj := startJoin(h, joinReq("g", ids[0])) // the leader rejoins: a rebalance
	aj.parked(t)
	bj := startJoin(h, joinReq("g", ids[1]))
	bj.parked(t)
	// c keeps heartbeating but never rejoins: the rebalance timeout (30 s) drops it.
	for range 5 {
		h.clock.Advance(5 * time.Second)
		wantErr(t, "c heartbeat", h.heartbeat("g", ids[2], gen), kerr.RebalanceInProgress)
	}
	h.clock.Advance(5 * time.Second)
	ra, rb := aj.get(t), bj.get(t)
	if ra.Err != nil || rb.Err != nil || len(ra.Members) != 2 || ra.Generation != gen+1 {
		t.Fatalf("after rebalance timeout: %+v %+v", ra, rb)
	}
	wantErr(t, "c heartbeat after", h.heartbeat("g", ids[2], gen), kerr.UnknownMemberID)
}

func TestPendingSyncExpiry(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, "g", 2)
	aj := startJoin(h, joinReq("g", ids[0]))
	bj := startJoin(h, joinReq("g", ids[1]))
	ra, rb := aj.get(t), bj.get(t)
	if ra.Generation != gen+1 || rb.Generation != gen+1 {
		t.Fatalf("%+v %+v", ra, rb)
	}
	// Only the leader syncs; b never does.
	if r := h.sync("g", ids[0], ra.Generation, Assignment{ids[0], []byte("x")}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for range 6 {
		h.clock.Advance(5 * time.Second)
		_ = h.heartbeat("g", ids[0], ra.Generation)
	}
	h.clock.Advance(time.Second)
	if s := h.state("g"); s != "PreparingRebalance" {
		t.Fatalf("state %s after b never synced", s)
	}
	if d := h.c.Describe("g"); len(d.Members) != 1 {
		t.Fatalf("members %+v", d.Members)
	}
}

func TestLeaderLeavesNewLeader(t *testing.T) {
	h := newHarness(t, Config{})
	ids, _ := stableGroup(t, h, "g", 3)
	res := h.c.Leave("g", []LeaveMember{{MemberID: ids[0]}, {MemberID: "ghost"}})
	if res.Err != nil || res.Members[0] != nil || res.Members[1] != kerr.UnknownMemberID {
		t.Fatalf("leave: %+v", res)
	}
	b := startJoin(h, joinReq("g", ids[1]))
	c := startJoin(h, joinReq("g", ids[2]))
	rb, rc := b.get(t), c.get(t)
	if rb.Leader != ids[1] || rc.Leader != ids[1] || len(rb.Members) != 2 {
		t.Fatalf("new leader: %+v %+v", rb, rc)
	}
	// Everyone leaves: Empty, with a group record of no members.
	h.c.Leave("g", []LeaveMember{{MemberID: ids[1]}, {MemberID: ids[2]}})
	if s := h.state("g"); s != "Empty" {
		t.Fatalf("state %s", s)
	}
}

func TestProtocolSelection(t *testing.T) {
	h := newHarness(t, Config{})
	r1 := joinReq("g", "", "roundrobin", "range")
	r1.RequireKnownMemberID = false
	r2 := joinReq("g", "", "range", "roundrobin")
	r2.RequireKnownMemberID = false
	r3 := joinReq("g", "", "range")
	r3.RequireKnownMemberID = false
	a := startJoin(h, r1).get(t)
	if *a.Protocol != "roundrobin" {
		t.Fatalf("alone: %s", *a.Protocol)
	}
	h.sync("g", a.MemberID, a.Generation)
	bj, cj := startJoin(h, r2), startJoin(h, r3)
	aj := startJoin(h, joinReq("g", a.MemberID, "roundrobin", "range")).get(t)
	b, c := bj.get(t), cj.get(t)
	// Only range is common; all three vote for it.
	if *aj.Protocol != "range" || *b.Protocol != "range" || *c.Protocol != "range" {
		t.Fatalf("protocols %s %s %s", *aj.Protocol, *b.Protocol, *c.Protocol)
	}
	bad := joinReq("g", "", "sticky")
	bad.RequireKnownMemberID = false
	wantErr(t, "no common protocol", startJoin(h, bad).get(t).Err, kerr.InconsistentGroupProtocol)
	other := joinReq("g", "", "range")
	other.ProtocolType = "connect"
	wantErr(t, "other type", startJoin(h, other).get(t).Err, kerr.InconsistentGroupProtocol)

	// Votes: two prefer x, one y, all support both: x.
	h2 := newHarness(t, Config{InitialRebalanceDelay: time.Second})
	var ws []pending[JoinResult]
	for _, ps := range [][]string{{"y", "x"}, {"x", "y"}, {"x", "y"}} {
		r := joinReq("v", "", ps...)
		r.RequireKnownMemberID = false
		ws = append(ws, startJoin(h2, r))
	}
	h2.clock.Advance(time.Second) // new members arrived during the delay: extended by 1 s
	ws[0].parked(t)
	h2.clock.Advance(time.Second)
	for _, w := range ws {
		if r := w.get(t); *r.Protocol != "x" {
			t.Fatalf("voted protocol %s", *r.Protocol)
		}
	}
}

func TestGroupMaxSize(t *testing.T) {
	h := newHarness(t, Config{MaxGroupSize: 2})
	stableGroup(t, h, "g", 2)
	r := joinReq("g", "")
	r.RequireKnownMemberID = false
	wantErr(t, "third member", startJoin(h, r).get(t).Err, kerr.GroupMaxSizeReached)
	// Pending (MEMBER_ID_REQUIRED) members are bounded too.
	for i := range 5 {
		res := startJoin(h, joinReq("crowd", "")).get(t)
		want := kerr.MemberIDRequired
		if i >= 2 {
			want = kerr.GroupMaxSizeReached
		}
		wantErr(t, fmt.Sprintf("crowd join %d", i), res.Err, want)
	}
}

func TestBadJoins(t *testing.T) {
	h := newHarness(t, Config{MaxSessionTimeout: time.Minute})
	r := joinReq("g", "")
	r.SessionTimeoutMs = 500
	wantErr(t, "short session", startJoin(h, r).get(t).Err, kerr.InvalidSessionTimeout)
	r.SessionTimeoutMs = 61000
	wantErr(t, "long session", startJoin(h, r).get(t).Err, kerr.InvalidSessionTimeout)
	wantErr(t, "empty group", startJoin(h, joinReq("", "")).get(t).Err, kerr.InvalidGroupID)
	big := joinReq("g", "")
	big.Protocols[0].Metadata = make([]byte, 2<<20)
	wantErr(t, "huge metadata", startJoin(h, big).get(t).Err, kerr.InvalidRequest)
	wantErr(t, "unknown member, no group", startJoin(h, joinReq("nog", "m")).get(t).Err, kerr.UnknownMemberID)
	long := make([]byte, 40000)
	wantErr(t, "long group id", startJoin(h, joinReq(string(long), "")).get(t).Err, kerr.InvalidGroupID)
	if d := h.c.Describe("g"); d.State != "Dead" {
		t.Fatalf("refused joins created the group: %s", d.State)
	}
}

func TestStaticMemberReplacement(t *testing.T) {
	h := newHarness(t, Config{})
	inst := "host-1"
	r := joinReq("g", "")
	r.InstanceID = &inst
	a := startJoin(h, r).get(t) // static members never get MEMBER_ID_REQUIRED
	if a.Err != nil {
		t.Fatal(a.Err)
	}
	h.sync("g", a.MemberID, a.Generation, Assignment{a.MemberID, []byte("mine")})
	b := joinReq("g", "")
	b.RequireKnownMemberID = false
	bj := startJoin(h, b)
	aj := startJoin(h, JoinRequest(func() JoinRequest { x := r; x.MemberID = a.MemberID; return x }())).get(t)
	br := bj.get(t)
	bs := startSync(h, SyncRequest{Group: "g", MemberID: br.MemberID, Generation: br.Generation})
	if s := h.sync("g", a.MemberID, aj.Generation, Assignment{a.MemberID, []byte("mine")}, Assignment{br.MemberID, []byte("yours")}); s.Err != nil {
		t.Fatal(s.Err)
	}
	bs.get(t)
	gen := aj.Generation

	// The static member restarts: unknown member id, same instance id. No rebalance.
	r.SupportsSkipAssignment = true
	re := startJoin(h, r).get(t)
	if re.Err != nil || re.Generation != gen || re.MemberID == a.MemberID || !re.SkipAssignment || len(re.Members) != 2 {
		t.Fatalf("static rejoin: %+v", re)
	}
	if h.state("g") != "Stable" {
		t.Fatalf("state %s", h.state("g"))
	}
	if s := h.sync("g", re.MemberID, gen); s.Err != nil || string(s.Assignment) != "mine" {
		t.Fatalf("static sync: %+v", s)
	}
	wantErr(t, "old id fenced", h.c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: a.MemberID, Generation: gen, InstanceID: &inst}), kerr.FencedInstanceID)
	wantErr(t, "new id", h.c.Heartbeat(HeartbeatRequest{Group: "g", MemberID: re.MemberID, Generation: gen, InstanceID: &inst}), nil)
	wantErr(t, "other member unaffected", h.heartbeat("g", br.MemberID, gen), nil)
	// Removing a static member by instance id alone (admin) works.
	if res := h.c.Leave("g", []LeaveMember{{InstanceID: &inst}}); res.Members[0] != nil {
		t.Fatal(res.Members[0])
	}
	if h.state("g") != "PreparingRebalance" {
		t.Fatalf("state %s", h.state("g"))
	}
}

func TestCompletingRebalanceLostJoinResponse(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, "g", 2)
	aj, bj := startJoin(h, joinReq("g", ids[0])), startJoin(h, joinReq("g", ids[1]))
	aj.get(t)
	bj.get(t)
	// b lost its response and asks again with the same metadata: same generation.
	r := startJoin(h, joinReq("g", ids[1])).get(t)
	if r.Err != nil || r.Generation != gen+1 || len(r.Members) != 0 {
		t.Fatalf("%+v", r)
	}
	// The leader asks again: gets the member list again.
	r = startJoin(h, joinReq("g", ids[0])).get(t)
	if r.Err != nil || r.Generation != gen+1 || len(r.Members) != 2 {
		t.Fatalf("%+v", r)
	}
	// A commit during CompletingRebalance is REBALANCE_IN_PROGRESS.
	res := h.c.Commit(CommitRequest{Group: "g", Generation: gen + 1, MemberID: ids[0], RetentionMs: -1,
		Partitions: []CommitPartition{{TopicPartition: TopicPartition{"t", 0}, Offset: 1, LeaderEpoch: -1}}})()
	wantErr(t, "commit while completing", res.Errors[0], kerr.RebalanceInProgress)
}

// TestConcurrentTraffic hammers one coordinator from many goroutines (run with -race).
func TestConcurrentTraffic(t *testing.T) {
	h := newHarness(t, Config{})
	ids, gen := stableGroup(t, h, "g", 3)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				group := fmt.Sprintf("g%d", w%3)
				switch i % 4 {
				case 0:
					_ = h.heartbeat("g", ids[w%3], gen)
				case 1:
					h.c.Commit(CommitRequest{Group: group, Generation: -1, RetentionMs: -1,
						Partitions: []CommitPartition{{TopicPartition: TopicPartition{"t", int32(i)}, Offset: int64(i), LeaderEpoch: -1}}})()
				case 2:
					h.c.Fetch(group, nil)()
				case 3:
					_, _ = h.c.List(nil, nil)
					h.c.Describe(group)
				}
			}
		}()
	}
	wg.Wait()
	if got := h.c.Fetch("g1", nil)(); len(got.Offsets) == 0 {
		t.Fatal("no offsets committed")
	}
}

// TestSubscribedTopics: a consumer group's subscription comes from its members' metadata.
func TestSubscribedTopics(t *testing.T) {
	h := newHarness(t, Config{})
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{"orders"}}
	r := joinReq("g", "")
	r.RequireKnownMemberID = false
	r.Protocols[0].Metadata = meta.AppendTo(nil)
	a := startJoin(h, r).get(t)
	h.sync("g", a.MemberID, a.Generation)
	for _, tp := range []string{"orders", "other"} {
		h.c.Commit(CommitRequest{Group: "g", Generation: a.Generation, MemberID: a.MemberID, RetentionMs: -1,
			Partitions: []CommitPartition{{TopicPartition: TopicPartition{tp, 0}, Offset: 5, LeaderEpoch: -1}}})()
	}
	gerr, perrs, wait := h.c.DeleteOffsets("g", []TopicPartition{{"orders", 0}, {"other", 0}})
	if gerr != nil || perrs[0] != kerr.GroupSubscribedToTopic || perrs[1] != nil || wait() != nil {
		t.Fatalf("offset delete: %v %v", gerr, perrs)
	}
	if f := h.c.Fetch("g", []FetchTopic{{"other", []int32{0}}})(); f.Offsets[0].Offset != -1 {
		t.Fatalf("deleted offset still there: %+v", f.Offsets)
	}
	wantErr(t, "delete non-empty group", h.c.DeleteGroup("g")(), kerr.NonEmptyGroup)
	wantErr(t, "delete unknown group", h.c.DeleteGroup("nog")(), kerr.GroupIDNotFound)
}
