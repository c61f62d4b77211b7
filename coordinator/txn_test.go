package coordinator

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
)

// controlBatch builds an end-transaction marker as Kafka writes it: a control + transactional
// batch of the producer with one control record, key version 0 + type (0 ABORT, 1 COMMIT),
// value version 0 + coordinator epoch (the coordinator tests' own builder).
func controlBatch(pid int64, epoch int16, commit bool, coordinatorEpoch int32) []byte {
	return record.BuildEndTxnMarker(nil, 0, 1, pid, epoch, record.EndTxnMarker{Commit: commit, CoordinatorEpoch: coordinatorEpoch})
}

// marker appends producer pid's end marker to group's partition and tells the coordinator, as
// WriteTxnMarkers does after writing a marker.
func (h *harness) marker(group string, pid int64, epoch int16, commit bool) int64 {
	h.t.Helper()
	p := h.c.PartitionFor(group)
	l, err := h.store.Log(p)
	if err != nil {
		h.t.Fatal(err)
	}
	next, err := l.Append(controlBatch(pid, epoch, commit, 0))
	if err != nil {
		h.t.Fatal(err)
	}
	h.c.CompleteTxn(p, pid, commit, next-1)
	return next - 1
}

func txnCommit(h *harness, req TxnCommitRequest) []*kerr.Error {
	h.t.Helper()
	return h.c.TxnCommitOffsets(req)().Errors
}

// txnOne commits one offset of tp in producer pid's transaction, from outside group management.
func txnOne(h *harness, group string, pid int64, tp TopicPartition, offset int64) *kerr.Error {
	h.t.Helper()
	return txnCommit(h, TxnCommitRequest{Group: group, ProducerID: pid, ProducerEpoch: 0, Generation: -1,
		Partitions: []CommitPartition{{TopicPartition: tp, Offset: offset, LeaderEpoch: 3}}})[0]
}

func fetchStable(h *harness, group string, tp TopicPartition) FetchedOffset {
	h.t.Helper()
	r := h.c.FetchStable(group, []FetchTopic{{tp.Topic, []int32{tp.Partition}}}, true)()
	if r.Err != nil {
		h.t.Fatal(r.Err)
	}
	return r.Offsets[0]
}

func wantOffset(t *testing.T, what string, f FetchedOffset, offset int64, err *kerr.Error) {
	t.Helper()
	if f.Offset != offset || f.Err != err {
		t.Fatalf("%s: offset %d err %v, want %d %v", what, f.Offset, f.Err, offset, err)
	}
}

// TestTxnOffsetsCommitAbort: pending offsets are invisible (UNSTABLE_OFFSET_COMMIT with
// require_stable), a COMMIT marker makes them committed, an ABORT drops them, and the batch on
// __consumer_offsets is transactional with the producer's id and epoch.
func TestTxnOffsetsCommitAbort(t *testing.T) {
	h := newHarness(t, Config{})
	tp, other := TopicPartition{"t", 0}, TopicPartition{"t", 1}
	wantErr(t, "txn commit creates a simple group", txnOne(h, "g", 7, tp, 10), nil)
	if d := h.c.Describe("g"); d.State != "Empty" {
		t.Fatalf("group after a standalone txn commit: %s", d.State)
	}
	wantOffset(t, "pending, not stable", fetchOne(h, "g", tp), -1, nil)
	wantOffset(t, "pending, require_stable", fetchStable(h, "g", tp), -1, kerr.UnstableOffsetCommit)
	wantOffset(t, "other partition stable", fetchStable(h, "g", other), -1, nil)
	if all := h.c.FetchStable("g", nil, true)(); len(all.Offsets) != 0 {
		t.Fatalf("all offsets list a pending one: %+v", all.Offsets)
	}
	if p := h.c.PendingTxnOffsets("g"); p[7] != 1 {
		t.Fatalf("pending %v", p)
	}

	// The batch: transactional, producer 7 epoch 0, base sequence 0, not control.
	l, _ := h.store.Existing(h.c.PartitionFor("g"))
	var hdr record.Header
	_ = l.ReadBatches(func(b []byte) error { hdr, _ = record.ParseHeader(b); return nil })
	if !hdr.IsTransactional() || hdr.IsControl() || hdr.ProducerID != 7 || hdr.ProducerEpoch != 0 || hdr.BaseSequence != 0 {
		t.Fatalf("txn offset batch header %+v", hdr)
	}

	h.marker("g", 7, 0, true)
	wantOffset(t, "committed", fetchStable(h, "g", tp), 10, nil)
	if f := fetchOne(h, "g", tp); f.LeaderEpoch != 3 {
		t.Fatalf("leader epoch %+v", f)
	}
	if p := h.c.PendingTxnOffsets("g"); len(p) != 0 {
		t.Fatalf("pending after commit %v", p)
	}

	// Aborted: the committed offset stays.
	wantErr(t, "txn commit", txnOne(h, "g", 7, tp, 20), nil)
	wantOffset(t, "pending over committed", fetchOne(h, "g", tp), 10, nil)
	wantOffset(t, "pending over committed, stable", fetchStable(h, "g", tp), -1, kerr.UnstableOffsetCommit)
	all := h.c.FetchStable("g", nil, true)()
	if len(all.Offsets) != 1 || all.Offsets[0].Err != kerr.UnstableOffsetCommit {
		t.Fatalf("all offsets, require_stable: %+v", all.Offsets)
	}
	h.marker("g", 7, 0, false)
	wantOffset(t, "aborted", fetchStable(h, "g", tp), 10, nil)

	// A marker of another producer, or a repeated one, changes nothing.
	wantErr(t, "txn commit", txnOne(h, "g", 8, tp, 30), nil)
	h.marker("g", 9, 0, true)
	h.marker("g", 7, 0, true)
	wantOffset(t, "other producer's marker", fetchStable(h, "g", tp), -1, kerr.UnstableOffsetCommit)
	h.marker("g", 8, 0, true)
	wantOffset(t, "second producer committed", fetchStable(h, "g", tp), 30, nil)
}

