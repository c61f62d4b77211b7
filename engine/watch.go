package engine

import "sync"

// watch is a broadcast of "something changed" for waiters that park on a channel (fetch long
// polls). The channel is made only when someone waits, so a change nobody waits for costs one
// uncontended lock and no allocation.
type watch struct {
	mu sync.Mutex
	ch chan struct{}
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
func (l *Log) FlushedChanged() <-chan struct{} { return *l.flush.done.Load() }

// WakeHighWatermarkWaiters wakes everyone waiting on HighWatermarkChanged without moving it (a
// leadership change: produce waits re-check their leader epoch).
func (l *Log) WakeHighWatermarkWaiters() { l.hwChanged.fire() }
