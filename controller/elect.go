package controller

// Leader election on request and leader balance: the ElectLeaders operation (Kafka's
// ElectLeaders API, KIP-460: PREFERRED and UNCLEAN elections with per-partition results), the
// elect_leaders command that carries the leader changes the raft leader decided, and the active
// controller's leader maintenance (maintainLeaders, run from leaderLoop):
//
//   - Leader balance (auto.leader.rebalance.enable): the preferred replica of a partition is
//     the first of its replica list. For each broker, imbalance = the partitions it is the
//     preferred replica of but does not lead, over all the partitions it is the preferred
//     replica of. A broker whose imbalance is over leader.imbalance.per.broker.percentage gets
//     the leadership of each such partition back where it is alive and in the ISR (Kafka's
//     rule, imbalanceElections). The check runs every leader.imbalance.check.interval.seconds,
//     and also, at most once a second, after a metadata change that made a preferred replica
//     eligible again (it rejoined the ISR, or came back alive while in it), so a restarted
//     broker gets its leaderships back as soon as it has caught up.
//   - Unclean election when it becomes allowed: a leaderless partition whose topic allows
//     unclean leader election (Config.UncleanLeaderElection: the topic's
//     unclean.leader.election.enable, else the broker's) gets a live replica from outside the
//     ISR as leader at the next maintenance pass after the setting changed (within
//     uncleanCheckInterval, or at once after a metadata change), not only at the next fencing.
//
// Every leader change bumps the leader epoch and the partition epoch, as any other election.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ElectionType is Kafka's election type of ElectLeaders v1+.
type ElectionType int8

const (
	// ElectPreferred moves a partition's leadership to its preferred replica (the first of its
	// replica list) when that replica is alive and in the ISR.
	ElectPreferred ElectionType = 0
	// ElectUnclean elects a leader for a leaderless partition: from the ISR if a member is
	// alive, else any live replica (the ISR becomes that replica alone).
	ElectUnclean ElectionType = 1
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// ElectLeadersRequest asks for an election of the listed partitions, or with All of every
// partition of every topic (then partitions whose election is not needed are left out of the
// results, as Kafka does).
type ElectLeadersRequest struct {
	Type       ElectionType     `json:"type"`
	Partitions []TopicPartition `json:"partitions,omitempty"`
	All        bool             `json:"all,omitempty"`
}

// ElectionResult is the outcome for one partition: Code 0 when a new leader was elected, else
// Kafka's error code (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
// ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION) and a message.
type ElectionResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Code      int16  `json:"code,omitempty"`
	Msg       string `json:"msg,omitempty"`
}

// leaderChange is one election decided by the raft leader: partition Topic-Partition, as of
// PartitionEpoch, gets Leader (and, for an unclean election, ISR).
type leaderChange struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	PartitionEpoch int32   `json:"partition_epoch"`
	Leader         int32   `json:"leader"`
	ISR            []int32 `json:"isr,omitempty"` // nil: unchanged
}

const (
	// maxElectPartitions bounds the partitions one ElectLeaders request may name.
	maxElectPartitions = maxPartitionsPerRequest
	// maxChangesPerCommand bounds one elect_leaders command (Kafka's balancer moves at most
	// 1,000 leaders per pass, too); a larger election is carried by several commands.
	maxChangesPerCommand = 1000
	// uncleanCheckInterval is how often the active controller looks for leaderless partitions
	// whose topic now allows unclean election, when the metadata does not change.
	uncleanCheckInterval = time.Second
	// balanceTriggerInterval is the shortest time between two balance checks triggered by
	// metadata changes (the periodic check is leader.imbalance.check.interval.seconds).
	balanceTriggerInterval = time.Second
)

// ElectLeaders runs an election on the raft leader and returns the per-partition results.
func (c *Controller) ElectLeaders(ctx context.Context, r ElectLeadersRequest) ([]ElectionResult, error) {
	if r.Type != ElectPreferred && r.Type != ElectUnclean {
		return nil, kerrf(kerr.InvalidRequest, "election type %d", r.Type)
	}
	if len(r.Partitions) > maxElectPartitions {
		return nil, kerrf(kerr.PolicyViolation, "%d partitions in one election, at most %d", len(r.Partitions), maxElectPartitions)
	}
	resp, err := c.submit(ctx, &request{Op: reqElectLeaders, Elect: &r})
	if err != nil {
		return nil, err
	}
	return resp.Elections, nil
}

