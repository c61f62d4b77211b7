package coordinator

// KIP-848 consumer groups (ConsumerGroupHeartbeat), following Kafka's GroupMetadataManager and
// CurrentAssignmentBuilder rule for rule. Every function on *group here runs on the group's
// goroutine.
//
// A consumer group has a group epoch (bumped when a member joins, leaves or changes its
// subscription, or when the subscribed topics' metadata changes), a target assignment computed
// by a server-side assignor at an assignment epoch, and per member a member epoch and a current
// assignment that converges to its target:
//   - STABLE: the member owns its target at the target's epoch, or waits for a newer one.
//   - UNREVOKED_PARTITIONS: it must first revoke partitions (its heartbeats' owned partitions
//     no longer list them); meanwhile it keeps its epoch. Not done within its rebalance timeout,
//     it is fenced (removed).
//   - UNRELEASED_PARTITIONS: it is at the target epoch but some of its target partitions are
//     still owned (assigned or pending revocation) by another member; it gets them once freed.
// A partition is never handed to a member while another member's current assignment (assigned
// or pending revocation) holds it: ownerEpoch indexes those partitions.
//
// Records are written before the state changes (appendRecords; the heartbeat's response waits
// for their durability): ConsumerGroupMemberMetadata when a member joins or changes,
// ConsumerGroupMetadata when the group epoch is bumped, ConsumerGroupTargetAssignmentMember for
// every member whose target changed and ConsumerGroupTargetAssignmentMetadata at each new
// target, ConsumerGroupCurrentMemberAssignment when a member's current assignment changes,
// ConsumerGroupRegularExpression when a regular expression resolves to other topics; tombstones
// (current, target, member, in that order) when a member leaves or is fenced.

import (
	"fmt"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/coordinator/assignor"
)

// memberState is a consumer group member's reconciliation state (Kafka's MemberState values, as
// stored in ConsumerGroupCurrentMemberAssignmentValue.State).
type memberState int8

const (
	msStable     memberState = 0
	msUnrevoked  memberState = 1
	msUnreleased memberState = 2
	msUnknown    memberState = 127
)

func (s memberState) String() string {
	switch s {
	case msStable:
		return "STABLE"
	case msUnrevoked:
		return "UNREVOKED_PARTITIONS"
	case msUnreleased:
		return "UNRELEASED_PARTITIONS"
	default:
		return "UNKNOWN"
	}
}

// Member epochs a leaving member sends (ConsumerGroupHeartbeat).
const (
	leaveEpoch       int32 = -1
	staticLeaveEpoch int32 = -2
)

// Bounds on what one heartbeat may carry.
const (
	maxSubscribedTopics = 10000
	maxRegexLen         = 4096
	maxOwnedPartitions  = 100000
)

// TopicMeta is one topic of the broker's metadata image as consumer groups need it.
type TopicMeta struct {
	ID         [16]byte
	Partitions int32
}

// ConsumerTopicPartitions is one topic's partitions by topic id (owned partitions in a
// heartbeat, an assignment in its response).
type ConsumerTopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// ConsumerHeartbeatRequest is a ConsumerGroupHeartbeat request. Nil fields mean "unchanged"
// (as the protocol's nullable fields do).
type ConsumerHeartbeatRequest struct {
	Group       string
	MemberID    string
	MemberEpoch int32
	InstanceID  *string
	RackID      *string
	// RebalanceTimeoutMs is -1 when unchanged.
	RebalanceTimeoutMs   int32
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	ServerAssignor       *string
	// OwnedTopics is nil when not sent.
	OwnedTopics []ConsumerTopicPartitions
	ClientID    string
	ClientHost  string
	// Version is the request's version (v0: the coordinator generates the member id).
	Version int16
	// CanDescribe reports whether the request's principal may DESCRIBE a topic (nil: every
	// topic, the authorizer is off). A regex refresh this heartbeat triggers resolves every
	// regex of the group to the topics it allows (Kafka's TopicRegexResolver filters by the
	// context of the member that triggered the refresh).
	CanDescribe func(topic string) bool
}

// ConsumerHeartbeatResult is a ConsumerGroupHeartbeat response.
type ConsumerHeartbeatResult struct {
	Err                 *kerr.Error
	ErrMessage          string
	MemberID            string
	MemberEpoch         int32
	HeartbeatIntervalMs int32
	// Assignment is set (possibly empty) when the response carries the member's assignment.
	Assignment []ConsumerTopicPartitions
	HasAssign  bool

	durable durableMark
}

// cgMember is one member of a consumer group.
type cgMember struct {
	id                 string
	instanceID         *string
	rackID             *string
	clientID           string
	clientHost         string
	topics             []string // sorted, deduplicated
	regex              *string
	rebalanceTimeoutMs int32
	serverAssignor     *string

	epoch, prevEpoch int32
	state            memberState
	assigned         partitions
	pending          partitions // pending revocation

	// sessionDeadline expires the member; revokeDeadline fences it when it is still at
	// revokeEpoch (UNREVOKED_PARTITIONS for longer than its rebalance timeout).
	sessionDeadline time.Time
	revokeDeadline  time.Time
	revokeEpoch     int32

	// classic is set for a member of the classic protocol (JoinGroup/SyncGroup, migrate.go).
	// joinDeadline fences it when it does not rejoin in time after being told to;
	// syncDeadline when it does not send SyncGroup in time after a JoinGroup.
	classic      *classicMeta
	joinDeadline time.Time
	syncDeadline time.Time
}

func (m *cgMember) value() *cgMemberValue {
	return &cgMemberValue{
		InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
		SubscribedTopics: m.topics, SubscribedRegex: m.regex, RebalanceTimeoutMs: m.rebalanceTimeoutMs,
		ServerAssignor: m.serverAssignor, Classic: m.classic,
	}
}

func (m *cgMember) currentValue() *cgCurrentValue {
	return &cgCurrentValue{MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: m.state,
		Assigned: m.assigned, PendingRevocation: m.pending}
}

// validateEpoch is Kafka's ConsumerGroup.validateMemberEpoch: a classic member's generation
// must be its epoch (ILLEGAL_GENERATION), a consumer member's epoch its epoch
// (STALE_MEMBER_EPOCH).
func (m *cgMember) validateEpoch(epoch int32) *kerr.Error {
	switch {
	case epoch == m.epoch:
		return nil
	case m.classic != nil:
		return kerr.IllegalGeneration
	default:
		return kerr.StaleMemberEpoch
	}
}

func (m *cgMember) reconciledTo(epoch int32) bool { return m.state == msStable && m.epoch == epoch }

// sameSubscription reports whether a and b subscribe to the same topic names and regex.
func sameSubscription(a, b *cgMember) bool {
	return slices.Equal(a.topics, b.topics) && eqStrPtr(a.regex, b.regex)
}

func eqStrPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// sameMetadata reports whether the member metadata record of a and b is the same.
func sameMetadata(a, b *cgMember) bool {
	return sameSubscription(a, b) && eqStrPtr(a.instanceID, b.instanceID) && eqStrPtr(a.rackID, b.rackID) &&
		a.clientID == b.clientID && a.clientHost == b.clientHost && a.rebalanceTimeoutMs == b.rebalanceTimeoutMs &&
		eqStrPtr(a.serverAssignor, b.serverAssignor) && sameClassic(a.classic, b.classic)
}

type tpKey struct {
	topic [16]byte
	part  int32
}

// cgRegex is one regular expression members subscribe to, resolved against the topics.
type cgRegex struct {
	re        *regexp.Regexp // nil until compiled
	topics    []string       // sorted
	version   int64
	timestamp int64
}

// consumerGroup is a KIP-848 consumer group's state (group.cg), owned by the group's goroutine.
type consumerGroup struct {
	epoch           int32 // group epoch
	assignmentEpoch int32 // target assignment epoch
	members         map[string]*cgMember
	static          map[string]string     // instance id -> member id
	target          map[string]partitions // member id -> target assignment
	// ownerEpoch is, per partition held by a member's current assignment (assigned or pending
	// revocation), that member's epoch (Kafka's currentPartitionEpoch).
	ownerEpoch map[tpKey]int32
	regexes    map[string]*cgRegex
	// metaHash is the hash of the subscribed topics' metadata the group epoch was computed
	// with; metaDirty asks the next heartbeat to recompute it (the topics changed).
	metaHash  int64
	metaDirty bool
	// metaSeen is the coordinator's metaVersion the group last looked at.
	metaSeen uint64
	// regexStale asks the next heartbeat to resolve the regexes again (the topics changed since
	// they were last resolved).
	regexStale bool
}

// lastRegexRefresh is when the regexes in used were last resolved (the oldest resolution's
// timestamp; every refresh rewrites them all), or zero when none is resolved.
func (cg *consumerGroup) lastRegexRefresh(used map[string]bool) time.Time {
	var ms int64
	first := true
	for re := range used {
		if r := cg.regexes[re]; r != nil && (first || r.timestamp < ms) {
			ms, first = r.timestamp, false
		}
	}
	if first {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members: map[string]*cgMember{}, static: map[string]string{}, target: map[string]partitions{},
		ownerEpoch: map[tpKey]int32{}, regexes: map[string]*cgRegex{},
	}
}

// stateName is the group's state with Kafka's ConsumerGroupState names.
func (cg *consumerGroup) stateName() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.epoch > cg.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if !m.reconciledTo(cg.assignmentEpoch) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// setOwned replaces m's contribution to ownerEpoch (call before changing m's assignment with
// remove=true, after with remove=false).
func (cg *consumerGroup) setOwned(m *cgMember, remove bool) {
	for _, p := range []partitions{m.assigned, m.pending} {
		for t, ps := range p {
			for _, x := range ps {
				k := tpKey{t, x}
				if remove {
					if e, ok := cg.ownerEpoch[k]; ok && e == m.epoch {
						delete(cg.ownerEpoch, k)
					}
				} else {
					cg.ownerEpoch[k] = m.epoch
				}
			}
		}
	}
}

// updateCurrent gives m a new current assignment state, keeping ownerEpoch right.
func (cg *consumerGroup) updateCurrent(m *cgMember, v *cgCurrentValue) {
	cg.setOwned(m, true)
	m.epoch, m.prevEpoch, m.state = v.MemberEpoch, v.PreviousMemberEpoch, v.State
	m.assigned, m.pending = v.Assigned, v.PendingRevocation
	if m.assigned == nil {
		m.assigned = partitions{}
	}
	if m.pending == nil {
		m.pending = partitions{}
	}
	cg.setOwned(m, false)
}

// removeMember forgets m and frees its partitions.
func (cg *consumerGroup) removeMember(m *cgMember) {
	cg.setOwned(m, true)
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.instanceID != nil && cg.static[*m.instanceID] == m.id {
		delete(cg.static, *m.instanceID)
	}
}

// ---- the heartbeat ----

// cgErr is a heartbeat failure with Kafka's message.
type cgErr struct {
	err *kerr.Error
	msg string
}

func cgFail(err *kerr.Error, format string, args ...any) *cgErr {
	return &cgErr{err: err, msg: fmt.Sprintf(format, args...)}
}

// validateConsumerHeartbeat is Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid.
func (c *Coordinator) validateConsumerHeartbeat(req *ConsumerHeartbeatRequest) *cgErr {
	if req.Version >= 1 && req.MemberID == "" {
		return cgFail(kerr.InvalidRequest, "MemberId can't be empty.")
	}
	if req.Group == "" {
		return cgFail(kerr.InvalidRequest, "GroupId can't be empty.")
	}
	if len(req.Group) > maxStringLen || len(req.MemberID) > maxStringLen {
		return cgFail(kerr.InvalidRequest, "GroupId or MemberId too long.")
	}
	if req.InstanceID != nil && (*req.InstanceID == "" || len(*req.InstanceID) > maxStringLen) {
		return cgFail(kerr.InvalidRequest, "InstanceId can't be empty.")
	}
	if req.RackID != nil && (*req.RackID == "" || len(*req.RackID) > maxStringLen) {
		return cgFail(kerr.InvalidRequest, "RackId can't be empty.")
	}
	switch e := req.MemberEpoch; {
	case e > 0 || e == leaveEpoch:
		if req.MemberID == "" {
			return cgFail(kerr.InvalidRequest, "MemberId can't be empty.")
		}
	case e == 0:
		if req.RebalanceTimeoutMs == -1 {
			return cgFail(kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request.")
		}
		if req.OwnedTopics == nil || len(req.OwnedTopics) > 0 {
			return cgFail(kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining.")
		}
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return cgFail(kerr.InvalidRequest, "Subscription must be provided in first request.")
		}
	case e == staticLeaveEpoch:
		if req.MemberID == "" {
			return cgFail(kerr.InvalidRequest, "MemberId can't be empty.")
		}
		if req.InstanceID == nil {
			return cgFail(kerr.InvalidRequest, "InstanceId can't be null.")
		}
	default:
		return cgFail(kerr.InvalidRequest, "MemberEpoch is invalid.")
	}
	if req.RebalanceTimeoutMs < -1 {
		return cgFail(kerr.InvalidRequest, "RebalanceTimeoutMs is invalid.")
	}
	if len(req.SubscribedTopicNames) > maxSubscribedTopics {
		return cgFail(kerr.InvalidRequest, "Too many subscribed topics.")
	}
	for _, t := range req.SubscribedTopicNames {
		if len(t) > maxStringLen {
			return cgFail(kerr.InvalidRequest, "Subscribed topic name too long.")
		}
	}
	if re := req.SubscribedTopicRegex; re != nil && *re != "" {
		if len(*re) > maxRegexLen {
			return cgFail(kerr.InvalidRegularExpression, "SubscribedTopicRegex is too long.")
		}
		if _, err := compileTopicRegex(*re); err != nil {
			return cgFail(kerr.InvalidRegularExpression, "SubscribedTopicRegex `%s` is not a valid regular expression: %v.", *re, err)
		}
	}
	n := 0
	for _, t := range req.OwnedTopics {
		n += len(t.Partitions)
	}
	if n > maxOwnedPartitions {
		return cgFail(kerr.InvalidRequest, "Too many owned partitions.")
	}
	if a := req.ServerAssignor; a != nil && c.assignor(*a) == nil {
		return cgFail(kerr.UnsupportedAssignor, "ServerAssignor %s is not supported. Supported assignors: %s.", *a, c.assignorNames())
	}
	return nil
}

// compileTopicRegex compiles a subscription regex with Kafka's (RE2/J) semantics: it must match
// the whole topic name.
func compileTopicRegex(re string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + re + ")$")
}

