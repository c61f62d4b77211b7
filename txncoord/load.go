package txncoord

import (
	"context"
	"errors"
	"time"
)

// Elect makes the coordinator lead __transaction_state partition p at coordinator epoch epoch
// (the partition's leader epoch): its transactions load in the background (requests answer
// COORDINATOR_LOAD_IN_PROGRESS meanwhile), then every transaction left in PrepareCommit or
// PrepareAbort is completed by resending its markers, so a failover finishes the commits and
// aborts the previous coordinator decided. Electing the partition again at the same or an
// older epoch is a no-op; a newer epoch reloads it.
func (c *Coordinator) Elect(p int32, epoch int32) {
	if p < 0 || p >= c.parts {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if old := c.owned[p]; old != nil {
		if old.epoch >= epoch {
			c.mu.Unlock()
			return
		}
		old.cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	op := &ownedPart{p: p, epoch: epoch, loading: true, txns: map[string]*txnMeta{}, ctx: ctx, cancel: cancel, loaded: make(chan struct{})}
	c.owned[p] = op
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		c.load(op)
	}()
}

// Resign gives up partition p: its transactions are dropped from memory, marker sending for
// them stops, and requests for them answer NOT_COORDINATOR.
func (c *Coordinator) Resign(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op := c.owned[p]; op != nil {
		op.cancel()
		delete(c.owned, p)
		c.log.Info("transaction coordinator resigned __transaction_state partition", "partition", p, "coordinator_epoch", op.epoch)
	}
}

// WaitLoaded blocks until partition p is loaded (or failed, or not owned), or ctx ends.
func (c *Coordinator) WaitLoaded(ctx context.Context, p int32) error {
	for {
		c.mu.Lock()
		op := c.owned[p]
		c.mu.Unlock()
		if op == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-op.loaded:
		}
		c.mu.Lock()
		again := c.owned[p] != op && c.owned[p] != nil // re-elected meanwhile: wait for that load
		c.mu.Unlock()
		if !again {
			return nil
		}
	}
}

// load replays op's partition: the last record per transactional id wins, a tombstone removes
// it. Records of other coordinators' types and unreadable batches are skipped with a warning.
func (c *Coordinator) load(op *ownedPart) {
	defer close(op.loaded)
	start := time.Now()
	txns := map[string]*txnMeta{}
	skipped := 0
	l, err := c.cfg.Store.Log(op.p)
	if err == nil {
		op.log = l
		err = l.ReadBatches(func(batch []byte) error {
			if op.ctx.Err() != nil {
				return op.ctx.Err()
			}
			err := eachRecord(batch, func(key, value []byte) error {
				id, err := decodeKey(key)
				if err != nil {
					skipped++
					return nil
				}
				if value == nil {
					delete(txns, id)
					return nil
				}
				v, err := decodeValue(value)
				if err != nil {
					skipped++
					return nil
				}
				txns[id] = metaFromValue(id, v)
				return nil
			})
			if errors.Is(err, errUnreadable) {
				skipped++
				return nil
			}
			return err
		})
	}
	if skipped > 0 {
		c.log.Warn("skipped __transaction_state records weir does not understand", "partition", op.p, "records", skipped)
	}
	c.mu.Lock()
	if c.closed || c.owned[op.p] != op {
		c.mu.Unlock()
		return
	}
	op.loading = false
	if err != nil {
		op.failed = true
		c.mu.Unlock()
		c.log.Error("loading __transaction_state partition failed; its transactions are unavailable", "partition", op.p, "err", err)
		return
	}
	var completing []*txnMeta
	for id, m := range txns {
		if m.state == Dead || m.state == PrepareEpochFence {
			continue // never written by Kafka's coordinator: ignore
		}
		op.txns[id] = m
		if m.state == PrepareCommit || m.state == PrepareAbort {
			completing = append(completing, m)
		}
	}
	n := len(op.txns)
	c.mu.Unlock()
	c.log.Info("transaction coordinator elected for __transaction_state partition", "partition", op.p,
		"coordinator_epoch", op.epoch, "transactional_ids", n, "completing", len(completing), "took", time.Since(start))
	for _, m := range completing {
		c.startMarkers(op, m)
	}
}
