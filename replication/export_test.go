package replication

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConn is a follower connection for the external tests (security_test.go).
type TestConn struct{ k *kconn }

// DialForTest dials addr with sec as a follower would.
func DialForTest(ctx context.Context, addr string, sec ClientSecurity) (*TestConn, error) {
	k, err := dialKafka(ctx, addr, "weir-replica-test", sec)
	if err != nil {
		return nil, err
	}
	return &TestConn{k}, nil
}

// Request sends one request on the connection.
func (c *TestConn) Request(req kmsg.Request) (kmsg.Response, error) {
	return c.k.request(req, time.Now().Add(10*time.Second))
}

// Close closes the connection.
func (c *TestConn) Close() error { return c.k.Close() }
