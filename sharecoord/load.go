package sharecoord

import (
	"context"
	"errors"
	"time"

	"github.com/weir-mq/weir/sharestate"
)

// Elect makes the coordinator lead __share_group_state partition p at leader epoch epoch: its
// share partitions' states load in the background (operations answer
// COORDINATOR_LOAD_IN_PROGRESS meanwhile). Electing it again at the same or an older epoch is a
// no-op; a newer epoch reloads it.
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
	op := &ownedPart{p: p, epoch: epoch, loading: true, ctx: ctx, cancel: cancel, loaded: make(chan struct{}),
		states: map[sharestate.Key]*shareState{}}
	c.owned[p] = op
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		c.load(op)
	}()
}

// Resign gives up partition p: its states are dropped from memory and operations on them
// answer NOT_COORDINATOR.
func (c *Coordinator) Resign(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op := c.owned[p]; op != nil {
		op.cancel()
		delete(c.owned, p)
		c.log.Info("share coordinator resigned __share_group_state partition", "partition", p, "leader_epoch", op.epoch)
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
		again := c.owned[p] != op && c.owned[p] != nil
		c.mu.Unlock()
		if !again {
			return nil
		}
	}
}

// load replays op's partition in offset order: a ShareSnapshot replaces a key's state, a
// ShareUpdate is laid over it, a tombstone of either key removes it. Records of unknown key
// versions and unreadable batches are skipped with a warning.
func (c *Coordinator) load(op *ownedPart) {
	defer close(op.loaded)
	start := time.Now()
	skipped := 0
	op.wmu.Lock()
	l, err := c.cfg.Store.Log(op.p)
	if err == nil {
		op.log = l
		err = l.ReadBatches(func(batch []byte) error {
			if op.ctx.Err() != nil {
				return op.ctx.Err()
			}
			err := eachRecord(batch, func(key, value []byte) error {
				if !op.replay(key, value) {
					skipped++
				}
				return nil
			})
			if errors.Is(err, errUnreadable) {
				skipped++
				return nil
			}
			return err
		})
	}
	n := len(op.states)
	op.wmu.Unlock()
	if skipped > 0 {
		c.log.Warn("skipped __share_group_state records weir does not understand", "partition", op.p, "records", skipped)
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
		c.log.Error("loading __share_group_state partition failed; its share partitions are unavailable", "partition", op.p, "err", err)
		return
	}
	c.mu.Unlock()
	c.log.Info("share coordinator elected for __share_group_state partition", "partition", op.p,
		"leader_epoch", op.epoch, "share_partitions", n, "took", time.Since(start))
}

// replay applies one record to op's states; false when it could not be read.
func (op *ownedPart) replay(key, value []byte) bool {
	ver, k, err := decodeKey(key)
	if err != nil {
		return false
	}
	if value == nil {
		delete(op.states, k)
		return true
	}
	switch ver {
	case keySnapshot:
		v, err := decodeSnapshot(value)
		if err != nil {
			return false
		}
		op.applySnapshot(k, v)
	case keyUpdate:
		v, err := decodeUpdate(value)
		if err != nil {
			return false
		}
		op.applyUpdate(k, v)
	}
	return true
}
