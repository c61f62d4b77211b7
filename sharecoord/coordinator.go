package sharecoord

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/kafkahash"
	"github.com/weir-mq/weir/sharestate"
)

// Store is the coordinator's view of __share_group_state. The broker implements it over its
// partition logs; tests use an in-memory one.
type Store interface {
	// Partitions is the partition count of __share_group_state (the existing topic's, or
	// share.coordinator.state.topic.num.partitions).
	Partitions() int32
	// Log returns partition p's log (this broker leads p when the coordinator asks).
	Log(p int32) (Log, error)
}

// Log is one partition of __share_group_state (the method set of txncoord.Log and
// coordinator.OffsetsLog, so the broker's one implementation serves all three).
type Log interface {
	// Append appends one uncompressed RecordBatch v2 and returns the offset after it.
	Append(batch []byte) (nextOffset int64, err error)
	// AwaitDurable blocks until every offset below upTo is durable and replicated as acks=all
	// requires.
	AwaitDurable(upTo int64) error
	// ReadBatches calls fn with every stored batch from the log start to the log end.
	ReadBatches(fn func(batch []byte) error) error
}

// Config configures a Coordinator. Zero values take Kafka's defaults.
type Config struct {
	Store  Store
	Logger *slog.Logger
	// Now is the wall clock (nil: internal/clock.Now); it stamps CreateTimestamp/WriteTimestamp and batches.
	Now func() time.Time
	// UpdatesPerSnapshot is share.coordinator.snapshot.update.records.per.snapshot (Kafka's
	// default 500): after that many ShareUpdate records for a share partition the next write
	// is a ShareSnapshot. 0 makes every write a snapshot; set it negative for 0.
	UpdatesPerSnapshot int
	// MaxBatches bounds the state batches of one share partition's state, and of one write
	// (default 10000; beyond it the write answers INVALID_REQUEST). Kafka has no such bound;
	// weir's keeps one record, and the memory of one state, finite.
	MaxBatches int
	// PartitionExists reports whether the topic id and partition exist (nil: all do). Kafka's
	// coordinator answers UNKNOWN_TOPIC_OR_PARTITION for one not in its metadata image.
	PartitionExists func(topicID [16]byte, partition int32) bool
}

// uninitializedError is the error Read and Write return for a share partition with no state:
// it is both sharestate.ErrNotInitialized and kerr.InvalidRequest (Kafka's answer) to
// errors.Is and errors.As.
type uninitializedError struct{ op string }

func (e uninitializedError) Error() string {
	return e.op + " operation on uninitialized share partition not allowed."
}

func (e uninitializedError) Is(target error) bool {
	return target == sharestate.ErrNotInitialized || target == kerr.InvalidRequest
}

func (e uninitializedError) As(target any) bool {
	if p, ok := target.(**kerr.Error); ok {
		*p = kerr.InvalidRequest
		return true
	}
	return false
}

// StateTopic is Kafka's internal topic of share-partition state.
const StateTopic = "__share_group_state"

// CoordinatorKey is Kafka's SharePartitionKey.asCoordinatorKey: "group:topicId:partition",
// the topic id in its base64 (URL-safe, unpadded) string form. FindCoordinator key type 2
// carries it.
func CoordinatorKey(k sharestate.Key) string {
	return k.Group + ":" + base64.RawURLEncoding.EncodeToString(k.TopicID[:]) + ":" + strconv.Itoa(int(k.Partition))
}

// ParseCoordinatorKey reads a key of CoordinatorKey's form (the group id may itself hold
// colons: the last two fields are the topic id and the partition, as Kafka splits it).
func ParseCoordinatorKey(s string) (sharestate.Key, error) {
	var k sharestate.Key
	j := lastColon(s)
	if j < 0 {
		return k, fmt.Errorf("share coordinator key %q: no partition", s)
	}
	p, err := strconv.ParseInt(s[j+1:], 10, 32)
	if err != nil || p < 0 {
		return k, fmt.Errorf("share coordinator key %q: bad partition", s)
	}
	i := lastColon(s[:j])
	if i <= 0 {
		return k, fmt.Errorf("share coordinator key %q: no group id or topic id", s)
	}
	id, err := base64.RawURLEncoding.DecodeString(s[i+1 : j])
	if err != nil || len(id) != 16 {
		return k, fmt.Errorf("share coordinator key %q: bad topic id", s)
	}
	k.Group = s[:i]
	copy(k.TopicID[:], id)
	k.Partition = int32(p)
	return k, nil
}

func lastColon(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ':' {
			return i
		}
	}
	return -1
}

