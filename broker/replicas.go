package broker

// The replica manager: turns each metadata image into local state. For every partition with a
// replica on this broker it keeps the log (created when assigned, deleted when the topic is
// deleted), and the role the image gives it:
//
//   - leader: the log stamps the leader epoch into appended batches and records it in the
//     leader-epoch-checkpoint; with followers (replication factor > 1) a replication.LeaderState
//     tracks their fetch offsets, proposes ISR changes to the controller and moves the high
//     watermark (the smallest durable end in the ISR); a single-replica partition's high
//     watermark follows its own log (engine LocalHighWatermark). A new leader epoch starts at
//     the log end (epochStart): until the high watermark reaches it, consumers' ListOffsets
//     LATEST is OFFSET_NOT_AVAILABLE, since the old leader may have exposed a higher one.
//   - follower: the partition is fetched from its leader by replication.Fetchers.
//
// ISR changes go to the controller through the AlterPartition sender (alterpartition.go); a
// change stays pending until the controller's answer or a newer partition epoch resolves it.
//
// Followers are removed from the fetchers before any partition becomes leader, so no fetched
// batch is appended after a leadership starts. Produce waits (acks=all) watch the high
// watermark and the leader epoch they appended under.

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/replication"
)

type replicaManager struct {
	b        *Broker
	fetchers *replication.Fetchers

	// reconcileMu serializes reconcile (the image watcher, Start, and retries after a failed
	// log creation): one pass at a time decides which replicas exist and their roles, so two
	// passes never create the same log or apply images out of order. It is held across log
	// creation and Fetchers.Set; never taken with mu or a replica's mu held.
	reconcileMu sync.Mutex
	// mu guards the parts map (its membership; each replica's state is under its own mu).
	// Lock order: mu before a replica's mu.
	mu    sync.RWMutex
	parts map[engine.TopicPartition]*replica
	// gen counts changes of parts' membership (bumped under mu) and of any replica's role or
	// leader epoch (bumped under that replica's mu, with the change): fetch sessions keep each
	// partition's *replica, and whether it passed the leader check, with the gen they were found
	// at, and look up and check again once gen moved.
	gen atomic.Uint64

	// quit is closed, and ctx cancelled, when close begins. wg counts the goroutines close waits
	// for: the image watcher, the ISR check and the AlterPartition senders (alterpartition.go).
	quit   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// sendersMu orders starting an AlterPartition sender against close: a sender is added to wg
	// under it only while quit is open, and close closes quit under it, so its wg.Wait never
	// races an Add. Taken under a replica's mu; nothing is taken under it.
	sendersMu sync.Mutex

	// createFailures counts replica logs this broker could not create (metrics).
	createFailures atomic.Int64

	// alterPartitionHook, when set (tests only), stands in for the controller's AlterPartition
	// in this broker's ISR change sender (alterpartition.go).
	alterPartitionHook atomic.Pointer[alterPartitionFunc]

	// leaderQuota is leader.replication.throttled.rate (KIP-73): the bytes this broker sends
	// to followers outside the ISR of replicas listed in leader.replication.throttled.replicas
	// (01_fetch.go). The follower side's quota is in the fetchers' config.
	leaderQuota *replication.Quota
}

// replica is this broker's replica of one partition.
type replica struct {
	rm    *replicaManager
	tp    engine.TopicPartition
	topic [16]byte
	log   *engine.Log
	// local: a single-replica partition, whose high watermark follows its own log. It changes
	// when a reassignment changes the replica count (reconcile, before apply).
	local atomic.Bool
	// applied is the topic metadata whose configs the log has (reconcile only): images are
	// copy-on-write, so a new pointer means the topic changed, its configs perhaps.
	applied *controller.TopicInfo

	// roleMu orders appends against role changes: a leader's appends hold it for reading, a
	// role change for writing, so nothing is appended after this broker stops leading.
	roleMu sync.RWMutex

	// mu guards the role: info, leading, epoch, epochStart, state and stopWatch (and the leader state's
	// pending ISR change). Lock order: roleMu, then mu.
	mu      sync.Mutex
	info    controller.PartitionInfo
	leading bool
	epoch   int32 // leader epoch of the current role
	// epochStart is the log end offset when this leadership's epoch began (Kafka's
	// leaderEpochStartOffsetOpt); meaningful while leading. Records below it may have been
	// committed, and exposed, by an earlier leader: until the high watermark reaches it,
	// the high watermark may be below what consumers were shown, so ListOffsets answers
	// OFFSET_NOT_AVAILABLE (offsetsAvailable).
	epochStart int64
	state      *replication.LeaderState // leaders of replicated partitions
	stopWatch  chan struct{}
	// alterRetryWarn limits the AlterPartition senders' warnings about changes sent again
	// (alterpartition.go) to one per alterPartitionRetryWarnEvery for this partition.
	alterRetryWarn warnLimiter

	// Replication throttles (KIP-73), from the topic's leader.replication.throttled.replicas
	// and follower.replication.throttled.replicas naming this broker's replica (set by
	// reconcile when the topic changes).
	leaderThrottled, followerThrottled atomic.Bool
}

