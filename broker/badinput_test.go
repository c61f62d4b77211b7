package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
)

// Bad input against a real broker: frames it must refuse by closing the connection (Kafka never
// answers a request it could not parse), and requests it must answer with per-topic or
// per-partition error codes while serving the rest of the same request. After each, a new
// connection is served normally and no handler has panicked.

// wireConn speaks raw Kafka framing to a broker.
type wireConn struct {
	t    testing.TB
	conn *net.TCPConn
	corr int32
}

func dialWire(t testing.TB, addr string) *wireConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &wireConn{t: t, conn: c.(*net.TCPConn)}
}

func (w *wireConn) write(b []byte) error {
	_ = w.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := w.conn.Write(b)
	return err
}

// send writes req at version and returns its correlation id.
func (w *wireConn) send(req kmsg.Request, version int16) int32 {
	w.t.Helper()
	req.SetVersion(version)
	w.corr++
	if err := w.write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("wire")).AppendRequest(nil, req, w.corr)); err != nil {
		w.t.Fatalf("write %s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return w.corr
}

// readFrame reads one response frame (without its size) within timeout.
func (w *wireConn) readFrame(timeout time.Duration) ([]byte, error) {
	_ = w.conn.SetReadDeadline(time.Now().Add(timeout))
	var size [4]byte
	if _, err := io.ReadFull(w.conn, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 128<<20 {
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(w.conn, b)
	return b, err
}

// recv reads the response to corr into resp (of the request's version) and returns it.
func (w *wireConn) recv(corr int32, resp kmsg.Response) {
	w.t.Helper()
	b, err := w.readFrame(10 * time.Second)
	if err != nil {
		w.t.Fatalf("read %s response: %v", kmsg.NameForKey(resp.Key()), err)
	}
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		w.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	body := b[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		w.t.Fatalf("decode %s v%d: %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
}

// roundTrip sends req at version and decodes its response.
func wireRoundTrip[R kmsg.Response](w *wireConn, req kmsg.Request, version int16) R {
	w.t.Helper()
	corr := w.send(req, version)
	resp := req.ResponseKind().(R)
	resp.SetVersion(version)
	w.recv(corr, resp)
	return resp
}

// expectClosed checks the broker closes the connection without sending a byte.
func (w *wireConn) expectClosed() {
	w.t.Helper()
	_ = w.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var buf [64]byte
	n, err := w.conn.Read(buf[:])
	if n > 0 {
		w.t.Fatalf("expected the connection to close without a response, got % x", buf[:n])
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		w.t.Fatalf("expected the connection to close, got %v", err)
	}
}

// wireServes checks a new connection is served: ApiVersions, then Metadata for every topic.
func wireServes(t testing.TB, b *Broker) {
	t.Helper()
	w := dialWire(t, b.Addr())
	av := wireRoundTrip[*kmsg.ApiVersionsResponse](w, kmsg.NewPtrApiVersionsRequest(), 3)
	if av.ErrorCode != 0 || len(av.ApiKeys) == 0 {
		t.Fatalf("ApiVersions after bad input: %+v", av)
	}
	md := wireRoundTrip[*kmsg.MetadataResponse](w, kmsg.NewPtrMetadataRequest(), 12)
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != b.nodeID {
		t.Fatalf("Metadata after bad input: %+v", md)
	}
	if n := b.server.HandlerPanics(); n != 0 {
		t.Fatalf("%d handler panics", n)
	}
}

func wireHeader(key, version int16, corr int32, clientIDLen int16, clientID string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(clientIDLen))
	return append(b, clientID...)
}

func wireFrame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// wireProduce builds a Produce request with acks=-1; parts maps "topic/partition" to its records.
func wireProduce(parts ...wirePart) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	for _, p := range parts {
		i := 0
		for i < len(req.Topics) && req.Topics[i].Topic != p.topic {
			i++
		}
		if i == len(req.Topics) {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = p.topic, p.id
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p.partition, p.records
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

type wirePart struct {
	topic     string
	id        [16]byte
	partition int32
	records   []byte
}

func wireBatch(values ...string) []byte {
	var recs []record.Record
	for _, v := range values {
		recs = append(recs, record.Record{Value: []byte(v)})
	}
	return record.Build(nil, record.BuildOptions{ProducerID: -1}, recs)
}

func TestBadFramesCloseConnection(t *testing.T) {
	const maxRequest = 64 << 10
	b := startBroker(t, map[string]string{"socket.request.max.bytes": fmt.Sprint(maxRequest)})
	wireCreateTopics(t, b, 7, wireTopic("orders", 2))

	produce := wireProduce(wirePart{topic: "orders", records: wireBatch("a", "b")})
	produce.SetVersion(9)
	fullProduce := kmsg.NewRequestFormatter().AppendRequest(nil, produce, 1)[4:]
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(11)
	fullFetch := kmsg.NewRequestFormatter().AppendRequest(nil, fetch, 1)[4:]

	cases := []struct {
		name  string
		frame []byte
	}{
		{"unknown API key", wireFrame(wireHeader(999, 0, 1, -1, ""))},
		{"API key kmsg knows but weir does not serve", wireFrame(wireHeader(57, 0, 1, -1, ""))},
		{"Metadata above its range", wireFrame(wireHeader(3, 14, 1, -1, ""))},
		{"Fetch v3, removed in Kafka 4", wireFrame(wireHeader(1, 3, 1, -1, ""))},
		{"Produce v2, advertised but refused", wireFrame(wireHeader(0, 2, 1, -1, ""))},
		{"negative size", binary.BigEndian.AppendUint32(nil, 0xfffffffe)},
		{"zero size", binary.BigEndian.AppendUint32(nil, 0)},
		{"size above socket.request.max.bytes", binary.BigEndian.AppendUint32(nil, maxRequest+1)},
		{"client id length beyond the frame", wireFrame(wireHeader(3, 4, 1, 1000, "abc"))},
		{"header shorter than its fixed fields", wireFrame([]byte{0, 18, 0})},
		{"Produce body cut short", wireFrame(fullProduce[:len(fullProduce)-20])},
		{"Produce records length beyond the frame", wireFrame(fullProduce[:len(fullProduce)-1])},
		{"Fetch body cut short", wireFrame(fullFetch[:len(fullFetch)-3])},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := dialWire(t, b.Addr())
			wireRoundTrip[*kmsg.ApiVersionsResponse](w, kmsg.NewPtrApiVersionsRequest(), 0)
			if err := w.write(tc.frame); err != nil {
				t.Fatal(err)
			}
			w.expectClosed()
			wireServes(t, b)
		})
	}
	t.Run("truncated frame then EOF", func(t *testing.T) {
		w := dialWire(t, b.Addr())
		full := kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrMetadataRequest(), 1)
		if err := w.write(full[:len(full)-2]); err != nil {
			t.Fatal(err)
		}
		if err := w.conn.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		w.expectClosed()
		wireServes(t, b)
	})
	t.Run("unsupported ApiVersions version", func(t *testing.T) {
		w := dialWire(t, b.Addr())
		corr := w.send(kmsg.NewPtrApiVersionsRequest(), 5) // above weir's 0-4
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(0)
		w.recv(corr, resp)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 {
			t.Fatalf("ApiVersions v5: %+v", resp)
		}
		wireServes(t, b)
	})
}

func wireTopic(name string, partitions int32, configs ...string) kmsg.CreateTopicsRequestTopic {
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
		rt.Configs = append(rt.Configs, c)
	}
	return rt
}

// wireCreateTopics sends one CreateTopics request and returns each topic's error code by name.
func wireCreateTopics(t *testing.T, b *Broker, version int16, topics ...kmsg.CreateTopicsRequestTopic) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	req.Topics = topics
	resp := wireRoundTrip[*kmsg.CreateTopicsResponse](dialWire(t, b.Addr()), req, version)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.ErrorCode
	}
	if len(codes) != len(topics) {
		t.Fatalf("CreateTopics v%d answered %d topics of %d", version, len(codes), len(topics))
	}
	return codes
}

