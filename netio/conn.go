package netio

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/valyala/bytebufferpool"

	"github.com/weir-mq/weir/internal/clock"
)

// conn is one client connection: a reader goroutine (serve) and a writer goroutine.
type conn struct {
	srv *Server
	// nc is the connection requests are read from and replies written to: the TCP connection,
	// or a TLS connection over it.
	nc net.Conn
	// tcp is the TCP connection when nothing sits between it and the client (zero-copy
	// replies: writev + sendfile); nil on TLS connections.
	tcp  *net.TCPConn
	tls  *tls.Conn
	info ConnInfo

	// br reads requests from nc (readBufferSize bytes): a size prefix and a small request, or
	// the start of a large one, come in one read(2); the rest of a large frame is read straight
	// into the frame's buffer (bufio does not copy reads larger than its buffer).
	br *bufio.Reader

	queue chan queued
	// unwritten is the number of replies sent to the writer goroutine and not yet finished by
	// it. While it is zero the writer is idle and nothing is ahead in the queue, so the reader
	// may write an immediate reply itself (finishInline) without reordering replies.
	unwritten atomic.Int32
	// broken and scratch belong to whichever goroutine writes replies at the time: the writer,
	// or the reader while unwritten is zero (the queue send and the atomic counter order the
	// hand-offs). broken is set once a write failed or a Close reply was written.
	broken   bool
	scratch  *bytebufferpool.ByteBuffer
	stopOnce sync.Once
	stopped  chan struct{}
	// readDone is closed when the reader returns (info.Closing).
	readDone chan struct{}
	// dead is closed by the writer when the connection broke (a write failed, or a Close
	// reply): a reader waiting for room gives up.
	dead chan struct{}

	holdMu sync.Mutex // guards heldBytes and pending
	// heldBytes is the bytes of this connection's frames counted now (budget.go); pending is
	// the number of its requests read (or being read) and not yet answered.
	heldBytes int64
	pending   int
	// room wakes the reader waiting for room after the writer released some (capacity 1, so a
	// release between the reader's check and its wait is not lost).
	room chan struct{}

	// muteUntil is when a quota mute ends (clock.Nanotime, monotonic; Reply.Throttle): the reader reads and
	// handles nothing more from the connection before.
	muteUntil atomic.Int64
}

// queued is a reply waiting for its turn on the writer, with the buffer its request aliases.
type queued struct {
	corr     int32
	key      int16
	version  int16
	received time.Time
	reply    Reply
	frame    *bytebufferpool.ByteBuffer
	// size is the bytes frame counts for (0 once released).
	size int64
	// decode is the request's decode charge (Config.DecodeCost), released with the request.
	decode int64
}

func newConn(s *Server, tc *net.TCPConn, l Listener) *conn {
	readDone := make(chan struct{})
	c := &conn{
		srv: s, nc: tc, tcp: tc,
		info: ConnInfo{Remote: tc.RemoteAddr(), Local: tc.LocalAddr(), Listener: l.Name, ID: s.nextID.Add(1), Closing: readDone,
			SecurityProtocol: l.SecurityProtocol, TLS: l.TLS != nil, RequireAuth: l.RequireAuth},
		queue:    make(chan queued, s.cfg.MaxInFlight),
		stopped:  make(chan struct{}),
		readDone: readDone,
		dead:     make(chan struct{}),
		room:     make(chan struct{}, 1),
	}
	if l.TLS != nil {
		c.tls = serverTLS(tc, l.TLS)
		c.nc, c.tcp = c.tls, nil
	}
	return c
}

// readBufferSize is the read-ahead of a connection's reader: enough for a size prefix with a
// small request (metadata, heartbeats, a fetch) in one read(2), small enough that many idle
// connections cost little.
const readBufferSize = 4 << 10

// stopReading makes the reader stop after the request it is reading (graceful shutdown).
func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		close(c.stopped)
		_ = c.nc.SetReadDeadline(time.Now())
	})
}

func (c *conn) serve() {
	if c.tls != nil && !c.handshake() {
		c.nc.Close()
		return
	}
	c.br = bufio.NewReaderSize(c.nc, readBufferSize)
	c.scratch = bytebufferpool.Get()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	c.readLoop()
	close(c.readDone) // parked replies (long polls) finish now instead of at their timeout
	close(c.queue)
	<-writerDone
	c.nc.Close()
	bytebufferpool.Put(c.scratch)
}

