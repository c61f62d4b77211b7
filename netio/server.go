package netio

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-mq/weir/internal/clock"
)

// Config bounds the transport. Zero values take Kafka's defaults.
type Config struct {
	// MaxRequestBytes is socket.request.max.bytes (default 100 MiB).
	MaxRequestBytes int32
	// MaxConnections is max.connections (default unlimited: 0): with that many connections
	// open, the listeners stop accepting (new connections wait in the kernel's backlog) until one
	// closes, as Kafka's acceptor does. Connections of an InterBroker listener do not wait for
	// it (and count).
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip (0: unlimited; negative: none, only the
	// addresses in ConnectionsPerIPOverrides may connect): a new connection from an address
	// that already has that many is closed at once, as Kafka does.
	MaxConnectionsPerIP int
	// ConnectionsPerIPOverrides (max.connections.per.ip.overrides) are limits for particular
	// addresses (net.IP.String() form) overriding MaxConnectionsPerIP.
	ConnectionsPerIPOverrides map[string]int
	// MaxConnectionCreationRate is max.connection.creation.rate (new connections a second over
	// all listeners but an InterBroker one; 0: unlimited): faster, the accept loops wait, as
	// Kafka's acceptor is throttled.
	MaxConnectionCreationRate int
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
	// DecodeCost, when set, estimates the memory a request's decoded form and its response
	// take beyond its frame (frame is the whole request: header and body), so that a request
	// made of many tiny entries (a Produce naming a million partitions) counts for what it
	// costs, not for its bytes. The estimate is charged to the broker budget after the frame
	// was read and before it is decoded (budget.go, acquireDecode), and released with the
	// request. It must be cheap (no allocation) and must not trust the frame (it may be
	// malformed). Nil: no charge.
	DecodeCost func(key, version int16, frame []byte) int64
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
	// MaxConnections is the listener's own max.connections (listener.name.<l>.max.connections;
	// 0: none): at the limit this listener stops accepting until one of its connections closes.
	MaxConnections int
	// InterBroker marks the listener followers fetch on: it does not wait for the broker-wide
	// Config.MaxConnections and MaxConnectionCreationRate (Kafka protects it likewise), only
	// for its own limits.
	InterBroker bool
	// MaxConnectionCreationRate is the listener's own max.connection.creation.rate
	// (listener.name.<l>.max.connection.creation.rate; 0: none).
	MaxConnectionCreationRate int
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

	mu        sync.Mutex // guards listeners, conns, closing, perIP, perListener, acceptWake
	listeners []Listener
	conns     map[*conn]struct{}
	closing   bool
	// perIP and perListener count the open connections by remote address and by listener.
	perIP       map[string]int
	perListener map[string]int
	// acceptWake is closed (and cleared) when a connection closes or shutdown begins, waking
	// the accept loops waiting for a connection slot.
	acceptWake chan struct{}
	// refusedLog limits the refused-connection log to one line a second (unix seconds).
	refusedLog atomic.Int64
	wg         sync.WaitGroup
	nextID     atomic.Uint64
	connCount  atomic.Int64
	// panics counts recovered handler panics (HandlerPanics).
	panics atomic.Int64
	// budget bounds the bytes of request frames held over every connection (nil: unbounded);
	// slots holds one value per request being handled (queued.max.requests).
	budget *budget
	slots  chan struct{}
	// frames keeps idle large frame buffers (framepool.go).
	frames bigPool
	// rate is the broker-wide max.connection.creation.rate (nil: unlimited).
	rate *rateGate
	// stopping is closed when Shutdown begins.
	stopping     chan struct{}
	stoppingOnce sync.Once
	st           stats
}

// NewServer returns a server using reg.
func NewServer(cfg Config, reg *Registry) *Server {
	cfg.fill()
	s := &Server{cfg: cfg, reg: reg, conns: map[*conn]struct{}{}, perIP: map[string]int{}, perListener: map[string]int{},
		budget: newBudget(cfg.MaxQueuedBytes),
		slots:  make(chan struct{}, cfg.MaxQueuedRequests), rate: newRateGate(cfg.MaxConnectionCreationRate),
		stopping: make(chan struct{})}
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
	own := newRateGate(l.MaxConnectionCreationRate)
	for {
		if !s.waitAcceptSlot(&l) || !s.throttleAccept(&l, own) {
			return
		}
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
		ip := remoteIP(tc)
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			return
		}
		if limit, ok := s.perIPLimit(ip); ok && s.perIP[ip] >= limit {
			s.mu.Unlock()
			s.st.refusedPerIP.Add(1)
			s.logRefused("closing connection: max.connections.per.ip reached", "remote", tc.RemoteAddr(), "listener", l.Name, "limit", limit)
			nc.Close()
			continue
		}
		_ = tc.SetNoDelay(true)
		c := newConn(s, tc, l)
		s.conns[c] = struct{}{}
		s.perIP[ip]++
		s.perListener[l.Name]++
		s.connCount.Add(1)
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			if s.perIP[ip]--; s.perIP[ip] <= 0 {
				delete(s.perIP, ip)
			}
			s.perListener[l.Name]--
			s.connCount.Add(-1)
			s.wakeAcceptLocked()
			s.mu.Unlock()
		}()
	}
}

