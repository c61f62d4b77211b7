package txncoord

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// loadedParts is a snapshot of the loaded partitions.
func (c *Coordinator) loadedParts() []*ownedPart {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*ownedPart, 0, len(c.owned))
	for _, op := range c.owned {
		if !op.loading && !op.failed {
			out = append(out, op)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].p < out[j].p })
	return out
}

func (c *Coordinator) txnsOf(op *ownedPart) []*txnMeta {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*txnMeta, 0, len(op.txns))
	for _, m := range op.txns {
		out = append(out, m)
	}
	return out
}

// AbortTimedOut aborts every Ongoing transaction open longer than its timeout (Kafka's
// abortTimedOutTransactions, every transaction.abort.timed.out.transaction.cleanup.interval.ms):
// the producer's epoch is fenced, PrepareAbort written and the markers sent, so a hanging
// transaction never blocks the last stable offset forever.
func (c *Coordinator) AbortTimedOut() {
	now := c.nowMs()
	for _, op := range c.loadedParts() {
		for _, m := range c.txnsOf(op) {
			m.mu.Lock()
			if m.dead || m.state != Ongoing || m.hasPending || m.startMs+int64(m.timeoutMs) >= now {
				m.mu.Unlock()
				continue
			}
			t, err := m.prepareFenceProducerEpoch()
			m.mu.Unlock()
			if err != nil {
				c.log.Error("fencing a timed-out transaction", "err", err)
				continue
			}
			r := c.endTxn(m.id, t.producerID, t.producerEpoch, false, false, c.txnVersion())
			switch r.Err {
			case nil:
				c.log.Info("aborted a transaction past its timeout", "transactional_id", m.id, "producer_id", t.producerID)
			case kerr.InvalidProducerIDMapping, kerr.ProducerFenced, kerr.ConcurrentTransactions:
				c.log.Debug("abort of a timed-out transaction cancelled", "transactional_id", m.id, "err", r.Err)
			default:
				c.log.Warn("abort of a timed-out transaction failed", "transactional_id", m.id, "err", r.Err)
			}
			c.dropFence(m)
		}
	}
}

// ExpireTransactionalIDs removes every transactional id with no open transaction that has not
// been updated for transactional.id.expiration.ms: one batch of tombstones per partition, and
// the ids leave memory once it is durable (Kafka's removeExpiredTransactionalIds).
func (c *Coordinator) ExpireTransactionalIDs() {
	now := c.nowMs()
	horizon := now - c.cfg.IDExpiration.Milliseconds()
	for _, op := range c.loadedParts() {
		var expired []*txnMeta
		var recs []kv
		for _, m := range c.txnsOf(op) {
			m.mu.Lock()
			if !m.dead && !m.hasPending && m.state.expirationAllowed() && m.lastUpdateMs <= horizon {
				if _, err := m.prepareDead(); err == nil {
					expired = append(expired, m)
					recs = append(recs, kv{Key: encodeKey(m.id)})
				}
			}
			m.mu.Unlock()
		}
		if len(expired) == 0 {
			continue
		}
		err := appendDurable(op.log, buildBatch(now, recs))
		if err != nil || !c.current(op) {
			for _, m := range expired {
				m.mu.Lock()
				m.hasPending = false
				m.mu.Unlock()
			}
			if err != nil {
				c.log.Warn("writing tombstones of expired transactional ids failed", "partition", op.p, "err", err)
			}
			continue
		}
		for _, m := range expired {
			c.removeDead(op, m)
		}
		c.log.Info("expired transactional ids", "partition", op.p, "count", len(expired))
	}
}
