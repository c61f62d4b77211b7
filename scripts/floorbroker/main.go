// Command floorbroker is the floor under a broker's produce path, for benchmarks only: the least
// work any broker that stores records through the page cache must do for Kafka's producer. It
// answers ApiVersions, Metadata, CreateTopics, InitProducerId and Produce (acks 1 and all) on
// one listener, and for every produced batch checks its framing and CRC32C, sets its base
// offset, and pwrites it at the end of its partition's file: no record walk, no indexes, no
// replication, no quotas, no authorization, no idempotence checks, nothing kept but the files.
// Each connection is one goroutine that reads a request and writes its reply before reading the
// next. scripts/bench-kafka-tools.sh (BROKERS="weir kafka floor") runs it beside weir and Kafka
// under the same tools, so weir's CPU per record can be read against what the copies and system
// calls alone cost on the same machine.
//
// It accepts the command lines those scripts give weir: `floorbroker serve --set
// listeners=PLAINTEXT://127.0.0.1:PORT --set log.dirs=DIR [--set metrics.listener=ADDR] [other
// --set keys, ignored]`, and `floorbroker topic create NAME --partitions N --bootstrap ADDR`.
// It listens only where it is told (the scripts use 127.0.0.1) and must never be exposed: it
// authenticates nobody.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/klauspost/crc32"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const maxFrame = 100 << 20 // socket.request.max.bytes, as Kafka's default

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "topic" && os.Args[2] == "create" {
		if err := createTopic(os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "floorbroker topic create:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: floorbroker serve --set listeners=PLAINTEXT://HOST:PORT --set log.dirs=DIR | floorbroker topic create NAME --partitions N --bootstrap ADDR")
		os.Exit(2)
	}
	sets := map[string]string{}
	for i := 2; i < len(os.Args); i++ {
		if os.Args[i] == "--set" && i+1 < len(os.Args) {
			k, v, _ := strings.Cut(os.Args[i+1], "=")
			sets[k] = v
			i++
		}
	}
	addr := strings.TrimPrefix(sets["listeners"], "PLAINTEXT://")
	dir := sets["log.dirs"]
	if addr == "" || dir == "" {
		fmt.Fprintln(os.Stderr, "floorbroker: listeners and log.dirs are required")
		os.Exit(2)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "floorbroker:", err)
		os.Exit(1)
	}
	b := &broker{dir: dir, topics: map[string]*topic{}}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "floorbroker:", err)
		os.Exit(1)
	}
	b.host, b.port = splitHostPort(ln.Addr().String())
	if m := sets["metrics.listener"]; m != "" {
		go func() {
			err := http.ListenAndServe(m, http.HandlerFunc(b.metrics))
			slog.Error("metrics listener", "err", err)
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; ln.Close() }()
	b.accept(ln)
	b.close()
}

// accept serves every connection of ln until it is closed.
func (b *broker) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go b.serve(c)
	}
}

func splitHostPort(a string) (string, int32) {
	h, p, _ := net.SplitHostPort(a)
	var port int32
	fmt.Sscan(p, &port)
	return h, port
}

// broker holds the topics; mu guards topics (partitions are added only by CreateTopics).
type broker struct {
	dir        string
	host       string
	port       int32
	mu         sync.RWMutex
	topics     map[string]*topic
	requests   atomic.Int64 // Produce requests answered
	producerID atomic.Int64
}

type topic struct {
	id      [16]byte
	parts   []*partition
	batches atomic.Int64
	records atomic.Int64
}

// partition is one file; mu guards pos and next across the connections that produce to it.
type partition struct {
	mu   sync.Mutex
	f    *os.File
	pos  int64
	next int64
}

func (b *broker) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.topics {
		for _, p := range t.parts {
			p.f.Close()
		}
	}
}

func (b *broker) metrics(w http.ResponseWriter, _ *http.Request) {
	fmt.Fprintf(w, "weir_requests_total{api=\"Produce\"} %d\n", b.requests.Load())
	b.mu.RLock()
	defer b.mu.RUnlock()
	for name, t := range b.topics {
		fmt.Fprintf(w, "weir_topic_produced_batches_total{topic=%q} %d\n", name, t.batches.Load())
		fmt.Fprintf(w, "weir_topic_messages_in_total{topic=%q} %d\n", name, t.records.Load())
	}
}

