package txncoord

import (
	"fmt"
	"math"
	"sort"
	"sync"
)

// State is a transaction's state, with Kafka's ids (the state byte of TransactionLogValue) and
// names (DescribeTransactions, ListTransactions).
type State int8

const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) valid() bool { return s >= Empty && s <= PrepareEpochFence }

// String is Kafka's name of the state.
func (s State) String() string {
	if s.valid() {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// StateFromName parses a Kafka state name (ListTransactions state filters).
func StateFromName(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// expirationAllowed: a transactional id may expire only while no transaction is open.
func (s State) expirationAllowed() bool {
	return s == Empty || s == CompleteCommit || s == CompleteAbort
}

// validPrevious is Kafka's TransactionState.validPreviousStates: to -> the states it may be
// entered from.
var validPrevious = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteAbort, CompleteCommit},
	PrepareEpochFence: {Ongoing},
}

// ValidTransition reports whether Kafka allows a transaction to go from one state to another.
func ValidTransition(from, to State) bool {
	for _, s := range validPrevious[to] {
		if s == from {
			return true
		}
	}
	return false
}

const (
	noProducerID    int64 = -1
	noProducerEpoch int16 = -1
)

// epochExhausted: Kafka never hands out epoch 32767, so a coordinator can always fence (bump
// once more); at 32766 the next bump rotates to a new producer id.
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// txnMeta is Kafka's TransactionMetadata: one transactional id's state. Its fields are guarded
// by its mutex (mu); a transition is prepared under mu (pending set: no other transition may be
// prepared), the record is appended with mu released, and the transition is completed (applied)
// under mu only once the append is durable, or abandoned (pending cleared) if it failed.
type txnMeta struct {
	id string

	mu                sync.Mutex
	producerID        int64
	prevProducerID    int64
	nextProducerID    int64
	producerEpoch     int16
	lastProducerEpoch int16
	nextProducerEpoch int16 // KIP-939, kept only to write it back
	timeoutMs         int32
	state             State
	partitions        map[TopicPartition]struct{}
	startMs           int64
	lastUpdateMs      int64
	clientTxnVersion  int16
	// pending is the state a prepared transition leads to (hasPending false: none).
	pending    State
	hasPending bool
	// failedEpochFence: a fence's bumped epoch may not have been written; do not bump again.
	failedEpochFence bool
	// dead: the id expired and was removed; a holder of this pointer must look it up again.
	dead bool
}

// transit is Kafka's TxnTransitMetadata: the full state a prepared transition leads to.
type transit struct {
	producerID        int64
	prevProducerID    int64
	nextProducerID    int64
	producerEpoch     int16
	lastProducerEpoch int16
	nextProducerEpoch int16
	timeoutMs         int32
	state             State
	partitions        map[TopicPartition]struct{}
	startMs           int64
	lastUpdateMs      int64
	clientTxnVersion  int16
}

func newTxnMeta(id string, pid int64, timeoutMs int32, nowMs int64) *txnMeta {
	return &txnMeta{
		id: id, producerID: pid, prevProducerID: noProducerID, nextProducerID: noProducerID,
		producerEpoch: noProducerEpoch, lastProducerEpoch: noProducerEpoch, nextProducerEpoch: noProducerEpoch,
		timeoutMs: timeoutMs, state: Empty, partitions: map[TopicPartition]struct{}{},
		startMs: -1, lastUpdateMs: nowMs,
	}
}

// metaFromValue is the metadata a loaded record describes (lastProducerEpoch is not stored:
// -1, as Kafka loads it).
func metaFromValue(id string, v *logValue) *txnMeta {
	m := &txnMeta{
		id: id, producerID: v.ProducerID, prevProducerID: v.PreviousProducerID, nextProducerID: v.NextProducerID,
		producerEpoch: v.ProducerEpoch, lastProducerEpoch: noProducerEpoch, nextProducerEpoch: v.NextProducerEpoch,
		timeoutMs: v.TimeoutMs, state: v.State, partitions: map[TopicPartition]struct{}{},
		startMs: v.StartMs, lastUpdateMs: v.LastUpdateMs, clientTxnVersion: v.ClientTxnVersion,
	}
	if v.State != Empty {
		for _, tp := range v.Partitions {
			m.partitions[tp] = struct{}{}
		}
	}
	return m
}

// value is the record a transit writes (Kafka's TransactionLog.valueToBytes: partitions are a
// null array in Empty).
func (t *transit) value() *logValue {
	v := &logValue{
		ProducerID: t.producerID, PreviousProducerID: t.prevProducerID, NextProducerID: t.nextProducerID,
		ProducerEpoch: t.producerEpoch, NextProducerEpoch: t.nextProducerEpoch, TimeoutMs: t.timeoutMs,
		State: t.state, LastUpdateMs: t.lastUpdateMs, StartMs: t.startMs, ClientTxnVersion: t.clientTxnVersion,
	}
	if t.state != Empty {
		v.Partitions = sortedPartitions(t.partitions)
	}
	return v
}

func sortedPartitions(set map[TopicPartition]struct{}) []TopicPartition {
	out := make([]TopicPartition, 0, len(set))
	for tp := range set {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func copySet(s map[TopicPartition]struct{}) map[TopicPartition]struct{} {
	c := make(map[TopicPartition]struct{}, len(s))
	for k := range s {
		c[k] = struct{}{}
	}
	return c
}

// supportsEpochBump: transaction version 2 (KIP-890 part 2) bumps the epoch at every end.
func supportsEpochBump(tv int16) bool { return tv >= 2 }

// base is a transit that changes nothing but the target state.
func (m *txnMeta) base(to State) transit {
	return transit{
		producerID: m.producerID, prevProducerID: m.prevProducerID, nextProducerID: m.nextProducerID,
		producerEpoch: m.producerEpoch, lastProducerEpoch: m.lastProducerEpoch, nextProducerEpoch: m.nextProducerEpoch,
		timeoutMs: m.timeoutMs, state: to, partitions: copySet(m.partitions),
		startMs: m.startMs, lastUpdateMs: m.lastUpdateMs, clientTxnVersion: m.clientTxnVersion,
	}
}

// errIllegalTransition is a transition Kafka's state machine does not allow: a bug, never a
// client's doing (the operations check states first). It is answered as the request's generic
// failure rather than crashing the broker.
type errIllegalTransition struct {
	id       string
	from, to State
	why      string
}

func (e *errIllegalTransition) Error() string {
	return fmt.Sprintf("transactional id %q: illegal transition %s -> %s: %s", e.id, e.from, e.to, e.why)
}

// prepareTransition is Kafka's prepareTransitionTo: it checks the transition and marks it
// pending. m.mu must be held.
func (m *txnMeta) prepareTransition(t transit) (transit, error) {
	if m.hasPending {
		return t, &errIllegalTransition{m.id, m.state, t.state, "a transition to " + m.pending.String() + " is pending"}
	}
	if t.producerID < 0 {
		return t, &errIllegalTransition{m.id, m.state, t.state, fmt.Sprintf("producer id %d", t.producerID)}
	}
	if t.state != Dead && t.producerEpoch < 0 {
		return t, &errIllegalTransition{m.id, m.state, t.state, fmt.Sprintf("producer epoch %d", t.producerEpoch)}
	}
	if !ValidTransition(m.state, t.state) {
		return t, &errIllegalTransition{m.id, m.state, t.state, "not a valid previous state"}
	}
	t.prevProducerID = m.producerID
	m.pending, m.hasPending = t.state, true
	return t, nil
}

// prepareFenceProducerEpoch bumps the epoch (once, even when retried after a failed write) and
// leads to PrepareEpochFence, which is never written: the abort that follows is.
func (m *txnMeta) prepareFenceProducerEpoch() (transit, error) {
	t := m.base(PrepareEpochFence)
	if !m.failedEpochFence && m.producerEpoch != math.MaxInt16 {
		t.producerEpoch = m.producerEpoch + 1
	}
	return m.prepareTransition(t)
}

// errFenced is PRODUCER_FENCED from prepareIncrementProducerEpoch.
var errFenced = fmt.Errorf("producer fenced")

// prepareIncrementProducerEpoch is InitProducerId's epoch bump (KIP-360: an expected epoch
// equal to the current one bumps; equal to the previous one is a retry of a bump that
// succeeded; anything else is fenced).
func (m *txnMeta) prepareIncrementProducerEpoch(timeoutMs int32, expected *int16, nowMs int64) (transit, error) {
	if epochExhausted(m.producerEpoch) {
		return transit{}, &errIllegalTransition{m.id, m.state, Empty, "producer epoch exhausted"}
	}
	t := m.base(Empty)
	bumped := m.producerEpoch + 1
	switch {
	case expected == nil:
		t.producerEpoch, t.lastProducerEpoch = bumped, noProducerEpoch
	case m.producerEpoch == noProducerEpoch || *expected == m.producerEpoch:
		t.producerEpoch, t.lastProducerEpoch = bumped, m.producerEpoch
	case *expected == m.lastProducerEpoch:
		t.producerEpoch, t.lastProducerEpoch = m.producerEpoch, m.lastProducerEpoch
	default:
		return transit{}, errFenced
	}
	t.timeoutMs = timeoutMs
	t.partitions = map[TopicPartition]struct{}{}
	t.startMs = -1
	t.lastUpdateMs = nowMs
	return m.prepareTransition(t)
}

// prepareProducerIDRotation moves to a new producer id at epoch 0 (the old one's epochs are
// exhausted).
func (m *txnMeta) prepareProducerIDRotation(newPID int64, timeoutMs int32, nowMs int64, recordLastEpoch bool) (transit, error) {
	if m.state == Ongoing || m.state == PrepareAbort || m.state == PrepareCommit {
		return transit{}, &errIllegalTransition{m.id, m.state, Empty, "rotating producer ids while a transaction is pending"}
	}
	t := m.base(Empty)
	t.producerID = newPID
	t.producerEpoch = 0
	t.lastProducerEpoch = noProducerEpoch
	if recordLastEpoch {
		t.lastProducerEpoch = m.producerEpoch
	}
	t.timeoutMs = timeoutMs
	t.partitions = map[TopicPartition]struct{}{}
	t.startMs = -1
	t.lastUpdateMs = nowMs
	return m.prepareTransition(t)
}

// prepareAddPartitions leads to Ongoing with the partitions added; a new transaction starts its
// clock now.
func (m *txnMeta) prepareAddPartitions(add []TopicPartition, nowMs int64, tv int16) (transit, error) {
	t := m.base(Ongoing)
	if m.state == Empty || m.state == CompleteAbort || m.state == CompleteCommit {
		t.startMs = nowMs
	}
	for _, tp := range add {
		t.partitions[tp] = struct{}{}
	}
	t.lastUpdateMs = nowMs
	t.clientTxnVersion = tv
	return m.prepareTransition(t)
}

// prepareAbortOrCommit leads to PrepareCommit or PrepareAbort. With transaction version 2 the
// epoch is bumped here (the client gets the new one in EndTxn's response); nextPID is the
// producer id to move to when that bump exhausts the epochs.
func (m *txnMeta) prepareAbortOrCommit(to State, tv int16, nextPID int64, nowMs int64, noPartitionAdded bool) (transit, error) {
	t := m.base(to)
	if supportsEpochBump(tv) {
		if !(m.producerEpoch == math.MaxInt16 && to == PrepareAbort) {
			t.producerEpoch = m.producerEpoch + 1
		}
		t.lastProducerEpoch = m.producerEpoch
	}
	if noPartitionAdded {
		t.startMs = nowMs
	}
	t.nextProducerID = nextPID
	t.lastUpdateMs = nowMs
	t.clientTxnVersion = tv
	return m.prepareTransition(t)
}

// prepareComplete leads from PrepareX to CompleteX once every marker is written; with version 2
// and an exhausted epoch the transaction moves to the next producer id at epoch 0.
func (m *txnMeta) prepareComplete(nowMs int64) (transit, error) {
	m.failedEpochFence = false
	to := CompleteAbort
	if m.state == PrepareCommit {
		to = CompleteCommit
	}
	t := m.base(to)
	if supportsEpochBump(m.clientTxnVersion) && m.nextProducerID != noProducerID {
		t.producerID = m.nextProducerID
		t.producerEpoch = 0
	}
	t.nextProducerID = noProducerID
	t.partitions = map[TopicPartition]struct{}{}
	t.lastUpdateMs = nowMs
	return m.prepareTransition(t)
}

// prepareDead leads to Dead (expiration: a tombstone is written).
func (m *txnMeta) prepareDead() (transit, error) {
	t := m.base(Dead)
	t.partitions = map[TopicPartition]struct{}{}
	return m.prepareTransition(t)
}

// completeTransition is Kafka's completeTransitionTo: it applies a written transit after
// checking it against the pending state and Kafka's per-state rules. m.mu must be held. On an
// error nothing changes except that the pending state is cleared.
func (m *txnMeta) completeTransition(t transit) error {
	if !m.hasPending {
		return &errIllegalTransition{m.id, m.state, t.state, "no pending transition"}
	}
	to := m.pending
	fail := func(why string) error {
		m.hasPending = false
		return &errIllegalTransition{m.id, m.state, t.state, why}
	}
	if to != t.state {
		return fail("pending state is " + to.String())
	}
	switch to {
	case Empty:
		if (m.producerEpoch != t.producerEpoch && !m.validEpochBump(t)) || len(t.partitions) != 0 || t.startMs != -1 {
			return fail("unexpected metadata for Empty")
		}
	case Ongoing:
		if !m.validProducerEpoch(t) || !containsAll(t.partitions, m.partitions) || m.timeoutMs != t.timeoutMs {
			return fail("unexpected metadata for Ongoing")
		}
	case PrepareAbort, PrepareCommit:
		allowedEmptyAbort := to == PrepareAbort && supportsEpochBump(t.clientTxnVersion) &&
			(m.state == Empty || m.state == CompleteCommit || m.state == CompleteAbort)
		if !m.validProducerEpoch(t) || !sameSet(m.partitions, t.partitions) || m.timeoutMs != t.timeoutMs ||
			!(m.startMs == t.startMs || allowedEmptyAbort) {
			return fail("unexpected metadata for " + to.String())
		}
	case CompleteAbort, CompleteCommit:
		if !m.validProducerEpoch(t) || m.timeoutMs != t.timeoutMs || t.startMs == -1 {
			return fail("unexpected metadata for " + to.String())
		}
	case PrepareEpochFence:
		return fail("PrepareEpochFence is never completed")
	case Dead:
		return fail("Dead is never completed: the id is removed")
	}
	m.producerID, m.prevProducerID, m.nextProducerID = t.producerID, t.prevProducerID, t.nextProducerID
	m.producerEpoch, m.lastProducerEpoch, m.nextProducerEpoch = t.producerEpoch, t.lastProducerEpoch, t.nextProducerEpoch
	m.timeoutMs = t.timeoutMs
	m.partitions = t.partitions
	m.startMs, m.lastUpdateMs = t.startMs, t.lastUpdateMs
	m.clientTxnVersion = t.clientTxnVersion
	m.hasPending = false
	m.state = to
	return nil
}

// validProducerEpoch is Kafka's check of a transit's producer id and epoch (version 2 bumps
// at PrepareX and may rotate at CompleteX).
func (m *txnMeta) validProducerEpoch(t transit) bool {
	v2 := supportsEpochBump(t.clientTxnVersion)
	if v2 && (t.state == CompleteCommit || t.state == CompleteAbort) && t.producerEpoch == 0 {
		return t.lastProducerEpoch == m.lastProducerEpoch && t.prevProducerID == m.producerID
	}
	if v2 && (t.state == PrepareCommit || t.state == PrepareAbort) {
		return t.lastProducerEpoch == m.producerEpoch && t.producerID == m.producerID
	}
	return t.producerEpoch == m.producerEpoch && t.producerID == m.producerID
}

func (m *txnMeta) validEpochBump(t transit) bool {
	return t.producerEpoch == m.producerEpoch+1 || (t.producerEpoch == 0 && t.producerID != m.producerID)
}

func containsAll(super, sub map[TopicPartition]struct{}) bool {
	for k := range sub {
		if _, ok := super[k]; !ok {
			return false
		}
	}
	return true
}

func sameSet(a, b map[TopicPartition]struct{}) bool { return len(a) == len(b) && containsAll(a, b) }