var wireBadNames = []string{"", ".", "..", "has space", "slash/name", "colon:name", "ünïcödé", strings.Repeat("x", 250)}

func TestCreateTopicsValidation(t *testing.T) {
	b := startBroker(t, nil)
	for v := int16(2); v <= 7; v++ {
		topics := []kmsg.CreateTopicsRequestTopic{wireTopic(fmt.Sprintf("good-v%d", v), 2)}
		for _, name := range wireBadNames {
			topics = append(topics, wireTopic(name, 1))
		}
		topics = append(topics,
			wireTopic(fmt.Sprintf("zero-partitions-v%d", v), 0),
			wireTopic(fmt.Sprintf("negative-partitions-v%d", v), -7),
			wireTopic(fmt.Sprintf("too-many-partitions-v%d", v), 1<<30),
			wireTopic(fmt.Sprintf("max-name-ok-v%d-", v)+strings.Repeat("y", 249-len("max-name-ok-vN-")), 1), // 249 characters
		)
		codes := wireCreateTopics(t, b, v, topics...)
		for name, code := range codes {
			var want int16
			switch {
			case strings.HasPrefix(name, "good-") || strings.HasPrefix(name, "max-name-ok-"):
				want = 0
			case strings.Contains(name, "partitions"):
				want = kerr.InvalidPartitions.Code
			default:
				want = kerr.InvalidTopicException.Code
			}
			if code != want {
				t.Errorf("CreateTopics v%d %q: error %d (%v), want %d", v, name, code, kerr.ErrorForCode(code), want)
			}
		}
	}
	wireServes(t, b)
	for _, bad := range wireBadNames {
		if _, ok := b.topics.get(bad); ok {
			t.Errorf("topic %q was created", bad)
		}
	}
}

