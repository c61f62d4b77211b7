package replication

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxResponseBytes bounds a response frame read from a leader.
const maxResponseBytes = 256 << 20

// kconn is a minimal Kafka protocol client connection for broker-to-broker requests (follower
// fetches, OffsetForLeaderEpoch): one request at a time, request codec from kmsg. It speaks the
// inter-broker listener's security protocol (kclient_security.go).
type kconn struct {
	c    net.Conn
	br   *bufio.Reader
	fmt  *kmsg.RequestFormatter
	corr int32
	buf  []byte
	// expires, when set, is when the connection's SASL session should be replaced.
	expires time.Time
}

// dialKafka connects to addr, then runs TLS and SASL as sec says, all within ctx.
func dialKafka(ctx context.Context, addr, clientID string, sec ClientSecurity) (*kconn, error) {
	d := net.Dialer{Timeout: 3 * time.Second} // TCP; ctx bounds TLS and SASL too
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	k := &kconn{c: c, br: bufio.NewReaderSize(c, 64<<10), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
	if err := k.secure(ctx, addr, sec); err != nil {
		c.Close()
		return nil, err
	}
	return k, nil
}

// expired reports whether the connection's SASL session is (nearly) over.
func (k *kconn) expired() bool { return !k.expires.IsZero() && time.Now().After(k.expires) }

func (k *kconn) Close() error { return k.c.Close() }

// request sends req and reads its response, within deadline.
func (k *kconn) request(req kmsg.Request, deadline time.Time) (kmsg.Response, error) {
	k.corr++
	corr := k.corr
	k.buf = k.fmt.AppendRequest(k.buf[:0], req, corr)
	_ = k.c.SetDeadline(deadline)
	if _, err := k.c.Write(k.buf); err != nil {
		return nil, fmt.Errorf("write %s request: %w", kmsg.NameForKey(req.Key()), err)
	}
	var sz [4]byte
	if _, err := io.ReadFull(k.br, sz[:]); err != nil {
		return nil, fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 4 || n > maxResponseBytes {
		return nil, fmt.Errorf("%s response of %d bytes", kmsg.NameForKey(req.Key()), n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(k.br, body); err != nil {
		return nil, fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return nil, fmt.Errorf("%s response has correlation id %d, expected %d", kmsg.NameForKey(req.Key()), got, corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 { // response header v1: tagged fields
		var err error
		if body, err = skipTags(body); err != nil {
			return nil, fmt.Errorf("%s response header: %w", kmsg.NameForKey(req.Key()), err)
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// skipTags skips a tagged-field section (uvarint count, then uvarint tag, uvarint size, bytes).
func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, errShortTags
	}
	b = b[w:]
	for ; n > 0; n-- {
		_, w := binary.Uvarint(b)
		if w <= 0 {
			return nil, errShortTags
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < size {
			return nil, errShortTags
		}
		b = b[w+int(size):]
	}
	return b, nil
}

var errShortTags = errors.New("truncated tagged fields")
