package netio

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio/testcert"
	"github.com/weir-mq/weir/segment"
)

// TestTLSTransportBatches: during a batch, writes are gathered and reach the peer only when the
// batch fills or ends, whole and in order; a write from another goroutine during a batch (as
// crypto/tls's answer to a KeyUpdate from the reader) takes its place in the same order;
// outside a batch writes go straight out.
func TestTLSTransportBatches(t *testing.T) {
	server, client := tcpPair(t)
	tr := &tlsTransport{TCPConn: server}
	read := func(n int) []byte {
		t.Helper()
		_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, n)
		if _, err := io.ReadFull(client, b); err != nil {
			t.Fatalf("read %d bytes: %v", n, err)
		}
		return b
	}
	nothingArrives := func() {
		t.Helper()
		_ = client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		var one [1]byte
		if n, err := client.Read(one[:]); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("bytes arrived during a batch: n=%d err=%v", n, err)
		}
	}
	if _, err := tr.Write([]byte("direct")); err != nil {
		t.Fatal(err)
	}
	if got := read(6); string(got) != "direct" {
		t.Fatalf("direct write: %q", got)
	}

	tr.startBatch()
	var want bytes.Buffer
	for i := 0; i < 10; i++ {
		rec := bytes.Repeat([]byte{byte('a' + i)}, 1000)
		if _, err := tr.Write(rec); err != nil {
			t.Fatal(err)
		}
		want.Write(rec)
	}
	// Another goroutine's write joins the batch after the records written before it.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := tr.Write([]byte("from-reader")); err != nil {
			t.Error(err)
		}
	}()
	wg.Wait()
	want.WriteString("from-reader")
	nothingArrives()
	// Records past tlsBatchBytes go out without waiting for the end of the batch.
	rec := make([]byte, 16<<10)
	for want.Len() < tlsBatchBytes {
		for i := range rec {
			rec[i] = byte(want.Len() + i)
		}
		if _, err := tr.Write(rec); err != nil {
			t.Fatal(err)
		}
		want.Write(rec)
	}
	if got := read(want.Len()); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("first flush: %d bytes differ from what was written (first difference at %d)", len(got), firstDiff(got, want.Bytes()))
	}
	want.Reset()
	if _, err := tr.Write([]byte("tail")); err != nil {
		t.Fatal(err)
	}
	nothingArrives()
	if err := tr.endBatch(); err != nil {
		t.Fatal(err)
	}
	if got := read(4); string(got) != "tail" {
		t.Fatalf("end of batch: %q", got)
	}
	if _, err := tr.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if got := read(5); string(got) != "after" {
		t.Fatalf("after the batch: %q", got)
	}
}

// TestTLSTransportWriteError: a batch write that fails (here: the write deadline passed) fails
// every later write of the batch and endBatch, and the next batch starts clean.
func TestTLSTransportWriteError(t *testing.T) {
	server, client := tcpPair(t)
	tr := &tlsTransport{TCPConn: server}
	tr.startBatch()
	if _, err := tr.Write([]byte("queued")); err != nil {
		t.Fatal(err)
	}
	_ = server.SetWriteDeadline(time.Now().Add(-time.Second))
	big := make([]byte, tlsBatchBytes)
	if _, err := tr.Write(big); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past the deadline: %v", err)
	}
	if _, err := tr.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write after a failed batch write: %v", err)
	}
	if err := tr.endBatch(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("endBatch after a failed write: %v", err)
	}
	_ = server.SetWriteDeadline(time.Time{})
	tr.startBatch()
	if _, err := tr.Write([]byte("again")); err != nil {
		t.Fatal(err)
	}
	if err := tr.endBatch(); err != nil {
		t.Fatal(err)
	}
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 5)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "again" {
		t.Fatalf("next batch: %q, %v", got, err)
	}
}

// TestTLSPipelinedFetches: a client pipelining large Fetch responses and small requests over
// TLS gets every response whole and in order: batches end with each body, so the small
// replies between them are not held back.
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

var _ net.Conn = (*tlsTransport)(nil)
