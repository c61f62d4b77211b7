package txncoord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/internal/clock"
)

// Store is the coordinator's view of __transaction_state. The broker implements it over its
// partition logs; tests use an in-memory one or engine logs.
type Store interface {
	// Partitions is the partition count of __transaction_state (the existing topic's, or
	// transaction.state.log.num.partitions).
	Partitions() int32
	// Log returns partition p's log (this broker leads p when the coordinator asks).
	Log(p int32) (Log, error)
}

// Log is one partition of __transaction_state. It has the method set of coordinator.OffsetsLog,
// so one broker type can serve both coordinators. Append may be called from several goroutines.
type Log interface {
	// Append appends one uncompressed RecordBatch v2 (offsets are assigned in place) and returns
	// the offset after it, once it is in the page cache.
	Append(batch []byte) (nextOffset int64, err error)
	// AwaitDurable blocks until every offset below upTo is durable and replicated as acks=all
	// requires (Kafka appends to __transaction_state with acks=-1).
	AwaitDurable(upTo int64) error
	// ReadBatches calls fn with every stored batch from the log start to the log end, in offset
	// order; fn must not retain the batch.
	ReadBatches(fn func(batch []byte) error) error
}

// ProducerIDSource hands out producer ids (Kafka's ProducerIdManager: blocks of ids allocated by
// the controller). An error is answered to the client: a *kerr.Error as it is (e.g.
// COORDINATOR_LOAD_IN_PROGRESS while a block is being fetched), anything else as
// UNKNOWN_SERVER_ERROR.
type ProducerIDSource interface {
	NextProducerID() (int64, error)
}

// Marker is one transaction end to write on partitions (WriteTxnMarkers).
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	// TransactionVersion is the client's (2: the epoch was bumped at the end, KIP-890).
	TransactionVersion int16
	Partitions         []TopicPartition
}

// MarkerWriter writes transaction markers through the partitions' leaders (the broker sends
// WriteTxnMarkers to each leader, or appends locally). WriteMarkers returns one error per
// partition of m, in order: nil when written; ErrPartitionGone when the partition no longer
// exists (the marker is dropped, as Kafka drops markers of deleted topics); kerr.
// InvalidProducerEpoch or kerr.TransactionCoordinatorFenced when a newer coordinator has taken
// over (sending stops); anything else is retried after Config.MarkerRetryBackoff until the
// coordinator resigns the partition. ctx ends when it does.
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, m Marker) []error
}

// ErrPartitionGone is a MarkerWriter's answer for a partition that no longer exists.
var ErrPartitionGone = errors.New("partition no longer exists")

// Clock is the coordinator's time source (tests inject a fake one): a wall clock, since
// transaction timeouts and transactional-id expiry compare it with timestamps stored in
// __transaction_state, as Kafka's TransactionStateManager uses Time.milliseconds().
type Clock interface{ Now() time.Time }

// realClock is the broker's wall clock (internal/clock, which the fault control can step).
type realClock struct{}

func (realClock) Now() time.Time { return clock.Now() }

// Config configures a Coordinator. Zero values take Kafka's defaults.
type Config struct {
	Store   Store
	IDs     ProducerIDSource
	Markers MarkerWriter
	Clock   Clock // nil: the wall clock
	Logger  *slog.Logger
	// MaxTimeout is transaction.max.timeout.ms (default 15 minutes): InitProducerId with a
	// larger transaction.timeout.ms answers INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms (default 7 days): an id with no
	// transaction open and no update for this long is removed (tombstoned).
	IDExpiration time.Duration
	// AbortTimedOutInterval is transaction.abort.timed.out.transaction.cleanup.interval.ms
	// (default 10 s; <0: no background scan, AbortTimedOut is called by hand).
	AbortTimedOutInterval time.Duration
	// RemoveExpiredInterval is transaction.remove.expired.transaction.cleanup.interval.ms
	// (default 1 hour; <0: no background scan).
	RemoveExpiredInterval time.Duration
	// TransactionVersion is the cluster's finalized transaction.version feature level
	// (default 2, Kafka 4's for a new cluster): version 2 writes TransactionLogValue v1 and
	// aborts timed-out transactions with the version-2 epoch bump; below 2, value v0.
	// Set -1 for level 0.
	TransactionVersion int16
	// OffsetsPartitions is __consumer_offsets' partition count (offsets.topic.num.partitions,
	// default 50): AddOffsetsToTxn adds the group's partition.
	OffsetsPartitions int32
	// MarkerRetryBackoff is the wait before resending markers that failed (default 100 ms,
	// Kafka's retry.backoff.ms).
	MarkerRetryBackoff time.Duration
	// MaxPartitionsPerTxn bounds the partitions of one transaction (default 100000; beyond it
	// AddPartitionsToTxn answers INVALID_REQUEST). Kafka has no bound; weir's keeps one
	// transaction's record and marker fan-out finite.
	MaxPartitionsPerTxn int
}

