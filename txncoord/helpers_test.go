package txncoord

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
)

// fakeClock is a manual clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// memStore is an in-memory __transaction_state.
type memStore struct {
	mu    sync.Mutex
	parts int32
	logs  map[int32]Log
}

func newMemStore(parts int32) *memStore { return &memStore{parts: parts, logs: map[int32]Log{}} }

func (s *memStore) Partitions() int32 { return s.parts }

func (s *memStore) Log(p int32) (Log, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[p]
	if l == nil {
		l = &memLog{}
		s.logs[p] = l
	}
	return l, nil
}

// memLog keeps batches in memory; fail, when set, refuses appends.
type memLog struct {
	mu      sync.Mutex
	batches [][]byte
	next    int64
	fail    error
}

func (l *memLog) Append(batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return 0, l.fail
	}
	h, err := record.ParseHeader(batch)
	if err != nil {
		return 0, err
	}
	record.SetBaseOffset(batch, l.next)
	l.next += int64(h.LastOffsetDelta) + 1
	l.batches = append(l.batches, append([]byte(nil), batch...))
	return l.next, nil
}

func (l *memLog) AwaitDurable(int64) error { return nil }

func (l *memLog) ReadBatches(fn func([]byte) error) error {
	l.mu.Lock()
	bs := append([][]byte(nil), l.batches...)
	l.mu.Unlock()
	for _, b := range bs {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) setFail(err error) {
	l.mu.Lock()
	l.fail = err
	l.mu.Unlock()
}

// records decodes every record of the log: transactional id and value (nil: tombstone).
func (l *memLog) records(t testing.TB) []struct {
	id string
	v  *logValue
} {
	t.Helper()
	var out []struct {
		id string
		v  *logValue
	}
	_ = l.ReadBatches(func(b []byte) error {
		return eachRecord(b, func(k, v []byte) error {
			id, err := decodeKey(k)
			if err != nil {
				t.Fatal(err)
			}
			var lv *logValue
			if v != nil {
				if lv, err = decodeValue(v); err != nil {
					t.Fatal(err)
				}
			}
			out = append(out, struct {
				id string
				v  *logValue
			}{id, lv})
			return nil
		})
	})
	return out
}

// fakeIDs hands out producer ids from 1000 on.
type fakeIDs struct {
	mu   sync.Mutex
	next int64
	err  error
}

func (f *fakeIDs) NextProducerID() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	if f.next == 0 {
		f.next = 1000
	}
	f.next++
	return f.next - 1, nil
}

// fakeMarkers records what was sent; answer (when set) decides each partition's error; gate
// (when set) blocks every call until closed or the context ends.
type fakeMarkers struct {
	mu     sync.Mutex
	sent   []Marker
	answer func(tp TopicPartition, attempt int) error
	tries  map[TopicPartition]int
	gate   chan struct{}
}

func (f *fakeMarkers) WriteMarkers(ctx context.Context, m Marker) []error {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			errs := make([]error, len(m.Partitions))
			for i := range errs {
				errs[i] = ctx.Err()
			}
			return errs
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m.Partitions = append([]TopicPartition(nil), m.Partitions...)
	f.sent = append(f.sent, m)
	if f.tries == nil {
		f.tries = map[TopicPartition]int{}
	}
	errs := make([]error, len(m.Partitions))
	for i, tp := range m.Partitions {
		f.tries[tp]++
		if f.answer != nil {
			errs[i] = f.answer(tp, f.tries[tp])
		}
	}
	return errs
}

func (f *fakeMarkers) calls() []Marker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Marker(nil), f.sent...)
}

type env struct {
	t       *testing.T
	c       *Coordinator
	store   *memStore
	clock   *fakeClock
	ids     *fakeIDs
	markers *fakeMarkers
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEnv starts a coordinator over an in-memory store with 4 partitions, leading all of them.
func newEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	e := &env{t: t, store: newMemStore(4), clock: newFakeClock(), ids: &fakeIDs{}, markers: &fakeMarkers{}}
	e.c = e.newCoordinator(mod)
	for p := int32(0); p < 4; p++ {
		e.c.Elect(p, 1)
	}
	e.waitLoaded(e.c)
	return e
}

func (e *env) newCoordinator(mod func(*Config)) *Coordinator {
	cfg := Config{
		Store: e.store, IDs: e.ids, Markers: e.markers, Clock: e.clock, Logger: quietLogger(),
		AbortTimedOutInterval: -1, RemoveExpiredInterval: -1, MarkerRetryBackoff: time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

func (e *env) waitLoaded(c *Coordinator) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for p := int32(0); p < c.parts; p++ {
		if err := c.WaitLoaded(ctx, p); err != nil {
			e.t.Fatal(err)
		}
	}
}

// waitState waits (bounded) until id is in state want on c.
func (e *env) waitState(c *Coordinator, id string, want State) Description {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := c.Describe(id)
		if d.Err == nil && d.State == want {
			return d
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: state %v (err %v), want %v", id, d.State, d.Err, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func (e *env) log(id string) *memLog {
	l, _ := e.store.Log(PartitionFor(id, e.store.parts))
	return l.(*memLog)
}

// init runs InitProducerID and fails the test on an error.
func (e *env) init(id string) InitResult {
	e.t.Helper()
	r := e.c.InitProducerID(id, 60000, nil)
	if r.Err != nil {
		e.t.Fatalf("InitProducerID(%s): %v", id, r.Err)
	}
	return r
}

func (e *env) add(id string, r InitResult, tv int16, parts ...TopicPartition) {
	e.t.Helper()
	for tp, err := range e.c.AddPartitions(id, r.ProducerID, r.Epoch, parts, false, tv) {
		if err != nil {
			e.t.Fatalf("AddPartitions(%s, %v): %v", id, tp, err)
		}
	}
}

func tps(topic string, parts ...int32) []TopicPartition {
	out := make([]TopicPartition, len(parts))
	for i, p := range parts {
		out[i] = TopicPartition{topic, p}
	}
	return out
}

func errIs(got *kerr.Error, want *kerr.Error) bool { return errors.Is(got, want) || got == want }
