package coordinator

import (
	"time"
)

// loadedShareGroup is what a partition's records say about one share group (last value per
// key wins; tombstones delete).
type loadedShareGroup struct {
	hasMeta         bool
	epoch           int32
	metadataHash    int64
	assignmentEpoch int32
	members         map[string]*shareMemberValue
	targets         map[string]topicParts
	current         map[string]*shareAssignmentValue
	parts           *shareStateValue
}

func (ls *loadedShareGroup) empty() bool {
	return !ls.hasMeta && len(ls.members) == 0 && len(ls.targets) == 0 && len(ls.current) == 0 && ls.parts == nil
}

// replayShareRecord replays one share group record (key version v). Records that do not parse
// are reported as not understood (the load counts them as skipped).
func (c *Coordinator) replayShareRecord(get func(id string) *loadedGroup, v int16, key, value []byte) bool {
	groupID, memberID, err := parseShareKey(v, key)
	if err != nil {
		return false
	}
	if v == recShareGroupPartitionMetadata {
		return true // Kafka 4.0's subscription metadata: superseded by the metadata hash
	}
	lg := get(groupID)
	ls := lg.sg
	if ls == nil {
		ls = &loadedShareGroup{members: map[string]*shareMemberValue{}, targets: map[string]topicParts{}, current: map[string]*shareAssignmentValue{}}
		lg.sg = ls
	}
	defer func() {
		if ls.empty() {
			lg.sg = nil
		}
	}()
	switch v {
	case recShareGroupMetadata:
		if value == nil {
			// The group's tombstone (DeleteGroups): Kafka writes it last; forget the group.
			*ls = loadedShareGroup{members: map[string]*shareMemberValue{}, targets: map[string]topicParts{}, current: map[string]*shareAssignmentValue{}}
			return true
		}
		e, h, err := parseShareGroupValue(value)
		if err != nil {
			return false
		}
		ls.hasMeta, ls.epoch, ls.metadataHash = true, e, h
	case recShareGroupMemberMetadata:
		if value == nil {
			delete(ls.members, memberID)
			return true
		}
		mv, err := parseShareMemberValue(value)
		if err != nil {
			return false
		}
		ls.members[memberID] = &mv
	case recShareGroupTargetAssignmentMetadata:
		if value == nil {
			ls.assignmentEpoch = 0
			return true
		}
		e, err := parseShareTargetMetaValue(value)
		if err != nil {
			return false
		}
		ls.assignmentEpoch = e
	case recShareGroupTargetAssignmentMember:
		if value == nil {
			delete(ls.targets, memberID)
			return true
		}
		t, err := parseShareTargetMemberValue(value)
		if err != nil {
			return false
		}
		ls.targets[memberID] = t
	case recShareGroupCurrentMemberAssignment:
		if value == nil {
			delete(ls.current, memberID)
			return true
		}
		a, err := parseShareAssignmentValue(value)
		if err != nil {
			return false
		}
		ls.current[memberID] = &a
	case recShareGroupStatePartitionMetadata:
		if value == nil {
			ls.parts = nil
			return true
		}
		st, err := parseShareStateValue(value)
		if err != nil {
			return false
		}
		ls.parts = &st
	default:
		return false
	}
	return true
}

// installShareGroup makes g the share group ls describes. Members must heartbeat within the
// session timeout, as after a coordinator failover.
func (c *Coordinator) installShareGroup(g *group, ls *loadedShareGroup, now time.Time) {
	g.makeShare()
	sg := g.sg
	sg.epoch, sg.metadataHash, sg.assignmentEpoch = ls.epoch, ls.metadataHash, ls.assignmentEpoch
	for id, t := range ls.targets {
		sg.target[id] = t
	}
	if ls.parts != nil {
		sg.parts = *ls.parts
		if sg.parts.Initializing == nil {
			sg.parts.Initializing = map[[16]byte]shareTopicInfo{}
		}
		if sg.parts.Initialized == nil {
			sg.parts.Initialized = map[[16]byte]shareTopicInfo{}
		}
		if sg.parts.Deleting == nil {
			sg.parts.Deleting = map[[16]byte]string{}
		}
	}
	timeout := c.shareSessionTimeout(g.id)
	for id, mv := range ls.members {
		m := &shareMember{id: id, rack: mv.RackID, clientID: mv.ClientID, clientHost: mv.ClientHost,
			subscribed: mv.Subscribed, assigned: topicParts{}, deadline: now.Add(timeout)}
		if a := ls.current[id]; a != nil {
			m.epoch, m.prevEpoch, m.assigned = a.MemberEpoch, a.PreviousMemberEpoch, a.Assigned
		}
		sg.members[id] = m
	}
	if len(sg.members) > 0 {
		g.state = Stable
	}
}
