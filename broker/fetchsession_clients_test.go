package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceTestRecords produces records with franz-go to their partitions.
func produceTestRecords(t *testing.T, addr, topic string, recs []testRecord) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := newKgo(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var krs []*kgo.Record
	for _, r := range recs {
		krs = append(krs, r.kgo(topic))
	}
	if err := prod.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestFetchSessionClients consumes 16 partitions with franz-go (incremental fetch sessions by
// default: the broker counts its incremental fetches and the metrics show them), sarama and
// kafka-go (sessionless), byte for byte, in order, exactly once; then franz-go again while
// records arrive in waves, so incremental responses carry data for some partitions and omit
// the rest.
func TestFetchSessionClients(t *testing.T) {
	b := startBroker(t, map[string]string{"metrics.listener": "127.0.0.1:0"})
	addr := b.Addr()
	const topic, parts, n = "many", 16, 16 * 30
	createTopic(t, addr, topic, parts, nil)
	rng := rand.New(rand.NewPCG(7, 16))
	want := makeRecords(rng, topic, n, parts, time.Now().Add(-time.Hour).Truncate(time.Millisecond))
	produceTestRecords(t, addr, topic, want)
	fs := &b.fetchSessions

	t.Run("franz-go", func(t *testing.T) {
		before := fs.requests[fetchIncremental].Load()
		got := consumeKgo(t, addr, topic, n, 30*time.Second, kgo.FetchMaxPartitionBytes(4<<10))
		checkRecords(t, want, got)
		if inc := fs.requests[fetchIncremental].Load() - before; inc == 0 {
			t.Fatal("franz-go made no incremental fetch")
		}
		m := scrape(t, b)
		if v := m.must(t, "weir_fetch_session_requests_total", "kind", "incremental"); v == 0 {
			t.Fatal("weir_fetch_session_requests_total{kind=incremental} is 0")
		}
		m.must(t, "weir_fetch_sessions")
		m.must(t, "weir_fetch_session_partitions")
		m.must(t, "weir_fetch_session_evictions_total")
	})

	t.Run("franz-go-live", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		offsets := map[int32]kgo.Offset{}
		for p := range int32(parts) {
			offsets[p] = kgo.NewOffset().At(int64(n / parts))
		}
		cons := newKgo(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), kgo.FetchMaxWait(500*time.Millisecond))
		more := makeRecords(rng, topic+"-live", 4*parts, parts, time.Now().Truncate(time.Millisecond))
		gotc := make(chan map[int32][]testRecord, 1)
		go func() {
			got := map[int32][]testRecord{}
			count := 0
			for count < len(more) && ctx.Err() == nil {
				fetches := cons.PollFetches(ctx)
				fetches.EachError(func(topic string, p int32, err error) {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("fetch %s/%d: %v", topic, p, err)
					}
				})
				fetches.EachRecord(func(r *kgo.Record) {
					got[r.Partition] = append(got[r.Partition], testRecord{Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
					count++
				})
			}
			gotc <- got
		}()
		sessionsBefore := fs.requests[fetchIncremental].Load()
		// Waves of a few partitions each; the consumer is parked between them.
		for w := 0; w < len(more); w += parts / 2 {
			time.Sleep(50 * time.Millisecond)
			produceTestRecords(t, addr, topic, more[w:min(w+parts/2, len(more))])
		}
		got := <-gotc
		checkRecords(t, more, got)
		if fs.requests[fetchIncremental].Load() == sessionsBefore {
			t.Fatal("no incremental fetch while records arrived")
		}
	})

	t.Run("sarama", func(t *testing.T) {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V3_0_0_0
		cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
		cons, err := sarama.NewConsumer([]string{addr}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		perPart := map[int32]int{}
		for _, r := range want {
			perPart[r.Partition]++
		}
		var mu sync.Mutex
		got := map[int32][]testRecord{}
		var wg sync.WaitGroup
		for p := range int32(parts) {
			pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer pc.AsyncClose()
				timeout := time.After(20 * time.Second)
				for i := 0; i < perPart[p]; i++ {
					select {
					case m := <-pc.Messages():
						r := testRecord{Partition: p, Key: m.Key, Value: m.Value, Timestamp: m.Timestamp}
						for _, h := range m.Headers {
							r.Headers = append(r.Headers, kgo.RecordHeader{Key: string(h.Key), Value: h.Value})
						}
						mu.Lock()
						got[p] = append(got[p], r)
						mu.Unlock()
					case err := <-pc.Errors():
						t.Errorf("partition %d: %v", p, err)
						return
					case <-timeout:
						t.Errorf("partition %d: %d of %d messages within 20s", p, i, perPart[p])
						return
					}
				}
			}()
		}
		wg.Wait()
		checkRecords(t, want, got)
	})

	t.Run("kafka-go", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		perPart := map[int32]int{}
		for _, r := range want {
			perPart[r.Partition]++
		}
		got := map[int32][]testRecord{}
		for p := range int32(parts) {
			rd := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: int(p),
				MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond})
			if err := rd.SetOffset(kafka.FirstOffset); err != nil {
				t.Fatal(err)
			}
			for len(got[p]) < perPart[p] {
				m, err := rd.ReadMessage(ctx)
				if err != nil {
					t.Fatalf("partition %d after %d messages: %v", p, len(got[p]), err)
				}
				r := testRecord{Partition: p, Key: m.Key, Value: m.Value, Timestamp: m.Time}
				for _, h := range m.Headers {
					r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
				}
				got[p] = append(got[p], r)
			}
			rd.Close()
		}
		checkRecords(t, want, got)
	})
}

