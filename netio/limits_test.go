package netio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMaxConnections: with max.connections connections open, the listener stops accepting, as
// Kafka's acceptor does: a new connection waits (in the kernel's backlog, unanswered) and is
// served once another closes. An InterBroker listener does not wait for the broker-wide limit.
func TestMaxConnections(t *testing.T) {
	ts := startServer(t, Config{MaxConnections: 2})
	a := dial(t, ts.addr)
	a.roundTrip(1, "a")
	mark := logs.mark() // the listener stops accepting as soon as the limit is reached
	b := dial(t, ts.addr)
	b.roundTrip(1, "b")
	over := dial(t, ts.addr)
	corr := over.send(metadataReq("over"), 1)
	logs.waitFor(t, mark, "WARN max.connections reached; not accepting", "limit=2")
	over.expectSilence(300 * time.Millisecond)
	if st := ts.Stats(); st.WaitingAccept != 1 || st.Connections != 2 {
		t.Fatalf("stats at the limit: %+v", st)
	}
	inter := ts.listen(t, Listener{Name: "REPLICATION", InterBroker: true})
	ic := dial(t, inter)
	ic.roundTrip(1, "inter-broker listener still served")
	ic.conn.Close() // it counts, too
	a.roundTrip(1, "a-again")
	a.conn.Close()
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(1)
	over.recv(corr, resp)
	b.roundTrip(1, "b-again")
	over.roundTrip(1, "over-again")
}

// TestListenerMaxConnections: listener.name.<l>.max.connections bounds one listener only.
func TestListenerMaxConnections(t *testing.T) {
	ts := startServer(t, Config{})
	mark := logs.mark()
	limited := ts.listen(t, Listener{Name: "LIMITED", MaxConnections: 1})
	first := dial(t, limited)
	first.roundTrip(1, "first")
	second := dial(t, limited)
	corr := second.send(metadataReq("second"), 1)
	logs.waitFor(t, mark, "WARN listener.name.limited.max.connections reached", "listener=LIMITED")
	second.expectSilence(200 * time.Millisecond)
	for i := 0; i < 3; i++ {
		dial(t, ts.addr).roundTrip(1, "other listener")
	}
	first.conn.Close()
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(1)
	second.recv(corr, resp)
}

// TestMaxConnectionsPerIP: max.connections.per.ip closes a connection over the limit at once
// (127.0.0.1 is one address), max.connections.per.ip.overrides changes the limit of an address,
// and a closed connection makes room again.
func TestMaxConnectionsPerIP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		limit int
	}{
		{"default", Config{MaxConnectionsPerIP: 2}, 2},
		{"override", Config{MaxConnectionsPerIP: 1, ConnectionsPerIPOverrides: map[string]int{"127.0.0.1": 3, "10.0.0.1": 0}}, 3},
		{"only overrides", Config{MaxConnectionsPerIP: -1, ConnectionsPerIPOverrides: map[string]int{"127.0.0.1": 2}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, tc.cfg)
			var open []*testClient
			for i := 0; i < tc.limit; i++ {
				c := dial(t, ts.addr)
				c.roundTrip(1, "within")
				open = append(open, c)
			}
			mark := logs.mark()
			over := dial(t, ts.addr)
			over.send(metadataReq("over"), 1)
			over.expectClosed()
			logs.waitFor(t, mark, "WARN closing connection: max.connections.per.ip reached", fmt.Sprintf("limit=%d", tc.limit))
			if st := ts.Stats(); st.RefusedPerIP != 1 {
				t.Fatalf("refused %d connections, want 1", st.RefusedPerIP)
			}
			open[0].conn.Close()
			ts.waitConns(t, int64(tc.limit-1))
			dial(t, ts.addr).roundTrip(1, "room again")
			open[1%len(open)].roundTrip(1, "still served")
		})
	}
}

// listen serves l (its Listener set to a new loopback socket) and returns its address.
func (ts *testServer) listen(t *testing.T, l Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Listener = ln
	ts.Serve(l)
	return ln.Addr().String()
}

// expectSilence checks that nothing arrives (and the connection stays open) for d.
func (c *testClient) expectSilence(d time.Duration) {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(d))
	var buf [1]byte
	if n, err := c.conn.Read(buf[:]); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatalf("expected no answer for %v, got %d bytes, %v", d, n, err)
	}
}

// TestIdleConnectionClosed: connections.max.idle.ms closes a connection idle that long, and
// only an idle one.
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	ts := startServer(t, Config{IdleTimeout: idle})
	quiet := dial(t, ts.addr)
	start := time.Now() // the idle timer starts after this round trip
	quiet.roundTrip(1, "quiet")
	busy := dial(t, ts.addr)
	for time.Since(start) < 2*idle {
		busy.roundTrip(1, "busy")
		time.Sleep(idle / 6)
	}
	quiet.expectClosed()
	if waited := time.Since(start); waited < idle {
		t.Fatalf("closed after %v, before connections.max.idle.ms (%v)", waited, idle)
	}
	busy.roundTrip(1, "busy-still-open")
}