func TestMetadataTopicValidation(t *testing.T) {
	b := startBroker(t, nil)
	wireCreateTopics(t, b, 7, wireTopic("exists", 3))
	w := dialWire(t, b.Addr())
	for v := int16(1); v <= 12; v++ {
		for _, allowAuto := range []bool{false, true} {
			if v < 4 && !allowAuto {
				continue // auto creation is implied before v4
			}
			req := kmsg.NewPtrMetadataRequest()
			req.AllowAutoTopicCreation = allowAuto
			names := append([]string{"exists", fmt.Sprintf("unknown-v%d", v)}, wireBadNames...)
			for _, name := range names {
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr(name)
				req.Topics = append(req.Topics, rt)
			}
			resp := wireRoundTrip[*kmsg.MetadataResponse](w, req, v)
			if len(resp.Topics) != len(names) {
				t.Fatalf("Metadata v%d: %d topics, want %d", v, len(resp.Topics), len(names))
			}
			for _, mt := range resp.Topics {
				name := *mt.Topic
				want := kerr.InvalidTopicException.Code
				switch {
				case name == "exists":
					want = 0
					if len(mt.Partitions) != 3 {
						t.Errorf("Metadata v%d: exists has %d partitions", v, len(mt.Partitions))
					}
				case strings.HasPrefix(name, "unknown-"):
					want = kerr.UnknownTopicOrPartition.Code
					if allowAuto {
						want = 0 // auto.create.topics.enable defaults to true
					}
				}
				if mt.ErrorCode != want {
					t.Errorf("Metadata v%d allowAuto=%v %q: error %d (%v), want %d", v, allowAuto, name, mt.ErrorCode, kerr.ErrorForCode(mt.ErrorCode), want)
				}
			}
		}
	}
	wireServes(t, b)
}

