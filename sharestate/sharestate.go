// Package sharestate defines the durable state of KIP-932 share partitions as the share
// coordinator keeps it (Kafka's Persister): for each (share group, topic, partition) the state
// epoch, the leader epoch of the last writer, the share-partition start offset and the
// in-flight batches with their delivery state and count. The share-partition leader (package
// sharepart) reads it when it first serves a share partition and writes it on every change that
// must survive a failover; the group coordinator initializes, summarizes and deletes it (share
// group offsets admin APIs, DeleteGroups). The implementation over __share_group_state is
// package sharecoord; Memory is an in-process one for tests.
package sharestate

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Key names one share partition's state.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// Delivery states of a batch, Kafka's RecordState ids as stored in ShareSnapshot/ShareUpdate.
const (
	Available    int8 = 0
	Acquired     int8 = 1
	Acknowledged int8 = 2
	Archived     int8 = 4
)

// Batch is a range of offsets sharing one delivery state and count.
type Batch struct {
	FirstOffset   int64
	LastOffset    int64
	DeliveryState int8
	DeliveryCount int16
}

// State is one share partition's durable state.
type State struct {
	StateEpoch  int32
	LeaderEpoch int32
	// StartOffset is the share-partition start offset: every record below it is done.
	StartOffset int64
	// DeliveryCompleteCount is WriteShareGroupState v1's count of records at or past
	// StartOffset that are done (acknowledged or archived); -1 when unknown.
	DeliveryCompleteCount int32
	// Batches are the in-flight batches at or past StartOffset, sorted, non-overlapping.
	Batches []Batch
}

// Summary is ReadShareGroupStateSummary's answer.
type Summary struct {
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32
}

// ErrNotInitialized is returned by Read and ReadSummary for a share partition whose state was
// never initialized (or was deleted).
var ErrNotInitialized = errors.New("share partition state not initialized")

// Persister stores share partitions' state. Errors that Kafka maps to an error code wrap a
// *kerr.Error (FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, ...); callers retry the retriable ones.
type Persister interface {
	// Initialize sets k's state epoch and start offset and drops its batches
	// (InitializeShareGroupState): a group's first assignment of the partition, or
	// AlterShareGroupOffsets. A stateEpoch below the stored one is FENCED_STATE_EPOCH.
	Initialize(ctx context.Context, k Key, stateEpoch int32, startOffset int64) error
	// Read returns k's state (ReadShareGroupState) and records leaderEpoch as the current
	// leader's: a later Write or Read with a lower leader epoch is FENCED_LEADER_EPOCH.
	Read(ctx context.Context, k Key, leaderEpoch int32) (State, error)
	// Write stores st as k's state (WriteShareGroupState): st.Batches replace the stored
	// batches they overlap, batches below st.StartOffset are dropped. Fenced by state epoch
	// and leader epoch.
	Write(ctx context.Context, k Key, st State) error
	// Delete removes k's state (DeleteShareGroupState).
	Delete(ctx context.Context, k Key) error
	// ReadSummary returns k's epochs and start offset without the batches
	// (ReadShareGroupStateSummary).
	ReadSummary(ctx context.Context, k Key, leaderEpoch int32) (Summary, error)
}

// Memory is a Persister in process memory, for tests: same fencing, no durability.
type Memory struct {
	mu sync.Mutex
	m  map[Key]*State // guarded by mu
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{m: map[Key]*State{}} }

func (p *Memory) Initialize(_ context.Context, k Key, stateEpoch int32, startOffset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.m[k]; s != nil && stateEpoch < s.StateEpoch {
		return kerr.FencedStateEpoch
	}
	p.m[k] = &State{StateEpoch: stateEpoch, LeaderEpoch: -1, StartOffset: startOffset, DeliveryCompleteCount: -1}
	return nil
}

func (p *Memory) Read(_ context.Context, k Key, leaderEpoch int32) (State, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.m[k]
	if s == nil {
		return State{}, ErrNotInitialized
	}
	if leaderEpoch < s.LeaderEpoch {
		return State{}, kerr.FencedLeaderEpoch
	}
	s.LeaderEpoch = leaderEpoch
	out := *s
	out.Batches = append([]Batch(nil), s.Batches...)
	return out, nil
}

