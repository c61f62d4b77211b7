package coordinator

// Offsets committed inside transactions (TxnOffsetCommit, KIP-98, with KIP-447's group metadata
// fencing), as Kafka's OffsetMetadataManager keeps them:
//
//   - TxnCommitOffsets validates the request like Kafka's ClassicGroup.validateOffsetCommit with
//     isTransactional set (no REBALANCE_IN_PROGRESS, and a request without member id and
//     generation is accepted in any state), writes one transactional batch (the producer's id and
//     epoch, base sequence 0) to the group's __consumer_offsets partition and keeps the offsets
//     pending under the producer id. OffsetFetch does not see them; with require_stable it
//     answers UNSTABLE_OFFSET_COMMIT for the partitions they touch.
//   - CompleteTxn is called once the producer's COMMIT or ABORT marker is in the partition's log
//     (and load replays the markers it finds): a COMMIT makes each pending offset the committed
//     one unless the committed offset's record is later in the log (Kafka compares the record
//     offsets: a later plain OffsetCommit wins, and compaction cannot resurrect an older value);
//     an ABORT drops them. Only pending offsets written before the marker are completed.
//   - An offset tombstone (OffsetDelete, DeleteGroups, expiry) removes the partition's pending
//     offsets of every producer too, as Kafka's replay does; DeleteGroups writes a tombstone for a
//     partition that has only pending offsets; expiry keeps an offset while a transaction has a
//     pending one for its partition, and never removes a group with an open transaction.
//
// The coordinator's txnOpen index (guarded by its mutex) names, per partition and producer id,
// the groups holding pending offsets of that producer, so a marker reaches only them. Markers
// that arrive while the partition loads are kept and applied at install when the load had not
// read them yet.

