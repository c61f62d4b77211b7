package netio

import (
	"encoding/binary"
	"math"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka closes the connection, without a response, on a request it cannot serve or parse. Each
// case sends one bad frame after a good round trip, expects the close (and the log record),
// and then checks a new connection is served normally. startServer's cleanup checks that no
// goroutine is left behind.

// rawFrame is a size-prefixed frame holding body.
func rawFrame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// rawHeader is a request header v1: key, version, correlation id, client id.
func rawHeader(key, version int16, corr int32, clientIDLen int16, clientID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(clientIDLen))
	return append(b, clientID...)
}

func TestBadFramesCloseTheConnection(t *testing.T) {
	const maxRequest = 4096
	ts := startServer(t, Config{MaxRequestBytes: maxRequest})

	// A Produce v9 request, cut short: its frame size matches the bytes sent, the body does not parse.
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = -1
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = make([]byte, 200)
	rt.Partitions = append(rt.Partitions, rp)
	produce.Topics = append(produce.Topics, rt)
	produce.SetVersion(9)
	fullProduce := kmsg.NewRequestFormatter().AppendRequest(nil, produce, 7)[4:]

	// A Metadata v4 request claiming 2^30 topics.
	hugeArray := append(rawHeader(3, 4, 1, -1, ""), 0x40, 0, 0, 0)

	// A Metadata v9 (flexible) request whose header tag section claims more bytes than sent.
	badTags := append(rawHeader(3, 9, 1, 3, "abc"), 1, 0, 100, 'x')

	cases := []struct {
		name  string
		frame []byte
		log   []string // parts of the expected log record
	}{
		{"unknown API key", rawFrame(rawHeader(99, 0, 1, -1, "")), []string{"bad request", "unknown API key 99"}},
		{"API known to kmsg but not registered", rawFrame(rawHeader(19, 4, 1, -1, "")), []string{"bad request", "unknown API key 19"}},
		{"negative API key", rawFrame(rawHeader(-1, 0, 1, -1, "")), []string{"bad request", "unknown API key -1"}},
		{"version above the range", rawFrame(rawHeader(3, 13, 1, -1, "")), []string{"unsupported version", "version=13"}},
		{"advertised but refused version", rawFrame(rawHeader(0, 2, 1, -1, "")), []string{"unsupported version", "version=2"}},
		{"negative version", rawFrame(rawHeader(1, -1, 1, -1, "")), []string{"unsupported version", "version=-1"}},
		{"negative size", binary.BigEndian.AppendUint32(nil, uint32(0xFFFFFFFF)), []string{"size out of bounds", "size=-1"}},
		{"most negative size", binary.BigEndian.AppendUint32(nil, 1<<31), []string{"size out of bounds", "size=-2147483648"}},
		{"zero size", binary.BigEndian.AppendUint32(nil, 0), []string{"size out of bounds", "size=0"}},
		{"size above socket.request.max.bytes", binary.BigEndian.AppendUint32(nil, maxRequest+1), []string{"size out of bounds", "size=4097", "socket.request.max.bytes=4096"}},
		{"size far above the limit", binary.BigEndian.AppendUint32(nil, math.MaxInt32), []string{"size out of bounds"}},
		{"frame shorter than a header", rawFrame([]byte{0, 3, 0, 1, 0, 0}), []string{"bad request", "malformed request header"}},
		{"client id beyond the frame", rawFrame(rawHeader(3, 1, 1, 500, "short")), []string{"bad request", "malformed request header"}},
		{"client id length -2", rawFrame(rawHeader(3, 1, 1, -2, "")), []string{"bad request", "malformed request header"}},
		{"header tags beyond the frame", rawFrame(badTags), []string{"bad request", "malformed request header"}},
		{"produce body cut short", rawFrame(fullProduce[:len(fullProduce)-50]), []string{"bad request", "decode Produce v9"}},
		{"produce body cut to its header", rawFrame(fullProduce[:len(rawHeader(0, 9, 7, -1, ""))+1]), []string{"bad request", "decode Produce v9"}},
		{"array count beyond the frame", rawFrame(hugeArray), []string{"bad request", "decode Metadata v4"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mark := logs.mark()
			c := dial(t, ts.addr)
			c.roundTrip(1, "before")
			c.write(tc.frame)
			c.expectClosed()
			logs.waitFor(t, mark, append([]string{"WARN closing connection"}, tc.log...)...)
			dial(t, ts.addr).roundTrip(4, "after")
		})
	}
	ts.waitConns(t, 0)
}

// TestTruncatedFrameThenEOF: a client that stops mid-frame (or mid-size) and half-closes gets
// its connection closed, without a response and without a warning (a debug record at most).
func TestTruncatedFrameThenEOF(t *testing.T) {
	ts := startServer(t, Config{})
	full, _ := dial(t, ts.addr).frame(metadataReq("cut"), 4)
	for _, cut := range []int{2, 4, 10, len(full) - 1} {
		mark := logs.mark()
		c := dial(t, ts.addr)
		c.write(full[:cut])
		if err := c.conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		c.expectClosed()
		ts.waitConns(t, 1) // the first dial stays open
		for _, r := range logs.since(mark) {
			if !strings.HasPrefix(r, "DEBUG") {
				t.Errorf("cut at %d logged %q", cut, r)
			}
		}
	}
	dial(t, ts.addr).roundTrip(12, "after")
}

// TestHandlerPanicClosesOnlyThatConnection: a handler panic (or a Deferred one) is recovered and
// logged; replies queued before it are still written; other connections carry on.
func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	ts := startServer(t, Config{})
	bystander := dial(t, ts.addr)
	bystander.roundTrip(9, "bystander")
	for _, script := range []string{"panic", "dpanic"} {
		mark := logs.mark()
		c := dial(t, ts.addr)
		first := c.send(metadataReq("first"), 9)
		c.send(metadataReq(script), 9)
		c.send(metadataReq("never-answered"), 9)
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(9)
		c.recv(first, resp)
		c.expectClosed()
		want := "ERROR handler panic"
		if script == "dpanic" {
			want = "ERROR deferred handler panic"
		}
		logs.waitFor(t, mark, want, "scripted")
		bystander.roundTrip(9, "bystander-"+script)
	}
	if n := ts.HandlerPanics(); n != 2 {
		t.Fatalf("HandlerPanics = %d, want 2", n)
	}
	dial(t, ts.addr).roundTrip(0, "after")
}

// TestCloseReply: a reply with Close is written, then the connection closes.
func TestCloseReply(t *testing.T) {
	ts := startServer(t, Config{})
	c := dial(t, ts.addr)
	c.roundTrip(5, "close")
	c.expectClosed()
	dial(t, ts.addr).roundTrip(5, "after")
}
