package txncoord

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// startMarkers completes m's transaction (in PrepareCommit or PrepareAbort) in the background:
// markers to every partition left in it, then CompleteCommit / CompleteAbort. It stops when
// the partition is resigned (the next coordinator resends the markers after loading).
func (c *Coordinator) startMarkers(op *ownedPart, m *txnMeta) {
	c.mu.Lock()
	if c.closed || c.owned[op.p] != op {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		c.completeTxn(op, m)
	}()
}

// completeTxn is Kafka's TransactionMarkerChannelManager for one transaction.
func (c *Coordinator) completeTxn(op *ownedPart, m *txnMeta) {
	backoff := func() bool {
		select {
		case <-op.ctx.Done():
			return false
		case <-time.After(c.cfg.MarkerRetryBackoff):
			return true
		}
	}
	for {
		if op.ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		if m.state != PrepareCommit && m.state != PrepareAbort {
			m.mu.Unlock()
			return
		}
		mk := Marker{
			ProducerID: m.producerID, ProducerEpoch: m.producerEpoch, CoordinatorEpoch: op.epoch,
			Commit: m.state == PrepareCommit, TransactionVersion: m.clientTxnVersion,
			Partitions: sortedPartitions(m.partitions),
		}
		m.mu.Unlock()

		if len(mk.Partitions) > 0 {
			errs := c.cfg.Markers.WriteMarkers(op.ctx, mk)
			fenced, retry := false, false
			m.mu.Lock()
			for i, tp := range mk.Partitions {
				var err error = errors.New("no answer from the marker writer")
				if i < len(errs) {
					err = errs[i]
				}
				switch {
				case err == nil || errors.Is(err, ErrPartitionGone):
					delete(m.partitions, tp) // Kafka's removePartition: the marker is written
				case errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.TransactionCoordinatorFenced):
					fenced = true
				default:
					retry = true
				}
			}
			left := len(m.partitions)
			m.mu.Unlock()
			if fenced {
				c.log.Warn("a newer transaction coordinator has fenced this one: no more markers for this transaction",
					"transactional_id", m.id, "producer_id", mk.ProducerID, "coordinator_epoch", op.epoch)
				return
			}
			if retry || left > 0 {
				if !backoff() {
					return
				}
				continue
			}
		}

		// Every marker is written: CompleteCommit / CompleteAbort.
		m.mu.Lock()
		if m.hasPending {
			m.mu.Unlock()
			if !backoff() {
				return
			}
			continue
		}
		t, err := m.prepareComplete(c.nowMs())
		m.mu.Unlock()
		if err != nil {
			c.log.Error("completing a transaction", "err", err)
			return
		}
		switch e := c.appendTransit(op, m, t); e {
		case nil:
			c.log.Debug("transaction completed", "transactional_id", m.id, "state", t.state)
			return
		case kerr.NotCoordinator:
			return // the next coordinator completes it
		default:
			c.log.Warn("writing the transaction's completion failed; retrying", "transactional_id", m.id, "err", e)
			if !backoff() {
				return
			}
		}
	}
}
