package broker

// SaslAuthenticate (key 36), v0-v2. Carries the SASL exchange of the mechanism chosen by
// SaslHandshake: PLAIN in one message (authzid NUL user NUL password, checked against the
// user's SCRAM credential); SCRAM-SHA-256/512 in two (client-first -> server-first,
// client-final -> server-final) with weir's own SCRAM server (scramserver.go: every malformed
// message is an authentication failure, unknown users look like known ones). Success
// authenticates the connection as "User:<name>"; from the next request on every API is served.
//
// A failure (wrong credentials, unknown user, malformed message, even a panic in the exchange)
// answers SASL_AUTHENTICATION_FAILED with the same message and closes the connection, after
// connection.failed.authentication.delay.ms, and is counted (weir_sasl_authentication_*).
// Failures are also counted per client IP address (a token bucket: security.go); an address without tokens left gets the failure without its
// credentials being checked. SaslAuthenticate without a handshake (or on a listener without
// SASL, or after authentication) answers ILLEGAL_SASL_STATE. SessionLifetimeMillis is 0: no
// re-authentication is asked for (KIP-368).

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 36, min: 0, max: 2, handle: handleSaslAuthenticate})
}

func handleSaslAuthenticate(b *Broker, r *netio.Request) (reply netio.Reply) {
	req := r.Body.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.SetVersion(r.Version)
	illegal := func(msg string, close bool) netio.Reply {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = &msg
		return netio.Reply{Response: resp, Close: close}
	}
	if !r.Conn.RequireAuth {
		return illegal("SaslAuthenticate on a listener without SASL ("+r.Conn.SecurityProtocol+")", false)
	}
	if r.Conn.Authenticated() {
		return illegal("SaslAuthenticate request received after successful authentication", false)
	}
	st, _ := r.Conn.AuthState().(*saslState)
	if st == nil {
		return illegal("SaslAuthenticate before SaslHandshake", true)
	}
	ip := clientIP(r.Conn.Remote)
	if !st.started {
		if ok, wait := b.sec.limiter.allow(ip); !ok {
			b.sec.throttled.Add(1)
			b.sec.countAuth(st.mechanism, false)
			slog.Warn("SASL authentication refused: too many failures from this address", "remote", r.Conn.Remote, "mechanism", st.mechanism)
			return b.saslFailed(resp, max(wait, b.sec.failDelay), "too many failed authentications from this address; retry later")
		}
		st.started = true
	}
	fail := func(user, why string) netio.Reply {
		b.sec.limiter.failure(ip)
		b.sec.countAuth(st.mechanism, false)
		slog.Info("SASL authentication failed", "remote", r.Conn.Remote, "listener", r.Conn.Listener, "mechanism", st.mechanism, "user", user, "reason", why)
		return b.saslFailed(resp, b.sec.failDelay, fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", st.mechanism))
	}
	// A bug in the exchange must not escape as a panic (which would close the connection
	// without an answer and without the failed-login delay): it is a failed authentication.
	defer func() {
		if p := recover(); p != nil {
			slog.Error("SASL authentication: panic in the exchange", "remote", r.Conn.Remote, "mechanism", st.mechanism, "panic", p, "stack", string(debug.Stack()))
			reply = fail("", "internal error")
		}
	}()
	switch st.mechanism {
	case mechPlain:
		// message = [authzid] NUL authcid NUL passwd (RFC 4616)
		if len(req.SASLAuthBytes) > plainMaxMessageBytes {
			return fail("", "PLAIN message too long")
		}
		parts := bytes.Split(req.SASLAuthBytes, []byte{0})
		if len(parts) != 3 || len(parts[1]) == 0 {
			return fail("", "malformed PLAIN message")
		}
		authzid, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
		if authzid != "" && authzid != user {
			return fail(user, "authorization id differs from the user")
		}
		if !b.checkPlain(user, pass) {
			return fail(user, "wrong user or password")
		}
		b.saslSucceeded(r.Conn, st, user)
		resp.SASLAuthBytes = []byte{}
		return netio.Reply{Response: resp}
	case mechScramSHA256, mechScramSHA512:
		if st.scram == nil {
			h, _ := scramMechanismHash(st.mechanism)
			st.scram = newScramExchange(h, b.scramLookup(st.mechanism))
			out, err := st.scram.ClientFirst(req.SASLAuthBytes)
			if err != nil {
				return fail(st.scram.Username(), "client-first message: "+err.Error())
			}
			resp.SASLAuthBytes = out
			return netio.Reply{Response: resp}
		}
		if st.scram.Done() {
			return illegal("SCRAM exchange already complete", true)
		}
		out, err := st.scram.ClientFinal(req.SASLAuthBytes)
		if err != nil {
			return fail(st.scram.Username(), "client-final message: "+err.Error())
		}
		b.saslSucceeded(r.Conn, st, st.scram.Username())
		resp.SASLAuthBytes = out
		return netio.Reply{Response: resp}
	}
	return illegal("no SASL mechanism chosen", true)
}

// plainMaxMessageBytes bounds a PLAIN message (authzid, user and password); the frame is
// bounded by sasl.server.max.receive.size already, this bounds the password hashed.
const plainMaxMessageBytes = 4096

func (b *Broker) saslSucceeded(c *netio.ConnInfo, st *saslState, user string) {
	b.sec.countAuth(st.mechanism, true)
	c.SetAuthenticated("User:" + user)
	c.SetAuthState(nil)
	slog.Debug("SASL authenticated", "remote", c.Remote, "listener", c.Listener, "mechanism", st.mechanism, "principal", c.Principal())
}

// saslFailed answers SASL_AUTHENTICATION_FAILED after delay and closes the connection. The
// reader stops at once (the reply closes); the writer waits before writing.
func (b *Broker) saslFailed(resp *kmsg.SASLAuthenticateResponse, delay time.Duration, msg string) netio.Reply {
	resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
	resp.ErrorMessage = &msg
	resp.SASLAuthBytes = []byte{}
	return netio.Reply{Close: true, Deferred: func() netio.Reply {
		if delay > 0 {
			time.Sleep(delay)
		}
		return netio.Reply{Response: resp, Close: true}
	}}
}