// planElection decides, on image img, the outcome of election r for each partition and the
// leader changes to apply.
func planElection(img *Image, r *ElectLeadersRequest) ([]ElectionResult, []leaderChange) {
	var results []ElectionResult
	var changes []leaderChange
	one := func(topic string, part int32, omitNotNeeded bool) {
		res := ElectionResult{Topic: topic, Partition: part}
		t := img.Topics[topic]
		if t == nil || part < 0 || int(part) >= len(t.Partitions) {
			res.Code, res.Msg = kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("no such partition as %s-%d", topic, part)
			results = append(results, res)
			return
		}
		p := &t.Partitions[part]
		ch, e := electOne(img, p, r.Type)
		if e != nil {
			if omitNotNeeded && e == kerr.ElectionNotNeeded {
				return
			}
			res.Code = e.Code
			res.Msg = fmt.Sprintf("%s-%d: %s", topic, part, electionMsg(img, p, e))
		} else {
			ch.Topic, ch.Partition = topic, part
			changes = append(changes, ch)
		}
		results = append(results, res)
	}
	if r.All {
		for _, name := range sortedTopicNames(img.Topics) {
			for i := range img.Topics[name].Partitions {
				one(name, int32(i), true)
			}
		}
		return results, changes
	}
	for _, tp := range r.Partitions {
		one(tp.Topic, tp.Partition, false)
	}
	return results, changes
}

// electOne decides the election of type typ for partition p: the change, or why there is none.
func electOne(img *Image, p *PartitionInfo, typ ElectionType) (leaderChange, *kerr.Error) {
	ch := leaderChange{PartitionEpoch: p.PartitionEpoch}
	switch typ {
	case ElectPreferred:
		if len(p.Replicas) == 0 {
			return ch, kerr.PreferredLeaderNotAvailable
		}
		pref := p.Replicas[0]
		if p.Leader == pref {
			return ch, kerr.ElectionNotNeeded
		}
		if !img.alive(pref) || !slices.Contains(p.ISR, pref) {
			return ch, kerr.PreferredLeaderNotAvailable
		}
		ch.Leader = pref
		return ch, nil
	case ElectUnclean:
		if p.Leader >= 0 {
			return ch, kerr.ElectionNotNeeded
		}
		if nl := electLeader(img, p); nl >= 0 {
			ch.Leader = nl
			return ch, nil
		}
		if nl := firstAliveReplica(img, p); nl >= 0 {
			ch.Leader, ch.ISR = nl, []int32{nl}
			return ch, nil
		}
		return ch, kerr.EligibleLeadersNotAvailable
	}
	return ch, kerr.InvalidRequest
}

func electionMsg(img *Image, p *PartitionInfo, e *kerr.Error) string {
	switch e {
	case kerr.ElectionNotNeeded:
		return fmt.Sprintf("leader %d is already the desired leader", p.Leader)
	case kerr.PreferredLeaderNotAvailable:
		if len(p.Replicas) == 0 {
			return "no replicas"
		}
		return fmt.Sprintf("preferred replica %d is not alive or not in the ISR %v", p.Replicas[0], p.ISR)
	case kerr.EligibleLeadersNotAvailable:
		return fmt.Sprintf("no live replica among %v", p.Replicas)
	}
	return e.Message
}

// executeElect runs an ElectLeaders request on the raft leader.
func (c *Controller) executeElect(ctx context.Context, img *Image, r *ElectLeadersRequest) *response {
	if r == nil {
		return errorResponse(kerrf(kerr.InvalidRequest, "elect leaders without a request"))
	}
	results, changes := planElection(img, r)
	index, errResp := c.applyLeaderChanges(ctx, changes)
	if errResp != nil {
		return errResp
	}
	if len(changes) > 0 {
		c.log.Info("controller: leaders elected", "type", r.Type, "partitions", len(changes))
	}
	return &response{Index: index, Elections: results}
}

