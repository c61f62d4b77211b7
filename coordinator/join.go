package coordinator

// The classic group protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup, following Kafka's
// GroupMetadataManager (classic groups) rule for rule. Every function here runs on the group's
// goroutine.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// join handles a JoinGroup; the result arrives on the returned channel now or when the join
// phase completes.
func (g *group) join(req *JoinRequest) chan JoinResult {
	ch := make(chan JoinResult, 1)
	defer g.rearm()
	fail := func(err *kerr.Error, memberID string) chan JoinResult {
		ch <- JoinResult{Err: err, MemberID: memberID, Generation: -1}
		return ch
	}
	if g.state == Dead {
		return fail(kerr.CoordinatorNotAvailable, req.MemberID)
	}
	if g.typ == TypeConsumer {
		// A consumer group: an empty one becomes a classic group; a non-empty one takes the
		// member as a member of the classic protocol (migrate.go).
		if len(g.cg.members) > 0 {
			return g.cgClassicJoin(req, ch)
		}
		if err := g.cgToClassic(); err != nil {
			return fail(err, req.MemberID)
		}
	} else if g.typ != TypeClassic {
		return fail(kerr.InconsistentGroupProtocol, req.MemberID)
	}
	if !g.acceptJoiningMember(req.MemberID) {
		if m := g.members[req.MemberID]; m != nil {
			g.removeMemberAndUpdate(m)
		}
		return fail(kerr.GroupMaxSizeReached, "")
	}
	if !g.supportsProtocols(req.ProtocolType, req.Protocols) {
		return fail(kerr.InconsistentGroupProtocol, req.MemberID)
	}
	if req.MemberID == "" {
		return g.joinNewMember(req, ch)
	}
	if _, ok := g.pending[req.MemberID]; ok {
		if req.InstanceID != nil {
			return fail(kerr.UnknownMemberID, req.MemberID) // a pending member is never static
		}
		g.addMember(req, req.MemberID, ch)
		g.maybePrepareRebalanceOrCompleteJoin()
		return ch
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return fail(err, req.MemberID)
	}
	m := g.members[req.MemberID]
	switch g.state {
	case PreparingRebalance:
		g.updateMember(m, req, ch)
		g.maybePrepareRebalanceOrCompleteJoin()
	case CompletingRebalance:
		if m.matches(req.Protocols) {
			// The member lost its JoinGroup response: answer with this generation again.
			ch <- g.currentJoinResult(m.id, m.id == g.leader)
		} else {
			g.updateMember(m, req, ch)
			g.maybePrepareRebalanceOrCompleteJoin()
		}
	case Stable:
		if m.id == g.leader || !m.matches(req.Protocols) {
			// A leader's rejoin forces a rebalance (topic metadata changes reach the assignment
			// this way); so does a change of a member's metadata.
			g.updateMember(m, req, ch)
			g.maybePrepareRebalanceOrCompleteJoin()
		} else {
			ch <- g.currentJoinResult(m.id, false)
		}
	default:
		return fail(kerr.UnknownMemberID, req.MemberID)
	}
	return ch
}

func (g *group) currentJoinResult(memberID string, withMembers bool) JoinResult {
	r := JoinResult{
		Generation: g.generation, ProtocolType: strPtr(g.protocolType), Protocol: nonEmptyPtr(g.protocol),
		Leader: g.leader, MemberID: memberID,
	}
	if withMembers {
		r.Members = g.joinMembers()
	}
	return r
}

// acceptJoiningMember enforces group.max.size the way Kafka does: while preparing a rebalance
// the members already rejoined count; otherwise the members.
func (g *group) acceptJoiningMember(memberID string) bool {
	max := g.c.cfg.MaxGroupSize
	if max <= 0 {
		return true
	}
	switch g.state {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		if m := g.members[memberID]; m != nil && m.joinWait != nil {
			return true
		}
		n := 0
		for _, m := range g.members {
			if m.joinWait != nil {
				n++
			}
		}
		return n < max
	default:
		_, known := g.members[memberID]
		return known || len(g.members) < max
	}
}

func (g *group) pendingCap() int {
	if max := g.c.cfg.MaxGroupSize; max > 0 && max < maxPendingMembers {
		return max
	}
	return maxPendingMembers
}

