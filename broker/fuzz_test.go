package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/controller"
)

// FuzzDispatch feeds arbitrary bytes, as the body of one size-prefixed frame, to a real broker
// over a loopback connection, followed by an ApiVersions request (the sentinel). Invariants:
//   - no handler panics (netio recovers them and closes the connection; Server.HandlerPanics
//     counts them, and any count is a failure); a panic outside a handler crashes the process,
//     which the fuzzer reports too;
//   - the broker keeps serving: the sentinel is answered after the frame's own response (if the
//     frame was served), or the connection is closed without a partial response and a new
//     connection gets ApiVersions answered;
//   - a request that cannot park (not in fuzzMayPark) is answered or refused within
//     fuzzAnswerWait: no hang;
//   - a request creating more than fuzzMaxPartitions partitions is skipped (legal, just slow).
//
// The broker holds one topic, "fuzz" (2 partitions, a fixed id so id-based versions find it,
// records in partition 0). An input that changes broker state (creates or deletes topics,
// alters configs, adds partitions) gets a fresh broker before the next one, so inputs stay
// independent and the disk stays small.
//
// The seed corpus (testdata/fuzz/FuzzDispatch) holds real requests of every API the broker
// serves, encoded with kmsg at several versions; regenerate it with
//
//	go test ./broker -run TestFuzzDispatchSeeds -update-fuzz-dispatch-seeds
//
// APIs registered after the corpus was written get their seeds from fuzzDispatchSeeds at run time.

var updateFuzzDispatchSeeds = flag.Bool("update-fuzz-dispatch-seeds", false, "rewrite broker/testdata/fuzz/FuzzDispatch")

const (
	fuzzTopic        = "fuzz"
	fuzzSentinelCorr = 0x5e471e1
	// fuzzParkedWait bounds the wait for the answers to a request that may legitimately park
	// (fuzzMayPark): the connection is then closed, which ends the long poll.
	fuzzParkedWait = 50 * time.Millisecond
	// fuzzAnswerWait bounds the wait for the answers to any other request.
	fuzzAnswerWait = 10 * time.Second
)

// fuzzSentinel is an ApiVersions v0 request frame (AppendRequest writes the size at dst[0]: it
// must start a buffer of its own).
var fuzzSentinel = kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), fuzzSentinelCorr)

// fuzzMayPark holds the API keys whose answer may legitimately wait: Fetch (max_wait_ms),
// JoinGroup and SyncGroup (the rest of the group).
var fuzzMayPark = map[int16]bool{1: true, 11: true, 14: true}

var fuzzTopicID = [16]byte{0xf0, 0x22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01}

// fuzzBroker is the broker under fuzz, replaced when an input dirtied it.
type fuzzBroker struct {
	b   *Broker
	dir string
}

func (fb *fuzzBroker) start(tb testing.TB) {
	tb.Helper()
	dir, err := os.MkdirTemp("", "weir-fuzz-dispatch-")
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := NewConfig(map[string]string{
		"listeners":                   "PLAINTEXT://127.0.0.1:0",
		"log.dirs":                    dir,
		"log.flush.interval.messages": "9223372036854775807", // page-cache acks: no fsync per input
		"socket.request.max.bytes":    strconv.Itoa(1 << 20),
		"num.partitions":              "1",
	})
	if err != nil {
		tb.Fatal(err)
	}
	b, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := b.ctl.CreateTopic(context.Background(), controller.CreateTopicRequest{Name: fuzzTopic, ID: fuzzTopicID,
		Partitions: 2, ReplicationFactor: 1, Assignment: [][]int32{{b.nodeID}, {b.nodeID}}}); err != nil {
		tb.Fatal(err)
	}
	b.rm.reconcile()
	if err := b.Start(); err != nil {
		tb.Fatal(err)
	}
	fb.b, fb.dir = b, dir
	w := dialWire(tb, b.Addr())
	for i := 0; i < 3; i++ {
		req := wireProduce(wirePart{topic: fuzzTopic, partition: 0, records: wireBatch("a", "bb", "ccc")})
		if resp := wireRoundTrip[*kmsg.ProduceResponse](w, req, 9); resp.Topics[0].Partitions[0].ErrorCode != 0 {
			tb.Fatalf("seed produce: error %d", resp.Topics[0].Partitions[0].ErrorCode)
		}
	}
	w.conn.Close()
}

func (fb *fuzzBroker) stop() {
	if fb.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = fb.b.Shutdown(ctx)
	os.RemoveAll(fb.dir)
	fb.b = nil
}

