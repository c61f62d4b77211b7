package coordinator

// Online migration between the classic group protocol and KIP-848 consumer groups, following
// Kafka's GroupMetadataManager (validateOnlineUpgrade, convertToConsumerGroup,
// classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup, validateOnlineDowngradeWithFencedMembers,
// convertToClassicGroup). Every function on *group here runs on the group's goroutine.
//
//   - Upgrade: the first ConsumerGroupHeartbeat (epoch 0) to a non-empty classic group of protocol
//     type "consumer" (policy upgrade or bidirectional, at most group.consumer.max.size members)
//     turns it into a consumer group: the group epoch and target assignment epoch are the
//     generation; each classic member becomes a member at that epoch, STABLE, owning (and
//     targeted with) the partitions of its last ConsumerProtocol assignment, subscribed to the
//     topics of its subscription, with ClassicMemberMetadata (session timeout, protocols). Parked
//     JoinGroups and SyncGroups get REBALANCE_IN_PROGRESS. Records: the GroupMetadata tombstone,
//     then every member's metadata, the group epoch, every target, the target epoch and every
//     current assignment, in the batch of the joining member's records (the classic group comes
//     back if that batch cannot be written).
//   - Classic members in a consumer group (cgMember.classic != nil): JoinGroup updates the
//     member from its subscription and reconciles it (owned partitions from the subscription)
//     and answers at once with generation = member epoch; SyncGroup returns the member's current
//     assignment (ConsumerProtocol, the version of its first protocol's metadata), or
//     REBALANCE_IN_PROGRESS while the group epoch is ahead of it (unless it is revoking);
//     Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin; LeaveGroup removes
//     them. A member not syncing within its rebalance timeout after a JoinGroup, or not rejoining
//     within it after being told to, is fenced; its session timeout is its own.
//   - Downgrade: when members leave or are fenced and only members of the classic protocol
//     remain (policy downgrade or bidirectional, at most group.max.size of them), the group
//     becomes a classic group at generation = group epoch, Stable with the members'
//     target assignments and the protocol they all support, and a rebalance starts. Records:
//     every member's and the group's consumer-group tombstones, then GroupMetadata. So too,
//     without a rebalance, when a static member of the classic protocol replaces the last
//     member of the consumer protocol (its instance id, no member id).
//
// With the policy disabled, a JoinGroup to a non-empty consumer group answers
// INCONSISTENT_GROUP_PROTOCOL (Kafka 4.4's throwIfClassicMemberCannotJoinConsumerGroup), and
// a ConsumerGroupHeartbeat to a non-empty classic group GROUP_ID_NOT_FOUND.

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MigrationPolicy is group.consumer.migration.policy (Kafka's ConsumerGroupMigrationPolicy).
type MigrationPolicy int8

const (
	// MigrationBidirectional converts both ways (Kafka's default; the zero value).
	MigrationBidirectional MigrationPolicy = iota
	// MigrationUpgrade converts classic groups to consumer groups only.
	MigrationUpgrade
	// MigrationDowngrade converts consumer groups to classic groups only.
	MigrationDowngrade
	// MigrationDisabled converts neither way (empty groups still do).
	MigrationDisabled
)

// ParseMigrationPolicy reads a policy name, ignoring case as Kafka does.
func ParseMigrationPolicy(s string) (MigrationPolicy, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "bidirectional":
		return MigrationBidirectional, true
	case "upgrade":
		return MigrationUpgrade, true
	case "downgrade":
		return MigrationDowngrade, true
	case "disabled":
		return MigrationDisabled, true
	}
	return MigrationBidirectional, false
}

func (p MigrationPolicy) String() string {
	switch p {
	case MigrationUpgrade:
		return "upgrade"
	case MigrationDowngrade:
		return "downgrade"
	case MigrationDisabled:
		return "disabled"
	default:
		return "bidirectional"
	}
}