// remoteIP is the connection's remote address without its port.
func remoteIP(tc *net.TCPConn) string {
	if a, ok := tc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return tc.RemoteAddr().String()
}

// perIPLimit is the connection limit of ip, if any.
func (s *Server) perIPLimit(ip string) (int, bool) {
	if n, ok := s.cfg.ConnectionsPerIPOverrides[ip]; ok {
		return n, true
	}
	return max(s.cfg.MaxConnectionsPerIP, 0), s.cfg.MaxConnectionsPerIP != 0
}

// waitAcceptSlot waits until l may accept another connection under max.connections and its
// own limit (Kafka's acceptor blocks likewise; meanwhile new connections wait in the kernel's
// backlog). It returns false once the server is shutting down.
func (s *Server) waitAcceptSlot(l *Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	waiting := false
	for !s.closing {
		total := l.InterBroker || s.cfg.MaxConnections <= 0 || s.connCount.Load() < int64(s.cfg.MaxConnections)
		own := l.MaxConnections <= 0 || s.perListener[l.Name] < l.MaxConnections
		if total && own {
			break
		}
		if !waiting {
			waiting = true
			s.st.waitingAccept.Add(1)
			defer s.st.waitingAccept.Add(-1)
			which, limit := "max.connections", s.cfg.MaxConnections
			if !own {
				which, limit = "listener.name."+strings.ToLower(l.Name)+".max.connections", l.MaxConnections
			}
			slog.Warn(which+" reached; not accepting until a connection closes", "listener", l.Name, "limit", limit)
		}
		if s.acceptWake == nil {
			s.acceptWake = make(chan struct{})
		}
		wake := s.acceptWake
		s.mu.Unlock()
		<-wake
		s.mu.Lock()
	}
	if waiting && !s.closing {
		slog.Info("accepting connections again", "listener", l.Name)
	}
	return !s.closing
}

// throttleAccept waits as long as max.connection.creation.rate (the broker's, except on an
// InterBroker listener, and the listener's own) says before the next accept. It returns false
// once the server is shutting down.
func (s *Server) throttleAccept(l *Listener, own *rateGate) bool {
	now := time.Now()
	wait := own.reserve(now)
	if !l.InterBroker {
		wait = max(wait, s.rate.reserve(now))
	}
	if wait <= 0 {
		return true
	}
	s.st.throttled.Add(1)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.stopping:
		return false
	}
}

func (s *Server) wakeAcceptLocked() {
	if s.acceptWake != nil {
		close(s.acceptWake)
		s.acceptWake = nil
	}
}

// logRefused logs a refused connection, at most once a second (a client retrying in a loop
// must not flood the log; Stats counts every refusal).
func (s *Server) logRefused(msg string, args ...any) {
	now := clock.Nanotime() / int64(time.Second)
	if last := s.refusedLog.Load(); last != now && s.refusedLog.CompareAndSwap(last, now) {
		slog.Warn(msg, args...)
	}
}

// Shutdown stops accepting, stops reading new requests, lets every connection answer what it
// already read, then closes them. It waits until ctx is done at most, then closes forcibly.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.stoppingOnce.Do(func() { close(s.stopping) })
	s.wakeAcceptLocked()
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