// dirty reports whether an input changed the broker beyond appending records.
func (fb *fuzzBroker) dirty() bool {
	topics := fb.b.topics.all()
	if len(topics) != 1 || topics[0].Name != fuzzTopic || topics[0].ID != fuzzTopicID || topics[0].Partitions != 2 || len(topics[0].Configs) != 0 {
		return true
	}
	fb.b.cfg.mu.RLock()
	defer fb.b.cfg.mu.RUnlock()
	return len(fb.b.cfg.dynamic) != 0
}

func FuzzDispatch(f *testing.F) {
	stored := map[string]bool{}
	if entries, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzDispatch")); err == nil {
		for _, e := range entries {
			stored[e.Name()] = true
		}
	}
	for _, s := range fuzzDispatchSeeds() {
		if !stored[s.name] {
			f.Add(s.frame)
		}
	}
	fb := &fuzzBroker{}
	fb.start(f)
	f.Cleanup(fb.stop)
	f.Fuzz(func(t *testing.T, body []byte) {
		if fuzzTooExpensive(body) {
			t.Skip("creates too many partitions for a fuzz iteration")
		}
		if fb.dirty() {
			fb.stop()
			fb.start(t)
		}
		srv := fb.b.server
		panicsBefore := srv.HandlerPanics()
		w := dialWire(t, fb.b.Addr())
		frame := binary.BigEndian.AppendUint32(make([]byte, 0, len(body)+64), uint32(len(body)))
		frame = append(frame, body...)
		frame = append(frame, fuzzSentinel...)
		_ = w.write(frame) // the broker may close before reading it all
		// A long poll may park; anything else must be answered (or refused by closing the
		// connection) promptly.
		wait := fuzzAnswerWait
		if len(body) >= 2 && fuzzMayPark[int16(binary.BigEndian.Uint16(body))] {
			wait = fuzzParkedWait
		}
		deadline := time.Now().Add(wait)
		served := false
		for !served {
			resp, err := w.readFrame(time.Until(deadline))
			if errors.Is(err, os.ErrDeadlineExceeded) && wait == fuzzParkedWait {
				break // parked: closing the connection ends the long poll
			}
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				break // refused: Kafka closes the connection on a request it cannot parse
			}
			if err != nil {
				t.Fatalf("reading the answers to %q: %v", body, err)
			}
			if len(resp) < 4 {
				t.Fatalf("response frame of %d bytes to %q", len(resp), body)
			}
			served = int32(binary.BigEndian.Uint32(resp)) == fuzzSentinelCorr && fuzzIsApiVersions(resp)
		}
		w.conn.Close()
		if n := srv.HandlerPanics() - panicsBefore; n != 0 {
			t.Fatalf("%d handler panics on input %q", n, body)
		}
		if !served {
			wireServes(t, fb.b)
		}
	})
}

// fuzzMaxPartitions bounds the partitions an input may create: creating thousands of partition
// logs is legal (Kafka has no lower limit either) but takes seconds, which would stall fuzzing.
const fuzzMaxPartitions = 64

// fuzzTooExpensive reports whether body is a CreateTopics or CreatePartitions request that
// would create more than fuzzMaxPartitions partitions.
func fuzzTooExpensive(body []byte) bool {
	if len(body) < 10 {
		return false
	}
	key, version := int16(binary.BigEndian.Uint16(body)), int16(binary.BigEndian.Uint16(body[2:]))
	if key != 19 && key != 37 {
		return false
	}
	pos := 10
	if n := int16(binary.BigEndian.Uint16(body[8:])); n > 0 {
		pos += int(n)
	}
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	if req.IsFlexible() {
		pos++ // the request header's tag section: an empty one is a single 0 byte
	}
	if pos > len(body) || req.ReadFrom(body[pos:]) != nil {
		return false // the broker refuses it without creating anything
	}
	total := 0
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		for _, t := range r.Topics {
			total += max(int(t.NumPartitions), len(t.ReplicaAssignment))
		}
	case *kmsg.CreatePartitionsRequest:
		for _, t := range r.Topics {
			total += int(t.Count)
		}
	}
	return total > fuzzMaxPartitions
}

// fuzzIsApiVersions reports whether resp (a response frame) is a successful ApiVersions v0.
func fuzzIsApiVersions(resp []byte) bool {
	r := kmsg.NewPtrApiVersionsResponse()
	r.SetVersion(0)
	return r.ReadFrom(resp[4:]) == nil && r.ErrorCode == 0 && len(r.ApiKeys) > 0
}

type fuzzSeed struct {
	name  string
	frame []byte // the frame body: request header and request
}

