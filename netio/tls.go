package netio

// TLS connections (SSL and SASL_SSL listeners): the handshake, the client certificate's
// principal, and the copying body writer. sendfile(2) cannot encrypt, so on a TLS connection
// a Fetch response's file slices are read with pread(2) into a pooled buffer and written to the
// tls.Conn together with the encoded bytes around them, in buffer-sized writes (full TLS
// records). Plaintext connections keep the zero-copy path (writeReply).

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// tlsHandshakeTimeout bounds a client's TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

// serverTLS makes the TLS server side of an accepted connection (the listener and
// BenchmarkFetchWrite use the same code).
func serverTLS(tc *net.TCPConn, cfg *tls.Config) *tls.Conn { return tls.Server(tc, cfg) }

// handshake runs the TLS handshake and records a client certificate's principal. false closes
// the connection.
func (c *conn) handshake() bool {
	timeout := min(tlsHandshakeTimeout, c.srv.cfg.IdleTimeout)
	_ = c.nc.SetDeadline(time.Now().Add(timeout))
	select {
	case <-c.stopped:
		return false
	default:
	}
	if err := c.tls.Handshake(); err != nil {
		slog.Info("closing connection: TLS handshake failed", "remote", c.info.Remote, "listener", c.info.Listener, "err", err)
		return false
	}
	_ = c.nc.SetDeadline(time.Time{})
	if certs := c.tls.ConnectionState().PeerCertificates; len(certs) > 0 {
		c.info.SetPrincipal(CertificatePrincipal(certs[0]))
	}
	return true
}

// CertificatePrincipal is the principal of a TLS client certificate, Kafka's default
// (ssl.principal.mapping.rules=DEFAULT): "User:" and the subject's distinguished name in RFC
// 2253 form, most specific attribute first, e.g. "User:CN=alice,OU=eng,O=Acme,C=US".
func CertificatePrincipal(cert *x509.Certificate) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) != 0 {
		return "User:" + cert.Subject.String()
	}
	return "User:" + rdns.String()
}

// copyBufSize is the buffer a TLS body is assembled in: large enough for few syscalls and
// full 16 KiB TLS records, small enough to pool per writing connection.
//
// What a TLS fetch costs, and what was measured not to help (BenchmarkFetchWrite, and broker
// profiles under `weir bench consume --tls`; docs/benchmarks.md, "Fetch over TLS"): each byte
// is copied by pread into this buffer, sealed by crypto/tls (AES-GCM with AES-NI) into its
// record buffer, and copied into the socket by write(2), one write per 16 KiB record. The
// encoded bytes around the slices share the buffer, so no small record is sealed for a header
// between two slices, and a response allocates nothing. In a broker profile the cipher is
// about 45% of the CPU and the kernel's send path about 40%; pread is under 5%, so sealing
// straight from a mapping of the segment would save little and would fault every served page
// into the process's resident set. Gathering the sealed records into 256 KiB writes (one
// write(2) per 16 records) lowered the writer's CPU against a fast in-process reader but
// raised the broker's CPU per MB by about 10% against a real consumer (an extra copy of every
// byte, and a consumer slower than the broker gains nothing from fewer, larger segments), and so did TCP_CORK
// around the body; records are written as crypto/tls seals them. Kernel TLS is not used: crypto/tls cannot
// hand its traffic keys and sequence numbers to the kernel (docs/security.md).
const copyBufSize = 256 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// writeBodyCopy writes head (frame size, response header), then the body's bytes and file
// slices, copying slices through a pooled buffer (pread, then write).
func writeBodyCopy(w io.Writer, head []byte, b *Body) error {
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
