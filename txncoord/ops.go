package txncoord

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ProducerIDEpoch is a producer id and epoch (InitProducerId's expected pair, KIP-360).
type ProducerIDEpoch struct {
	ProducerID int64
	Epoch      int16
}

// InitResult is InitProducerId's answer: the producer id and epoch, or an error (then -1, -1).
type InitResult struct {
	ProducerID int64
	Epoch      int16
	Err        *kerr.Error
}

func initErr(e *kerr.Error) InitResult { return InitResult{ProducerID: -1, Epoch: -1, Err: e} }

// InitProducerID is InitProducerId with a transactional id (a null id is the broker's: an
// idempotent producer gets a fresh id from the ProducerIDSource at epoch 0). It bumps the
// epoch (fencing older producers of the id), or, with expected set (KIP-360), bumps only when
// the expected pair is current: a retry of a bump that succeeded gets the same epoch, an
// older pair PRODUCER_FENCED. An open transaction is aborted first (its epoch fenced) and the
// client told CONCURRENT_TRANSACTIONS to retry; a transaction ending answers
// CONCURRENT_TRANSACTIONS too. timeoutMs above transaction.max.timeout.ms (or not positive)
// answers INVALID_TRANSACTION_TIMEOUT.
func (c *Coordinator) InitProducerID(txnID string, timeoutMs int32, expected *ProducerIDEpoch) InitResult {
	if txnID == "" {
		return initErr(kerr.InvalidRequest)
	}
	if len(txnID) > maxIDLen {
		return initErr(kerr.InvalidRequest)
	}
	if timeoutMs <= 0 || int64(timeoutMs) > c.cfg.MaxTimeout.Milliseconds() {
		return initErr(kerr.InvalidTransactionTimeout)
	}
	op, m, kerrv := c.lookup(txnID)
	if kerrv != nil {
		return initErr(kerrv)
	}
	if m == nil {
		pid, err := c.cfg.IDs.NextProducerID()
		if err != nil {
			return initErr(producerIDError(err))
		}
		created := newTxnMeta(txnID, pid, timeoutMs, c.nowMs())
		c.mu.Lock()
		if c.owned[op.p] != op {
			c.mu.Unlock()
			return initErr(kerr.NotCoordinator)
		}
		if m = op.txns[txnID]; m == nil {
			m = created
			op.txns[txnID] = m
		}
		c.mu.Unlock()
	}

	m.mu.Lock()
	t, errv := c.prepareInit(m, timeoutMs, expected)
	m.mu.Unlock()
	if errv != nil {
		return initErr(errv)
	}
	if t.state == PrepareEpochFence {
		// Abort the open transaction with the fenced epoch; the client retries and then gets
		// an epoch bumped once more.
		r := c.endTxn(txnID, t.producerID, t.producerEpoch, false, false, c.txnVersion())
		c.dropFence(m)
		if r.Err != nil {
			return initErr(r.Err)
		}
		return initErr(kerr.ConcurrentTransactions)
	}
	if e := c.appendTransit(op, m, t); e != nil {
		return initErr(e)
	}
	c.log.Info("initialized transactional id", "transactional_id", txnID, "producer_id", t.producerID, "epoch", t.producerEpoch, "partition", op.p)
	return InitResult{ProducerID: t.producerID, Epoch: t.producerEpoch}
}

// prepareInit is Kafka's prepareInitProducerIdTransit. m.mu must be held.
func (c *Coordinator) prepareInit(m *txnMeta, timeoutMs int32, expected *ProducerIDEpoch) (transit, *kerr.Error) {
	if m.dead {
		return transit{}, kerr.ConcurrentTransactions
	}
	if m.hasPending {
		return transit{}, kerr.ConcurrentTransactions
	}
	if expected != nil && !(m.producerEpoch == noProducerEpoch || expected.ProducerID == m.producerID ||
		(expected.ProducerID == m.prevProducerID && epochExhausted(expected.Epoch))) {
		return transit{}, kerr.ProducerFenced
	}
	switch m.state {
	case PrepareAbort, PrepareCommit:
		return transit{}, kerr.ConcurrentTransactions
	case CompleteAbort, CompleteCommit, Empty:
		var t transit
		var err error
		if epochExhausted(m.producerEpoch) && (expected == nil || expected.Epoch == m.producerEpoch) {
			pid, perr := c.cfg.IDs.NextProducerID()
			if perr != nil {
				return transit{}, producerIDError(perr)
			}
			t, err = m.prepareProducerIDRotation(pid, timeoutMs, c.nowMs(), expected != nil)
		} else {
			var exp *int16
			if expected != nil {
				exp = &expected.Epoch
			}
			t, err = m.prepareIncrementProducerEpoch(timeoutMs, exp, c.nowMs())
		}
		if err == errFenced {
			return transit{}, kerr.ProducerFenced
		}
		if err != nil {
			c.log.Error("InitProducerId transition", "err", err)
			return transit{}, kerr.UnknownServerError
		}
		return t, nil
	case Ongoing:
		t, err := m.prepareFenceProducerEpoch()
		if err != nil {
			c.log.Error("InitProducerId fence", "err", err)
			return transit{}, kerr.UnknownServerError
		}
		return t, nil
	}
	c.log.Error("transactional id in a state it can never rest in", "transactional_id", m.id, "state", m.state)
	return transit{}, kerr.UnknownServerError
}

// AddPartitions is AddPartitionsToTxn for one transaction: it adds partitions to the open
// transaction (starting one from Empty or a completed transaction), answering one error for
// every partition as Kafka does: INVALID_PRODUCER_ID_MAPPING (unknown id, or another producer
// id), PRODUCER_FENCED (another epoch), CONCURRENT_TRANSACTIONS (a transition pending or a
// transaction ending). tv is the client's transaction version (2 when the partition leader adds
// the partition for a version-2 client, KIP-890). With verifyOnly (the KIP-890 broker-side
// verification batch form) nothing is written: each partition answers nil when it is in the
// transaction and TRANSACTION_ABORTABLE when not.
func (c *Coordinator) AddPartitions(txnID string, pid int64, epoch int16, parts []TopicPartition, verifyOnly bool, tv int16) map[TopicPartition]*kerr.Error {
	all := func(e *kerr.Error) map[TopicPartition]*kerr.Error {
		out := make(map[TopicPartition]*kerr.Error, len(parts))
		for _, tp := range parts {
			out[tp] = e
		}
		return out
	}
	if txnID == "" || len(txnID) > maxIDLen {
		return all(kerr.InvalidRequest)
	}
	for _, tp := range parts {
		if tp.Topic == "" || len(tp.Topic) > maxIDLen || tp.Partition < 0 {
			return all(kerr.InvalidRequest)
		}
	}
	op, m, e := c.lookup(txnID)
	if e != nil {
		return all(e)
	}
	if m == nil {
		return all(kerr.InvalidProducerIDMapping)
	}
	m.mu.Lock()
	if verifyOnly {
		defer m.mu.Unlock()
		switch {
		case m.dead:
			return all(kerr.InvalidProducerIDMapping)
		case m.producerID != pid:
			return all(kerr.InvalidProducerIDMapping)
		case m.producerEpoch != epoch:
			return all(kerr.ProducerFenced)
		case m.state == PrepareCommit || m.state == PrepareAbort:
			return all(kerr.ConcurrentTransactions)
		}
		out := make(map[TopicPartition]*kerr.Error, len(parts))
		for _, tp := range parts {
			if _, ok := m.partitions[tp]; ok {
				out[tp] = nil
			} else {
				out[tp] = kerr.TransactionAbortable
			}
		}
		return out
	}
	var t transit
	var errv *kerr.Error
	switch {
	case m.dead:
		errv = kerr.InvalidProducerIDMapping
	case m.producerID != pid:
		errv = kerr.InvalidProducerIDMapping
	case m.producerEpoch != epoch:
		errv = kerr.ProducerFenced
	case m.hasPending, m.state == PrepareCommit, m.state == PrepareAbort:
		errv = kerr.ConcurrentTransactions
	case m.state == Ongoing && subset(parts, m.partitions):
		// Already in the transaction: answered at once, nothing written (t stays zero).
	default:
		n := len(m.partitions)
		for _, tp := range parts {
			if _, ok := m.partitions[tp]; !ok {
				n++
			}
		}
		if n > c.cfg.MaxPartitionsPerTxn {
			errv = kerr.InvalidRequest
			break
		}
		var err error
		t, err = m.prepareAddPartitions(parts, c.nowMs(), tv)
		if err != nil {
			c.log.Error("AddPartitionsToTxn transition", "err", err)
			errv = kerr.UnknownServerError
		}
	}
	m.mu.Unlock()
	if errv != nil || t.state != Ongoing {
		return all(errv)
	}
	return all(c.appendTransit(op, m, t))
}

func subset(parts []TopicPartition, set map[TopicPartition]struct{}) bool {
	for _, tp := range parts {
		if _, ok := set[tp]; !ok {
			return false
		}
	}
	return true
}

// AddOffsets is AddOffsetsToTxn: it adds group's __consumer_offsets partition to the
// transaction (the same hash rule as the group coordinator's placement).
func (c *Coordinator) AddOffsets(txnID string, pid int64, epoch int16, group string, tv int16) *kerr.Error {
	if len(group) > maxIDLen {
		return kerr.InvalidGroupID
	}
	tp := TopicPartition{Topic: OffsetsTopic, Partition: PartitionFor(group, c.cfg.OffsetsPartitions)}
	return c.AddPartitions(txnID, pid, epoch, []TopicPartition{tp}, false, tv)[tp]
}

// EndResult is EndTxn's answer. With transaction version 2 it carries the producer id and the
// epoch bumped at the end (the client's next transaction uses them); otherwise -1, -1.
type EndResult struct {
	ProducerID int64
	Epoch      int16
	Err        *kerr.Error
}

// EndTxn is EndTxn from a client: PrepareCommit or PrepareAbort is written (the answer waits
// for it to be durable), then the markers are written to every partition of the transaction in
// the background and CompleteCommit or CompleteAbort is written after the last. tv is the
// client's transaction version (EndTxn v5+: 2).
func (c *Coordinator) EndTxn(txnID string, pid int64, epoch int16, commit bool, tv int16) EndResult {
	return c.endTxn(txnID, pid, epoch, commit, true, tv)
}

func endErr(e *kerr.Error) EndResult { return EndResult{ProducerID: -1, Epoch: -1, Err: e} }

// endTxn is Kafka's endTransaction (version 2) and endTransactionWithTV1.
func (c *Coordinator) endTxn(txnID string, pid int64, epoch int16, commit, fromClient bool, tv int16) EndResult {
	if txnID == "" || len(txnID) > maxIDLen {
		return endErr(kerr.InvalidRequest)
	}
	op, m, e := c.lookup(txnID)
	if e != nil {
		return endErr(e)
	}
	if m == nil {
		return endErr(kerr.InvalidProducerIDMapping)
	}
	m.mu.Lock()
	if m.dead {
		m.mu.Unlock()
		return endErr(kerr.InvalidProducerIDMapping)
	}
	var t transit
	var errv *kerr.Error
	var done bool // answered without a write (a retry of an end that completed)
	// A fence prepared by InitProducerId or the timeout scan is taken over by that caller's
	// abort only (Kafka lets a client's EndTxn take it over too, which can end a transaction
	// without the fence's bump: weir answers the client CONCURRENT_TRANSACTIONS instead).
	isEpochFence := !fromClient && m.hasPending && m.pending == PrepareEpochFence
	if supportsEpochBump(tv) {
		t, errv, done = c.prepareEndV2(m, pid, epoch, commit, fromClient, tv, isEpochFence)
	} else {
		t, errv, done = c.prepareEndV1(m, pid, epoch, commit, fromClient, isEpochFence)
	}
	curPID, curEpoch := m.producerID, m.producerEpoch
	m.mu.Unlock()
	if errv != nil {
		return endErr(errv)
	}
	if done {
		if supportsEpochBump(tv) {
			return EndResult{ProducerID: curPID, Epoch: curEpoch}
		}
		return EndResult{ProducerID: -1, Epoch: -1}
	}
	if e := c.appendTransit(op, m, t); e != nil {
		if isEpochFence && c.current(op) {
			m.mu.Lock()
			m.failedEpochFence = true
			m.mu.Unlock()
			c.log.Warn("writing an epoch fence failed: the bumped epoch was not returned", "transactional_id", txnID, "err", e)
		}
		return endErr(e)
	}
	// PrepareX is durable: the outcome is decided. Answer, and complete in the background.
	m.mu.Lock()
	res := EndResult{ProducerID: -1, Epoch: -1}
	if supportsEpochBump(tv) {
		res = EndResult{ProducerID: m.producerID, Epoch: m.producerEpoch}
	}
	m.mu.Unlock()
	c.startMarkers(op, m)
	return res
}

// dropFence clears a prepared epoch fence whose abort was not prepared (its EndTxn failed
// before writing), so the id does not stay pending forever.
func (c *Coordinator) dropFence(m *txnMeta) {
	m.mu.Lock()
	if m.hasPending && m.pending == PrepareEpochFence {
		m.hasPending = false
	}
	m.mu.Unlock()
}

func invalidState(c *Coordinator, m *txnMeta, commit bool) *kerr.Error {
	c.log.Warn("EndTxn in a state that does not allow it", "transactional_id", m.id, "state", m.state, "commit", commit)
	return kerr.InvalidTxnState
}

// prepareEndV1 is endTransactionWithTV1's check and transition. m.mu must be held.
func (c *Coordinator) prepareEndV1(m *txnMeta, pid int64, epoch int16, commit, fromClient, isEpochFence bool) (transit, *kerr.Error, bool) {
	switch {
	case m.producerID != pid:
		return transit{}, kerr.InvalidProducerIDMapping, false
	case (fromClient && epoch != m.producerEpoch) || epoch < m.producerEpoch:
		return transit{}, kerr.ProducerFenced, false
	case m.hasPending && !isEpochFence:
		return transit{}, kerr.ConcurrentTransactions, false
	}
	switch m.state {
	case Ongoing:
		next := PrepareAbort
		if commit {
			next = PrepareCommit
		}
		if next == PrepareAbort && isEpochFence {
			m.hasPending = false
			m.producerEpoch = epoch
			m.lastProducerEpoch = noProducerEpoch
		}
		t, err := m.prepareAbortOrCommit(next, 0, noProducerID, c.nowMs(), false)
		if err != nil {
			c.log.Error("EndTxn transition", "err", err)
			return transit{}, kerr.UnknownServerError, false
		}
		return t, nil, false
	case CompleteCommit:
		if commit {
			return transit{}, nil, true
		}
	case CompleteAbort:
		if !commit {
			return transit{}, nil, true
		}
	case PrepareCommit:
		if commit {
			return transit{}, kerr.ConcurrentTransactions, false
		}
	case PrepareAbort:
		if !commit {
			return transit{}, kerr.ConcurrentTransactions, false
		}
	}
	return transit{}, invalidState(c, m, commit), false
}

// prepareEndV2 is Kafka's endTransaction for transaction version 2: the epoch is bumped at
// every end, and a retried end is recognised by the epoch being one below the current one.
// m.mu must be held.
func (c *Coordinator) prepareEndV2(m *txnMeta, pid int64, epoch int16, commit, fromClient bool, tv int16, isEpochFence bool) (transit, *kerr.Error, bool) {
	retryOnOverflow := !isEpochFence && m.prevProducerID == pid && epoch == math.MaxInt16-1 && m.producerEpoch == 0
	retryOnEpochBump := !isEpochFence && m.producerEpoch == epoch+1
	var validEpoch bool
	if !isEpochFence {
		switch m.state {
		case Ongoing, Empty, Dead, PrepareEpochFence:
			validEpoch = epoch == m.producerEpoch
		case PrepareCommit, PrepareAbort:
			// Kafka: only a retry (the epoch before the bump). weir also accepts the bumped
			// epoch the client was just given: that is its next transaction ending (an empty
			// abort, as franz-go sends when every produce of it failed) before this one's
			// markers are written, answered CONCURRENT_TRANSACTIONS below so the client waits,
			// instead of PRODUCER_FENCED, which would kill a live producer.
			validEpoch = retryOnEpochBump || epoch == m.producerEpoch
		case CompleteCommit, CompleteAbort:
			validEpoch = retryOnEpochBump || retryOnOverflow || epoch == m.producerEpoch
		}
	} else {
		validEpoch = (!fromClient || epoch == m.producerEpoch) && epoch >= m.producerEpoch
	}
	isRetry := retryOnEpochBump || retryOnOverflow

	complete := func(next State, noPartitionAdded bool) (transit, *kerr.Error, bool) {
		nextPID := noProducerID
		if !isEpochFence && epochExhausted(m.producerEpoch) {
			id, err := c.cfg.IDs.NextProducerID()
			if err != nil {
				return transit{}, producerIDError(err), false
			}
			nextPID = id
		}
		if next == PrepareAbort && isEpochFence {
			m.hasPending = false
			m.producerEpoch = epoch
			m.lastProducerEpoch = noProducerEpoch
		}
		t, err := m.prepareAbortOrCommit(next, tv, nextPID, c.nowMs(), noPartitionAdded)
		if err != nil {
			c.log.Error("EndTxn transition", "err", err)
			return transit{}, kerr.UnknownServerError, false
		}
		return t, nil, false
	}

	switch {
	case m.producerID != pid && !retryOnOverflow:
		return transit{}, kerr.InvalidProducerIDMapping, false
	case !validEpoch:
		return transit{}, kerr.ProducerFenced, false
	case m.hasPending && !isEpochFence:
		return transit{}, kerr.ConcurrentTransactions, false
	case (m.state == PrepareCommit || m.state == PrepareAbort) && !isRetry && !isEpochFence:
		return transit{}, kerr.ConcurrentTransactions, false // the next transaction's end, above
	}
	switch m.state {
	case Ongoing:
		if commit {
			return complete(PrepareCommit, false)
		}
		return complete(PrepareAbort, false)
	case CompleteCommit:
		if commit {
			if isRetry {
				return transit{}, nil, true
			}
			return transit{}, invalidState(c, m, commit), false
		}
		if isRetry {
			return transit{}, invalidState(c, m, commit), false
		}
		return complete(PrepareAbort, true)
	case CompleteAbort:
		if !commit {
			if isRetry {
				return transit{}, nil, true
			}
			return complete(PrepareAbort, true)
		}
		return transit{}, invalidState(c, m, commit), false
	case PrepareCommit:
		if commit {
			return transit{}, kerr.ConcurrentTransactions, false
		}
	case PrepareAbort:
		if !commit {
			return transit{}, kerr.ConcurrentTransactions, false
		}
	case Empty:
		if !commit {
			return complete(PrepareAbort, true)
		}
	}
	return transit{}, invalidState(c, m, commit), false
}