func newReplicaManager(b *Broker) *replicaManager {
	rm := &replicaManager{b: b, parts: map[engine.TopicPartition]*replica{}, quit: make(chan struct{})}
	rm.ctx, rm.cancel = context.WithCancel(context.Background())
	rm.fetchers = replication.NewFetchers(replication.FetcherConfig{
		NodeID:            b.nodeID,
		Addr:              b.replicaAddr,
		Security:          b.interBroker,
		MaxWait:           keyReplicaFetchWaitMax.Get(b.cfg),
		MaxBytes:          int32(keyReplicaFetchResponseMaxBytes.Get(b.cfg)),
		PartitionMaxBytes: int32(keyReplicaFetchMaxBytes.Get(b.cfg)),
		Backoff:           keyReplicaFetchBackoff.Get(b.cfg),
		Logger:            slog.Default(),
		Quota:             replication.NewQuota(func() int64 { return keyFollowerReplicationThrottledRate.Get(b.cfg) }),
	})
	rm.leaderQuota = replication.NewQuota(func() int64 { return keyLeaderReplicationThrottledRate.Get(b.cfg) })
	return rm
}

// start reconciles on every image change and checks the ISRs of led partitions.
func (rm *replicaManager) start() {
	rm.wg.Add(2)
	go func() {
		defer rm.wg.Done()
		for {
			ch := rm.b.ctl.Changed()
			var retry <-chan time.Time
			if !rm.reconcile() {
				// A replica's log could not be created (a refusal for lack of a resource, or a
				// budget): try again later even if the image does not change.
				retry = time.After(replicaCreateRetry)
			}
			select {
			case <-ch:
			case <-retry:
			case <-rm.quit:
				return
			}
		}
	}()
	go func() {
		defer rm.wg.Done()
		every := min(keyReplicaLagTimeMax.Get(rm.b.cfg)/2, time.Second)
		t := time.NewTicker(max(every, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-t.C:
				rm.tick()
			case <-rm.quit:
				return
			}
		}
	}()
}

func (rm *replicaManager) close() {
	rm.sendersMu.Lock()
	select {
	case <-rm.quit:
		rm.sendersMu.Unlock()
		return
	default:
	}
	close(rm.quit)
	rm.sendersMu.Unlock()
	rm.cancel()
	rm.wg.Wait()
	rm.fetchers.Close()
	rm.mu.Lock()
	for _, r := range rm.parts {
		r.mu.Lock()
		r.resignLocked()
		r.mu.Unlock()
	}
	rm.mu.Unlock()
}

func (rm *replicaManager) get(tp engine.TopicPartition) *replica {
	rm.mu.RLock()
	defer rm.mu.RUnlock()
	return rm.parts[tp]
}

// replicaCreateRetry is how long the replica manager waits before trying again to create the logs
// of replicas it could not create.
const replicaCreateRetry = 5 * time.Second

