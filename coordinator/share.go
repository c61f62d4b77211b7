package coordinator

// KIP-932 share groups: membership and assignment (Kafka's GroupMetadataManager share group
// paths and ShareGroup). Every group function here runs on the group's goroutine.
//
// A share group has a group epoch, bumped when a member joins, leaves or changes its
// subscription, or when the subscribed topics' metadata (ids, partition counts) changes; a
// target assignment computed by the share assignor (assignor.Simple) at the group epoch; and
// members, each with a member epoch and its current assignment. There is no revocation phase:
// a member heartbeating behind the target assignment epoch gets its target at once (Kafka's
// ShareGroupAssignmentBuilder), since several members may share a partition. States: Empty (no
// members), Stable, Dead (deleted).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/coordinator/assignor"
	"github.com/weir-mq/weir/sharestate"
)

// ShareProtocolType is the protocol type ListGroups reports for a share group (Kafka's
// ShareGroup.PROTOCOL_TYPE).
const ShareProtocolType = "share"

// shareMemberStable is MemberState.STABLE, the only state a share member takes.
const shareMemberStable int8 = 1

// Bounds of a ShareGroupHeartbeat: subscribed topic names per member.
const maxShareSubscribedTopics = 10000

// ShareTopic is one topic as share groups see it.
type ShareTopic struct {
	ID         [16]byte
	Name       string
	Partitions int32
}

// ShareTopics resolves topics for share groups (the broker's topic table).
type ShareTopics interface {
	TopicByName(name string) (ShareTopic, bool)
	TopicByID(id [16]byte) (ShareTopic, bool)
}

// ShareConfig configures share groups (group.share.* broker keys).
type ShareConfig struct {
	// SessionTimeout and HeartbeatInterval are group.share.session.timeout.ms and
	// group.share.heartbeat.interval.ms (0: 45 s and 5 s).
	SessionTimeout, HeartbeatInterval time.Duration
	// MaxSize is group.share.max.size (0: 200).
	MaxSize int
	// Topics resolves subscribed topic names (nil: no topic exists).
	Topics ShareTopics
	// Persister initializes and deletes share-partition state (nil: none is kept).
	Persister sharestate.Persister
	// GroupConfig returns a group's dynamic config (share.session.timeout.ms,
	// share.heartbeat.interval.ms), ok false when unset (nil: never set).
	GroupConfig func(group, key string) (string, bool)
}

// shareMember is one member of a share group.
type shareMember struct {
	id                   string
	rack                 *string
	clientID, clientHost string
	subscribed           []string // sorted, unique
	epoch, prevEpoch     int32
	assigned             topicParts
	deadline             time.Time // session expiry
}

// shareGroup is a KIP-932 share group's state (group.sg), owned by the group's goroutine.
type shareGroup struct {
	epoch           int32
	metadataHash    int64
	assignmentEpoch int32
	target          map[string]topicParts
	members         map[string]*shareMember
	// parts is the share-partition state bookkeeping (ShareGroupStatePartitionMetadata):
	// partitions being initialized, initialized, and topics whose state is being deleted.
	parts shareStateValue
	// initRunning / deleteRunning are set while a persister call runs for the group.
	initRunning, deleteRunning bool
}

func newShareGroup() *shareGroup {
	return &shareGroup{
		target:  map[string]topicParts{},
		members: map[string]*shareMember{},
		parts: shareStateValue{
			Initializing: map[[16]byte]shareTopicInfo{},
			Initialized:  map[[16]byte]shareTopicInfo{},
			Deleting:     map[[16]byte]string{},
		},
	}
}

// ShareHeartbeatRequest is a ShareGroupHeartbeat.
type ShareHeartbeatRequest struct {
	Group       string
	MemberID    string
	MemberEpoch int32 // 0 joins, -1 leaves
	RackID      *string
	// Subscribed is nil when unchanged since the last heartbeat.
	Subscribed []string
	ClientID   string
	ClientHost string
}

// ShareHeartbeatResult is a ShareGroupHeartbeat response. Assignment is set only when the
// member (re)joined or its assignment changed.
type ShareHeartbeatResult struct {
	Err                 *kerr.Error
	ErrMessage          string
	MemberID            string
	MemberEpoch         int32
	HeartbeatIntervalMs int32
	Assignment          map[[16]byte][]int32
	HasAssignment       bool

	durable durableMark
}

