package controller

// Security of the controller/Raft port. The port is not a Kafka-protocol listener: every
// connection carries either raw Raft RPCs (hashicorp/raft's NetworkTransport) or the controller
// RPC (size-prefixed JSON), chosen by one routing byte. With PortSecurity set, a connection must
// pass this, in order, before its routing byte is even read:
//
//  1. TLS (PortSecurity.ServerTLS): the server's certificate; client certificates verified
//     against the trusted CAs when the configuration requires them. The principal of a client
//     certificate is User:<subject DN> (the same rule as the Kafka listeners).
//  2. The authentication exchange, one message each way (the dialling side speaks first):
//
//     hello  = "WCP1" | mechanism length uint8 | mechanism | auth length uint16 | auth bytes
//     answer = status uint8 | message length uint16 | message
//
//     mechanism is "PLAIN" (auth = RFC 4616: authzid NUL user NUL password, checked against the
//     static users of the listener's JAAS line, user_<name>="<password>") or empty on a TLS-only
//     port (the principal is the certificate's). status 0 admits the connection; 1 is a failed
//     authentication, 2 an authenticated principal that may not use the port, 3 a malformed
//     exchange. Every refusal is answered after connection.failed.authentication.delay.ms and
//     the connection is closed.
//  3. Authorization: the principal (SASL user wins over the certificate) must be one of
//     PortSecurity.Allowed (super.users and the brokers' own principal on the port).
//
// The whole handshake is bounded: handshakeTimeout for TLS and the exchange together, helloMax
// bytes for the hello, and at most maxHandshakes connections in the handshake at once
// (maxHandshakesPerIP from one address): a new connection over the bound closes the oldest
// handshake, of its own address first (handshakes.go). SCRAM is not offered on this port:
// SCRAM credentials live in the metadata log, which this port carries, so they cannot
// authenticate the brokers that bootstrap it.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/peerauth"
)

// PortSecurity secures the controller/Raft port: both the accepting side (the mux) and the
// dialling side (raft's stream layer and the controller RPC client). nil means PLAINTEXT.
type PortSecurity struct {
	// Protocol is the port's security protocol (SSL, SASL_PLAINTEXT, SASL_SSL); log messages.
	Protocol string
	// ServerTLS, when set, makes the port serve TLS. Its ClientAuth says whether client
	// certificates are required.
	ServerTLS *tls.Config
	// ClientTLS, when set, is how this node dials its peers' ports: the trusted CAs and this
	// node's certificate. ServerName is set per connection to the peer's host unless set here.
	ClientTLS *tls.Config
	// PlainUsers are the users the port accepts with SASL PLAIN (name -> password). Empty:
	// no SASL on the port (TLS only: client certificates identify the peers).
	PlainUsers map[string]string
	// Credentials are this node's SASL credentials towards its peers (PLAIN); nil on a TLS-only
	// port.
	Credentials *peerauth.SASLCredentials
	// Principal is this node's own principal on the port ("User:broker"): its SASL user, or
	// its certificate's subject. A heartbeat this node executes for itself binds its broker id
	// to this principal.
	Principal string
	// Allowed are the principals that may use the port (super.users, Principal and the
	// principals of BrokerPrincipals).
	Allowed []string
	// BrokerPrincipals, when set, is the principal of each broker id
	// (controller.broker.principals). A listed id is registered, heartbeated, shut down, its log
	// dirs reported and its partitions' ISRs changed only by its principal, from its first
	// registration on and after it is gone; a listed principal acts for no other id. Without it,
	// an id belongs to the principal that registered it, until the broker is gone.
	BrokerPrincipals map[int32]string
	// CertPrincipal names the principal of a client certificate (netio.CertificatePrincipal).
	CertPrincipal func(*x509.Certificate) string
	// FailDelay is connection.failed.authentication.delay.ms: a refused connection is answered
	// (and closed) after this long.
	FailDelay time.Duration
}

func (s *PortSecurity) sasl() bool { return len(s.PlainUsers) > 0 }

// Validate checks that the settings can work: a way to identify peers, credentials matching
// the server side.
func (s *PortSecurity) Validate() error {
	if s.ServerTLS == nil && !s.sasl() {
		return errors.New("controller port security: neither TLS nor SASL is configured")
	}
	if !s.sasl() && s.ServerTLS != nil && s.ServerTLS.ClientAuth != tls.RequireAndVerifyClientCert {
		return errors.New("controller port security: an SSL controller listener must require client certificates (ssl.client.auth=required): otherwise no peer can be identified")
	}
	if s.sasl() && s.Credentials == nil {
		return errors.New("controller port security: SASL is on but this node has no credentials to dial its peers with")
	}
	if s.Credentials != nil && s.Credentials.Mechanism != peerauth.MechanismPlain {
		return fmt.Errorf("controller port security: SASL mechanism %s is not supported on the controller port (PLAIN only)", s.Credentials.Mechanism)
	}
	if (s.ServerTLS == nil) != (s.ClientTLS == nil) {
		return errors.New("controller port security: TLS must be set on both the accepting and the dialling side")
	}
	if s.Principal == "" {
		return errors.New("controller port security: this node's own principal is unknown")
	}
	return nil
}

