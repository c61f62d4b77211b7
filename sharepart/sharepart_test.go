package sharepart

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/sharestate"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

var testKey = sharestate.Key{Group: "g", TopicID: [16]byte{1}, Partition: 0}

func testConfig() Config {
	return Config{LockDuration: 30 * time.Second, DeliveryLimit: 3, MaxInFlight: 100}
}

func newTestPartition(t *testing.T, per sharestate.Persister, start int64, cfg Config) (*Partition, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1000, 0)}
	p, err := Load(context.Background(), Options{Key: testKey, Persister: per, LeaderEpoch: 1, Config: cfg,
		Now: clk.now, NoTimers: true, ResolveStart: func() (int64, error) { return start, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

// batches makes log batches of size n covering [first, last].
func batches(first, last, n int64) []Range {
	var out []Range
	for o := first; o <= last; o += n {
		out = append(out, Range{First: o, Last: min(o+n-1, last)})
	}
	return out
}

func count(rs []AcquiredRange) int64 {
	var n int64
	for _, r := range rs {
		n += r.Last - r.First + 1
	}
	return n
}

func ack(first, last int64, t int8) []AckBatch {
	return []AckBatch{{First: first, Last: last, Types: []int8{t}}}
}

func TestAcquireAndAcceptAdvancesStart(t *testing.T) {
	per := sharestate.NewMemory()
	p, _ := newTestPartition(t, per, 0, testConfig())
	got := p.Acquire("m1", 0, batches(0, 9, 5), 0, false, nil)
	if len(got) != 1 || got[0] != (AcquiredRange{First: 0, Last: 9, DeliveryCount: 1}) {
		t.Fatalf("acquired %+v", got)
	}
	// A second member gets nothing of what m1 holds.
	if got := p.Acquire("m2", 0, batches(0, 9, 5), 0, false, nil); len(got) != 0 {
		t.Fatalf("m2 acquired %+v", got)
	}
	if err := p.Acknowledge(context.Background(), "m2", ack(0, 4, AckAccept), false); !errors.Is(err, kerr.InvalidRecordState) {
		t.Fatalf("ack by another member: %v", err)
	}
	if err := p.Acknowledge(context.Background(), "m1", ack(0, 4, AckAccept), false); err != nil {
		t.Fatal(err)
	}
	if s, e := p.Offsets(); s != 5 || e != 10 {
		t.Fatalf("window [%d,%d), want [5,10)", s, e)
	}
	// Acknowledging again is invalid: the records are done.
	if err := p.Acknowledge(context.Background(), "m1", ack(0, 4, AckAccept), false); !errors.Is(err, kerr.InvalidRecordState) {
		t.Fatalf("second ack: %v", err)
	}
	st, err := per.Read(context.Background(), testKey, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.StartOffset != 5 {
		t.Fatalf("persisted start %d, want 5", st.StartOffset)
	}
}

func TestReleaseRejectGap(t *testing.T) {
	ctx := context.Background()
	p, _ := newTestPartition(t, sharestate.NewMemory(), 0, testConfig())
	p.Acquire("m1", 0, batches(0, 5, 6), 0, false, nil)
	// Per-offset types: accept, release, reject, gap, accept, release.
	err := p.Acknowledge(ctx, "m1", []AckBatch{{First: 0, Last: 5, Types: []int8{AckAccept, AckRelease, AckReject, AckGap, AckAccept, AckRelease}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []int8{Archived, Available, Archived, Archived, Acknowledged, Available} // 0: below start, done
	for o, w := range want {
		if s, _ := p.State(int64(o)); s != w {
			t.Errorf("offset %d state %d, want %d", o, s, w)
		}
	}
	if s, _ := p.Offsets(); s != 1 {
		t.Fatalf("start %d, want 1", s)
	}
	// The released ones are delivered again, with delivery count 2.
	off, ok := p.NextFetchOffset()
	if !ok || off != 1 {
		t.Fatalf("next fetch offset %d %v, want 1", off, ok)
	}
	got := p.Acquire("m2", 0, batches(0, 5, 6), 0, false, nil)
	if len(got) != 2 || got[0] != (AcquiredRange{1, 1, 2}) || got[1] != (AcquiredRange{5, 5, 2}) {
		t.Fatalf("reacquired %+v", got)
	}
	// Wrong type counts and unknown types are invalid requests; nothing is applied.
	if err := p.Acknowledge(ctx, "m2", []AckBatch{{First: 1, Last: 1, Types: []int8{9}}}, false); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("bad type: %v", err)
	}
	if err := p.Acknowledge(ctx, "m2", []AckBatch{{First: 1, Last: 5, Types: []int8{1, 1}}}, false); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("bad type count: %v", err)
	}
	if err := p.Acknowledge(ctx, "m2", ack(1, 1, AckRenew), false); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("renew without IsRenewAck: %v", err)
	}
	// A batch covering a record m2 does not hold fails as a whole.
	if err := p.Acknowledge(ctx, "m2", ack(1, 5, AckAccept), false); !errors.Is(err, kerr.InvalidRecordState) {
		t.Fatalf("ack over non-acquired: %v", err)
	}
	if s, _ := p.State(1); s != Acquired {
		t.Fatalf("offset 1 state %d after a failed ack", s)
	}
}

func TestLockTimeoutAndRenew(t *testing.T) {
	ctx := context.Background()
	p, clk := newTestPartition(t, sharestate.NewMemory(), 0, testConfig())
	p.Acquire("m1", 0, batches(0, 3, 4), 0, false, nil)
	clk.advance(20 * time.Second)
	if err := p.Acknowledge(ctx, "m1", ack(2, 3, AckRenew), true); err != nil {
		t.Fatal(err)
	}
	clk.advance(15 * time.Second) // 35s: 0-1 expired, 2-3 renewed at 20s until 50s
	n, err := p.ExpireLocks(ctx, clk.now())
	if err != nil || n != 2 {
		t.Fatalf("expired %d %v, want 2", n, err)
	}
	for o, w := range []int8{Available, Available, Acquired, Acquired} {
		if s, _ := p.State(int64(o)); s != w {
			t.Errorf("offset %d state %d, want %d", o, s, w)
		}
	}
	got := p.Acquire("m2", 0, batches(0, 3, 4), 0, false, nil)
	if count(got) != 2 || got[0].DeliveryCount != 2 {
		t.Fatalf("m2 acquired %+v", got)
	}
	clk.advance(20 * time.Second)
	if n, _ := p.ExpireLocks(ctx, clk.now()); n != 2 {
		t.Fatalf("second expiry %d, want 2 (2-3 at 50s)", n)
	}
}

func TestDeliveryLimitArchives(t *testing.T) {
	ctx := context.Background()
	p, clk := newTestPartition(t, sharestate.NewMemory(), 0, testConfig()) // limit 3
	for i := 1; i <= 3; i++ {
		got := p.Acquire("m", 0, batches(0, 0, 1), 0, false, nil)
		if len(got) != 1 || got[0].DeliveryCount != int16(i) {
			t.Fatalf("delivery %d: %+v", i, got)
		}
		if i%2 == 0 {
			if err := p.Acknowledge(ctx, "m", ack(0, 0, AckRelease), false); err != nil {
				t.Fatal(err)
			}
		} else {
			clk.advance(31 * time.Second)
			if _, err := p.ExpireLocks(ctx, clk.now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s, _ := p.State(0); s != Archived {
		t.Fatalf("after 3 deliveries: state %d", s)
	}
	if got := p.Acquire("m", 0, batches(0, 0, 1), 0, false, nil); len(got) != 0 {
		t.Fatalf("archived record delivered again: %+v", got)
	}
	if s, _ := p.Offsets(); s != 1 {
		t.Fatalf("start %d, want 1", s)
	}
}

func TestMaxInFlightAndMaxRecords(t *testing.T) {
	cfg := testConfig()
	cfg.MaxInFlight = 10
	p, _ := newTestPartition(t, sharestate.NewMemory(), 100, cfg)
	// Whole batches of 4: max records 5 stops after the batch reaching it (8 records).
	got := p.Acquire("m1", 100, batches(100, 199, 4), 5, false, nil)
	if count(got) != 8 {
		t.Fatalf("acquired %d, want 8", count(got))
	}
	// Strict mode: exactly the limit.
	got = p.Acquire("m2", 108, batches(108, 199, 4), 1, true, nil)
	if count(got) != 1 || got[0].First != 108 {
		t.Fatalf("strict acquired %+v", got)
	}
	// Window [100,112) holds 12 >= 10: nothing new past it, but 109-111 are still in it.
	got = p.Acquire("m3", 108, batches(108, 199, 4), 0, false, nil)
	if count(got) != 3 || got[0].First != 109 || got[0].Last != 111 {
		t.Fatalf("acquired past the in-flight limit: %+v", got)
	}
	if _, ok := p.NextFetchOffset(); ok {
		t.Fatal("window full but next fetch offset available")
	}
}

func TestGapsAndControlBatches(t *testing.T) {
	p, _ := newTestPartition(t, sharestate.NewMemory(), 0, testConfig())
	bs := []Range{{First: 0, Last: 2}, {First: 5, Last: 6}, {First: 7, Last: 7, Skip: true}, {First: 8, Last: 9}}
	got := p.Acquire("m", 0, bs, 0, false, nil)
	if count(got) != 7 {
		t.Fatalf("acquired %+v", got)
	}
	for _, o := range []int64{3, 4, 7} {
		if s, _ := p.State(o); s != Archived {
			t.Errorf("offset %d state %d, want archived", o, s)
		}
	}
	// Offset 8 released, then compacted away: a read from 8 returns the batch at 9, and 8,
	// with no record left, is archived instead of staying available forever.
	if err := p.Acknowledge(context.Background(), "m", ack(8, 8, AckRelease), false); err != nil {
		t.Fatal(err)
	}
	if off, _ := p.NextFetchOffset(); off != 8 {
		t.Fatalf("next fetch offset %d, want 8", off)
	}
	if got := p.Acquire("m", 8, []Range{{First: 9, Last: 9}}, 0, false, nil); len(got) != 0 {
		t.Fatalf("acquired %+v", got)
	}
	if s, _ := p.State(8); s != Archived {
		t.Fatalf("compacted offset 8 state %d, want archived", s)
	}
	// Everything done, then a gap wider than the window: start jumps over it.
	if err := p.Acknowledge(context.Background(), "m", []AckBatch{{First: 0, Last: 2, Types: []int8{AckAccept}}, {First: 5, Last: 6, Types: []int8{AckAccept}}, {First: 9, Last: 9, Types: []int8{AckAccept}}}, false); err != nil {
		t.Fatal(err)
	}
	got = p.Acquire("m", 10, []Range{{First: 5000, Last: 5001}}, 0, false, nil)
	if count(got) != 2 || got[0].First != 5000 {
		t.Fatalf("after a wide gap acquired %+v", got)
	}
	if s, _ := p.Offsets(); s != 5000 {
		t.Fatalf("start %d after a wide gap, want 5000", s)
	}
}

func TestSetLogStart(t *testing.T) {
	ctx := context.Background()
	p, _ := newTestPartition(t, sharestate.NewMemory(), 0, testConfig())
	p.Acquire("m", 0, batches(0, 9, 10), 0, false, nil)
	if err := p.SetLogStart(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if s, e := p.Offsets(); s != 4 || e != 10 {
		t.Fatalf("window [%d,%d)", s, e)
	}
	if err := p.SetLogStart(ctx, 50); err != nil {
		t.Fatal(err)
	}
	if s, e := p.Offsets(); s != 50 || e != 50 {
		t.Fatalf("window [%d,%d), want [50,50)", s, e)
	}
}

func TestRecoveryFromPersistedState(t *testing.T) {
	ctx := context.Background()
	per := sharestate.NewMemory()
	p, _ := newTestPartition(t, per, 10, testConfig())
	p.Acquire("m1", 10, batches(10, 19, 10), 0, false, nil)
	if err := p.Acknowledge(ctx, "m1", []AckBatch{{First: 10, Last: 11, Types: []int8{AckAccept}}, {First: 13, Last: 14, Types: []int8{AckReject}}, {First: 15, Last: 15, Types: []int8{AckRelease}}}, false); err != nil {
		t.Fatal(err)
	}
	// A new leader (epoch 2) loads the state: acknowledged and archived records stay done,
	// released and still-acquired ones are available with their delivery counts.
	clk := &fakeClock{t: time.Unix(2000, 0)}
	q, err := Load(ctx, Options{Key: testKey, Persister: per, LeaderEpoch: 2, Config: testConfig(), Now: clk.now, NoTimers: true})
	if err != nil {
		t.Fatal(err)
	}
	if s, e := q.Offsets(); s != 12 || e != 20 {
		t.Fatalf("recovered window [%d,%d), want [12,20)", s, e)
	}
	for o, w := range map[int64]int8{12: Available, 13: Archived, 14: Archived, 15: Available, 19: Available} {
		if s, c := q.State(o); s != w || c != 1 {
			t.Errorf("offset %d: state %d count %d, want %d count 1", o, s, c, w)
		}
	}
	got := q.Acquire("m2", 10, batches(10, 19, 10), 0, false, nil)
	if count(got) != 6 || got[0].DeliveryCount != 2 {
		t.Fatalf("reacquired %+v", got)
	}
	// The old leader is fenced by the new one's epoch: its write fails and is undone.
	if err := p.Acknowledge(ctx, "m1", ack(16, 16, AckAccept), false); !errors.Is(err, ErrFenced) {
		t.Fatalf("old leader's ack: %v", err)
	}
	if !p.Fenced() {
		t.Fatal("old leader not fenced")
	}
	if s, _ := p.State(16); s != Acquired {
		t.Fatalf("failed ack not undone: state %d", s)
	}
}

func TestReleaseMember(t *testing.T) {
	ctx := context.Background()
	p, _ := newTestPartition(t, sharestate.NewMemory(), 0, testConfig())
	p.Acquire("m1", 0, batches(0, 4, 5), 0, false, nil)
	p.Acquire("m2", 5, batches(5, 9, 5), 0, false, nil)
	if err := p.ReleaseMember(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	if s, _ := p.State(0); s != Available {
		t.Fatal("m1's record not released")
	}
	if s, _ := p.State(5); s != Acquired {
		t.Fatal("m2's record released")
	}
}

func TestSessions(t *testing.T) {
	c := NewSessions(2)
	k := SessionKey{Group: "g", Member: "a"}
	tp := func(p int32) TopicPartition { return TopicPartition{TopicID: [16]byte{1}, Partition: p} }
	if _, err := c.Update(SessionUpdate{Key: k, Epoch: 1}, nil); !errors.Is(err, kerr.ShareSessionNotFound) {
		t.Fatalf("epoch 1 without a session: %v", err)
	}
	if _, err := c.Update(SessionUpdate{Key: k, Epoch: 0, Ack: true}, nil); !errors.Is(err, kerr.InvalidShareSessionEpoch) {
		t.Fatalf("ack opening a session: %v", err)
	}
	res, err := c.Update(SessionUpdate{Key: k, Epoch: 0, Add: []TopicPartition{tp(0), tp(1)}}, nil)
	if err != nil || !res.Full || len(res.Parts) != 2 {
		t.Fatalf("open: %+v %v", res, err)
	}
	if _, err := c.Update(SessionUpdate{Key: k, Epoch: 2}, nil); !errors.Is(err, kerr.InvalidShareSessionEpoch) {
		t.Fatalf("wrong epoch: %v", err)
	}
	res, err = c.Update(SessionUpdate{Key: k, Epoch: 1, Add: []TopicPartition{tp(2)}, Forget: []TopicPartition{tp(0)}}, nil)
	if err != nil || res.Full || len(res.Parts) != 2 || res.Parts[0] != tp(1) || res.Parts[1] != tp(2) {
		t.Fatalf("incremental: %+v %v", res, err)
	}
	if _, err := c.Update(SessionUpdate{Key: SessionKey{"g", "b"}, Epoch: 0}, nil); err != nil {
		t.Fatal(err)
	}
	closed := false
	if _, err := c.Update(SessionUpdate{Key: SessionKey{"g", "c"}, Epoch: 0}, nil); !errors.Is(err, kerr.ShareSessionLimitReached) {
		t.Fatalf("third session: %v", err)
	}
	// A session whose connection closed makes room.
	if _, err := c.Update(SessionUpdate{Key: SessionKey{"g", "b"}, Epoch: 1, Closed: func() bool { return closed }}, nil); err != nil {
		t.Fatal(err)
	}
	closed = true
	res, err = c.Update(SessionUpdate{Key: SessionKey{"g", "c"}, Epoch: 0}, nil)
	if err != nil || len(res.Evicted) != 1 || res.Evicted[0].Key.Member != "b" {
		t.Fatalf("evict closed: %+v %v", res, err)
	}
	res, err = c.Update(SessionUpdate{Key: k, Epoch: -1}, nil)
	if err != nil || !res.Closing || len(res.Replaced) != 2 {
		t.Fatalf("close: %+v %v", res, err)
	}
	if _, err := c.Update(SessionUpdate{Key: k, Epoch: 3}, nil); !errors.Is(err, kerr.ShareSessionNotFound) {
		t.Fatalf("after close: %v", err)
	}
}

// racingInit is a persister whose first read finds no state and then lets the group
// coordinator initialize it (state epoch 2, no start offset) before the leader's initialize.
type racingInit struct {
	*sharestate.Memory
	reads int
}

func (r *racingInit) Read(ctx context.Context, k sharestate.Key, leaderEpoch int32) (sharestate.State, error) {
	r.reads++
	if r.reads == 1 {
		if err := r.Memory.Initialize(ctx, k, 2, -1); err != nil {
			return sharestate.State{}, err
		}
		return sharestate.State{}, sharestate.ErrNotInitialized
	}
	return r.Memory.Read(ctx, k, leaderEpoch)
}

// TestLoadInitializedMeanwhile: a load whose initialization is fenced by one made since its
// read (the group coordinator's) reads again and initializes the start at the newer epoch.
func TestLoadInitializedMeanwhile(t *testing.T) {
	per := &racingInit{Memory: sharestate.NewMemory()}
	p, _ := newTestPartition(t, per, 7, testConfig())
	if start, end := p.Offsets(); start != 7 || end != 7 || p.stateEpoch != 2 {
		t.Fatalf("loaded at [%d, %d) state epoch %d, want [7, 7) at 2", start, end, p.stateEpoch)
	}
	got := p.Acquire("m1", 7, batches(7, 9, 3), 0, false, nil)
	if err := p.Acknowledge(context.Background(), "m1", ack(7, 9, AckAccept), false); err != nil || count(got) != 3 {
		t.Fatalf("acquired %v, acknowledge: %v", got, err)
	}
	if st, err := per.Memory.Read(context.Background(), testKey, 1); err != nil || st.StartOffset != 10 || st.StateEpoch != 2 {
		t.Fatalf("persisted %+v %v", st, err)
	}
}

func TestSplitAtBatches(t *testing.T) {
	lb := batches(0, 99, 10)
	got := SplitAtBatches(nil, []AcquiredRange{{First: 0, Last: 99, DeliveryCount: 1}}, lb, 25)
	want := []AcquiredRange{{0, 29, 1}, {30, 59, 1}, {60, 89, 1}, {90, 99, 1}}
	if len(got) != len(want) {
		t.Fatalf("split %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("split %v, want %v", got, want)
		}
	}
	// A range starting inside a log batch, one short enough, and a log batch larger than the
	// batch size.
	got = SplitAtBatches(nil, []AcquiredRange{{First: 5, Last: 34, DeliveryCount: 2}, {First: 50, Last: 55, DeliveryCount: 1}}, lb, 10)
	want = []AcquiredRange{{5, 19, 2}, {20, 29, 2}, {30, 34, 2}, {50, 55, 1}}
	if len(got) != len(want) {
		t.Fatalf("split %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("split %v, want %v", got, want)
		}
	}
	if got := SplitAtBatches(nil, []AcquiredRange{{First: 0, Last: 99, DeliveryCount: 1}}, batches(0, 99, 100), 10); len(got) != 1 {
		t.Fatalf("one log batch split: %v", got)
	}
	if NeedsSplit([]AcquiredRange{{First: 0, Last: 9}}, 10) || !NeedsSplit([]AcquiredRange{{First: 0, Last: 10}}, 10) || NeedsSplit([]AcquiredRange{{First: 0, Last: 10}}, 0) {
		t.Fatal("NeedsSplit")
	}
}

// TestClosedPartitionChangesNothing: a Partition closed while an operation waited for it (the
// Manager dropped it and may load another) acquires nothing and refuses acknowledgements.
func TestClosedPartitionChangesNothing(t *testing.T) {
	per := sharestate.NewMemory()
	p, _ := newTestPartition(t, per, 0, testConfig())
	got := p.Acquire("m1", 0, batches(0, 9, 5), 0, false, nil)
	if count(got) != 10 {
		t.Fatalf("acquired %v", got)
	}
	p.Close()
	if err := p.Acknowledge(context.Background(), "m1", ack(0, 4, AckAccept), false); !errors.Is(err, ErrClosed) || !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("acknowledge on a closed partition: %v", err)
	}
	if err := p.ReleaseMember(context.Background(), "m1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("release on a closed partition: %v", err)
	}
	if got := p.Acquire("m2", 10, batches(10, 19, 5), 0, false, nil); len(got) != 0 {
		t.Fatalf("acquired on a closed partition: %v", got)
	}
	if st, err := per.Read(context.Background(), testKey, 1); err != nil || st.StartOffset != 0 || len(st.Batches) != 0 {
		t.Fatalf("persisted after close: %+v %v", st, err)
	}
}
