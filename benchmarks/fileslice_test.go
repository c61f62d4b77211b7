package benchmarks

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// BenchmarkFileSlice sends a segment slice to a loopback TCP socket (127.0.0.1 only), as a fetch
// response does, three ways:
//
//	sendfile    positional sendfile(2) from the segment's file (unix.Sendfile with an offset): the
//	            bytes go page cache -> socket without entering user space
//	pread+write pread into a reused 256 KiB buffer, then write(2) to the socket: two copies
//	memory      write(2) of bytes already in memory (no file read at all): the loopback ceiling
//
// for 64 KiB and 16 MiB slices. A goroutine drains the socket. -benchmem shows that the sendfile
// path allocates nothing, at any slice size.
func BenchmarkFileSlice(b *testing.B) {
	const segmentBytes = 32 << 20
	dir := Dir(b)
	seg, err := segment.Create(vfs.OS, dir, 0, segment.DefaultConfig, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	defer seg.Close()
	batch := Batch(100, 1<<10)
	h, err := record.ParseHeader(batch)
	if err != nil {
		b.Fatal(err)
	}
	for next := int64(0); seg.Size() < segmentBytes; next = h.NextOffset() {
		h.BaseOffset = next
		record.SetBaseOffset(batch, next)
		if _, err := seg.Append(batch, &h); err != nil {
			b.Fatal(err)
		}
	}
	for _, size := range []struct {
		name  string
		bytes int64
	}{{"64KiB", 64 << 10}, {"16MiB", 16 << 20}} {
		for _, method := range []string{"sendfile", "pread+write", "memory"} {
			b.Run(size.name+"/"+method, func(b *testing.B) {
				sl, ok := seg.Slice(4096, size.bytes)
				if !ok {
					b.Fatal("segment closed")
				}
				defer sl.Release()
				benchSendSlice(b, &sl, method)
			})
		}
	}
}

// loopbackPair returns a connected pair of TCP sockets on 127.0.0.1 and starts draining the
// receiving end; wait closes the sender and waits for the drain to end.
func loopbackPair(b *testing.B) (send *net.TCPConn, wait func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	recv := <-accepted
	if recv == nil {
		b.Fatal("accept failed")
	}
	drained := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<20)
		for {
			if _, err := recv.Read(buf); err != nil {
				recv.Close()
				if errors.Is(err, io.EOF) {
					err = nil
				}
				drained <- err
				return
			}
		}
	}()
	return c.(*net.TCPConn), func() {
		c.Close()
		if err := <-drained; err != nil {
			b.Error(err)
		}
	}
}

func benchSendSlice(b *testing.B, sl *segment.Slice, method string) {
	conn, wait := loopbackPair(b)
	defer wait()
	rc, err := conn.SyscallConn()
	if err != nil {
		b.Fatal(err)
	}
	fileFD := int(sl.File.Fd())

	// The sendfile callback is built once; per op only its state changes (no allocation).
	var offset int64
	var remaining int
	var sendErr error
	sendfile := func(sock uintptr) bool {
		for remaining > 0 {
			n, err := unix.Sendfile(int(sock), fileFD, &offset, remaining)
			if n > 0 {
				remaining -= n
			}
			switch {
			case err == unix.EAGAIN:
				return false // wait until the socket is writable
			case err == unix.EINTR:
			case err != nil:
				sendErr = os.NewSyscallError("sendfile", err)
				return true
			case n == 0:
				sendErr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	}
	buf := make([]byte, 256<<10)
	var mem []byte
	if method == "memory" {
		mem = make([]byte, sl.Length)
		if _, err := sl.File.ReadAt(mem, sl.Position); err != nil {
			b.Fatal(err)
		}
	}

	b.SetBytes(sl.Length)
	b.ReportAllocs()
	for b.Loop() {
		switch method {
		case "sendfile":
			offset, remaining, sendErr = sl.Position, int(sl.Length), nil
			if err := rc.Write(sendfile); err != nil {
				b.Fatal(err)
			}
			if sendErr != nil {
				b.Fatal(sendErr)
			}
		case "pread+write":
			for off := sl.Position; off < sl.Position+sl.Length; {
				chunk := buf[:min(int64(len(buf)), sl.Position+sl.Length-off)]
				n, err := unix.Pread(fileFD, chunk, off)
				if err == unix.EINTR {
					continue
				}
				if err != nil || n == 0 {
					b.Fatalf("pread at %d: %d, %v", off, n, err)
				}
				if _, err := conn.Write(chunk[:n]); err != nil {
					b.Fatal(err)
				}
				off += int64(n)
			}
		case "memory":
			if _, err := conn.Write(mem); err != nil {
				b.Fatal(err)
			}
		default:
			b.Fatal(fmt.Errorf("unknown method %q", method))
		}
	}
}
