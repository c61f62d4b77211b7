package netio

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Config bounds the transport. Zero values take Kafka's defaults.
type Config struct {
	// MaxRequestBytes is socket.request.max.bytes (default 100 MiB).
	MaxRequestBytes int32
	// MaxConnections is max.connections (default unlimited: 0).
	MaxConnections int
	// IdleTimeout is connections.max.idle.ms (default 10 minutes): a connection closes when no
	// request arrives for this long, or when writing one reply takes longer (the client stopped
	// reading).
	IdleTimeout time.Duration
	// MaxInFlight is how many requests of one connection may be read and not yet answered
	// (default 64); at the limit the connection is muted (nothing is read from it).
	MaxInFlight int
	// MaxConnectionBytes bounds the bytes of one connection's request frames read (or being
	// read) and not yet released (budget.go): a frame that would pass it waits, the connection
	// muted, unless the connection holds nothing else (default: the larger of MaxRequestBytes
	// and 8 MiB: Kafka holds one request per connection, weir pipelines within that much).
	MaxConnectionBytes int64
	// MaxQueuedBytes is queued.max.request.bytes: the bytes of request frames held over every
	// connection; a reader waits (muted) for room (0 or negative: unbounded).
	MaxQueuedBytes int64
	// MaxQueuedRequests is queued.max.requests: requests read and not yet handled over every
	// connection (default 500, Kafka's).
	MaxQueuedRequests int
	// Observer, when set, is told about every answered request (metrics).
	Observer Observer
	// MaxUnauthenticatedBytes bounds request frames on a RequireAuth listener until the
	// connection has authenticated (Kafka's sasl.server.max.receive.size, default 512 KiB): a
	// stranger cannot make the broker read socket.request.max.bytes.
	MaxUnauthenticatedBytes int32
}

// Observer receives per-request measurements. It is called from connection goroutines, so it
// must be cheap and safe for concurrent use.
type Observer interface {
	// RequestDone is called once a request's reply was written (or dropped: acks=0, a broken
	// connection), with the time from reading the request to then.
	RequestDone(key, version int16, d time.Duration)
}

func (c *Config) fill() {
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = 100 << 20
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 10 * time.Minute
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 64
	}
	if c.MaxUnauthenticatedBytes <= 0 {
		c.MaxUnauthenticatedBytes = 512 << 10
	}
	if c.MaxConnectionBytes <= 0 {
		c.MaxConnectionBytes = max(int64(c.MaxRequestBytes), 8<<20)
	}
	if c.MaxQueuedRequests <= 0 {
		c.MaxQueuedRequests = 500
	}
}

// Listener is a named listening socket and its security protocol.
type Listener struct {
	Name string
	net.Listener
	// SecurityProtocol is Kafka's name of the listener's protocol (PLAINTEXT, SSL,
	// SASL_PLAINTEXT, SASL_SSL); informational (ConnInfo.SecurityProtocol).
	SecurityProtocol string
	// TLS, when set, makes every connection a TLS server connection (SSL, SASL_SSL). Responses
	// then copy file slices through user space (sendfile cannot encrypt).
	TLS *tls.Config
	// RequireAuth gates the listener (SASL_PLAINTEXT, SASL_SSL): until a handler calls
	// ConnInfo.SetAuthenticated, only the API keys in PreAuthKeys are served; any other
	// request closes the connection before it is decoded, and frames are bounded by
	// Config.MaxUnauthenticatedBytes.
	RequireAuth bool
}

// PreAuthKeys are the API keys served on a RequireAuth listener before authentication:
// ApiVersions (18), SaslHandshake (17), SaslAuthenticate (36), as Kafka does.
var PreAuthKeys = [...]int16{18, 17, 36}

func preAuthKey(key int16) bool {
	for _, k := range PreAuthKeys {
		if k == key {
			return true
		}
	}
	return false
}

// Server accepts connections on its listeners and serves them with the registry's handlers.
type Server struct {
	cfg Config
	reg *Registry

	mu        sync.Mutex
	listeners []Listener
	conns     map[*conn]struct{}
	closing   bool
	wg        sync.WaitGroup
	nextID    atomic.Uint64
	connCount atomic.Int64
	// panics counts recovered handler panics (HandlerPanics).
	panics atomic.Int64
	// budget bounds the bytes of request frames held over every connection (nil: unbounded);
	// slots holds one value per request being handled (queued.max.requests).
	budget *budget
	slots  chan struct{}
	// frames keeps idle large frame buffers (framepool.go).
	frames bigPool
	st     stats
}

// NewServer returns a server using reg.
func NewServer(cfg Config, reg *Registry) *Server {
	cfg.fill()
	s := &Server{cfg: cfg, reg: reg, conns: map[*conn]struct{}{}, budget: newBudget(cfg.MaxQueuedBytes),
		slots: make(chan struct{}, cfg.MaxQueuedRequests)}
	// Idle large frames kept for reuse: enough for a pipelining producer per core to reuse its
	// buffers, at most a quarter of the broker budget.
	s.frames.limit = 64 << 20
	if cfg.MaxQueuedBytes > 0 {
		s.frames.limit = min(s.frames.limit, cfg.MaxQueuedBytes/4)
	}
	return s
}

// Serve starts accepting on l (in the background).
func (s *Server) Serve(l Listener) {
	s.mu.Lock()
	s.listeners = append(s.listeners, l)
	s.mu.Unlock()
	s.wg.Add(1)
	go s.acceptLoop(l)
}

// ConnectionCount is the number of open client connections.
func (s *Server) ConnectionCount() int64 { return s.connCount.Load() }

// HandlerPanics is the number of handler (or Deferred) panics recovered so far, each of which
// closed its connection. Fuzz tests assert it stays zero; it is also worth exporting as a metric.
func (s *Server) HandlerPanics() int64 { return s.panics.Load() }

func (s *Server) acceptLoop(l Listener) {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backoff = min(max(backoff*2, 5*time.Millisecond), time.Second)
			slog.Warn("accept", "listener", l.Name, "err", err)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		tc, ok := nc.(*net.TCPConn)
		if !ok {
			nc.Close()
			continue
		}
		if max := s.cfg.MaxConnections; max > 0 && s.connCount.Load() >= int64(max) {
			slog.Warn("max.connections reached; closing new connection", "remote", nc.RemoteAddr())
			nc.Close()
			continue
		}
		_ = tc.SetNoDelay(true)
		c := newConn(s, tc, l)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.connCount.Add(1)
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			s.connCount.Add(-1)
		}()
	}
}

// Shutdown stops accepting, stops reading new requests, lets every connection answer what it
// already read, then closes them. It waits until ctx is done at most, then closes forcibly.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for _, l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return fmt.Errorf("netio shutdown: %w", ctx.Err())
	}
}
