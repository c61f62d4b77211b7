package netio

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/segment"
)

// TestPipelinedRepliesInOrder writes 50 requests back to back on one connection without
// reading, then checks every reply arrives in request order: plain replies, Deferred replies
// that sleep longer for earlier requests, work started at dispatch that completes in reverse
// order, flexible and non-flexible versions of three APIs, and acks=0 produces (no reply).
func TestPipelinedRepliesInOrder(t *testing.T) {
	for _, inFlight := range []int{64, 2} {
		t.Run(fmt.Sprintf("maxInFlight=%d", inFlight), func(t *testing.T) {
			ts := startServer(t, Config{MaxInFlight: inFlight})
			c := dial(t, ts.addr)
			const n = 50
			type sent struct {
				corr    int32
				resp    kmsg.Response
				topic   string // the Metadata echo expected
				noReply bool
			}
			var all []sent
			var wire []byte
			for i := 0; i < n; i++ {
				var s sent
				var frame []byte
				switch i % 6 {
				case 0, 3: // work completing out of order: earlier requests take longer
					s.topic = fmt.Sprintf("bg:%d", (n-i)*2)
					v := int16(i % 13)
					frame, s.corr = c.frame(metadataReq(s.topic, "x"), v)
					s.resp = kmsg.NewPtrMetadataResponse()
					s.resp.SetVersion(v)
				case 1: // a Deferred that sleeps in the writer, longer for earlier requests
					s.topic = fmt.Sprintf("sleep:%d", (n-i)/5)
					frame, s.corr = c.frame(metadataReq(s.topic), 12)
					s.resp = kmsg.NewPtrMetadataResponse()
					s.resp.SetVersion(12)
				case 2: // ApiVersions: flexible from v3 but always response header v0
					v := int16(i % 5)
					frame, s.corr = c.frame(kmsg.NewPtrApiVersionsRequest(), v)
					s.resp = kmsg.NewPtrApiVersionsResponse()
					s.resp.SetVersion(v)
				case 4: // Produce, flexible at v9+
					req := kmsg.NewPtrProduceRequest()
					req.Acks = -1
					rt := kmsg.NewProduceRequestTopic()
					rt.Topic = "p"
					rp := kmsg.NewProduceRequestTopicPartition()
					rp.Records = make([]byte, i)
					rt.Partitions = append(rt.Partitions, rp)
					req.Topics = append(req.Topics, rt)
					v := int16(3 + i%9)
					frame, s.corr = c.frame(req, v)
					s.resp = kmsg.NewPtrProduceResponse()
					s.resp.SetVersion(v)
				case 5: // acks=0: no reply, the next reply is the next request's
					req := kmsg.NewPtrProduceRequest()
					req.Acks = 0
					frame, s.corr = c.frame(req, 9)
					s.noReply = true
				}
				all = append(all, s)
				wire = append(wire, frame...)
			}
			start := time.Now()
			c.write(wire)
			for _, s := range all {
				if s.noReply {
					continue
				}
				c.recv(s.corr, s.resp)
				if s.topic != "" {
					m := s.resp.(*kmsg.MetadataResponse)
					if len(m.Topics) == 0 || *m.Topics[0].Topic != s.topic || m.Brokers[0].NodeID != s.corr {
						t.Fatalf("reply to %d (%s) is %+v", s.corr, s.topic, m)
					}
				}
			}
			// The bg work overlaps: the whole batch takes about the longest bg wait plus the
			// serial sleeps (~0.2 s), far less than the bg waits added up (~0.9 s).
			t.Logf("50 pipelined replies in %v", time.Since(start))
			c.roundTrip(4, "after")
		})
	}
}

// TestResponseHeaderVersions checks header v0 for every ApiVersions version (flexible from v3)
// and for non-flexible responses, header v1 (one empty tag section) for flexible ones, for kmsg
// responses and for Body responses.
func TestResponseHeaderVersions(t *testing.T) {
	ts := startServer(t, Config{})
	c := dial(t, ts.addr)
	for v := int16(0); v <= 4; v++ {
		corr := c.send(kmsg.NewPtrApiVersionsRequest(), v)
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(v)
		c.recv(corr, resp) // never strips a tag byte for key 18, and checks the exact encoding
		if resp.ErrorCode != 0 || len(resp.ApiKeys) != 4 {
			t.Fatalf("ApiVersions v%d: %+v", v, resp)
		}
		if resp.ApiKeys[0].ApiKey != 0 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 11 {
			t.Fatalf("ApiVersions v%d advertises Produce as %+v, want 0-11", v, resp.ApiKeys[0])
		}
	}
	for v := int16(0); v <= 12; v++ {
		c.roundTrip(v, fmt.Sprintf("topic-v%d", v)) // recv checks the tag byte from v9
	}
	// Raw check of the two header forms on a flexible version.
	corr := c.send(kmsg.NewPtrApiVersionsRequest(), 3)
	b, err := c.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr || b[4] != 0 || b[5] != 0 || b[6] != 5 {
		t.Fatalf("ApiVersions v3 frame starts % x: want corr, error code 0, compact array of 4 (5)", b[:8])
	}
	corr = c.send(metadataReq("raw"), 9)
	if b, err = c.readFrame(); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr || b[4] != 0 {
		t.Fatalf("Metadata v9 frame starts % x: want corr then an empty tag section", b[:8])
	}
	if tm := int32(binary.BigEndian.Uint32(b[5:])); tm != 0 {
		t.Fatalf("Metadata v9: throttle %d after the tag byte, want 0", tm)
	}
	// Body responses: the header tag byte follows NewBody's flexible flag.
	ts.setBody(func(r *Request) *Body {
		body := NewBody(r.Version >= 12)
		body.SetBytes(append(body.Bytes(), "body"...))
		return body
	})
	for _, v := range []int16{11, 12} {
		corr := c.send(kmsg.NewPtrFetchRequest(), v)
		b, err := c.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		want := binary.BigEndian.AppendUint32(nil, uint32(corr))
		if v >= 12 {
			want = append(want, 0)
		}
		want = append(want, "body"...)
		if string(b) != string(want) {
			t.Fatalf("Fetch v%d body frame % x, want % x", v, b, want)
		}
	}
}