// readLoop reads, decodes and dispatches requests until an error, a Close reply or shutdown.
func (c *conn) readLoop() {
	var sizeBuf [4]byte
	for {
		select {
		case <-c.stopped:
			return
		default:
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
		// Check again: a stopReading between the check above and the new deadline would
		// otherwise be overridden, leaving Shutdown waiting for the idle timeout.
		select {
		case <-c.stopped:
			return
		default:
		}
		if !c.waitThrottle() {
			return
		}
		if _, err := io.ReadFull(c.br, sizeBuf[:]); err != nil {
			c.logReadErr(err)
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if size <= 0 || size > c.srv.cfg.MaxRequestBytes {
			slog.Warn("closing connection: request size out of bounds", "remote", c.info.Remote, "size", size, "socket.request.max.bytes", c.srv.cfg.MaxRequestBytes)
			return
		}
		if size > c.srv.cfg.MaxUnauthenticatedBytes && !c.info.Authenticated() {
			slog.Warn("closing connection: unauthenticated request too large", "remote", c.info.Remote, "listener", c.info.Listener, "size", size, "sasl.server.max.receive.size", c.srv.cfg.MaxUnauthenticatedBytes)
			return
		}
		n := int64(size)
		if !c.admit(n) {
			return
		}
		frame := c.srv.getFrame(int(size))
		if err := readFrame(c.br, frame, int(size)); err != nil {
			c.done(frame, n)
			c.logReadErr(err)
			return
		}
		// A throttle given while this frame was being read (a deferred reply written by the
		// writer goroutine meanwhile) holds the frame until it is over.
		if !c.waitThrottle() {
			c.done(frame, n)
			return
		}
		dc, ok := c.chargeDecode(frame.B)
		if !ok {
			c.done(frame, n)
			return
		}
		if !c.takeSlot() {
			c.releaseDecode(dc)
			c.done(frame, n)
			return
		}
		q, ok := c.dispatch(frame)
		c.srv.putSlot()
		if !ok {
			c.releaseDecode(dc)
			c.done(frame, n)
			return
		}
		q.size, q.decode = n, dc
		if q.reply.NoAlias { // nothing refers to the request's bytes any more: release them now
			c.releaseFrame(frame, n)
			q.frame, q.size = nil, 0
		}
		if q.reply.Deferred == nil && c.unwritten.Load() == 0 {
			// Nothing is ahead of this reply and it needs no waiting: write it here rather than
			// wake the writer goroutine for it (a hand-off costs a wake-up, often of another
			// thread, per request). Like Kafka's processor, the connection reads its next
			// request once this reply is out.
			c.finish(q)
		} else {
			c.unwritten.Add(1)
			c.queue <- q // never blocks: pending <= MaxInFlight = cap(queue)
		}
		if q.reply.Close {
			return
		}
	}
}

// admit waits until a frame of n bytes fits the connection's bounds (bytes held, requests in
// flight) and then the broker's budget, and counts it. While it waits the connection is muted:
// nothing is read from its socket. It returns false when the connection stops or broke.
func (c *conn) admit(n int64) bool {
	muted := false
	mute := func() {
		if !muted {
			muted = true
			c.srv.st.muted.Add(1)
			c.srv.st.mutedTotal.Add(1)
		}
	}
	ok := c.reserve(n, mute)
	if ok && !c.srv.budget.acquire(n, c.stopped, c.dead, mute) {
		c.unreserve(n)
		ok = false
	}
	if muted {
		c.srv.st.muted.Add(-1)
		// The wait was the broker's doing, not the client's: the idle timer starts again.
		_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
		// A stopReading during the wait set a deadline that the line above overrode: stop
		// here, or Shutdown would wait for the idle timeout.
		select {
		case <-c.stopped:
			if ok {
				c.srv.budget.release(n)
				c.unreserve(n)
				ok = false
			}
		default:
		}
	}
	if ok {
		c.srv.st.heldBytes.Add(n)
		c.srv.st.heldRequests.Add(1)
	}
	return ok
}

// reserve counts n bytes and one request against the connection's bounds, waiting while they do
// not fit. A frame always fits when the connection holds no bytes.
func (c *conn) reserve(n int64, onWait func()) bool {
	for {
		c.holdMu.Lock()
		if c.pending < c.srv.cfg.MaxInFlight && (c.heldBytes == 0 || c.heldBytes+n <= c.srv.cfg.MaxConnectionBytes) {
			c.heldBytes += n
			c.pending++
			c.holdMu.Unlock()
			return true
		}
		c.holdMu.Unlock()
		onWait()
		select {
		case <-c.room:
		case <-c.stopped:
			return false
		case <-c.dead:
			return false
		}
	}
}

func (c *conn) unreserve(n int64) {
	c.holdMu.Lock()
	c.heldBytes -= n
	c.pending--
	c.holdMu.Unlock()
}

// takeSlot takes one of the broker's queued.max.requests slots for a request about to be
// handled, waiting (muted) while none is free.
func (c *conn) takeSlot() bool {
	select {
	case c.srv.slots <- struct{}{}:
		return true
	default:
	}
	c.srv.st.muted.Add(1)
	c.srv.st.mutedTotal.Add(1)
	defer c.srv.st.muted.Add(-1)
	select {
	case c.srv.slots <- struct{}{}:
		return true
	case <-c.stopped:
	case <-c.dead:
	}
	return false
}

func (s *Server) putSlot() { <-s.slots }

// releaseFrame returns a frame of n counted bytes to the pool and its bytes to the bounds.
func (c *conn) releaseFrame(frame *bytebufferpool.ByteBuffer, n int64) {
	c.srv.putFrame(frame)
	c.holdMu.Lock()
	c.heldBytes -= n
	c.holdMu.Unlock()
	c.srv.budget.release(n)
	c.srv.st.heldBytes.Add(-n)
	c.wakeReader()
}

// done ends a request: its frame (if not released yet, n counted bytes) is released and it no
// longer counts as in flight.
func (c *conn) done(frame *bytebufferpool.ByteBuffer, n int64) {
	if frame != nil {
		c.srv.putFrame(frame)
		c.srv.budget.release(n)
		c.srv.st.heldBytes.Add(-n)
	} else {
		n = 0
	}
	c.holdMu.Lock()
	c.heldBytes -= n
	c.pending--
	c.holdMu.Unlock()
	c.srv.st.heldRequests.Add(-1)
	c.wakeReader()
}

func (c *conn) wakeReader() {
	select {
	case c.room <- struct{}{}:
	default:
	}
}

func (c *conn) logReadErr(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
		select {
		case <-c.stopped:
		default:
			if errors.Is(err, os.ErrDeadlineExceeded) {
				slog.Debug("closing idle connection", "remote", c.info.Remote)
			}
		}
		return
	}
	slog.Debug("connection read", "remote", c.info.Remote, "err", err)
}

// dispatch decodes one frame and runs its handler. ok is false when the connection must close
// without an answer.
func (c *conn) dispatch(frame *bytebufferpool.ByteBuffer) (q queued, ok bool) {
	received := time.Now()
	// The authentication gate: before the connection authenticated on a RequireAuth listener,
	// a request of any API but PreAuthKeys closes it, before its body is even decoded.
	if !c.info.Authenticated() && len(frame.B) >= 2 {
		if key := int16(binary.BigEndian.Uint16(frame.B)); !preAuthKey(key) {
			slog.Warn("closing connection: request before authentication", "remote", c.info.Remote, "listener", c.info.Listener, "api", kmsg.NameForKey(key), "key", key)
			return q, false
		}
	}
	req, api, err := decode(c.srv.reg, frame.B)
	if errors.Is(err, errUnsupportedVersion) {
		if req.Key == 18 { // ApiVersions: answer v0 with our range so the client retries lower (KIP-511)
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.SetVersion(0)
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			k := kmsg.NewApiVersionsResponseApiKey()
			k.ApiKey, k.MinVersion, k.MaxVersion = 18, api.MinVersion, api.MaxVersion
			resp.ApiKeys = append(resp.ApiKeys, k)
			return queued{corr: req.CorrelationID, key: 18, reply: Reply{Response: resp}, frame: frame}, true
		}
		slog.Warn("closing connection: unsupported version", "remote", c.info.Remote, "api", kmsg.NameForKey(req.Key), "version", req.Version)
		return q, false
	}
	if err != nil {
		slog.Warn("closing connection: bad request", "remote", c.info.Remote, "err", err)
		return q, false
	}
	req.Conn = &c.info
	req.Received = received
	req.Size = int32(len(frame.B))
	reply, ok := c.call(api, req)
	if !ok {
		return q, false
	}
	return queued{corr: req.CorrelationID, key: req.Key, version: req.Version, received: received, reply: reply, frame: frame}, true
}

// call runs a handler, turning a panic into a closed connection.
func (c *conn) call(api API, req *Request) (reply Reply, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			c.srv.panics.Add(1)
			slog.Error("handler panic; closing connection", "api", kmsg.NameForKey(req.Key), "version", req.Version, "remote", c.info.Remote, "panic", r, "stack", string(debug.Stack()))
			ok = false
		}
	}()
	return api.Handle(req), true
}