func (p MigrationPolicy) upgrade() bool { return p == MigrationBidirectional || p == MigrationUpgrade }
func (p MigrationPolicy) downgrade() bool {
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// memberSessionTimeout is m's session timeout: its own for a classic member, else
// group.consumer.session.timeout.ms.
func (c *Coordinator) memberSessionTimeout(m *cgMember) time.Duration {
	if m.classic != nil {
		return time.Duration(m.classic.SessionTimeoutMs) * time.Millisecond
	}
	return c.cfg.ConsumerSessionTimeout
}

func sameClassic(a, b *classicMeta) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.SessionTimeoutMs != b.SessionTimeoutMs || len(a.Protocols) != len(b.Protocols) {
		return false
	}
	for i := range a.Protocols {
		if a.Protocols[i].Name != b.Protocols[i].Name || string(a.Protocols[i].Metadata) != string(b.Protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// ---- the embedded ConsumerProtocol ----

// decodeSubscription reads a ConsumerProtocol subscription (ConsumerMemberMetadata).
func decodeSubscription(b []byte) (*kmsg.ConsumerMemberMetadata, error) {
	var s kmsg.ConsumerMemberMetadata
	if err := s.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("malformed consumer protocol subscription: %w", err)
	}
	return &s, nil
}

// protocolVersion is the ConsumerProtocol version a subscription starts with (0 if too short).
func protocolVersion(meta []byte) int16 {
	if len(meta) < 2 {
		return 0
	}
	return int16(uint16(meta[0])<<8 | uint16(meta[1]))
}

// namesToIDs maps partitions by topic name to partitions by topic id, dropping unknown topics
// (Kafka's toTopicPartitionMap).
func namesToIDs(topics map[string]TopicMeta, byName map[string][]int32) partitions {
	p := partitions{}
	for name, ps := range byName {
		tm, ok := topics[name]
		if !ok || len(ps) == 0 {
			continue
		}
		p[tm.ID] = normalizePartitions(append(p[tm.ID], ps...))
	}
	return p
}

// decodeAssignment reads a ConsumerProtocol assignment into partitions by topic id; an empty
// one (a member that has not synced) is no partitions.
func decodeAssignment(topics map[string]TopicMeta, b []byte) (partitions, error) {
	if len(b) == 0 {
		return partitions{}, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("malformed consumer protocol assignment: %w", err)
	}
	byName := map[string][]int32{}
	for _, t := range a.Topics {
		byName[t.Topic] = append(byName[t.Topic], t.Partitions...)
	}
	return namesToIDs(topics, byName), nil
}

// encodeAssignment writes p as a ConsumerProtocol assignment of the given version (topics by
// name; topics no longer known are left out).
func encodeAssignment(topics map[string]TopicMeta, p partitions, version int16) []byte {
	names := make(map[[16]byte]string, len(topics))
	for n, tm := range topics {
		names[tm.ID] = n
	}
	a := kmsg.ConsumerMemberAssignment{Version: max(version, 0)}
	for _, id := range p.sortedTopics() {
		n, ok := names[id]
		if !ok {
			continue
		}
		a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: n, Partitions: append([]int32(nil), p[id]...)})
	}
	sort.Slice(a.Topics, func(i, j int) bool { return a.Topics[i].Topic < a.Topics[j].Topic })
	return a.AppendTo(nil)
}

// ownedFromSubscription is the owned partitions of a subscription as a heartbeat reports them
// (never nil: a classic member always reports what it owns, possibly nothing).
func ownedFromSubscription(topics map[string]TopicMeta, s *kmsg.ConsumerMemberMetadata) []ConsumerTopicPartitions {
	out := []ConsumerTopicPartitions{}
	for _, t := range s.OwnedPartitions {
		tm, ok := topics[t.Topic]
		if !ok || len(t.Partitions) == 0 {
			continue
		}
		out = append(out, ConsumerTopicPartitions{TopicID: tm.ID, Partitions: t.Partitions})
	}
	return out
}

// ---- upgrade ----