const (
	helloMagic = "WCP1"
	// helloMax bounds the hello message (a PLAIN message with 255-byte names is far below).
	helloMax = 2048
	// handshakeTimeout bounds TLS and the authentication exchange together.
	handshakeTimeout = 10 * time.Second
	// maxHandshakes bounds connections in the handshake at once, maxHandshakesPerIP those from
	// one client address; a new connection over either bound closes the oldest one
	// (handshakes.go), so silent connections cannot lock the brokers out.
	maxHandshakes      = 128
	maxHandshakesPerIP = 32

	statusOK           byte = 0
	statusAuthFailed   byte = 1
	statusUnauthorized byte = 2
	statusBadHandshake byte = 3
)

// PortAuthError is a refusal by a peer's controller port: the peer answered a hello with a
// status other than OK.
type PortAuthError struct {
	Status byte
	Msg    string
}

func (e *PortAuthError) Error() string {
	return "controller port refused the connection: " + e.Msg
}

// rateLog logs refusals: the first of every interval at Warn, the others at Debug, with the
// count of those suppressed since. Many refusals (a scan, a misconfigured peer) cannot flood
// the log.
type rateLog struct {
	log      *slog.Logger
	interval time.Duration
	mu       sync.Mutex // guards last and skipped
	last     time.Time
	skipped  int
}

func (r *rateLog) refused(msg string, attrs ...any) {
	r.mu.Lock()
	now := time.Now()
	warn := now.Sub(r.last) >= r.interval
	skipped := r.skipped
	if warn {
		r.last, r.skipped = now, 0
	} else {
		r.skipped++
	}
	r.mu.Unlock()
	if warn {
		r.log.Warn(msg, append(attrs, "similar_refusals_since_last_warning", skipped)...)
		return
	}
	r.log.Debug(msg, attrs...)
}

// serverHandshake secures an accepted connection. It returns the connection to use from now on
// (TLS-wrapped) and the peer's principal, or an error after answering and closing nothing (the
// caller closes raw).
func (m *mux) serverHandshake(raw net.Conn) (net.Conn, string, error) {
	s := m.sec
	_ = raw.SetDeadline(time.Now().Add(handshakeTimeout))
	var c net.Conn = raw
	certPrincipal := ""
	if s.ServerTLS != nil {
		tc := tls.Server(raw, s.ServerTLS)
		if err := tc.Handshake(); err != nil {
			return nil, "", fmt.Errorf("TLS handshake: %w", err)
		}
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 && s.CertPrincipal != nil {
			certPrincipal = s.CertPrincipal(certs[0])
		}
		c = tc
	}
	refuse := func(status byte, msg string, err error) (net.Conn, string, error) {
		if s.FailDelay > 0 {
			select {
			case <-time.After(s.FailDelay):
			case <-m.done:
			}
		}
		_ = writeAnswer(c, status, msg)
		return nil, "", err
	}
	mech, auth, err := readHello(c)
	if err != nil {
		return refuse(statusBadHandshake, "malformed authentication exchange", fmt.Errorf("hello: %w", err))
	}
	defer clear(auth)
	principal := certPrincipal
	switch {
	case s.sasl():
		if mech != peerauth.MechanismPlain {
			return refuse(statusBadHandshake, "the controller port takes SASL PLAIN", fmt.Errorf("SASL mechanism %q not enabled", mech))
		}
		user, ok := s.checkPlain(auth)
		if !ok {
			return refuse(statusAuthFailed, "authentication failed: invalid credentials with SASL mechanism PLAIN", fmt.Errorf("SASL PLAIN authentication failed (user %q)", user))
		}
		principal = "User:" + user
	case mech != "":
		return refuse(statusBadHandshake, "the controller port takes no SASL (TLS client certificates only)", fmt.Errorf("SASL mechanism %q on a port without SASL", mech))
	}
	if principal == "" || !slices.Contains(s.Allowed, principal) {
		return refuse(statusUnauthorized, "principal "+principal+" may not use the controller port (not a broker of this cluster nor a super user)",
			fmt.Errorf("principal %s not allowed on the controller port", principal))
	}
	if err := writeAnswer(c, statusOK, ""); err != nil {
		return nil, "", err
	}
	return c, principal, nil
}

