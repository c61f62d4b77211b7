package netio

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/valyala/bytebufferpool"
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

	queue    chan queued
	stopOnce sync.Once
	stopped  chan struct{}
	// readDone is closed when the reader returns (info.Closing).
	readDone chan struct{}
}

// queued is a reply waiting for its turn on the writer, with the buffer its request aliases.
type queued struct {
	corr     int32
	key      int16
	version  int16
	received time.Time
	reply    Reply
	frame    *bytebufferpool.ByteBuffer
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
	}
	if l.TLS != nil {
		c.tls = tls.Server(tc, l.TLS)
		c.nc, c.tcp = c.tls, nil
	}
	return c
}

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
		if _, err := io.ReadFull(c.nc, sizeBuf[:]); err != nil {
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
		frame := bytebufferpool.Get()
		if err := readFrame(c.nc, frame, int(size)); err != nil {
			bytebufferpool.Put(frame)
			c.logReadErr(err)
			return
		}
		q, ok := c.dispatch(frame)
		if !ok {
			bytebufferpool.Put(frame)
			return
		}
		c.queue <- q
		if q.reply.Close {
			return
		}
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

// writeLoop writes replies in request order. After a write error it keeps draining the queue
// (running deferred work so its resources are released) without writing.
func (c *conn) writeLoop() {
	scratch := bytebufferpool.Get()
	defer bytebufferpool.Put(scratch)
	broken := false
	for q := range c.queue {
		r := q.reply
		if r.Deferred != nil {
			r = c.runDeferred(q, r.Deferred)
		}
		if !broken && !r.None && (r.Response != nil || r.Body != nil) {
			// A client that stops reading must not hold the connection forever: like Kafka's
			// idle timer, which runs on writes too, connections.max.idle.ms bounds each reply.
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.srv.cfg.IdleTimeout))
			if err := writeReply(c.nc, c.tcp, q.corr, q.key, &r, scratch); err != nil {
				slog.Debug("connection write", "remote", c.info.Remote, "err", err)
				broken = true
				c.nc.Close() // unblocks the reader
			}
		}
		if r.Body != nil {
			r.Body.Release()
		}
		if o := c.srv.cfg.Observer; o != nil && !q.received.IsZero() {
			o.RequestDone(q.key, q.version, time.Since(q.received))
		}
		bytebufferpool.Put(q.frame)
		if r.Close && !broken {
			broken = true
			c.nc.Close()
		}
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