import (
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// errNoTxnAppend: the store's log does not implement TxnAppender.
var errNoTxnAppend = errors.New("offsets log cannot append transactional batches")

func errorIs(err error, target *kerr.Error) bool { return errors.Is(err, target) }

func sortTPs(tps []TopicPartition) {
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
}

// txnOffsets are one producer's pending offsets in one group.
type txnOffsets struct {
	epoch   int16
	offsets map[TopicPartition]offsetValue
}

// txnMarker is an end marker CompleteTxn received while its partition was loading.
type txnMarker struct {
	producerID int64
	commit     bool
	offset     int64
}

// maxDeferredMarkers bounds the markers kept per loading partition; past it the partition is
// read again once loaded (see CompleteTxn and loadPartition). A variable for tests.
var maxDeferredMarkers = 100000

// endTxn applies producer pid's end marker, at log offset markerOffset, to a group's committed
// and pending offsets: COMMIT materializes every pending offset written before the marker whose
// record is later than the committed one's; ABORT drops them. It reports whether the producer
// has no pending offset left in the group.
func endTxn(offsets map[TopicPartition]offsetValue, txn map[int64]*txnOffsets, pid int64, commit bool, markerOffset int64) bool {
	t := txn[pid]
	if t == nil {
		return true
	}
	for tp, v := range t.offsets {
		if v.recordOffset > markerOffset {
			continue // written after this marker: the producer's next transaction
		}
		if commit {
			if cur, ok := offsets[tp]; !ok || v.recordOffset > cur.recordOffset {
				offsets[tp] = v
			}
		}
		delete(t.offsets, tp)
	}
	if len(t.offsets) == 0 {
		delete(txn, pid)
		return true
	}
	return false
}

// dropPending removes tp's pending offsets of every producer (an offset tombstone) and returns
// the producers left with none.
func dropPending(txn map[int64]*txnOffsets, tp TopicPartition) []int64 {
	var ended []int64
	for pid, t := range txn {
		if _, ok := t.offsets[tp]; !ok {
			continue
		}
		delete(t.offsets, tp)
		if len(t.offsets) == 0 {
			delete(txn, pid)
			ended = append(ended, pid)
		}
	}
	return ended
}

// TxnCommitOffsets handles a TxnOffsetCommit once the transaction coordinator has verified that
// the producer's transaction includes the group (AddOffsetsToTxn; Kafka 4 verifies it before
// writing): the records are appended at once; the returned function waits until they are
// durable and returns the per-partition errors. The offsets stay pending until CompleteTxn.
func (c *Coordinator) TxnCommitOffsets(req TxnCommitRequest) func() CommitResult {
	res := CommitResult{Errors: make([]*kerr.Error, len(req.Partitions))}
	failAll := func(err *kerr.Error) func() CommitResult {
		for i := range res.Errors {
			res.Errors[i] = err
		}
		return func() CommitResult { return res }
	}
	if err := validGroupID(req.Group, false); err != nil {
		return failAll(err)
	}
	if req.ProducerID < 0 {
		return failAll(kerr.InvalidProducerIDMapping)
	}
	if req.ProducerEpoch < 0 {
		return failAll(kerr.InvalidProducerEpoch)
	}
	if len(req.MemberID) > maxStringLen || (req.InstanceID != nil && len(*req.InstanceID) > maxStringLen) {
		return failAll(kerr.InvalidRequest)
	}
	// Kafka: a group that does not exist is created only for a request from outside group
	// management (generation -1); a member's commit gets ILLEGAL_GENERATION.
	return c.commitIn(res, req.Group, req.Generation < 0, func(g *group) durableMark { return g.txnCommit(&req, res.Errors) })
}

// CompleteTxn applies producerID's end-transaction marker, written at markerOffset in
// __consumer_offsets partition p, to every group of p holding offsets of that producer's
// transaction: commit makes them the committed offsets, abort drops them. WriteTxnMarkers on
// the partition's leader calls it after appending the marker and before answering, so the
// producer's next transaction cannot commit offsets first (a broker that becomes leader later
// replays the markers from the log instead). A partition this coordinator does not own is
// ignored: its owner replays the log when it loads.
func (c *Coordinator) CompleteTxn(p int32, producerID int64, commit bool, markerOffset int64) {
	c.mu.Lock()
	if c.closed || p < 0 || p >= c.parts {
		c.mu.Unlock()
		return
	}
	switch c.pstate[p] {
	case partLoading:
		if len(c.deferred[p]) < maxDeferredMarkers {
			c.deferred[p] = append(c.deferred[p], txnMarker{producerID: producerID, commit: commit, offset: markerOffset})
		} else {
			c.reloadAfter[p] = true
		}
		c.mu.Unlock()
		return
	case partLoaded:
	default:
		c.mu.Unlock()
		return
	}
	ids := make([]string, 0, len(c.txnOpen[p][producerID]))
	for id := range c.txnOpen[p][producerID] {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		_ = c.withGroup(id, false, func(g *group) {
			if g != nil {
				g.completeTxn(producerID, commit, markerOffset)
			}
		})
	}
}

// txnIndexAdd records that group id of partition p holds pending offsets of pid. c.mu must not
// be held.
func (c *Coordinator) txnIndexAdd(p int32, pid int64, id string) {
	c.mu.Lock()
	c.txnIndexAddLocked(p, pid, id)
	c.mu.Unlock()
}

func (c *Coordinator) txnIndexAddLocked(p int32, pid int64, id string) {
	m := c.txnOpen[p]
	if m == nil {
		m = map[int64]map[string]struct{}{}
		c.txnOpen[p] = m
	}
	gs := m[pid]
	if gs == nil {
		gs = map[string]struct{}{}
		m[pid] = gs
	}
	gs[id] = struct{}{}
}

// txnIndexDel forgets that group id of partition p holds pending offsets of pid.
func (c *Coordinator) txnIndexDel(p int32, pid int64, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gs := c.txnOpen[p][pid]
	delete(gs, id)
	if len(gs) == 0 {
		delete(c.txnOpen[p], pid)
	}
}

// PendingTxnOffsets returns how many partitions of group have pending transactional offsets, per
// producer id (tests, tools).
func (c *Coordinator) PendingTxnOffsets(groupID string) map[int64]int {
	out := map[int64]int{}
	_ = c.withGroup(groupID, false, func(g *group) {
		if g == nil {
			return
		}
		for pid, t := range g.txn {
			out[pid] = len(t.offsets)
		}
	})
	return out
}

// appendTxnRecords writes recs as one transactional batch of producer pid at epoch and returns
// the durability mark and the offset of the first record.
func (g *group) appendTxnRecords(pid int64, epoch int16, recs []kv) (durableMark, int64, error) {
	if g.olog == nil {
		l, err := g.c.cfg.Store.Log(g.partition)
		if err != nil {
			return durableMark{}, 0, err
		}
		g.olog = l
	}
	ta, ok := g.olog.(TxnAppender)
	if !ok {
		return durableMark{}, 0, errNoTxnAppend
	}
	next, err := ta.AppendTxn(buildTxnBatch(g.wall().UnixMilli(), pid, epoch, recs))
	if err != nil {
		if !tooLarge(err) {
			g.olog = nil
		}
		return durableMark{}, 0, err
	}
	g.lastAppend = next
	return durableMark{log: g.olog, upTo: next}, next - int64(len(recs)), nil
}

// txnCommit is TxnOffsetCommit for this group: validation as Kafka's (isTransactional), one
// transactional batch with every valid partition's offset, kept pending under the producer id.
func (g *group) txnCommit(req *TxnCommitRequest, errs []*kerr.Error) durableMark {
	fail := func(err *kerr.Error) durableMark {
		for i := range errs {
			errs[i] = err
		}
		return durableMark{}
	}
	if err := g.validateCommit(req.Generation, req.MemberID, req.InstanceID, true); err != nil {
		return fail(err)
	}
	t := g.txn[req.ProducerID]
	if t != nil && req.ProducerEpoch < t.epoch {
		// The partition's producer state refuses an older epoch of a producer with an open
		// transaction (Kafka's ProducerAppendInfo.checkProducerEpoch); checked here as well so
		// a store without that check cannot mix two epochs in one pending transaction.
		return fail(kerr.InvalidProducerEpoch)
	}
	now := g.wall().UnixMilli()
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
		if len(p.Topic) > maxStringLen {
			errs[i] = kerr.UnknownTopicOrPartition // no such topic can exist (the handler filters them)
			continue
		}
		v := offsetValue{Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: md, CommitTimestamp: now, ExpireTimestamp: -1}
		recs = append(recs, kv{Key: appendOffsetKey(nil, g.id, p.Topic, p.Partition), Value: appendOffsetValue(nil, v)})
		vals = append(vals, v)
		idx = append(idx, i)
	}
	if len(recs) == 0 {
		return durableMark{}
	}
	mark, base, err := g.appendTxnRecords(req.ProducerID, req.ProducerEpoch, recs)
	if err != nil {
		// Kafka fails the whole request with the write's error, normalized as its
		// CoordinatorOperationExceptionHelper does (too large: UNKNOWN_SERVER_ERROR).
		if errors.Is(err, errNoTxnAppend) {
			g.c.log.Warn("transactional offset commit refused: the offsets log cannot append transactional batches", "group", g.id)
			return fail(kerr.CoordinatorNotAvailable)
		}
		return fail(txnAppendError(err))
	}
	if t == nil {
		t = &txnOffsets{offsets: map[TopicPartition]offsetValue{}}
		if g.txn == nil {
			g.txn = map[int64]*txnOffsets{}
		}
		g.txn[req.ProducerID] = t
		g.c.txnIndexAdd(g.partition, req.ProducerID, g.id)
	}
	t.epoch = req.ProducerEpoch
	for k, i := range idx {
		v := vals[k]
		v.recordOffset = base + int64(k)
		t.offsets[req.Partitions[i].TopicPartition] = v
	}
	return mark
}

