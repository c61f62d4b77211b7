package coordinator

import (
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicClient is a JoinGroup/SyncGroup member as a cooperative (or eager) consumer behaves.
type classicClient struct {
	id          string
	gen         int32
	owned       map[string][]int32 // by topic name
	cooperative bool
	topics      []string
}

func (c *classicClient) request(group string) JoinRequest {
	meta := kmsg.ConsumerMemberMetadata{Version: 1, Topics: c.topics, Generation: -1}
	if c.cooperative {
		names := make([]string, 0, len(c.owned))
		for t := range c.owned {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			meta.OwnedPartitions = append(meta.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: t, Partitions: c.owned[t]})
		}
	}
	name := "range"
	if c.cooperative {
		name = "cooperative-sticky"
	}
	return JoinRequest{Group: group, MemberID: c.id, ClientID: "classic", ClientHost: "/127.0.0.1",
		SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000, ProtocolType: "consumer", RequireKnownMemberID: true,
		Protocols: []Protocol{{Name: name, Metadata: meta.AppendTo(nil)}}}
}

func (c *classicClient) count() int {
	n := 0
	for _, ps := range c.owned {
		n += len(ps)
	}
	return n
}

// setAssignment applies a SyncGroup's ConsumerProtocol assignment.
func (c *classicClient) setAssignment(t *testing.T, b []byte) {
	t.Helper()
	c.owned = map[string][]int32{}
	if len(b) == 0 {
		return
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		t.Fatalf("assignment: %v", err)
	}
	for _, tp := range a.Topics {
		c.owned[tp.Topic] = append(c.owned[tp.Topic], tp.Partitions...)
	}
}

// classicAssignment encodes an assignment of topic t's partitions.
func classicAssignment(t string, ps ...int32) []byte {
	a := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: t, Partitions: ps}}}
	return a.AppendTo(nil)
}

// rejoin runs a classic member's JoinGroup and SyncGroup against a consumer group (answered
// at once).
func (h *harness) rejoin(group string, c *classicClient) {
	h.t.Helper()
	if !c.cooperative {
		c.owned = map[string][]int32{} // eager: everything is revoked before joining
	}
	jr := h.join(c.request(group))
	if jr.Err != nil {
		h.t.Fatalf("classic rejoin of %s: %v", c.id, jr.Err)
	}
	c.id, c.gen = jr.MemberID, jr.Generation
	if jr.Leader != "" || len(jr.Members) != 0 {
		h.t.Fatalf("join response in a consumer group: %+v", jr)
	}
	sr := h.sync(group, c.id, c.gen)
	switch sr.Err {
	case nil:
		c.setAssignment(h.t, sr.Assignment)
	case kerr.RebalanceInProgress:
	default:
		h.t.Fatalf("classic sync of %s: %v", c.id, sr.Err)
	}
}

// ownedByName maps a consumer client's partitions (by topic id) to names with ts.
func ownedByName(ts *topicSet, p partitions) map[string][]int32 {
	out := map[string][]int32{}
	for name, tm := range ts.get() {
		if ps := p[tm.ID]; len(ps) > 0 {
			out[name] = ps
		}
	}
	return out
}

// checkExclusive fails if two members own one partition; it returns how many are owned.
func checkExclusive(t *testing.T, ts *topicSet, cls []*classicClient, cgs []*cgClient) int {
	t.Helper()
	seen := map[string]string{}
	add := func(who string, owned map[string][]int32) {
		for topic, ps := range owned {
			for _, p := range ps {
				k := topic + "/" + string(rune('0'+p))
				if o, ok := seen[k]; ok {
					t.Fatalf("partition %s owned by %s and %s", k, o, who)
				}
				seen[k] = who
			}
		}
	}
	for _, c := range cls {
		add(c.id, c.owned)
	}
	for _, c := range cgs {
		add(c.id, ownedByName(ts, c.owned))
	}
	return len(seen)
}