func (c *Coordinator) assignor(name string) assignor.Assignor {
	for _, a := range c.cfg.ConsumerAssignors {
		if a.Name() == name {
			return a
		}
	}
	return nil
}

func (c *Coordinator) assignorNames() string {
	s := ""
	for i, a := range c.cfg.ConsumerAssignors {
		if i > 0 {
			s += ", "
		}
		s += a.Name()
	}
	return s
}

// cgHeartbeat handles a ConsumerGroupHeartbeat (already validated) on g.
func (g *group) cgHeartbeat(req *ConsumerHeartbeatRequest) (res ConsumerHeartbeatResult) {
	defer g.rearm()
	res.MemberID, res.MemberEpoch = req.MemberID, req.MemberEpoch
	fail := func(e *cgErr) ConsumerHeartbeatResult {
		return ConsumerHeartbeatResult{Err: e.err, ErrMessage: e.msg, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	if g.state == Dead {
		return fail(cgFail(kerr.CoordinatorNotAvailable, ""))
	}
	if req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch {
		return g.cgLeave(req)
	}
	var recs []kv
	if g.typ == TypeClassic && req.MemberEpoch == 0 && (len(g.members) > 0 || len(g.pending) > 0) {
		// An online upgrade (migrate.go): its records go in the same batch as this member's
		// join, and the classic group comes back if the join fails.
		conv, undo, e := g.classicToConsumer()
		if e != nil {
			return fail(e)
		}
		recs = conv
		defer func() {
			if res.Err != nil {
				undo()
			}
		}()
	} else if e := g.cgEnsureConsumer(req.MemberEpoch == 0); e != nil {
		return fail(e)
	}
	cg := g.cg
	if v := g.c.metaVersion.Load(); v != cg.metaSeen {
		cg.metaSeen, cg.metaDirty, cg.regexStale = v, true, true
	}
	// group.consumer.max.size counts members; a static member replacing its own instance
	// takes no new place.
	replacing := req.InstanceID != nil && cg.static[*req.InstanceID] != ""
	if max := g.c.cfg.ConsumerMaxSize; max > 0 && len(cg.members) >= max && (req.MemberID == "" || cg.members[req.MemberID] == nil) && !replacing {
		return fail(cgFail(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", max))
	}
	memberID := req.MemberID
	if memberID == "" {
		memberID = newMemberID(req.ClientID)
	}
	var replaced *cgMember // a static member this one replaces
	old := cg.members[memberID]
	if req.InstanceID == nil {
		if old == nil && req.MemberEpoch != 0 {
			return fail(cgFail(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, g.id))
		}
	} else if req.MemberEpoch == 0 {
		if sid, ok := cg.static[*req.InstanceID]; ok && sid != memberID {
			prev := cg.members[sid]
			if prev.epoch != staticLeaveEpoch {
				return fail(cgFail(kerr.UnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.", memberID, *req.InstanceID, sid))
			}
			replaced = prev
		}
	} else {
		sid, ok := cg.static[*req.InstanceID]
		if !ok {
			return fail(cgFail(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID))
		}
		if sid != memberID {
			return fail(cgFail(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", memberID, *req.InstanceID, sid))
		}
	}
	// The epoch check (throwIfConsumerGroupMemberEpochIsInvalid); a known member rejoining
	// with epoch 0 has abandoned its partitions and starts over.
	if old != nil && req.MemberEpoch != 0 {
		if req.MemberEpoch > old.epoch {
			return fail(cgFail(kerr.FencedMemberEpoch, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, old.epoch))
		}
		if req.MemberEpoch < old.epoch && (req.MemberEpoch != old.prevEpoch || !ownedSubset(req.OwnedTopics, old.assigned)) {
			return fail(cgFail(kerr.FencedMemberEpoch, "The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", req.MemberEpoch, old.epoch))
		}
	}

	// 1. The member, created or updated.
	m := newCGMemberFrom(memberID, old, replaced)
	if req.InstanceID != nil {
		m.instanceID = req.InstanceID
	}
	if req.RackID != nil {
		m.rackID = req.RackID
	}
	if req.RebalanceTimeoutMs != -1 {
		m.rebalanceTimeoutMs = req.RebalanceTimeoutMs
	}
	if req.ServerAssignor != nil {
		m.serverAssignor = req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		m.topics = sortedUnique(req.SubscribedTopicNames)
	}
	if req.SubscribedTopicRegex != nil {
		if *req.SubscribedTopicRegex == "" {
			m.regex = nil
		} else {
			m.regex = req.SubscribedTopicRegex
		}
	}
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	if m.topics == nil {
		m.topics = []string{}
	}
	if old != nil && req.MemberEpoch == 0 && (old.epoch != 0 || old.assigned.count() > 0 || old.pending.count() > 0) {
		// A rejoin: the member abandoned what it owned.
		m.epoch, m.prevEpoch, m.state, m.assigned, m.pending = 0, 0, msStable, partitions{}, partitions{}
	}
	mark, startAssigned, e := g.cgCommitMember(m, old, replaced, req.OwnedTopics, recs, req.CanDescribe, true)
	if e != nil {
		return fail(e)
	}

	res = ConsumerHeartbeatResult{MemberID: m.id, MemberEpoch: m.epoch,
		HeartbeatIntervalMs: int32(g.c.cfg.ConsumerHeartbeatInterval / time.Millisecond), durable: mark}
	full := req.MemberEpoch == 0 || (req.RebalanceTimeoutMs != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.OwnedTopics != nil)
	if full || !startAssigned.equal(m.assigned) {
		res.HasAssign = true
		for _, t := range m.assigned.sortedTopics() {
			res.Assignment = append(res.Assignment, ConsumerTopicPartitions{TopicID: t, Partitions: m.assigned[t]})
		}
	}
	return res
}

func sameCurrent(a, b *cgCurrentValue) bool {
	return a.MemberEpoch == b.MemberEpoch && a.PreviousMemberEpoch == b.PreviousMemberEpoch && a.State == b.State &&
		a.Assigned.equal(b.Assigned) && a.PendingRevocation.equal(b.PendingRevocation)
}

func sortedUnique(ss []string) []string {
	out := append([]string{}, ss...)
	sort.Strings(out)
	return slices.Compact(out)
}

// ownedSubset reports whether every owned partition is in assigned (nil owned: not sent, true).
func ownedSubset(owned []ConsumerTopicPartitions, assigned partitions) bool {
	for _, t := range owned {
		for _, p := range t.Partitions {
			if !assigned.has(t.TopicID, p) {
				return false
			}
		}
	}
	return true
}

// reconcile is Kafka's CurrentAssignmentBuilder.build: the member's next current assignment
// given its target at targetEpoch, the epoch of each partition's current owner (-1: free) and
// the partitions the member reports owning (nil: not reported).
func reconcile(m *cgMember, targetEpoch int32, target partitions, ownerEpoch func(t [16]byte, p int32) int32, owned []ConsumerTopicPartitions) *cgCurrentValue {
	ownsAny := func(p partitions) bool {
		if owned == nil {
			return true
		}
		for _, t := range owned {
			for _, x := range t.Partitions {
				if p.has(t.TopicID, x) {
					return true
				}
			}
		}
		return false
	}
	switch m.state {
	case msStable:
		if m.epoch != targetEpoch {
			return nextAssignment(m, m.epoch, targetEpoch, target, ownerEpoch, ownsAny)
		}
	case msUnrevoked:
		if ownsAny(m.pending) {
			return m.currentValue()
		}
		return nextAssignment(m, m.epoch+1, targetEpoch, target, ownerEpoch, ownsAny)
	case msUnreleased:
		return nextAssignment(m, m.epoch, targetEpoch, target, ownerEpoch, ownsAny)
	default:
		return nextAssignment(m, targetEpoch, targetEpoch, target, ownerEpoch, ownsAny)
	}
	return m.currentValue()
}

// nextAssignment is Kafka's CurrentAssignmentBuilder.computeNextAssignment: keep what is both
// assigned and targeted, revoke the rest first, then add the targeted partitions no one else
// holds.
func nextAssignment(m *cgMember, memberEpoch, targetEpoch int32, target partitions, ownerEpoch func([16]byte, int32) int32, ownsAny func(partitions) bool) *cgCurrentValue {
	kept, revoke, add := partitions{}, partitions{}, partitions{}
	unreleased := false
	topics := map[[16]byte]bool{}
	for t := range target {
		topics[t] = true
	}
	for t := range m.assigned {
		topics[t] = true
	}
	for t := range topics {
		tgt, cur := target[t], m.assigned[t]
		for _, p := range cur {
			if target.has(t, p) {
				kept[t] = append(kept[t], p)
			} else {
				revoke[t] = append(revoke[t], p)
			}
		}
		for _, p := range tgt {
			if m.assigned.has(t, p) {
				continue
			}
			if ownerEpoch(t, p) != -1 {
				unreleased = true
				continue
			}
			add[t] = append(add[t], p)
		}
	}
	switch {
	case len(revoke) > 0 && ownsAny(revoke):
		return &cgCurrentValue{MemberEpoch: memberEpoch, PreviousMemberEpoch: prevOf(m, memberEpoch), State: msUnrevoked, Assigned: kept, PendingRevocation: revoke}
	case len(add) > 0:
		for t, ps := range add {
			kept[t] = normalizePartitions(append(kept[t], ps...))
		}
		st := msStable
		if unreleased {
			st = msUnreleased
		}
		return &cgCurrentValue{MemberEpoch: targetEpoch, PreviousMemberEpoch: prevOf(m, targetEpoch), State: st, Assigned: kept, PendingRevocation: partitions{}}
	case unreleased:
		return &cgCurrentValue{MemberEpoch: targetEpoch, PreviousMemberEpoch: prevOf(m, targetEpoch), State: msUnreleased, Assigned: kept, PendingRevocation: partitions{}}
	default:
		return &cgCurrentValue{MemberEpoch: targetEpoch, PreviousMemberEpoch: prevOf(m, targetEpoch), State: msStable, Assigned: kept, PendingRevocation: partitions{}}
	}
}

// prevOf is ConsumerGroupMember.Builder.updateMemberEpoch: the previous epoch moves only when
// the epoch does.
func prevOf(m *cgMember, newEpoch int32) int32 {
	if newEpoch != m.epoch {
		return m.epoch
	}
	return m.prevEpoch
}

// cgMembersWith returns the group's members with m (when not nil) added or replacing its old
// self, and without replaced (when not nil), sorted by id.
func (g *group) cgMembersWith(m, replaced *cgMember) []*cgMember {
	out := make([]*cgMember, 0, len(g.cg.members)+1)
	for id, mm := range g.cg.members {
		if (m != nil && id == m.id) || (replaced != nil && id == replaced.id) {
			continue
		}
		out = append(out, mm)
	}
	if m != nil {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// cgResolveRegexes returns the records of the group's regexes given its members: tombstones
// for the regexes no member uses any more and, when resolve is set and a refresh is due, the
// resolution of every regex members use. A refresh is due, as in Kafka's
// GroupMetadataManager.maybeUpdateRegularExpressions, when a regex has no resolution yet (a
// member subscribed to a regex new to the group), when the topics changed since the last
// resolution, or when it is older than group.consumer.regex.refresh.interval.ms. A refresh
// resolves them all in the context of the member whose heartbeat triggered it: canDescribe (nil:
// every topic) keeps only the topics that member's principal may DESCRIBE, and the group's
// other members, whatever their principals, share that resolution until the next refresh. Every
// refresh rewrites each regex's record (its timestamp is the refresh time); changed reports
// whether any regex's topics changed, refreshed whether a refresh was done.
func (g *group) cgResolveRegexes(members []*cgMember, canDescribe func(string) bool, resolve bool) (recs []kv, changed, refreshed bool) {
	cg := g.cg
	used := map[string]bool{}
	for _, m := range members {
		if m.regex != nil {
			used[*m.regex] = true
		}
	}
	for re := range cg.regexes {
		if !used[re] {
			recs = append(recs, kv{Key: cgRegexKey(g.id, re)})
			changed = true
		}
	}
	if !resolve || len(used) == 0 {
		return recs, changed, false
	}
	now := g.wall() // compared with, and written as, stored regex timestamps
	due := cg.regexStale
	for re := range used {
		if cg.regexes[re] == nil {
			due = true
		}
	}
	if last := cg.lastRegexRefresh(used); !last.IsZero() && now.Sub(last) > g.c.cfg.ConsumerRegexRefreshInterval {
		due = true
	}
	if !due {
		return recs, changed, false
	}
	all := g.c.topics()
	names := make([]string, 0, len(used))
	for re := range used {
		names = append(names, re)
	}
	sort.Strings(names)
	for _, re := range names {
		r := cg.regexes[re]
		var compiled *regexp.Regexp
		if r != nil && r.re != nil {
			compiled = r.re
		} else {
			var err error
			if compiled, err = compileTopicRegex(re); err != nil {
				compiled = nil // validated on entry; a stored one that no longer compiles matches nothing
			}
		}
		matched := []string{}
		if compiled != nil {
			for name := range all {
				if compiled.MatchString(name) && (canDescribe == nil || canDescribe(name)) {
					matched = append(matched, name)
				}
			}
		}
		sort.Strings(matched)
		if r == nil || !slices.Equal(r.topics, matched) {
			changed = true
		}
		v := &cgRegexValue{Topics: matched, Version: 0, Timestamp: now.UnixMilli()}
		recs = append(recs, kv{Key: cgRegexKey(g.id, re), Value: appendCGRegexValue(nil, v)})
	}
	return recs, changed, true
}

// cgApplyRegexRecords applies the regex records cgResolveRegexes returned.
func (g *group) cgApplyRegexRecords(recs []kv) {
	for _, r := range recs {
		k, err := parseCGKey(recConsumerGroupRegularExpression, r.Key)
		if err != nil || k.Type != recConsumerGroupRegularExpression {
			continue
		}
		if r.Value == nil {
			delete(g.cg.regexes, k.Sub)
			continue
		}
		v, err := parseCGRegexValue(r.Value)
		if err != nil {
			continue
		}
		cre, _ := compileTopicRegex(k.Sub)
		g.cg.regexes[k.Sub] = &cgRegex{re: cre, topics: v.Topics, version: v.Version, timestamp: v.Timestamp}
	}
}

// cgSubscribedTopics is the metadata of the existing topics members subscribe to by name or
// through a regex (the regexes as resolved in cg.regexes, or pending in recs).
func (g *group) cgSubscribedTopics(members []*cgMember) map[string]TopicMeta {
	all := g.c.topics()
	out := map[string]TopicMeta{}
	for _, m := range members {
		for _, t := range m.topics {
			if tm, ok := all[t]; ok {
				out[t] = tm
			}
		}
		if m.regex != nil {
			if r := g.cg.regexes[*m.regex]; r != nil {
				for _, t := range r.topics {
					if tm, ok := all[t]; ok {
						out[t] = tm
					}
				}
			}
		}
	}
	return out
}

// topicsHash hashes the subscribed topics' names, ids and partition counts (0 for none).
func topicsHash(topics map[string]TopicMeta) int64 {
	if len(topics) == 0 {
		return 0
	}
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	sort.Strings(names)
	h := fnv.New64a()
	for _, n := range names {
		tm := topics[n]
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(tm.ID[:])
		h.Write([]byte{byte(tm.Partitions >> 24), byte(tm.Partitions >> 16), byte(tm.Partitions >> 8), byte(tm.Partitions)})
	}
	v := int64(h.Sum64())
	if v == 0 {
		v = 1
	}
	return v
}

// cgComputeTarget runs the group's assignor (the one most members name, else the default) over
// members.
func (g *group) cgComputeTarget(members []*cgMember, topics map[string]TopicMeta) (map[string]partitions, *cgErr) {
	votes := map[string]int{}
	for _, m := range members {
		if m.serverAssignor != nil {
			votes[*m.serverAssignor]++
		}
	}
	var as assignor.Assignor
	if len(g.c.cfg.ConsumerAssignors) > 0 {
		as = g.c.cfg.ConsumerAssignors[0]
	}
	best := -1
	for _, a := range g.c.cfg.ConsumerAssignors { // ties: the configured order
		if n := votes[a.Name()]; n > 0 && n > best {
			as, best = a, n
		}
	}
	if as == nil {
		return nil, cgFail(kerr.UnknownServerError, "no server assignor configured")
	}
	byName := map[string][16]byte{}
	ts := make(map[assignor.TopicID]assignor.Topic, len(topics))
	for n, tm := range topics {
		byName[n] = tm.ID
		ts[tm.ID] = assignor.Topic{ID: tm.ID, Name: n, Partitions: tm.Partitions}
	}
	in := make([]assignor.Member, 0, len(members))
	for _, m := range members {
		am := assignor.Member{ID: m.id, InstanceID: m.instanceID, Current: map[assignor.TopicID][]int32{}}
		if m.rackID != nil {
			am.Rack = *m.rackID
		}
		seen := map[[16]byte]bool{}
		add := func(name string) {
			if id, ok := byName[name]; ok && !seen[id] {
				seen[id] = true
				am.Subscribed = append(am.Subscribed, id)
			}
		}
		for _, t := range m.topics {
			add(t)
		}
		if m.regex != nil {
			if r := g.cg.regexes[*m.regex]; r != nil {
				for _, t := range r.topics {
					add(t)
				}
			}
		}
		sort.Slice(am.Subscribed, func(i, j int) bool { return string(am.Subscribed[i][:]) < string(am.Subscribed[j][:]) })
		for t, ps := range g.cg.target[m.id] {
			if _, ok := ts[t]; ok {
				am.Current[t] = ps
			}
		}
		in = append(in, am)
	}
	out, err := as.Assign(in, ts)
	if err != nil {
		return nil, cgFail(kerr.UnknownServerError, "Failed to compute a new target assignment: %v", err)
	}
	res := make(map[string]partitions, len(members))
	for _, m := range members {
		p := partitions{}
		for t, ps := range out[m.id] {
			if tp, ok := ts[t]; ok && len(ps) > 0 {
				cl := make([]int32, 0, len(ps))
				for _, x := range ps {
					if x >= 0 && x < tp.Partitions {
						cl = append(cl, x)
					}
				}
				if len(cl) > 0 {
					p[t] = normalizePartitions(cl)
				}
			}
		}
		res[m.id] = p
	}
	return res, nil
}

// cgEnsureConsumer makes g a consumer group: an empty classic group (one that only stores
// offsets) becomes one when create is set; a group of another type is refused.
func (g *group) cgEnsureConsumer(create bool) *cgErr {
	switch {
	case g.typ == TypeConsumer:
		return nil
	case g.typ == TypeClassic && len(g.members) == 0 && len(g.pending) == 0:
		if !create {
			return cgFail(kerr.UnknownMemberID, "Consumer group %s not found.", g.id)
		}
		if g.protocolType != "" {
			// The classic group's metadata record goes (Kafka: the empty classic group is
			// replaced by a consumer group).
			if _, err := g.appendRecords([]kv{{Key: appendGroupKey(nil, g.id)}}); err != nil {
				return cgFail(appendError(err), "")
			}
		}
		g.typ, g.cg = TypeConsumer, newConsumerGroup()
		g.protocolType, g.protocol, g.leader, g.generation = "consumer", "", "", 0
		return nil
	case g.typ == TypeClassic:
		return cgFail(kerr.GroupIDNotFound, "Group %s is not a consumer group.", g.id)
	default:
		return cgFail(kerr.GroupIDNotFound, "Group %s is not a consumer group.", g.id)
	}
}

// cgSyncClassicView keeps the fields the shared code (offset expiry, deletion, OffsetDelete)
// reads in step with the consumer group: state Empty with no members, else Stable; the
// subscribed topic names.
func (g *group) cgSyncClassicView() {
	cg := g.cg
	want := Stable
	if len(cg.members) == 0 {
		want = Empty
	}
	if g.state != want {
		g.transition(want)
	}
	g.protocolType = "consumer"
	sub := map[string]bool{}
	for _, m := range cg.members {
		for _, t := range m.topics {
			sub[t] = true
		}
		if m.regex != nil {
			if r := cg.regexes[*m.regex]; r != nil {
				for _, t := range r.topics {
					sub[t] = true
				}
			}
		}
	}
	g.subscribed = sub
}

// ---- leaving and fencing ----

// cgLeave handles a heartbeat with epoch -1 (leave) or -2 (a static member leaves for now).
func (g *group) cgLeave(req *ConsumerHeartbeatRequest) ConsumerHeartbeatResult {
	res := ConsumerHeartbeatResult{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	if g.typ != TypeConsumer {
		res.Err, res.ErrMessage = kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a consumer group.", g.id)
		return res
	}
	cg := g.cg
	var m *cgMember
	if req.InstanceID == nil {
		if m = cg.members[req.MemberID]; m == nil {
			res.Err, res.ErrMessage = kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id)
			return res
		}
	} else {
		sid, ok := cg.static[*req.InstanceID]
		if !ok {
			res.Err, res.ErrMessage = kerr.UnknownMemberID, fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID)
			return res
		}
		if sid != req.MemberID {
			res.Err, res.ErrMessage = kerr.FencedInstanceID, fmt.Sprintf("Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, sid)
			return res
		}
		m = cg.members[sid]
		if req.MemberEpoch == staticLeaveEpoch {
			v := &cgCurrentValue{MemberEpoch: staticLeaveEpoch, PreviousMemberEpoch: m.prevEpoch, State: m.state, Assigned: m.assigned, PendingRevocation: partitions{}}
			mark, err := g.appendRecords([]kv{{Key: cgCurrentKey(g.id, m.id), Value: appendCGCurrentValue(nil, v)}})
			if err != nil {
				res.Err = appendError(err)
				return res
			}
			cg.updateCurrent(m, v)
			m.revokeDeadline = time.Time{}
			g.c.log.Info("static member temporarily left the consumer group", "group", g.id, "member", m.id, "instance", *req.InstanceID)
			res.durable = mark
			return res
		}
	}
	mark, err := g.cgFence(m, "the member left the group")
	if err != nil {
		res.Err = err
		return res
	}
	res.durable = mark
	return res
}

// cgFence removes m (it left, or its session or rebalance timeout expired): tombstones for its
// current assignment, target and metadata, and the group epoch bumped.
// When only members of the classic protocol remain, the group may become a classic group
// instead (cgFenceMembers).
func (g *group) cgFence(m *cgMember, why string) (durableMark, *kerr.Error) {
	return g.cgFenceMembers([]*cgMember{m}, why)
}

// cgFenceMembers is Kafka's consumerGroupFenceMembers: ms are removed, or, when the members
// left all use the classic protocol and the policy allows it, the group becomes a classic
// group of them (cgShouldDowngrade, cgToClassicGroup).
func (g *group) cgFenceMembers(ms []*cgMember, why string) (durableMark, *kerr.Error) {
	if g.cgShouldDowngrade(ms) {
		for _, m := range ms {
			g.c.log.Info("member removed from the consumer group", "group", g.id, "member", m.id, "reason", why)
		}
		return g.cgToClassicGroup(ms, true)
	}
	return g.cgRemoveMembers(ms, why)
}

// cgRemoveMembers removes ms: tombstones for their current assignments, targets and metadata,
// and the group epoch bumped once.
func (g *group) cgRemoveMembers(ms []*cgMember, why string) (durableMark, *kerr.Error) {
	cg := g.cg
	var recs []kv
	gone := map[string]bool{}
	for _, m := range ms {
		gone[m.id] = true
		recs = append(recs, kv{Key: cgCurrentKey(g.id, m.id)}, kv{Key: cgTargetMemberKey(g.id, m.id)}, kv{Key: cgMemberKey(g.id, m.id)})
	}
	members := make([]*cgMember, 0, len(cg.members))
	for _, mm := range g.cgMembersWith(nil, nil) {
		if !gone[mm.id] {
			members = append(members, mm)
		}
	}
	regexRecs, _, _ := g.cgResolveRegexes(members, nil, false)
	recs = append(recs, regexRecs...)
	epoch := cg.epoch + 1
	recs = append(recs, kv{Key: cgMetadataKey(g.id), Value: appendCGMetadataValue(nil, cgMetadataValue{Epoch: epoch, MetadataHash: cg.metaHash})})
	mark, err := g.appendRecords(recs)
	if err != nil {
		g.c.log.Warn("consumer group: writing a member's removal failed", "group", g.id, "err", err)
		return durableMark{}, appendError(err)
	}
	for _, m := range ms {
		cg.removeMember(m)
		g.c.log.Info("member removed from the consumer group", "group", g.id, "member", m.id, "reason", why)
	}
	g.cgApplyRegexRecords(regexRecs)
	cg.epoch = epoch
	cg.metaDirty = true // the subscribed topics may have shrunk
	g.cgSyncClassicView()
	return mark, nil
}

// cgNextDeadline is the earliest session or rebalance deadline of the members.
func (g *group) cgNextDeadline() time.Time {
	var next time.Time
	for _, m := range g.cg.members {
		next = earliest(next, m.sessionDeadline)
		next = earliest(next, m.revokeDeadline)
		next = earliest(next, m.joinDeadline)
		next = earliest(next, m.syncDeadline)
	}
	return next
}

// cgOnDeadlines fences members whose session or rebalance timeout passed.
func (g *group) cgOnDeadlines(now time.Time) {
	ids := make([]string, 0, len(g.cg.members))
	for id := range g.cg.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := g.cg.members[id]
		if m == nil {
			continue
		}
		why := ""
		switch {
		case !m.sessionDeadline.IsZero() && !m.sessionDeadline.After(now):
			why = "the member session expired"
		case !m.joinDeadline.IsZero() && !m.joinDeadline.After(now):
			why = "the classic member failed to join within the rebalance timeout"
		case !m.syncDeadline.IsZero() && !m.syncDeadline.After(now):
			why = "the member failed to sync within timeout"
		case !m.revokeDeadline.IsZero() && !m.revokeDeadline.After(now):
			if m.epoch != m.revokeEpoch || m.state != msUnrevoked {
				m.revokeDeadline = time.Time{}
				continue
			}
			why = fmt.Sprintf("the member failed to revoke partitions within %dms", m.rebalanceTimeoutMs)
		default:
			continue
		}
		if _, err := g.cgFence(m, why); err != nil {
			// Retry at the next deadline check rather than spin.
			m.sessionDeadline = now.Add(time.Second)
			m.revokeDeadline, m.joinDeadline, m.syncDeadline = time.Time{}, time.Time{}, time.Time{}
		}
		if g.typ != TypeConsumer {
			return // downgraded to a classic group
		}
	}
}

// cgTombstones are the records deleting the consumer group itself (its members are gone):
// target assignment metadata, the group epoch and its regexes.
func (g *group) cgTombstones() []kv {
	recs := []kv{{Key: cgTargetMetadataKey(g.id)}, {Key: cgMetadataKey(g.id)}}
	for re := range g.cg.regexes {
		recs = append(recs, kv{Key: cgRegexKey(g.id, re)})
	}
	return recs
}

// cgToClassic turns an empty consumer group into a classic group (a JoinGroup arrived):
// its records are deleted. Offsets stay.
func (g *group) cgToClassic() *kerr.Error {
	if _, err := g.appendRecords(g.cgTombstones()); err != nil {
		return appendError(err)
	}
	g.typ, g.cg = TypeClassic, nil
	g.protocolType, g.subscribed = "", nil
	return nil
}

// ---- offsets ----

// cgValidateCommit is Kafka's ConsumerGroup.validateOffsetCommit: epoch -1 commits only to an
// empty group; a member's epoch must be its current one (STALE_MEMBER_EPOCH); members of the
// consumer protocol must use OffsetCommit v9+.
func (g *group) cgValidateCommit(epoch int32, memberID string, transactional bool, version int16) *kerr.Error {
	cg := g.cg
	if epoch < 0 && len(cg.members) == 0 {
		return nil
	}
	m := cg.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID
	}
	if !transactional && m.classic == nil && version > 0 && version < 9 {
		return kerr.UnsupportedVersion
	}
	return m.validateEpoch(epoch)
}

// cgValidateFetch is Kafka's ConsumerGroup.validateOffsetFetch.
func (g *group) cgValidateFetch(memberID *string, epoch int32) *kerr.Error {
	if memberID == nil && epoch < 0 {
		return nil
	}
	id := ""
	if memberID != nil {
		id = *memberID
	}
	m := g.cg.members[id]
	if m == nil {
		return kerr.UnknownMemberID
	}
	return m.validateEpoch(epoch)
}

// ---- describe ----

// ConsumerMemberDescription is one member in ConsumerGroupDescribe.
type ConsumerMemberDescription struct {
	MemberID             string
	InstanceID           *string
	RackID               *string
	MemberEpoch          int32
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	Assignment           []ConsumerTopicPartitions
	TargetAssignment     []ConsumerTopicPartitions
	// MemberType is 1 for a member of the consumer protocol, 0 for one of the classic protocol
	// (ConsumerGroupDescribe v1).
	MemberType int8
}

// ConsumerGroupDescription is one group in ConsumerGroupDescribe.
type ConsumerGroupDescription struct {
	Err             *kerr.Error
	ErrMessage      string
	Group           string
	State           string
	Epoch           int32
	AssignmentEpoch int32
	AssignorName    string
	Members         []ConsumerMemberDescription
}

func toTopicPartitions(p partitions) []ConsumerTopicPartitions {
	out := []ConsumerTopicPartitions{}
	for _, t := range p.sortedTopics() {
		out = append(out, ConsumerTopicPartitions{TopicID: t, Partitions: p[t]})
	}
	return out
}

func (g *group) cgDescribe() ConsumerGroupDescription {
	cg := g.cg
	d := ConsumerGroupDescription{Group: g.id, State: cg.stateName(), Epoch: cg.epoch, AssignmentEpoch: cg.assignmentEpoch}
	members := g.cgMembersWith(nil, nil)
	votes := map[string]int{}
	for _, m := range members {
		if m.serverAssignor != nil {
			votes[*m.serverAssignor]++
		}
	}
	if len(g.c.cfg.ConsumerAssignors) > 0 {
		d.AssignorName = g.c.cfg.ConsumerAssignors[0].Name()
	}
	best := 0
	for _, a := range g.c.cfg.ConsumerAssignors {
		if n := votes[a.Name()]; n > best {
			d.AssignorName, best = a.Name(), n
		}
	}
	for _, m := range members {
		md := ConsumerMemberDescription{
			MemberID: m.id, InstanceID: m.instanceID, RackID: m.rackID, MemberEpoch: m.epoch,
			ClientID: m.clientID, ClientHost: m.clientHost, SubscribedTopicNames: m.topics, SubscribedTopicRegex: m.regex,
			Assignment: toTopicPartitions(m.assigned), TargetAssignment: toTopicPartitions(cg.target[m.id]), MemberType: 1,
		}
		if m.classic != nil {
			md.MemberType = 0
		}
		d.Members = append(d.Members, md)
	}
	return d
}

// cgCommitMember is the common part of a member's heartbeat (ConsumerGroupHeartbeat, or a
// JoinGroup of a classic member): given the member updated from the request (m), its previous
// self (old) or the static member it replaces (replaced), the partitions it reports owning
// (nil: not reported) and the records gathered so far, it bumps the group epoch when the
// subscriptions or their topics changed, computes a new target assignment when the group epoch
// moved past it, reconciles m towards its target, writes the records and applies them. It
// returns the durability mark and the member's assignment before the change. canDescribe and
// resolveRegexes are cgResolveRegexes' (a classic member's JoinGroup resolves no regex: it
// subscribes by name, and a refresh it would trigger waits for the next heartbeat of a member
// whose principal's ACLs it can apply).
func (g *group) cgCommitMember(m, old, replaced *cgMember, owned []ConsumerTopicPartitions, recs []kv, canDescribe func(string) bool, resolveRegexes bool) (durableMark, partitions, *cgErr) {
	cg := g.cg
	prev := old
	if replaced != nil {
		prev = replaced
	}
	bump := false
	if prev == nil || !sameMetadata(prev, m) || replaced != nil {
		recs = append(recs, kv{Key: cgMemberKey(g.id, m.id), Value: appendCGMemberValue(nil, m.value())})
		if prev == nil || !sameSubscription(prev, m) {
			bump = true
		}
	}
	if old == nil && replaced == nil {
		bump = true // a new member
	}
	if replaced != nil {
		// Kafka's replaceMember: the old member's records go, the new one takes its target.
		recs = append(recs,
			kv{Key: cgCurrentKey(g.id, replaced.id)},
			kv{Key: cgTargetMemberKey(g.id, replaced.id)},
			kv{Key: cgMemberKey(g.id, replaced.id)})
		if t, ok := cg.target[replaced.id]; ok {
			recs = append(recs, kv{Key: cgTargetMemberKey(g.id, m.id), Value: appendCGTargetMemberValue(nil, t)})
		}
	}
	// The regexes and the subscribed topics' metadata; the group epoch. The regexes' new
	// resolutions apply at once (they are derived from the topics) and are put back if the
	// records cannot be written.
	members := g.cgMembersWith(m, replaced)
	regexRecs, regexChanged, regexRefreshed := g.cgResolveRegexes(members, canDescribe, resolveRegexes)
	recs = append(recs, regexRecs...)
	savedRegexes, savedStale := maps.Clone(cg.regexes), cg.regexStale
	g.cgApplyRegexRecords(regexRecs)
	if regexRefreshed {
		cg.regexStale = false
	}
	epoch, hash := cg.epoch, cg.metaHash
	if bump || cg.metaDirty || regexChanged {
		if h := topicsHash(g.cgSubscribedTopics(members)); h != hash {
			bump, hash = true, h
		}
		if bump || regexChanged {
			epoch++
			recs = append(recs, kv{Key: cgMetadataKey(g.id), Value: appendCGMetadataValue(nil, cgMetadataValue{Epoch: epoch, MetadataHash: hash})})
		}
	}

	// 2. The target assignment, when the group epoch moved past it.
	targetEpoch := cg.assignmentEpoch
	var newTargets map[string]partitions
	if epoch > cg.assignmentEpoch {
		var e *cgErr
		newTargets, e = g.cgComputeTarget(members, g.cgSubscribedTopics(members))
		if e != nil {
			cg.regexes, cg.regexStale = savedRegexes, savedStale
			return durableMark{}, nil, e
		}
		for _, mm := range members {
			t := newTargets[mm.id]
			if cur, ok := cg.target[mm.id]; !ok || !cur.equal(t) || (replaced != nil && mm.id == m.id) {
				recs = append(recs, kv{Key: cgTargetMemberKey(g.id, mm.id), Value: appendCGTargetMemberValue(nil, t)})
			}
		}
		recs = append(recs, kv{Key: cgTargetMetadataKey(g.id), Value: appendCGEpochValue(nil, epoch)})
		targetEpoch = epoch
	}
	target := cg.target[m.id]
	if newTargets != nil {
		target = newTargets[m.id]
	} else if replaced != nil {
		target = cg.target[replaced.id]
	}

	// 3. Reconcile the member towards its target.
	ownerEpoch := func(t [16]byte, p int32) int32 {
		k := tpKey{t, p}
		if e, ok := cg.ownerEpoch[k]; ok {
			// The member's own partitions (its previous current assignment) are not taken.
			if prev != nil && (prev.assigned.has(t, p) || prev.pending.has(t, p)) {
				return -1
			}
			return e
		}
		return -1
	}
	if !m.reconciledTo(targetEpoch) {
		next := reconcile(m, targetEpoch, target, ownerEpoch, owned)
		m.epoch, m.prevEpoch, m.state, m.assigned, m.pending = next.MemberEpoch, next.PreviousMemberEpoch, next.State, next.Assigned, next.PendingRevocation
	}
	after := m.currentValue()
	currentChanged := old == nil || !sameCurrent(old.currentValue(), after)
	if currentChanged {
		recs = append(recs, kv{Key: cgCurrentKey(g.id, m.id), Value: appendCGCurrentValue(nil, after)})
	}
	startAssigned := partitions{}
	switch {
	case old != nil:
		startAssigned = old.assigned
	case replaced != nil:
		startAssigned = replaced.assigned
	}

	// Write, then apply.
	var mark durableMark
	if len(recs) > 0 {
		var err error
		mark, err = g.appendRecords(recs)
		if err != nil {
			g.c.log.Warn("consumer group heartbeat: writing records failed", "group", g.id, "err", err)
			cg.regexes, cg.regexStale = savedRegexes, savedStale
			return durableMark{}, nil, cgFail(appendError(err), "")
		}
	} else {
		mark = g.lastMark()
	}
	if replaced != nil {
		cg.removeMember(replaced)
		g.c.log.Info("static member replaced", "group", g.id, "instance", *m.instanceID, "old", replaced.id, "member", m.id)
	}
	if old != nil {
		cg.setOwned(old, true)
	} else {
		g.c.log.Info("member joins the consumer group", "group", g.id, "member", m.id)
	}
	cg.members[m.id] = m
	if m.instanceID != nil {
		cg.static[*m.instanceID] = m.id
	}
	cg.setOwned(m, false)
	cg.epoch, cg.metaHash, cg.metaDirty = epoch, hash, false
	if newTargets != nil {
		for id, t := range newTargets {
			cg.target[id] = t
		}
		cg.assignmentEpoch = targetEpoch
	} else if replaced != nil {
		cg.target[m.id] = target
	}
	if m.state == msUnrevoked {
		if m.revokeDeadline.IsZero() || m.revokeEpoch != m.epoch {
			m.revokeEpoch = m.epoch
			m.revokeDeadline = g.now().Add(time.Duration(max(m.rebalanceTimeoutMs, 0)) * time.Millisecond)
		}
	} else {
		m.revokeDeadline = time.Time{}
	}
	m.sessionDeadline = g.now().Add(g.c.memberSessionTimeout(m))
	g.cgSyncClassicView()
	return mark, startAssigned, nil
}

// newCGMemberFrom is the member a request updates: a copy of old, or a new member taking the
// place of the static member it replaces (its subscription and assignment), or a new member.
func newCGMemberFrom(memberID string, old, replaced *cgMember) *cgMember {
	switch {
	case replaced != nil:
		return &cgMember{id: memberID, instanceID: replaced.instanceID, rackID: replaced.rackID, topics: replaced.topics,
			regex: replaced.regex, rebalanceTimeoutMs: replaced.rebalanceTimeoutMs, serverAssignor: replaced.serverAssignor,
			assigned: replaced.assigned, pending: partitions{}}
	case old != nil:
		cp := *old
		return &cp
	}
	return &cgMember{id: memberID, rebalanceTimeoutMs: -1, assigned: partitions{}, pending: partitions{}}
}
