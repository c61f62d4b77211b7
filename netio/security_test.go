package netio

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/weir-mq/weir/netio/testcert"
	"github.com/weir-mq/weir/segment"
)

// serveListener serves reg on a loopback listener shaped by opts (TLS, RequireAuth) and shuts
// the server down (checking for leaked goroutines) at the end of the test.
func serveListener(t *testing.T, cfg Config, reg *Registry, opts Listener) (*Server, string) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	srv := NewServer(cfg, reg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Name, opts.Listener = "TEST", ln
	srv.Serve(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		goleak.VerifyNone(t, ignore)
	})
	return srv, ln.Addr().String()
}

func tlsDial(t *testing.T, addr string, cfg *tls.Config) (*testClient, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return &testClient{t: t, conn: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("netio-test"))}, nil
}

// TestTLSBodyCopiesFileSlices serves the raw Fetch body of TestBodyWithFileSlices over TLS:
// the slices go through the copying writer (pread into a pooled buffer), crossing its buffer
// boundary many times, and arrive byte for byte; a slice longer than its file closes the
// connection before the frame completes.
func TestTLSBodyCopiesFileSlices(t *testing.T) {
	ca := testcert.NewCA(t)
	ts := &testServer{block: make(chan struct{}), blocked: make(chan struct{}, 64)}
	ts.unblockAll = func() {}
	_, addr := serveListener(t, Config{}, fakeRegistry(ts), Listener{TLS: &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS}}})
	dir := t.TempDir()
	big := make([]byte, 3<<20+12345)
	for i := range big {
		big[i] = byte(i*7 + i>>13)
	}
	small := []byte("0123456789abcdef")
	fBig := writeTemp(t, filepath.Join(dir, "big.log"), big)
	fSmall := writeTemp(t, filepath.Join(dir, "small.log"), small)
	var short atomic.Bool
	ts.setBody(func(r *Request) *Body {
		body := NewBody(r.Version >= 12)
		body.SetBytes(append(body.Bytes(), "head|"...))
		body.AppendSlice(segment.Slice{File: fBig, Position: 100, Length: int64(len(big)) - 200})
		body.SetBytes(append(body.Bytes(), "|mid|"...))
		body.AppendSlice(segment.Slice{File: fSmall, Position: 0, Length: 0})
		length := int64(10)
		if short.Load() {
			length = int64(len(small)) + 1
		}
		body.AppendSlice(segment.Slice{File: fSmall, Position: 3, Length: length})
		body.SetBytes(append(body.Bytes(), "|tail"...))
		return body
	})
	c, err := tlsDial(t, addr, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	c.roundTrip(1, "over-tls")
	for _, v := range []int16{4, 17} {
		corr := c.send(kmsg.NewPtrFetchRequest(), v)
		b, err := c.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		want := binary.BigEndian.AppendUint32(nil, uint32(corr))
		if v >= 12 {
			want = append(want, 0)
		}
		want = append(want, "head|"...)
		want = append(want, big[100:len(big)-100]...)
		want = append(want, "|mid|"...)
		want = append(want, small[3:13]...)
		want = append(want, "|tail"...)
		if string(b) != string(want) {
			t.Fatalf("Fetch v%d over TLS: %d bytes, want %d (first difference at %d)", v, len(b), len(want), firstDiff(b, want))
		}
	}
	short.Store(true)
	c.send(kmsg.NewPtrFetchRequest(), 12)
	if b, err := c.readFrame(); err == nil {
		t.Fatalf("a frame with a short file slice was completed over TLS (%d bytes)", len(b))
	}
}