// settleMixed runs heartbeats of both kinds of members until the group is stable.
func settleMixed(t *testing.T, h *harness, ts *topicSet, group string, cls []*classicClient, cgs []*cgClient) {
	t.Helper()
	for range 20 {
		for _, c := range cls {
			switch err := h.heartbeat(group, c.id, c.gen); err {
			case nil:
			case kerr.RebalanceInProgress:
				h.rejoin(group, c)
			default:
				t.Fatalf("classic heartbeat of %s: %v", c.id, err)
			}
			checkExclusive(t, ts, cls, cgs)
		}
		for _, c := range cgs {
			if r := h.cgBeat(group, c); r.Err != nil {
				t.Fatalf("heartbeat of %s: %v", c.id, r.Err)
			}
			checkExclusive(t, ts, cls, cgs)
		}
		if d := h.c.ConsumerDescribe(group); d.State == "Stable" {
			return
		}
	}
	t.Fatalf("group did not settle: %+v", h.c.ConsumerDescribe(group))
}

// classicGroupOfTwo forms a Stable classic group g of a and b (generation 2), a assigned
// t-0..2 and b t-3..5.
func classicGroupOfTwo(t *testing.T, h *harness, a, b *classicClient) {
	t.Helper()
	ja := h.join(a.request("g"))
	if ja.Err != nil {
		t.Fatal(ja.Err)
	}
	a.id = ja.MemberID
	breq := b.request("g")
	r := startJoin(h, breq).get(t)
	if r.Err != kerr.MemberIDRequired {
		t.Fatalf("b join: %v", r.Err)
	}
	b.id = r.MemberID
	pb := startJoin(h, b.request("g"))
	pa := startJoin(h, a.request("g"))
	ra, rb := pa.get(t), pb.get(t)
	if ra.Err != nil || rb.Err != nil || ra.Generation != rb.Generation {
		t.Fatalf("joins: %+v %+v", ra, rb)
	}
	a.gen, b.gen = ra.Generation, rb.Generation
	leader, follower := a, b
	if ra.Leader != a.id {
		leader, follower = b, a
	}
	sf := startSync(h, SyncRequest{Group: "g", MemberID: follower.id, Generation: follower.gen})
	sl := h.sync("g", leader.id, leader.gen,
		Assignment{MemberID: a.id, Assignment: classicAssignment("t", 0, 1, 2)},
		Assignment{MemberID: b.id, Assignment: classicAssignment("t", 3, 4, 5)})
	if sl.Err != nil {
		t.Fatal(sl.Err)
	}
	leader.setAssignment(t, sl.Assignment)
	fr := sf.get(t)
	if fr.Err != nil {
		t.Fatal(fr.Err)
	}
	follower.setAssignment(t, fr.Assignment)
	if h.state("g") != "Stable" {
		t.Fatalf("classic group state %s", h.state("g"))
	}
}

func groupType(h *harness, group string) string {
	gs, _ := h.c.List(nil, nil)
	for _, g := range gs {
		if g.Group == group {
			return g.Type
		}
	}
	return ""
}

