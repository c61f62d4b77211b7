package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/record"
)

// The Fetch encoder round trip: for every version 4-17, a response with several topics and
// partitions (records read from real partition logs as file slices, errors, empty record sets,
// read_committed and read_uncommitted, a topic without partitions) is encoded by fetchEncoder,
// sent by netio exactly as a Fetch response is (writev for the bytes, sendfile for the slices),
// read off a loopback socket, and then
//   - compared byte for byte with kmsg's own encoding of the same response (with empty record
//     sets as non-nil empty slices, so a null would differ),
//   - decoded with kmsg.FetchResponse and compared field by field,
//   - checked raw for the encoding of an empty record set: int32 0 before v12, uvarint 1 from v12.

// fePart is one partition of the fixture; log, when set, supplies records from offset.
type fePart struct {
	partition     int32
	errorCode     int16
	hw, lso, lss  int64 // high watermark, last stable offset, log start offset
	readCommitted bool
	log           *engine.Log
	offset        int64
	maxBytes      int64
}

type feTopic struct {
	name  string
	id    [16]byte
	parts []fePart
}

type feResponse struct {
	throttle  int32
	errorCode int16
	sessionID int32
	topics    []feTopic
}

// feOpenLog opens a partition log in dir and appends batches of records built with record.Build.
func feOpenLog(t *testing.T, dir, topic string, batches [][]record.Record) *engine.Log {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.FlushIntervalMessages = 1 << 40 // page-cache appends: no fsync needed here
	l, err := engine.OpenLog(engine.OpenOptions{Dir: filepath.Join(dir, topic+"-0"), Topic: topic, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i, recs := range batches {
		b := record.Build(nil, record.BuildOptions{BaseTimestamp: int64(1_700_000_000_000 + i), ProducerID: -1}, recs)
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// feRecords reads the bytes a partition's slice holds, as a fetch would send them.
func feRecords(t *testing.T, p fePart) []byte {
	t.Helper()
	if p.log == nil {
		return []byte{}
	}
	sl, err := p.log.Read(p.offset, p.maxBytes, engine.ReadUpToLogEnd)
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Release()
	b := make([]byte, sl.Length)
	if _, err := sl.File.ReadAt(b, sl.Position); err != nil {
		t.Fatal(err)
	}
	return b
}

// encode builds the response with fetchEncoder; it panics on a read error (it runs in a handler).
func (r *feResponse) encode(version int16) *netio.Body {
	enc := newFetchEncoder(version)
	enc.begin(r.throttle, r.errorCode, r.sessionID, len(r.topics))
	for _, rt := range r.topics {
		enc.topic(rt.name, rt.id, len(rt.parts))
		for _, p := range rt.parts {
			fp := fetchPartition{partition: p.partition, errorCode: p.errorCode, hw: p.hw, lso: p.lso, logStart: p.lss, readCommitted: p.readCommitted}
			if p.log != nil {
				sl, err := p.log.Read(p.offset, p.maxBytes, engine.ReadUpToLogEnd)
				if err != nil {
					panic(err)
				}
				fp.slice = sl
			}
			enc.partition(&fp)
		}
		enc.endTopic()
	}
	enc.end()
	return enc.body
}

// expected is the same response built with kmsg, the record bytes read from the logs.
func (r *feResponse) expected(t *testing.T, version int16) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(version)
	resp.ThrottleMillis = r.throttle
	if version >= 7 {
		resp.ErrorCode, resp.SessionID = r.errorCode, r.sessionID
	}
	resp.Topics = []kmsg.FetchResponseTopic{}
	for _, rt := range r.topics {
		et := kmsg.NewFetchResponseTopic()
		if version >= 13 {
			et.TopicID = rt.id
		} else {
			et.Topic = rt.name
		}
		et.Partitions = []kmsg.FetchResponseTopicPartition{}
		for _, p := range rt.parts {
			ep := kmsg.NewFetchResponseTopicPartition()
			ep.Partition, ep.ErrorCode, ep.HighWatermark, ep.LastStableOffset = p.partition, p.errorCode, p.hw, p.lso
			if version >= 5 {
				ep.LogStartOffset = p.lss
			}
			if p.readCommitted {
				ep.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			ep.PreferredReadReplica = -1
			ep.RecordBatches = feRecords(t, p)
			et.Partitions = append(et.Partitions, ep)
		}
		resp.Topics = append(resp.Topics, et)
	}
	return resp
}

// feServe serves Fetch through netio with a handler that encodes resp at the request's version.
func feServe(t *testing.T, resp func() *feResponse) string {
	t.Helper()
	reg := netio.NewRegistry()
	reg.Register(netio.API{Key: 1, MinVersion: 4, MaxVersion: 17, Handle: func(r *netio.Request) netio.Reply {
		return netio.Reply{Body: resp().encode(r.Version)}
	}})
	srv := netio.NewServer(netio.Config{}, reg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(netio.Listener{Name: "PLAINTEXT", Listener: ln})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if n := srv.HandlerPanics(); n != 0 {
			t.Errorf("%d handler panics", n)
		}
	})
	return ln.Addr().String()
}

// feFetch sends a Fetch request at version and returns the response body (after the header).
func feFetch(t *testing.T, conn net.Conn, corr int32, version int16) []byte {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, corr)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("v%d: %v", version, err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, frame); err != nil {
		t.Fatalf("v%d: %v", version, err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		t.Fatalf("v%d: correlation id %d, want %d", version, got, corr)
	}
	body := frame[4:]
	if version >= 12 { // response header v1: an empty tag section
		if body[0] != 0 {
			t.Fatalf("v%d: response header tag byte %#x", version, body[0])
		}
		body = body[1:]
	}
	return body
}

func TestFetchEncoderRoundTrip(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // a 256 KiB value
	alpha := feOpenLog(t, dir, "alpha", [][]record.Record{
		{{Key: []byte("k0"), Value: []byte("v0")}, {Key: nil, Value: []byte("v1"), TimestampDelta: 3}},
		{{Key: []byte("k2"), Value: big}},
		{{Value: []byte("v3")}, {Value: []byte("v4")}, {Value: nil}},
	})
	gamma := feOpenLog(t, dir, "gamma", [][]record.Record{{{Key: []byte("g"), Value: []byte("gamma")}}})
	alphaID := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	gammaID := [16]byte{0xff, 0xee, 0xdd, 0xcc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}
	full := &feResponse{throttle: 17, errorCode: 0, sessionID: 0, topics: []feTopic{
		{name: "alpha", id: alphaID, parts: []fePart{
			{partition: 0, hw: 6, lso: 6, lss: 0, log: alpha, offset: 0, maxBytes: 1 << 20}, // every batch
			{partition: 1, errorCode: kerr.OffsetOutOfRange.Code, hw: 6, lso: 6, lss: 0},
			{partition: 2, hw: 6, lso: 6, lss: 2},                                                          // empty: at the high watermark
			{partition: 3, hw: 6, lso: 6, lss: 0, readCommitted: true, log: alpha, offset: 4, maxBytes: 1}, // inside batch 3: the whole batch
			{partition: 4, hw: 6, lso: 6, lss: 0, log: alpha, offset: 1, maxBytes: 1},                      // inside batch 1: the whole batch
		}},
		{name: "beta", id: [16]byte{9}, parts: nil},
		{name: "gamma", id: gammaID, parts: []fePart{
			{partition: 0, hw: 1, lso: 1, lss: 0, readCommitted: true, log: gamma, maxBytes: 1 << 20},
			{partition: 9, errorCode: kerr.UnknownTopicOrPartition.Code, hw: -1, lso: -1, lss: -1},
			{partition: 1, hw: 0, lso: 0, lss: 0, readCommitted: true}, // empty, and last: checked raw
		}},
	}}
	sessionError := &feResponse{errorCode: kerr.FetchSessionIDNotFound.Code, sessionID: 0}
	onlyEmpty := &feResponse{topics: []feTopic{{name: "e", id: [16]byte{1}, parts: []fePart{{partition: 0, hw: 0, lso: 0, lss: 0}}}}}

	// Sanity check of the fixture: partition 0 holds the three batches, offsets assigned.
	if recs := feRecords(t, full.topics[0].parts[0]); len(recs) < len(big) {
		t.Fatalf("alpha holds %d bytes", len(recs))
	} else {
		var next int64
		for pos := 0; pos < len(recs); {
			h, err := record.ParseHeader(recs[pos:])
			if err != nil || h.BaseOffset != next {
				t.Fatalf("batch at %d: %+v %v, want base offset %d", pos, h, err, next)
			}
			next = h.NextOffset()
			pos += int(h.Size())
		}
		if next != 6 {
			t.Fatalf("alpha ends at %d, want 6", next)
		}
	}

	cases := []struct {
		name string
		resp *feResponse
	}{{"full", full}, {"session error", sessionError}, {"only an empty partition", onlyEmpty}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := feServe(t, func() *feResponse { return tc.resp })
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for v := int16(4); v <= 17; v++ {
				body := feFetch(t, conn, int32(v), v)
				want := tc.resp.expected(t, v)
				if wantBytes := want.AppendTo(nil); !bytes.Equal(body, wantBytes) {
					t.Fatalf("v%d: %d bytes differ from kmsg's encoding (%d bytes) from byte %d", v, len(body), len(wantBytes), feFirstDiff(body, wantBytes))
				}
				got := kmsg.NewPtrFetchResponse()
				got.SetVersion(v)
				if err := got.ReadFrom(body); err != nil {
					t.Fatalf("v%d: decode: %v", v, err)
				}
				feCompare(t, v, got, want)
				if parts := tc.resp.lastPartition(); parts != nil && parts.log == nil {
					feCheckEmptyTail(t, v, body)
				}
			}
		})
	}
}

func (r *feResponse) lastPartition() *fePart {
	if len(r.topics) == 0 {
		return nil
	}
	last := r.topics[len(r.topics)-1]
	if len(last.parts) == 0 {
		return nil
	}
	return &last.parts[len(last.parts)-1]
}

// feCheckEmptyTail checks the raw encoding of an empty record set ending the response: int32 0
// (a null would be ff ff ff ff) after the preferred read replica (v11) or the aborted
// transactions; from v12 uvarint 1 (a null would be 0), then three empty tag sections
// (partition, topic, response).
func feCheckEmptyTail(t *testing.T, v int16, body []byte) {
	t.Helper()
	var want []byte
	switch {
	case v >= 12:
		want = []byte{0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0} // preferred read replica -1, records, tags
	case v == 11:
		want = []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}
	default:
		want = []byte{0, 0, 0, 0} // records length after the aborted transactions
	}
	if tail := body[len(body)-len(want):]; !bytes.Equal(tail, want) {
		t.Fatalf("v%d: an empty record set ends the response as % x, want % x", v, tail, want)
	}
}

