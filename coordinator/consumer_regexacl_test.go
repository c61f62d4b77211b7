package coordinator

import (
	"sync"
	"testing"
	"time"
)

// principalACL is a mutable set of topics one principal may DESCRIBE.
type principalACL struct {
	mu sync.Mutex
	ok map[string]bool
}

func allow(topics ...string) *principalACL {
	p := &principalACL{ok: map[string]bool{}}
	p.add(topics...)
	return p
}

func (p *principalACL) add(topics ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range topics {
		p.ok[t] = true
	}
}

func (p *principalACL) can(t string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok[t]
}

// cgJoinRegex joins group as id subscribing to re, with can as its principal's DESCRIBE check.
func (h *harness) cgJoinRegex(group, id, re string, can func(string) bool) *cgClient {
	h.t.Helper()
	r := h.c.ConsumerHeartbeat(ConsumerHeartbeatRequest{Group: group, MemberID: id, RebalanceTimeoutMs: 30000,
		SubscribedTopicRegex: &re, OwnedTopics: []ConsumerTopicPartitions{}, Version: 1, ClientID: "c", ClientHost: "/127.0.0.1", CanDescribe: can})()
	if r.Err != nil {
		h.t.Fatalf("join of %s: %v %s", id, r.Err, r.ErrMessage)
	}
	c := &cgClient{id: id, owned: partitions{}, can: can}
	c.apply(r)
	return c
}

// regexTopics is the group's resolution of re (nil: none).
func (h *harness) regexTopics(groupID, re string) []string {
	var out []string
	h.c.withGroup(groupID, false, func(g *group) {
		if g != nil && g.cg != nil {
			if r := g.cg.regexes[re]; r != nil {
				out = append([]string{}, r.topics...)
			}
		}
	})
	return out
}

func topicsOf(c *cgClient) map[byte]int {
	out := map[byte]int{}
	for t, ps := range c.owned {
		out[t[0]] += len(ps)
	}
	return out
}

func newRegexACLHarness(t *testing.T, ts *topicSet, store *memStore) *harness {
	cfg := Config{Topics: ts.get, ConsumerSessionTimeout: 45 * time.Second, ConsumerHeartbeatInterval: 5 * time.Second,
		ConsumerRegexRefreshInterval: 10 * time.Second}
	if store != nil {
		cfg.Store = store
	}
	return newHarness(t, cfg)
}

// A regex resolves to the topics the member's principal may DESCRIBE; an ACL added later counts
// at the next refresh (group.consumer.regex.refresh.interval.ms, or new topics), not before.
func TestConsumerGroupRegexDescribeACL(t *testing.T) {
	ts := &topicSet{}
	ts.set("a-1", 1, 2)
	ts.set("a-2", 2, 2)
	ts.set("b-1", 3, 2)
	h := newRegexACLHarness(t, ts, nil)
	p1 := allow("a-1")
	a := h.cgJoinRegex("g", "A", "a-.*", p1.can)
	if got := topicsOf(a); len(got) != 1 || got[1] != 2 {
		t.Fatalf("A owns %v, want only a-1's 2 partitions", got)
	}
	if got := h.regexTopics("g", "a-.*"); len(got) != 1 || got[0] != "a-1" {
		t.Fatalf("resolution %v", got)
	}

	// The ACL on a-2 is added: nothing happens until the refresh interval passes.
	p1.add("a-2")
	settle(t, h, "g", a)
	if got := topicsOf(a); len(got) != 1 {
		t.Fatalf("A owns %v before the refresh", got)
	}
	h.clock.Advance(11 * time.Second)
	settle(t, h, "g", a)
	if got := topicsOf(a); len(got) != 2 || got[2] != 2 {
		t.Fatalf("A owns %v after the refresh, want a-1 and a-2", got)
	}

	// A new matching topic the principal may not describe triggers a refresh but stays out;
	// one it may describe comes in at once.
	ts.set("a-3", 4, 1)
	h.c.MetadataChanged()
	settle(t, h, "g", a)
	if got := topicsOf(a); got[4] != 0 {
		t.Fatalf("A owns %v: a-3 is not describable", got)
	}
	p1.add("a-4")
	ts.set("a-4", 5, 1)
	h.c.MetadataChanged()
	settle(t, h, "g", a)
	if got := topicsOf(a); got[5] != 1 || got[4] != 0 {
		t.Fatalf("A owns %v, want a-4 and not a-3", got)
	}
}