// writeLoop writes the replies the reader queued, in request order. After a write error the
// replies are still finished (deferred work run so its resources are released) without writing.
func (c *conn) writeLoop() {
	for q := range c.queue {
		c.finish(q)
		c.unwritten.Add(-1)
	}
}

// finish runs a reply's deferred work, writes it (unless the connection broke), and releases
// what the request held. Only the goroutine that writes replies at the time calls it (see
// unwritten).
func (c *conn) finish(q queued) {
	r := q.reply
	if r.Deferred != nil {
		r = c.runDeferred(q, r.Deferred)
	}
	if !c.broken && !r.None && (r.Response != nil || r.Body != nil) {
		// A client that stops reading must not hold the connection forever: like Kafka's
		// idle timer, which runs on writes too, connections.max.idle.ms bounds each reply.
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
		if err := writeReply(c.nc, c.tcp, q.corr, q.key, &r, c.scratch); err != nil {
			slog.Debug("connection write", "remote", c.info.Remote, "err", err)
			c.broken = true
			c.nc.Close() // unblocks the reader
			close(c.dead)
		}
	}
	if r.Body != nil {
		r.Body.Release()
	}
	if t := max(r.Throttle, q.reply.Throttle); t > 0 {
		until := clock.Nanotime() + int64(t)
		if until > c.muteUntil.Load() {
			c.muteUntil.Store(until)
		}
	}
	if o := c.srv.cfg.Observer; o != nil && !q.received.IsZero() {
		o.RequestDone(q.key, q.version, time.Since(q.received))
	}
	if r.Close && !c.broken {
		c.broken = true
		c.nc.Close()
		close(c.dead)
	}
	c.releaseDecode(q.decode)
	c.done(q.frame, q.size)
}