// TestTxnOffsetsRecordOrder: at the COMMIT marker the value whose record is later in the log
// wins, as Kafka compares record offsets.
func TestTxnOffsetsRecordOrder(t *testing.T) {
	h := newHarness(t, Config{})
	tp := TopicPartition{"t", 0}
	wantErr(t, "txn", txnOne(h, "g", 1, tp, 10), nil)
	wantErr(t, "plain commit after", commit(h, "g", -1, "", tp, 20, nil), nil)
	h.marker("g", 1, 0, true)
	wantOffset(t, "later plain commit wins", fetchStable(h, "g", tp), 20, nil)

	wantErr(t, "plain commit before", commit(h, "g", -1, "", tp, 30, nil), nil)
	wantErr(t, "txn", txnOne(h, "g", 1, tp, 25), nil)
	h.marker("g", 1, 0, true)
	wantOffset(t, "later txn commit wins", fetchStable(h, "g", tp), 25, nil)

	// A restart replays the same decisions.
	h.c.Close()
	h2 := newHarness(t, Config{Store: h.store})
	wantOffset(t, "after restart", fetchStable(h2, "g", tp), 25, nil)
}

// TestTxnOffsetsLoad: a restart rebuilds committed and pending transactional offsets from the
// log (markers included); a transaction still open at the end of the log stays pending and
// completes with a marker written after the restart.
func TestTxnOffsetsLoad(t *testing.T) {
	h := newHarness(t, Config{})
	a, b, c := TopicPartition{"t", 0}, TopicPartition{"t", 1}, TopicPartition{"u", 0}
	wantErr(t, "plain", commit(h, "g", -1, "", a, 1, nil), nil)
	wantErr(t, "txn 1", txnCommit(h, TxnCommitRequest{Group: "g", ProducerID: 1, Generation: -1,
		Partitions: []CommitPartition{{TopicPartition: a, Offset: 11}, {TopicPartition: b, Offset: 12}}})[1], nil)
	wantErr(t, "txn 2", txnOne(h, "g", 2, c, 21), nil)
	wantErr(t, "txn 3", txnOne(h, "g", 3, b, 31), nil)
	wantErr(t, "txn 3 other group", txnOne(h, "h", 3, a, 32), nil)
	h.marker("g", 1, 0, true)
	h.marker("g", 2, 0, false)
	if h.c.PartitionFor("h") == h.c.PartitionFor("g") {
		t.Fatal("test wants g and h on different partitions")
	}
	h.c.Close()

	h2 := newHarness(t, Config{Store: h.store})
	wantOffset(t, "committed txn a", fetchOne(h2, "g", a), 11, nil)
	wantOffset(t, "pending over committed b", fetchOne(h2, "g", b), 12, nil)
	wantOffset(t, "pending b, stable", fetchStable(h2, "g", b), -1, kerr.UnstableOffsetCommit)
	wantOffset(t, "aborted c", fetchStable(h2, "g", c), -1, nil)
	wantOffset(t, "pending in h", fetchStable(h2, "h", a), -1, kerr.UnstableOffsetCommit)
	if p := h2.c.PendingTxnOffsets("g"); len(p) != 1 || p[3] != 1 {
		t.Fatalf("pending after load %v", p)
	}
	// The still-open transaction 3 completes after the restart, in both groups.
	h2.marker("g", 3, 0, true)
	wantOffset(t, "txn 3 committed after restart", fetchStable(h2, "g", b), 31, nil)
	wantOffset(t, "h still pending: its partition has no marker yet", fetchStable(h2, "h", a), -1, kerr.UnstableOffsetCommit)
	h2.marker("h", 3, 0, false)
	wantOffset(t, "h aborted", fetchStable(h2, "h", a), -1, nil)
	if d := h2.c.Describe("h"); d.State != "Empty" {
		t.Fatalf("h: %s", d.State)
	}
	h2.c.Close()

	h3 := newHarness(t, Config{Store: h.store})
	wantOffset(t, "b after a second restart", fetchStable(h3, "g", b), 31, nil)
	wantOffset(t, "h after a second restart", fetchStable(h3, "h", a), -1, nil)
	if p := h3.c.PendingTxnOffsets("g"); len(p) != 0 {
		t.Fatalf("pending after second load %v", p)
	}
}

