package benchmarks

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// This file holds the broker-independent pieces of the end-to-end suites (e2e_test.go): a raw
// Kafka request connection whose round trips allocate nothing on the client side, so that
// allocations a benchmark reports are the broker's, and the raw loopback sendfile baseline that
// fetch throughput is judged against. Starting a broker lives in the test file, so this package
// does not import broker (engine and segment benchmarks import this package).

// RawConn is one Kafka client connection speaking the wire protocol directly: a request is
// encoded with kmsg into a reused buffer and the response frame is read into a reused buffer
// (or drained), so a round trip allocates nothing on the client side. Not safe for concurrent use.
type RawConn struct {
	conn *net.TCPConn
	fmt  *kmsg.RequestFormatter
	corr int32
	out  []byte
	in   []byte // reused read buffer
}

// DialRaw connects to a broker at addr (a loopback address).
func DialRaw(addr string) (*RawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return &RawConn{conn: c.(*net.TCPConn), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID("weir-bench")), in: make([]byte, 1<<20)}, nil
}

// Close closes the connection.
func (c *RawConn) Close() error { return c.conn.Close() }

// Roundtrip sends req and reads its response frame. With keep, the whole response body (after
// the correlation id) is returned, valid until the next call; without it the body is drained
// through the reused buffer and only its size is returned.
func (c *RawConn) Roundtrip(req kmsg.Request, keep bool, deadline time.Duration) (body []byte, size int, err error) {
	c.corr++
	c.out = c.fmt.AppendRequest(c.out[:0], req, c.corr)
	_ = c.conn.SetDeadline(time.Now().Add(deadline))
	if _, err := c.conn.Write(c.out); err != nil {
		return nil, 0, err
	}
	var head [8]byte
	if _, err := io.ReadFull(c.conn, head[:]); err != nil {
		return nil, 0, err
	}
	n := int(binary.BigEndian.Uint32(head[:4])) - 4
	if corr := int32(binary.BigEndian.Uint32(head[4:])); corr != c.corr || n < 0 {
		return nil, 0, fmt.Errorf("response: correlation id %d (want %d), size %d", corr, c.corr, n)
	}
	if keep {
		if cap(c.in) < n {
			c.in = make([]byte, n)
		}
		if _, err := io.ReadFull(c.conn, c.in[:n]); err != nil {
			return nil, 0, err
		}
		return c.in[:n], n, nil
	}
	if err := drain(c.conn, c.in, n); err != nil {
		return nil, 0, err
	}
	return nil, n, nil
}

// drain reads exactly n bytes from r through buf, discarding them. The end-to-end fetch and its
// raw baseline both receive this way, so they pay the same receiver cost.
func drain(r io.Reader, buf []byte, n int) error {
	for n > 0 {
		m, err := r.Read(buf[:min(len(buf), n)])
		n -= m
		if err != nil && n > 0 {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// LoopbackSendfile is the raw baseline for a fetch: a connected pair of TCP sockets on
// 127.0.0.1, a sender goroutine that moves a range of a plain file to one end with positional
// sendfile(2) (page cache -> socket, nothing else), and Transfer, which has the range sent and
// reads it from the other end as a client reads a fetch response. Transfer allocates nothing.
type LoopbackSendfile struct {
	send, recv *net.TCPConn
	file       *os.File
	buf        []byte
	jobs       chan sendJob
	done       chan error
}

type sendJob struct{ off, n int64 }

// NewLoopbackSendfile connects the socket pair and starts the sender for file.
func NewLoopbackSendfile(file *os.File) (*LoopbackSendfile, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	recv, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		return nil, err
	}
	a := <-ch
	if a.err != nil {
		recv.Close()
		return nil, a.err
	}
	// As in the broker, the accepted socket sends and the dialed one (the client) receives.
	s := &LoopbackSendfile{send: a.c.(*net.TCPConn), recv: recv.(*net.TCPConn), file: file,
		buf: make([]byte, 1<<20), jobs: make(chan sendJob), done: make(chan error)}
	rc, err := s.send.SyscallConn()
	if err != nil {
		s.Close()
		return nil, err
	}
	go s.sender(rc)
	return s, nil
}

func (s *LoopbackSendfile) sender(rc syscall.RawConn) {
	fd := int(s.file.Fd())
	var off, remaining int64
	var opErr error
	write := func(sock uintptr) bool {
		for remaining > 0 {
			n, err := unix.Sendfile(int(sock), fd, &off, int(min(remaining, 1<<30)))
			if n > 0 {
				remaining -= int64(n)
			}
			switch {
			case err == unix.EAGAIN:
				return false
			case err == unix.EINTR:
			case err != nil:
				opErr = os.NewSyscallError("sendfile", err)
				return true
			case n == 0:
				opErr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	}
	for j := range s.jobs {
		off, remaining, opErr = j.off, j.n, nil
		if err := rc.Write(write); err != nil {
			opErr = err
		}
		s.done <- opErr
	}
}

// Transfer sends n bytes of the file from off through the socket pair and returns once the
// receiving end has read them all.
func (s *LoopbackSendfile) Transfer(off, n int64) error {
	_ = s.recv.SetReadDeadline(time.Now().Add(time.Minute))
	s.jobs <- sendJob{off, n}
	rerr := drain(s.recv, s.buf, int(n))
	if rerr != nil {
		s.send.Close() // unblock the sender
	}
	serr := <-s.done
	return errors.Join(rerr, serr)
}

// Close stops the sender and closes both sockets.
func (s *LoopbackSendfile) Close() error {
	if s.jobs != nil {
		close(s.jobs)
		s.jobs = nil
	}
	return errors.Join(s.send.Close(), s.recv.Close())
}