// ShareMemberDescription is one member in ShareGroupDescribe.
type ShareMemberDescription struct {
	MemberID             string
	RackID               *string
	MemberEpoch          int32
	ClientID, ClientHost string
	Subscribed           []string
	Assignment           map[[16]byte][]int32
}

// ShareGroupDescription is one group in ShareGroupDescribe.
type ShareGroupDescription struct {
	Err             *kerr.Error
	ErrMessage      string
	Group           string
	State           string
	GroupEpoch      int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ShareMemberDescription
}

func (c *Coordinator) shareSessionTimeout(group string) time.Duration {
	return c.shareGroupDuration(group, "share.session.timeout.ms", c.cfg.Share.SessionTimeout, 45*time.Second)
}

func (c *Coordinator) shareHeartbeatInterval(group string) time.Duration {
	return c.shareGroupDuration(group, "share.heartbeat.interval.ms", c.cfg.Share.HeartbeatInterval, 5*time.Second)
}

func (c *Coordinator) shareGroupDuration(group, key string, broker, def time.Duration) time.Duration {
	if f := c.cfg.Share.GroupConfig; f != nil {
		if v, ok := f(group, key); ok {
			var ms int64
			if _, err := fmt.Sscan(v, &ms); err == nil && ms > 0 {
				return time.Duration(ms) * time.Millisecond
			}
		}
	}
	if broker > 0 {
		return broker
	}
	return def
}

func (c *Coordinator) shareMaxSize() int {
	if c.cfg.Share.MaxSize > 0 {
		return c.cfg.Share.MaxSize
	}
	return 200
}

// validateShareHeartbeat is Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (v1: the client
// generates the member id).
func validateShareHeartbeat(req *ShareHeartbeatRequest) (*kerr.Error, string) {
	if req.Group == "" {
		return kerr.InvalidRequest, "GroupId can't be empty."
	}
	if len(req.Group) > maxStringLen {
		return kerr.InvalidGroupID, "GroupId is too long."
	}
	if req.RackID != nil && *req.RackID == "" {
		return kerr.InvalidRequest, "RackId can't be empty."
	}
	if req.MemberID == "" {
		return kerr.InvalidRequest, "MemberId can't be empty."
	}
	if len(req.MemberID) > maxStringLen || (req.RackID != nil && len(*req.RackID) > maxStringLen) {
		return kerr.InvalidRequest, "MemberId or RackId is too long."
	}
	if len(req.Subscribed) > maxShareSubscribedTopics {
		return kerr.InvalidRequest, "Too many SubscribedTopicNames."
	}
	for _, t := range req.Subscribed {
		if len(t) > maxStringLen {
			return kerr.InvalidRequest, "A subscribed topic name is too long."
		}
	}
	switch {
	case req.MemberEpoch > 0 || req.MemberEpoch == -1:
	case req.MemberEpoch == 0:
		if len(req.Subscribed) == 0 {
			return kerr.InvalidRequest, "SubscribedTopicNames must be set in first request."
		}
	default:
		return kerr.InvalidRequest, "MemberEpoch is invalid."
	}
	return nil, ""
}

