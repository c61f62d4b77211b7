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