func TestMigrationUpgradeRestartDowngrade(t *testing.T) {
	for _, coop := range []bool{false, true} {
		t.Run(map[bool]string{false: "eager", true: "cooperative"}[coop], func(t *testing.T) {
			ts := &topicSet{}
			ts.set("t", 1, 6)
			store := newMemStore(8)
			h := newCGHarness(t, ts, store)
			a := &classicClient{topics: []string{"t"}, cooperative: coop}
			b := &classicClient{topics: []string{"t"}, cooperative: coop}
			classicGroupOfTwo(t, h, a, b)
			gen := a.gen

			// A KIP-848 member joins: the group becomes a consumer group; the classic members
			// keep their partitions at epoch = generation.
			c, r := h.cgJoin("g", "C", "t")
			if r.Err != nil {
				t.Fatalf("848 join: %v %s", r.Err, r.ErrMessage)
			}
			if got := groupType(h, "g"); got != "consumer" {
				t.Fatalf("group type %q after upgrade", got)
			}
			checkExclusive(t, ts, []*classicClient{a, b}, []*cgClient{c})
			d := h.c.ConsumerDescribe("g")
			if d.Err != nil || len(d.Members) != 3 || d.Epoch != gen+1 {
				t.Fatalf("describe after upgrade: %+v", d)
			}
			for _, m := range d.Members {
				want := int8(0)
				if m.MemberID == "C" {
					want = 1
				}
				if m.MemberType != want {
					t.Fatalf("member %s type %d", m.MemberID, m.MemberType)
				}
			}
			// The classic members are told to rejoin; their commits use the generation.
			wantErr(t, "classic heartbeat", h.heartbeat("g", a.id, a.gen), kerr.RebalanceInProgress)
			commit := func(gen int32) *kerr.Error {
				return h.c.Commit(CommitRequest{Group: "g", Generation: gen, MemberID: a.id, RetentionMs: -1, Version: 8,
					Partitions: []CommitPartition{{TopicPartition: TopicPartition{"t", 0}, Offset: 3, LeaderEpoch: -1}}})().Errors[0]
			}
			wantErr(t, "classic commit", commit(a.gen), nil)
			wantErr(t, "classic commit, old generation", commit(a.gen-1), kerr.IllegalGeneration)
			wantErr(t, "sync of an unknown member", h.sync("g", "nobody", 1).Err, kerr.UnknownMemberID)
			wantErr(t, "sync of a consumer member", h.sync("g", "C", c.epoch).Err, kerr.UnknownMemberID)

			cls, cgs := []*classicClient{a, b}, []*cgClient{c}
			settleMixed(t, h, ts, "g", cls, cgs)
			if n := checkExclusive(t, ts, cls, cgs); n != 6 {
				t.Fatalf("%d partitions owned after settling, want 6", n)
			}

			// A restart loads the mixed group back: classic members carry on.
			before := h.c.ConsumerDescribe("g")
			h.c.Close()
			h = newCGHarness(t, ts, store)
			after := h.c.ConsumerDescribe("g")
			if after.Err != nil || after.Epoch != before.Epoch || len(after.Members) != 3 {
				t.Fatalf("after restart %+v, before %+v", after, before)
			}
			for i := range after.Members {
				if after.Members[i].MemberType != before.Members[i].MemberType || after.Members[i].MemberEpoch != before.Members[i].MemberEpoch {
					t.Fatalf("member %d: before %+v after %+v", i, before.Members[i], after.Members[i])
				}
			}
			wantErr(t, "classic heartbeat after restart", h.heartbeat("g", a.id, a.gen), nil)

			// The KIP-848 member leaves: the group is a classic group again, rebalancing.
			if r := h.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "C", MemberEpoch: -1, Version: 1})(); r.Err != nil {
				t.Fatalf("leave: %v", r.Err)
			}
			if got := groupType(h, "g"); got != "classic" {
				t.Fatalf("group type %q after downgrade", got)
			}
			if s := h.state("g"); s != "PreparingRebalance" {
				t.Fatalf("state %s after downgrade", s)
			}
			wantErr(t, "heartbeat after downgrade", h.heartbeat("g", a.id, a.gen), kerr.RebalanceInProgress)
			pa, pb := startJoin(h, a.request("g")), startJoin(h, b.request("g"))
			ra, rb := pa.get(t), pb.get(t)
			if ra.Err != nil || rb.Err != nil || ra.Generation != rb.Generation || ra.Generation <= a.gen {
				t.Fatalf("rejoins after downgrade: %+v %+v", ra, rb)
			}
			if s := h.state("g"); s != "CompletingRebalance" {
				t.Fatalf("state %s after the rejoins", s)
			}
			h.c.Close()
			h = newCGHarness(t, ts, store)
			if d := h.c.Describe("g"); d.State != "Stable" || len(d.Members) != 2 || groupType(h, "g") != "classic" {
				t.Fatalf("classic group after restart: %+v", d)
			}
		})
	}
}