func (b *broker) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	var frame, out []byte
	var size [4]byte
	for {
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if n < 8 || n > maxFrame {
			return
		}
		if cap(frame) < int(n) {
			frame = make([]byte, n)
		}
		frame = frame[:n]
		if _, err := io.ReadFull(br, frame); err != nil {
			return
		}
		var err error
		out, err = b.handle(frame, out[:0])
		if err != nil {
			slog.Warn("closing connection", "remote", c.RemoteAddr(), "err", err)
			return
		}
		if len(out) == 0 {
			continue // acks=0
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// handle decodes one request frame and appends its size-prefixed reply to out.
func (b *broker) handle(frame, out []byte) ([]byte, error) {
	key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
	corr := binary.BigEndian.Uint32(frame[4:])
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, fmt.Errorf("api key %d not served", key)
	}
	rest := frame[8:]
	if len(rest) < 2 {
		return nil, errors.New("short header")
	}
	cl := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if cl > 0 {
		if int(cl) > len(rest) {
			return nil, errors.New("short client id")
		}
		rest = rest[cl:]
	}
	resp := req.ResponseKind()
	if key == 18 && version > req.MaxVersion() {
		// An ApiVersions newer than known: answer v0 with UNSUPPORTED_VERSION and the versions.
		r := resp.(*kmsg.ApiVersionsResponse)
		r.ErrorCode = 35
		b.apiVersions(r)
		return frameOut(out, corr, false, r), nil
	}
	req.SetVersion(version)
	if req.IsFlexible() { // request header v2: tagged fields
		ntags, k := binary.Uvarint(rest)
		if k <= 0 {
			return nil, errors.New("bad header tags")
		}
		rest = rest[k:]
		for range ntags {
			_, k1 := binary.Uvarint(rest)
			if k1 <= 0 {
				return nil, errors.New("bad header tag")
			}
			l, k2 := binary.Uvarint(rest[k1:])
			if k2 <= 0 || uint64(len(rest)-k1-k2) < l {
				return nil, errors.New("bad header tag")
			}
			rest = rest[k1+k2+int(l):]
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return nil, fmt.Errorf("decode api key %d v%d: %w", key, version, err)
	}
	resp.SetVersion(version)
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		b.apiVersions(resp.(*kmsg.ApiVersionsResponse))
	case *kmsg.MetadataRequest:
		b.metadata(r, resp.(*kmsg.MetadataResponse))
	case *kmsg.CreateTopicsRequest:
		b.createTopics(r, resp.(*kmsg.CreateTopicsResponse))
	case *kmsg.InitProducerIDRequest:
		p := resp.(*kmsg.InitProducerIDResponse)
		p.ProducerID, p.ProducerEpoch = 1000+b.producerID.Add(1), 0
	case *kmsg.ProduceRequest:
		b.produce(r, resp.(*kmsg.ProduceResponse))
		if r.Acks == 0 {
			return out, nil
		}
	default:
		return nil, fmt.Errorf("api key %d not served", key)
	}
	return frameOut(out, corr, resp.IsFlexible() && key != 18, resp), nil
}

func frameOut(out []byte, corr uint32, tags bool, resp kmsg.Response) []byte {
	start := len(out)
	out = append(out, 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, corr)
	if tags {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out
}

var served = []struct{ key, min, max int16 }{
	{0, 3, 11}, // Produce
	{3, 0, 12}, // Metadata
	{18, 0, 4}, // ApiVersions
	{19, 0, 7}, // CreateTopics
	{22, 0, 4}, // InitProducerId
}

func (b *broker) apiVersions(r *kmsg.ApiVersionsResponse) {
	for _, s := range served {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = s.key, s.min, s.max
		r.ApiKeys = append(r.ApiKeys, k)
	}
}

func (b *broker) metadata(req *kmsg.MetadataRequest, r *kmsg.MetadataResponse) {
	br := kmsg.NewMetadataResponseBroker()
	br.NodeID, br.Host, br.Port = 0, b.host, b.port
	r.Brokers = []kmsg.MetadataResponseBroker{br}
	r.ClusterID = kmsg.StringPtr("floorbroker")
	r.ControllerID = 0
	b.mu.RLock()
	defer b.mu.RUnlock()
	var names []string
	if req.Topics == nil {
		for n := range b.topics {
			names = append(names, n)
		}
	} else {
		for _, t := range req.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	for _, n := range names {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr(n)
		t := b.topics[n]
		if t == nil {
			rt.ErrorCode = 3 // UNKNOWN_TOPIC_OR_PARTITION
			r.Topics = append(r.Topics, rt)
			continue
		}
		rt.TopicID = t.id
		for i := range t.parts {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition, p.Leader, p.Replicas, p.ISR = int32(i), 0, []int32{0}, []int32{0}
			rt.Partitions = append(rt.Partitions, p)
		}
		r.Topics = append(r.Topics, rt)
	}
}

func (b *broker) createTopics(req *kmsg.CreateTopicsRequest, r *kmsg.CreateTopicsResponse) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, rt := range req.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = rt.Topic, rt.NumPartitions, 1
		if t.NumPartitions <= 0 {
			t.NumPartitions = 1
		}
		switch {
		case b.topics[rt.Topic] != nil:
			t.ErrorCode = 36 // TOPIC_ALREADY_EXISTS
		case t.NumPartitions > 10000:
			t.ErrorCode = 37 // INVALID_PARTITIONS
		default:
			nt := &topic{}
			rand.Read(nt.id[:])
			for i := range t.NumPartitions {
				f, err := os.OpenFile(filepath.Join(b.dir, fmt.Sprintf("%s-%d.log", rt.Topic, i)), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
				if err != nil {
					slog.Error("create partition file", "err", err)
					t.ErrorCode = 56 // KAFKA_STORAGE_ERROR
					break
				}
				nt.parts = append(nt.parts, &partition{f: f})
			}
			if t.ErrorCode == 0 {
				b.topics[rt.Topic] = nt
				t.TopicID = nt.id
			}
		}
		r.Topics = append(r.Topics, t)
	}
}

// produce checks each batch's framing and CRC32C, gives it its base offset, and writes the
// partition's records with one pwrite.
func (b *broker) produce(req *kmsg.ProduceRequest, r *kmsg.ProduceResponse) {
	b.requests.Add(1)
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, rt := range req.Topics {
		t := b.topics[rt.Topic]
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.LogAppendTime = rp.Partition, -1
			switch {
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.parts):
				sp.ErrorCode = 3
			default:
				base, batches, records, code := t.parts[rp.Partition].append(rp.Records)
				sp.ErrorCode, sp.BaseOffset = code, base
				t.batches.Add(batches)
				t.records.Add(records)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		r.Topics = append(r.Topics, st)
	}
}

// append validates recs (one or more v2 batches) and writes them; it returns the base offset,
// the numbers of batches and records written, and an error code (CORRUPT_MESSAGE 2,
// KAFKA_STORAGE_ERROR 56).
func (p *partition) append(recs []byte) (base, batches, records int64, code int16) {
	for b := recs; len(b) > 0; {
		if len(b) < 61 || b[16] != 2 {
			return -1, 0, 0, 2
		}
		l := int(binary.BigEndian.Uint32(b[8:])) + 12
		if l < 61 || l > len(b) {
			return -1, 0, 0, 2
		}
		if crc32.Checksum(b[21:l], castagnoli) != binary.BigEndian.Uint32(b[17:]) {
			return -1, 0, 0, 2
		}
		records += int64(int32(binary.BigEndian.Uint32(b[57:])))
		batches++
		b = b[l:]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	base = p.next
	off := base
	for b := recs; len(b) > 0; {
		l := int(binary.BigEndian.Uint32(b[8:])) + 12
		binary.BigEndian.PutUint64(b, uint64(off))
		off += int64(int32(binary.BigEndian.Uint32(b[57:])))
		b = b[l:]
	}
	if _, err := p.f.WriteAt(recs, p.pos); err != nil {
		slog.Error("write partition file", "err", err)
		return -1, 0, 0, 56
	}
	p.pos += int64(len(recs))
	p.next = off
	return base, batches, records, 0
}

func createTopic(args []string) error {
	fs := flag.NewFlagSet("topic create", flag.ContinueOnError)
	parts := fs.Int("partitions", 1, "partitions")
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "address")
	if len(args) < 1 {
		return errors.New("a topic name is required")
	}
	name := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), int32(*parts), 1, nil, name)
	if err != nil {
		return err
	}
	return resp.Err
}
