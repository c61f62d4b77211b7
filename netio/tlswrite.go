package netio

// The write path of TLS connections (SSL and SASL_SSL listeners).
//
// sendfile(2) cannot encrypt, so on a TLS connection a Fetch response's file slices pass through
// user space. The path is as lean as crypto/tls allows, each byte being touched three times:
//
//  1. pread(2) copies a slice from the page cache into a pooled 256 KiB buffer, after the
//     encoded bytes that precede it (writeBodyCopy): header, partition fields and records share
//     one buffer, so tls.Conn.Write gets 256 KiB at a time and seals full 16 KiB records
//     (no small record for a header between two slices);
//  2. crypto/tls seals each record (AES-GCM with AES-NI/PCLMULQDQ, or ChaCha20-Poly1305 where
//     the client prefers it and the CPU has no AES instructions) into its own record buffer;
//  3. crypto/tls hands each sealed record to the connection under it, one Write per record of at
//     most 16 KiB. Under a server tls.Conn that connection is a tlsTransport: while a response
//     body is written (startBatch .. endBatch) it gathers the records in a pooled buffer and
//     sends them with one write(2) per tlsBatchBytes, instead of one write(2), one TCP segment
//     push and (on the receiver) one wake-up per 16 KiB record. Outside a body (handshake,
//     small responses, alerts) writes pass straight through.
//
// Measured with BenchmarkFetchWrite (docs/benchmarks.md, "Fetch over TLS"), the read copy is
// under 5% of the TLS writer's CPU: mapping the segment and sealing straight from the mapping
// would save that copy but put every served page into the process's resident set and needs a
// fault guard around crypto/tls; it is not done. What remains is the cipher (about half) and
// the kernel's TCP send path, which sendfile pays too.
//
// Kernel TLS (TLS_TX offload, which would let sendfile work on TLS connections) is not used:
// Go's crypto/tls cannot hand its keys and record sequence numbers to the kernel, and the
// kernels weir is tested on do not load the tls module; docs/security.md says what it would
// take.

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
)

// copyBufSize is the buffer a TLS body's plaintext is assembled in: large enough for few
// preads and tls.Conn.Write calls (each seals full 16 KiB records), small enough to pool per
// writing connection.
const copyBufSize = 256 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// tlsBatchBytes is how many bytes of sealed records a tlsTransport gathers before it writes
// them: 16 records of 16 KiB, four full loopback segments (64 KiB MTU) or about 180 Ethernet
// ones per write(2).
const tlsBatchBytes = 256 << 10

// maxTLSRecord bounds one record crypto/tls writes: the 5-byte header, 16 KiB of plaintext and
// the cipher's overhead (at most 256 bytes: RFC 8446 5.2 allows 255 for TLS 1.3, TLS 1.2 AEADs
// add an 8-byte explicit nonce and a 16-byte tag).
const maxTLSRecord = 5 + 16<<10 + 256

var tlsBatchBufs = sync.Pool{New: func() any { b := make([]byte, 0, tlsBatchBytes+maxTLSRecord); return &b }}

// tlsTransport is the TCP connection under a server tls.Conn. crypto/tls writes each sealed
// record with its own Write; between startBatch and endBatch the transport gathers them and
// writes them in batches of tlsBatchBytes. Only the connection's writer goroutine starts and
// ends batches; the reader goroutine may write too (crypto/tls answers a client's KeyUpdate
// from Read), so every Write takes mu.
type tlsTransport struct {
	*net.TCPConn
	// mu guards buf and err, and is held while a batch is written: records reach the socket in
	// the order crypto/tls sealed them (their sequence numbers), whichever goroutine wrote
	// them. crypto/tls holds its own write lock across the same writes.
	mu sync.Mutex
	// buf is the batch being gathered (from tlsBatchBufs); nil outside startBatch .. endBatch.
	buf *[]byte
	// err is the first failed write of a batch: later records of the batch are dropped.
	err error
}