// principalRegistry serves ApiVersions and a Metadata whose cluster id is the connection's
// principal and its authentication state.
func principalRegistry() *Registry {
	reg := NewRegistry()
	reg.Register(API{Key: 18, MinVersion: 0, MaxVersion: 4, Handle: func(r *Request) Reply {
		resp := r.Body.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.SetVersion(r.Version)
		resp.ApiKeys = reg.ApiVersions()
		return Reply{Response: resp}
	}})
	reg.Register(API{Key: 3, MinVersion: 0, MaxVersion: 12, Handle: func(r *Request) Reply {
		resp := r.Body.ResponseKind().(*kmsg.MetadataResponse)
		resp.SetVersion(r.Version)
		p := r.Conn.Principal() + "|" + r.Conn.SecurityProtocol
		resp.ClusterID = &p
		return Reply{Response: resp}
	}})
	return reg
}

func (c *testClient) principal() string {
	c.t.Helper()
	corr := c.send(kmsg.NewPtrMetadataRequest(), 12)
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	c.recv(corr, resp)
	if resp.ClusterID == nil {
		return ""
	}
	return *resp.ClusterID
}

// TestTLSClientAuth: with client auth required, a client without a certificate cannot talk,
// a client with one signed by the CA is served as "User:" + its subject DN (Kafka's default
// principal mapping); with client auth requested, a client without a certificate is
// User:ANONYMOUS.
func TestTLSClientAuth(t *testing.T) {
	ca := testcert.NewCA(t)
	server := ca.Server(t)
	alice := ca.Client(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Acme"}, Country: []string{"US"}})
	other := testcert.NewCA(t).Client(t, pkix.Name{CommonName: "mallory"})
	for _, mode := range []tls.ClientAuthType{tls.RequireAndVerifyClientCert, tls.VerifyClientCertIfGiven} {
		_, addr := serveListener(t, Config{}, principalRegistry(), Listener{SecurityProtocol: "SSL",
			TLS: &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientCAs: ca.Pool, ClientAuth: mode}})
		c, err := tlsDial(t, addr, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", Certificates: []tls.Certificate{alice.TLS}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.principal(), "User:CN=alice,OU=eng,O=Acme,C=US|SSL"; got != want {
			t.Fatalf("%v: principal %q, want %q", mode, got, want)
		}
		// A certificate from another CA never gets in.
		if c, err := tlsDial(t, addr, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost", Certificates: []tls.Certificate{other.TLS}}); err == nil {
			if _, err := c.readFrame(); err == nil {
				t.Fatalf("%v: a certificate from an unknown CA was served", mode)
			}
		}
		c, err = tlsDial(t, addr, &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"})
		if mode == tls.RequireAndVerifyClientCert {
			// TLS 1.3: the client learns of the refusal at its first read.
			if err == nil {
				c.send(kmsg.NewPtrMetadataRequest(), 12)
				if _, err = c.readFrame(); err == nil {
					t.Fatal("required client auth: a client without a certificate was served")
				}
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := c.principal(); got != AnonymousPrincipal+"|SSL" {
			t.Fatalf("requested client auth without a certificate: principal %q", got)
		}
	}
	// Plain TCP to a TLS listener: the handshake fails, nothing is served.
	_, addr := serveListener(t, Config{}, principalRegistry(), Listener{TLS: &tls.Config{Certificates: []tls.Certificate{server.TLS}}})
	c := dial(t, addr)
	c.send(kmsg.NewPtrMetadataRequest(), 12)
	if b, err := c.readFrame(); err == nil {
		t.Fatalf("a plaintext request on a TLS listener was answered: % x", b[:min(len(b), 16)])
	}
}

// gateRegistry registers every API kmsg knows, each handler counting its calls made on an
// unauthenticated connection. SaslAuthenticate (36) authenticates the connection when its
// bytes are "ok".
type gateRegistry struct {
	*Registry
	mu      sync.Mutex
	unauth  map[int16]int
	handled map[int16]int
}

func newGateRegistry() *gateRegistry {
	g := &gateRegistry{Registry: NewRegistry(), unauth: map[int16]int{}, handled: map[int16]int{}}
	for key := int16(0); key < 200; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		g.Register(API{Key: key, MinVersion: 0, MaxVersion: req.MaxVersion(), Handle: func(r *Request) Reply {
			g.mu.Lock()
			g.handled[r.Key]++
			if !r.Conn.Authenticated() {
				g.unauth[r.Key]++
			}
			g.mu.Unlock()
			switch body := r.Body.(type) {
			case *kmsg.ApiVersionsRequest:
				resp := body.ResponseKind().(*kmsg.ApiVersionsResponse)
				resp.SetVersion(r.Version)
				resp.ApiKeys = g.ApiVersions()
				return Reply{Response: resp}
			case *kmsg.SASLAuthenticateRequest:
				if string(body.SASLAuthBytes) == "ok" {
					r.Conn.SetAuthenticated("User:tester")
				}
			}
			resp := r.Body.ResponseKind()
			resp.SetVersion(r.Version)
			return Reply{Response: resp}
		}})
	}
	return g
}

// TestAuthGate sends every API key kmsg knows, each on a new connection, to a RequireAuth
// listener before authenticating: every one but ApiVersions, SaslHandshake and
// SaslAuthenticate closes the connection without an answer, and none reaches its handler.
// After authentication everything is served. Frames above MaxUnauthenticatedBytes close an
// unauthenticated connection at once (the size alone: the body is never read), and are fine
// once authenticated.
func TestAuthGate(t *testing.T) {
	g := newGateRegistry()
	_, addr := serveListener(t, Config{MaxUnauthenticatedBytes: 64 << 10}, g.Registry, Listener{SecurityProtocol: "SASL_PLAINTEXT", RequireAuth: true})
	keys := 0
	for _, k := range g.ApiVersions() {
		req := kmsg.RequestForKey(k.ApiKey)
		c := dial(t, addr)
		corr := c.send(req, k.MaxVersion)
		if preAuthKey(k.ApiKey) {
			resp := req.ResponseKind()
			resp.SetVersion(k.MaxVersion)
			c.recv(corr, resp)
			continue
		}
		c.expectClosed()
		keys++
	}
	g.mu.Lock()
	for key, n := range g.unauth {
		if !preAuthKey(key) {
			t.Errorf("%s (key %d) reached its handler %d times unauthenticated", kmsg.NameForKey(key), key, n)
		}
	}
	g.mu.Unlock()
	if keys < 50 {
		t.Fatalf("only %d API keys tried", keys)
	}

	// A 100 MB frame before authentication: closed on its size prefix.
	c := dial(t, addr)
	c.write(binary.BigEndian.AppendUint32(nil, 100<<20))
	c.write([]byte{0, 36, 0, 2}) // the start of a SaslAuthenticate header
	start := time.Now()
	c.expectClosed()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("closing took %v", d)
	}

	// Authenticate, then everything (and larger frames) is served.
	c = dial(t, addr)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("not yet")
	corr := c.send(auth, 2)
	c.recv(corr, func() kmsg.Response { r := kmsg.NewPtrSASLAuthenticateResponse(); r.SetVersion(2); return r }())
	c.expectClosedAfter(kmsg.NewPtrMetadataRequest(), 12)
	c = dial(t, addr)
	auth.SASLAuthBytes = []byte("ok")
	corr = c.send(auth, 2)
	c.recv(corr, func() kmsg.Response { r := kmsg.NewPtrSASLAuthenticateResponse(); r.SetVersion(2); return r }())
	big := kmsg.NewPtrMetadataRequest()
	for i := 0; i < 2000; i++ {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(strings.Repeat("t", 60))
		big.Topics = append(big.Topics, rt)
	}
	corr = c.send(big, 12)
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	c.recv(corr, resp)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.handled[3] != 1 {
		t.Fatalf("Metadata handled %d times after authentication, want 1", g.handled[3])
	}
}

func (c *testClient) expectClosedAfter(req kmsg.Request, version int16) {
	c.t.Helper()
	c.send(req, version)
	c.expectClosed()
}
