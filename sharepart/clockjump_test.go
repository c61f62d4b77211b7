package sharepart

import (
	"context"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/clock/clockctl"
	"github.com/weir-mq/weir/sharestate"
)

// TestLocksIgnoreWallClockSteps: with the default (monotonic) clock, a lock acquired before the
// wall clock steps back a day still expires after its lock duration, and one acquired before a
// forward step is still held right after it: acquisition locks are timers, as Kafka's are, and a
// step of the broker's wall clock (internal/clock) moves neither.
func TestLocksIgnoreWallClockSteps(t *testing.T) {
	t.Cleanup(clockctl.Reset)
	ctx := context.Background()
	avail := make(chan struct{}, 16)
	cfg := Config{LockDuration: 300 * time.Millisecond, DeliveryLimit: 5, MaxInFlight: 100}
	p, err := Load(ctx, Options{Key: testKey, Persister: sharestate.NewMemory(), LeaderEpoch: 1, Config: cfg,
		OnAvailable: func() {
			select {
			case avail <- struct{}{}:
			default:
			}
		},
		ResolveStart: func() (int64, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	if got := p.Acquire("m1", 0, batches(0, 3, 4), 0, false, nil); count(got) != 4 {
		t.Fatalf("m1 acquired %+v", got)
	}
	clockctl.Step(-24 * time.Hour)
	select {
	case <-avail:
	case <-time.After(10 * time.Second):
		t.Fatal("a lock of 300ms acquired before a -1 day step did not expire within 10s")
	}
	got := p.Acquire("m2", 0, batches(0, 3, 4), 0, false, nil)
	if count(got) != 4 || got[0].DeliveryCount != 2 {
		t.Fatalf("m2 acquired %+v after m1's locks expired", got)
	}

	clockctl.Step(48 * time.Hour) // a day ahead of the real clock
	if got := p.Acquire("m3", 0, batches(0, 3, 4), 0, false, nil); count(got) != 0 {
		t.Fatalf("m3 acquired %+v right after a +1 day step: m2's locks were broken", got)
	}
	for o := int64(0); o < 4; o++ {
		if s, _ := p.State(o); s != Acquired {
			t.Fatalf("offset %d state %d after a +1 day step, want still acquired", o, s)
		}
	}
}
