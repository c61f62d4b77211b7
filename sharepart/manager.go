package sharepart

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/sharestate"
)

// Manager holds the share partitions this broker leads, keyed by (group, topic id, partition),
// each loaded once at the partition's leader epoch. A leader epoch change (or a fenced
// partition) drops the old one and loads it again; losing leadership drops it.
type Manager struct {
	mu    sync.Mutex // guards parts
	parts map[sharestate.Key]*entry
	max   int
}

// entry is one share partition, or its load in progress (ready closes when it ends).
type entry struct {
	p     *Partition
	epoch int32
	ready chan struct{}
	err   error
}

// NewManager returns a Manager of at most max share partitions (a bound on memory: groups x
// partitions led; a load beyond it is refused).
func NewManager(max int) *Manager {
	return &Manager{parts: map[sharestate.Key]*entry{}, max: max}
}

// Len returns the number of share partitions held.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.parts)
}

// Get returns k's share partition at leaderEpoch, loading it with o (o.Key and o.LeaderEpoch
// are set here) when it is not held, held at another epoch, or fenced. Concurrent Gets of
// one key share one load.
func (m *Manager) Get(ctx context.Context, k sharestate.Key, leaderEpoch int32, o Options) (*Partition, error) {
	for {
		m.mu.Lock()
		e := m.parts[k]
		if e != nil {
			select {
			case <-e.ready:
				if e.err == nil && e.epoch == leaderEpoch && !e.p.Fenced() {
					m.mu.Unlock()
					return e.p, nil
				}
				// Stale: another epoch, fenced, or a failed load. Load again.
				if e.p != nil {
					e.p.Close()
				}
				delete(m.parts, k)
				e = nil
			default:
			}
		}
		if e != nil {
			m.mu.Unlock()
			select {
			case <-e.ready:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if len(m.parts) >= m.max {
			m.mu.Unlock()
			return nil, fmt.Errorf("%d share partitions held: %w", m.max, kerr.UnknownServerError)
		}
		e = &entry{epoch: leaderEpoch, ready: make(chan struct{})}
		m.parts[k] = e
		m.mu.Unlock()

		o.Key, o.LeaderEpoch = k, leaderEpoch
		began := time.Now()
		p, err := Load(ctx, o)
		if err == nil {
			start, end := p.Offsets()
			slog.Info("share partition loaded", "group", k.Group, "topic_id", k.TopicID, "partition", k.Partition,
				"leader_epoch", leaderEpoch, "state_epoch", p.stateEpoch, "start", start, "end", end, "took", time.Since(began))
		}
		m.mu.Lock()
		e.p, e.err = p, err
		close(e.ready)
		if err != nil && m.parts[k] == e {
			delete(m.parts, k)
		}
		m.mu.Unlock()
		return p, err
	}
}

// Peek returns k's share partition if it is held and loaded (acknowledgements of a partition
// never fetched here have nothing to acknowledge).
func (m *Manager) Peek(k sharestate.Key) *Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.parts[k]
	if e == nil {
		return nil
	}
	select {
	case <-e.ready:
		return e.p
	default:
		return nil
	}
}

// DropPartition drops every group's share partition of (topic, partition): this broker stopped
// leading it. Their lock timers stop; their state stays with the persister.
func (m *Manager) DropPartition(topicID [16]byte, partition int32) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, e := range m.parts {
		if k.TopicID != topicID || k.Partition != partition {
			continue
		}
		select {
		case <-e.ready:
		default:
			continue // a load in progress: Get finds it stale by its epoch next time
		}
		if e.p != nil {
			e.p.Close()
		}
		delete(m.parts, k)
		n++
	}
	return n
}

// Each calls fn for every loaded share partition (under no lock of the Manager).
func (m *Manager) Each(fn func(*Partition)) {
	m.mu.Lock()
	ps := make([]*Partition, 0, len(m.parts))
	for _, e := range m.parts {
		select {
		case <-e.ready:
			if e.p != nil {
				ps = append(ps, e.p)
			}
		default:
		}
	}
	m.mu.Unlock()
	for _, p := range ps {
		fn(p)
	}
}

// Close drops every share partition.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, e := range m.parts {
		select {
		case <-e.ready:
			if e.p != nil {
				e.p.Close()
			}
		default:
		}
		delete(m.parts, k)
	}
}
