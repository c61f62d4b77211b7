package coordinator

// Share group offsets admin (KIP-932): DescribeShareGroupOffsets reads the share-partition
// start offsets through the persister (the broker does that with SharePartitions' answer);
// AlterShareGroupOffsets initializes the state of partitions at given start offsets, and
// DeleteShareGroupOffsets deletes the state of topics, both only for an empty share group.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/sharestate"
)

// ShareOffset is one partition's new start offset in AlterShareGroupOffsets.
type ShareOffset struct {
	Topic       ShareTopic
	Partition   int32
	StartOffset int64
}

// SharePartitions returns the share partitions of group whose state was initialized (or is
// being initialized): the "every partition" answer of DescribeShareGroupOffsets.
// GROUP_ID_NOT_FOUND when group is not a share group.
func (c *Coordinator) SharePartitions(groupID string) ([]sharestate.Key, *kerr.Error) {
	if groupID == "" || len(groupID) > maxStringLen {
		return nil, kerr.InvalidGroupID
	}
	var keys []sharestate.Key
	var res *kerr.Error
	if err := c.withGroup(groupID, false, func(g *group) {
		if g == nil || g.typ != TypeShare || g.state == Dead {
			res = kerr.GroupIDNotFound
			return
		}
		keys = g.shareStateKeys()
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(keys, func(a, b sharestate.Key) int {
		if c := slices.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return keys, res
}

// persisterError maps a persister failure to a Kafka error.
func persisterError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	return kerr.UnknownServerError
}

// AlterShareOffsets is AlterShareGroupOffsets: group must be an empty share group (one is
// created when group does not exist); each partition's state is initialized at its start
// offset. It returns a group-level error, or one error per offset (in order).
func (c *Coordinator) AlterShareOffsets(groupID string, offsets []ShareOffset) (*kerr.Error, string, []*kerr.Error) {
	if groupID == "" || len(groupID) > maxStringLen {
		return kerr.InvalidGroupID, "", nil
	}
	p := c.cfg.Share.Persister
	if p == nil {
		return kerr.CoordinatorNotAvailable, "no share-partition state persister", nil
	}
	var gerr *kerr.Error
	var msg string
	var epoch int32
	var mark durableMark
	if err := c.withGroup(groupID, true, func(g *group) {
		fresh := false
		if g.typ != TypeShare {
			if !g.freshShell() {
				gerr, msg = kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a share group.", groupID)
				return
			}
			g.makeShare()
			fresh = true
		}
		if g.state == Dead {
			gerr = kerr.GroupIDNotFound
			return
		}
		if len(g.sg.members) > 0 {
			gerr, msg = kerr.NonEmptyGroup, "The share group is not empty."
			return
		}
		next := shareStateValue{Initializing: cloneInfos(g.sg.parts.Initializing), Initialized: cloneInfos(g.sg.parts.Initialized), Deleting: g.sg.parts.Deleting}
		for _, o := range offsets {
			ti := next.Initializing[o.Topic.ID]
			ti.Name = o.Topic.Name
			if !slices.Contains(ti.Partitions, o.Partition) {
				ti.Partitions = append(ti.Partitions, o.Partition)
				slices.Sort(ti.Partitions)
			}
			next.Initializing[o.Topic.ID] = ti
		}
		recs := []kv{{Key: appendShareKey(nil, recShareGroupStatePartitionMetadata, g.id), Value: appendShareStateValue(nil, next)}}
		if fresh {
			recs = append([]kv{{Key: appendShareKey(nil, recShareGroupMetadata, g.id), Value: appendShareGroupValue(nil, 0, 0)}}, recs...)
		}
		m, err := g.appendRecords(recs)
		if err != nil {
			gerr = appendError(err)
			if fresh {
				g.transition(Dead)
			}
			return
		}
		g.sg.parts = next
		epoch, mark = g.sg.epoch, m
	}); err != nil {
		return err, "", nil
	}
	if gerr != nil {
		return gerr, msg, nil
	}
	if e := c.awaitDurable(mark); e != nil {
		return e, "", nil
	}
	errs := make([]*kerr.Error, len(offsets))
	var ok []sharestate.Key
	ctx, cancel := c.persisterContext()
	defer cancel()
	keys := make([]sharestate.Key, len(offsets))
	starts := make([]int64, len(offsets))
	for i, o := range offsets {
		keys[i], starts[i] = sharestate.Key{Group: groupID, TopicID: o.Topic.ID, Partition: o.Partition}, o.StartOffset
	}
	for i, err := range sharestate.InitializeAll(ctx, p, keys, epoch, starts) {
		if err != nil {
			c.log.Warn("AlterShareGroupOffsets: initializing share-partition state failed", "group", groupID, "partition", offsets[i].Partition, "err", err)
			errs[i] = persisterError(err)
			continue
		}
		ok = append(ok, keys[i])
	}
	_ = c.withGroup(groupID, false, func(g *group) {
		if g != nil && g.sg != nil {
			running := g.sg.initRunning
			g.shareInitialized(ok)
			g.sg.initRunning = running
			mark = g.lastMark()
		}
	})
	if e := c.awaitDurable(mark); e != nil {
		return e, "", nil
	}
	return nil, "", errs
}

// DeleteShareOffsets is DeleteShareGroupOffsets: group must be an empty share group; the state
// of every partition of topics is deleted. It returns a group-level error, or one error per
// topic (in order).
func (c *Coordinator) DeleteShareOffsets(groupID string, topics []ShareTopic) (*kerr.Error, string, []*kerr.Error) {
	if groupID == "" || len(groupID) > maxStringLen {
		return kerr.InvalidGroupID, "", nil
	}
	p := c.cfg.Share.Persister
	if p == nil {
		return kerr.CoordinatorNotAvailable, "no share-partition state persister", nil
	}
	var gerr *kerr.Error
	var msg string
	perTopic := make([][]sharestate.Key, len(topics))
	if err := c.withGroup(groupID, false, func(g *group) {
		switch {
		case g == nil || g.typ != TypeShare || g.state == Dead:
			gerr, msg = kerr.GroupIDNotFound, fmt.Sprintf("Group %s not found.", groupID)
		case len(g.sg.members) > 0:
			gerr, msg = kerr.NonEmptyGroup, "The share group is not empty."
		default:
			for i, t := range topics {
				for _, set := range []map[[16]byte]shareTopicInfo{g.sg.parts.Initialized, g.sg.parts.Initializing} {
					for _, part := range set[t.ID].Partitions {
						perTopic[i] = append(perTopic[i], sharestate.Key{Group: groupID, TopicID: t.ID, Partition: part})
					}
				}
			}
		}
	}); err != nil {
		return err, "", nil
	}
	if gerr != nil {
		return gerr, msg, nil
	}
	errs := make([]*kerr.Error, len(topics))
	var done [][16]byte
	ctx, cancel := c.persisterContext()
	defer cancel()
	var all []sharestate.Key
	var topicOf []int
	for i, keys := range perTopic {
		for _, k := range keys {
			all = append(all, k)
			topicOf = append(topicOf, i)
		}
	}
	for j, err := range sharestate.DeleteAll(ctx, p, all) {
		if err != nil {
			c.log.Warn("DeleteShareGroupOffsets: deleting share-partition state failed", "group", groupID, "partition", all[j].Partition, "err", err)
			errs[topicOf[j]] = persisterError(err)
		}
	}
	for i := range perTopic {
		if errs[i] == nil {
			done = append(done, topics[i].ID)
		}
	}
	var mark durableMark
	_ = c.withGroup(groupID, false, func(g *group) {
		if g != nil && g.sg != nil {
			running := g.sg.deleteRunning
			g.shareDeleted(done)
			g.sg.deleteRunning = running
			mark = g.lastMark()
		}
	})
	if e := c.awaitDurable(mark); e != nil {
		return e, "", nil
	}
	return nil, "", errs
}