// reconcile applies the latest image. It returns false when some replica assigned here has no
// log yet (its creation failed and was logged; the log dir is not taken offline).
func (rm *replicaManager) reconcile() (complete bool) {
	complete = true
	rm.reconcileMu.Lock()
	defer rm.reconcileMu.Unlock()
	b := rm.b
	img := b.ctl.Image()
	me := b.nodeID
	type want struct {
		t    *controller.TopicInfo
		info controller.PartitionInfo
	}
	desired := map[engine.TopicPartition]want{}
	for _, t := range img.Topics {
		for p, pi := range t.Partitions {
			if slices.Contains(pi.Replicas, me) {
				desired[engine.TopicPartition{Topic: t.Name, Partition: int32(p)}] = want{t, pi}
			}
		}
	}
	// Partitions no longer here: the topic was deleted (or the replica moved).
	rm.mu.Lock()
	var gone []*replica
	for tp, r := range rm.parts {
		w, ok := desired[tp]
		if !ok || w.t.ID != r.topic {
			gone = append(gone, r)
			delete(rm.parts, tp)
			rm.gen.Add(1)
		}
	}
	rm.mu.Unlock()
	var follows []replication.Follow
	var leaders []*replica
	for tp, w := range desired {
		r := rm.get(tp)
		if r == nil {
			if _, have := b.logs.Log(tp); !have && b.logs.AnyDirOffline() && !isNewPartition(w.info) {
				// jbod (logdirs.go): its log may be in the offline dir; never start it over empty.
				continue
			}
			l, err := rm.ensureLog(tp, w.t)
			if err != nil {
				complete = false
				rm.createFailures.Add(1)
				slog.Error("creating partition log; retrying later", "topic", tp.Topic, "partition", tp.Partition, "err", err)
				continue
			}
			r = &replica{rm: rm, tp: tp, topic: w.t.ID, log: l, epoch: -1}
			r.local.Store(len(w.info.Replicas) == 1)
			rm.mu.Lock()
			rm.parts[tp] = r
			rm.gen.Add(1)
			rm.mu.Unlock()
		}
		if r.applied != w.t {
			// Topic configs altered through any broker reach this one's logs here, and a
			// reassignment's change of the replica count (to or from one replica).
			r.local.Store(len(w.info.Replicas) == 1)
			cfg := b.cfg.LogConfig(w.t.Configs)
			cfg.LocalHighWatermark = r.local.Load()
			r.log.SetConfig(cfg)
			r.applied = w.t
			r.setThrottles(w.t.Configs, me)
		}
		if w.info.Leader == me {
			leaders = append(leaders, r)
		} else if w.info.Leader >= 0 && r.log.DirErr() == nil { // jbod: not from an offline dir
			follows = append(follows, replication.Follow{Topic: tp.Topic, Partition: tp.Partition, Leader: w.info.Leader, LeaderEpoch: w.info.LeaderEpoch, Log: r.log, Throttled: &r.followerThrottled})
		}
	}
	// First stop fetching what this broker now leads, then take the leaderships.
	rm.fetchers.Set(follows)
	for tp, w := range desired {
		if r := rm.get(tp); r != nil {
			r.apply(w.info)
		}
	}
	for _, r := range gone {
		r.roleMu.Lock()
		r.mu.Lock()
		r.resignLocked()
		r.mu.Unlock()
		r.roleMu.Unlock()
		if _, still := img.TopicsByID[r.topic]; still {
			// A partition reassignment moved the replica away: its log goes as a deleted
			// topic's does (Kafka's StopReplica with deletion).
			slog.Info("replica reassigned away from this broker; deleting its log", "topic", r.tp.Topic, "partition", r.tp.Partition)
		}
		if err := b.logs.DeleteLog(r.tp); err != nil {
			slog.Error("deleting partition log of a deleted topic", "topic", r.tp.Topic, "partition", r.tp.Partition, "err", err)
		}
	}
	if len(gone) > 0 {
		if err := b.logs.Checkpoint(); err != nil {
			slog.Error("writing checkpoints after deleting partitions", "err", err)
		}
	}
	b.groupsImageChanged(img)
	b.txnImageChanged(img)
	b.shareStateImageChanged(img)
	b.adminImageChanged(img) // dynamic broker configs and features of the metadata log (features.go)
	_ = leaders
	return complete
}

// setThrottles takes the replica's KIP-73 throttles from its topic's configs (validated when
// set; an unparsable value throttles nothing).
func (r *replica) setThrottles(configs map[string]string, me int32) {
	lt, _ := replication.ParseThrottledReplicas(configs[keyLeaderReplicationThrottledReplicas.Name()])
	ft, _ := replication.ParseThrottledReplicas(configs[keyFollowerReplicationThrottledReplicas.Name()])
	r.leaderThrottled.Store(lt.Contains(r.tp.Partition, me))
	r.followerThrottled.Store(ft.Contains(r.tp.Partition, me))
}

