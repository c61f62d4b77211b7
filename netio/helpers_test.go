package netio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

// The tests serve a registry of fake APIs built on kmsg types: ApiVersions (18), Metadata (3),
// whose first topic name scripts the handler's behaviour (see metadataScript), Produce (0), which
// echoes its partitions, and a raw "Fetch" (1) whose body is bytes and file slices chosen by the
// test (bodyFor).

// logs records every slog record of the test binary, so tests can check what was logged.
var logs = &logRecorder{}

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(logs))
	os.Exit(m.Run())
}

type logRecorder struct {
	mu      sync.Mutex
	records []string // "LEVEL msg key=value ..."
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	sb.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "stack" {
			sb.WriteString(" " + a.Key + "=" + a.Value.String())
		}
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, sb.String())
	l.mu.Unlock()
	return nil
}

// mark returns the number of records so far; since(mark) returns the records logged after it.
func (l *logRecorder) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.records)
}

func (l *logRecorder) since(mark int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.records[mark:]...)
}

// waitFor waits up to 5 s for a record after mark containing every part.
func (l *logRecorder) waitFor(t *testing.T, mark int, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		recs := l.since(mark)
		for _, r := range recs {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(r, p)
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log record containing %q; got %q", parts, recs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testServer is a Server on a loopback port with the fake registry.
type testServer struct {
	*Server
	addr string
	// block holds the Deferred replies of "block" requests until closed.
	block chan struct{}
	// blocked receives a value when a "block" or "park" request has been dispatched.
	blocked chan struct{}
	// unblockAll closes block (once).
	unblockAll func()
	// bodyFor builds the raw "Fetch" body of a request (unset: an empty body).
	bodyFor atomic.Pointer[func(req *Request) *Body]
}

// startServer serves the fake registry with cfg. Its cleanup shuts the server down and checks
// that no goroutine it started is left.
func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	ts := &testServer{block: make(chan struct{}), blocked: make(chan struct{}, 64)}
	reg := fakeRegistry(ts)
	ts.Server = NewServer(cfg, reg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	ts.Serve(Listener{Name: "PLAINTEXT", Listener: ln})
	var unblock sync.Once
	ts.unblockAll = func() { unblock.Do(func() { close(ts.block) }) }
	t.Cleanup(func() {
		ts.unblockAll()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := ts.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		goleak.VerifyNone(t, ignore)
	})
	return ts
}

func fakeRegistry(ts *testServer) *Registry {
	reg := NewRegistry()
	reg.Register(API{Key: 18, MinVersion: 0, MaxVersion: 4, Handle: func(r *Request) Reply {
		resp := r.Body.ResponseKind().(*kmsg.ApiVersionsResponse)
		resp.SetVersion(r.Version)
		resp.ApiKeys = reg.ApiVersions()
		return Reply{Response: resp}
	}})
	reg.Register(API{Key: 3, MinVersion: 0, MaxVersion: 12, Handle: func(r *Request) Reply { return metadataScript(ts, r) }})
	advertisedProduce := int16(0)
	reg.Register(API{Key: 0, MinVersion: 3, MaxVersion: 11, AdvertisedMin: &advertisedProduce, Handle: func(r *Request) Reply {
		req := r.Body.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		resp.SetVersion(r.Version)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.BaseOffset = int64(len(rp.Records))
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if req.Acks == 0 {
			return Reply{None: true}
		}
		// A topic named "noalias" marks the reply as keeping nothing of the request's bytes.
		return Reply{Response: resp, NoAlias: len(req.Topics) > 0 && req.Topics[0].Topic == "noalias"}
	}})
	reg.Register(API{Key: 1, MinVersion: 4, MaxVersion: 17, Handle: func(r *Request) Reply {
		if f := ts.bodyFor.Load(); f != nil {
			return Reply{Body: (*f)(r)}
		}
		return Reply{Body: NewBody(r.Version >= 12)}
	}})
	return reg
}

// metadataScript answers a Metadata request according to its first topic's name:
//
//	panic          the handler panics
//	dpanic         the Deferred function panics
//	close          the reply is written, then the connection closes
//	sleep:MS       a Deferred reply that sleeps MS milliseconds in the writer
//	bg:MS          work started at dispatch that takes MS ms; the Deferred waits for it, so
//	               the work of pipelined requests overlaps and completes out of order
//	park           a Deferred reply that waits (a minute at most) for the connection to stop
//	               reading, as a long poll does
//	block          a Deferred reply that waits until the test closes ts.block
//	hold           the handler itself waits until the test closes ts.block (a request being
//	               handled: it holds a queued.max.requests slot)
//
// Every answer echoes the request's topic names and carries its correlation id as its one
// broker's node id, so the client can match replies to requests.
func metadataScript(ts *testServer, r *Request) Reply {
	req := r.Body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.SetVersion(r.Version)
	br := kmsg.NewMetadataResponseBroker()
	br.NodeID, br.Host, br.Port = r.CorrelationID, "echo", 9092
	resp.Brokers = append(resp.Brokers, br)
	script := ""
	for _, rt := range req.Topics {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = rt.Topic
		resp.Topics = append(resp.Topics, mt)
		if script == "" && rt.Topic != nil {
			script = *rt.Topic
		}
	}
	verb, arg, _ := strings.Cut(script, ":")
	ms, _ := strconv.Atoi(arg)
	switch verb {
	case "panic":
		panic("scripted handler panic")
	case "dpanic":
		return Reply{Deferred: func() Reply { panic("scripted deferred panic") }}
	case "close":
		return Reply{Response: resp, Close: true}
	case "sleep":
		return Reply{Deferred: func() Reply {
			time.Sleep(time.Duration(ms) * time.Millisecond)
			return Reply{Response: resp}
		}}
	case "bg":
		done := make(chan struct{})
		go func() {
			time.Sleep(time.Duration(ms) * time.Millisecond)
			close(done)
		}()
		return Reply{Deferred: func() Reply {
			<-done
			return Reply{Response: resp}
		}}
	case "park":
		closing := r.Conn.Closing
		select {
		case ts.blocked <- struct{}{}:
		default:
		}
		return Reply{Deferred: func() Reply {
			select {
			case <-closing:
			case <-time.After(time.Minute):
			}
			return Reply{Response: resp}
		}}
	case "hold":
		select {
		case ts.blocked <- struct{}{}:
		default:
		}
		<-ts.block
		return Reply{Response: resp}
	case "block":
		select {
		case ts.blocked <- struct{}{}:
		default:
		}
		return Reply{Deferred: func() Reply {
			<-ts.block
			return Reply{Response: resp}
		}}
	}
	return Reply{Response: resp}
}

func (ts *testServer) setBody(f func(req *Request) *Body) { ts.bodyFor.Store(&f) }

// testClient speaks raw Kafka framing to a testServer.
type testClient struct {
	t    testing.TB
	conn net.Conn // a *net.TCPConn, or a *tls.Conn (tlsDial)
	corr int32
	f    *kmsg.RequestFormatter
}

func dial(t testing.TB, addr string) *testClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &testClient{t: t, conn: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("netio-test"))}
}

