package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request is one decoded request.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
	// Body is the decoded request (its byte fields alias the pooled frame buffer).
	Body kmsg.Request
	// Conn describes the connection it arrived on.
	Conn *ConnInfo
	// Received is when the frame was read.
	Received time.Time
	// Size is the request's frame size in bytes (Kafka's request.sizeInBytes, what
	// producer_byte_rate counts).
	Size int32
}

// ConnInfo describes a client connection.
type ConnInfo struct {
	Remote   net.Addr
	Local    net.Addr
	Listener string // the listener's name, e.g. PLAINTEXT
	ID       uint64
	// Closing is closed once the connection stops reading requests (the client went away, an
	// error, or server shutdown): a Deferred reply parked on a long wait should finish early.
	Closing <-chan struct{}
	// SecurityProtocol is the listener's protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
	SecurityProtocol string
	// TLS is whether the connection is encrypted.
	TLS bool
	// RequireAuth is whether the listener requires authentication (SASL) before serving
	// anything but PreAuthKeys.
	RequireAuth bool

	principal     atomic.Pointer[string]
	authenticated atomic.Bool
	authState     atomic.Pointer[any]
}

// AnonymousPrincipal is the principal of an unauthenticated connection (Kafka's User:ANONYMOUS).
const AnonymousPrincipal = "User:ANONYMOUS"

// Principal is the connection's authenticated principal ("User:alice"), or AnonymousPrincipal.
func (c *ConnInfo) Principal() string {
	if c == nil {
		return AnonymousPrincipal
	}
	if p := c.principal.Load(); p != nil {
		return *p
	}
	return AnonymousPrincipal
}

// SetPrincipal records the principal a connection authenticated as (SASL, or a TLS client
// certificate).
func (c *ConnInfo) SetPrincipal(p string) { c.principal.Store(&p) }

// Authenticated reports whether the connection may use every API: always on a listener that
// does not require authentication, otherwise once SetAuthenticated was called.
func (c *ConnInfo) Authenticated() bool {
	return c != nil && (!c.RequireAuth || c.authenticated.Load())
}

// SetAuthenticated records a successful authentication as principal: from the next request on,
// every API is served.
func (c *ConnInfo) SetAuthenticated(principal string) {
	c.SetPrincipal(principal)
	c.authenticated.Store(true)
}

// AuthState is the authentication handlers' per-connection state (a SASL exchange in
// progress), nil at first.
func (c *ConnInfo) AuthState() any {
	if p := c.authState.Load(); p != nil {
		return *p
	}
	return nil
}

// SetAuthState stores the authentication handlers' per-connection state.
func (c *ConnInfo) SetAuthState(v any) { c.authState.Store(&v) }

var errBadHeader = errors.New("malformed request header")

// header is the parsed request header and the offset of the body in the frame.
type header struct {
	key, version  int16
	correlationID int32
	clientID      string
	bodyStart     int
}

// parseHeader parses request header v1 (key, version, correlation id, nullable client id); the
// flexible (v2) header's tagged fields are skipped by skipTags once the version is known flexible.
func parseHeader(frame []byte) (header, error) {
	var h header
	if len(frame) < 10 {
		return h, errBadHeader
	}
	h.key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.correlationID = int32(binary.BigEndian.Uint32(frame[4:]))
	n := int16(binary.BigEndian.Uint16(frame[8:]))
	pos := 10
	if n >= 0 {
		if int(n) > len(frame)-pos {
			return h, errBadHeader
		}
		h.clientID = string(frame[pos : pos+int(n)])
		pos += int(n)
	} else if n != -1 {
		return h, errBadHeader
	}
	h.bodyStart = pos
	return h, nil
}

// skipTags skips a tagged-field section at b[pos:], returning the new position.
func skipTags(b []byte, pos int) (int, error) {
	count, n := binary.Uvarint(b[pos:])
	if n <= 0 || count > uint64(len(b)) {
		return 0, errBadHeader
	}
	pos += n
	for i := uint64(0); i < count; i++ {
		_, n := binary.Uvarint(b[pos:])
		if n <= 0 {
			return 0, errBadHeader
		}
		pos += n
		size, n := binary.Uvarint(b[pos:])
		if n <= 0 || size > uint64(len(b)-pos-n) {
			return 0, errBadHeader
		}
		pos += n + int(size)
	}
	return pos, nil
}

// decode parses a frame into a Request using the registry. It returns errUnsupportedVersion (with
// the header filled) when the API is known but the version is not served.
func decode(reg *Registry, frame []byte) (*Request, API, error) {
	h, err := parseHeader(frame)
	if err != nil {
		return nil, API{}, err
	}
	api, ok := reg.Lookup(h.key)
	if !ok {
		return nil, API{}, fmt.Errorf("unknown API key %d", h.key)
	}
	req := &Request{Key: h.key, Version: h.version, CorrelationID: h.correlationID, ClientID: h.clientID}
	if h.version < api.MinVersion || h.version > api.MaxVersion {
		return req, api, errUnsupportedVersion
	}
	body := kmsg.RequestForKey(h.key)
	body.SetVersion(h.version)
	pos := h.bodyStart
	if body.IsFlexible() {
		if pos, err = skipTags(frame, pos); err != nil {
			return nil, API{}, err
		}
	}
	if err := body.ReadFrom(frame[pos:]); err != nil {
		return nil, API{}, fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(h.key), h.version, err)
	}
	req.Body = body
	return req, api, nil
}

var errUnsupportedVersion = errors.New("unsupported version")