// checkPlain checks an RFC 4616 message against the static users, in time independent of
// where the password differs. It returns the user name (for the log) and whether it matched.
func (s *PortSecurity) checkPlain(msg []byte) (string, bool) {
	i := slices.Index(msg, 0)
	if i < 0 {
		return "", false
	}
	authzid, rest := msg[:i], msg[i+1:]
	j := slices.Index(rest, 0)
	if j <= 0 {
		return "", false
	}
	user, pass := string(rest[:j]), rest[j+1:]
	if len(authzid) > 0 && string(authzid) != user {
		return user, false
	}
	want, known := s.PlainUsers[user]
	if !known {
		want = "\x00unknown user: compare anyway"
	}
	// Compare digests, so that neither the time nor an early length mismatch tells anything.
	w, p := sha256.Sum256([]byte(want)), sha256.Sum256(pass)
	ok := subtle.ConstantTimeCompare(w[:], p[:]) == 1
	return user, ok && known
}

// readHello reads the dialling side's hello, at most helloMax bytes.
func readHello(r io.Reader) (mech string, auth []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", nil, err
	}
	if string(hdr[:4]) != helloMagic {
		return "", nil, errors.New("not a controller port hello")
	}
	mb := make([]byte, int(hdr[4])+2)
	if _, err := io.ReadFull(r, mb); err != nil {
		return "", nil, err
	}
	n := int(binary.BigEndian.Uint16(mb[len(mb)-2:]))
	if 5+len(mb)+n > helloMax {
		return "", nil, fmt.Errorf("hello of %d bytes, at most %d", 5+len(mb)+n, helloMax)
	}
	auth = make([]byte, n)
	if _, err := io.ReadFull(r, auth); err != nil {
		return "", nil, err
	}
	return string(mb[:len(mb)-2]), auth, nil
}

func writeHello(w io.Writer, mech string, auth []byte) error {
	if len(mech) > 255 || 5+1+len(mech)+2+len(auth) > helloMax {
		return errors.New("controller port hello too large")
	}
	buf := make([]byte, 0, 4+1+len(mech)+2+len(auth))
	buf = append(buf, helloMagic...)
	buf = append(buf, byte(len(mech)))
	buf = append(buf, mech...)
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(auth)))
	buf = append(buf, auth...)
	_, err := w.Write(buf)
	clear(buf)
	return err
}

func writeAnswer(w io.Writer, status byte, msg string) error {
	msg = msg[:min(len(msg), 1024)]
	buf := make([]byte, 0, 3+len(msg))
	buf = append(buf, status)
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(msg)))
	buf = append(buf, msg...)
	_, err := w.Write(buf)
	return err
}

func readAnswer(r io.Reader) (byte, string, error) {
	var hdr [3]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, "", err
	}
	n := int(binary.BigEndian.Uint16(hdr[1:]))
	if n > 1024 {
		return 0, "", fmt.Errorf("controller port answer of %d bytes", n)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return 0, "", err
	}
	return hdr[0], string(msg), nil
}

// dialPort dials a peer's controller port and runs the dialling side of the handshake (TLS,
// then the hello with this node's credentials), then sends the routing byte.
func dialPort(ctx context.Context, sec *PortSecurity, addr string, route byte, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(handshakeTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = raw.SetDeadline(deadline)
	c, err := clientHandshake(ctx, raw, sec, addr)
	if err != nil {
		raw.Close()
		return nil, err
	}
	if _, err := c.Write([]byte{route}); err != nil {
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// clientHandshake runs the dialling side of the handshake on raw (no-op without security).
func clientHandshake(ctx context.Context, raw net.Conn, sec *PortSecurity, addr string) (net.Conn, error) {
	if sec == nil {
		return raw, nil
	}
	var c net.Conn = raw
	if sec.ClientTLS != nil {
		cfg := sec.ClientTLS.Clone()
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			cfg.ServerName = host
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, &peerauth.SecurityError{Stage: "controller port TLS handshake", Addr: addr, Err: err}
		}
		c = tc
	}
	var mech string
	var auth []byte
	if cr := sec.Credentials; cr != nil {
		mech = cr.Mechanism
		auth = cr.PlainMessage()
	}
	err := writeHello(c, mech, auth)
	clear(auth)
	if err != nil {
		return nil, &peerauth.SecurityError{Stage: "controller port authentication", Addr: addr, Err: err}
	}
	status, msg, err := readAnswer(c)
	if err != nil {
		return nil, &peerauth.SecurityError{Stage: "controller port authentication", Addr: addr, Err: err}
	}
	if status != statusOK {
		return nil, &peerauth.SecurityError{Stage: "controller port authentication as " + sec.Principal, Addr: addr, Err: &PortAuthError{Status: status, Msg: msg}}
	}
	return c, nil
}

// describe is the port's security for the start-up log.
func (s *PortSecurity) describe() []any {
	if s == nil {
		return []any{"security.protocol", "PLAINTEXT"}
	}
	return []any{"security.protocol", s.Protocol, "principal", s.Principal, "allowed", strings.Join(s.Allowed, ";")}
}