// applyLeaderChanges appends changes as elect_leaders commands (at most maxChangesPerCommand
// each) and returns the index of the last image they produced.
func (c *Controller) applyLeaderChanges(ctx context.Context, changes []leaderChange) (uint64, *response) {
	var index uint64
	for len(changes) > 0 {
		n := min(len(changes), maxChangesPerCommand)
		res, errResp := c.leaderApply(ctx, &command{Op: opElectLeaders, Elect: changes[:n]})
		if errResp != nil {
			return 0, errResp
		}
		index = max(index, res.index)
		changes = changes[n:]
	}
	return index, nil
}

// electLeaders applies the leader changes of an elect_leaders command. A change whose partition
// moved on since it was decided (another partition epoch), or whose new leader is no longer
// alive, is skipped.
func (b *builder) electLeaders(changes []leaderChange) {
	for _, ch := range changes {
		t := b.img.Topics[ch.Topic]
		if t == nil || ch.Partition < 0 || int(ch.Partition) >= len(t.Partitions) {
			continue
		}
		p := t.Partitions[ch.Partition]
		if p.PartitionEpoch != ch.PartitionEpoch || !slices.Contains(p.Replicas, ch.Leader) || !b.img.alive(ch.Leader) {
			continue
		}
		if ch.ISR != nil {
			p.ISR = slices.Clone(ch.ISR)
		}
		if !slices.Contains(p.ISR, ch.Leader) {
			continue
		}
		p.Leader = ch.Leader
		p.LeaderEpoch++
		p.PartitionEpoch++
		b.mutTopic(ch.Topic).Partitions[ch.Partition] = p
		b.changed = true
	}
}

// BrokerImbalance is one broker's leader imbalance: of the partitions it is the preferred
// replica of (Preferred), how many it does not lead (NotLed).
type BrokerImbalance struct {
	Preferred, NotLed int
}

// LeaderImbalance returns each broker's leader imbalance in img.
func LeaderImbalance(img *Image) map[int32]BrokerImbalance {
	out := map[int32]BrokerImbalance{}
	for _, t := range img.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if len(p.Replicas) == 0 {
				continue
			}
			bi := out[p.Replicas[0]]
			bi.Preferred++
			if p.Leader != p.Replicas[0] {
				bi.NotLed++
			}
			out[p.Replicas[0]] = bi
		}
	}
	return out
}

// imbalanceElections returns, by Kafka's rule, the preferred elections that leader balance
// makes on img: for every broker whose imbalance ratio (NotLed / Preferred) is over
// percentage/100, each partition it is the preferred replica of but does not lead, where it is
// alive and in the ISR.
func imbalanceElections(img *Image, percentage int) []leaderChange {
	imb := LeaderImbalance(img)
	over := map[int32]bool{}
	for id, bi := range imb {
		if bi.Preferred > 0 && bi.NotLed*100 > percentage*bi.Preferred {
			over[id] = true
		}
	}
	if len(over) == 0 {
		return nil
	}
	var changes []leaderChange
	for _, name := range sortedTopicNames(img.Topics) {
		t := img.Topics[name]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if len(p.Replicas) == 0 || !over[p.Replicas[0]] {
				continue
			}
			if ch, e := electOne(img, p, ElectPreferred); e == nil {
				ch.Topic, ch.Partition = name, int32(i)
				changes = append(changes, ch)
			}
		}
	}
	return changes
}

// preferredEligible returns the partitions whose preferred replica does not lead but is alive
// and in the ISR: a preferred election would move them.
func preferredEligible(img *Image) map[TopicPartition]struct{} {
	out := map[TopicPartition]struct{}{}
	for name, t := range img.Topics {
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] && img.alive(p.Replicas[0]) && slices.Contains(p.ISR, p.Replicas[0]) {
				out[TopicPartition{name, int32(i)}] = struct{}{}
			}
		}
	}
	return out
}