// PartitionFor is the __share_group_state partition of k: abs(hashCode(CoordinatorKey(k))) %
// partitions, as Kafka's ShareCoordinatorService.partitionFor.
func PartitionFor(k sharestate.Key, partitions int32) int32 {
	return kafkahash.PartitionFor(CoordinatorKey(k), partitions)
}

// Coordinator is the share coordinator of one broker: the state of every share partition
// whose __share_group_state partition this broker leads. It implements sharestate.Persister
// for those keys (NOT_COORDINATOR for the others).
type Coordinator struct {
	cfg   Config
	log   *slog.Logger
	parts int32

	mu     sync.Mutex
	owned  map[int32]*ownedPart // guarded by mu; a partition absent is not led here
	closed bool                 // guarded by mu
	wg     sync.WaitGroup       // the load goroutines
}

// ownedPart is one __share_group_state partition this coordinator leads.
type ownedPart struct {
	p     int32
	epoch int32 // the partition's leader epoch
	// loading and failed are guarded by Coordinator.mu.
	loading bool
	failed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	loaded  chan struct{} // closed when the load ends

	// wmu serializes the operations on this partition's states and guards states and log: a
	// write holds it from its checks through the append and the wait for durability, so
	// records are applied in log order. Never taken while holding Coordinator.mu.
	wmu    sync.Mutex
	log    Log
	states map[sharestate.Key]*shareState
}

// shareState is one share partition's state as the records built it.
type shareState struct {
	snapshotEpoch int32
	stateEpoch    int32
	leaderEpoch   int32
	startOffset   int64
	dcc           int32
	createTs      int64
	writeTs       int64
	batches       []sharestate.Batch
	// updates counts the ShareUpdate records since the last ShareSnapshot.
	updates int
}

// New returns a coordinator that leads no partition until Elect.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Store == nil {
		return nil, errors.New("sharecoord: Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	switch {
	case cfg.UpdatesPerSnapshot == 0:
		cfg.UpdatesPerSnapshot = 500
	case cfg.UpdatesPerSnapshot < 0:
		cfg.UpdatesPerSnapshot = 0
	}
	if cfg.MaxBatches <= 0 {
		cfg.MaxBatches = 10000
	}
	parts := cfg.Store.Partitions()
	if parts <= 0 {
		return nil, fmt.Errorf("sharecoord: %d share state partitions", parts)
	}
	return &Coordinator{cfg: cfg, log: cfg.Logger, parts: parts, owned: map[int32]*ownedPart{}}, nil
}

// Partitions is the partition count of __share_group_state.
func (c *Coordinator) Partitions() int32 { return c.parts }

// PartitionFor is the __share_group_state partition of k.
func (c *Coordinator) PartitionFor(k sharestate.Key) int32 { return PartitionFor(k, c.parts) }

// MaxBatches is the bound on batches per state and per write.
func (c *Coordinator) MaxBatches() int { return c.cfg.MaxBatches }

// Close resigns every partition. Operations after Close answer NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for p, op := range c.owned {
		op.cancel()
		delete(c.owned, p)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Owns reports whether this coordinator leads k's partition (loaded or loading).
func (c *Coordinator) Owns(k sharestate.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && c.owned[c.PartitionFor(k)] != nil
}

// partition returns k's loaded partition with its wmu held, or Kafka's error while it is not
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE).
func (c *Coordinator) partition(k sharestate.Key) (*ownedPart, error) {
	p := c.PartitionFor(k)
	c.mu.Lock()
	op := c.owned[p]
	var err error
	switch {
	case c.closed || op == nil:
		err = kerr.NotCoordinator
	case op.loading:
		err = kerr.CoordinatorLoadInProgress
	case op.failed:
		err = kerr.CoordinatorNotAvailable
	}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	op.wmu.Lock()
	if !c.current(op) {
		op.wmu.Unlock()
		return nil, kerr.NotCoordinator
	}
	return op, nil
}

// current reports whether op is still the led partition.
func (c *Coordinator) current(op *ownedPart) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && c.owned[op.p] == op
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

func (c *Coordinator) exists(k sharestate.Key) bool {
	return c.cfg.PartitionExists == nil || c.cfg.PartitionExists(k.TopicID, k.Partition)
}

// validKey checks what Kafka's coordinator checks of every key.
func validKey(k sharestate.Key) error {
	switch {
	case k.Group == "":
		return fmt.Errorf("group id must not be empty: %w", kerr.InvalidRequest)
	case len(k.Group) > 32767:
		return fmt.Errorf("group id longer than 32767 bytes: %w", kerr.InvalidRequest)
	case k.TopicID == [16]byte{}:
		return fmt.Errorf("topic id must not be zero: %w", kerr.InvalidRequest)
	case k.Partition < 0:
		return fmt.Errorf("the partition id cannot be a negative number: %w", kerr.InvalidRequest)
	}
	return nil
}

