package netio

import (
	"bytes"
	"crypto/tls"
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio/testcert"
	"github.com/weir-mq/weir/segment"
)

// TestTLSPipelinedFetches: a client pipelining large Fetch responses (file slices copied
// through the TLS writer) and small requests over TLS gets every response whole and in order.
func TestTLSPipelinedFetches(t *testing.T) {
	ca := testcert.NewCA(t)
	ts := &testServer{block: make(chan struct{}), blocked: make(chan struct{}, 64)}
	ts.unblockAll = func() {}
	_, addr := serveListener(t, Config{}, fakeRegistry(ts), Listener{TLS: &tls.Config{Certificates: []tls.Certificate{ca.Server(t).TLS}}})
	data := make([]byte, 1<<20+333)
	for i := range data {
		data[i] = byte(i*13 + i>>11)
	}
	f := writeTemp(t, t.TempDir()+"/00000000000000000000.log", data)
	ts.setBody(fileBody(f, int64(len(data))))
	c, err := tlsDial(t, addr, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	var corrs []int32
	for i := 0; i < 6; i++ {
		corrs = append(corrs, c.send(kmsg.NewPtrFetchRequest(), 12))
		corrs = append(corrs, c.send(metadataReq("between"), 1))
	}
	for i, corr := range corrs {
		if i%2 == 1 {
			resp := kmsg.NewPtrMetadataResponse()
			resp.SetVersion(1)
			c.recv(corr, resp)
			continue
		}
		b, err := c.readFrame()
		if err != nil {
			t.Fatalf("fetch %d: %v", i/2, err)
		}
		if len(b) != 5+len(data) || !bytes.Equal(b[5:], data) || int32(b[0])<<24|int32(b[1])<<16|int32(b[2])<<8|int32(b[3]) != corr {
			t.Fatalf("fetch %d: %d bytes, want %d (first difference at %d)", i/2, len(b), 5+len(data), firstDiff(b[min(5, len(b)):], data))
		}
	}
}

// fileBody answers a raw Fetch with the first n bytes of f as its only content.
func fileBody(f *os.File, n int64) func(r *Request) *Body {
	return func(r *Request) *Body {
		body := NewBody(r.Version >= 12)
		body.AppendSlice(segment.Slice{File: f, Position: 0, Length: n})
		return body
	}
}