// uncleanElections returns the unclean elections of the leaderless partitions of the topics
// unclean reports as allowing them (nil: none).
func uncleanElections(img *Image, unclean func(topic string) bool) []leaderChange {
	if unclean == nil {
		return nil
	}
	// Most passes find no leaderless partition: look before sorting anything.
	var names []string
	for name, t := range img.Topics {
		for i := range t.Partitions {
			if t.Partitions[i].Leader < 0 {
				names = append(names, name)
				break
			}
		}
	}
	slices.Sort(names)
	var changes []leaderChange
	for _, name := range names {
		if !unclean(name) {
			continue
		}
		t := img.Topics[name]
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if p.Leader >= 0 {
				continue
			}
			if ch, e := electOne(img, p, ElectUnclean); e == nil {
				ch.Topic, ch.Partition = name, int32(i)
				changes = append(changes, ch)
			}
		}
	}
	return changes
}

// leaderMaint is the active controller's leader maintenance state; only leaderLoop's goroutine
// uses it.
type leaderMaint struct {
	lastIndex   uint64    // image index of the last pass
	lastUnclean time.Time // last unclean pass
	lastBalance time.Time // last periodic balance check
	// dirty: the image changed since eligible was last computed (at lastEval).
	dirty    bool
	lastEval time.Time
	// eligible are the partitions a preferred election would move, as of lastEval.
	eligible map[TopicPartition]struct{}
}

// maintainLeaders is the active controller's leader maintenance pass (see the file comment);
// leaderLoop calls it on every tick while this node is the active controller.
func (c *Controller) maintainLeaders(m *leaderMaint) {
	img := c.Image()
	now := time.Now()
	changed := img.Index != m.lastIndex
	m.lastIndex = img.Index
	if changed || now.Sub(m.lastUnclean) >= uncleanCheckInterval {
		m.lastUnclean = now
		if changes := uncleanElections(img, c.cfg.UncleanLeaderElection); len(changes) > 0 {
			c.log.Info("controller: unclean leader election", "partitions", len(changes))
			c.applyMaint(changes)
			return
		}
	}
	if !c.cfg.AutoLeaderRebalance {
		return
	}
	interval := c.cfg.LeaderImbalanceCheckInterval
	if interval <= 0 {
		interval = defaultLeaderImbalanceCheckInterval
	}
	periodic := now.Sub(m.lastBalance) >= interval
	triggered := false
	m.dirty = m.dirty || changed
	if m.dirty && now.Sub(m.lastEval) >= balanceTriggerInterval {
		// Did a preferred replica become eligible again (it rejoined the ISR, or came back
		// alive in it)? Then balance now rather than at the next periodic check.
		m.dirty, m.lastEval = false, now
		e := preferredEligible(img)
		for tp := range e {
			if _, was := m.eligible[tp]; !was {
				triggered = true
				break
			}
		}
		m.eligible = e
	}
	if !periodic && !triggered {
		return
	}
	if periodic {
		m.lastBalance = now
	}
	changes := imbalanceElections(img, c.cfg.LeaderImbalancePerBrokerPercentage)
	if len(changes) == 0 {
		return
	}
	c.log.Info("controller: leader balance: moving leaderships back to preferred replicas", "partitions", len(changes), "periodic", periodic)
	c.applyMaint(changes)
}

func (c *Controller) applyMaint(changes []leaderChange) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SessionTimeout)
	defer cancel()
	if _, errResp := c.applyLeaderChanges(ctx, changes); errResp != nil {
		c.log.Warn("controller: leader election failed", "err", errResp.Msg)
	}
}

const (
	defaultLeaderImbalanceCheckInterval = 300 * time.Second
	defaultLeaderImbalancePercentage    = 10
)

// validateElect bounds an elect_leaders RPC request.
func validateElect(r *ElectLeadersRequest) error {
	if r == nil {
		return fmt.Errorf("no election")
	}
	if r.Type != ElectPreferred && r.Type != ElectUnclean {
		return fmt.Errorf("election type %d", r.Type)
	}
	if len(r.Partitions) > maxElectPartitions {
		return fmt.Errorf("%d partitions, at most %d", len(r.Partitions), maxElectPartitions)
	}
	for _, tp := range r.Partitions {
		if len(tp.Topic) > maxNameLen {
			return fmt.Errorf("topic name too long")
		}
	}
	return nil
}