// fuzzDispatchSeeds returns real requests of every registered API at its lowest, highest, first
// flexible and a middle version, with fields pointing at the fuzz topic where the API has them.
func fuzzDispatchSeeds() []fuzzSeed {
	var seeds []fuzzSeed
	defs := append([]apiDef(nil), apiDefs...)
	sort.Slice(defs, func(i, j int) bool { return defs[i].key < defs[j].key })
	for _, d := range defs {
		versions := map[int16]bool{d.min: true, d.max: true, (d.min + d.max) / 2: true}
		for v := d.min; v <= d.max; v++ {
			if probe := kmsg.RequestForKey(d.key); probe != nil {
				probe.SetVersion(v)
				if probe.IsFlexible() {
					versions[v] = true
					break
				}
			}
		}
		var vs []int16
		for v := range versions {
			vs = append(vs, v)
		}
		sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
		for _, v := range vs {
			req := fuzzRequest(d.key)
			req.SetVersion(v)
			frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz")).AppendRequest(nil, req, 1000+int32(d.key))[4:]
			seeds = append(seeds, fuzzSeed{name: fmt.Sprintf("%02d-%s-v%d", d.key, strings.ReplaceAll(kmsg.NameForKey(d.key), " ", ""), v), frame: frame})
		}
	}
	// KIP-511: an ApiVersions version above the served range.
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(5)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "fuzz", "1.0"
	seeds = append(seeds, fuzzSeed{name: "18-ApiVersions-v5-unsupported", frame: kmsg.NewRequestFormatter().AppendRequest(nil, av, 7)[4:]})
	return seeds
}

// fuzzRequest returns a populated request for key (an empty one for APIs not listed here).
func fuzzRequest(key int16) kmsg.Request {
	switch key {
	case 0:
		req := wireProduce(
			wirePart{topic: fuzzTopic, id: fuzzTopicID, partition: 0, records: wireBatch("k", "value")},
			wirePart{topic: fuzzTopic, id: fuzzTopicID, partition: 1, records: wireBatch("x")},
		)
		req.Acks = 1
		return req
	case 1:
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = fuzzTopic, fuzzTopicID
		for p := int32(0); p < 2; p++ {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, 1, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return req
	case 2:
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = fuzzTopic
		for i, ts := range []int64{-1, -2, -3, 1_000} {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = int32(i%2), ts
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return req
	case 3:
		req := kmsg.NewPtrMetadataRequest()
		for _, name := range []string{fuzzTopic, "fz-auto"} {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		req.AllowAutoTopicCreation = true
		return req
	case 18:
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "fuzz", "1.0"
		return req
	case 19:
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 1000
		req.Topics = append(req.Topics, wireTopic("fz-new", 2, "retention.ms", "60000"))
		return req
	case 20:
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 1000
		req.TopicNames = []string{"fz-new"}
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr("fz-new")
		req.Topics = append(req.Topics, rt)
		return req
	case 21:
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = 1000
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = fuzzTopic
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	case 22:
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionTimeoutMillis = 60000
		return req
	case 32:
		req := kmsg.NewPtrDescribeConfigsRequest()
		for _, r := range []struct {
			typ  kmsg.ConfigResourceType
			name string
		}{{kmsg.ConfigResourceTypeTopic, fuzzTopic}, {kmsg.ConfigResourceTypeBroker, "1"}} {
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = r.typ, r.name
			req.Resources = append(req.Resources, rr)
		}
		req.IncludeSynonyms, req.IncludeDocumentation = true, true
		return req
	case 33:
		req := kmsg.NewPtrAlterConfigsRequest()
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, fuzzTopic
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = "retention.ms", kmsg.StringPtr("3600000")
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		return req
	case 37:
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 1000
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = fuzzTopic, 3
		req.Topics = append(req.Topics, rt)
		return req
	case 44:
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, ""
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = "message.max.bytes", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("2000000")
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		return req
	case 60:
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = true
		req.EndpointType = 1
		return req
	}
	return kmsg.RequestForKey(key)
}

// TestFuzzDispatchSeeds writes the seed corpus with -update-fuzz-dispatch-seeds; otherwise it
// checks every registered API has a stored seed (run the update after registering a new API).
func TestFuzzDispatchSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDispatch")
	seeds := fuzzDispatchSeeds()
	if *updateFuzzDispatchSeeds {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, s := range seeds {
			data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s.frame)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, s.name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	var missing []string
	for _, s := range seeds {
		if _, err := os.Stat(filepath.Join(dir, s.name)); err != nil {
			missing = append(missing, s.name)
		}
	}
	if len(missing) > 0 {
		t.Logf("seeds not stored yet (added at run time; regenerate with -update-fuzz-dispatch-seeds): %v", missing)
	}
}