// TestTxnOffsetsMarkerDuringLoad: a marker written while the partition loads, after the load
// read the log, is applied when the load completes; past the bound of kept markers the
// partition is read again.
func TestTxnOffsetsMarkerDuringLoad(t *testing.T) {
	t.Run("kept", func(t *testing.T) { testMarkerDuringLoad(t) })
	t.Run("reread", func(t *testing.T) {
		defer func(n int) { maxDeferredMarkers = n }(maxDeferredMarkers)
		maxDeferredMarkers = 0
		testMarkerDuringLoad(t)
	})
}

func testMarkerDuringLoad(t *testing.T) {
	h := newHarness(t, Config{})
	tp := TopicPartition{"t", 0}
	wantErr(t, "txn", txnOne(h, "g", 5, tp, 50), nil)
	h.c.Close()
	p := PartitionFor("g", 8)
	var c2 *Coordinator
	h.store.afterRead = func() {
		h.store.afterRead = nil
		l, _ := h.store.Log(p)
		next, err := l.Append(controlBatch(5, 0, true, 0))
		if err != nil {
			t.Error(err)
		}
		c2.CompleteTxn(p, 5, true, next-1)
	}
	c2, err := New(Config{Store: h.store, Clock: h.clock, RetentionCheckInterval: -1, ManualOwnership: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.Start()
	c2.Elect(p)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := c2.FetchStable("g", []FetchTopic{{"t", []int32{0}}}, true)()
		if r.Err == nil {
			wantOffset(t, "marker during load", r.Offsets[0], 50, nil)
			break
		}
		if r.Err != kerr.CoordinatorLoadInProgress || time.Now().After(deadline) {
			t.Fatal(r.Err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTxnOffsetsValidation: KIP-447 group metadata fencing and the other refusals, as Kafka's
// TxnOffsetCommit answers them.
func TestTxnOffsetsValidation(t *testing.T) {
	h := newHarness(t, Config{})
	tp := TopicPartition{"t", 0}
	one := func(req TxnCommitRequest) *kerr.Error {
		req.Partitions = []CommitPartition{{TopicPartition: tp, Offset: 1}}
		if req.ProducerID == 0 {
			req.ProducerID = 1
		}
		return txnCommit(h, req)[0]
	}
	wantErr(t, "empty group id", one(TxnCommitRequest{Generation: -1}), kerr.InvalidGroupID)
	wantErr(t, "no producer id", one(TxnCommitRequest{Group: "x", ProducerID: -1, Generation: -1}), kerr.InvalidProducerIDMapping)
	wantErr(t, "negative epoch", one(TxnCommitRequest{Group: "x", ProducerEpoch: -1, Generation: -1}), kerr.InvalidProducerEpoch)
	wantErr(t, "member of an unknown group", one(TxnCommitRequest{Group: "nog", Generation: 2, MemberID: "m"}), kerr.IllegalGeneration)
	if d := h.c.Describe("nog"); d.State != "Dead" {
		t.Fatalf("group created by a refused commit: %s", d.State)
	}

	ids, gen := stableGroup(t, h, "g", 2)
	wantErr(t, "member", one(TxnCommitRequest{Group: "g", Generation: gen, MemberID: ids[1]}), nil)
	wantErr(t, "stale generation", one(TxnCommitRequest{Group: "g", Generation: gen - 1, MemberID: ids[1]}), kerr.IllegalGeneration)
	wantErr(t, "unknown member", one(TxnCommitRequest{Group: "g", Generation: gen, MemberID: "ghost"}), kerr.UnknownMemberID)
	// v0-v2 carry no group metadata: accepted in any state (unlike OffsetCommit).
	wantErr(t, "no member, live group", one(TxnCommitRequest{Group: "g", Generation: -1}), nil)
	long := string(make([]byte, 4097))
	errs := txnCommit(h, TxnCommitRequest{Group: "g", ProducerID: 1, Generation: gen, MemberID: ids[0],
		Partitions: []CommitPartition{{TopicPartition: tp, Offset: 2, Metadata: &long}, {TopicPartition: TopicPartition{"t", 1}, Offset: 3}}})
	wantErr(t, "metadata too large", errs[0], kerr.OffsetMetadataTooLarge)
	wantErr(t, "other partition of the request", errs[1], nil)
	wantErr(t, "older epoch than the open transaction", one(TxnCommitRequest{Group: "g", ProducerID: 2, ProducerEpoch: 3, Generation: -1}), nil)
	wantErr(t, "older epoch", one(TxnCommitRequest{Group: "g", ProducerID: 2, ProducerEpoch: 2, Generation: -1}), kerr.InvalidProducerEpoch)

	// A rebalance in progress does not refuse the current generation's txn commit (Kafka
	// does not enforce the group state for TxnOffsetCommit).
	startJoin(h, joinReq("g", ids[0]))
	wantErr(t, "while preparing", one(TxnCommitRequest{Group: "g", Generation: gen, MemberID: ids[1]}), nil)

	// Static members: a fenced instance id.
	inst := "i-1"
	jr := joinReq("s", "")
	jr.InstanceID = &inst
	res := h.join(jr)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if s := h.sync("s", res.MemberID, res.Generation, Assignment{MemberID: res.MemberID}); s.Err != nil {
		t.Fatal(s.Err)
	}
	wantErr(t, "static member", one(TxnCommitRequest{Group: "s", Generation: res.Generation, MemberID: res.MemberID, InstanceID: &inst}), nil)
	wantErr(t, "fenced instance", one(TxnCommitRequest{Group: "s", Generation: res.Generation, MemberID: "old", InstanceID: &inst}), kerr.FencedInstanceID)
	unknown := "i-2"
	wantErr(t, "unknown instance", one(TxnCommitRequest{Group: "s", Generation: res.Generation, MemberID: res.MemberID, InstanceID: &unknown}), kerr.UnknownMemberID)
}

// TestTxnOffsetsStoreWithoutTxnAppend: a store that cannot append transactional batches
// refuses the commit rather than writing a non-transactional one.
func TestTxnOffsetsStoreWithoutTxnAppend(t *testing.T) {
	c, err := New(Config{Store: &plainStore{newMemStore(8)}, Clock: newFakeClock(), RetentionCheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	defer c.Close()
	if err := c.WaitLoaded(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := c.TxnCommitOffsets(TxnCommitRequest{Group: "g", ProducerID: 1, Generation: -1,
		Partitions: []CommitPartition{{TopicPartition: TopicPartition{"t", 0}, Offset: 1}}})()
	wantErr(t, "no txn append", r.Errors[0], kerr.CoordinatorNotAvailable)
}

// plainStore hides memLog's AppendTxn.
type plainStore struct{ *memStore }

type plainLog struct{ l OffsetsLog }

func (p plainLog) Append(b []byte) (int64, error)          { return p.l.Append(b) }
func (p plainLog) AwaitDurable(upTo int64) error           { return p.l.AwaitDurable(upTo) }
func (p plainLog) ReadBatches(fn func([]byte) error) error { return p.l.ReadBatches(fn) }

func (s *plainStore) Log(p int32) (OffsetsLog, error) {
	l, err := s.memStore.Log(p)
	return plainLog{l}, err
}

// TestTxnOffsetsDeleteAndExpire: OffsetDelete, DeleteGroups and expiry with pending
// transactional offsets, as Kafka's OffsetMetadataManager.
func TestTxnOffsetsDeleteAndExpire(t *testing.T) {
	h := newHarness(t, Config{OffsetsRetention: time.Hour})
	a, b := TopicPartition{"t", 0}, TopicPartition{"t", 1}

	// OffsetDelete of a partition that only a transaction holds writes a tombstone, which
	// drops the pending offset: the COMMIT then materializes nothing.
	wantErr(t, "txn", txnOne(h, "d", 1, a, 5), nil)
	gerr, perr, wait := h.c.DeleteOffsets("d", []TopicPartition{a})
	if gerr != nil || perr[0] != nil || wait() != nil {
		t.Fatal(gerr, perr)
	}
	wantOffset(t, "pending dropped by OffsetDelete", fetchStable(h, "d", a), -1, nil)
	h.marker("d", 1, 0, true)
	wantOffset(t, "commit after OffsetDelete", fetchStable(h, "d", a), -1, nil)

	// DeleteGroups of an empty group with pending offsets: tombstones for the committed and
	// the pending-only partitions; a restart does not bring either back.
	wantErr(t, "plain", commit(h, "e", -1, "", a, 1, nil), nil)
	wantErr(t, "txn", txnOne(h, "e", 2, b, 7), nil)
	if err := h.c.DeleteGroup("e")(); err != nil {
		t.Fatal(err)
	}
	h.marker("e", 2, 0, true)
	wantOffset(t, "deleted group", fetchStable(h, "e", b), -1, nil)

	// Expiry keeps an offset with a pending transactional one, and the group with an open
	// transaction; once the transaction ends both go.
	wantErr(t, "plain", commit(h, "x", -1, "", a, 1, nil), nil)
	wantErr(t, "txn", txnOne(h, "x", 3, a, 9), nil)
	wantErr(t, "txn only", txnOne(h, "y", 4, a, 9), nil)
	h.clock.Advance(2 * time.Hour)
	h.c.ExpireOffsets()
	if f := fetchOne(h, "x", a); f.Offset != 1 {
		t.Fatalf("offset with a pending txn expired: %+v", f)
	}
	for _, g := range []string{"x", "y"} {
		if d := h.c.Describe(g); d.State != "Empty" {
			t.Fatalf("%s with an open transaction removed: %s", g, d.State)
		}
	}
	h.marker("x", 3, 0, false)
	h.marker("y", 4, 0, false)
	h.c.ExpireOffsets()
	if f := fetchOne(h, "x", a); f.Offset != -1 {
		t.Fatalf("not expired after the abort: %+v", f)
	}
	for _, g := range []string{"x", "y"} {
		if d := h.c.Describe(g); d.State != "Dead" {
			t.Fatalf("%s kept: %s", g, d.State)
		}
	}

	h.c.Close()
	h2 := newHarness(t, Config{Store: h.store, OffsetsRetention: time.Hour})
	for _, g := range []string{"d", "e"} {
		for _, tp := range []TopicPartition{a, b} {
			wantOffset(t, g+" after restart", fetchStable(h2, g, tp), -1, nil)
		}
	}
}

// TestTxnOffsetsAppendFailure: a failed write fails every partition of the request with the
// write's error as Kafka normalizes it, and leaves nothing pending.
func TestTxnOffsetsAppendFailure(t *testing.T) {
	h := newHarness(t, Config{})
	tp := TopicPartition{"t", 0}
	wantErr(t, "first", txnOne(h, "g", 1, tp, 1), nil)
	h.marker("g", 1, 0, true)
	l, _ := h.store.Log(PartitionFor("g", 8))
	long := string(make([]byte, 4097))
	req := TxnCommitRequest{Group: "g", ProducerID: 2, Generation: -1,
		Partitions: []CommitPartition{{TopicPartition: tp, Offset: 2}, {TopicPartition: TopicPartition{"t", 1}, Offset: 2, Metadata: &long}}}
	for _, c := range []struct {
		fail error
		want *kerr.Error
	}{
		{kerr.KafkaStorageError, kerr.NotCoordinator},
		{kerr.InvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{kerr.ProducerFenced, kerr.ProducerFenced},
		{kerr.MessageTooLarge, kerr.UnknownServerError},
	} {
		l.(*memLog).fail = c.fail
		errs := txnCommit(h, req)
		wantErr(t, c.fail.Error(), errs[0], c.want)
		wantErr(t, c.fail.Error()+", second partition", errs[1], c.want)
	}
	l.(*memLog).fail = nil
	if p := h.c.PendingTxnOffsets("g"); len(p) != 0 {
		t.Fatalf("pending after failed writes: %v", p)
	}
	wantOffset(t, "unchanged", fetchStable(h, "g", tp), 1, nil)
}
