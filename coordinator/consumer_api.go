package coordinator

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// topics returns the broker's topics (Config.Topics), or none without the hook.
func (c *Coordinator) topics() map[string]TopicMeta {
	if c.cfg.Topics == nil {
		return nil
	}
	return c.cfg.Topics()
}

// ConsumerHeartbeat handles a ConsumerGroupHeartbeat. The returned function waits until the
// records the heartbeat wrote are durable and returns the response.
func (c *Coordinator) ConsumerHeartbeat(req ConsumerHeartbeatRequest) func() ConsumerHeartbeatResult {
	fail := func(err *kerr.Error, msg string) func() ConsumerHeartbeatResult {
		r := ConsumerHeartbeatResult{Err: err, ErrMessage: msg, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
		return func() ConsumerHeartbeatResult { return r }
	}
	if e := c.validateConsumerHeartbeat(&req); e != nil {
		return fail(e.err, e.msg)
	}
	// The request's slices alias the connection's buffer: copy what the group may keep.
	req.SubscribedTopicNames = cloneStrings(req.SubscribedTopicNames)
	req.InstanceID = cloneStrPtr(req.InstanceID)
	req.RackID = cloneStrPtr(req.RackID)
	req.SubscribedTopicRegex = cloneStrPtr(req.SubscribedTopicRegex)
	req.ServerAssignor = cloneStrPtr(req.ServerAssignor)
	req.Group = clone(req.Group)
	req.MemberID = clone(req.MemberID)
	if len(req.ClientID) > 1024 {
		req.ClientID = req.ClientID[:1024]
	}
	req.ClientID = clone(req.ClientID)
	var res ConsumerHeartbeatResult
	create := req.MemberEpoch == 0
	err := c.withGroup(req.Group, create, func(g *group) {
		if g == nil {
			if req.MemberEpoch < 0 {
				res = ConsumerHeartbeatResult{Err: kerr.GroupIDNotFound, ErrMessage: "Group " + req.Group + " not found.", MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
			} else {
				res = ConsumerHeartbeatResult{Err: kerr.UnknownMemberID, ErrMessage: "Consumer group " + req.Group + " not found.", MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
			}
			return
		}
		res = g.cgHeartbeat(&req)
	})
	if err != nil {
		return fail(err, "")
	}
	return func() ConsumerHeartbeatResult {
		if res.Err == nil {
			if err := c.awaitDurable(res.durable); err != nil {
				return ConsumerHeartbeatResult{Err: err, MemberID: req.MemberID, MemberEpoch: req.MemberEpoch}
			}
		}
		return res
	}
}

func clone(s string) string { return string(append([]byte(nil), s...)) }

func cloneStrPtr(s *string) *string {
	if s == nil {
		return nil
	}
	v := clone(*s)
	return &v
}

func cloneStrings(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clone(s)
	}
	return out
}

// ConsumerDescribe handles one group of a ConsumerGroupDescribe: GROUP_ID_NOT_FOUND for a
// group that does not exist or is not a consumer group.
func (c *Coordinator) ConsumerDescribe(groupID string) ConsumerGroupDescription {
	d := ConsumerGroupDescription{Group: groupID, Err: kerr.GroupIDNotFound, ErrMessage: "Group " + groupID + " not found."}
	if err := validGroupID(groupID, true); err != nil {
		d.Err = err
		return d
	}
	if err := c.withGroup(groupID, false, func(g *group) {
		if g == nil || g.state == Dead {
			return
		}
		if g.typ != TypeConsumer {
			d.ErrMessage = "Group " + groupID + " is not a consumer group."
			return
		}
		d = g.cgDescribe()
	}); err != nil {
		d.Err, d.ErrMessage = err, ""
	}
	return d
}

// MetadataChanged tells the consumer groups that topics were created, deleted or gained
// partitions: each recomputes its subscribed topics (and resolves its regexes again) at its
// next heartbeat, and bumps its epoch if they changed. It only bumps a counter.
func (c *Coordinator) MetadataChanged() { c.metaVersion.Add(1) }