// TestFetchSessionEviction runs more franz-go consumers than max.incremental.fetch.session.cache.slots:
// the cache never holds more sessions than its slots, the consumers without one are served with
// full fetches and every consumer reads everything; a replica's (privileged) session then
// evicts a consumer's.
func TestFetchSessionEviction(t *testing.T) {
	b := startBroker(t, map[string]string{"max.incremental.fetch.session.cache.slots": "2"})
	addr := b.Addr()
	const topic, parts, n = "evict", 4, 4 * 25
	createTopic(t, addr, topic, parts, nil)
	want := makeRecords(rand.New(rand.NewPCG(8, 4)), topic, n, parts, time.Now().Add(-time.Hour).Truncate(time.Millisecond))
	produceTestRecords(t, addr, topic, want)
	fs := &b.fetchSessions
	var wg sync.WaitGroup
	results := make([]map[int32][]testRecord, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = consumeKgo(t, addr, topic, n, 30*time.Second, kgo.FetchMaxPartitionBytes(1<<10))
		}()
	}
	wg.Wait()
	for _, got := range results {
		checkRecords(t, want, got)
	}
	if s := fs.numSessions.Load(); s > 2 {
		t.Fatalf("%d sessions with 2 slots", s)
	}
	// Fill both slots with consumer sessions, then open a replica's session.
	topicInfo, _ := b.topics.get(topic)
	f := &sessionFetcher{t: t, w: dialWire(t, addr), topic: topicInfo}
	for range 2 {
		if resp := f.fetch(13, -1, 0, 0, map[int32]int64{0: 0}, nil, 0); resp.SessionID == 0 && fs.numSessions.Load() < 2 {
			t.Fatal("no consumer session with a free slot")
		}
	}
	evictions := fs.evictions.Load()
	if resp := f.fetch(17, 2, 0, 0, map[int32]int64{0: 0}, nil, 0); resp.SessionID == 0 {
		t.Fatal("a replica's session found no slot")
	}
	if fs.evictions.Load() != evictions+1 || fs.numSessions.Load() != 2 {
		t.Fatalf("evictions %d -> %d, %d sessions", evictions, fs.evictions.Load(), fs.numSessions.Load())
	}
}

