package netio

import (
	"sync"
	"sync/atomic"
)

// The memory bounds of the transport. A request frame counts from the moment its size prefix
// was read (before its body is read) until its buffer goes back to the pool: when its reply has
// been written, or, for a reply that says it keeps no reference to the request's bytes
// (Reply.NoAlias: a produce, whose records are in the log once its handler returned), as soon
// as the handler returned. Frames count against two bounds:
//
//   - the connection's: Config.MaxConnectionBytes bytes and Config.MaxInFlight requests read
//     and not yet answered. Before reading a frame's body the reader waits (the connection is
//     muted: nothing more is read from its socket) until the frame fits; a frame always fits
//     when the connection holds no other bytes, so a request of socket.request.max.bytes is
//     still served.
//   - the broker's (budget): Config.MaxQueuedBytes (queued.max.request.bytes) over every
//     connection, with a reserve for small frames (smallFrame), so that when big produces fill
//     the budget, the small requests that let their replies complete (a follower's fetch, a
//     group's SyncGroup, a heartbeat) are still read. A frame always fits when the broker holds
//     no other bytes.
//
// Only readers wait; a writer never does (it only releases), so a reply never waits for memory
// and every wait ends once the replies ahead of it are written. Those replies wait for bounded
// things only (fdatasync, a long poll's max wait, acks=all's timeout, a rebalance timeout).
//
// Config.MaxQueuedRequests (queued.max.requests) bounds, as Kafka's request queue does, how
// many requests are read but not yet handled across connections: a reader takes a slot after
// reading a frame and gives it back when the handler returns (a parked long poll or a produce
// waiting for fdatasync has been handled: like in Kafka, it no longer holds a slot).

// smallFrame is the size up to which a frame may use the broker budget's reserve.
const smallFrame = 64 << 10

// smallDecode is the decode charge up to which a request may use the broker budget's reserve
// (a small frame's charge at the amplification DecodeCost estimates for most APIs).
const smallDecode = 40 * smallFrame

// budget is a broker-wide bound on bytes held by request frames. A nil *budget is unbounded.
// Frames larger than smallFrame are admitted in arrival order (a large frame never waits
// forever while later ones that happen to fit pass it); small frames pass them within the
// reserve.
type budget struct {
	limit   int64 // bytes every frame may use
	reserve int64 // extra bytes only frames of at most smallFrame may use

	mu sync.Mutex // guards held, waiters, queue, wake
	// held is the bytes of frames and decode charges counted now.
	held int64
	// decoding is the bytes of decode charges counted now (a part of held).
	decoding int64
	waiters  int
	// queue are the large frames waiting, in arrival order: only the first may be admitted.
	queue []*int64
	// wake is closed (and cleared) when a waiter may now fit: a release, or a change of the
	// queue's head.
	wake chan struct{}
}

func newBudget(limit int64) *budget {
	if limit <= 0 {
		return nil
	}
	return &budget{limit: limit, reserve: max(limit/16, 4*smallFrame)}
}

func (b *budget) fitsLocked(n int64) bool {
	switch {
	case b.held == 0, b.held+n <= b.limit:
		return true
	case n <= smallFrame:
		return b.held+n <= b.limit+b.reserve
	}
	return false
}

// acquire counts n bytes, waiting while they do not fit. It gives up (false) when stop or dead
// is closed. onWait is called once, before the first wait.
func (b *budget) acquire(n int64, stop, dead <-chan struct{}, onWait func()) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	large := n > smallFrame
	if (!large || len(b.queue) == 0) && b.fitsLocked(n) {
		b.held += n
		return true
	}
	var me *int64 // this frame's place in the queue (a pointer only identifies it)
	if large {
		me = new(int64)
		b.queue = append(b.queue, me)
	}
	if onWait != nil {
		onWait()
	}
	for !(b.fitsLocked(n) && (!large || b.queue[0] == me)) {
		if !b.waitLocked(stop, dead) {
			if large {
				b.leaveQueueLocked(me)
			}
			return false
		}
	}
	if large {
		b.leaveQueueLocked(me)
	}
	b.held += n
	return true
}