// waitThrottle waits, muted, until a quota throttle (Reply.Throttle) is over. It returns false
// when the connection stops or broke meanwhile.
func (c *conn) waitThrottle() bool {
	until := c.muteUntil.Load()
	if until == 0 {
		return true
	}
	d := time.Duration(until - clock.Nanotime())
	if d <= 0 {
		return true
	}
	c.srv.st.muted.Add(1)
	c.srv.st.mutedTotal.Add(1)
	c.srv.st.quotaMutes.Add(1)
	defer c.srv.st.muted.Add(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.stopped:
		return false
	case <-c.dead:
		return false
	}
	// The wait was the quota's, not the client's idleness: the idle timer starts again.
	_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
	return true
}

// chargeDecode counts the decode charge of a frame read (Config.DecodeCost) against the broker
// budget, waiting (muted) while it does not fit. It returns false when the connection stops or
// broke meanwhile.
func (c *conn) chargeDecode(frame []byte) (int64, bool) {
	cost := c.srv.cfg.DecodeCost
	if cost == nil || c.srv.budget == nil || len(frame) < 4 {
		return 0, true
	}
	n := cost(int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:])), frame)
	if n <= 0 {
		return 0, true
	}
	muted := false
	ok := c.srv.budget.acquireDecode(n, c.stopped, c.dead, func() {
		muted = true
		c.srv.st.muted.Add(1)
		c.srv.st.mutedTotal.Add(1)
	})
	if muted {
		c.srv.st.muted.Add(-1)
		_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
	}
	if !ok {
		return 0, false
	}
	c.srv.st.decodeBytes.Add(n)
	return n, true
}

func (c *conn) releaseDecode(n int64) {
	if n > 0 {
		c.srv.budget.releaseDecode(n)
		c.srv.st.decodeBytes.Add(-n)
	}
}

func (c *conn) runDeferred(q queued, f func() Reply) (r Reply) {
	defer func() {
		if p := recover(); p != nil {
			c.srv.panics.Add(1)
			slog.Error("deferred handler panic; closing connection", "api", kmsg.NameForKey(q.key), "remote", c.info.Remote, "panic", p, "stack", string(debug.Stack()))
			r = Reply{Close: true}
		}
	}()
	return f()
}

// frameChunk is how much of a frame is allocated before its bytes arrive: a size prefix alone
// cannot make the broker allocate socket.request.max.bytes; memory follows the bytes received.
const frameChunk = 1 << 20

// readFrame reads a frame of size bytes into buf, growing it as the bytes arrive.
func readFrame(r io.Reader, buf *bytebufferpool.ByteBuffer, size int) error {
	buf.B = buf.B[:0]
	for len(buf.B) < size {
		want := min(size, max(2*len(buf.B), frameChunk))
		if cap(buf.B) < want {
			grown := make([]byte, len(buf.B), want)
			copy(grown, buf.B)
			buf.B = grown
		}
		n := min(want, cap(buf.B))
		if _, err := io.ReadFull(r, buf.B[len(buf.B):n]); err != nil {
			return err
		}
		buf.B = buf.B[:n]
	}
	return nil
}