// ShareHeartbeat handles a ShareGroupHeartbeat; it returns once the records it wrote are
// durable.
func (c *Coordinator) ShareHeartbeat(req ShareHeartbeatRequest) ShareHeartbeatResult {
	res := ShareHeartbeatResult{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	if err, msg := validateShareHeartbeat(&req); err != nil {
		res.Err, res.ErrMessage = err, msg
		return res
	}
	if req.Subscribed != nil {
		subs := append([]string{}, req.Subscribed...)
		sort.Strings(subs)
		req.Subscribed = slices.Compact(subs)
	}
	if len(req.ClientID) > maxStringLen {
		req.ClientID = req.ClientID[:maxStringLen]
	}
	create := req.MemberEpoch == 0
	err := c.withGroup(req.Group, create, func(g *group) {
		fresh := false
		if g == nil {
			res.Err, res.ErrMessage = kerr.GroupIDNotFound, fmt.Sprintf("Group %s not found.", req.Group)
			return
		}
		if g.typ != TypeShare {
			if !create || !g.freshShell() {
				res.Err, res.ErrMessage = kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a share group.", req.Group)
				return
			}
			g.makeShare()
			fresh = true
		}
		if req.MemberEpoch == -1 {
			res = g.shareLeave(&req)
		} else {
			res = g.shareHeartbeat(&req)
		}
		if fresh && len(g.sg.members) == 0 {
			g.transition(Dead) // a join that wrote nothing leaves no group behind
		}
	})
	if err != nil {
		return ShareHeartbeatResult{Err: err, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	}
	if res.Err == nil {
		if e := c.awaitDurable(res.durable); e != nil {
			return ShareHeartbeatResult{Err: e, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
		}
	}
	return res
}

// freshShell reports whether g was just created by lookup and holds nothing yet.
func (g *group) freshShell() bool {
	return g.typ == TypeClassic && g.state == Empty && len(g.members) == 0 && len(g.pending) == 0 &&
		len(g.offsets) == 0 && len(g.txn) == 0 && g.protocolType == "" && g.generation == 0
}

// makeShare turns a fresh group into an empty share group.
func (g *group) makeShare() {
	g.typ = TypeShare
	g.sg = newShareGroup()
	g.protocolType = ShareProtocolType
}

// shareSubscribedTopics returns the existing topics members subscribe to and a hash of their
// metadata (ids, names and partition counts, in name order; 0 when there are none).
func (g *group) shareSubscribedTopics(members map[string]*shareMember) (map[[16]byte]ShareTopic, int64) {
	names := map[string]bool{}
	for _, m := range members {
		for _, t := range m.subscribed {
			names[t] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	topics := map[[16]byte]ShareTopic{}
	h := fnv.New64a()
	var buf [4]byte
	lookup := g.c.cfg.Share.Topics
	for _, n := range sorted {
		if lookup == nil {
			break
		}
		t, ok := lookup.TopicByName(n)
		if !ok {
			continue
		}
		topics[t.ID] = t
		h.Write(t.ID[:])
		h.Write([]byte(t.Name))
		binary.BigEndian.PutUint32(buf[:], uint32(t.Partitions))
		h.Write(buf[:])
	}
	if len(topics) == 0 {
		return topics, 0
	}
	return topics, int64(h.Sum64())
}

// computeShareTarget runs the share assignor over members.
func (g *group) computeShareTarget(members map[string]*shareMember, topics map[[16]byte]ShareTopic) map[string]topicParts {
	byName := map[string][16]byte{}
	at := make(map[assignor.TopicID]assignor.Topic, len(topics))
	for id, t := range topics {
		byName[t.Name] = id
		at[id] = assignor.Topic{ID: id, Name: t.Name, Partitions: t.Partitions}
	}
	ms := make([]assignor.Member, 0, len(members))
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := members[id]
		am := assignor.Member{ID: id, Current: g.sg.target[id]}
		if m.rack != nil {
			am.Rack = *m.rack
		}
		for _, n := range m.subscribed {
			if tid, ok := byName[n]; ok {
				am.Subscribed = append(am.Subscribed, tid)
			}
		}
		sort.Slice(am.Subscribed, func(i, j int) bool { return string(am.Subscribed[i][:]) < string(am.Subscribed[j][:]) })
		ms = append(ms, am)
	}
	out := make(map[string]topicParts, len(members))
	a, err := assignor.Simple().Assign(ms, at)
	if err != nil {
		g.c.log.Warn("share group assignment failed; members keep their assignment", "group", g.id, "err", err)
		for id := range members {
			out[id] = g.sg.target[id].clone()
		}
		return out
	}
	for id := range members {
		tp := topicParts{}
		for tid, ps := range a[id] {
			if len(ps) > 0 {
				cp := append([]int32(nil), ps...)
				slices.Sort(cp)
				tp[tid] = cp
			}
		}
		out[id] = tp
	}
	return out
}

// shareHeartbeat is a join (epoch 0) or a heartbeat of a member.
func (g *group) shareHeartbeat(req *ShareHeartbeatRequest) ShareHeartbeatResult {
	sg := g.sg
	res := ShareHeartbeatResult{MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
	fail := func(err *kerr.Error, msg string) ShareHeartbeatResult {
		res.Err, res.ErrMessage = err, msg
		return res
	}
	if g.state == Dead {
		return fail(kerr.CoordinatorNotAvailable, "")
	}
	defer g.rearm()
	old := sg.members[req.MemberID]
	if old == nil && len(sg.members) >= g.c.shareMaxSize() {
		return fail(kerr.GroupMaxSizeReached, fmt.Sprintf("The share group has reached its maximum capacity of %d members.", g.c.shareMaxSize()))
	}
	if old == nil && req.MemberEpoch != 0 {
		return fail(kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id))
	}
	if old != nil && req.MemberEpoch != 0 {
		if req.MemberEpoch > old.epoch || (req.MemberEpoch < old.epoch && req.MemberEpoch != old.prevEpoch) {
			return fail(kerr.FencedMemberEpoch, fmt.Sprintf("The share group member has epoch %d, the coordinator knows %d. The member must rejoin.", req.MemberEpoch, old.epoch))
		}
	}
	// 1. The member's metadata and subscription.
	upd := &shareMember{id: req.MemberID}
	if old != nil {
		cp := *old
		upd = &cp
		if req.MemberEpoch == 0 {
			// A known member rejoining (after FENCED_MEMBER_EPOCH or a lost response): it
			// starts over and gets its full assignment.
			upd.epoch, upd.prevEpoch, upd.assigned = 0, 0, nil
		}
	}
	if req.RackID != nil {
		upd.rack = req.RackID
	}
	if req.Subscribed != nil {
		upd.subscribed = req.Subscribed
	}
	upd.clientID, upd.clientHost = req.ClientID, req.ClientHost
	var recs []kv
	subsChanged := old == nil || !slices.Equal(old.subscribed, upd.subscribed)
	if old == nil || subsChanged || old.clientID != upd.clientID || old.clientHost != upd.clientHost || !strPtrEq(old.rack, upd.rack) {
		recs = append(recs, kv{Key: appendShareMemberKey(nil, recShareGroupMemberMetadata, g.id, upd.id),
			Value: appendShareMemberValue(nil, shareMemberValue{RackID: upd.rack, ClientID: upd.clientID, ClientHost: upd.clientHost, Subscribed: upd.subscribed})})
	}
	members := make(map[string]*shareMember, len(sg.members)+1)
	for id, m := range sg.members {
		members[id] = m
	}
	members[upd.id] = upd
	// 2. The group epoch: bumped by a subscription change or a change of the subscribed topics'
	// metadata.
	topics, hash := g.shareSubscribedTopics(members)
	epoch := sg.epoch
	if subsChanged || hash != sg.metadataHash {
		epoch++
		recs = append(recs, kv{Key: appendShareKey(nil, recShareGroupMetadata, g.id), Value: appendShareGroupValue(nil, epoch, hash)})
	}
	// 3. The target assignment at the group epoch.
	target := sg.target
	assignEpoch := sg.assignmentEpoch
	if epoch > sg.assignmentEpoch {
		target = g.computeShareTarget(members, topics)
		for _, id := range sortedKeys(target) {
			if prev, ok := sg.target[id]; !ok || !prev.equal(target[id]) {
				recs = append(recs, kv{Key: appendShareMemberKey(nil, recShareGroupTargetAssignmentMember, g.id, id),
					Value: appendShareTargetMemberValue(nil, target[id])})
			}
		}
		assignEpoch = epoch
		recs = append(recs, kv{Key: appendShareKey(nil, recShareGroupTargetAssignmentMetadata, g.id), Value: appendShareTargetMetaValue(nil, assignEpoch)})
	}
	// 4. Reconcile the member at once (no revocation in a share group).
	if upd.epoch != assignEpoch || upd.assigned == nil {
		want := target[upd.id]
		if want == nil {
			want = topicParts{}
		}
		upd.prevEpoch, upd.epoch, upd.assigned = upd.epoch, assignEpoch, want.clone()
		recs = append(recs, kv{Key: appendShareMemberKey(nil, recShareGroupCurrentMemberAssignment, g.id, upd.id),
			Value: appendShareAssignmentValue(nil, shareAssignmentValue{MemberEpoch: upd.epoch, PreviousMemberEpoch: upd.prevEpoch, State: shareMemberStable, Assigned: upd.assigned})})
	}
	// 5. Share-partition state bookkeeping: partitions to initialize, deleted topics.
	parts, toInit, toDelete := g.sharePartsPlan(topics)
	if parts != nil {
		recs = append(recs, kv{Key: appendShareKey(nil, recShareGroupStatePartitionMetadata, g.id), Value: appendShareStateValue(nil, *parts)})
	}
	var mark durableMark
	if len(recs) > 0 {
		m, err := g.appendRecords(recs)
		if err != nil {
			g.c.log.Warn("share group heartbeat: storing records failed", "group", g.id, "member", upd.id, "err", err)
			return fail(appendError(err), "")
		}
		mark = m
	} else {
		mark = g.lastMark()
	}
	// Committed: apply.
	if old == nil {
		g.c.log.Info("member joined the share group", "group", g.id, "member", upd.id)
	}
	sg.members[upd.id] = upd
	sg.epoch, sg.metadataHash = epoch, hash
	sg.target, sg.assignmentEpoch = target, assignEpoch
	if parts != nil {
		sg.parts = *parts
	}
	upd.deadline = g.now().Add(g.c.shareSessionTimeout(g.id))
	if g.state != Stable {
		g.transition(Stable)
	}
	g.startSharePersisterCalls(toInit, toDelete)
	res.MemberEpoch = upd.epoch
	res.HeartbeatIntervalMs = int32(min(g.c.shareHeartbeatInterval(g.id).Milliseconds(), 1<<31-1))
	if req.MemberEpoch == 0 || old == nil || !old.assigned.equal(upd.assigned) {
		res.HasAssignment = true
		res.Assignment = upd.assigned.clone()
	}
	res.durable = mark
	return res
}

func strPtrEq(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// shareLeave is a heartbeat with epoch -1.
func (g *group) shareLeave(req *ShareHeartbeatRequest) ShareHeartbeatResult {
	res := ShareHeartbeatResult{MemberID: req.MemberID, MemberEpoch: -1}
	if g.state == Dead {
		res.Err = kerr.CoordinatorNotAvailable
		return res
	}
	defer g.rearm()
	m := g.sg.members[req.MemberID]
	if m == nil {
		res.Err, res.ErrMessage = kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id)
		return res
	}
	mark, err := g.shareRemoveMember(m, "left")
	if err != nil {
		res.Err = err
		return res
	}
	res.durable = mark
	return res
}

// shareRemoveMember fences m (leave or session expiry): tombstones for its records and a group
// epoch bump (Kafka's shareGroupFenceMember). The target assignment is recomputed at the next
// heartbeat.
func (g *group) shareRemoveMember(m *shareMember, why string) (durableMark, *kerr.Error) {
	sg := g.sg
	members := make(map[string]*shareMember, len(sg.members))
	for id, x := range sg.members {
		if id != m.id {
			members[id] = x
		}
	}
	_, hash := g.shareSubscribedTopics(members)
	epoch := sg.epoch + 1
	recs := []kv{
		{Key: appendShareMemberKey(nil, recShareGroupCurrentMemberAssignment, g.id, m.id)},
		{Key: appendShareMemberKey(nil, recShareGroupTargetAssignmentMember, g.id, m.id)},
		{Key: appendShareMemberKey(nil, recShareGroupMemberMetadata, g.id, m.id)},
		{Key: appendShareKey(nil, recShareGroupMetadata, g.id), Value: appendShareGroupValue(nil, epoch, hash)},
	}
	mark, err := g.appendRecords(recs)
	if err != nil {
		g.c.log.Warn("share group: storing a member's removal failed", "group", g.id, "member", m.id, "err", err)
		return durableMark{}, appendError(err)
	}
	g.c.log.Info("member removed from the share group", "group", g.id, "member", m.id, "reason", why)
	delete(sg.members, m.id)
	delete(sg.target, m.id)
	sg.epoch, sg.metadataHash = epoch, hash
	if len(sg.members) == 0 && g.state != Empty {
		g.transition(Empty)
	}
	return mark, nil
}

// shareNextDeadline is the earliest member session expiry.
func (g *group) shareNextDeadline() time.Time {
	var next time.Time
	for _, m := range g.sg.members {
		next = earliest(next, m.deadline)
	}
	return next
}

// shareOnDeadlines removes members whose session expired.
func (g *group) shareOnDeadlines(now time.Time) {
	ids := sortedKeys(g.sg.members)
	for _, id := range ids {
		m := g.sg.members[id]
		if m == nil || m.deadline.IsZero() || m.deadline.After(now) {
			continue
		}
		if _, err := g.shareRemoveMember(m, "session timeout"); err != nil {
			m.deadline = now.Add(time.Second) // retry the removal shortly
		}
	}
}

// describeShare is ShareGroupDescribe for this group.
func (g *group) describeShare() ShareGroupDescription {
	sg := g.sg
	d := ShareGroupDescription{Group: g.id, State: g.state.String(), GroupEpoch: sg.epoch,
		AssignmentEpoch: sg.assignmentEpoch, Assignor: assignor.Simple().Name()}
	for _, id := range sortedKeys(sg.members) {
		m := sg.members[id]
		d.Members = append(d.Members, ShareMemberDescription{MemberID: m.id, RackID: m.rack, MemberEpoch: m.epoch,
			ClientID: m.clientID, ClientHost: m.clientHost, Subscribed: append([]string(nil), m.subscribed...),
			Assignment: m.assigned.clone()})
	}
	return d
}

// ShareDescribe handles one group of a ShareGroupDescribe.
func (c *Coordinator) ShareDescribe(groupID string) ShareGroupDescription {
	d := ShareGroupDescription{Group: groupID, State: Dead.String()}
	if groupID == "" || len(groupID) > maxStringLen {
		d.Err = kerr.InvalidGroupID
		return d
	}
	var mark durableMark
	if err := c.withGroup(groupID, false, func(g *group) {
		switch {
		case g == nil || g.state == Dead:
			d.Err, d.ErrMessage = kerr.GroupIDNotFound, fmt.Sprintf("Group %s not found.", groupID)
		case g.typ != TypeShare:
			d.Err, d.ErrMessage = kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a share group.", groupID)
		default:
			d = g.describeShare()
			mark = g.lastMark()
		}
	}); err != nil {
		d.Err = err
		return d
	}
	if e := c.awaitDurable(mark); e != nil {
		return ShareGroupDescription{Group: groupID, State: Dead.String(), Err: e}
	}
	return d
}

// ---- share-partition state (the persister) ----

// sharePartsPlan compares the subscribed topics with the share-partition bookkeeping: every
// partition of a subscribed topic not initialized (nor being initialized by a running call) is
// to be initialized; a topic that no longer exists (or was re-created with another id) has its
// state deleted. It returns the new bookkeeping (nil when unchanged) and the work to start.
func (g *group) sharePartsPlan(topics map[[16]byte]ShareTopic) (*shareStateValue, []sharestate.Key, map[[16]byte]shareTopicInfo) {
	sg := g.sg
	if g.c.cfg.Share.Persister == nil {
		return nil, nil, nil
	}
	next := shareStateValue{
		Initializing: cloneInfos(sg.parts.Initializing),
		Initialized:  cloneInfos(sg.parts.Initialized),
		Deleting:     map[[16]byte]string{},
	}
	for id, n := range sg.parts.Deleting {
		next.Deleting[id] = n
	}
	changed := false
	var toInit []sharestate.Key
	if !sg.initRunning {
		for _, id := range sortedTopicIDs(topics) {
			t := topics[id]
			done := map[int32]bool{}
			for _, p := range next.Initialized[id].Partitions {
				done[p] = true
			}
			var want []int32
			for p := int32(0); p < t.Partitions; p++ {
				if !done[p] {
					want = append(want, p)
					toInit = append(toInit, sharestate.Key{Group: g.id, TopicID: id, Partition: p})
				}
			}
			if len(want) > 0 {
				cur := next.Initializing[id]
				if !slices.Equal(cur.Partitions, want) || cur.Name != t.Name {
					next.Initializing[id] = shareTopicInfo{Name: t.Name, Partitions: want}
					changed = true
				}
			}
		}
	}
	toDelete := map[[16]byte]shareTopicInfo{}
	if !sg.deleteRunning {
		lookup := g.c.cfg.Share.Topics
		gone := func(id [16]byte) bool {
			if lookup == nil {
				return false
			}
			_, ok := lookup.TopicByID(id)
			return !ok
		}
		for _, set := range []map[[16]byte]shareTopicInfo{next.Initialized, next.Initializing} {
			for id, ti := range set {
				if !gone(id) {
					continue
				}
				if _, ok := next.Deleting[id]; !ok {
					next.Deleting[id] = ti.Name
					changed = true
				}
				d := toDelete[id]
				d.Name = ti.Name
				d.Partitions = append(d.Partitions, ti.Partitions...)
				toDelete[id] = d
			}
		}
		for id, name := range next.Deleting {
			if _, ok := toDelete[id]; !ok {
				toDelete[id] = shareTopicInfo{Name: name}
			}
		}
	}
	if !changed {
		return nil, toInit, toDelete
	}
	return &next, toInit, toDelete
}

func cloneInfos(m map[[16]byte]shareTopicInfo) map[[16]byte]shareTopicInfo {
	out := make(map[[16]byte]shareTopicInfo, len(m))
	for id, ti := range m {
		out[id] = shareTopicInfo{Name: ti.Name, Partitions: append([]int32(nil), ti.Partitions...)}
	}
	return out
}

func sortedTopicIDs(m map[[16]byte]ShareTopic) [][16]byte {
	ids := make([][16]byte, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	return ids
}

// persisterTimeout bounds one round of persister calls.
const persisterTimeout = 30 * time.Second

// startSharePersisterCalls initializes toInit (state epoch: the group epoch; start offset -1,
// which the share-partition leader resolves with share.auto.offset.reset when it first reads
// the state, as Kafka's UNINITIALIZED_START_OFFSET) and deletes the state of toDelete's topics,
// off the group's goroutine; the outcome comes back as a closure that records it.
func (g *group) startSharePersisterCalls(toInit []sharestate.Key, toDelete map[[16]byte]shareTopicInfo) {
	p := g.c.cfg.Share.Persister
	if p == nil {
		return
	}
	sg := g.sg
	if len(toInit) > 0 && !sg.initRunning {
		sg.initRunning = true
		stateEpoch := sg.epoch
		keys := toInit
		g.c.wg.Add(1)
		go func() {
			defer g.c.wg.Done()
			ctx, cancel := g.c.persisterContext()
			defer cancel()
			ok := make([]sharestate.Key, 0, len(keys))
			starts := make([]int64, len(keys))
			for i := range starts {
				starts[i] = -1
			}
			for i, err := range sharestate.InitializeAll(ctx, p, keys, stateEpoch, starts) {
				if err != nil {
					g.c.log.Warn("initializing share-partition state failed; retried at a later heartbeat", "group", keys[i].Group, "partition", keys[i].Partition, "err", err)
					continue
				}
				ok = append(ok, keys[i])
			}
			g.post(func() { g.shareInitialized(ok) })
		}()
	}
	if len(toDelete) > 0 && !sg.deleteRunning {
		sg.deleteRunning = true
		work := toDelete
		g.c.wg.Add(1)
		go func() {
			defer g.c.wg.Done()
			ctx, cancel := g.c.persisterContext()
			defer cancel()
			var keys []sharestate.Key
			for id, ti := range work {
				for _, part := range ti.Partitions {
					keys = append(keys, sharestate.Key{Group: g.id, TopicID: id, Partition: part})
				}
			}
			failed := map[[16]byte]bool{}
			for i, err := range sharestate.DeleteAll(ctx, p, keys) {
				if err != nil {
					g.c.log.Warn("deleting share-partition state failed", "group", g.id, "partition", keys[i].Partition, "err", err)
					failed[keys[i].TopicID] = true
				}
			}
			var done [][16]byte
			for id := range work {
				if !failed[id] {
					done = append(done, id)
				}
			}
			g.post(func() { g.shareDeleted(done) })
		}()
	}
}

// persisterContext is a context for one round of persister calls, cancelled at Close.
func (c *Coordinator) persisterContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), persisterTimeout)
	go func() {
		select {
		case <-c.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// shareInitialized records partitions whose state was initialized.
func (g *group) shareInitialized(keys []sharestate.Key) {
	if g.sg == nil {
		return
	}
	sg := g.sg
	sg.initRunning = false
	if len(keys) == 0 || g.state == Dead {
		return
	}
	next := shareStateValue{Initializing: cloneInfos(sg.parts.Initializing), Initialized: cloneInfos(sg.parts.Initialized), Deleting: sg.parts.Deleting}
	for _, k := range keys {
		cur := next.Initializing[k.TopicID]
		name := cur.Name
		cur.Partitions = slices.DeleteFunc(cur.Partitions, func(p int32) bool { return p == k.Partition })
		if len(cur.Partitions) == 0 {
			delete(next.Initializing, k.TopicID)
		} else {
			next.Initializing[k.TopicID] = cur
		}
		in := next.Initialized[k.TopicID]
		if in.Name == "" {
			in.Name = name
		}
		if !slices.Contains(in.Partitions, k.Partition) {
			in.Partitions = append(in.Partitions, k.Partition)
			slices.Sort(in.Partitions)
		}
		next.Initialized[k.TopicID] = in
	}
	if _, err := g.appendRecords([]kv{{Key: appendShareKey(nil, recShareGroupStatePartitionMetadata, g.id), Value: appendShareStateValue(nil, next)}}); err != nil {
		g.c.log.Warn("share group: recording initialized partitions failed", "group", g.id, "err", err)
		return
	}
	sg.parts = next
}

// shareDeleted records topics whose share-partition state was deleted.
func (g *group) shareDeleted(ids [][16]byte) {
	if g.sg == nil {
		return
	}
	sg := g.sg
	sg.deleteRunning = false
	if len(ids) == 0 || g.state == Dead {
		return
	}
	next := shareStateValue{Initializing: cloneInfos(sg.parts.Initializing), Initialized: cloneInfos(sg.parts.Initialized), Deleting: map[[16]byte]string{}}
	for id, n := range sg.parts.Deleting {
		next.Deleting[id] = n
	}
	for _, id := range ids {
		delete(next.Deleting, id)
		delete(next.Initialized, id)
		delete(next.Initializing, id)
	}
	if _, err := g.appendRecords([]kv{{Key: appendShareKey(nil, recShareGroupStatePartitionMetadata, g.id), Value: appendShareStateValue(nil, next)}}); err != nil {
		g.c.log.Warn("share group: recording deleted topics failed", "group", g.id, "err", err)
		return
	}
	sg.parts = next
}

// ---- DeleteGroups ----

// shareStateKeys lists every share partition whose state the group may hold.
func (g *group) shareStateKeys() []sharestate.Key {
	var keys []sharestate.Key
	for _, set := range []map[[16]byte]shareTopicInfo{g.sg.parts.Initialized, g.sg.parts.Initializing} {
		for id, ti := range set {
			for _, p := range ti.Partitions {
				keys = append(keys, sharestate.Key{Group: g.id, TopicID: id, Partition: p})
			}
		}
	}
	return keys
}

// shareDeleteRecords writes the tombstones of an empty share group and makes it Dead.
func (g *group) shareDeleteRecords() (*kerr.Error, durableMark) {
	if g.state == Dead {
		return kerr.GroupIDNotFound, durableMark{}
	}
	if len(g.sg.members) > 0 {
		return kerr.NonEmptyGroup, durableMark{}
	}
	recs := []kv{}
	for _, id := range sortedKeys(g.sg.target) {
		recs = append(recs, kv{Key: appendShareMemberKey(nil, recShareGroupTargetAssignmentMember, g.id, id)})
	}
	recs = append(recs,
		kv{Key: appendShareKey(nil, recShareGroupTargetAssignmentMetadata, g.id)},
		kv{Key: appendShareKey(nil, recShareGroupStatePartitionMetadata, g.id)},
		kv{Key: appendShareKey(nil, recShareGroupMetadata, g.id)},
	)
	mark, err := g.appendRecords(recs)
	if err != nil {
		return appendError(err), durableMark{}
	}
	g.transition(Dead)
	g.c.log.Info("share group deleted", "group", g.id)
	return nil, mark
}

// deleteShareGroup is DeleteGroups for a share group: only an empty one; the state of every
// share partition it initialized is deleted through the persister first, then the group's
// records get tombstones. ok is false when groupID is not a share group (the classic path
// applies).
func (c *Coordinator) deleteShareGroup(groupID string) (result func() *kerr.Error, ok bool) {
	var keys []sharestate.Key
	var res *kerr.Error
	isShare := false
	if err := c.withGroup(groupID, false, func(g *group) {
		if g == nil || g.typ != TypeShare {
			return
		}
		isShare = true
		switch {
		case g.state == Dead:
			res = kerr.GroupIDNotFound
		case len(g.sg.members) > 0:
			res = kerr.NonEmptyGroup
		default:
			keys = g.shareStateKeys()
		}
	}); err != nil {
		return func() *kerr.Error { return err }, true
	}
	if !isShare {
		return nil, false
	}
	if res != nil {
		return func() *kerr.Error { return res }, true
	}
	return func() *kerr.Error {
		if p := c.cfg.Share.Persister; p != nil && len(keys) > 0 {
			ctx, cancel := c.persisterContext()
			defer cancel()
			for i, err := range sharestate.DeleteAll(ctx, p, keys) {
				if err != nil {
					c.log.Warn("deleting share-partition state failed", "group", groupID, "partition", keys[i].Partition, "err", err)
					if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
						return ke
					}
					return kerr.CoordinatorNotAvailable
				}
			}
		}
		var mark durableMark
		var out *kerr.Error
		if err := c.withGroup(groupID, false, func(g *group) {
			if g == nil || g.typ != TypeShare {
				out = kerr.GroupIDNotFound
				return
			}
			out, mark = g.shareDeleteRecords()
		}); err != nil {
			return err
		}
		if out != nil {
			return out
		}
		return c.awaitDurable(mark)
	}, true
}
