package engine

import "sync"

// watch is a broadcast of "something changed" for waiters that park on a channel (fetch long
// polls). The channel is made only when someone waits, so a change nobody waits for costs one
// uncontended lock and no allocation.
type watch struct {
	mu      sync.Mutex
	ch      chan struct{}
	waiters []*Waiter // registered with Waiter.Watch*; notified and dropped at the next fire
}

// Waiter waits for a change on any of several logs with one channel and no goroutine per log
// (a fetch long poll over many partitions). Register it on each log, check the condition, then
// receive from C; Stop unregisters it. A Waiter serves one wait at a time.
type Waiter struct {
	C       chan struct{}
	watched []*watch
}

// NewWaiter returns a Waiter with nothing registered.
func NewWaiter() *Waiter { return &Waiter{C: make(chan struct{}, 1)} }

func (x *Waiter) add(w *watch) {
	w.mu.Lock()
	w.waiters = append(w.waiters, x)
	w.mu.Unlock()
	x.watched = append(x.watched, w)
}

// WatchHighWatermark registers x for l's next high-watermark change.
func (x *Waiter) WatchHighWatermark(l *Log) { x.add(&l.hwChanged) }

// WatchEnd registers x for l's next log-end change.
func (x *Waiter) WatchEnd(l *Log) { x.add(&l.endChanged) }

// Stop unregisters x from every log it still watches and drains C, so x can be reused.
func (x *Waiter) Stop() {
	for _, w := range x.watched {
		w.mu.Lock()
		for i, y := range w.waiters {
			if y == x {
				last := len(w.waiters) - 1
				w.waiters[i] = w.waiters[last]
				w.waiters[last] = nil
				w.waiters = w.waiters[:last]
				break
			}
		}
		w.mu.Unlock()
	}
	x.watched = x.watched[:0]
	select {
	case <-x.C:
	default:
	}
}

// wait returns a channel closed at the next fire.
func (w *watch) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

func (w *watch) fire() {
	w.mu.Lock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
	for i, x := range w.waiters {
		select {
		case x.C <- struct{}{}:
		default:
		}
		w.waiters[i] = nil
	}
	w.waiters = w.waiters[:0]
	w.mu.Unlock()
}

// HighWatermarkChanged returns a channel closed the next time the high watermark is set. Check
// the condition after taking the channel, then wait on it.
func (l *Log) HighWatermarkChanged() <-chan struct{} { return l.hwChanged.wait() }

// EndChanged returns a channel closed the next time the log end moves (an append or a
// truncation): followers' long polls at their leader wait on it.
func (l *Log) EndChanged() <-chan struct{} { return l.endChanged.wait() }

// FlushedChanged returns a channel closed after the next flush cycle (RecoveryPoint may have
// moved): a leader counts only its durable end toward the high watermark under a durable policy.
func (l *Log) FlushedChanged() <-chan struct{} { return l.flush.done.wait() }

// WakeHighWatermarkWaiters wakes everyone waiting on HighWatermarkChanged without moving it (a
// leadership change: produce waits re-check their leader epoch).
func (l *Log) WakeHighWatermarkWaiters() { l.hwChanged.fire() }