// appendRecords appends recs to op's log and waits until they are durable (acks=all), with
// op.wmu held by the caller. It returns Kafka's error for the request when that fails.
func (c *Coordinator) appendRecords(op *ownedPart, recs []kv) error {
	next, err := op.log.Append(buildBatch(c.nowMs(), recs))
	if err == nil {
		err = op.log.AwaitDurable(next)
	}
	if err != nil {
		c.log.Warn("appending to __share_group_state failed", "partition", op.p, "err", err)
		return fmt.Errorf("appending to %s-%d: %v: %w", StateTopic, op.p, err, appendError(err))
	}
	if !c.current(op) {
		return kerr.NotCoordinator
	}
	return nil
}

// appendError maps a log append's failure to the coordinator's answer, as Kafka's coordinator
// runtime does (CoordinatorRuntime / Errors mapping for the share coordinator).
func appendError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
			return kerr.CoordinatorNotAvailable
		case kerr.NotLeaderForPartition, kerr.NotCoordinator, kerr.KafkaStorageError:
			return kerr.NotCoordinator
		}
		return kerr.UnknownServerError
	}
	return kerr.NotCoordinator
}

// Initialize is InitializeShareGroupState for one share partition: a ShareSnapshot record with
// the state epoch and start offset, no batches, leader epoch -1. A state epoch below the
// stored one is FENCED_STATE_EPOCH. An initialization without a start offset (-1, the group
// coordinator's for a partition it assigns) of a share partition that already has one (a
// share-partition leader initialized it on its first fetch) changes nothing: overwriting it
// would lose the acknowledgements written since.
func (c *Coordinator) Initialize(_ context.Context, k sharestate.Key, stateEpoch int32, startOffset int64) error {
	if err := validKey(k); err != nil {
		return err
	}
	if stateEpoch < 0 {
		return fmt.Errorf("the state epoch cannot be a negative number: %w", kerr.InvalidRequest)
	}
	if startOffset < -1 {
		return fmt.Errorf("start offset %d: %w", startOffset, kerr.InvalidRequest)
	}
	op, err := c.partition(k)
	if err != nil {
		return err
	}
	defer op.wmu.Unlock()
	if !c.exists(k) {
		return kerr.UnknownTopicOrPartition
	}
	now := c.nowMs()
	v := &snapshotValue{StateEpoch: stateEpoch, LeaderEpoch: -1, StartOffset: startOffset, DeliveryCompleteCount: -1,
		CreateTimestamp: now, WriteTimestamp: now}
	if s := op.states[k]; s != nil {
		if startOffset == -1 && s.startOffset >= 0 && stateEpoch >= s.stateEpoch {
			// The group coordinator initializes the share partitions it assigns with no start
			// offset (the leader resolves it); a share-partition leader that fetched the
			// partition first initialized it already, with its start offset, and may have
			// written acknowledgements since: they stay.
			return nil
		}
		if stateEpoch < s.stateEpoch {
			return fmt.Errorf("initialize request state epoch %d is smaller than last recorded %d: %w", stateEpoch, s.stateEpoch, kerr.FencedStateEpoch)
		}
		v.SnapshotEpoch = s.snapshotEpoch + 1
	}
	if err := c.appendRecords(op, []kv{{Key: encodeKey(keySnapshot, k), Value: encodeSnapshot(v)}}); err != nil {
		return err
	}
	op.applySnapshot(k, v)
	return nil
}

// Read is ReadShareGroupState for one share partition: the state, after recording leaderEpoch
// as the current leader's (a ShareUpdate record, durable before the answer, when it is newer;
// -1 reads without it). A leader epoch below the stored one is FENCED_LEADER_EPOCH; a share
// partition never initialized is INVALID_REQUEST (and sharestate.ErrNotInitialized).
func (c *Coordinator) Read(_ context.Context, k sharestate.Key, leaderEpoch int32) (sharestate.State, error) {
	if err := validKey(k); err != nil {
		return sharestate.State{}, err
	}
	if leaderEpoch < -1 {
		return sharestate.State{}, fmt.Errorf("the leader epoch cannot be a negative number: %w", kerr.InvalidRequest)
	}
	op, err := c.partition(k)
	if err != nil {
		return sharestate.State{}, err
	}
	defer op.wmu.Unlock()
	if !c.exists(k) {
		return sharestate.State{}, kerr.UnknownTopicOrPartition
	}
	s := op.states[k]
	if s == nil {
		return sharestate.State{}, uninitializedError{"Read"}
	}
	if leaderEpoch != -1 && leaderEpoch < s.leaderEpoch {
		return sharestate.State{}, fmt.Errorf("read request leader epoch %d is smaller than last recorded %d: %w", leaderEpoch, s.leaderEpoch, kerr.FencedLeaderEpoch)
	}
	if leaderEpoch > s.leaderEpoch {
		// The new leader's epoch is made durable so a deposed leader stays fenced after a
		// coordinator failover.
		if err := c.writeLocked(op, k, s, s.stateEpoch, leaderEpoch, -1, s.dcc, nil); err != nil {
			return sharestate.State{}, err
		}
		s = op.states[k]
	}
	return s.export(), nil
}