// TestFetchSessionHostile: sessions past the bounds are refused (full fetches answered without
// a session, a session grown past them closed with FETCH_SESSION_ID_NOT_FOUND), names no topic
// can have are not cached, made-up session ids and epochs get session errors, the cache never
// holds more than its slots or its partition bound, and the broker keeps serving without a
// panic.
func TestFetchSessionHostile(t *testing.T) {
	b := startBroker(t, map[string]string{"max.incremental.fetch.session.cache.slots": "20"})
	addr := b.Addr()
	createTopic(t, addr, "h", 2, nil)
	fs := &b.fetchSessions
	w := dialWire(t, addr)
	huge := func(id, epoch int32, topicID byte, partitions int) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SessionID, req.SessionEpoch, req.MaxBytes = id, epoch, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = [16]byte{0xee, topicID}
		rt.Partitions = make([]kmsg.FetchRequestTopicPartition, partitions)
		for i := range rt.Partitions {
			rt.Partitions[i] = kmsg.NewFetchRequestTopicPartition()
			rt.Partitions[i].Partition = int32(i)
		}
		req.Topics = append(req.Topics, rt)
		return wireRoundTrip[*kmsg.FetchResponse](w, req, 13)
	}
	// Over the per-session bound: answered (every partition UNKNOWN_TOPIC_ID), no session.
	resp := huge(0, 0, 1, maxFetchSessionPartitions+1)
	if resp.SessionID != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != maxFetchSessionPartitions+1 ||
		resp.Topics[0].Partitions[7].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("huge full fetch: session %d, %d topics", resp.SessionID, len(resp.Topics))
	}
	// Under it: a session; growing it past the bound closes it.
	resp = huge(0, 0, 2, maxFetchSessionPartitions-10)
	if resp.SessionID == 0 {
		t.Fatal("no session under the bound")
	}
	resp = huge(resp.SessionID, 1, 3, 11)
	if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || fs.numSessions.Load() != 0 || fs.numPartitions.Load() != 0 {
		t.Fatalf("grown past the bound: error %d, %d sessions, %d partitions", resp.ErrorCode, fs.numSessions.Load(), fs.numPartitions.Load())
	}
	// The bound of all sessions: big sessions until it is reached.
	for i := range maxFetchSessionCachedPartitions/(maxFetchSessionPartitions-10) + 2 {
		huge(0, 0, byte(10+i), maxFetchSessionPartitions-10)
		if p := fs.numPartitions.Load(); p > maxFetchSessionCachedPartitions {
			t.Fatalf("%d partitions cached, bound %d", p, maxFetchSessionCachedPartitions)
		}
	}
	if s := fs.numSessions.Load(); s != maxFetchSessionCachedPartitions/(maxFetchSessionPartitions-10) {
		t.Fatalf("%d sessions of %d partitions", s, maxFetchSessionPartitions-10)
	}
	// A topic name no topic can have (v12) is not cached.
	req := kmsg.NewPtrFetchRequest()
	req.SessionEpoch = 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = strings.Repeat("x", maxSessionTopicName+1)
	rt.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	if r := wireRoundTrip[*kmsg.FetchResponse](w, req, 12); r.SessionID != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("long name: session %d, %+v", r.SessionID, r.Topics)
	}
	// Made-up ids and epochs.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		id, epoch := rng.Int32(), rng.Int32()
		switch i % 4 {
		case 1:
			id = -id
		case 2:
			epoch = math.MinInt32 + int32(i)
		case 3:
			id, epoch = math.MaxInt32, math.MaxInt32
		}
		if epoch == 0 || epoch == -1 {
			epoch = 2
		}
		r := huge(id, epoch, 1, 3)
		if r.ErrorCode != kerr.FetchSessionIDNotFound.Code && r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
			t.Fatalf("session %d epoch %d: error %d", id, epoch, r.ErrorCode)
		}
	}
	// Many small sessions: never more than the slots.
	for range 60 {
		huge(0, 0, 200, 2)
	}
	if s := fs.numSessions.Load(); s > 20 {
		t.Fatalf("%d sessions with 20 slots", s)
	}
	wireServes(t, b)
}

// TestFetchSessionJavaConsumer consumes 16 partitions with Apache Kafka's own Java consumer
// (kafka-console-consumer: a consumer group, incremental fetch sessions by default) and checks
// every record arrives once, in order per partition, through incremental fetches. It needs the
// Kafka jars: WEIR_KAFKA_LIBS=<folder of jars> (../shared/anchors/kafka/setup.sh prints it).
func TestFetchSessionJavaConsumer(t *testing.T) {
	libs := os.Getenv("WEIR_KAFKA_LIBS")
	if libs == "" {
		t.Skip("WEIR_KAFKA_LIBS not set: the Java consumer is not available")
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("no java")
	}
	b := startBroker(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	addr := b.Addr()
	const topic, parts, perPart = "java", 16, 20
	createTopic(t, addr, topic, parts, nil)
	for i := range perPart { // one batch per partition each time: one per fetch at 64 bytes
		var recs []testRecord
		for p := range int32(parts) {
			recs = append(recs, testRecord{Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
		}
		produceTestRecords(t, addr, topic, recs)
	}
	before := b.fetchSessions.requests[fetchIncremental].Load()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", "-cp", libs+"/*", "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", addr, "--topic", topic, "--from-beginning", "--group", "java-sessions",
		"--max-messages", fmt.Sprint(parts*perPart), "--timeout-ms", "60000",
		"--command-property", "max.partition.fetch.bytes=64")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("console consumer: %v\n%s", err, out)
	}
	next := map[int]int{}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if len(l) > 1 && l[0] == 'p' && l[1] >= '0' && l[1] <= '9' { // skip the tool's notices
			lines = append(lines, l)
		}
	}
	for _, l := range lines {
		var p, i int
		if _, err := fmt.Sscanf(l, "p%d-%d", &p, &i); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if i != next[p] {
			t.Fatalf("partition %d: record %d, want %d", p, i, next[p])
		}
		next[p]++
	}
	if len(lines) != parts*perPart {
		t.Fatalf("%d records, want %d", len(lines), parts*perPart)
	}
	inc := b.fetchSessions.requests[fetchIncremental].Load() - before
	t.Logf("Java consumer: %d records, %d incremental fetches", len(lines), inc)
	if inc < perPart/2 {
		t.Fatalf("the Java consumer made %d incremental fetches, want >= %d", inc, perPart/2)
	}
}