// OffsetsTopic is the internal topic of group offsets.
const OffsetsTopic = "__consumer_offsets"

// Coordinator is the transaction coordinator of one broker: every transactional id whose
// __transaction_state partition this broker leads.
type Coordinator struct {
	cfg   Config
	clock Clock
	log   *slog.Logger
	parts int32
	// tv is the cluster's finalized transaction.version level (Config.TransactionVersion,
	// changed at run time by SetTransactionVersion: kafka-features.sh upgrade/downgrade).
	tv atomic.Int32

	mu     sync.Mutex
	owned  map[int32]*ownedPart // guarded by mu; a partition absent is not led here
	closed bool                 // guarded by mu

	quit chan struct{}
	wg   sync.WaitGroup
}

// ownedPart is one __transaction_state partition this coordinator leads.
type ownedPart struct {
	p     int32
	epoch int32 // the coordinator epoch: the partition's leader epoch
	// loading and failed are guarded by Coordinator.mu, as is txns.
	loading bool
	failed  bool
	log     Log
	txns    map[string]*txnMeta
	// ctx ends when the partition is resigned or the coordinator closes: marker senders stop.
	ctx    context.Context
	cancel context.CancelFunc
	// loaded is closed when the load ends (loaded, failed or superseded).
	loaded chan struct{}
}

// New returns a coordinator that leads no partition until Elect.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Store == nil || cfg.IDs == nil || cfg.Markers == nil {
		return nil, errors.New("txncoord: Store, IDs and Markers are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxTimeout == 0 {
		cfg.MaxTimeout = 15 * time.Minute
	}
	if cfg.IDExpiration == 0 {
		cfg.IDExpiration = 7 * 24 * time.Hour
	}
	if cfg.AbortTimedOutInterval == 0 {
		cfg.AbortTimedOutInterval = 10 * time.Second
	}
	if cfg.RemoveExpiredInterval == 0 {
		cfg.RemoveExpiredInterval = time.Hour
	}
	switch {
	case cfg.TransactionVersion == 0:
		cfg.TransactionVersion = 2
	case cfg.TransactionVersion < 0:
		cfg.TransactionVersion = 0
	}
	if cfg.OffsetsPartitions <= 0 {
		cfg.OffsetsPartitions = 50
	}
	if cfg.MarkerRetryBackoff <= 0 {
		cfg.MarkerRetryBackoff = 100 * time.Millisecond
	}
	if cfg.MaxPartitionsPerTxn <= 0 {
		cfg.MaxPartitionsPerTxn = 100000
	}
	parts := cfg.Store.Partitions()
	if parts <= 0 {
		return nil, fmt.Errorf("txncoord: %d transaction state partitions", parts)
	}
	c := &Coordinator{
		cfg: cfg, clock: cfg.Clock, log: cfg.Logger, parts: parts,
		owned: map[int32]*ownedPart{}, quit: make(chan struct{}),
	}
	c.tv.Store(int32(cfg.TransactionVersion))
	return c, nil
}

// txnVersion is the cluster's finalized transaction.version level.
func (c *Coordinator) txnVersion() int16 { return int16(c.tv.Load()) }

// TransactionVersion is the finalized transaction.version level the coordinator applies.
func (c *Coordinator) TransactionVersion() int16 { return c.txnVersion() }

// SetTransactionVersion changes the finalized transaction.version level (0-2): transactions
// that end from now on write records and bump epochs as that level says.
func (c *Coordinator) SetTransactionVersion(level int16) {
	if c.tv.Swap(int32(level)) != int32(level) {
		c.log.Info("transaction.version changed", "level", level)
	}
}

// Partitions is the partition count of __transaction_state.
func (c *Coordinator) Partitions() int32 { return c.parts }

// PartitionFor is the __transaction_state partition of a transactional id.
func (c *Coordinator) PartitionFor(txnID string) int32 { return PartitionFor(txnID, c.parts) }

// Start starts the background scans: aborting timed-out transactions and expiring idle ids.
func (c *Coordinator) Start() {
	loop := func(every time.Duration, f func()) {
		if every <= 0 {
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-c.quit:
					return
				case <-t.C:
					f()
				}
			}
		}()
	}
	loop(c.cfg.AbortTimedOutInterval, c.AbortTimedOut)
	loop(c.cfg.RemoveExpiredInterval, c.ExpireTransactionalIDs)
}