// Write is WriteShareGroupState for one share partition: st.Batches laid over the stored ones,
// the start offset moved (unless -1), recorded as a ShareUpdate (or, every
// UpdatesPerSnapshot updates, a ShareSnapshot of the merged state), durable before it returns.
// Fenced by leader epoch and state epoch; INVALID_REQUEST for a share partition never
// initialized.
func (c *Coordinator) Write(_ context.Context, k sharestate.Key, st sharestate.State) error {
	if err := validKey(k); err != nil {
		return err
	}
	if len(st.Batches) > c.cfg.MaxBatches {
		return fmt.Errorf("%d state batches in one write, more than %d: %w", len(st.Batches), c.cfg.MaxBatches, kerr.InvalidRequest)
	}
	for _, b := range st.Batches {
		if b.FirstOffset < 0 || b.LastOffset < b.FirstOffset {
			return fmt.Errorf("state batch %d-%d: %w", b.FirstOffset, b.LastOffset, kerr.InvalidRequest)
		}
	}
	if st.StartOffset < -1 {
		return fmt.Errorf("start offset %d: %w", st.StartOffset, kerr.InvalidRequest)
	}
	op, err := c.partition(k)
	if err != nil {
		return err
	}
	defer op.wmu.Unlock()
	if !c.exists(k) {
		return kerr.UnknownTopicOrPartition
	}
	s := op.states[k]
	if s == nil {
		return uninitializedError{"Write"}
	}
	if st.LeaderEpoch < s.leaderEpoch {
		return fmt.Errorf("write request leader epoch %d is smaller than last recorded %d: %w", st.LeaderEpoch, s.leaderEpoch, kerr.FencedLeaderEpoch)
	}
	if st.StateEpoch < s.stateEpoch {
		return fmt.Errorf("write request state epoch %d is smaller than last recorded %d: %w", st.StateEpoch, s.stateEpoch, kerr.FencedStateEpoch)
	}
	return c.writeLocked(op, k, s, s.stateEpoch, st.LeaderEpoch, st.StartOffset, st.DeliveryCompleteCount, st.Batches)
}

// writeLocked records a write over s (op.wmu held): a ShareUpdate, or a ShareSnapshot of the
// merged state once UpdatesPerSnapshot updates were written since the last snapshot.
func (c *Coordinator) writeLocked(op *ownedPart, k sharestate.Key, s *shareState, stateEpoch, leaderEpoch int32, startOffset int64, dcc int32, batches []sharestate.Batch) error {
	merged := s.merge(leaderEpoch, startOffset, dcc, batches)
	if len(merged.batches) > c.cfg.MaxBatches {
		return fmt.Errorf("the state would hold %d batches, more than %d: %w", len(merged.batches), c.cfg.MaxBatches, kerr.InvalidRequest)
	}
	var rec kv
	var apply func()
	if s.updates >= c.cfg.UpdatesPerSnapshot {
		v := &snapshotValue{SnapshotEpoch: s.snapshotEpoch + 1, StateEpoch: stateEpoch, LeaderEpoch: merged.leaderEpoch,
			StartOffset: merged.startOffset, DeliveryCompleteCount: merged.dcc, CreateTimestamp: s.createTs,
			WriteTimestamp: c.nowMs(), Batches: merged.batches}
		rec = kv{Key: encodeKey(keySnapshot, k), Value: encodeSnapshot(v)}
		apply = func() { op.applySnapshot(k, v) }
	} else {
		v := &updateValue{SnapshotEpoch: s.snapshotEpoch, LeaderEpoch: leaderEpoch, StartOffset: startOffset,
			DeliveryCompleteCount: dcc, Batches: batches}
		rec = kv{Key: encodeKey(keyUpdate, k), Value: encodeUpdate(v)}
		apply = func() { op.applyUpdate(k, v) }
	}
	if err := c.appendRecords(op, []kv{rec}); err != nil {
		return err
	}
	apply()
	return nil
}

