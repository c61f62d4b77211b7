package broker

// Several log dirs per broker (JBOD): this file owns
//
//   - the moves of replicas between log dirs that AlterReplicaLogDirs starts (one goroutine per
//     partition moving: engine.Future copies the log into the target dir while the partition
//     keeps serving, then swapLog swaps it in under the replica's role lock, and the next
//     reconcile gives the partition a replica on the moved log);
//   - the reports of replicas in an offline log dir to the controller (reportOffline): the
//     controller takes this broker out of their ISRs and moves their leaderships; this broker
//     answers KAFKA_STORAGE_ERROR for them (replica.checkLeaderLocked) and stops fetching them;
//   - which configured log dirs a starting broker can use (usableLogDirs): one that cannot be
//     created or listed is offline, the others serve.

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/replication"
)

// logDirsState is the broker's JBOD state.
type logDirsState struct {
	// mu guards moving and closed.
	mu     sync.Mutex
	moving map[engine.TopicPartition]*engine.Future
	closed bool

	quit chan struct{}
	wg   sync.WaitGroup

	// copyQuota bounds the bytes per second all moves together copy
	// (replica.alter.log.dirs.io.max.bytes.per.second, read on every check: dynamic).
	copyQuota *replication.Quota
}

// Timing of moves and reports.
const (
	// moveStepBytes is how much one copy step of a move copies before it looks at its lag.
	moveStepBytes = 4 << 20
	// moveSwapLag is the lag (offsets) under which a move freezes the source and swaps.
	moveSwapLag = 1000
	// offlineReportInterval is how often replicas in offline log dirs are reported.
	offlineReportInterval = 500 * time.Millisecond
)

// usableLogDirs returns the log dirs a starting broker can create and list; the others are
// logged and left to the log manager, which keeps them offline. When none is usable all are
// returned, so that the start fails naming the first error.
func usableLogDirs(dirs []string) []string {
	var ok []string
	for _, d := range dirs {
		err := os.MkdirAll(d, 0o755)
		if err == nil {
			_, err = os.ReadDir(d)
		}
		if err != nil {
			slog.Error("log dir offline at start: its replicas are not served", "dir", d, "err", err)
			continue
		}
		ok = append(ok, d)
	}
	if len(ok) == 0 {
		return dirs
	}
	return ok
}

func (b *Broker) startLogDirs() {
	s := &b.logDirs
	s.mu.Lock()
	s.quit = make(chan struct{})
	s.moving = map[engine.TopicPartition]*engine.Future{}
	s.copyQuota = replication.NewQuota(b.logDirCopyRate)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(offlineReportInterval)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
				b.reportOffline()
			}
		}
	}()
}

func (b *Broker) closeLogDirs() {
	s := &b.logDirs
	s.mu.Lock()
	if s.closed || s.quit == nil {
		s.closed = true
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.quit)
	s.mu.Unlock()
	s.wg.Wait()
}

// startMove starts moving tp's log to the log dir dir (or keeps the move to it going). The
// errors are those of engine.Manager.CreateFuture.
func (b *Broker) startMove(tp engine.TopicPartition, dir string) error {
	s := &b.logDirs
	f, err := b.logs.CreateFuture(tp, dir)
	if err != nil || f == nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.quit == nil {
		b.logs.AbandonFuture(tp)
		return nil
	}
	if s.moving[tp] == f {
		return nil // already copying
	}
	s.moving[tp] = f
	s.wg.Add(1)
	go b.runMove(tp, f)
	return nil
}