// feCompare compares every field a version carries.
func feCompare(t *testing.T, v int16, got, want *kmsg.FetchResponse) {
	t.Helper()
	fail := func(what string, g, w any) {
		t.Helper()
		t.Fatalf("v%d: %s = %v, want %v", v, what, g, w)
	}
	if got.ThrottleMillis != want.ThrottleMillis {
		fail("throttle", got.ThrottleMillis, want.ThrottleMillis)
	}
	if v >= 7 && (got.ErrorCode != want.ErrorCode || got.SessionID != want.SessionID) {
		fail("error code, session id", [2]any{got.ErrorCode, got.SessionID}, [2]any{want.ErrorCode, want.SessionID})
	}
	if len(got.Topics) != len(want.Topics) {
		fail("topics", len(got.Topics), len(want.Topics))
	}
	if v >= 16 && len(got.Brokers) != 0 {
		fail("node endpoints", got.Brokers, nil)
	}
	for i := range want.Topics {
		gt, wt := &got.Topics[i], &want.Topics[i]
		if v < 13 && gt.Topic != wt.Topic {
			fail(fmt.Sprintf("topic %d name", i), gt.Topic, wt.Topic)
		}
		if v >= 13 && gt.TopicID != wt.TopicID {
			fail(fmt.Sprintf("topic %d id", i), gt.TopicID, wt.TopicID)
		}
		if len(gt.Partitions) != len(wt.Partitions) {
			fail(fmt.Sprintf("topic %d partitions", i), len(gt.Partitions), len(wt.Partitions))
		}
		for j := range wt.Partitions {
			gp, wp := &gt.Partitions[j], &wt.Partitions[j]
			where := fmt.Sprintf("topic %d partition %d ", i, j)
			if gp.Partition != wp.Partition || gp.ErrorCode != wp.ErrorCode || gp.HighWatermark != wp.HighWatermark || gp.LastStableOffset != wp.LastStableOffset {
				fail(where+"(partition, error, hw, lso)", [4]any{gp.Partition, gp.ErrorCode, gp.HighWatermark, gp.LastStableOffset}, [4]any{wp.Partition, wp.ErrorCode, wp.HighWatermark, wp.LastStableOffset})
			}
			if v >= 5 && gp.LogStartOffset != wp.LogStartOffset {
				fail(where+"log start offset", gp.LogStartOffset, wp.LogStartOffset)
			}
			if (gp.AbortedTransactions == nil) != (wp.AbortedTransactions == nil) || len(gp.AbortedTransactions) != 0 {
				fail(where+"aborted transactions (nil = null)", gp.AbortedTransactions == nil, wp.AbortedTransactions == nil)
			}
			if v >= 11 && gp.PreferredReadReplica != -1 {
				fail(where+"preferred read replica", gp.PreferredReadReplica, -1)
			}
			if gp.RecordBatches == nil {
				fail(where+"record set", "null", "non-null")
			}
			if !bytes.Equal(gp.RecordBatches, wp.RecordBatches) {
				fail(where+"record bytes", len(gp.RecordBatches), len(wp.RecordBatches))
			}
			if v >= 12 && (gp.DivergingEpoch.Epoch != -1 || gp.CurrentLeader.LeaderID != -1 || gp.SnapshotID.Epoch != -1) {
				fail(where+"tagged fields", [3]any{gp.DivergingEpoch, gp.CurrentLeader, gp.SnapshotID}, "defaults")
			}
		}
	}
}

func feFirstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
