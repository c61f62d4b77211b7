package broker

// Listener security: Kafka's listener.security.protocol.map names each listener's protocol
// (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); SSL and SASL_SSL listeners serve TLS with the
// PEM files in ssl.certificate.location / ssl.key.location, verifying client certificates
// against ssl.ca.location as ssl.client.auth says; SASL_* listeners require SaslHandshake +
// SaslAuthenticate (17_sasl_handshake.go, 36_sasl_authenticate.go) with one of
// sasl.enabled.mechanisms before anything but ApiVersions is served (netio's gate). Every
// ssl.* and sasl.enabled.mechanisms key can be overridden per listener with Kafka's prefix
// listener.name.<lower-case listener name>.<key>.

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-mq/weir/netio"
)

// Kafka's security protocols.
const (
	protoPlaintext     = "PLAINTEXT"
	protoSSL           = "SSL"
	protoSASLPlaintext = "SASL_PLAINTEXT"
	protoSASLSSL       = "SASL_SSL"
)

// SASL mechanisms weir serves.
const (
	mechPlain       = "PLAIN"
	mechScramSHA256 = "SCRAM-SHA-256"
	mechScramSHA512 = "SCRAM-SHA-512"
)

var knownMechanisms = []string{mechPlain, mechScramSHA256, mechScramSHA512}

// listenerSecurity is what one listener requires.
type listenerSecurity struct {
	protocol   string
	tls        *tls.Config
	mechanisms []string // SASL listeners: the enabled mechanisms, in configured order
}

// securityState is the broker's security configuration and the authentication state shared by
// connections.
type securityState struct {
	listeners map[string]listenerSecurity
	limiter   *authLimiter
	// failDelay is connection.failed.authentication.delay.ms: a failed authentication is
	// answered (and the connection closed) only after this long.
	failDelay time.Duration
	// fakeKey derives unknown users' fake SCRAM credentials until the cluster secret exists
	// (scram.go: scramFakeKey).
	fakeKey [32]byte
	// authFailures and authSuccesses count SASL authentications per mechanism (index in
	// knownMechanisms); throttled counts attempts refused by the per-address limiter.
	authFailures  [3]atomic.Uint64
	authSuccesses [3]atomic.Uint64
	throttled     atomic.Uint64
}

// countAuth counts one finished SASL authentication of mechanism.
func (s *securityState) countAuth(mechanism string, ok bool) {
	i := slices.Index(knownMechanisms, mechanism)
	if i < 0 {
		return
	}
	if ok {
		s.authSuccesses[i].Add(1)
	} else {
		s.authFailures[i].Add(1)
	}
}

var (
	descAuthFailures = prometheus.NewDesc("weir_sasl_authentication_failures_total",
		"Failed SASL authentications (wrong credentials, unknown users, malformed messages, refused by the per-address limit), by mechanism.", []string{"mechanism"}, nil)
	descAuthSuccesses = prometheus.NewDesc("weir_sasl_authentication_successes_total",
		"Successful SASL authentications, by mechanism.", []string{"mechanism"}, nil)
	descAuthThrottled = prometheus.NewDesc("weir_sasl_authentication_throttled_total",
		"SASL authentications refused without checking the credentials because the client address failed too often.", nil, nil)
)

// securityCollector exports the SASL counters.
type securityCollector struct{ s *securityState }

func (c securityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAuthFailures
	ch <- descAuthSuccesses
	ch <- descAuthThrottled
}

func (c securityCollector) Collect(ch chan<- prometheus.Metric) {
	for i, m := range knownMechanisms {
		ch <- prometheus.MustNewConstMetric(descAuthFailures, prometheus.CounterValue, float64(c.s.authFailures[i].Load()), m)
		ch <- prometheus.MustNewConstMetric(descAuthSuccesses, prometheus.CounterValue, float64(c.s.authSuccesses[i].Load()), m)
	}
	ch <- prometheus.MustNewConstMetric(descAuthThrottled, prometheus.CounterValue, float64(c.s.throttled.Load()))
}

// protocolMap parses listener.security.protocol.map (NAME:PROTOCOL,...).
func (c *Config) protocolMap() (map[string]string, error) {
	m := map[string]string{}
	for _, item := range splitList(keyListenerSecurityProtocolMap.Get(c)) {
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("listener.security.protocol.map: %q: expected NAME:PROTOCOL", item)
		}
		switch proto {
		case protoPlaintext, protoSSL, protoSASLPlaintext, protoSASLSSL:
		default:
			return nil, fmt.Errorf("listener.security.protocol.map: %q: unknown security protocol %s (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", item, proto)
		}
		m[name] = proto
	}
	return m, nil
}