// runMove copies f until it nearly caught up, then swaps it in.
func (b *Broker) runMove(tp engine.TopicPartition, f *engine.Future) {
	s := &b.logDirs
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		if s.moving[tp] == f {
			delete(s.moving, tp)
		}
		s.mu.Unlock()
	}()
	for {
		select {
		case <-s.quit:
			return // the future is closed with the manager and removed at the next start
		default:
		}
		s.mu.Lock()
		current := s.moving[tp] == f
		s.mu.Unlock()
		if !current {
			return // another move of tp replaced this one
		}
		if w := s.copyQuota.Wait(time.Now()); w > 0 {
			// Over replica.alter.log.dirs.io.max.bytes.per.second: wait (in short steps, so a
			// shutdown or a raised rate is seen soon).
			select {
			case <-s.quit:
				return
			case <-time.After(min(w, 100*time.Millisecond)):
			}
			continue
		}
		before := f.Copied()
		lag, err := f.CatchUp(moveStepBytes)
		s.copyQuota.Record(f.Copied()-before, time.Now())
		if err != nil {
			slog.Warn("moving a replica between log dirs failed; it stays where it was", "topic", tp.Topic, "partition", tp.Partition, "to", f.Dir(), "err", err)
			b.logs.AbandonFuture(tp)
			return
		}
		if lag < moveSwapLag {
			if err := b.rm.swapLog(tp, f); err != nil {
				slog.Warn("swapping a moved replica in failed; it stays where it was", "topic", tp.Topic, "partition", tp.Partition, "to", f.Dir(), "err", err)
			}
			b.rm.reconcile()
			return
		}
		time.Sleep(time.Millisecond) // let the partition's appenders and readers in
	}
}

// swapLog makes tp's replica serve f's log: the replica stops leading (its produces in flight
// answer NOT_LEADER_OR_FOLLOWER and are retried), the log is swapped, and the replica leaves the
// map so that the caller's reconcile makes a new one on the moved log with the role the image
// gives.
func (rm *replicaManager) swapLog(tp engine.TopicPartition, f *engine.Future) error {
	rm.reconcileMu.Lock()
	defer rm.reconcileMu.Unlock()
	r := rm.get(tp)
	if r == nil {
		rm.b.logs.AbandonFuture(tp)
		return nil
	}
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	r.mu.Lock()
	r.resignLocked()
	r.epoch = -1
	r.mu.Unlock()
	_, err := rm.b.logs.CompleteFuture(f)
	rm.mu.Lock()
	delete(rm.parts, tp)
	rm.gen.Add(1)
	rm.mu.Unlock()
	return err
}

// isNewPartition reports whether pi never changed since its creation: a replica of it without a
// log may be created even while a log dir is offline (the log of any other may be in that dir).
func isNewPartition(pi controller.PartitionInfo) bool {
	return pi.LeaderEpoch == 0 && pi.PartitionEpoch == 0
}

// reportOffline tells the controller about this broker's replicas in offline log dirs that the
// image still counts as usable (leading, or in an ISR with others).
func (b *Broker) reportOffline() {
	if !b.logs.AnyDirOffline() {
		return
	}
	img := b.ctl.Image()
	me := b.nodeID
	var refs []controller.PartitionRef
	for _, t := range img.Topics {
		for p := range t.Partitions {
			pi := &t.Partitions[p]
			if !controller.NeedsOfflineReport(pi, me) {
				continue
			}
			tp := engine.TopicPartition{Topic: t.Name, Partition: int32(p)}
			l, ok := b.logs.Log(tp)
			offline := (ok && l.DirErr() != nil) || (!ok && !isNewPartition(*pi))
			if !offline {
				continue
			}
			refs = append(refs, controller.PartitionRef{Topic: t.Name, Partition: int32(p)})
			if len(refs) == controller.MaxOfflineReplicasPerReport {
				break
			}
		}
		if len(refs) == controller.MaxOfflineReplicasPerReport {
			break
		}
	}
	if len(refs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.ctl.ReportOfflineReplicas(ctx, refs); err != nil {
		slog.Warn("reporting replicas in offline log dirs to the controller", "replicas", len(refs), "err", err)
		return
	}
	slog.Warn("replicas in offline log dirs reported to the controller", "replicas", len(refs))
}