// TestApiVersionsUnsupportedVersion: an ApiVersions request above the served range gets a v0
// response with UNSUPPORTED_VERSION and ApiVersions' own range (KIP-511); the connection stays
// open and the client's retry at a served version succeeds.
func TestApiVersionsUnsupportedVersion(t *testing.T) {
	ts := startServer(t, Config{})
	c := dial(t, ts.addr)
	for _, v := range []int16{5, 127} {
		corr := c.send(kmsg.NewPtrApiVersionsRequest(), v)
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(0)
		c.recv(corr, resp)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("ApiVersions v%d: error %d, want UNSUPPORTED_VERSION (35)", v, resp.ErrorCode)
		}
		if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MinVersion != 0 || resp.ApiKeys[0].MaxVersion != 4 {
			t.Fatalf("ApiVersions v%d: keys %+v, want only ApiVersions 0-4", v, resp.ApiKeys)
		}
	}
	corr := c.send(kmsg.NewPtrApiVersionsRequest(), 4)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(4)
	c.recv(corr, resp)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != 4 {
		t.Fatalf("retry at v4: %+v", resp)
	}
}

// TestBodyWithFileSlices sends a Body of bytes and file slices (writev + sendfile), one slice
// large enough to fill the socket buffer (sendfile's EAGAIN path), one empty; then a slice longer
// than its file, which must close the connection before the frame completes.
func TestBodyWithFileSlices(t *testing.T) {
	ts := startServer(t, Config{})
	dir := t.TempDir()
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>13)
	}
	small := []byte("0123456789abcdef")
	fBig := writeTemp(t, filepath.Join(dir, "big.log"), big)
	fSmall := writeTemp(t, filepath.Join(dir, "small.log"), small)
	var short atomic.Bool
	ts.setBody(func(r *Request) *Body {
		body := NewBody(r.Version >= 12)
		body.SetBytes(append(body.Bytes(), "head|"...))
		body.AppendSlice(segment.Slice{File: fBig, Position: 100, Length: int64(len(big)) - 200})
		body.SetBytes(append(body.Bytes(), "|mid|"...))
		body.AppendSlice(segment.Slice{File: fSmall, Position: 0, Length: 0})
		length := int64(10)
		if short.Load() {
			length = int64(len(small)) + 1 // the file holds fewer bytes than promised
		}
		body.AppendSlice(segment.Slice{File: fSmall, Position: 3, Length: length})
		body.SetBytes(append(body.Bytes(), "|tail"...))
		return body
	})
	c := dial(t, ts.addr)
	for _, v := range []int16{4, 17} {
		corr := c.send(kmsg.NewPtrFetchRequest(), v)
		b, err := c.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		want := binary.BigEndian.AppendUint32(nil, uint32(corr))
		if v >= 12 {
			want = append(want, 0)
		}
		want = append(want, "head|"...)
		want = append(want, big[100:len(big)-100]...)
		want = append(want, "|mid|"...)
		want = append(want, small[3:13]...)
		want = append(want, "|tail"...)
		if string(b) != string(want) {
			t.Fatalf("Fetch v%d: %d bytes, want %d (first difference at %d)", v, len(b), len(want), firstDiff(b, want))
		}
	}
	short.Store(true)
	c.send(kmsg.NewPtrFetchRequest(), 12)
	_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(c.conn)
	if err != nil && !isClosed(err) {
		t.Fatal(err)
	}
	if len(rest) >= int(binary.BigEndian.Uint32(size[:])) {
		t.Fatalf("a frame with a short file slice was completed (%d bytes)", len(rest))
	}
	dial(t, ts.addr).roundTrip(1, "still-serving")
}

func writeTemp(t *testing.T, path string, data []byte) *os.File {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func firstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