// newSecurityState resolves every listener's security from the configuration.
func newSecurityState(cfg *Config, specs []ListenerSpec) (*securityState, error) {
	protos, err := cfg.protocolMap()
	if err != nil {
		return nil, err
	}
	s := &securityState{
		listeners: map[string]listenerSecurity{},
		limiter:   newAuthLimiter(saslFailureBurst, saslFailureRefill),
		failDelay: keyConnectionFailedAuthDelay.Get(cfg),
	}
	_, _ = rand.Read(s.fakeKey[:])
	for _, spec := range specs {
		proto, ok := protos[spec.Name]
		if !ok {
			return nil, fmt.Errorf("listener %s: no security protocol for it in listener.security.protocol.map (%s)", spec.Name, keyListenerSecurityProtocolMap.Get(cfg))
		}
		ls := listenerSecurity{protocol: proto}
		if proto == protoSSL || proto == protoSASLSSL {
			if ls.tls, err = listenerTLS(cfg, spec.Name, proto); err != nil {
				return nil, fmt.Errorf("listener %s (%s): %w", spec.Name, proto, err)
			}
		}
		if proto == protoSASLPlaintext || proto == protoSASLSSL {
			for _, m := range splitList(keySASLEnabledMechanisms.ForListener(cfg, spec.Name)) {
				m = strings.ToUpper(m)
				if !slices.Contains(knownMechanisms, m) {
					return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms: %s is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", spec.Name, m)
				}
				if !slices.Contains(ls.mechanisms, m) {
					ls.mechanisms = append(ls.mechanisms, m)
				}
			}
			if len(ls.mechanisms) == 0 {
				return nil, fmt.Errorf("listener %s (%s): sasl.enabled.mechanisms is empty", spec.Name, proto)
			}
		}
		s.listeners[spec.Name] = ls
	}
	return s, nil
}

// apply sets l's security fields.
func (s *securityState) apply(l *netio.Listener) {
	ls := s.listeners[l.Name]
	l.SecurityProtocol = ls.protocol
	l.TLS = ls.tls
	l.RequireAuth = ls.protocol == protoSASLPlaintext || ls.protocol == protoSASLSSL
}

// mechanisms is the list of SASL mechanisms enabled on listener.
func (s *securityState) mechanisms(listener string) []string { return s.listeners[listener].mechanisms }

// listenerTLS builds a listener's TLS configuration from the ssl.* keys.
func listenerTLS(cfg *Config, listener, proto string) (*tls.Config, error) {
	certFile := keySSLCertificateLocation.ForListener(cfg, listener)
	keyFile := keySSLKeyLocation.ForListener(cfg, listener)
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("ssl.certificate.location and ssl.key.location (PEM files) are required")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("ssl.certificate.location/ssl.key.location: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	// As in Kafka, ssl.client.auth applies to SASL_SSL listeners only when set with the
	// listener prefix: SASL authenticates those clients.
	clientAuth := keySSLClientAuth.ForListener(cfg, listener)
	if proto == protoSASLSSL {
		clientAuth, _ = keySSLClientAuth.ListenerOverride(cfg, listener)
	}
	switch strings.ToLower(clientAuth) {
	case "", "none":
		tc.ClientAuth = tls.NoClientCert
	case "requested":
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("ssl.client.auth %q: want none, requested or required", clientAuth)
	}
	if caFile := keySSLCALocation.ForListener(cfg, listener); caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("ssl.ca.location: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ssl.ca.location %s: no PEM certificate in it", caFile)
		}
		tc.ClientCAs = pool
	} else if tc.ClientAuth != tls.NoClientCert {
		return nil, fmt.Errorf("ssl.client.auth=%s needs ssl.ca.location (the CA that signs client certificates)", clientAuth)
	}
	return tc, nil
}

// Failed authentications are rate-limited per client IP address with a token bucket: a burst
// of saslFailureBurst failures, then one more per saslFailureRefill. While an address has no
// token left, its authentication attempts are refused without checking the credentials.
const (
	saslFailureBurst  = 10
	saslFailureRefill = time.Second
	// saslThrottleMaxDelay bounds how long a refused (throttled) attempt waits for its answer.
	saslThrottleMaxDelay = time.Second
)

// authLimiter is a token bucket of failed authentications per IP address.
type authLimiter struct {
	burst  float64
	refill time.Duration
	mu     sync.Mutex // guards ips and every bucket in it
	ips    map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newAuthLimiter(burst int, refill time.Duration) *authLimiter {
	return &authLimiter{burst: float64(burst), refill: refill, ips: map[string]*bucket{}}
}

func clientIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// get returns ip's bucket refilled to now (l.mu held).
func (l *authLimiter) get(ip string, now time.Time) *bucket {
	b, ok := l.ips[ip]
	if !ok {
		if len(l.ips) > 100000 { // forget addresses whose bucket is full again
			for k, v := range l.ips {
				if v.tokens+float64(now.Sub(v.at))/float64(l.refill) >= l.burst {
					delete(l.ips, k)
				}
			}
		}
		b = &bucket{tokens: l.burst, at: now}
		l.ips[ip] = b
	}
	b.tokens = min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.refill))
	b.at = now
	return b
}

// allow reports whether ip may attempt to authenticate; when not, wait is how long until it
// may (bounded by saslThrottleMaxDelay).
func (l *authLimiter) allow(ip string) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.get(ip, time.Now())
	if b.tokens >= 1 {
		return true, 0
	}
	return false, min(saslThrottleMaxDelay, time.Duration((1-b.tokens)*float64(l.refill)))
}

// failure takes a token from ip's bucket (down to -burst: concurrent failures push the next
// attempt further away).
func (l *authLimiter) failure(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.get(ip, time.Now())
	b.tokens = max(-l.burst, b.tokens-1)
}

// ListenerAddr returns the bound address of the listener named name (tests, tools).
func (b *Broker) ListenerAddr(name string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.bound {
		if l.Name == name {
			return l.Addr().String(), true
		}
	}
	return "", false
}

// anySASL reports whether some listener requires SASL.
func (s *securityState) anySASL() bool {
	for _, ls := range s.listeners {
		if len(ls.mechanisms) > 0 {
			return true
		}
	}
	return false
}
