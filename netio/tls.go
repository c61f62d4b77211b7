package netio

// TLS connections (SSL and SASL_SSL listeners): the handshake and the client certificate's
// principal. The write path of TLS connections (response bodies with file slices, and the
// transport under crypto/tls) is in tlswrite.go.

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"log/slog"
	"net"
	"time"
)

// tlsHandshakeTimeout bounds a client's TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

// serverTLS makes the TLS server side of an accepted connection, over a tlsTransport
// (tlswrite.go) so that a response body's TLS records leave in few large writes.
func serverTLS(tc *net.TCPConn, cfg *tls.Config) *tls.Conn {
	return tls.Server(&tlsTransport{TCPConn: tc}, cfg)
}

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
