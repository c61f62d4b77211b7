package faults

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/weir-mq/weir/internal/faults/diskfault"
	"github.com/weir-mq/weir/internal/testcluster"
)

// Disk faults go through each node's fault control (internal/faultctl /faults/disk: a
// process-wide vfs.FaultFS under the engine), so the nodes' binary must be built with
// `-tags faults`. The variants:
//   - sync-eio-leader, sync-eio-follower: every fdatasync of one node fails with EIO; its log dir
//     goes offline (KAFKA_STORAGE_ERROR) and its replicas leave the ISRs. Healed by clearing the
//     fault and restarting the node (an offline dir comes back only with a restart, as in Kafka).
//   - enospc-leader: every write of a partition leader fails with ENOSPC (a full disk); the same.
//   - stall-leader: every write and fdatasync started on a leader in the next 5 s waits until
//     then (a stalled device); nothing is restarted.
//   - power-one: a power loss of one node: every byte it has not fdatasync'd is dropped, files
//     created since their directory's last sync vanish, then SIGKILL; down for the hold, restarted.
//   - power-all: the same on every node at once (coordinated power loss), then all restarted.
//   - corrupt-tail: a follower is SIGKILLed, a bit is flipped in the last batch of its newest
//     segment of a workload partition (or, when that batch is below the recovery point, where
//     recovery does not check CRCs as in Kafka, 7 bytes are cut off the segment's end instead),
//     and it is restarted: recovery must truncate the damage and the follower catch up.
//   - corrupt-index, corrupt-snapshot: the same with a bit flipped in the position of the last
//     entry of the newest segment's offset index (which is preallocated: its tail is zeros), or
//     the newest producer snapshot cut by 7 bytes after a clean stop (SIGTERM: the snapshot is
//     then written at the log end, and the clean start trusts it): the broker must rebuild the
//     index, and find the snapshot bad and rebuild the producer state from the log.
var diskVariants = []string{"sync-eio-leader", "sync-eio-follower", "enospc-leader", "stall-leader", "power-one", "power-all",
	"corrupt-tail", "corrupt-index", "corrupt-snapshot"}

const diskPath = "/faults/disk"

func (n *nemesis) disk(ctx context.Context, f fault) {
	p := int32(f.Pick % uint64(n.partitions))
	switch f.Variant {
	case "sync-eio-leader", "sync-eio-follower", "enospc-leader":
		op := "sync-eio"
		if f.Variant == "enospc-leader" {
			op = "enospc-append"
		}
		nd, what, err := n.diskTarget(ctx, p, f.Variant == "sync-eio-follower")
		if err != nil {
			n.skipped(f, err)
			return
		}
		rf := n.begin(f, fmt.Sprintf("disk %s on node %d (%s) for %v", op, nd.ID, what, f.Hold), nd.ID)
		if _, err := n.c.control(ctx, nd, diskPath, url.Values{"op": {op}}); err != nil {
			n.end(rf, "disk fault failed", err)
			return
		}
		sleepCtx(ctx, f.Hold)
		_, err = n.c.control(context.Background(), nd, diskPath, url.Values{"op": {"clear"}})
		n.end(rf, fmt.Sprintf("clear and restart node %d", nd.ID), errors.Join(err, n.bounce(nd)))
	case "stall-leader":
		nd, what, err := n.diskTarget(ctx, p, false)
		if err != nil {
			n.skipped(f, err)
			return
		}
		rf := n.begin(f, fmt.Sprintf("disk stall of writes and syncs on node %d (%s) for 5s", nd.ID, what), nd.ID)
		if _, err := n.c.control(ctx, nd, diskPath, url.Values{"op": {"stall"}, "for": {"5s"}}); err != nil {
			n.end(rf, "disk stall failed", err)
			return
		}
		sleepCtx(ctx, 5*time.Second)
		_, err = n.c.control(context.Background(), nd, diskPath, url.Values{"op": {"clear"}})
		n.end(rf, "stall over", err)
	case "power-one":
		nd, what, err := n.diskTarget(ctx, p, false)
		if err != nil {
			n.skipped(f, err)
			return
		}
		rf := n.begin(f, fmt.Sprintf("power loss of node %d (%s), down for %v", nd.ID, what, f.Hold), nd.ID)
		err = n.powerOff(ctx, nd)
		sleepCtx(ctx, f.Hold)
		n.end(rf, fmt.Sprintf("power on node %d", nd.ID), errors.Join(err, n.restart(nd)))
	case "power-all":
		rf := n.begin(f, fmt.Sprintf("coordinated power loss of every node, down for %v", f.Hold), 0)
		var errs []error
		for _, nd := range n.c.tc.Nodes() {
			errs = append(errs, n.powerOff(ctx, nd))
		}
		sleepCtx(ctx, f.Hold)
		for _, nd := range n.c.tc.Nodes() {
			if err := nd.Spawn(); err != nil {
				errs = append(errs, err)
			}
		}
		rctx, cancel := context.WithTimeout(context.Background(), restartTimeout)
		err := n.c.tc.WaitReady(rctx, n.c.tc.Nodes()...)
		cancel()
		if err == nil {
			n.mu.Lock()
			clear(n.down)
			n.mu.Unlock()
		}
		n.end(rf, "power on every node", errors.Join(append(errs, err)...))
	case "corrupt-tail", "corrupt-index", "corrupt-snapshot":
		nd, what, err := n.diskTarget(ctx, p, true)
		if err != nil {
			n.skipped(f, err)
			return
		}
		rf := n.begin(f, fmt.Sprintf("%s of %s/%d on node %d (%s)", f.Variant, n.topic, p, nd.ID, what), nd.ID)
		n.markDown(nd.ID)
		stop := nd.Kill
		if f.Variant == "corrupt-snapshot" {
			// A clean stop writes a producer snapshot at the log end (a SIGKILL before the
			// first roll leaves none), and a clean start trusts it instead of replaying.
			stop = func() error { return nd.Terminate(30 * time.Second) }
		}
		if err := stop(); err != nil {
			n.end(rf, "stop failed", err)
			return
		}
		damage, derr := n.damageTail(nd, p, f.Variant)
		sleepCtx(ctx, min(f.Hold, 5*time.Second))
		n.end(rf, fmt.Sprintf("%s; restart node %d", damage, nd.ID), errors.Join(derr, n.restart(nd)))
	default:
		n.skipped(f, fmt.Errorf("unknown variant %q", f.Variant))
	}
}

