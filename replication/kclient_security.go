package replication

// Security of the follower connections (Kafka's inter-broker listener): TLS (the leader's
// certificate verified against the trusted CAs and the leader's advertised host; this broker's
// certificate presented for mutual TLS), then SASL with SaslHandshake v1 + SaslAuthenticate:
// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (client side of xdg-go/scram). A connection is
// authenticated once, when dialed; a lost connection is dialed and authenticated again, and
// one whose SASL session has a lifetime (KIP-368) is replaced before the session ends.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-mq/weir/internal/peerauth"
)

// ClientSecurity is how a follower connects to its leaders: the inter-broker listener's
// security protocol. The zero value is PLAINTEXT.
type ClientSecurity struct {
	// Listener names the inter-broker listener (log messages only).
	Listener string
	// TLS, when set, wraps connections in TLS (SSL, SASL_SSL). ServerName is set per
	// connection to the leader's advertised host unless it is set here.
	TLS *tls.Config
	// SASL, when set, authenticates connections (SASL_PLAINTEXT, SASL_SSL).
	SASL *peerauth.SASLCredentials
}

// Protocol is the security protocol these settings speak (PLAINTEXT, SSL, SASL_PLAINTEXT,
// SASL_SSL).
func (s ClientSecurity) Protocol() string {
	switch {
	case s.TLS != nil && s.SASL != nil:
		return "SASL_SSL"
	case s.TLS != nil:
		return "SSL"
	case s.SASL != nil:
		return "SASL_PLAINTEXT"
	}
	return "PLAINTEXT"
}

// secure runs TLS and SASL on a freshly dialed connection.
func (k *kconn) secure(ctx context.Context, addr string, sec ClientSecurity) error {
	if sec.TLS != nil {
		cfg := sec.TLS.Clone()
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			cfg.ServerName = host
		}
		tc := tls.Client(k.c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return &peerauth.SecurityError{Stage: "TLS handshake", Addr: addr, Err: err}
		}
		k.c = tc
		k.br.Reset(tc)
	}
	if sec.SASL != nil {
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(10 * time.Second)
		}
		if err := k.authenticate(sec.SASL, deadline); err != nil {
			return &peerauth.SecurityError{Stage: "SASL authentication as " + sec.SASL.String(), Addr: addr, Err: err}
		}
	}
	return nil
}

// authenticate runs SaslHandshake v1 and the mechanism's SaslAuthenticate exchange.
func (k *kconn) authenticate(c *peerauth.SASLCredentials, deadline time.Time) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = c.Mechanism
	r, err := k.request(hs, deadline)
	if err != nil {
		return err
	}
	hsr := r.(*kmsg.SASLHandshakeResponse)
	if err := kerr.ErrorForCode(hsr.ErrorCode); err != nil {
		return fmt.Errorf("SaslHandshake for %s: %w (the listener offers %s)", c.Mechanism, err, strings.Join(hsr.SupportedMechanisms, ", "))
	}
	step := func(msg []byte) ([]byte, int64, error) {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SetVersion(1)
		req.SASLAuthBytes = msg
		r, err := k.request(req, deadline)
		if err != nil {
			return nil, 0, err
		}
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil && *resp.ErrorMessage != "" {
				return nil, 0, fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
			}
			return nil, 0, err
		}
		return resp.SASLAuthBytes, resp.SessionLifetimeMillis, nil
	}
	var lifetime int64
	switch c.Mechanism {
	case peerauth.MechanismPlain:
		msg := c.PlainMessage()
		_, lifetime, err = step(msg)
		clear(msg)
		if err != nil {
			return err
		}
	default: // SCRAM
		conv := c.SCRAMConversation()
		first, err := conv.Step("")
		if err != nil {
			return fmt.Errorf("SCRAM client-first: %w", err)
		}
		serverFirst, _, err := step([]byte(first))
		if err != nil {
			return err
		}
		final, err := conv.Step(string(serverFirst))
		if err != nil {
			return fmt.Errorf("SCRAM server-first: %w", err)
		}
		serverFinal, lt, err := step([]byte(final))
		if err != nil {
			return err
		}
		if _, err := conv.Step(string(serverFinal)); err != nil || !conv.Valid() {
			return fmt.Errorf("SCRAM server-final: the leader did not prove it knows the credential (%v)", err)
		}
		lifetime = lt
	}
	if lifetime > 0 {
		// Reconnect (and so authenticate again) well before the session expires (KIP-368).
		k.expires = time.Now().Add(time.Duration(lifetime) * time.Millisecond * 9 / 10)
	}
	return nil
}
