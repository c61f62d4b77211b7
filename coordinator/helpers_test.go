package coordinator

import (
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
)

// fakeClock is a manual clock: timers fire, in deadline order, inside Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves time on by d, firing every due timer (outside the lock: callbacks post to
// group goroutines, which may arm new timers).
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due, keep []*fakeTimer
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

// memStore is an in-memory __consumer_offsets.
type memStore struct {
	mu    sync.Mutex
	parts int32
	logs  map[int32]*memLog
	// gate, when set, blocks ReadBatches until closed (loading in progress).
	gate chan struct{}
	// afterRead, when set, runs after ReadBatches took its copy of the log (before replaying
	// it): what is appended then is not seen by the load.
	afterRead func()
}

type memLog struct {
	s       *memStore
	mu      sync.Mutex
	batches [][]byte
	next    int64
	fail    error
}

func newMemStore(parts int32) *memStore { return &memStore{parts: parts, logs: map[int32]*memLog{}} }

func (s *memStore) Partitions() int32 { return s.parts }

func (s *memStore) Log(p int32) (OffsetsLog, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[p]
	if l == nil {
		l = &memLog{s: s}
		s.logs[p] = l
	}
	return l, nil
}

func (s *memStore) Existing(p int32) (OffsetsLog, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.logs[p]
	return l, ok
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
	if len(batch) > 1<<20 {
		return 0, kerr.MessageTooLarge
	}
	record.SetBaseOffset(batch, l.next)
	l.batches = append(l.batches, append([]byte{}, batch...))
	l.next += int64(h.LastOffsetDelta) + 1
	return l.next, nil
}

// AppendTxn appends a transactional batch (the in-memory log checks nothing more than Append).
func (l *memLog) AppendTxn(batch []byte) (int64, error) { return l.Append(batch) }

func (l *memLog) AwaitDurable(upTo int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if upTo > l.next {
		return errors.New("waiting past the log end")
	}
	return nil
}

func (l *memLog) ReadBatches(fn func([]byte) error) error {
	if g := l.s.gate; g != nil {
		<-g
	}
	l.mu.Lock()
	bs := append([][]byte{}, l.batches...)
	l.mu.Unlock()
	if f := l.s.afterRead; f != nil {
		f()
	}
	for _, b := range bs {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// records returns every record of partition p in order.
func (s *memStore) records(t *testing.T, p int32) []kv {
	t.Helper()
	l, ok := s.Existing(p)
	if !ok {
		return nil
	}
	var out []kv
	if err := l.ReadBatches(func(b []byte) error {
		return eachRecord(b, func(k, v []byte) error {
			out = append(out, kv{Key: append([]byte{}, k...), Value: v})
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

type harness struct {
	t     *testing.T
	c     *Coordinator
	clock *fakeClock
	store *memStore
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, clock: newFakeClock(), store: newMemStore(8)}
	if cfg.Store != nil {
		h.store = cfg.Store.(*memStore)
	}
	cfg.Store, cfg.Clock = h.store, h.clock
	if cfg.MinSessionTimeout == 0 {
		cfg.MinSessionTimeout = time.Second
	}
	if cfg.RetentionCheckInterval == 0 {
		cfg.RetentionCheckInterval = -1 // tests call ExpireOffsets
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	if err := c.WaitLoaded(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.c = c
	t.Cleanup(c.Close)
	return h
}

// joinReq is a consumer JoinGroup with one protocol.
func joinReq(group, member string, protocols ...string) JoinRequest {
	if len(protocols) == 0 {
		protocols = []string{"range"}
	}
	r := JoinRequest{Group: group, MemberID: member, ClientID: "client", ClientHost: "/127.0.0.1",
		SessionTimeoutMs: 10000, RebalanceTimeoutMs: 30000, ProtocolType: "consumer", RequireKnownMemberID: true}
	for _, p := range protocols {
		r.Protocols = append(r.Protocols, Protocol{Name: p, Metadata: []byte("meta-" + p)})
	}
	return r
}

// pending is a parked JoinGroup or SyncGroup.
type pending[T any] struct {
	ch chan T
}

func startJoin(h *harness, r JoinRequest) pending[JoinResult] {
	wait := h.c.Join(r)
	ch := make(chan JoinResult, 1)
	go func() { ch <- wait(nil) }()
	return pending[JoinResult]{ch}
}

func startSync(h *harness, r SyncRequest) pending[SyncResult] {
	wait := h.c.Sync(r)
	ch := make(chan SyncResult, 1)
	go func() { ch <- wait(nil) }()
	return pending[SyncResult]{ch}
}

func (p pending[T]) get(t *testing.T) T {
	t.Helper()
	select {
	case r := <-p.ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5s")
		var zero T
		return zero
	}
}

func (p pending[T]) parked(t *testing.T) {
	t.Helper()
	select {
	case r := <-p.ch:
		t.Fatalf("answered while it should be parked: %+v", r)
	case <-time.After(30 * time.Millisecond):
	}
}

// join runs a JoinGroup to completion, doing the MEMBER_ID_REQUIRED round trip.
func (h *harness) join(r JoinRequest) JoinResult {
	h.t.Helper()
	res := startJoin(h, r).get(h.t)
	if res.Err == kerr.MemberIDRequired {
		r.MemberID = res.MemberID
		res = startJoin(h, r).get(h.t)
	}
	return res
}

func (h *harness) sync(group, member string, gen int32, as ...Assignment) SyncResult {
	h.t.Helper()
	return startSync(h, SyncRequest{Group: group, MemberID: member, Generation: gen, Assignments: as}).get(h.t)
}

func (h *harness) heartbeat(group, member string, gen int32) *kerr.Error {
	return h.c.Heartbeat(HeartbeatRequest{Group: group, MemberID: member, Generation: gen})
}

func (h *harness) state(group string) string { return h.c.Describe(group).State }

func wantErr(t *testing.T, what string, got, want *kerr.Error) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}
