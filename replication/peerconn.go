package replication

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// PeerConn is one connection to another broker's inter-broker listener, speaking its security
// protocol (TLS, SASL) as the fetchers do. The broker's transaction coordinator sends
// WriteTxnMarkers over it. One request at a time: the caller serializes.
type PeerConn struct{ k *kconn }

// DialPeer connects to addr (host:port of the peer's inter-broker listener) within ctx.
func DialPeer(ctx context.Context, addr, clientID string, sec ClientSecurity) (*PeerConn, error) {
	k, err := dialKafka(ctx, addr, clientID, sec)
	if err != nil {
		return nil, err
	}
	return &PeerConn{k: k}, nil
}

// Request sends req (at req's version) and reads its response before deadline.
func (p *PeerConn) Request(req kmsg.Request, deadline time.Time) (kmsg.Response, error) {
	return p.k.request(req, deadline)
}

// Expired reports whether the connection's SASL session is (nearly) over: dial again.
func (p *PeerConn) Expired() bool { return p.k.expired() }

// Close closes the connection.
func (p *PeerConn) Close() error { return p.k.Close() }