// Close resigns every partition and stops the background work. Requests after Close answer
// NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.quit)
	for p, op := range c.owned {
		op.cancel()
		delete(c.owned, p)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// nowMs is the clock in milliseconds.
func (c *Coordinator) nowMs() int64 { return c.clock.Now().UnixMilli() }

// partition returns the loaded partition of txnID, or the error Kafka answers while it is not
// (NOT_COORDINATOR: not led here; COORDINATOR_LOAD_IN_PROGRESS: loading;
// COORDINATOR_NOT_AVAILABLE: its log could not be read).
func (c *Coordinator) partition(txnID string) (*ownedPart, *kerr.Error) {
	p := PartitionFor(txnID, c.parts)
	c.mu.Lock()
	defer c.mu.Unlock()
	op := c.owned[p]
	switch {
	case c.closed || op == nil:
		return nil, kerr.NotCoordinator
	case op.loading:
		return nil, kerr.CoordinatorLoadInProgress
	case op.failed:
		return nil, kerr.CoordinatorNotAvailable
	}
	return op, nil
}

// lookup returns txnID's metadata (nil when it has none) and its partition.
func (c *Coordinator) lookup(txnID string) (*ownedPart, *txnMeta, *kerr.Error) {
	op, err := c.partition(txnID)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return op, op.txns[txnID], nil
}

// current reports whether op is still the led partition (same coordinator epoch).
func (c *Coordinator) current(op *ownedPart) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && c.owned[op.p] == op
}

// valueVersion is the TransactionLogValue version Kafka writes at the cluster's
// transaction.version.
func (c *Coordinator) valueVersion() int16 {
	if supportsEpochBump(c.txnVersion()) {
		return 1
	}
	return 0
}

// appendTransit writes t for m (a tombstone for Dead) and waits until it is durable, then
// completes the transition (or, on failure, abandons it). It returns Kafka's error for the
// request: NOT_COORDINATOR when the partition was lost meanwhile or its log refused the write
// as a non-leader, COORDINATOR_NOT_AVAILABLE for a replication shortfall, UNKNOWN_SERVER_ERROR
// otherwise (TransactionStateManager.appendTransactionToLog's mapping).
func (c *Coordinator) appendTransit(op *ownedPart, m *txnMeta, t transit) *kerr.Error {
	var value []byte
	if t.state != Dead {
		value = encodeValue(t.value(), c.valueVersion())
	}
	batch := buildBatch(c.nowMs(), []kv{{Key: encodeKey(m.id), Value: value}})
	err := appendDurable(op.log, batch)
	if err != nil {
		m.mu.Lock()
		m.hasPending = false
		m.mu.Unlock()
		c.log.Warn("appending to __transaction_state failed", "partition", op.p, "transactional_id", m.id, "state", t.state, "err", err)
		return appendError(err)
	}
	if !c.current(op) {
		m.mu.Lock()
		m.hasPending = false
		m.mu.Unlock()
		return kerr.NotCoordinator
	}
	if t.state == Dead {
		c.removeDead(op, m)
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.completeTransition(t); err != nil {
		c.log.Error("transaction state transition failed after its record was written", "err", err)
		return kerr.UnknownServerError
	}
	return nil
}

func (c *Coordinator) removeDead(op *ownedPart, m *txnMeta) {
	c.mu.Lock()
	if op.txns[m.id] == m {
		delete(op.txns, m.id)
	}
	c.mu.Unlock()
	m.mu.Lock()
	m.hasPending = false
	m.state = Dead
	m.dead = true
	m.mu.Unlock()
}

func appendDurable(l Log, batch []byte) error {
	next, err := l.Append(batch)
	if err != nil {
		return err
	}
	return l.AwaitDurable(next)
}

func appendError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.UnknownTopicOrPartition, kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut:
			return kerr.CoordinatorNotAvailable
		case kerr.NotLeaderForPartition, kerr.NotCoordinator, kerr.KafkaStorageError:
			return kerr.NotCoordinator
		case kerr.MessageTooLarge, kerr.RecordListTooLarge:
			return kerr.UnknownServerError
		}
		return kerr.UnknownServerError
	}
	return kerr.NotCoordinator // an I/O error: the log dir went offline, as KAFKA_STORAGE_ERROR
}

func producerIDError(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	return kerr.UnknownServerError
}
