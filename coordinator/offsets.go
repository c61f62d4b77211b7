package coordinator

// Committed offsets and the group's records on __consumer_offsets. Every function here runs on
// the group's goroutine. A record is appended (page cache) before the in-memory state changes;
// the response then waits, off the group's goroutine, until it is durable.

import (
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// appendRecords writes recs as one batch to the group's partition.
func (g *group) appendRecords(recs []kv) (durableMark, error) {
	if g.olog == nil {
		l, err := g.c.cfg.Store.Log(g.partition)
		if err != nil {
			return durableMark{}, err
		}
		g.olog = l
	}
	next, err := g.olog.Append(buildBatch(g.wall().UnixMilli(), recs))
	if err != nil {
		if !tooLarge(err) {
			g.olog = nil // look the partition up again next time (it may have been re-created)
		}
		return durableMark{}, err
	}
	g.lastAppend = next
	return durableMark{log: g.olog, upTo: next}, nil
}

// lastMark is the durability a read of the group's state must wait for.
func (g *group) lastMark() durableMark {
	return durableMark{log: g.olog, upTo: g.lastAppend}
}

func tooLarge(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// appendError maps a failed append to what Kafka answers a group operation with.
func appendError(err error) *kerr.Error {
	switch {
	case tooLarge(err):
		return kerr.UnknownServerError
	case errors.Is(err, kerr.KafkaStorageError), errors.Is(err, kerr.NotLeaderForPartition):
		return kerr.NotCoordinator
	default:
		return kerr.CoordinatorNotAvailable
	}
}

// groupRecord is the group's GroupMetadataValue for its current state.
func (g *group) groupRecord() []byte {
	v := &groupValue{
		ProtocolType: g.protocolType, Generation: g.generation,
		Protocol: nonEmptyPtr(g.protocol), Leader: nonEmptyPtr(g.leader),
		CurrentStateTimestamp: g.stateSince.UnixMilli(),
	}
	if g.state != Empty {
		for _, m := range g.membersInOrder() {
			v.Members = append(v.Members, memberValue{
				MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
				RebalanceTimeout: m.rebalanceTimeoutMs, SessionTimeout: m.sessionTimeoutMs,
				Subscription: m.metadataFor(g.protocol), Assignment: m.assignment,
			})
		}
	}
	return appendGroupValue(nil, v)
}

// storeGroup writes the group's metadata record. A record larger than the partition accepts is
// logged and skipped (the group keeps working; a restart rebuilds it by rejoining), since
// failing the rebalance would only make the clients retry forever.
func (g *group) storeGroup() (durableMark, *kerr.Error) {
	mark, err := g.appendRecords([]kv{{Key: appendGroupKey(nil, g.id), Value: g.groupRecord()}})
	if err != nil {
		if tooLarge(err) {
			g.c.log.Warn("group metadata too large to store; it will not survive a restart", "group", g.id, "err", err)
			return g.lastMark(), nil
		}
		g.c.log.Warn("storing group metadata failed", "group", g.id, "err", err)
		return durableMark{}, appendError(err)
	}
	return mark, nil
}

// validateCommit is Kafka's ClassicGroup.validateOffsetCommit; transactional is set for a
// TxnOffsetCommit, which is accepted without member id and generation in any state (TxnOffsetCommit
// v0-v2 carry neither) and is not refused while the group completes a rebalance.
func (g *group) validateCommit(generation int32, memberID string, instanceID *string, transactional bool) *kerr.Error {
	return g.validateCommitVersion(generation, memberID, instanceID, transactional, 0)
}

// validateCommitVersion is validateCommit knowing the OffsetCommit version (0: unknown); a
// consumer group validates as Kafka's ConsumerGroup.validateOffsetCommit (cgValidateCommit).
func (g *group) validateCommitVersion(generation int32, memberID string, instanceID *string, transactional bool, version int16) *kerr.Error {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable
	}
	if g.typ == TypeConsumer {
		return g.cgValidateCommit(generation, memberID, transactional, version)
	}
	if g.typ == TypeShare { // a share group keeps no committed offsets
		return kerr.GroupIDNotFound
	}
	if generation < 0 && g.state == Empty {
		return nil // admin tools and standalone consumers: only while the group is empty
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if err := g.validateMember(memberID, instanceID); err != nil {
			return err
		}
		if generation != g.generation {
			return kerr.IllegalGeneration
		}
	} else if !transactional && g.state != Empty {
		return kerr.UnknownMemberID
	}
	if !transactional && g.state == CompletingRebalance {
		return kerr.RebalanceInProgress
	}
	return nil
}

// commit appends one batch with every valid partition's offset; errs gets per-partition errors.
func (g *group) commit(req *CommitRequest, errs []*kerr.Error) durableMark {
	if err := g.validateCommitVersion(req.Generation, req.MemberID, req.InstanceID, false, req.Version); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return durableMark{}
	}
	now := g.wall().UnixMilli()
	expire := int64(-1)
	if req.RetentionMs >= 0 {
		expire = now + req.RetentionMs
	}
	recs := make([]kv, 0, len(req.Partitions))
	vals := make([]offsetValue, 0, len(req.Partitions))
	idx := make([]int, 0, len(req.Partitions))
	for i, p := range req.Partitions {
		md := ""
		if p.Metadata != nil {
			md = *p.Metadata
		}
		if len(md) > g.c.cfg.OffsetMetadataMaxBytes {
			errs[i] = kerr.OffsetMetadataTooLarge
			continue
		}
		v := offsetValue{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: md, CommitTimestamp: now, ExpireTimestamp: expire}
		recs = append(recs, kv{Key: appendOffsetKey(nil, g.id, p.Topic, p.Partition), Value: appendOffsetValue(nil, v)})
		vals = append(vals, v)
		idx = append(idx, i)
	}
	if len(recs) == 0 {
		return durableMark{}
	}
	mark, err := g.appendRecords(recs)
	if err != nil {
		e := appendError(err)
		if tooLarge(err) {
			e = kerr.InvalidCommitOffsetSize
		}
		for _, i := range idx {
			errs[i] = e
		}
		return durableMark{}
	}
	base := mark.upTo - int64(len(recs))
	for k, i := range idx {
		v := vals[k]
		v.recordOffset = base + int64(k)
		g.offsets[req.Partitions[i].TopicPartition] = v
	}
	return mark
}

