package coordinator

import (
	"time"
)

// loadedConsumerGroup is what a partition's records say about one KIP-848 consumer group (last
// value per key wins, tombstones delete).
type loadedConsumerGroup struct {
	hasMeta         bool
	epoch           int32
	metaHash        int64
	assignmentEpoch int32
	members         map[string]*cgMemberValue
	targets         map[string]partitions
	current         map[string]*cgCurrentValue
	regexes         map[string]*cgRegexValue
}

func (lc *loadedConsumerGroup) empty() bool {
	return !lc.hasMeta && len(lc.members) == 0 && len(lc.targets) == 0 && len(lc.current) == 0 && len(lc.regexes) == 0
}

// replayConsumerRecord replays one KIP-848 consumer group record (key version v). Key version 4
// (ConsumerGroupPartitionMetadata, deprecated since Kafka 4.1) is read and ignored: weir keeps
// a hash of the subscribed topics' metadata in ConsumerGroupMetadataValue instead.
func (c *Coordinator) replayConsumerRecord(get func(id string) *loadedGroup, v int16, key, value []byte) bool {
	k, err := parseCGKey(v, key)
	if err != nil {
		return false
	}
	lg := get(k.Group)
	lc := lg.cg
	if lc == nil {
		if value == nil {
			return true // a tombstone of something not loaded
		}
		lc = &loadedConsumerGroup{members: map[string]*cgMemberValue{}, targets: map[string]partitions{},
			current: map[string]*cgCurrentValue{}, regexes: map[string]*cgRegexValue{}}
		lg.cg = lc
	}
	defer func() {
		if lc.empty() {
			lg.cg = nil
		}
	}()
	switch v {
	case recConsumerGroupMetadata:
		if value == nil {
			lc.hasMeta, lc.epoch, lc.metaHash = false, 0, 0
			return true
		}
		mv, err := parseCGMetadataValue(value)
		if err != nil {
			return false
		}
		lc.hasMeta, lc.epoch, lc.metaHash = true, mv.Epoch, mv.MetadataHash
	case recConsumerGroupPartitionMetadata:
		return true
	case recConsumerGroupMemberMetadata:
		if value == nil {
			delete(lc.members, k.Sub)
			return true
		}
		mv, err := parseCGMemberValue(value)
		if err != nil {
			return false
		}
		lc.members[k.Sub] = mv
	case recConsumerGroupTargetAssignmentMetadata:
		if value == nil {
			lc.assignmentEpoch = 0
			return true
		}
		e, err := parseCGEpochValue(value)
		if err != nil {
			return false
		}
		lc.assignmentEpoch = e
	case recConsumerGroupTargetAssignmentMember:
		if value == nil {
			delete(lc.targets, k.Sub)
			return true
		}
		p, err := parseCGTargetMemberValue(value)
		if err != nil {
			return false
		}
		lc.targets[k.Sub] = p
	case recConsumerGroupCurrentMemberAssignment:
		if value == nil {
			delete(lc.current, k.Sub)
			return true
		}
		cv, err := parseCGCurrentValue(value)
		if err != nil {
			return false
		}
		lc.current[k.Sub] = cv
	case recConsumerGroupRegularExpression:
		if value == nil {
			delete(lc.regexes, k.Sub)
			return true
		}
		rv, err := parseCGRegexValue(value)
		if err != nil {
			return false
		}
		lc.regexes[k.Sub] = rv
	default:
		return false
	}
	return true
}

// installConsumerGroup makes g the consumer group lc describes. Every member must heartbeat
// within the session timeout (as after a coordinator failover); a member that was revoking
// partitions gets its rebalance timeout again. The subscribed topics are checked against the
// metadata at the first heartbeat (metaDirty). Called with c.mu held, before g runs.
func (c *Coordinator) installConsumerGroup(g *group, lc *loadedConsumerGroup, now time.Time) {
	if lc.empty() {
		return
	}
	cg := newConsumerGroup()
	cg.epoch, cg.metaHash, cg.assignmentEpoch = lc.epoch, lc.metaHash, lc.assignmentEpoch
	cg.metaDirty = true
	for id, mv := range lc.members {
		m := &cgMember{
			id: id, instanceID: mv.InstanceID, rackID: mv.RackID, clientID: mv.ClientID, clientHost: mv.ClientHost,
			topics: sortedUnique(mv.SubscribedTopics), regex: mv.SubscribedRegex, rebalanceTimeoutMs: mv.RebalanceTimeoutMs,
			serverAssignor: mv.ServerAssignor, assigned: partitions{}, pending: partitions{}, classic: mv.Classic,
		}
		if cv := lc.current[id]; cv != nil {
			cg.updateCurrent(m, cv)
		}
		if t, ok := lc.targets[id]; ok {
			cg.target[id] = t
		}
		m.sessionDeadline = now.Add(c.memberSessionTimeout(m))
		if m.state == msUnrevoked {
			m.revokeEpoch = m.epoch
			m.revokeDeadline = now.Add(time.Duration(max(m.rebalanceTimeoutMs, 0)) * time.Millisecond)
		}
		cg.members[id] = m
		if m.instanceID != nil {
			cg.static[*m.instanceID] = id
		}
	}
	for re, rv := range lc.regexes {
		cre, _ := compileTopicRegex(re)
		cg.regexes[re] = &cgRegex{re: cre, topics: rv.Topics, version: rv.Version, timestamp: rv.Timestamp}
	}
	g.typ, g.cg = TypeConsumer, cg
	g.protocolType = "consumer"
	if len(cg.members) > 0 {
		g.state = Stable
	} else {
		g.state = Empty
	}
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