// diskTarget is the leader of the workload's partition p, or (follower) one of its followers.
func (n *nemesis) diskTarget(ctx context.Context, p int32, follower bool) (*testcluster.Node, string, error) {
	ps, err := n.c.partitions(ctx, n.topic)
	if err != nil {
		return nil, "", err
	}
	d, ok := ps[p]
	if !ok || d.Leader < 1 {
		return nil, "", fmt.Errorf("%s/%d has no leader", n.topic, p)
	}
	id, what := d.Leader, fmt.Sprintf("leader of %s/%d", n.topic, p)
	if follower {
		id = -1
		for _, r := range d.ISR {
			if r != d.Leader {
				id, what = r, fmt.Sprintf("follower of %s/%d", n.topic, p)
				break
			}
		}
		if id < 0 {
			return nil, "", fmt.Errorf("%s/%d has no follower in its ISR %v", n.topic, p, d.ISR)
		}
	}
	nd, err := n.node(id)
	return nd, what, err
}

func (n *nemesis) markDown(id int32) {
	n.mu.Lock()
	n.down[id] = true
	n.mu.Unlock()
}

// powerOff drops every unsynced byte of nd (crash) and SIGKILLs it.
func (n *nemesis) powerOff(ctx context.Context, nd *testcluster.Node) error {
	n.markDown(nd.ID)
	_, err := n.c.control(ctx, nd, diskPath, url.Values{"op": {"crash"}})
	return errors.Join(err, nd.Kill())
}

// bounce restarts a running node (SIGTERM, then start and wait for /readyz).
func (n *nemesis) bounce(nd *testcluster.Node) error {
	n.markDown(nd.ID)
	if err := nd.Terminate(30 * time.Second); err != nil {
		n.log.Warn("node did not stop on SIGTERM", "node", nd.ID, "err", err)
	}
	return n.restart(nd)
}

// damageTail flips a bit in the last batch of the stopped node's newest segment of partition
// p, or cuts 7 bytes off its end when that batch lies below the recovery point; for
// corrupt-index and corrupt-snapshot it cuts the newest offset index or producer snapshot.
func (n *nemesis) damageTail(nd *testcluster.Node, p int32, variant string) (string, error) {
	dir := diskfault.PartitionDir(nd.Dir, n.topic, p)
	switch variant {
	case "corrupt-index":
		idx, err := diskfault.Newest(dir, diskfault.IndexSuffix)
		if err != nil {
			return "no damage", err
		}
		b, err := os.ReadFile(idx)
		if err != nil {
			return "no damage", err
		}
		last := -1 // the last entry that is not zeros (8 bytes: relative offset, position)
		for i := 0; i+8 <= len(b); i += 8 {
			if binary.BigEndian.Uint64(b[i:]) != 0 {
				last = i
			}
		}
		if last < 0 {
			return "no damage", fmt.Errorf("%s has no entry", idx)
		}
		d, err := diskfault.FlipBit(idx, int64(len(b)-(last+7)-1), 2)
		if err != nil {
			return "no damage", err
		}
		return d.String(), nil
	case "corrupt-snapshot":
		snap, err := diskfault.Newest(dir, diskfault.SnapshotSuffix)
		if err != nil {
			return "no damage", err
		}
		d, err := diskfault.Truncate(snap, 7)
		if err != nil {
			return "no damage", err
		}
		return d.String(), nil
	}
	seg, err := diskfault.Newest(dir, diskfault.LogSuffix)
	if err != nil {
		return "no damage", err
	}
	b, err := diskfault.LastBatch(seg)
	if err != nil {
		return "no damage", err
	}
	rp, ok, err := diskfault.RecoveryPoint(nd.Dir, n.topic, p)
	if err != nil {
		return "no damage", err
	}
	var d diskfault.Damage
	if !ok || b.BaseOffset >= rp {
		d, err = diskfault.FlipBit(seg, b.Size/2, 3)
	} else {
		d, err = diskfault.Truncate(seg, 7)
	}
	if err != nil {
		return "no damage", err
	}
	return d.String(), nil
}
