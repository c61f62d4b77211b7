package netio

import (
	"sync"
	"time"
)

// rateGate spaces events to at most rate a second, allowing a burst of one second's worth
// (the generic cell rate algorithm). It is max.connection.creation.rate: the accept loop
// waits for it, as Kafka's acceptor is throttled. A nil gate is unlimited.
type rateGate struct {
	interval time.Duration // time per event
	burst    time.Duration // how far ahead of now the schedule may run without waiting

	mu sync.Mutex // guards tat
	// tat is the theoretical arrival time of the next event.
	tat time.Time
}

func newRateGate(perSecond int) *rateGate {
	if perSecond <= 0 || perSecond >= 1<<31-1 {
		return nil
	}
	interval := time.Second / time.Duration(perSecond)
	return &rateGate{interval: interval, burst: time.Second - interval}
}

// reserve takes one event now and returns how long to wait before it may happen.
func (g *rateGate) reserve(now time.Time) time.Duration {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tat.Before(now) {
		g.tat = now
	}
	wait := g.tat.Sub(now) - g.burst
	g.tat = g.tat.Add(g.interval)
	return max(wait, 0)
}