func (p *Memory) Write(_ context.Context, k Key, st State) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.m[k]
	if s == nil {
		return ErrNotInitialized
	}
	if st.StateEpoch < s.StateEpoch {
		return kerr.FencedStateEpoch
	}
	if st.LeaderEpoch < s.LeaderEpoch {
		return kerr.FencedLeaderEpoch
	}
	s.StateEpoch, s.LeaderEpoch = st.StateEpoch, st.LeaderEpoch
	if st.StartOffset > s.StartOffset {
		s.StartOffset = st.StartOffset
	}
	s.DeliveryCompleteCount = st.DeliveryCompleteCount
	s.Batches = Merge(s.Batches, st.Batches, s.StartOffset)
	return nil
}

func (p *Memory) Delete(_ context.Context, k Key) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, k)
	return nil
}

func (p *Memory) ReadSummary(_ context.Context, k Key, leaderEpoch int32) (Summary, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.m[k]
	if s == nil {
		return Summary{}, ErrNotInitialized
	}
	return Summary{StateEpoch: s.StateEpoch, LeaderEpoch: s.LeaderEpoch, StartOffset: s.StartOffset,
		DeliveryCompleteCount: s.DeliveryCompleteCount}, nil
}

// Merge returns old with every batch of upd laid over it (upd wins where they overlap), cut
// below start, sorted and non-overlapping. Neither input is modified.
func Merge(old, upd []Batch, start int64) []Batch {
	out := make([]Batch, 0, len(old)+len(upd))
	for _, b := range old {
		// Keep the parts of b that no update covers.
		pieces := []Batch{b}
		for _, u := range upd {
			var next []Batch
			for _, pc := range pieces {
				if u.LastOffset < pc.FirstOffset || u.FirstOffset > pc.LastOffset {
					next = append(next, pc)
					continue
				}
				if pc.FirstOffset < u.FirstOffset {
					l := pc
					l.LastOffset = u.FirstOffset - 1
					next = append(next, l)
				}
				if pc.LastOffset > u.LastOffset {
					r := pc
					r.FirstOffset = u.LastOffset + 1
					next = append(next, r)
				}
			}
			pieces = next
		}
		out = append(out, pieces...)
	}
	out = append(out, upd...)
	kept := out[:0]
	for _, b := range out {
		if b.LastOffset < start {
			continue
		}
		if b.FirstOffset < start {
			b.FirstOffset = start
		}
		kept = append(kept, b)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].FirstOffset < kept[j].FirstOffset })
	return kept
}

// Batcher is implemented by a Persister that sends the calls for many keys to each share
// coordinator in one request per group (Kafka's PersisterStateManager batches keys per
// destination). Results are in the keys' order.
type Batcher interface {
	InitializeBatch(ctx context.Context, keys []Key, stateEpoch int32, startOffsets []int64) []error
	DeleteBatch(ctx context.Context, keys []Key) []error
	ReadSummaryBatch(ctx context.Context, keys []Key, leaderEpoch int32) ([]Summary, []error)
}

// InitializeAll initializes every key (startOffsets[i] for keys[i]) at stateEpoch: in batches
// when p is a Batcher, else one call per key. The errors are in the keys' order.
func InitializeAll(ctx context.Context, p Persister, keys []Key, stateEpoch int32, startOffsets []int64) []error {
	if bp, ok := p.(Batcher); ok {
		return bp.InitializeBatch(ctx, keys, stateEpoch, startOffsets)
	}
	errs := make([]error, len(keys))
	for i, k := range keys {
		errs[i] = p.Initialize(ctx, k, stateEpoch, startOffsets[i])
	}
	return errs
}

// DeleteAll deletes every key's state, as InitializeAll.
func DeleteAll(ctx context.Context, p Persister, keys []Key) []error {
	if bp, ok := p.(Batcher); ok {
		return bp.DeleteBatch(ctx, keys)
	}
	errs := make([]error, len(keys))
	for i, k := range keys {
		errs[i] = p.Delete(ctx, k)
	}
	return errs
}

// ReadSummaries reads every key's summary, as InitializeAll.
func ReadSummaries(ctx context.Context, p Persister, keys []Key, leaderEpoch int32) ([]Summary, []error) {
	if bp, ok := p.(Batcher); ok {
		return bp.ReadSummaryBatch(ctx, keys, leaderEpoch)
	}
	sums := make([]Summary, len(keys))
	errs := make([]error, len(keys))
	for i, k := range keys {
		sums[i], errs[i] = p.ReadSummary(ctx, k, leaderEpoch)
	}
	return sums, errs
}