// leaderThrottles reports whether this leader's answers to follower id's fetches count against
// leader.replication.throttled.rate: the replica is listed in leader.replication.throttled.replicas
// and the follower is not in the ISR (KIP-73).
func (r *replica) leaderThrottles(id int32) bool {
	if !r.leaderThrottled.Load() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return !slices.Contains(r.info.ISR, id)
}

// ensureLog returns tp's log, creating it; a log left by an earlier topic of the same name (a
// different topic id) is replaced.
func (rm *replicaManager) ensureLog(tp engine.TopicPartition, t *controller.TopicInfo) (*engine.Log, error) {
	logs := rm.b.logs
	if l, ok := logs.Log(tp); ok {
		id, known := logs.TopicID(tp)
		if !known || id == t.ID || id == ([16]byte{}) {
			return l, nil
		}
		slog.Info("replacing the log of an earlier topic with the same name", "topic", tp.Topic, "partition", tp.Partition)
		if err := logs.DeleteLog(tp); err != nil {
			return nil, err
		}
	}
	return logs.CreateLog(tp, t.ID)
}

// apply takes the partition's state from the image.
func (r *replica) apply(info controller.PartitionInfo) {
	me := r.rm.b.nodeID
	r.roleMu.Lock()
	defer r.roleMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.info = info
	if info.Leader != me {
		if r.leading {
			r.resignLocked()
			slog.Info("leadership ended", "topic", r.tp.Topic, "partition", r.tp.Partition, "leader", info.Leader, "leader_epoch", info.LeaderEpoch)
		}
		if r.epoch != info.LeaderEpoch {
			r.epoch = info.LeaderEpoch
			r.rm.gen.Add(1)
		}
		return
	}
	if r.leading && r.epoch == info.LeaderEpoch && (r.state != nil) == !r.local.Load() {
		if r.state != nil {
			r.state.ApplyPartition(info.ISR, info.LeaderEpoch, info.PartitionEpoch)
			r.state.SetReplicas(info.Replicas) // a partition reassignment adds and removes replicas
			r.publishHWLocked()
		}
		return
	}
	sameEpoch := r.leading && r.epoch == info.LeaderEpoch // the leader state is rebuilt, the epoch goes on
	r.resignLocked()
	if err := r.log.BecomeLeader(info.LeaderEpoch); err != nil {
		slog.Error("becoming leader", "topic", r.tp.Topic, "partition", r.tp.Partition, "err", err)
		return
	}
	if !sameEpoch {
		r.epochStart = r.log.LogEndOffset() // a new epoch starts here (the same epoch keeps its start)
	}
	r.leading, r.epoch = true, info.LeaderEpoch
	r.rm.gen.Add(1)
	if !r.local.Load() {
		l := r.log
		r.state = replication.NewLeaderState(replication.LeaderConfig{
			LocalID: me, Replicas: info.Replicas, ISR: info.ISR, LeaderEpoch: info.LeaderEpoch,
			PartitionEpoch: info.PartitionEpoch, LagTimeMax: keyReplicaLagTimeMax.Get(r.rm.b.cfg),
		}, r.localEnd(), l.HighWatermark(), r.epochStart, time.Now())
		r.stopWatch = make(chan struct{})
		go r.watchLocal(r.stopWatch)
	} else {
		// A single replica: everything durable (or appended, page-cache policy) is committed.
		end := r.log.LogEndOffset()
		if r.log.Config().Durable() {
			end = r.log.RecoveryPoint()
		}
		_ = r.log.AdvanceHighWatermark(end)
	}
	slog.Info("leading partition", "topic", r.tp.Topic, "partition", r.tp.Partition, "leader_epoch", info.LeaderEpoch, "isr", info.ISR)
	r.kickLocked()
}

// resignLocked drops the leader state. Requires r.mu.
func (r *replica) resignLocked() {
	if r.stopWatch != nil {
		close(r.stopWatch)
		r.stopWatch = nil
	}
	wasLeading := r.leading
	r.state, r.leading = nil, false
	if wasLeading {
		r.rm.gen.Add(1)
		r.kickLocked()
	}
}