// classicToConsumer converts a non-empty classic group to a consumer group in memory (Kafka's
// validateOnlineUpgrade and convertToConsumerGroup), or says why it cannot. It returns the
// conversion's records, which the caller writes in one batch with those of the joining member,
// and undo, which puts the classic group back if that fails.
func (g *group) classicToConsumer() ([]kv, func(), *cgErr) {
	c := g.c
	why := ""
	switch {
	case !c.cfg.MigrationPolicy.upgrade():
		why = "online upgrade is disabled"
	case g.protocolType != "consumer":
		why = "the group does not use the consumer embedded protocol"
	case c.cfg.ConsumerMaxSize > 0 && len(g.members) > c.cfg.ConsumerMaxSize:
		why = "the group size exceeds the consumer group maximum size"
	}
	if why != "" {
		c.log.Info("cannot upgrade the classic group to a consumer group", "group", g.id, "reason", why)
		return nil, nil, cgFail(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because %s.", g.id, why)
	}
	topics := c.topics()
	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch = g.generation, g.generation
	members := g.membersInOrder()
	for _, m := range members {
		meta := m.metadataFor(g.protocol)
		if meta == nil && len(m.protocols) > 0 {
			meta = m.protocols[0].Metadata
		}
		sub, err := decodeSubscription(meta)
		if err != nil {
			return nil, nil, cgFail(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the embedded consumer protocol is malformed.", g.id)
		}
		assigned, err := decodeAssignment(topics, m.assignment)
		if err != nil {
			return nil, nil, cgFail(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the embedded consumer protocol is malformed.", g.id)
		}
		nm := &cgMember{
			id: m.id, instanceID: m.instanceID, rackID: sub.Rack, clientID: m.clientID, clientHost: m.clientHost,
			topics: sortedUnique(sub.Topics), rebalanceTimeoutMs: m.rebalanceTimeoutMs,
			epoch: g.generation, prevEpoch: g.generation, state: msStable, assigned: assigned, pending: partitions{},
			classic: &classicMeta{SessionTimeoutMs: m.sessionTimeoutMs, Protocols: m.protocols},
		}
		cg.members[m.id] = nm
		if nm.instanceID != nil {
			cg.static[*nm.instanceID] = m.id
		}
		cg.target[m.id] = assigned
		cg.setOwned(nm, false)
	}
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)

	// The hash of the subscribed topics' metadata, as the consumer group computes it.
	saved := g.cg
	g.cg = cg
	all := make([]*cgMember, 0, len(ids))
	for _, id := range ids {
		all = append(all, cg.members[id])
	}
	cg.metaHash = topicsHash(g.cgSubscribedTopics(all))
	g.cg = saved

	recs := []kv{{Key: appendGroupKey(nil, g.id)}}
	for _, id := range ids {
		recs = append(recs, kv{Key: cgMemberKey(g.id, id), Value: appendCGMemberValue(nil, cg.members[id].value())})
	}
	recs = append(recs, kv{Key: cgMetadataKey(g.id), Value: appendCGMetadataValue(nil, cgMetadataValue{Epoch: cg.epoch, MetadataHash: cg.metaHash})})
	for _, id := range ids {
		recs = append(recs, kv{Key: cgTargetMemberKey(g.id, id), Value: appendCGTargetMemberValue(nil, cg.target[id])})
	}
	recs = append(recs, kv{Key: cgTargetMetadataKey(g.id), Value: appendCGEpochValue(nil, cg.assignmentEpoch)})
	for _, id := range ids {
		recs = append(recs, kv{Key: cgCurrentKey(g.id, id), Value: appendCGCurrentValue(nil, cg.members[id].currentValue())})
	}
	// Parked requests learn of the new rebalance and rejoin.
	g.failWaiters(kerr.RebalanceInProgress)
	now := g.now()
	for _, m := range cg.members {
		m.sessionDeadline = now.Add(c.memberSessionTimeout(m))
	}
	before := *g
	undo := func() {
		c.log.Info("classic group stays a classic group: the upgrade's records were not written", "group", g.id)
		g.typ, g.cg = before.typ, before.cg
		g.members, g.static, g.pending, g.pendingSync = before.members, before.static, before.pending, before.pendingSync
		g.protocolType, g.protocol, g.leader, g.generation = before.protocolType, before.protocol, before.leader, before.generation
		g.joinDeadline, g.syncDeadline, g.initial = before.joinDeadline, before.syncDeadline, before.initial
		g.state, g.prevState, g.stateSince, g.subscribed = before.state, before.prevState, before.stateSince, before.subscribed
	}
	g.typ, g.cg = TypeConsumer, cg
	g.members, g.static, g.pending, g.pendingSync = map[string]*member{}, map[string]string{}, map[string]time.Time{}, map[string]struct{}{}
	g.protocolType, g.protocol, g.leader, g.generation = "consumer", "", "", 0
	g.joinDeadline, g.syncDeadline, g.initial = time.Time{}, time.Time{}, nil
	g.cgSyncClassicView()
	c.log.Info("classic group upgraded to a consumer group", "group", g.id, "epoch", cg.epoch, "members", len(cg.members))
	return recs, undo, nil
}

// ---- classic members in a consumer group ----

// cgClassicJoin is Kafka's classicGroupJoinToConsumerGroup: a JoinGroup to a non-empty
// consumer group (INCONSISTENT_GROUP_PROTOCOL with the policy disabled).
func (g *group) cgClassicJoin(req *JoinRequest, ch chan JoinResult) chan JoinResult {
	cg := g.cg
	fail := func(err *kerr.Error, memberID string) chan JoinResult {
		ch <- JoinResult{Err: err, MemberID: memberID, Generation: -1}
		return ch
	}
	if g.c.cfg.MigrationPolicy == MigrationDisabled {
		g.c.log.Info("cannot join the consumer group with the classic protocol: the group migration is disabled", "group", g.id)
		return fail(kerr.InconsistentGroupProtocol, req.MemberID)
	}
	memberID := req.MemberID
	unknown := memberID == ""
	if unknown {
		memberID = newMemberID(req.ClientID)
	}
	if max := g.c.cfg.ConsumerMaxSize; max > 0 && cg.members[memberID] == nil && len(cg.members) >= max {
		return fail(kerr.GroupMaxSizeReached, req.MemberID)
	}
	if !g.cgSupportsClassicProtocols(req.ProtocolType, req.Protocols) {
		return fail(kerr.InconsistentGroupProtocol, req.MemberID)
	}
	if req.RequireKnownMemberID && unknown && req.InstanceID == nil {
		ch <- JoinResult{Err: kerr.MemberIDRequired, MemberID: memberID, Generation: -1}
		return ch
	}
	sub, err := decodeSubscription(req.Protocols[0].Metadata)
	if err != nil {
		g.c.log.Warn("classic member joining a consumer group sent a malformed subscription", "group", g.id, "member", memberID, "err", err)
		return fail(kerr.UnknownServerError, req.MemberID)
	}

	// Kafka's getOrMaybeSubscribeStaticConsumerGroupMember: a static member joining without a
	// member id replaces the instance's member (whatever its protocol); with one, it must be
	// the instance's member.
	var old, replaced *cgMember
	if req.InstanceID != nil {
		sid, ok := cg.static[*req.InstanceID]
		switch {
		case !unknown && !ok:
			return fail(kerr.UnknownMemberID, req.MemberID)
		case !unknown && sid != memberID:
			return fail(kerr.FencedInstanceID, req.MemberID)
		case unknown && ok:
			replaced = cg.members[sid]
		}
	}
	// Kafka's validateOnlineDowngradeWithReplacedMember: the replaced member was the last of
	// the consumer protocol.
	downgrade := replaced != nil && replaced.classic == nil && g.c.cfg.MigrationPolicy.downgrade() &&
		(g.c.cfg.MaxGroupSize <= 0 || len(cg.members) <= g.c.cfg.MaxGroupSize)
	if downgrade {
		for id, o := range cg.members {
			if id != replaced.id && o.classic == nil {
				downgrade = false
				break
			}
		}
	}
	if replaced == nil {
		old = cg.members[memberID]
	}
	m := newCGMemberFrom(memberID, old, replaced)
	if old == nil && replaced == nil {
		g.c.log.Info("member joins the consumer group using the classic protocol", "group", g.id, "member", memberID)
	}
	if req.InstanceID != nil {
		m.instanceID = req.InstanceID
	}
	if sub.Rack != nil {
		m.rackID = sub.Rack
	}
	if req.RebalanceTimeoutMs != -1 {
		m.rebalanceTimeoutMs = req.RebalanceTimeoutMs
	}
	m.topics = sortedUnique(sub.Topics)
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	m.classic = &classicMeta{SessionTimeoutMs: req.SessionTimeoutMs, Protocols: req.Protocols}

	mark, _, e := g.cgCommitMember(m, old, replaced, ownedFromSubscription(g.c.topics(), sub), nil, nil, false)
	if e != nil {
		return fail(e.err, req.MemberID)
	}
	m.joinDeadline = time.Time{}
	m.syncDeadline = g.now().Add(time.Duration(max(req.RebalanceTimeoutMs, 0)) * time.Millisecond)
	res := JoinResult{
		Generation: m.epoch, ProtocolType: strPtr("consumer"), Protocol: strPtr(m.classic.Protocols[0].Name),
		MemberID: m.id, durable: mark,
	}
	if downgrade {
		// Every member now uses the classic protocol: the group becomes a classic group with
		// the joining member in the replaced one's place, without a rebalance.
		g.c.log.Info("static member of the classic protocol replaced the last member of the consumer protocol", "group", g.id, "member", m.id, "replaced", replaced.id)
		mark, err := g.cgToClassicGroup(nil, false)
		if err != nil {
			ch <- JoinResult{Err: err, MemberID: req.MemberID, Generation: -1}
			return ch
		}
		res.durable = mark
	}
	ch <- res
	return ch
}

// cgSupportsClassicProtocols is Kafka's ConsumerGroup.supportsClassicProtocols: the consumer
// protocol type and a protocol every classic member supports.
func (g *group) cgSupportsClassicProtocols(protocolType string, ps []Protocol) bool {
	if protocolType != "consumer" || len(ps) == 0 {
		return false
	}
	n := 0
	counts := map[string]int{}
	for _, m := range g.cg.members {
		if m.classic == nil {
			continue
		}
		n++
		seen := map[string]bool{}
		for _, p := range m.classic.Protocols {
			if !seen[p.Name] {
				seen[p.Name] = true
				counts[p.Name]++
			}
		}
	}
	for _, p := range ps {
		if counts[p.Name] == n {
			return true
		}
	}
	return false
}

// cgClassicMember is Kafka's validateConsumerGroupMember followed by
// throwIfMemberDoesNotUseClassicProtocol.
func (g *group) cgClassicMember(memberID string, instanceID *string) (*cgMember, *kerr.Error) {
	var m *cgMember
	if instanceID == nil {
		m = g.cg.members[memberID]
	} else {
		if sid, ok := g.cg.static[*instanceID]; ok {
			m = g.cg.members[sid]
		}
		if m != nil && m.id != memberID {
			return nil, kerr.FencedInstanceID
		}
	}
	if m == nil || m.classic == nil {
		return nil, kerr.UnknownMemberID
	}
	return m, nil
}

// cgJoinDeadlineIfAbsent gives a classic member told to rejoin its rebalance timeout to do so.
func (g *group) cgJoinDeadlineIfAbsent(m *cgMember) {
	if m.joinDeadline.IsZero() {
		m.joinDeadline = g.now().Add(time.Duration(max(m.rebalanceTimeoutMs, 0)) * time.Millisecond)
	}
}

// cgClassicSync is Kafka's classicGroupSyncToConsumerGroup.
func (g *group) cgClassicSync(req *SyncRequest) SyncResult {
	defer g.rearm()
	m, err := g.cgClassicMember(req.MemberID, req.InstanceID)
	if err != nil {
		return SyncResult{Err: err}
	}
	if req.Generation != m.epoch {
		return SyncResult{Err: kerr.IllegalGeneration}
	}
	name := m.classic.Protocols[0].Name
	if (req.ProtocolType != nil && *req.ProtocolType != "consumer") || (req.Protocol != nil && *req.Protocol != name) {
		return SyncResult{Err: kerr.InconsistentGroupProtocol}
	}
	if g.cg.epoch > m.epoch && m.state != msUnrevoked {
		g.cgJoinDeadlineIfAbsent(m)
		return SyncResult{Err: kerr.RebalanceInProgress}
	}
	m.syncDeadline = time.Time{}
	m.sessionDeadline = g.now().Add(g.c.memberSessionTimeout(m))
	return SyncResult{
		ProtocolType: req.ProtocolType, Protocol: req.Protocol,
		Assignment: encodeAssignment(g.c.topics(), m.assigned, protocolVersion(m.classic.Protocols[0].Metadata)),
		durable:    g.lastMark(),
	}
}

// cgClassicHeartbeat is Kafka's classicGroupHeartbeatToConsumerGroup: REBALANCE_IN_PROGRESS
// when the member must rejoin (the group epoch moved, it must revoke partitions, or partitions
// it waited for are free).
func (g *group) cgClassicHeartbeat(req *HeartbeatRequest) *kerr.Error {
	defer g.rearm()
	m, err := g.cgClassicMember(req.MemberID, req.InstanceID)
	if err != nil {
		return err
	}
	if req.Generation != m.epoch {
		return kerr.IllegalGeneration
	}
	m.sessionDeadline = g.now().Add(g.c.memberSessionTimeout(m))
	if m.epoch < g.cg.epoch || m.state == msUnrevoked || (m.state == msUnreleased && !g.cgWaitingOnUnreleased(m)) {
		g.cgJoinDeadlineIfAbsent(m)
		return kerr.RebalanceInProgress
	}
	return nil
}

// cgWaitingOnUnreleased is Kafka's ConsumerGroup.waitingOnUnreleasedPartition: a target
// partition of m is still held by another member.
func (g *group) cgWaitingOnUnreleased(m *cgMember) bool {
	if m.state != msUnreleased {
		return false
	}
	for t, ps := range g.cg.target[m.id] {
		for _, p := range ps {
			if m.assigned.has(t, p) {
				continue
			}
			if _, held := g.cg.ownerEpoch[tpKey{t, p}]; held {
				return true
			}
		}
	}
	return false
}

// cgClassicLeave is Kafka's classicGroupLeaveToConsumerGroup: the classic members named leave
// (one group epoch bump for all of them).
func (g *group) cgClassicLeave(members []LeaveMember) LeaveResult {
	defer g.rearm()
	res := LeaveResult{Members: make([]*kerr.Error, len(members))}
	var leaving []*cgMember
	seen := map[string]bool{}
	for i, lm := range members {
		var m *cgMember
		if lm.InstanceID == nil {
			m = g.cg.members[lm.MemberID]
			if m == nil || m.classic == nil {
				res.Members[i] = kerr.UnknownMemberID
				continue
			}
		} else {
			if sid, ok := g.cg.static[*lm.InstanceID]; ok {
				m = g.cg.members[sid]
			}
			if m == nil {
				res.Members[i] = kerr.UnknownMemberID
				continue
			}
			if lm.MemberID != "" && lm.MemberID != m.id {
				res.Members[i] = kerr.FencedInstanceID
				continue
			}
			if m.classic == nil {
				res.Members[i] = kerr.UnknownMemberID
				continue
			}
		}
		g.c.log.Info("member left the consumer group through LeaveGroup", "group", g.id, "member", m.id, "reason", lm.Reason)
		if !seen[m.id] {
			seen[m.id] = true
			leaving = append(leaving, m)
		}
	}
	if len(leaving) > 0 {
		if _, err := g.cgFenceMembers(leaving, "the member left the group"); err != nil {
			return LeaveResult{Err: err}
		}
	}
	return res
}

// ---- downgrade ----

// cgShouldDowngrade is Kafka 4.4's validateOnlineDowngradeWithFencedMembers: without the
// fenced members ms, the group is not empty and all its members use the classic protocol, and
// the policy and group.max.size allow a downgrade.
func (g *group) cgShouldDowngrade(ms []*cgMember) bool {
	gone := make(map[string]bool, len(ms))
	for _, m := range ms {
		gone[m.id] = true
	}
	n := 0
	for id, o := range g.cg.members {
		if gone[id] {
			continue
		}
		if o.classic == nil {
			return false
		}
		n++
	}
	switch {
	case n < 1:
		return false
	case !g.c.cfg.MigrationPolicy.downgrade():
		g.c.log.Info("cannot downgrade the consumer group to a classic group: the online downgrade is disabled", "group", g.id)
		return false
	case g.c.cfg.MaxGroupSize > 0 && n > g.c.cfg.MaxGroupSize:
		g.c.log.Info("cannot downgrade the consumer group to a classic group: it has more members than group.max.size", "group", g.id)
		return false
	}
	return true
}

// cgToClassicGroup is Kafka's convertToClassicGroup with ClassicGroup.fromConsumerGroup: the
// consumer group without the leaving members becomes a Stable classic group at generation =
// group epoch, each member assigned its target, and (rebalance) a rebalance starts.
func (g *group) cgToClassicGroup(leaving []*cgMember, rebalance bool) (durableMark, *kerr.Error) {
	gone := make(map[string]bool, len(leaving))
	for _, m := range leaving {
		gone[m.id] = true
	}
	cg := g.cg
	topics := g.c.topics()
	ids := make([]string, 0, len(cg.members))
	for id := range cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var recs []kv
	for _, id := range ids {
		recs = append(recs, kv{Key: cgCurrentKey(g.id, id)}, kv{Key: cgTargetMemberKey(g.id, id)}, kv{Key: cgMemberKey(g.id, id)})
	}
	recs = append(recs, g.cgTombstones()...)

	now := g.now()
	members := map[string]*member{}
	static := map[string]string{}
	var order []*member
	seq := g.nextSeq
	for _, id := range ids {
		m := cg.members[id]
		if gone[id] {
			continue
		}
		nm := &member{
			id: id, instanceID: m.instanceID, clientID: m.clientID, clientHost: m.clientHost,
			sessionTimeoutMs: m.classic.SessionTimeoutMs, rebalanceTimeoutMs: m.rebalanceTimeoutMs,
			protocols: m.classic.Protocols, seq: seq,
		}
		seq++
		members[id] = nm
		order = append(order, nm)
		if nm.instanceID != nil {
			static[*nm.instanceID] = id
		}
	}
	// The protocol every member supports, as the classic group selects it (leader: the first).
	saved, savedLeader := g.members, g.leader
	g.members, g.leader = members, order[0].id
	protocol := g.selectProtocol()
	g.members, g.leader = saved, savedLeader
	for _, nm := range order {
		nm.assignment = encodeAssignment(topics, cg.target[nm.id], protocolVersion(nm.metadataFor(protocol)))
	}
	v := &groupValue{
		ProtocolType: "consumer", Generation: cg.epoch, Protocol: nonEmptyPtr(protocol), Leader: nonEmptyPtr(order[0].id),
		CurrentStateTimestamp: g.wall().UnixMilli(),
	}
	for _, nm := range order {
		v.Members = append(v.Members, memberValue{
			MemberID: nm.id, InstanceID: nm.instanceID, ClientID: nm.clientID, ClientHost: nm.clientHost,
			RebalanceTimeout: nm.rebalanceTimeoutMs, SessionTimeout: nm.sessionTimeoutMs,
			Subscription: nm.metadataFor(protocol), Assignment: nm.assignment,
		})
	}
	recs = append(recs, kv{Key: appendGroupKey(nil, g.id), Value: appendGroupValue(nil, v)})
	mark, err := g.appendRecords(recs)
	if err != nil {
		g.c.log.Warn("consumer group: writing the downgrade to a classic group failed", "group", g.id, "err", err)
		return durableMark{}, appendError(err)
	}
	epoch := cg.epoch
	g.typ, g.cg = TypeClassic, nil
	g.members, g.static, g.pending, g.pendingSync = members, static, map[string]time.Time{}, map[string]struct{}{}
	g.nextSeq = seq
	g.protocolType, g.protocol, g.leader, g.generation = "consumer", protocol, order[0].id, epoch
	for _, nm := range order {
		nm.deadline = now.Add(nm.sessionTimeout())
	}
	g.subscribed = g.computeSubscribed()
	if g.state != Stable {
		g.transition(Stable)
	}
	g.c.log.Info("consumer group downgraded to a classic group", "group", g.id, "generation", epoch, "members", len(members))
	if rebalance {
		g.prepareRebalance()
	}
	return mark, nil
}