// frame returns req encoded as a size-prefixed frame with the next correlation id.
func (c *testClient) frame(req kmsg.Request, version int16) ([]byte, int32) {
	req.SetVersion(version)
	c.corr++
	return c.f.AppendRequest(nil, req, c.corr), c.corr
}

// send writes req at version and returns its correlation id.
func (c *testClient) send(req kmsg.Request, version int16) int32 {
	c.t.Helper()
	b, corr := c.frame(req, version)
	c.write(b)
	return corr
}

func (c *testClient) write(b []byte) {
	c.t.Helper()
	_ = c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.conn.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame (without its size) within 5 s.
func (c *testClient) readFrame() ([]byte, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("response size %d", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(c.conn, b)
	return b, err
}

// recv reads one response, checks its correlation id and header version (v1, with a tag byte,
// for flexible versions except ApiVersions) and decodes it into resp (version already set).
// It checks that the body is exactly resp's encoding.
func (c *testClient) recv(corr int32, resp kmsg.Response) {
	c.t.Helper()
	b, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("read response %d: %v", corr, err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		c.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body := b[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		if len(body) == 0 || body[0] != 0 {
			c.t.Fatalf("%s v%d: response header v1 must end with an empty tag section, got % x", kmsg.NameForKey(resp.Key()), resp.GetVersion(), body[:min(len(body), 8)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode %s v%d: %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	if again := resp.AppendTo(nil); string(again) != string(body) {
		c.t.Fatalf("%s v%d: body is not exactly one response (%d bytes, re-encodes to %d)", kmsg.NameForKey(resp.Key()), resp.GetVersion(), len(body), len(again))
	}
}

// expectClosed checks that the server closes the connection without sending a byte.
func (c *testClient) expectClosed() {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var buf [64]byte
	n, err := c.conn.Read(buf[:])
	if n > 0 {
		c.t.Fatalf("expected the connection to close without a response, got %d bytes: % x", n, buf[:n])
	}
	if !isClosed(err) {
		c.t.Fatalf("expected the connection to close, got %v", err)
	}
}

// isClosed reports whether err is the peer closing the connection (EOF, or a reset when it
// closed with our bytes unread).
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

func metadataReq(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// roundTrip sends a Metadata request naming topic and checks the echo.
func (c *testClient) roundTrip(version int16, topic string) {
	c.t.Helper()
	corr := c.send(metadataReq(topic), version)
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(version)
	c.recv(corr, resp)
	if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != topic || resp.Brokers[0].NodeID != corr {
		c.t.Fatalf("metadata echo of %q (corr %d): %+v", topic, corr, resp)
	}
}

// waitConns waits until the server counts n connections.
func (ts *testServer) waitConns(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for ts.ConnectionCount() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections, want %d", ts.ConnectionCount(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
