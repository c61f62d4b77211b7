package coordinator

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// group is one classic group. Every field below ch is owned by the group's goroutine (run):
// other goroutines change the group only by sending it a closure (do, post).
type group struct {
	c         *Coordinator
	id        string
	partition int32
	ch        chan func()
	done      chan struct{} // closed when run returns

	// typ is the group's protocol family: a classic group (this file, join.go), a KIP-848
	// consumer group (cg, consumer*.go) or a KIP-932 share group (sg, share*.go). Offsets and
	// the group's log are shared by all three.
	typ GroupType
	cg  *consumerGroup // non-nil iff typ == TypeConsumer
	sg  *shareGroup    // non-nil iff typ == TypeShare

	// Invariant: state == Empty iff len(members) == 0, except transiently inside a closure.
	state      State
	prevState  State
	stateSince time.Time // currentStateTimestamp
	generation int32
	// protocolType is set by the first member and kept while Empty (offset expiry uses it);
	// "" for a group that only stores offsets.
	protocolType string
	protocol     string // the selected protocol of this generation; "" when none
	leader       string // "" when none
	members      map[string]*member
	static       map[string]string    // group.instance.id -> member id
	pending      map[string]time.Time // MEMBER_ID_REQUIRED ids not yet joined -> expiry
	pendingSync  map[string]struct{}  // members of this generation that have not synced
	nextSeq      uint64               // join order: the earliest remaining member leads
	// subscribed is the union of the consumer members' topics; nil when unknown.
	subscribed map[string]bool

	// Join phase: joinDeadline ends PreparingRebalance; initial is set during the initial
	// rebalance delay of a group coming from Empty.
	joinDeadline   time.Time
	initial        *initialDelay
	newMemberAdded bool
	// syncDeadline ends the wait for SyncGroups of syncGeneration.
	syncDeadline   time.Time
	syncGeneration int32

	offsets map[TopicPartition]offsetValue
	// txn holds, per producer id, the offsets committed inside its ongoing transaction
	// (TxnOffsetCommit): not visible to OffsetFetch until the producer's COMMIT marker
	// (completeTxn). Every producer id here is in the coordinator's txnOpen index.
	txn map[int64]*txnOffsets
	// olog is the group's __consumer_offsets partition (nil until first written);
	// lastAppend is the offset after the group's last record there.
	olog       OffsetsLog
	lastAppend int64

	timer    Stopper
	timerAt  time.Time
	timerSeq uint64

	// resigned is closed when the coordinator gives up the group's partition (its
	// __consumer_offsets partition moved to another broker).
	resigned chan struct{}
}

type initialDelay struct {
	delay, remaining time.Duration
}

type member struct {
	id                 string
	instanceID         *string
	clientID           string
	clientHost         string
	sessionTimeoutMs   int32
	rebalanceTimeoutMs int32
	protocols          []Protocol
	assignment         []byte
	// joinWait / syncWait are set while a JoinGroup / SyncGroup is parked (buffered, 1).
	joinWait chan JoinResult
	syncWait chan SyncResult
	// deadline is the heartbeat expiry (zero: none scheduled).
	deadline time.Time
	// isNew: joined but no join phase completed yet (expires after newMemberJoinTimeout even
	// while parked).
	isNew bool
	seq   uint64
}

func (m *member) sessionTimeout() time.Duration {
	return time.Duration(m.sessionTimeoutMs) * time.Millisecond
}