func TestMigrationPolicy(t *testing.T) {
	for _, s := range []string{"BIDIRECTIONAL", "Upgrade", "downgrade", "disabled"} {
		if _, ok := ParseMigrationPolicy(s); !ok {
			t.Fatalf("%s not parsed", s)
		}
	}
	if _, ok := ParseMigrationPolicy("both"); ok {
		t.Fatal("both parsed")
	}

	// disabled: a KIP-848 member cannot join a non-empty classic group.
	ts := &topicSet{}
	ts.set("t", 1, 6)
	h := newHarness(t, Config{Topics: ts.get, ConsumerSessionTimeout: 45 * time.Second, MigrationPolicy: MigrationDisabled})
	a, b := &classicClient{topics: []string{"t"}}, &classicClient{topics: []string{"t"}}
	classicGroupOfTwo(t, h, a, b)
	if _, r := h.cgJoin("g", "C", "t"); r.Err != kerr.GroupIDNotFound {
		t.Fatalf("848 join with the policy disabled: %v", r.Err)
	}
	if groupType(h, "g") != "classic" || h.state("g") != "Stable" {
		t.Fatalf("group changed: %s %s", groupType(h, "g"), h.state("g"))
	}
	// ... nor a classic member a non-empty consumer group.
	if _, r := h.cgJoin("g2", "K", "t"); r.Err != nil {
		t.Fatal(r.Err)
	}
	nc := &classicClient{topics: []string{"t"}}
	wantErr(t, "classic join of a consumer group with the policy disabled", h.join(nc.request("g2")).Err, kerr.InconsistentGroupProtocol)

	// upgrade only: the group stays a consumer group when the KIP-848 member leaves.
	h2 := newHarness(t, Config{Topics: ts.get, ConsumerSessionTimeout: 45 * time.Second, MigrationPolicy: MigrationUpgrade})
	a, b = &classicClient{topics: []string{"t"}}, &classicClient{topics: []string{"t"}}
	classicGroupOfTwo(t, h2, a, b)
	if _, r := h2.cgJoin("g", "C", "t"); r.Err != nil {
		t.Fatalf("848 join: %v", r.Err)
	}
	if r := h2.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "C", MemberEpoch: -1, Version: 1})(); r.Err != nil {
		t.Fatalf("leave: %v", r.Err)
	}
	if got := groupType(h2, "g"); got != "consumer" {
		t.Fatalf("group type %q, want consumer (downgrade disabled)", got)
	}
	// The classic members leave through LeaveGroup; the group is an empty consumer group.
	if res := h2.c.Leave("g", []LeaveMember{{MemberID: a.id}, {MemberID: b.id}, {MemberID: "C"}}); res.Err != nil ||
		res.Members[0] != nil || res.Members[1] != nil || res.Members[2] != kerr.UnknownMemberID {
		t.Fatalf("leave: %+v", res)
	}
	if d := h2.c.ConsumerDescribe("g"); d.State != "Empty" {
		t.Fatalf("after the classic members left: %+v", d)
	}
}

// A classic member in a consumer group that stops heartbeating is removed after its own
// session timeout; one that does not sync after joining, after its rebalance timeout.
func TestMigrationClassicTimeouts(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 1, 6)
	h := newCGHarness(t, ts, nil)
	a, b := &classicClient{topics: []string{"t"}}, &classicClient{topics: []string{"t"}}
	classicGroupOfTwo(t, h, a, b)
	c, r := h.cgJoin("g", "C", "t")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	// A new classic member joins and never syncs.
	nc := &classicClient{topics: []string{"t"}}
	jreq := nc.request("g")
	jreq.SessionTimeoutMs = 45000
	jr := h.join(jreq)
	if jr.Err != nil {
		t.Fatal(jr.Err)
	}
	if n := len(h.c.ConsumerDescribe("g").Members); n != 4 {
		t.Fatalf("%d members", n)
	}
	// 11s: a and b (10s sessions) expire; C heartbeats.
	for range 11 {
		h.clock.Advance(time.Second)
		if r := h.cgBeat("g", c); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	d := h.c.ConsumerDescribe("g")
	if len(d.Members) != 2 {
		t.Fatalf("after 11s: %+v", d)
	}
	// 30s rebalance timeout: the member that never synced goes too.
	for range 20 {
		h.clock.Advance(time.Second)
		h.cgBeat("g", c)
	}
	if d := h.c.ConsumerDescribe("g"); len(d.Members) != 1 || d.Members[0].MemberID != "C" {
		t.Fatalf("after 31s: %+v", d)
	}
}