// TestShutdownWritesPendingDeferredReply: Shutdown while a Deferred reply is pending waits for
// it, writes it, then closes the connection; new connections are refused meanwhile.
func TestShutdownWritesPendingDeferredReply(t *testing.T) {
	ts := startServer(t, Config{})
	c := dial(t, ts.addr)
	c.roundTrip(9, "warm-up")
	corr := c.send(metadataReq("block"), 9)
	<-ts.blocked // read and dispatched: its Deferred is queued
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- ts.Shutdown(ctx)
	}()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a reply pending", err)
	case <-time.After(200 * time.Millisecond):
	}
	ts.unblockAll()
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(9)
	c.recv(corr, resp)
	if *resp.Topics[0].Topic != "block" {
		t.Fatalf("pending reply: %+v", resp)
	}
	c.expectClosed()
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n := ts.ConnectionCount(); n != 0 {
		t.Fatalf("%d connections after Shutdown", n)
	}
}

// TestShutdownWhilePipelining: Shutdown while clients are busy sending requests stops them
// promptly (each connection answers what it read, then closes), however the shutdown interleaves
// with the readers; the idle timeout is long, so a reader that missed the stop would hold
// Shutdown until its context expires.
func TestShutdownWhilePipelining(t *testing.T) {
	for round := 0; round < 10; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) { shutdownWhilePipelining(t, round) })
	}
}

func shutdownWhilePipelining(t *testing.T, round int) {
	ts := startServer(t, Config{IdleTimeout: time.Hour})
	var clients []*testClient
	for i := 0; i < 4; i++ {
		c := dial(t, ts.addr)
		c.roundTrip(1, "warm-up")
		clients = append(clients, c)
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		frame, _ := c.frame(metadataReq("spin"), 1)
		wg.Add(2)
		go func() { // drain replies so the server never blocks writing
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.conn.Read(buf); err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for {
				_ = c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.conn.Write(frame); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(time.Duration(round%5) * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatalf("round %d: Shutdown did not stop busy connections in time: %v", round, err)
	}
	wg.Wait()
}

// TestIdleTimeoutClientNotReading: a client that sends requests but never reads the responses
// makes no progress either; like Kafka (whose idle timer runs on reads and writes), the broker
// closes it after connections.max.idle.ms instead of keeping it, its goroutines and its queued
// requests forever.
func TestIdleTimeoutClientNotReading(t *testing.T) {
	const idle = 300 * time.Millisecond
	ts := startServer(t, Config{IdleTimeout: idle, MaxInFlight: 2})
	payload := make([]byte, 4<<20)
	ts.setBody(func(r *Request) *Body {
		body := NewBody(false)
		body.SetBytes(append(body.Bytes(), payload...))
		return body
	})
	c := dial(t, ts.addr)
	_ = c.conn.(*net.TCPConn).SetReadBuffer(4096)
	var wire []byte
	for i := 0; i < 32; i++ { // 128 MiB of responses: far more than the socket buffers hold
		frame, _ := c.frame(kmsg.NewPtrFetchRequest(), 4)
		wire = append(wire, frame...)
	}
	go func() { _, _ = c.conn.Write(wire) }()
	ts.waitConns(t, 1)
	deadline := time.Now().Add(10 * time.Second)
	for ts.ConnectionCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a connection whose client reads nothing is still open after %v (connections.max.idle.ms %v)", 10*time.Second, idle)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShutdownEndsParkedReplies: ConnInfo.Closing closes when Shutdown stops the reader, so a
// Deferred reply parked on it (a long poll) is answered at once: Shutdown does not wait for the
// park's timeout.
func TestShutdownEndsParkedReplies(t *testing.T) {
	ts := startServer(t, Config{})
	c := dial(t, ts.addr)
	c.roundTrip(9, "warm-up")
	corr := c.send(metadataReq("park"), 9)
	<-ts.blocked // dispatched: its Deferred is parked
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Shutdown took %v with a parked reply", took)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(9)
	c.recv(corr, resp)
	c.expectClosed()
}

// TestMaxConnectionCreationRate: max.connection.creation.rate spaces accepts (after a burst of
// one second's worth), as Kafka throttles its acceptor; every connection is still served.
func TestMaxConnectionCreationRate(t *testing.T) {
	const rate, n = 20, 30
	ts := startServer(t, Config{MaxConnectionCreationRate: rate})
	start := time.Now()
	for i := 0; i < n; i++ {
		c := dial(t, ts.addr)
		c.roundTrip(1, "rated")
		c.conn.Close()
	}
	// 20 at once, then one every 50 ms.
	if took := time.Since(start); took < (n-rate-1)*time.Second/rate {
		t.Fatalf("%d connections in %v at max.connection.creation.rate %d", n, took, rate)
	}
	if st := ts.Stats(); st.Throttled == 0 {
		t.Fatalf("no accept throttled: %+v", st)
	}
}