// txnAppendError maps a failed transactional append: the producer-state refusals keep their
// code (the client's transaction handles them), the rest as for any group write (appendError).
func txnAppendError(err error) *kerr.Error {
	for _, e := range []*kerr.Error{kerr.InvalidProducerEpoch, kerr.ProducerFenced, kerr.InvalidTxnState, kerr.TransactionCoordinatorFenced} {
		if errorIs(err, e) {
			return e
		}
	}
	return appendError(err)
}

// completeTxn applies producer pid's end marker at markerOffset to the group.
func (g *group) completeTxn(pid int64, commit bool, markerOffset int64) {
	if _, ok := g.txn[pid]; !ok {
		return
	}
	if endTxn(g.offsets, g.txn, pid, commit, markerOffset) {
		g.c.txnIndexDel(g.partition, pid, g.id)
	}
	if commit && g.olog != nil && markerOffset+1 > g.lastAppend {
		// Reads of the offsets made visible wait until the marker is durable too.
		g.lastAppend = markerOffset + 1
	}
}

// hasPending reports whether a transaction holds a pending offset for tp.
func (g *group) hasPending(tp TopicPartition) bool {
	for _, t := range g.txn {
		if _, ok := t.offsets[tp]; ok {
			return true
		}
	}
	return false
}

// dropPending applies an offset tombstone for tp to the pending offsets.
func (g *group) dropPending(tp TopicPartition) {
	if len(g.txn) == 0 {
		return
	}
	for _, pid := range dropPending(g.txn, tp) {
		g.c.txnIndexDel(g.partition, pid, g.id)
	}
}

// clearTxn forgets every pending offset (the group is deleted).
func (g *group) clearTxn() {
	for pid := range g.txn {
		g.c.txnIndexDel(g.partition, pid, g.id)
	}
	clear(g.txn)
}

// pendingOnly returns the partitions with pending offsets and no committed one, sorted.
func (g *group) pendingOnly() []TopicPartition {
	seen := map[TopicPartition]bool{}
	var out []TopicPartition
	for _, t := range g.txn {
		for tp := range t.offsets {
			if _, ok := g.offsets[tp]; !ok && !seen[tp] {
				seen[tp] = true
				out = append(out, tp)
			}
		}
	}
	sortTPs(out)
	return out
}