// fetch returns the requested offsets (nil topics: all the committed ones, sorted). With
// requireStable a partition with pending transactional offsets answers UNSTABLE_OFFSET_COMMIT.
func (g *group) fetch(topics []FetchTopic, requireStable bool) ([]FetchedOffset, durableMark) {
	var out []FetchedOffset
	unstable := func(f *FetchedOffset) {
		if requireStable && len(g.txn) > 0 && g.hasPending(f.TopicPartition) {
			f.Offset, f.LeaderEpoch, f.Metadata, f.Err = -1, -1, "", kerr.UnstableOffsetCommit
		}
	}
	if topics == nil {
		for tp, v := range g.offsets {
			f := FetchedOffset{TopicPartition: tp, Offset: v.Offset, LeaderEpoch: v.LeaderEpoch, Metadata: v.Metadata}
			unstable(&f)
			out = append(out, f)
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Topic != out[j].Topic {
				return out[i].Topic < out[j].Topic
			}
			return out[i].Partition < out[j].Partition
		})
		return out, g.lastMark()
	}
	for _, t := range topics {
		for _, p := range t.Partitions {
			tp := TopicPartition{t.Topic, p}
			f := FetchedOffset{TopicPartition: tp, Offset: -1, LeaderEpoch: -1}
			if v, ok := g.offsets[tp]; ok {
				f.Offset, f.LeaderEpoch, f.Metadata = v.Offset, v.LeaderEpoch, v.Metadata
			}
			unstable(&f)
			out = append(out, f)
		}
	}
	return out, g.lastMark()
}

// tombstones returns tombstones for tps and the group metadata when withGroup is set.
func (g *group) tombstones(tps []TopicPartition, withGroup bool) []kv {
	recs := make([]kv, 0, len(tps)+1)
	for _, tp := range tps {
		recs = append(recs, kv{Key: appendOffsetKey(nil, g.id, tp.Topic, tp.Partition)})
	}
	if withGroup {
		recs = append(recs, kv{Key: appendGroupKey(nil, g.id)})
	}
	return recs
}