// kickLocked wakes everyone waiting on the high watermark (produce waits re-check the role).
func (r *replica) kickLocked() { r.log.WakeHighWatermarkWaiters() }

// localEnd is the leader's own end that counts toward the high watermark.
func (r *replica) localEnd() int64 {
	if r.log.Config().Durable() {
		return r.log.RecoveryPoint()
	}
	return r.log.LogEndOffset()
}

// watchLocal feeds the leader's own progress (durable end, or log end) into the leader state.
func (r *replica) watchLocal(stop chan struct{}) {
	for {
		var ch <-chan struct{}
		if r.log.Config().Durable() {
			ch = r.log.FlushedChanged()
		} else {
			ch = r.log.EndChanged()
		}
		r.mu.Lock()
		if r.state != nil && r.stopWatch == stop {
			if r.state.UpdateLocal(r.localEnd()) {
				r.publishHWLocked()
			}
		}
		r.mu.Unlock()
		select {
		case <-ch:
		case <-stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// publishHWLocked moves the log's high watermark to the leader state's. Requires r.mu.
func (r *replica) publishHWLocked() {
	if r.state != nil {
		_ = r.log.AdvanceHighWatermark(r.state.HighWatermark())
	}
}

// followerFetched records a follower's fetch offset (its durable end). It returns an error for
// a fetch this broker must refuse (not the leader, or another leader epoch).
func (r *replica) followerFetched(id int32, offset int64, currentEpoch int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkLeaderLocked(currentEpoch); err != nil {
		return err
	}
	if r.state == nil || offset > r.log.LogEndOffset() {
		return nil // past the log end: the read answers OFFSET_OUT_OF_RANGE
	}
	hw, change := r.state.UpdateFollower(id, offset, time.Now())
	if hw {
		r.publishHWLocked()
	}
	if change != nil {
		r.proposeLocked(change)
	}
	return nil
}

// checkLeaderLocked validates a request's current leader epoch against this leadership.
func (r *replica) checkLeaderLocked(currentEpoch int32) error {
	if err := r.log.DirErr(); err != nil { // jbod: its log dir is offline
		return fmt.Errorf("%s-%d: %w", r.tp.Topic, r.tp.Partition, err)
	}
	if !r.leading {
		return fmt.Errorf("%s-%d is led by broker %d: %w", r.tp.Topic, r.tp.Partition, r.info.Leader, kerr.NotLeaderForPartition)
	}
	switch {
	case currentEpoch < 0:
	case currentEpoch < r.epoch:
		return fmt.Errorf("leader epoch %d is older than %d: %w", currentEpoch, r.epoch, kerr.FencedLeaderEpoch)
	case currentEpoch > r.epoch:
		return fmt.Errorf("leader epoch %d is newer than %d: %w", currentEpoch, r.epoch, kerr.UnknownLeaderEpoch)
	}
	return nil
}

// checkLeader is checkLeaderLocked for request handlers.
func (r *replica) checkLeader(currentEpoch int32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.checkLeaderLocked(currentEpoch)
}

// offsetsAvailable returns OFFSET_NOT_AVAILABLE while this leader's high watermark is below the
// start offset of its leader epoch (Kafka's Partition.fetchOffsetForTimestamp): an earlier
// leader may have exposed a higher high watermark, and answering this one's would move a
// consumer's LATEST backwards. It clears once the ISR has the records up to the epoch start.
func (r *replica) offsetsAvailable() error {
	r.mu.Lock()
	start, leading := r.epochStart, r.leading
	r.mu.Unlock()
	if hw := r.log.HighWatermark(); leading && hw < start {
		return fmt.Errorf("the high watermark %d of %s-%d is below the start offset %d of its leader epoch: %w", hw, r.tp.Topic, r.tp.Partition, start, kerr.OffsetNotAvailable)
	}
	return nil
}

// leaderEpoch returns the leader epoch if this broker leads the partition.
func (r *replica) leaderEpoch() (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch, r.leading
}

// isrSize returns the ISR size for acks=all checks (a single replica: 1).
func (r *replica) isrSize() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.isrSizeLocked()
}

// isrSizeLocked is isrSize. Requires r.mu.
func (r *replica) isrSizeLocked() int {
	if r.state != nil {
		return r.state.ISRSize()
	}
	return len(r.info.ISR)
}

// effectiveMinISR is min.insync.replicas (configured) capped at the partition's replica count,
// Kafka's effectiveMinIsr (KAFKA-15583): a min.insync.replicas above the replication factor
// asks for the whole replica set, not for the impossible. acks=all compares the ISR with it,
// before the append (NOT_ENOUGH_REPLICAS) and once the high watermark covers the batch
// (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
func (r *replica) effectiveMinISR(configured int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.effectiveMinISRLocked(configured)
}

// effectiveMinISRLocked is effectiveMinISR. Requires r.mu.
func (r *replica) effectiveMinISRLocked(configured int) int {
	return max(1, min(configured, len(r.info.Replicas)))
}

// appendCheck returns, under one acquisition of r.mu, what a Produce checks before appending
// (00_produce.go): the leader epoch and whether this broker leads (leaderEpoch), and for acks=all
// the effective min.insync.replicas of configuredMinISR (effectiveMinISR) and the ISR size
// (isrSize). Without acksAll, minISR is 1 and isrSize 0 (not counted).
func (r *replica) appendCheck(acksAll bool, configuredMinISR int) (epoch int32, leading bool, minISR, isrSize int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	minISR = 1
	if acksAll {
		minISR, isrSize = r.effectiveMinISRLocked(configuredMinISR), r.isrSizeLocked()
	}
	return r.epoch, r.leading, minISR, isrSize
}

// tick runs the ISR shrink check of every led replicated partition.
func (rm *replicaManager) tick() {
	rm.mu.RLock()
	rs := make([]*replica, 0, len(rm.parts))
	for _, r := range rm.parts {
		rs = append(rs, r)
	}
	rm.mu.RUnlock()
	now := time.Now()
	for _, r := range rs {
		r.mu.Lock()
		if r.state != nil {
			if c := r.state.Tick(now); c != nil {
				r.proposeLocked(c)
			}
		}
		r.mu.Unlock()
	}
}

// waitCommitted waits until the high watermark covers upTo while this broker still leads at
// epoch (acks=all), or deadline.
func (r *replica) waitCommitted(upTo int64, epoch int32, minISR int, deadline <-chan time.Time, closing <-chan struct{}) error {
	for {
		ch := r.log.HighWatermarkChanged()
		r.mu.Lock()
		leading, cur := r.leading, r.epoch
		isr := len(r.info.ISR)
		if r.state != nil {
			isr = len(r.state.ISR())
		}
		r.mu.Unlock()
		if !leading || cur != epoch {
			return fmt.Errorf("leadership of %s-%d changed before offset %d was committed: %w", r.tp.Topic, r.tp.Partition, upTo-1, kerr.NotLeaderForPartition)
		}
		if r.log.HighWatermark() >= upTo {
			if isr < minISR {
				return fmt.Errorf("ISR of %s-%d shrank to %d, below min.insync.replicas %d: %w", r.tp.Topic, r.tp.Partition, isr, minISR, kerr.NotEnoughReplicasAfterAppend)
			}
			return nil
		}
		select {
		case <-ch:
		case <-deadline:
			return fmt.Errorf("offset %d of %s-%d not replicated in time: %w", upTo-1, r.tp.Topic, r.tp.Partition, kerr.RequestTimedOut)
		case <-closing:
			return fmt.Errorf("connection closing: %w", kerr.RequestTimedOut)
		}
	}
}

// appendAsLeader appends a producer's batch if this broker leads the partition, holding the
// role for the duration of the append. It returns the leader epoch appended under.
func (r *replica) appendAsLeader(batch []byte) (engine.AppendInfo, int32, error) {
	r.roleMu.RLock()
	defer r.roleMu.RUnlock()
	r.mu.Lock()
	leading, epoch := r.leading, r.epoch
	r.mu.Unlock()
	if !leading {
		return engine.AppendInfo{}, -1, fmt.Errorf("this broker does not lead %s-%d: %w", r.tp.Topic, r.tp.Partition, kerr.NotLeaderForPartition)
	}
	info, err := r.log.Append(batch)
	return info, epoch, err
}