func (m *member) matches(ps []Protocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || !bytes.Equal(ps[i].Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func newGroup(c *Coordinator, id string, p int32) *group {
	return &group{
		c: c, id: id, partition: p,
		ch:          make(chan func()),
		done:        make(chan struct{}),
		resigned:    make(chan struct{}),
		state:       Empty,
		prevState:   Dead,
		stateSince:  c.cfg.Wall(),
		members:     map[string]*member{},
		static:      map[string]string{},
		pending:     map[string]time.Time{},
		pendingSync: map[string]struct{}{},
		offsets:     map[TopicPartition]offsetValue{},
	}
}

// run is the group's goroutine.
func (g *group) run() {
	defer close(g.done)
	defer g.stopTimer()
	for {
		select {
		case f := <-g.ch:
			g.call(f)
			if g.state == Dead {
				g.c.removeGroup(g)
				g.failWaiters(kerr.CoordinatorNotAvailable)
				return
			}
		case <-g.c.quit:
			g.failWaiters(kerr.NotCoordinator)
			return
		case <-g.resigned:
			g.failWaiters(kerr.NotCoordinator)
			return
		}
	}
}

func (g *group) call(f func()) {
	defer func() {
		if r := recover(); r != nil {
			g.c.log.Error("group coordinator panic", "group", g.id, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// do runs f on the group's goroutine and waits for it; false if the group is gone.
func (g *group) do(f func()) bool {
	done := make(chan struct{})
	select {
	case g.ch <- func() { defer close(done); f() }:
		<-done
		return true
	case <-g.done:
		return false
	}
}

// post queues f on the group's goroutine without waiting (timer callbacks).
func (g *group) post(f func()) {
	select {
	case g.ch <- f:
	case <-g.done:
	}
}

// now is the clock of deadlines and timers (Config.Clock).
func (g *group) now() time.Time { return g.c.clock.Now() }

// wall is the wall clock of written timestamps (Config.Wall).
func (g *group) wall() time.Time { return g.c.cfg.Wall() }

func (g *group) transition(s State) {
	g.prevState, g.state = g.state, s
	g.stateSince = g.wall()
	g.c.stats.transition(s) // metrics (metrics.go)
}

// failWaiters answers every parked JoinGroup and SyncGroup with err.
func (g *group) failWaiters(err *kerr.Error) {
	for _, m := range g.members {
		if m.joinWait != nil {
			m.joinWait <- JoinResult{Err: err, MemberID: m.id, Generation: -1}
			m.joinWait = nil
		}
		if m.syncWait != nil {
			m.syncWait <- SyncResult{Err: err}
			m.syncWait = nil
		}
	}
}

// ---- timers ----

// rearm handles every deadline already due and arms the timer for the next one.
func (g *group) rearm() {
	for range 16 {
		if g.state == Dead {
			g.stopTimer()
			return
		}
		next := g.nextDeadline()
		if next.IsZero() {
			g.stopTimer()
			return
		}
		now := g.now()
		if !next.After(now) {
			g.onDeadlines(now)
			continue
		}
		if g.timer != nil && !g.timerAt.After(next) {
			return // an earlier timer will fire and re-check
		}
		g.stopTimer()
		g.timerSeq++
		seq := g.timerSeq
		g.timerAt = next
		g.timer = g.c.clock.AfterFunc(next.Sub(now), func() { g.post(func() { g.onTimer(seq) }) })
		return
	}
	// Still due after many passes (should not happen): retry soon rather than spin.
	g.stopTimer()
	g.timerSeq++
	seq := g.timerSeq
	g.timerAt = g.now().Add(time.Millisecond)
	g.timer = g.c.clock.AfterFunc(time.Millisecond, func() { g.post(func() { g.onTimer(seq) }) })
}

func (g *group) stopTimer() {
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
		g.timerAt = time.Time{}
	}
}

func (g *group) onTimer(seq uint64) {
	if seq != g.timerSeq {
		return
	}
	g.timer = nil
	g.timerAt = time.Time{}
	g.rearm()
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func (g *group) nextDeadline() time.Time {
	var next time.Time
	if g.state == PreparingRebalance {
		next = earliest(next, g.joinDeadline)
	}
	next = earliest(next, g.syncDeadline)
	for _, m := range g.members {
		next = earliest(next, m.deadline)
	}
	for _, d := range g.pending {
		next = earliest(next, d)
	}
	if g.cg != nil {
		next = earliest(next, g.cgNextDeadline())
	}
	if g.sg != nil {
		next = earliest(next, g.shareNextDeadline())
	}
	return next
}

// onDeadlines handles everything due at now: expired pending members, members whose session
// timed out, the end of the join phase and of the sync wait.
func (g *group) onDeadlines(now time.Time) {
	if g.cg != nil {
		g.cgOnDeadlines(now)
		return
	}
	if g.sg != nil {
		g.shareOnDeadlines(now)
	}
	for id, d := range g.pending {
		if !d.After(now) {
			g.c.log.Info("pending member expired", "group", g.id, "member", id)
			delete(g.pending, id)
			if g.state == PreparingRebalance && g.allJoined() {
				g.completeJoin()
			}
		}
	}
	for _, m := range g.membersInOrder() {
		if m.deadline.IsZero() || m.deadline.After(now) || g.members[m.id] != m {
			continue
		}
		m.deadline = time.Time{}
		if !m.isNew && (m.joinWait != nil || m.syncWait != nil) {
			continue // parked in a join or sync: its heartbeat is satisfied
		}
		g.c.log.Info("member session expired", "group", g.id, "member", m.id)
		g.removeMemberAndUpdate(m)
		if g.state == Dead {
			return
		}
	}
	if g.state == PreparingRebalance && !g.joinDeadline.IsZero() && !g.joinDeadline.After(now) {
		g.joinDeadline = time.Time{}
		if in := g.initial; in != nil {
			g.tryCompleteInitialRebalance(in)
		} else {
			g.completeJoin()
		}
	}
	if !g.syncDeadline.IsZero() && !g.syncDeadline.After(now) {
		g.syncDeadline = time.Time{}
		g.expirePendingSync()
	}
}

// ---- members ----

func (g *group) membersInOrder() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	// insertion sort by seq: groups are small and this keeps the order deterministic
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].seq < ms[j-1].seq; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
	return ms
}

func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinWait == nil {
			return false
		}
	}
	return true
}

// rebalanceTimeout is the largest rebalance timeout of the members.
func (g *group) rebalanceTimeout() time.Duration {
	var ms int32
	for _, m := range g.members {
		ms = max(ms, m.rebalanceTimeoutMs)
	}
	return time.Duration(ms) * time.Millisecond
}

// validateMember is Kafka's ClassicGroup.validateMember.
func (g *group) validateMember(memberID string, instanceID *string) *kerr.Error {
	if instanceID != nil {
		existing, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID
		}
		if existing != memberID {
			return kerr.FencedInstanceID
		}
	}
	if _, ok := g.members[memberID]; !ok {
		return kerr.UnknownMemberID
	}
	return nil
}

func newMemberID(prefix string) string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func (g *group) addMember(req *JoinRequest, id string, wait chan JoinResult) *member {
	m := &member{
		id: id, instanceID: req.InstanceID, clientID: req.ClientID, clientHost: req.ClientHost,
		sessionTimeoutMs: req.SessionTimeoutMs, rebalanceTimeoutMs: req.RebalanceTimeoutMs,
		protocols: req.Protocols, joinWait: wait, isNew: true, seq: g.nextSeq,
		deadline: g.now().Add(newMemberJoinTimeout),
	}
	g.nextSeq++
	if g.state == PreparingRebalance && g.prevState == Empty {
		g.newMemberAdded = true
	}
	if len(g.members) == 0 {
		g.protocolType = req.ProtocolType
	}
	if m.instanceID != nil {
		g.static[*m.instanceID] = id
	}
	if g.leader == "" {
		g.leader = id
	}
	g.members[id] = m
	delete(g.pending, id)
	return m
}

// updateMember records a rejoining member's protocols and timeouts and parks its JoinGroup.
func (g *group) updateMember(m *member, req *JoinRequest, wait chan JoinResult) {
	m.protocols = req.Protocols
	m.sessionTimeoutMs = req.SessionTimeoutMs
	m.rebalanceTimeoutMs = req.RebalanceTimeoutMs
	if m.joinWait != nil && m.joinWait != wait {
		m.joinWait <- JoinResult{Err: kerr.RebalanceInProgress, MemberID: m.id, Generation: -1}
	}
	m.joinWait = wait
}

// removeMember forgets m; a departing leader is replaced by the earliest remaining member.
func (g *group) removeMember(m *member) {
	delete(g.members, m.id)
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	delete(g.pending, m.id)
	delete(g.pendingSync, m.id)
	if g.leader == m.id {
		g.leader = ""
		if ms := g.membersInOrder(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// removeMemberAndUpdate removes a member whose session expired (or that left) and moves the
// group on: a stable group rebalances, a join phase may now be complete.
func (g *group) removeMemberAndUpdate(m *member) {
	if m.joinWait != nil {
		m.joinWait <- JoinResult{Err: kerr.UnknownMemberID, Generation: -1}
		m.joinWait = nil
	}
	if m.syncWait != nil {
		m.syncWait <- SyncResult{Err: kerr.UnknownMemberID}
		m.syncWait = nil
	}
	g.removeMember(m)
	switch g.state {
	case Stable, CompletingRebalance:
		g.maybePrepareRebalanceOrCompleteJoin()
	case PreparingRebalance:
		if g.allJoined() {
			g.completeJoin()
		}
	}
}

// ---- protocols ----

// candidateProtocols are the protocols every member supports.
func (g *group) candidateProtocols() map[string]bool {
	var cands map[string]bool
	for _, m := range g.members {
		mine := make(map[string]bool, len(m.protocols))
		for _, p := range m.protocols {
			if cands == nil || cands[p.Name] {
				mine[p.Name] = true
			}
		}
		cands = mine
	}
	return cands
}

// supportsProtocols is whether a member with these protocols may join: an empty group takes any
// non-empty list; otherwise the protocol type must match and one protocol must be supported by
// every current member.
func (g *group) supportsProtocols(protocolType string, ps []Protocol) bool {
	if g.state == Empty || len(g.members) == 0 {
		return protocolType != "" && len(ps) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	cands := g.candidateProtocols()
	for _, p := range ps {
		if cands[p.Name] {
			return true
		}
	}
	return false
}

// selectProtocol picks, among the protocols every member supports, the one most members
// prefer: each member votes for its first supported candidate; ties go to the leader's order.
func (g *group) selectProtocol() string {
	cands := g.candidateProtocols()
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if cands[p.Name] {
				votes[p.Name]++
				break
			}
		}
	}
	var order []Protocol
	if l := g.members[g.leader]; l != nil {
		order = l.protocols
	} else if ms := g.membersInOrder(); len(ms) > 0 {
		order = ms[0].protocols
	}
	best, bestVotes := "", -1
	for _, p := range order {
		if cands[p.Name] && votes[p.Name] > bestVotes {
			best, bestVotes = p.Name, votes[p.Name]
		}
	}
	return best
}

// computeSubscribed returns the topics the consumer members subscribe to, or nil if unknown
// (not the consumer protocol, or metadata that does not parse).
func (g *group) computeSubscribed() map[string]bool {
	if g.protocolType != "consumer" || g.protocol == "" {
		return nil
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return nil
		}
		for _, t := range meta.Topics {
			topics[t] = true
		}
	}
	return topics
}

func (g *group) joinMembers() []JoinMember {
	ms := g.membersInOrder()
	out := make([]JoinMember, len(ms))
	for i, m := range ms {
		out[i] = JoinMember{MemberID: m.id, InstanceID: m.instanceID, Metadata: m.metadataFor(g.protocol)}
	}
	return out
}

func strPtr(s string) *string { return &s }

func nonEmptyPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
