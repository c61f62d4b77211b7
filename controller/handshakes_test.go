package controller

// Silent connections on a secured controller port (TCP connected, no hello) must not lock the
// brokers out: the handshake table closes the oldest to admit new ones.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/peerauth"
)

func TestControllerPortSilentConnectionsDoNotLockOut(t *testing.T) {
	users := map[string]string{"broker1": "pw-one"}
	sec := func(user, pass string) *PortSecurity {
		creds, err := peerauth.NewSASLCredentials(peerauth.MechanismPlain, user, pass)
		if err != nil {
			t.Fatal(err)
		}
		return &PortSecurity{Protocol: "SASL_PLAINTEXT", PlainUsers: users, Credentials: creds,
			Principal: "User:" + user, Allowed: []string{"User:broker1"}, FailDelay: 10 * time.Millisecond}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := newMux(ln, slog.New(slog.DiscardHandler), sec("broker1", "pw-one"))
	m.handler = func(context.Context, *request, string) *response { return &response{Index: 7} }
	m.serve()
	t.Cleanup(m.close)
	addr := ln.Addr().String()

	// An attacker fills the table (and more) with connections that never send a hello.
	silent := make([]net.Conn, 0, maxHandshakes+8)
	for range maxHandshakes + 8 {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	time.Sleep(100 * time.Millisecond) // let the port accept them all

	// A broker still gets in, at once, and repeatedly.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 5 {
		start := time.Now()
		if err := call(ctx, sec("broker1", "pw-one"), addr, &request{Op: reqSync}); err != nil {
			t.Fatalf("call %d with %d silent connections open: %v", i, len(silent), err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("call %d took %v", i, d)
		}
	}
	// The silent connections were closed, oldest first; at most the per-address bound of them
	// (less the brokers' own) is still in the handshake.
	open := 0
	for _, c := range silent {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		var b [1]byte
		if _, err := c.Read(b[:]); errors.Is(err, os.ErrDeadlineExceeded) {
			open++
		}
	}
	if open > maxHandshakesPerIP {
		t.Fatalf("%d silent connections still open, want at most %d", open, maxHandshakesPerIP)
	}
	if _, err := silent[0].Read(make([]byte, 1)); err == nil {
		t.Fatal("the oldest silent connection is still open")
	}
}

func TestHandshakeSlots(t *testing.T) {
	h := newHandshakeSlots(3, 2)
	conn := func(ip string) net.Conn { return fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 1}} }
	a1, d1 := h.enter(conn("10.0.0.1"))
	a2, d2 := h.enter(conn("10.0.0.1"))
	if d1 || d2 {
		t.Fatal("displaced below the bounds")
	}
	// Third from 10.0.0.1: over its per-address bound, its own oldest goes.
	a3, d3 := h.enter(conn("10.0.0.1"))
	if !d3 || !h.leave(a1) || h.leave(a2) {
		t.Fatal("per-address bound: want the address's oldest displaced")
	}
	b1, _ := h.enter(conn("10.0.0.2"))
	b2, _ := h.enter(conn("10.0.0.3"))
	// Table full (a3, b1, b2): a newcomer displaces the oldest, a3.
	_, d := h.enter(conn("10.0.0.4"))
	if !d || !h.leave(a3) || h.leave(b1) || h.leave(b2) {
		t.Fatal("port bound: want the oldest displaced")
	}
}

type fakeConn struct {
	net.Conn
	addr net.Addr
}

func (f fakeConn) RemoteAddr() net.Addr { return f.addr }
func (f fakeConn) Close() error         { return nil }