// An upgrade whose records cannot be written leaves the classic group as it was.
func TestMigrationUpgradeAppendFailure(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 1, 6)
	h := newCGHarness(t, ts, nil)
	a, b := &classicClient{topics: []string{"t"}}, &classicClient{topics: []string{"t"}}
	classicGroupOfTwo(t, h, a, b)
	l, _ := h.store.Log(PartitionFor("g", 8))
	l.(*memLog).fail = kerr.KafkaStorageError
	if _, r := h.cgJoin("g", "C", "t"); r.Err != kerr.NotCoordinator {
		t.Fatalf("848 join with a failing log: %v", r.Err)
	}
	if groupType(h, "g") != "classic" || h.state("g") != "Stable" || len(h.c.Describe("g").Members) != 2 {
		t.Fatalf("classic group after a failed upgrade: %s %+v", groupType(h, "g"), h.c.Describe("g"))
	}
	wantErr(t, "classic heartbeat after a failed upgrade", h.heartbeat("g", a.id, a.gen), nil)
	l.(*memLog).fail = nil
	if _, r := h.cgJoin("g", "C", "t"); r.Err != nil {
		t.Fatalf("848 join: %v", r.Err)
	}
	if groupType(h, "g") != "consumer" {
		t.Fatal("not upgraded")
	}
}

// A static member of the classic protocol replacing the last static member of the consumer
// protocol turns the group into a classic group without a rebalance; it takes the replaced
// member's target assignment.
func TestMigrationStaticReplacementDowngrade(t *testing.T) {
	ts := &topicSet{}
	ts.set("t", 1, 6)
	h := newCGHarness(t, ts, nil)
	a, b := &classicClient{topics: []string{"t"}}, &classicClient{topics: []string{"t"}}
	classicGroupOfTwo(t, h, a, b)
	inst := "i1"
	r := h.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: "g", MemberID: "S", MemberEpoch: 0, InstanceID: &inst, RebalanceTimeoutMs: 30000,
		SubscribedTopicNames: []string{"t"}, OwnedTopics: []ConsumerTopicPartitions{}, Version: 1, ClientID: "c", ClientHost: "/127.0.0.1"})()
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	s := &cgClient{id: "S", epoch: r.MemberEpoch, owned: partitions{}}
	s.apply(r)
	settleMixed(t, h, ts, "g", []*classicClient{a, b}, []*cgClient{s})
	var target []ConsumerTopicPartitions
	for _, m := range h.c.ConsumerDescribe("g").Members {
		if m.MemberID == "S" {
			target = m.TargetAssignment
		}
	}
	if len(target) != 1 || len(target[0].Partitions) == 0 {
		t.Fatalf("S's target: %+v", target)
	}
	// A known instance with another member id is fenced; an unknown one with a member id is
	// unknown.
	nc := &classicClient{topics: []string{"t"}}
	req := nc.request("g")
	req.InstanceID, req.MemberID = &inst, "other"
	wantErr(t, "fenced static classic join", h.join(req).Err, kerr.FencedInstanceID)
	other := "i2"
	req.InstanceID = &other
	wantErr(t, "unknown static classic join", h.join(req).Err, kerr.UnknownMemberID)

	req.InstanceID, req.MemberID = &inst, ""
	jr := h.join(req)
	if jr.Err != nil {
		t.Fatal(jr.Err)
	}
	if groupType(h, "g") != "classic" || h.state("g") != "Stable" || len(h.c.Describe("g").Members) != 3 {
		t.Fatalf("after the replacement: %s %+v", groupType(h, "g"), h.c.Describe("g"))
	}
	sr := h.sync("g", jr.MemberID, jr.Generation)
	if sr.Err != nil {
		t.Fatalf("sync of the replacing member: %v", sr.Err)
	}
	nc.setAssignment(t, sr.Assignment)
	if len(nc.owned["t"]) != len(target[0].Partitions) {
		t.Fatalf("replacing member's assignment %v, S's target %v", nc.owned, target)
	}
	wantErr(t, "classic heartbeat after the replacement", h.heartbeat("g", a.id, a.gen), nil)
}