// TestMetadataDuplicateTopicsAnsweredOnce: a Metadata request naming a 100-partition topic
// 20,000 times (and one id and an unknown name many times) gets one entry per topic, as from
// Kafka, not 20,000 x 100 partition entries: about 300 KiB of request would otherwise build a
// response of hundreds of MiB (a 5 MiB one, gigabytes).
func TestMetadataDuplicateTopicsAnsweredOnce(t *testing.T) {
	b := startBroker(t, nil)
	wireCreateTopics(t, b, 7, wireTopic("wide", 100))
	w := dialWire(t, b.Addr())
	req := kmsg.NewPtrMetadataRequest()
	for range 20000 {
		for _, name := range []string{"wide", "missing"} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
	}
	resp := wireRoundTrip[*kmsg.MetadataResponse](w, req, 12)
	if len(resp.Topics) != 2 {
		t.Fatalf("Metadata naming 2 topics 20000 times each: %d topic entries, want 2", len(resp.Topics))
	}
	var id [16]byte
	for _, mt := range resp.Topics {
		switch *mt.Topic {
		case "wide":
			if mt.ErrorCode != 0 || len(mt.Partitions) != 100 {
				t.Fatalf("wide: error %d, %d partitions", mt.ErrorCode, len(mt.Partitions))
			}
			id = mt.TopicID
		case "missing":
			if mt.ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("missing: error %d", mt.ErrorCode)
			}
		}
	}
	// By id (v12): the same.
	req = kmsg.NewPtrMetadataRequest()
	for range 20000 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		req.Topics = append(req.Topics, rt)
	}
	resp = wireRoundTrip[*kmsg.MetadataResponse](w, req, 12)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 100 {
		t.Fatalf("Metadata naming one id 20000 times: %d topic entries", len(resp.Topics))
	}
	wireServes(t, b)
}

// TestProduceErrorsPerPartition sends, in one request, valid batches and batches that must be
// refused; each refused partition gets its own error and the others are appended.
func TestProduceErrorsPerPartition(t *testing.T) {
	b := startBroker(t, map[string]string{"message.max.bytes": "4096"})
	codes := wireCreateTopics(t, b, 7, wireTopic("ok", 4), wireTopic("small", 2, "max.message.bytes", "1024"))
	for name, code := range codes {
		if code != 0 {
			t.Fatalf("create %s: %v", name, kerr.ErrorForCode(code))
		}
	}
	badCRC := wireBatch("corrupt me")
	badCRC[len(badCRC)-1] ^= 0xff // a record byte: covered by the CRC
	w := dialWire(t, b.Addr())
	var wantOffset [4]int64
	for _, v := range []int16{3, 7, 9, 12} {
		req := wireProduce(
			wirePart{topic: "ok", partition: 0, records: wireBatch("a", "b")},
			wirePart{topic: "ok", partition: 1, records: badCRC},
			wirePart{topic: "ok", partition: 2, records: wireBatch(strings.Repeat("x", 5000))}, // > message.max.bytes
			wirePart{topic: "ok", partition: 3, records: wireBatch("c")},
			wirePart{topic: "ok", partition: 4, records: wireBatch("no such partition")},
			wirePart{topic: "small", partition: 0, records: wireBatch(strings.Repeat("y", 2000))}, // > the topic's max.message.bytes
			wirePart{topic: "small", partition: 1, records: wireBatch("fits")},
			wirePart{topic: "missing", partition: 0, records: wireBatch("no such topic")},
			wirePart{topic: "ok", partition: -1, records: wireBatch("negative partition")},
		)
		resp := wireRoundTrip[*kmsg.ProduceResponse](w, req, v)
		want := map[string]int16{
			"ok/0": 0, "ok/1": kerr.CorruptMessage.Code, "ok/2": kerr.MessageTooLarge.Code, "ok/3": 0,
			"ok/4": kerr.UnknownTopicOrPartition.Code, "ok/-1": kerr.UnknownTopicOrPartition.Code,
			"small/0": kerr.MessageTooLarge.Code, "small/1": 0, "missing/0": kerr.UnknownTopicOrPartition.Code,
		}
		got := 0
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				got++
				key := fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)
				if rp.ErrorCode != want[key] {
					t.Errorf("Produce v%d %s: error %d (%v), want %d", v, key, rp.ErrorCode, kerr.ErrorForCode(rp.ErrorCode), want[key])
				}
				switch key {
				case "ok/0", "ok/3":
					p := rp.Partition
					if rp.BaseOffset != wantOffset[p] {
						t.Errorf("Produce v%d %s: base offset %d, want %d", v, key, rp.BaseOffset, wantOffset[p])
					}
					wantOffset[p] += map[int32]int64{0: 2, 3: 1}[p]
				case "small/1":
				default:
					if rp.BaseOffset != -1 {
						t.Errorf("Produce v%d %s: refused batch has base offset %d", v, key, rp.BaseOffset)
					}
				}
			}
		}
		if got != len(want) {
			t.Errorf("Produce v%d answered %d partitions, want %d", v, got, len(want))
		}
	}
	// Nothing refused was stored: the refused partitions are still empty.
	for _, tp := range []struct {
		topic string
		p     int32
		end   int64
	}{{"ok", 0, 8}, {"ok", 1, 0}, {"ok", 2, 0}, {"ok", 3, 4}, {"small", 0, 0}, {"small", 1, 4}} {
		l, ok := b.logs.Log(engine.TopicPartition{Topic: tp.topic, Partition: tp.p})
		if !ok {
			t.Fatalf("no log %s-%d", tp.topic, tp.p)
		}
		if end := l.LogEndOffset(); end != tp.end {
			t.Errorf("%s-%d ends at %d, want %d", tp.topic, tp.p, end, tp.end)
		}
	}
	wireServes(t, b)
}