// acquireDecode counts a decode charge of n bytes for a frame already read (Config.DecodeCost),
// waiting while it does not fit. A charge fits within the limit (small ones, up to smallDecode,
// also within the reserve), or when no other decode charge is counted: so one request at a time
// may decode past the budget (a frame of socket.request.max.bytes made of tiny entries), and a
// wait always ends, since the charges counted belong to requests being handled or answered,
// which never wait for the budget. The waiting reader holds its frame's bytes, not a charge.
func (b *budget) acquireDecode(n int64, stop, dead <-chan struct{}, onWait func()) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	waited := false
	for !b.decodeFitsLocked(n) {
		if !waited && onWait != nil {
			onWait()
		}
		waited = true
		if !b.waitLocked(stop, dead) {
			return false
		}
	}
	b.held += n
	b.decoding += n
	return true
}

func (b *budget) decodeFitsLocked(n int64) bool {
	switch {
	case b.decoding == 0, b.held+n <= b.limit:
		return true
	case n <= smallDecode:
		return b.held+n <= b.limit+b.reserve
	}
	return false
}

// releaseDecode gives back a decode charge of n bytes.
func (b *budget) releaseDecode(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.held -= n
	b.decoding -= n
	b.wakeLocked()
	b.mu.Unlock()
}

// waitLocked waits, with b.mu released, for the next wake (a release or a new queue head); it
// returns false when stop or dead closed instead.
func (b *budget) waitLocked(stop, dead <-chan struct{}) bool {
	if b.wake == nil {
		b.wake = make(chan struct{})
	}
	w := b.wake
	b.waiters++
	b.mu.Unlock()
	woken := true
	select {
	case <-w:
	case <-stop:
		woken = false
	case <-dead:
		woken = false
	}
	b.mu.Lock()
	b.waiters--
	return woken
}

// leaveQueueLocked removes me from the queue; a new head is woken, as it may fit.
func (b *budget) leaveQueueLocked(me *int64) {
	for i, q := range b.queue {
		if q == me {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			if i == 0 {
				b.wakeLocked()
			}
			return
		}
	}
}

func (b *budget) wakeLocked() {
	if b.waiters > 0 && b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
}

// release gives back n bytes and wakes the waiters.
func (b *budget) release(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.held -= n
	b.wakeLocked()
	b.mu.Unlock()
}

// Stats is a snapshot of the transport's bounds at work (metrics).
type Stats struct {
	// Connections is the number of open client connections.
	Connections int64
	// HeldBytes is the bytes of request frames read (or being read) and not yet released,
	// over every connection.
	HeldBytes int64
	// DecodeBytes is the decode charges (Config.DecodeCost) of requests being handled or
	// answered, over every connection.
	DecodeBytes int64
	// HeldRequests is the number of requests read and not yet answered, over every connection.
	HeldRequests int64
	// Muted is the number of connections whose reader waits for room now (per-connection
	// bound, broker budget or queued.max.requests); MutedTotal counts every such wait so far.
	Muted      int64
	MutedTotal int64
	// RefusedPerIP counts connections closed at accept by max.connections.per.ip;
	// WaitingAccept is the number of listeners whose accept loop waits now for a connection
	// slot (max.connections, listener max.connections).
	RefusedPerIP  int64
	WaitingAccept int64
	// Throttled counts accepts delayed by max.connection.creation.rate.
	Throttled int64
	// QuotaMutes counts waits of a connection's reader for a client-quota throttle
	// (Reply.Throttle) to end.
	QuotaMutes int64
}

// stats are the counters behind Stats.
type stats struct {
	heldBytes     atomic.Int64
	decodeBytes   atomic.Int64
	heldRequests  atomic.Int64
	muted         atomic.Int64
	mutedTotal    atomic.Int64
	refusedPerIP  atomic.Int64
	throttled     atomic.Int64
	waitingAccept atomic.Int64
	quotaMutes    atomic.Int64
}

// Stats returns the current figures.
func (s *Server) Stats() Stats {
	return Stats{
		Connections:   s.connCount.Load(),
		HeldBytes:     s.st.heldBytes.Load(),
		DecodeBytes:   s.st.decodeBytes.Load(),
		HeldRequests:  s.st.heldRequests.Load(),
		Muted:         s.st.muted.Load(),
		MutedTotal:    s.st.mutedTotal.Load(),
		RefusedPerIP:  s.st.refusedPerIP.Load(),
		WaitingAccept: s.st.waitingAccept.Load(),
		Throttled:     s.st.throttled.Load(),
		QuotaMutes:    s.st.quotaMutes.Load(),
	}
}
