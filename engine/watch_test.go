package engine

import (
	"testing"
	"time"
)

func TestWaiterSeveralWatches(t *testing.T) {
	var a, b watch
	x := NewWaiter()
	x.add(&a)
	x.add(&b)
	select {
	case <-x.C:
		t.Fatal("notified before any change")
	default:
	}
	b.fire()
	select {
	case <-x.C:
	case <-time.After(time.Second):
		t.Fatal("not notified by the second watch")
	}
	if len(b.waiters) != 0 {
		t.Fatalf("fired watch keeps %d waiters", len(b.waiters))
	}
	x.Stop()
	if len(a.waiters) != 0 {
		t.Fatalf("Stop left %d waiters on the other watch", len(a.waiters))
	}
	a.fire()
	select {
	case <-x.C:
		t.Fatal("notified after Stop")
	default:
	}
	// Reuse after Stop.
	x.add(&a)
	a.fire()
	select {
	case <-x.C:
	case <-time.After(time.Second):
		t.Fatal("reused waiter not notified")
	}
	x.Stop()
}

func BenchmarkWatchFireNoWaiters(b *testing.B) {
	var w watch
	b.ReportAllocs()
	for b.Loop() {
		w.fire()
	}
}