// TestFetchErrorsAnswerAtOnce: a long-poll Fetch where a partition has an error (an offset out
// of range, an unknown partition) is answered at once, as Kafka does, not after max_wait_ms:
// the client needs the error to reset its offset.
func TestFetchErrorsAnswerAtOnce(t *testing.T) {
	b := startBroker(t, nil)
	wireCreateTopics(t, b, 7, wireTopic("f", 2))
	w := dialWire(t, b.Addr())
	resp := wireRoundTrip[*kmsg.ProduceResponse](w, wireProduce(wirePart{topic: "f", partition: 0, records: wireBatch("one", "two")}), 9)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(c))
	}
	for _, tc := range []struct {
		name      string
		partition int32
		offset    int64
		want      *kerr.Error
	}{
		{"offset past the log end", 0, 100, kerr.OffsetOutOfRange},
		{"negative offset", 0, -5, kerr.OffsetOutOfRange},
		{"unknown partition", 7, 0, kerr.UnknownTopicOrPartition},
	} {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 5000, 1<<20, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "f"
		for _, p := range []struct {
			partition int32
			offset    int64
		}{{1, 0}, {tc.partition, tc.offset}} { // partition 1 is empty: nothing to return yet
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.partition, p.offset, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		fr := wireRoundTrip[*kmsg.FetchResponse](w, req, 11)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: answered after %v (max_wait_ms 5000): an error must answer at once", tc.name, took)
		}
		if c := fr.Topics[0].Partitions[1].ErrorCode; c != tc.want.Code {
			t.Errorf("%s: error %v, want %v", tc.name, kerr.ErrorForCode(c), tc.want)
		}
	}
	wireServes(t, b)
}

// TestConnectionLimitsFromConfig: max.connections and connections.max.idle.ms reach the
// transport: a connection beyond the limit waits (the listener stops accepting, as Kafka's
// does) until another closes, an idle one closes after the timeout.
func TestConnectionLimitsFromConfig(t *testing.T) {
	b := startBroker(t, map[string]string{"max.connections": "2", "connections.max.idle.ms": "400"})
	first := dialWire(t, b.Addr())
	start := time.Now() // the idle timer starts after this request is answered
	wireRoundTrip[*kmsg.ApiVersionsResponse](first, kmsg.NewPtrApiVersionsRequest(), 3)
	second := dialWire(t, b.Addr())
	wireRoundTrip[*kmsg.ApiVersionsResponse](second, kmsg.NewPtrApiVersionsRequest(), 3)
	over := dialWire(t, b.Addr())
	overCorr := over.send(kmsg.NewPtrApiVersionsRequest(), 3)
	first.expectClosed() // idle since its request
	if idle := time.Since(start); idle < 400*time.Millisecond {
		t.Fatalf("idle connection closed after %v, before connections.max.idle.ms", idle)
	}
	second.expectClosed()
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(3)
	over.recv(overCorr, resp) // accepted once the others closed
	over.expectClosed()       // idle in turn
	for deadline := time.Now().Add(5 * time.Second); b.server.ConnectionCount() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still counted", b.server.ConnectionCount())
		}
	}
	wireServes(t, b)
}