// Delete is DeleteShareGroupState for one share partition: tombstones for its snapshot and
// update keys. A share partition with no state is already deleted.
func (c *Coordinator) Delete(_ context.Context, k sharestate.Key) error {
	if err := validKey(k); err != nil {
		return err
	}
	op, err := c.partition(k)
	if err != nil {
		return err
	}
	defer op.wmu.Unlock()
	if op.states[k] == nil {
		return nil
	}
	if err := c.appendRecords(op, []kv{{Key: encodeKey(keySnapshot, k)}, {Key: encodeKey(keyUpdate, k)}}); err != nil {
		return err
	}
	delete(op.states, k)
	return nil
}

// ReadSummary is ReadShareGroupStateSummary for one share partition: its epochs, start offset
// and delivery-complete count without the batches. It neither records nor checks a leader
// epoch (Kafka's ShareCoordinatorShard.readStateSummary does not fence: the group coordinator
// reads summaries for DescribeShareGroupOffsets whatever the partition's leader epoch).
// sharestate.ErrNotInitialized when there is no state.
func (c *Coordinator) ReadSummary(_ context.Context, k sharestate.Key, leaderEpoch int32) (sharestate.Summary, error) {
	if err := validKey(k); err != nil {
		return sharestate.Summary{}, err
	}
	op, err := c.partition(k)
	if err != nil {
		return sharestate.Summary{}, err
	}
	defer op.wmu.Unlock()
	if !c.exists(k) {
		return sharestate.Summary{}, kerr.UnknownTopicOrPartition
	}
	s := op.states[k]
	if s == nil {
		return sharestate.Summary{}, sharestate.ErrNotInitialized
	}
	return sharestate.Summary{StateEpoch: s.stateEpoch, LeaderEpoch: s.leaderEpoch, StartOffset: s.startOffset, DeliveryCompleteCount: s.dcc}, nil
}

// export copies s out as a sharestate.State.
func (s *shareState) export() sharestate.State {
	return sharestate.State{StateEpoch: s.stateEpoch, LeaderEpoch: s.leaderEpoch, StartOffset: s.startOffset,
		DeliveryCompleteCount: s.dcc, Batches: append([]sharestate.Batch(nil), s.batches...)}
}

// merge returns s with an update applied: leader epoch, start offset (-1: unchanged), the
// delivery-complete count and batches laid over the stored ones (sharestate.Merge), then
// adjacent batches of equal state and count joined (Kafka's PersisterStateBatchCombiner).
func (s *shareState) merge(leaderEpoch int32, startOffset int64, dcc int32, batches []sharestate.Batch) shareState {
	out := *s
	out.leaderEpoch = leaderEpoch
	if startOffset != -1 {
		out.startOffset = startOffset
	}
	out.dcc = dcc
	floor := out.startOffset
	if floor < 0 {
		floor = 0
	}
	out.batches = coalesce(sharestate.Merge(s.batches, batches, floor))
	return out
}

// coalesce joins adjacent batches of the same delivery state and count, in place.
func coalesce(bs []sharestate.Batch) []sharestate.Batch {
	out := bs[:0]
	for _, b := range bs {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if last.LastOffset+1 == b.FirstOffset && last.DeliveryState == b.DeliveryState && last.DeliveryCount == b.DeliveryCount {
				last.LastOffset = b.LastOffset
				continue
			}
		}
		out = append(out, b)
	}
	return out
}

// applySnapshot replaces k's state with a snapshot (op.wmu held, or during load).
func (op *ownedPart) applySnapshot(k sharestate.Key, v *snapshotValue) {
	op.states[k] = &shareState{snapshotEpoch: v.SnapshotEpoch, stateEpoch: v.StateEpoch, leaderEpoch: v.LeaderEpoch,
		startOffset: v.StartOffset, dcc: v.DeliveryCompleteCount, createTs: v.CreateTimestamp, writeTs: v.WriteTimestamp,
		batches: coalesce(append([]sharestate.Batch(nil), v.Batches...))}
}

// applyUpdate lays an update over k's state (op.wmu held, or during load). An update with no
// snapshot before it (the snapshot was compacted away by a tombstone) is ignored, as Kafka's
// replay does.
func (op *ownedPart) applyUpdate(k sharestate.Key, v *updateValue) bool {
	s := op.states[k]
	if s == nil {
		return false
	}
	m := s.merge(v.LeaderEpoch, v.StartOffset, v.DeliveryCompleteCount, v.Batches)
	m.updates = s.updates + 1
	op.states[k] = &m
	return true
}