// Write sends p (one or more TLS records, or handshake messages) or, during a batch, adds it
// to the batch. A batch's bytes count as written once gathered: a failure to write them is
// returned by a later Write or by endBatch, and the connection is then closed.
func (t *tlsTransport) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.buf == nil {
		return t.TCPConn.Write(p)
	}
	if t.err != nil {
		return 0, t.err
	}
	b := *t.buf
	if len(b) > 0 && len(b)+len(p) > cap(b) {
		if err := t.flushLocked(); err != nil {
			return 0, err
		}
		b = *t.buf
	}
	if len(b) == 0 && len(p) >= tlsBatchBytes {
		return t.TCPConn.Write(p) // already one large write: no copy
	}
	b = append(b, p...)
	*t.buf = b
	if len(b) >= tlsBatchBytes {
		if err := t.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flushLocked writes the gathered records. t.mu is held.
func (t *tlsTransport) flushLocked() error {
	b := *t.buf
	*t.buf = b[:0]
	if len(b) == 0 || t.err != nil {
		return t.err
	}
	if _, err := t.TCPConn.Write(b); err != nil {
		t.err = err
	}
	return t.err
}

// startBatch makes later Writes gather records until endBatch.
func (t *tlsTransport) startBatch() {
	bp := tlsBatchBufs.Get().(*[]byte)
	*bp = (*bp)[:0]
	t.mu.Lock()
	t.buf, t.err = bp, nil
	t.mu.Unlock()
}

// endBatch writes what the batch gathered and makes Writes direct again. It returns the
// batch's first write error.
func (t *tlsTransport) endBatch() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.flushLocked()
	tlsBatchBufs.Put(t.buf)
	t.buf, t.err = nil, nil
	return err
}

// writeBodyCopy writes head (frame size, response header), then the body's bytes and file
// slices, copying slices through a pooled buffer (pread, then write). On a server tls.Conn the
// sealed records are batched by its tlsTransport.
func writeBodyCopy(w io.Writer, head []byte, b *Body) (err error) {
	if tc, ok := w.(*tls.Conn); ok {
		if t, ok := tc.NetConn().(*tlsTransport); ok {
			t.startBatch()
			defer func() {
				if ferr := t.endBatch(); err == nil {
					err = ferr
				}
			}()
		}
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	cw := copyWriter{w: w, buf: (*bp)[:0]}
	cw.bytes(head)
	start := 0
	for _, p := range b.parts {
		cw.bytes(b.buf.B[start:p.end])
		start = p.end
		if cw.err != nil {
			return cw.err
		}
		s := p.slice
		off, remaining := s.Position, s.Length
		for remaining > 0 {
			if len(cw.buf) == cap(cw.buf) {
				if cw.flush(); cw.err != nil {
					return cw.err
				}
			}
			free := cw.buf[len(cw.buf):cap(cw.buf)]
			if int64(len(free)) > remaining {
				free = free[:remaining]
			}
			n, err := s.File.ReadAt(free, off)
			cw.buf = cw.buf[:len(cw.buf)+n]
			off += int64(n)
			remaining -= int64(n)
			if remaining > 0 && err != nil {
				if err == io.EOF {
					return errShortSlice
				}
				return &net.OpError{Op: "pread", Net: "tcp", Err: err}
			}
		}
	}
	cw.bytes(b.buf.B[start:])
	cw.flush()
	return cw.err
}

// copyWriter accumulates bytes in buf and writes it to w when full.
type copyWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func (cw *copyWriter) bytes(p []byte) {
	for len(p) > 0 && cw.err == nil {
		n := copy(cw.buf[len(cw.buf):cap(cw.buf)], p)
		cw.buf = cw.buf[:len(cw.buf)+n]
		p = p[n:]
		if len(cw.buf) == cap(cw.buf) {
			cw.flush()
		}
	}
}

func (cw *copyWriter) flush() {
	if cw.err != nil || len(cw.buf) == 0 {
		return
	}
	_, cw.err = cw.w.Write(cw.buf)
	cw.buf = cw.buf[:0]
}
