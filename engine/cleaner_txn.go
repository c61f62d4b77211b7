package engine

// Transactions in compaction, as Kafka's LogCleaner with CleanedTransactionMetadata:
//
//   - the cleanable section ends at or before the last stable offset, so every transaction with
//     data in it is decided;
//   - the batches of aborted transactions (from the .txnindex, AbortedTransactions) add nothing to
//     the offset map and are dropped (a producer's last batch is kept as a bare header, as any
//     emptied batch); committed transactional records are compacted like any record, and control
//     batches add nothing to the map;
//   - a marker is kept while the cleaning saw a batch of its transaction (for an ABORT its
//     transaction then goes into the cleaned segment's .txnindex); once none is left it is kept
//     once more with a delete horizon (KIP-534: baseTimestamp = now + delete.retention.ms,
//     attribute bit 6) and dropped by a cleaning after the horizon, so a consumer reading within
//     delete.retention.ms still sees it. An empty control batch is dropped.

import (
	"errors"
	"io"
	"math"
	"sort"

	"github.com/weir-mq/weir/record"
)

// cleanedTxns follows the transactions while a cleaning walks the batches in offset order.
type cleanedTxns struct {
	aborted   []AbortedTxn // by first offset; aborted[next:] not reached yet
	next      int
	committed map[int64]bool // producers with a committed transaction's batch seen
	// ongoingAborted: producers inside an aborted transaction, and whether a batch of it was seen.
	ongoingAborted map[int64]*abortedSeen
}

type abortedSeen struct {
	txn  AbortedTxn
	seen bool
}

func newCleanedTxns(aborted []AbortedTxn) *cleanedTxns {
	sort.SliceStable(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	return &cleanedTxns{aborted: aborted, committed: map[int64]bool{}, ongoingAborted: map[int64]*abortedSeen{}}
}

func (m *cleanedTxns) consumeUpTo(offset int64) {
	for m.next < len(m.aborted) && m.aborted[m.next].FirstOffset <= offset {
		a := m.aborted[m.next]
		if _, ok := m.ongoingAborted[a.ProducerID]; !ok {
			m.ongoingAborted[a.ProducerID] = &abortedSeen{txn: a}
		}
		m.next++
	}
}

// onBatch records a data batch and reports whether it belongs to an aborted transaction.
func (m *cleanedTxns) onBatch(h *record.Header) bool {
	m.consumeUpTo(h.LastOffset())
	if !h.IsTransactional() {
		return false
	}
	if a, ok := m.ongoingAborted[h.ProducerID]; ok {
		a.seen = true
		return true
	}
	m.committed[h.ProducerID] = true
	return false
}

// onControl records a control batch and reports whether it may go; index receives the aborted
// transaction of an ABORT marker that stays.
func (m *cleanedTxns) onControl(h *record.Header, batch []byte, index func(AbortedTxn) error) (bool, error) {
	m.consumeUpTo(h.LastOffset())
	if h.RecordCount == 0 {
		return true, nil // emptied by an earlier cleaning
	}
	mk, err := record.ParseEndTxnMarker(batch)
	if err != nil {
		return false, nil // another control type, or unreadable: kept
	}
	if mk.Commit {
		seen := m.committed[h.ProducerID]
		delete(m.committed, h.ProducerID)
		return !seen, nil
	}
	a, ok := m.ongoingAborted[h.ProducerID]
	delete(m.ongoingAborted, h.ProducerID)
	if ok && a.seen {
		if index != nil {
			if err := index(a.txn); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	return true, nil
}

// cleanerAborted lists the aborted transactions overlapping [from, upTo) for a cleaning (no
// bound on their number).
func (l *Log) cleanerAborted(from, upTo int64) ([]AbortedTxn, error) {
	return l.collectAborted(nil, from, upTo, math.MaxInt)
}

// filterControl is filterBatch for a control batch (see the file comment).
func (c *Cleaner) filterControl(dst, batch []byte, h *record.Header, ctx *cleanContext, st *CleanStats) ([]byte, error) {
	whole := func() ([]byte, error) {
		st.RecordsKept += int64(h.RecordCount)
		return append(dst, batch...), nil
	}
	if ctx.txns == nil {
		return whole()
	}
	discard, err := ctx.txns.onControl(h, batch, c.index)
	if err != nil {
		return dst, err
	}
	if !discard {
		return whole()
	}
	if h.Attributes&deleteHorizonFlag != 0 {
		if ctx.nowMs >= h.BaseTimestamp {
			c.changed = true
			return dst, nil // past its delete horizon
		}
		return whole()
	}
	// Kept once more, with a delete horizon: the records re-based on it.
	if err := c.rd.Reset(batch, ctx.limit); err != nil {
		return whole()
	}
	c.retimed = c.retimed[:0]
	n := 0
	for {
		rec, err := c.rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return whole()
		}
		cr, _, err := nextRecord(rec.Encoded)
		if err != nil {
			return whole()
		}
		c.retimed = appendRetimed(c.retimed, &cr, h.BaseTimestamp+rec.TimestampDelta-ctx.horizonMs)
		n++
	}
	c.changed = true
	st.RecordsKept += int64(n)
	return c.codec.appendBatch(dst, batch, n, c.retimed, h.Attributes|deleteHorizonFlag, ctx.horizonMs, h.MaxTimestamp)
}

// errTxnIndex marks a failure to write a cleaned segment's .txnindex.
var errTxnIndex = errors.New("write the cleaned segment's aborted transaction index")