// Members with different principals share one resolution per regex: the principal of the
// member whose heartbeat triggered the last refresh decides it for the whole group (as Kafka).
func TestConsumerGroupRegexPrincipals(t *testing.T) {
	ts := &topicSet{}
	ts.set("a-1", 1, 2)
	ts.set("a-2", 2, 2)
	ts.set("b-1", 3, 2)
	h := newRegexACLHarness(t, ts, nil)
	p1 := allow("a-1")
	p2 := allow("a-1", "a-2", "b-1")
	a := h.cgJoinRegex("g", "A", "a-.*", p1.can)
	// B subscribes to the already resolved regex: no refresh, P1's resolution stays.
	b := h.cgJoinRegex("g", "B", "a-.*", p2.can)
	settle(t, h, "g", a, b)
	if got := h.regexTopics("g", "a-.*"); len(got) != 1 {
		t.Fatalf("after B joined: %v", got)
	}
	// C subscribes to a regex new to the group: every regex is resolved again with P2's ACLs.
	c := h.cgJoinRegex("g", "C", "b-.*", p2.can)
	settle(t, h, "g", a, b, c)
	if got := h.regexTopics("g", "a-.*"); len(got) != 2 {
		t.Fatalf("a-.* after C joined: %v", got)
	}
	if got := h.regexTopics("g", "b-.*"); len(got) != 1 {
		t.Fatalf("b-.* after C joined: %v", got)
	}
	if n := topicsOf(a)[2] + topicsOf(b)[2]; n != 2 {
		t.Fatalf("a-2's partitions owned: %d, want 2 (A %v, B %v)", n, topicsOf(a), topicsOf(b))
	}
	// The interval passes and A's heartbeat is the first: P1 resolves every regex.
	h.clock.Advance(11 * time.Second)
	if r := h.cgBeat("g", a); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := h.regexTopics("g", "a-.*"); len(got) != 1 || got[0] != "a-1" {
		t.Fatalf("a-.* after A's refresh: %v", got)
	}
	if got := h.regexTopics("g", "b-.*"); len(got) != 0 {
		t.Fatalf("b-.* after A's refresh: %v", got)
	}
	settle(t, h, "g", a, b, c)
	if c.owned.count() != 0 {
		t.Fatalf("C owns %v after A's refresh", c.owned)
	}
}

// A resolution survives a coordinator restart, with its time: the refresh interval runs on.
func TestConsumerGroupRegexRefreshAfterRestart(t *testing.T) {
	ts := &topicSet{}
	ts.set("a-1", 1, 2)
	ts.set("a-2", 2, 2)
	store := newMemStore(8)
	h := newRegexACLHarness(t, ts, store)
	p1 := allow("a-1")
	a := h.cgJoinRegex("g", "A", "a-.*", p1.can)
	settle(t, h, "g", a)
	h.c.Close()
	h2 := newRegexACLHarness(t, ts, store)
	if got := h2.regexTopics("g", "a-.*"); len(got) != 1 || got[0] != "a-1" {
		t.Fatalf("resolution after restart: %v", got)
	}
	p1.add("a-2")
	h2.clock.Advance(11 * time.Second)
	settle(t, h2, "g", a)
	if got := topicsOf(a); got[2] != 2 {
		t.Fatalf("A owns %v after the refresh", got)
	}
}

// Describe (DescribeGroups) of a missing, a deleted and a live classic group.
func TestDescribeNotFound(t *testing.T) {
	h := newHarness(t, Config{})
	if d := h.c.Describe("nope"); d.State != "Dead" || d.Err != nil || d.NotFound != "Group nope not found." {
		t.Fatalf("missing group: %+v", d)
	}
	if d := h.c.Describe(""); d.Err != nil || d.NotFound != "Group  not found." {
		t.Fatalf("empty group id: %+v", d)
	}
	res := h.c.Commit(CommitRequest{Group: "cg", Generation: -1, Partitions: []CommitPartition{{TopicPartition: TopicPartition{"a", 0}, Offset: 1}}})()
	wantErr(t, "commit", res.Errors[0], nil)
	if d := h.c.Describe("cg"); d.State != "Empty" || d.NotFound != "" {
		t.Fatalf("classic group: %+v", d)
	}
	if err := h.c.DeleteGroup("cg")(); err != nil {
		t.Fatal(err)
	}
	if d := h.c.Describe("cg"); d.State != "Dead" || d.NotFound != "Group cg not found." {
		t.Fatalf("deleted group: %+v", d)
	}
}