func (g *group) sortedOffsetKeys() []TopicPartition {
	tps := make([]TopicPartition, 0, len(g.offsets))
	for tp := range g.offsets {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	return tps
}

// delete is DeleteGroups for this group: only an empty group goes; tombstones for its offsets
// and its metadata, then Dead.
func (g *group) delete() (*kerr.Error, durableMark) {
	switch g.state {
	case Dead:
		return kerr.GroupIDNotFound, durableMark{}
	case Stable, PreparingRebalance, CompletingRebalance:
		return kerr.NonEmptyGroup, durableMark{}
	}
	// Kafka's deleteAllOffsets: a tombstone per committed offset, and one per partition that
	// only a pending transaction holds (its replay drops the pending offsets).
	tps := append(g.sortedOffsetKeys(), g.pendingOnly()...)
	recs := g.tombstones(tps, g.cg == nil)
	if g.cg != nil {
		recs = append(recs, g.cgTombstones()...)
	}
	mark, err := g.appendRecords(recs)
	if err != nil {
		return appendError(err), durableMark{}
	}
	clear(g.offsets)
	g.clearTxn()
	clear(g.pending)
	g.transition(Dead)
	g.c.log.Info("group deleted", "group", g.id)
	return nil, mark
}

// deleteOffsets is OffsetDelete: a consumer group may lose the offsets of topics it does not
// subscribe to; an empty group any.
func (g *group) deleteOffsets(parts []TopicPartition) (*kerr.Error, []*kerr.Error, durableMark) {
	if g.typ == TypeShare {
		return kerr.GroupIDNotFound, nil, durableMark{}
	}
	switch g.state {
	case Dead:
		return kerr.GroupIDNotFound, nil, durableMark{}
	case Stable, PreparingRebalance, CompletingRebalance:
		if g.protocolType != "consumer" {
			return kerr.NonEmptyGroup, nil, durableMark{}
		}
	}
	errs := make([]*kerr.Error, len(parts))
	var doomed []TopicPartition
	for i, tp := range parts {
		if g.state != Empty && (g.subscribed == nil || g.subscribed[tp.Topic]) {
			errs[i] = kerr.GroupSubscribedToTopic
			continue
		}
		if _, ok := g.offsets[tp]; ok || g.hasPending(tp) {
			doomed = append(doomed, tp) // Kafka: a tombstone for a committed or a pending offset
		}
	}
	if len(doomed) == 0 {
		return nil, errs, durableMark{}
	}
	mark, err := g.appendRecords(g.tombstones(doomed, false))
	if err != nil {
		return appendError(err), nil, durableMark{}
	}
	for _, tp := range doomed {
		delete(g.offsets, tp)
		g.dropPending(tp)
	}
	return nil, errs, mark
}

// expire removes the offsets past retention (KIP-211): all offsets of an empty group once it
// has been empty for offsets.retention.minutes, offsets of a stable consumer group for topics it
// no longer subscribes to, and standalone commits (a group with no protocol type) by commit
// time; an expire timestamp from OffsetCommit v2-v4 wins. An empty group left with no offsets
// (and no pending member) is deleted.
func (g *group) expire(now time.Time) {
	if g.state == Dead || g.typ == TypeShare { // share groups do not expire (Kafka's ShareGroup)
		return
	}
	retention := g.c.cfg.OffsetsRetention.Milliseconds()
	nowMs := now.UnixMilli()
	var base func(v offsetValue) int64
	var eligible func(tp TopicPartition) bool
	switch {
	case g.protocolType == "":
		base = func(v offsetValue) int64 { return v.CommitTimestamp }
	case g.state == Empty:
		since := g.stateSince.UnixMilli()
		base = func(offsetValue) int64 { return since }
	case g.state == Stable && g.protocolType == "consumer" && g.subscribed != nil:
		base = func(v offsetValue) int64 { return v.CommitTimestamp }
		eligible = func(tp TopicPartition) bool { return !g.subscribed[tp.Topic] }
	}
	var doomed []TopicPartition
	if base != nil {
		for _, tp := range g.sortedOffsetKeys() {
			v := g.offsets[tp]
			if eligible != nil && !eligible(tp) {
				continue
			}
			if g.hasPending(tp) {
				continue // Kafka keeps it while a transaction has a pending offset for tp
			}
			if (v.ExpireTimestamp >= 0 && nowMs >= v.ExpireTimestamp) ||
				(v.ExpireTimestamp < 0 && nowMs-base(v) >= retention) {
				doomed = append(doomed, tp)
			}
		}
	}
	deleteGroup := g.state == Empty && len(g.offsets) == len(doomed) && len(g.pending) == 0 && len(g.txn) == 0
	if len(doomed) == 0 && !deleteGroup {
		return
	}
	recs := g.tombstones(doomed, deleteGroup && g.cg == nil)
	if deleteGroup && g.cg != nil {
		recs = append(recs, g.cgTombstones()...)
	}
	if _, err := g.appendRecords(recs); err != nil {
		g.c.log.Warn("offset expiry failed", "group", g.id, "err", err)
		return
	}
	for _, tp := range doomed {
		delete(g.offsets, tp)
	}
	if len(doomed) > 0 {
		g.c.log.Info("expired offsets", "group", g.id, "partitions", len(doomed))
	}
	if deleteGroup {
		g.transition(Dead)
		g.c.log.Info("removed empty group", "group", g.id)
	}
}