func (g *group) joinNewMember(req *JoinRequest, ch chan JoinResult) chan JoinResult {
	if req.InstanceID != nil {
		newID := newMemberID(*req.InstanceID)
		if old, ok := g.static[*req.InstanceID]; ok {
			g.replaceStaticMember(req, old, newID, ch)
			return ch
		}
		g.addMember(req, newID, ch)
		g.maybePrepareRebalanceOrCompleteJoin()
		return ch
	}
	newID := newMemberID(req.ClientID)
	if req.RequireKnownMemberID {
		if len(g.pending) >= g.pendingCap() {
			ch <- JoinResult{Err: kerr.GroupMaxSizeReached, Generation: -1}
			return ch
		}
		g.pending[newID] = g.now().Add(time.Duration(req.SessionTimeoutMs) * time.Millisecond)
		ch <- JoinResult{Err: kerr.MemberIDRequired, MemberID: newID, Generation: -1}
		return ch
	}
	g.addMember(req, newID, ch)
	g.maybePrepareRebalanceOrCompleteJoin()
	return ch
}

// replaceStaticMember handles a known group.instance.id joining with no member id (a static
// member restarted): the old member id is fenced and replaced. In a stable group whose selected
// protocol does not change, no rebalance happens: the member gets the current generation (and a
// leader on v9+ the member list with SkipAssignment) and its SyncGroup returns its assignment.
func (g *group) replaceStaticMember(req *JoinRequest, oldID, newID string, ch chan JoinResult) {
	m := g.members[oldID]
	if m.joinWait != nil {
		m.joinWait <- JoinResult{Err: kerr.FencedInstanceID, MemberID: oldID, Generation: -1}
		m.joinWait = nil
	}
	if m.syncWait != nil {
		m.syncWait <- SyncResult{Err: kerr.FencedInstanceID}
		m.syncWait = nil
	}
	delete(g.members, oldID)
	m.id = newID
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	g.members[newID] = m
	g.static[*req.InstanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	if _, ok := g.pendingSync[oldID]; ok {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = struct{}{}
	}
	m.deadline = g.now().Add(m.sessionTimeout())
	g.updateMember(m, req, ch)

	switch g.state {
	case Stable:
		if g.selectProtocol() != g.protocol {
			g.maybePrepareRebalanceOrCompleteJoin()
			return
		}
		mark, err := g.storeGroup()
		m.joinWait = nil
		if err != nil {
			ch <- JoinResult{Err: err, Generation: -1}
			return
		}
		isLeader := newID == g.leader
		r := g.currentJoinResult(newID, isLeader && req.SupportsSkipAssignment)
		r.SkipAssignment = isLeader && req.SupportsSkipAssignment
		r.durable = mark
		ch <- r
	case CompletingRebalance:
		// The leader may already hold the old member id: rebalance so the assignment matches.
		g.prepareRebalance()
	case PreparingRebalance:
		g.maybeCompleteJoinPhase()
	}
}

func (g *group) canRebalance() bool {
	return g.state == Stable || g.state == CompletingRebalance || g.state == Empty
}

func (g *group) maybePrepareRebalanceOrCompleteJoin() {
	if g.canRebalance() {
		g.prepareRebalance()
	} else {
		g.maybeCompleteJoinPhase()
	}
}

// maybeCompleteJoinPhase ends the join phase once every member rejoined (never early during the
// initial rebalance delay).
func (g *group) maybeCompleteJoinPhase() {
	if g.state == PreparingRebalance && g.allJoined() && g.prevState != Empty {
		g.completeJoin()
	}
}

// prepareRebalance starts a join phase: parked SyncGroups get REBALANCE_IN_PROGRESS; a group
// coming from Empty waits group.initial.rebalance.delay.ms (extended while members keep
// arriving, up to the rebalance timeout); otherwise the phase ends when everyone rejoined or at
// the rebalance timeout.
func (g *group) prepareRebalance() {
	if g.state == CompletingRebalance {
		g.resetAndPropagateAssignment(kerr.RebalanceInProgress)
	}
	clear(g.pendingSync)
	g.syncDeadline = time.Time{}
	initial := g.state == Empty
	g.transition(PreparingRebalance)
	g.newMemberAdded = false
	if initial {
		delay := g.c.cfg.InitialRebalanceDelay
		g.initial = &initialDelay{delay: delay, remaining: max(g.rebalanceTimeout()-delay, 0)}
		g.joinDeadline = g.now().Add(delay)
		return
	}
	g.initial = nil
	if g.allJoined() {
		g.completeJoin()
		return
	}
	g.joinDeadline = g.now().Add(g.rebalanceTimeout())
}

func (g *group) tryCompleteInitialRebalance(in *initialDelay) {
	if g.newMemberAdded && in.remaining > 0 {
		g.newMemberAdded = false
		delay := min(g.c.cfg.InitialRebalanceDelay, in.remaining)
		g.initial = &initialDelay{delay: delay, remaining: max(in.remaining-in.delay, 0)}
		g.joinDeadline = g.now().Add(delay)
		return
	}
	g.completeJoin()
}

// completeJoin ends the join phase: dynamic members that did not rejoin are removed, the
// generation advances, every joined member gets its JoinGroup response (the leader with the
// member list) and the group waits for SyncGroups, at most the rebalance timeout.
func (g *group) completeJoin() {
	g.joinDeadline = time.Time{}
	g.initial = nil
	for _, m := range g.membersInOrder() {
		if m.joinWait == nil && m.instanceID == nil {
			g.c.log.Info("member did not rejoin in time", "group", g.id, "member", m.id)
			g.removeMember(m)
		}
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Only static members that did not rejoin are left: wait another rebalance timeout
		// (their sessions may expire meanwhile).
		g.joinDeadline = g.now().Add(g.rebalanceTimeout())
		return
	}
	g.generation++
	if len(g.members) == 0 {
		g.protocol = ""
		g.subscribed = nil
		g.transition(Empty)
		g.c.log.Info("group is empty", "group", g.id, "generation", g.generation)
		_, _ = g.storeGroup()
		return
	}
	g.protocol = g.selectProtocol()
	g.subscribed = g.computeSubscribed()
	g.transition(CompletingRebalance)
	g.c.log.Info("group rebalanced", "group", g.id, "generation", g.generation, "members", len(g.members), "protocol", g.protocol, "leader", g.leader)
	now := g.now()
	for _, m := range g.membersInOrder() {
		if m.joinWait != nil {
			m.joinWait <- g.currentJoinResult(m.id, m.id == g.leader)
			m.joinWait = nil
		}
		m.isNew = false
		m.deadline = now.Add(m.sessionTimeout())
		g.pendingSync[m.id] = struct{}{}
	}
	g.syncDeadline = now.Add(g.rebalanceTimeout())
	g.syncGeneration = g.generation
}

// electJoinedLeader keeps the leader if it rejoined, else picks the earliest member that did;
// false if no member rejoined (or there is no leader).
func (g *group) electJoinedLeader() bool {
	if g.leader == "" {
		return false
	}
	if l := g.members[g.leader]; l != nil && l.joinWait != nil {
		return true
	}
	for _, m := range g.membersInOrder() {
		if m.joinWait != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// expirePendingSync removes the members that have not sent SyncGroup within the rebalance
// timeout and starts a new rebalance.
func (g *group) expirePendingSync() {
	if g.syncGeneration != g.generation || (g.state != CompletingRebalance && g.state != Stable) || len(g.pendingSync) == 0 {
		return
	}
	for id := range g.pendingSync {
		if m := g.members[id]; m != nil {
			g.c.log.Info("member did not sync in time", "group", g.id, "member", id)
			g.removeMember(m)
		}
	}
	g.prepareRebalance()
}

func (g *group) resetAndPropagateAssignment(err *kerr.Error) {
	for _, m := range g.members {
		m.assignment = nil
	}
	g.propagateAssignment(err, durableMark{})
}

// propagateAssignment answers every parked SyncGroup with its member's assignment (or err).
func (g *group) propagateAssignment(err *kerr.Error, mark durableMark) {
	now := g.now()
	for _, m := range g.members {
		if m.syncWait == nil {
			continue
		}
		r := SyncResult{Err: err, durable: mark, Assignment: []byte{}}
		if err == nil {
			r.ProtocolType, r.Protocol = strPtr(g.protocolType), nonEmptyPtr(g.protocol)
			if m.assignment != nil {
				r.Assignment = m.assignment
			}
		}
		m.syncWait <- r
		m.syncWait = nil
		m.deadline = now.Add(m.sessionTimeout())
	}
}

// sync handles a SyncGroup: followers are parked until the leader's arrives with the
// assignment, which is stored, and then everyone gets its own.
func (g *group) sync(req *SyncRequest) chan SyncResult {
	ch := make(chan SyncResult, 1)
	defer g.rearm()
	fail := func(err *kerr.Error) chan SyncResult {
		ch <- SyncResult{Err: err}
		return ch
	}
	if g.state == Dead {
		return fail(kerr.CoordinatorNotAvailable)
	}
	if g.typ == TypeConsumer {
		ch <- g.cgClassicSync(req)
		return ch
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return fail(err)
	}
	if req.Generation != g.generation {
		return fail(kerr.IllegalGeneration)
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && g.protocol != "" && *req.Protocol != g.protocol) {
		return fail(kerr.InconsistentGroupProtocol)
	}
	m := g.members[req.MemberID]
	switch g.state {
	case Empty:
		return fail(kerr.UnknownMemberID)
	case PreparingRebalance:
		return fail(kerr.RebalanceInProgress)
	case CompletingRebalance:
		if m.syncWait != nil {
			m.syncWait <- SyncResult{Err: kerr.RebalanceInProgress}
		}
		m.syncWait = ch
		g.removePendingSync(m.id)
		if m.id != g.leader {
			return ch
		}
		assigned := make(map[string][]byte, len(req.Assignments))
		for _, a := range req.Assignments {
			assigned[a.MemberID] = a.Assignment
		}
		for _, mm := range g.members {
			mm.assignment = assigned[mm.id]
			if mm.assignment == nil {
				mm.assignment = []byte{}
			}
		}
		mark, err := g.storeGroup()
		if err != nil {
			g.resetAndPropagateAssignment(err)
			g.maybePrepareRebalanceOrCompleteJoin()
			return ch
		}
		g.transition(Stable)
		g.propagateAssignment(nil, mark)
	case Stable:
		g.removePendingSync(m.id)
		a := m.assignment
		if a == nil {
			a = []byte{}
		}
		ch <- SyncResult{ProtocolType: strPtr(g.protocolType), Protocol: nonEmptyPtr(g.protocol), Assignment: a,
			durable: g.lastMark()}
	}
	return ch
}

func (g *group) removePendingSync(id string) {
	delete(g.pendingSync, id)
	if len(g.pendingSync) == 0 {
		g.syncDeadline = time.Time{}
	}
}

func (g *group) heartbeat(req *HeartbeatRequest) *kerr.Error {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	if g.typ == TypeShare {
		return kerr.UnknownMemberID
	}
	if g.typ == TypeConsumer {
		return g.cgClassicHeartbeat(req)
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration
	}
	m := g.members[req.MemberID]
	switch g.state {
	case Empty:
		return kerr.UnknownMemberID
	case PreparingRebalance:
		m.deadline = g.now().Add(m.sessionTimeout())
		return kerr.RebalanceInProgress
	default:
		m.deadline = g.now().Add(m.sessionTimeout())
		return nil
	}
}

// leave handles a LeaveGroup (v0-v2: one member; v3+: a batch, static members by instance id).
func (g *group) leave(members []LeaveMember) LeaveResult {
	if g.state == Dead {
		return LeaveResult{Err: kerr.CoordinatorNotAvailable}
	}
	if g.typ == TypeShare {
		return LeaveResult{Err: kerr.UnknownMemberID}
	}
	if g.typ == TypeConsumer {
		return g.cgClassicLeave(members)
	}
	defer g.rearm()
	res := LeaveResult{Members: make([]*kerr.Error, len(members))}
	left := false
	for i, lm := range members {
		switch {
		case lm.MemberID == "":
			if lm.InstanceID == nil {
				res.Members[i] = kerr.UnknownMemberID
				continue
			}
			id, ok := g.static[*lm.InstanceID]
			if !ok {
				res.Members[i] = kerr.UnknownMemberID
				continue
			}
			g.removeLeaving(g.members[id], lm.Reason)
			left = true
		default:
			if _, ok := g.pending[lm.MemberID]; ok {
				delete(g.pending, lm.MemberID)
				left = true
				continue
			}
			if err := g.validateMember(lm.MemberID, lm.InstanceID); err != nil {
				res.Members[i] = err
				continue
			}
			g.removeLeaving(g.members[lm.MemberID], lm.Reason)
			left = true
		}
	}
	if left {
		switch g.state {
		case Stable, CompletingRebalance:
			g.maybePrepareRebalanceOrCompleteJoin()
		case PreparingRebalance:
			g.maybeCompleteJoinPhase()
		}
	}
	return res
}

func (g *group) removeLeaving(m *member, reason string) {
	g.c.log.Info("member left", "group", g.id, "member", m.id, "reason", reason)
	if m.joinWait != nil {
		m.joinWait <- JoinResult{Err: kerr.UnknownMemberID, Generation: -1}
		m.joinWait = nil
	}
	if m.syncWait != nil {
		m.syncWait <- SyncResult{Err: kerr.UnknownMemberID}
		m.syncWait = nil
	}
	g.removeMember(m)
}

// describe is DescribeGroups: member metadata and assignments only when Stable.
func (g *group) describe() GroupDescription {
	d := GroupDescription{Group: g.id, State: g.state.String(), ProtocolType: g.protocolType}
	stable := g.state == Stable
	if stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.membersInOrder() {
		md := MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost}
		if stable {
			md.Metadata = m.metadataFor(g.protocol)
			md.Assignment = m.assignment
		}
		d.Members = append(d.Members, md)
	}
	return d
}

// listing is the group as ListGroups shows it: its type, and its state with the names of its
// type (KIP-848 consumer groups: Empty, Assigning, Reconciling, Stable).
func (g *group) listing() GroupListing {
	l := GroupListing{Group: g.id, ProtocolType: g.protocolType, State: g.state.String(), Type: g.typ.String()}
	if g.typ == TypeConsumer && g.cg != nil && g.state != Dead {
		l.State = g.cg.stateName()
	}
	return l
}
