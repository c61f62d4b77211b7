package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/valyala/bytebufferpool"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/segment"
)

// Reply is a handler's answer to one request.
type Reply struct {
	// Response is encoded with kmsg (most APIs).
	Response kmsg.Response
	// Body, when set instead of Response, is a pre-encoded body with file slices (Fetch).
	Body *Body
	// None means no response is sent (Produce with acks=0).
	None bool
	// Close closes the connection after this reply (after writing it, if any).
	Close bool
	// Deferred, when set, runs on the connection's writer goroutine before anything is written
	// and returns the real reply. It may block (durability waits, long polls).
	Deferred func() Reply
	// NoAlias says that nothing in this reply (Response, Body, Deferred) refers to the
	// request's bytes (byte slices of the decoded request alias its frame; strings do not): the
	// frame goes back to the pool, and its bytes to the connection's and the broker's bounds, as
	// soon as the handler returns instead of after the reply is written. A produce sets it: its
	// records are in the log once the handler returned, as Kafka drops a produce request's
	// records once they are appended.
	NoAlias bool
	// Throttle, when positive, mutes the connection for that long once this reply is written
	// (KIP-219: the response goes out at once, with its throttle_time_ms, and nothing more is
	// read from the connection until the time is over). Client quotas set it.
	Throttle time.Duration
}

// Body is a response body made of encoded bytes interleaved with file slices. Bytes are
// appended to one pooled buffer; a part records where a slice goes.
type Body struct {
	buf   *bytebufferpool.ByteBuffer
	parts []bodyPart
	size  int64
	// flexibleHeader says the response header carries tagged fields (flexible versions).
	flexibleHeader bool
}

type bodyPart struct {
	end   int // the buffer bytes up to end precede the slice
	slice segment.Slice
}

// NewBody returns an empty body using a pooled buffer; flexible is whether the response version is
// flexible (its header then carries tagged fields).
func NewBody(flexible bool) *Body {
	return &Body{buf: bytebufferpool.Get(), flexibleHeader: flexible}
}

// Bytes returns the buffer to append encoded bytes to; store it back with SetBytes.
func (b *Body) Bytes() []byte { return b.buf.B }

// SetBytes stores the (appended-to) buffer.
func (b *Body) SetBytes(p []byte) { b.buf.B = p }

// AppendSlice adds a file slice after the bytes written so far. The body owns the slice's
// reference from now on.
func (b *Body) AppendSlice(s segment.Slice) {
	b.parts = append(b.parts, bodyPart{end: len(b.buf.B), slice: s})
	b.size += s.Length
}

// Len is the body's total size.
func (b *Body) Len() int64 { return int64(len(b.buf.B)) + b.size }

// Release returns the buffer and every slice reference. Idempotent.
func (b *Body) Release() {
	for i := range b.parts {
		b.parts[i].slice.Release()
	}
	b.parts = b.parts[:0]
	if b.buf != nil {
		bytebufferpool.Put(b.buf)
		b.buf = nil
	}
}

// writeReply encodes and writes one response frame: size, correlation id, header tags (flexible
// responses other than ApiVersions), then the body. scratch is reused between calls. tcp is the
// plain TCP connection under conn, for zero-copy bodies; nil (TLS) copies file slices through
// user space.
func writeReply(conn net.Conn, tcp *net.TCPConn, corr int32, key int16, r *Reply, scratch *bytebufferpool.ByteBuffer) error {
	scratch.B = scratch.B[:0]
	scratch.B = append(scratch.B, 0, 0, 0, 0)
	scratch.B = binary.BigEndian.AppendUint32(scratch.B, uint32(corr))
	flexible := false
	if r.Response != nil {
		flexible = r.Response.IsFlexible()
	} else if r.Body != nil {
		flexible = r.Body.flexibleHeader
	}
	if flexible && key != 18 { // ApiVersions responses always use header v0
		scratch.B = append(scratch.B, 0)
	}
	if r.Response != nil {
		scratch.B = r.Response.AppendTo(scratch.B)
		binary.BigEndian.PutUint32(scratch.B, uint32(len(scratch.B)-4))
		_, err := conn.Write(scratch.B)
		return err
	}
	b := r.Body
	total := int64(len(scratch.B)-4) + b.Len()
	if total > 1<<31-1 {
		return fmt.Errorf("response of %d bytes too large", total)
	}
	binary.BigEndian.PutUint32(scratch.B, uint32(total))
	if tcp == nil {
		return writeBodyCopy(conn, scratch.B, b)
	}
	// Cork the socket while a body with file slices goes out: the header bytes, the slices and
	// the trailing bytes then leave in full-size segments, instead of a small segment for each
	// write around a slice (on loopback each segment costs a transmit and a receiver wake-up).
	// Uncorking sends what is left at once.
	if len(b.parts) > 0 {
		setCork(tcp, corkOn)
		defer setCork(tcp, corkOff)
	}
	head := scratch.B
	start := 0
	bufs := net.Buffers{}
	for _, p := range b.parts {
		bufs = append(bufs[:0], head, b.buf.B[start:p.end])
		head = nil
		if _, err := bufs.WriteTo(tcp); err != nil {
			return err
		}
		start = p.end
		if err := sendfile(tcp, p.slice); err != nil {
			return err
		}
	}
	bufs = append(bufs[:0], head, b.buf.B[start:])
	_, err := bufs.WriteTo(tcp)
	return err
}

// setCork runs corkOn or corkOff on the socket: they set and clear TCP_CORK, best effort (without
// it the bytes still go out, only in more segments). Package-level functions and a concrete
// connection, so that nothing here allocates.
func setCork(conn *net.TCPConn, f func(fd uintptr)) {
	if rc, err := conn.SyscallConn(); err == nil {
		_ = rc.Control(f)
	}
}

func corkOn(fd uintptr)  { _ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, 1) }
func corkOff(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, 0) }

// errShortSlice means the file held fewer bytes than the slice promised.
var errShortSlice = errors.New("file slice shorter than promised")

// sendfile sends a file slice to the socket with positional sendfile(2): the file's offset is
// not used, so concurrent sends of one file are safe, and no byte passes through user space.
func sendfile(conn *net.TCPConn, s segment.Slice) error {
	if s.Length == 0 {
		return nil
	}
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	srcFd := int(s.File.Fd())
	off := s.Position
	remaining := s.Length
	var opErr error
	werr := rc.Write(func(fd uintptr) bool {
		for remaining > 0 {
			chunk := remaining
			if chunk > 1<<30 {
				chunk = 1 << 30
			}
			n, err := unix.Sendfile(int(fd), srcFd, &off, int(chunk))
			if n > 0 {
				remaining -= int64(n)
			}
			switch {
			case err == unix.EAGAIN:
				return false // wait for the socket to be writable
			case err == unix.EINTR:
				continue
			case err != nil:
				opErr = &net.OpError{Op: "sendfile", Net: "tcp", Err: err}
				return true
			case n == 0:
				opErr = errShortSlice
				return true
			}
		}
		return true
	})
	if werr != nil {
		return werr
	}
	return opErr
}
