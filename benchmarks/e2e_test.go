package benchmarks

// End-to-end suites: an in-process broker on 127.0.0.1:0 (data under $WEIR_BENCH_DIR, else a temp
// dir), driven over loopback by franz-go (produce) or by raw kmsg requests (fetch).
//
//	BenchmarkProduce/<size>/p<partitions>/<acks>/<flush>          one kgo client, async produce
//	BenchmarkProduceClients/1KiB/p16/c16/<acks>/<flush>           16 kgo clients (16 connections)
//	BenchmarkProduceDurability/1KiB/p16/c<n>/<acks>/<batch>       durable vs page cache, interleaved
//	BenchmarkProduceLatency/<size>/c<clients>/<acks>/<flush>       closed loop: one record per request
//	BenchmarkFetch/<size>/{broker,sendfile,sendfile-appends,ratio} cached fetch vs raw sendfile
//
// <flush> is durable (weir's default: every acknowledgement waits for the group-commit fdatasync)
// or pagecache (log.flush.interval.messages=Long.MAX_VALUE, Kafka's default). One op of a produce
// benchmark is one record: ns/op is per record, MB/s counts value bytes, records/s is reported.
// Latencies (p50/p99/p99.9, HdrHistogram) run from the Produce call to the acknowledgement: in
// the throughput suites they include the wait in the clients' buffers (32 MiB in all, as the Java
// producer's buffer.memory), in BenchmarkProduceLatency they are those of one-record requests.
//
// Run, for example:
//
//	go test -run '^$' -bench 'Produce|Fetch' -benchmem -count 3 -timeout 60m ./benchmarks/

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/broker"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// flushMode is a broker flush policy of the grids.
type flushMode struct {
	name  string
	props map[string]string
}

var flushModes = []flushMode{
	{"durable", nil},
	{"pagecache", map[string]string{"log.flush.interval.messages": strconv.FormatInt(1<<63-1, 10)}},
}

var e2eSizes = []Size{{"100B", 100}, {"1KiB", 1 << 10}}

// loadTimeout bounds every load loop: a benchmark that cannot finish in it fails.
const loadTimeout = 3 * time.Minute

var quietOnce sync.Once

// benchBroker is an in-process broker and an admin client for it.
type benchBroker struct {
	br  *broker.Broker
	cl  *kgo.Client
	adm *kadm.Client
}

// startBroker starts an in-process broker (testcluster/inproc) on 127.0.0.1:0 with its log dir
// from Dir; it stops when tb ends.
func startBroker(tb testing.TB, props map[string]string) *benchBroker {
	tb.Helper()
	quietOnce.Do(func() {
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	})
	p := map[string]string{"log.dirs": Dir(tb)}
	for k, v := range props {
		p[k] = v
	}
	br, stop := inproc.StartStoppable(tb, p)
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()))
	if err != nil {
		tb.Fatal(err)
	}
	bb := &benchBroker{br: br, cl: cl, adm: kadm.NewClient(cl)}
	tb.Cleanup(func() {
		cl.Close()
		if err := stop(); err != nil {
			tb.Error(err)
		}
	})
	return bb
}

var topicSeq atomic.Int64

// createTopic creates a fresh topic and deletes it when tb ends (bounding the disk a long run
// uses).
func (bb *benchBroker) createTopic(tb testing.TB, prefix string, partitions int32) (string, kadm.TopicID) {
	tb.Helper()
	name := fmt.Sprintf("%s-%d", prefix, topicSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := bb.adm.CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		tb.Fatalf("create topic %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := bb.adm.DeleteTopics(ctx, name); err != nil {
			tb.Logf("delete topic %s: %v", name, err)
		}
	})
	return name, resp.ID
}

// brokers starts one broker per flush mode on first use; they stop when tb ends.
type brokers struct {
	tb testing.TB
	m  map[string]*benchBroker
}

func (bs *brokers) get(m flushMode) *benchBroker {
	if bs.m == nil {
		bs.m = map[string]*benchBroker{}
	}
	if bb := bs.m[m.name]; bb != nil {
		return bb
	}
	bb := startBroker(bs.tb, m.props)
	bs.m[m.name] = bb
	return bb
}

var ackModes = []string{"acks1", "acksall"}

// producerOpts are the kgo options of every producing client: no compression (values are
// random), a 5 ms linger and up to 5 requests in flight per connection, as the Java producer's
// defaults (linger.ms=5 since Kafka 4.0, max.in.flight.requests.per.connection=5). acks=1 turns
// idempotence off (the Java producer does the same when acks is not all).
func producerOpts(addr, topic, acks string, linger time.Duration, buffered int, batchBytes int32) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(linger), kgo.MaxBufferedRecords(buffered),
	}
	if batchBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(batchBytes))
	}
	if acks == "acks1" {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(5))
	} else {
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	return opts
}

func randomValue(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	v := make([]byte, n)
	for i := range v {
		v[i] = byte(rng.Uint32())
	}
	return v
}

// produceSpec is one cell of a produce grid.
type produceSpec struct {
	size       Size
	partitions int32
	clients    int
	acks       string
	// batchBytes is the producer's batch size limit per partition: 0 is franz-go's default
	// (about 1 MB), 16 KiB the Java producer's default batch.size.
	batchBytes int32
}

// bufferBytes bounds the record bytes the producers of one benchmark have buffered or in flight,
// split evenly among the clients: 32 MiB, the Java producer's buffer.memory. A producer's
// throughput is at most its outstanding data per produce latency, so a smaller buffer would cap the
// durable runs (higher latency) before the broker does; a much larger one (32 MiB per client at 16
// clients) makes a run of a few hundred MB mostly the filling and draining of the buffers rather
// than a steady state. The records are recycled through a free list of that many records, so the
// client side allocates no record per op.
const bufferBytes = 32 << 20

func inFlightPerClient(spec produceSpec) int {
	return max(bufferBytes/spec.clients/spec.size.Bytes, 64)
}

// producerSet is spec.clients warmed-up kgo clients producing to one fresh topic. Records are
// recycled from the acknowledgement callback through a free list per client, so the client side
// allocates no record per op.
type producerSet struct {
	topic   string
	value   []byte
	clients []*setClient
}

type setClient struct {
	cl      *kgo.Client
	free    chan *kgo.Record
	hist    *hdrhistogram.Histogram
	errs    atomic.Int64
	first   atomic.Pointer[error]
	promise func(*kgo.Record, error)
}

func (c *setClient) fail(err error) {
	if c.errs.Add(1) == 1 {
		c.first.Store(&err)
	}
}

func newProducerSet(tb testing.TB, bb *benchBroker, spec produceSpec) *producerSet {
	tb.Helper()
	topic, _ := bb.createTopic(tb, "produce", spec.partitions)
	ps := &producerSet{topic: topic, value: randomValue(spec.size.Bytes)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inFlight := inFlightPerClient(spec)
	for range spec.clients {
		cl, err := kgo.NewClient(producerOpts(bb.br.Addr(), topic, spec.acks, 5*time.Millisecond, inFlight, spec.batchBytes)...)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(cl.Close)
		// Warm up: metadata, connection, producer id.
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: ps.value}).FirstErr(); err != nil {
			tb.Fatal(err)
		}
		c := &setClient{cl: cl, free: make(chan *kgo.Record, inFlight), hist: NewHistogram()}
		for range inFlight {
			c.free <- new(kgo.Record)
		}
		// One promise per client, built once: promises run serially per client.
		c.promise = func(r *kgo.Record, err error) {
			if err != nil {
				c.fail(err)
			} else {
				RecordDuration(c.hist, time.Since(r.Timestamp))
			}
			c.free <- r
		}
		ps.clients = append(ps.clients, c)
	}
	return ps
}

// run produces n records, spread over the clients (one goroutine each, asynchronous Produce
// calls), and returns once every one is acknowledged.
func (ps *producerSet) run(ctx context.Context, n int) error {
	var wg sync.WaitGroup
	for i, c := range ps.clients {
		share := n / len(ps.clients)
		if i < n%len(ps.clients) {
			share++
		}
		wg.Go(func() {
			for range share {
				var r *kgo.Record
				select {
				case r = <-c.free:
				case <-ctx.Done():
					c.fail(ctx.Err())
					return
				}
				*r = kgo.Record{Value: ps.value}
				c.cl.Produce(ctx, r, c.promise)
			}
			if err := c.cl.Flush(ctx); err != nil {
				c.fail(err)
			}
		})
	}
	wg.Wait()
	for _, c := range ps.clients {
		if n := c.errs.Load(); n > 0 {
			return fmt.Errorf("%d produce errors, first: %w", n, *c.first.Load())
		}
	}
	return nil
}

// histogram merges the clients' latency histograms.
func (ps *producerSet) histogram() *hdrhistogram.Histogram {
	h := NewHistogram()
	for _, c := range ps.clients {
		h.Merge(c.hist)
	}
	return h
}

// benchProduce produces b.N records of spec.size to a fresh topic through spec.clients kgo
// clients and waits for every acknowledgement.
func benchProduce(b *testing.B, bb *benchBroker, spec produceSpec) {
	ps := newProducerSet(b, bb, spec)
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	b.SetBytes(int64(spec.size.Bytes))
	b.ReportAllocs()
	b.ResetTimer()
	err := ps.run(ctx, b.N)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	ReportLatency(b, ps.histogram(), "")
}

// BenchmarkProduce: one kgo client producing 100 B and 1 KiB records with acks=1 and acks=all to
// 1 and 16 partitions, against a durable-acks broker and a page-cache-acks broker.
func BenchmarkProduce(b *testing.B) {
	bs := &brokers{tb: b}
	for _, size := range e2eSizes {
		for _, parts := range []int32{1, 16} {
			for _, acks := range ackModes {
				for _, m := range flushModes {
					b.Run(fmt.Sprintf("%s/p%d/%s/%s", size.Name, parts, acks, m.name), func(b *testing.B) {
						benchProduce(b, bs.get(m), produceSpec{size: size, partitions: parts, clients: 1, acks: acks})
					})
				}
			}
		}
	}
}

// BenchmarkProduceClients: 16 kgo clients (16 connections, 16 concurrent producers) producing 1
// KiB records to 16 partitions: the group-commit case of the durable-vs-page-cache target.
func BenchmarkProduceClients(b *testing.B) {
	bs := &brokers{tb: b}
	for _, acks := range ackModes {
		for _, m := range flushModes {
			b.Run(fmt.Sprintf("1KiB/p16/c16/%s/%s", acks, m.name), func(b *testing.B) {
				benchProduce(b, bs.get(m), produceSpec{size: Size{"1KiB", 1 << 10}, partitions: 16, clients: 16, acks: acks})
			})
		}
	}
}

// BenchmarkProduceDurability: the durable-vs-page-cache ratio from one run. Two brokers, one
// durable and one with page-cache acks, each with its own topic and warmed-up clients, get the
// same load in alternating rounds (at most durabilityRound records each), so both see the same
// machine; each side's time is summed. One op is one record on each side. 16 partitions, 1 KiB
// records, 1 and 16 clients, franz-go's default batch limit (about 1 MB per partition) and the
// Java producer's (16 KiB).
func BenchmarkProduceDurability(b *testing.B) {
	bs := &brokers{tb: b}
	for _, clients := range []int{1, 16} {
		for _, acks := range ackModes {
			for _, batch := range []struct {
				name  string
				bytes int32
			}{{"batch1MB", 0}, {"batch16KiB", 16 << 10}} {
				b.Run(fmt.Sprintf("1KiB/p16/c%d/%s/%s", clients, acks, batch.name), func(b *testing.B) {
					spec := produceSpec{size: Size{"1KiB", 1 << 10}, partitions: 16, clients: clients, acks: acks, batchBytes: batch.bytes}
					benchDurability(b, bs, spec)
				})
			}
		}
	}
}

func benchDurability(b *testing.B, bs *brokers, spec produceSpec) {
	sets := []*producerSet{newProducerSet(b, bs.get(flushModes[0]), spec), newProducerSet(b, bs.get(flushModes[1]), spec)}
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	var elapsed, cpu [2]time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; round++ {
		n := min(durabilityRound, b.N-done)
		for k := range 2 {
			i := (round + k) % 2
			cpu0 := processCPU()
			start := time.Now()
			if err := sets[i].run(ctx, n); err != nil {
				b.Fatal(err)
			}
			elapsed[i] += time.Since(start)
			cpu[i] += processCPU() - cpu0
		}
		done += n
	}
	b.StopTimer()
	rate := func(d time.Duration) float64 { return float64(b.N) / d.Seconds() }
	b.ReportMetric(rate(elapsed[0]), "durable-records/s")
	b.ReportMetric(rate(elapsed[1]), "pagecache-records/s")
	b.ReportMetric(100*elapsed[1].Seconds()/elapsed[0].Seconds(), "durable-%-of-pagecache")
	// CPU time per record (process: clients and broker): equal costs with a lower rate
	// mean the durable side waits (for the disk) rather than works.
	reportCPU(b, cpu[0], "durable-")
	reportCPU(b, cpu[1], "pagecache-")
	ReportLatency(b, sets[0].histogram(), "durable-")
	ReportLatency(b, sets[1].histogram(), "pagecache-")
}

// durabilityRound is the most records one side of BenchmarkProduceDurability produces before
// the other side's turn (256 MiB of 1 KiB records): long enough that filling and draining the
// producers' pipelines (whose latency differs between the sides) is a small part of a round.
const durabilityRound = 1 << 18

// BenchmarkProduceLatency: closed loop, each of c clients sends one record and waits for its
// acknowledgement before sending the next (no linger), to a 16-partition topic. One op is one
// record; the latency percentiles are those of single-record produce requests.
func BenchmarkProduceLatency(b *testing.B) {
	bs := &brokers{tb: b}
	for _, size := range e2eSizes {
		for _, clients := range []int{1, 16} {
			for _, acks := range ackModes {
				for _, m := range flushModes {
					b.Run(fmt.Sprintf("%s/c%d/%s/%s", size.Name, clients, acks, m.name), func(b *testing.B) {
						benchProduceLatency(b, bs.get(m), size, clients, acks)
					})
				}
			}
		}
	}
}

func benchProduceLatency(b *testing.B, bb *benchBroker, size Size, clients int, acks string) {
	topic, _ := bb.createTopic(b, "latency", 16)
	value := randomValue(size.Bytes)
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	cls := make([]*kgo.Client, clients)
	for i := range cls {
		cl, err := kgo.NewClient(producerOpts(bb.br.Addr(), topic, acks, 0, 16, 0)...)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		cls[i] = cl
	}
	lat := NewLatencies(clients, b.N/clients+1)
	errs := make([]error, clients)
	b.SetBytes(int64(size.Bytes))
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, cl := range cls {
		n := b.N / clients
		if i < b.N%clients {
			n++
		}
		wg.Go(func() {
			var r kgo.Record
			for range n {
				r = kgo.Record{Value: value}
				start := time.Now()
				if err := cl.ProduceSync(ctx, &r).FirstErr(); err != nil {
					errs[i] = err
					return
				}
				lat.Record(i, time.Since(start))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	ReportLatency(b, lat.Histogram(), "")
}

// fetchFixture is a broker holding one partition of cached data, a raw fetch connection to it,
// and the raw baselines: plain files holding the same bytes, each sent over its own loopback
// socket pair.
type fetchFixture struct {
	bb    *benchBroker
	topic string
	id    kadm.TopicID
	conn  *RawConn
	// whole is a plain file written with one write(2); appended is one written batch by batch,
	// as the log was. How a file was written changes what sendfile costs: one large write leaves
	// large folios in the page cache, fewer pieces to splice than a file grown by 17 KiB
	// appends (measured: sendfile of the log's own segment file costs as much as appended).
	whole, appended *LoopbackSendfile
}

const fetchDataBytes = 40 << 20

func newFetchFixture(b *testing.B) *fetchFixture {
	bb := startBroker(b, flushModes[1].props) // page-cache acks: the high watermark follows appends
	topic, id := bb.createTopic(b, "fetch", 1)
	l, ok := bb.br.Logs().Log(engine.TopicPartition{Topic: topic, Partition: 0})
	if !ok {
		b.Fatal("no log for the fetch topic")
	}
	// Batches of 16 x 1 KiB records (about the Java producer's 16 KiB batch.size), appended
	// straight to the log: the data is the same whichever client wrote it.
	batch := Batch(16, 1<<10)
	for l.LogEndOffset() == 0 || l.Size() < fetchDataBytes {
		if _, err := l.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	if l.HighWatermark() != l.LogEndOffset() {
		b.Fatalf("high watermark %d behind log end %d", l.HighWatermark(), l.LogEndOffset())
	}
	// The raw baselines' plain files: the partition's first bytes, copied.
	sl, err := l.Read(0, 17<<20, engine.ReadUpToHighWatermark)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, sl.Length)
	_, err = sl.File.ReadAt(data, sl.Position)
	sl.Release()
	if err != nil {
		b.Fatal(err)
	}
	fx := &fetchFixture{bb: bb, topic: topic, id: id}
	fx.whole = plainFileSender(b, data, len(data))
	fx.appended = plainFileSender(b, data, len(batch))
	if fx.conn, err = DialRaw(bb.br.Addr()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fx.conn.Close() })
	return fx
}

// plainFileSender writes data to a new plain file in writes of chunk bytes and returns a
// loopback sendfile sender for it.
func plainFileSender(b *testing.B, data []byte, chunk int) *LoopbackSendfile {
	f, err := os.CreateTemp(Dir(b), "raw-*.dat")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	for p := data; len(p) > 0; p = p[min(chunk, len(p)):] {
		if _, err := f.Write(p[:min(chunk, len(p))]); err != nil {
			b.Fatal(err)
		}
	}
	s, err := NewLoopbackSendfile(f)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// fetchVersion is the Fetch version current Java clients send (topic ids, flexible).
const fetchVersion = 17

// request builds a sessionless Fetch from offset 0 of at most size bytes, answered at once.
func (fx *fetchFixture) request(size int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(fetchVersion)
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = size
	req.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = fx.topic
	t.TopicID = fx.id
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition = 0
	p.FetchOffset = 0
	p.PartitionMaxBytes = size
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// check fetches once, decodes the response and returns its records' size.
func (fx *fetchFixture) check(b *testing.B, req *kmsg.FetchRequest) int64 {
	body, _, err := fx.conn.Roundtrip(req, true, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(req.Version)
	if err := resp.ReadFrom(body[1:]); err != nil { // [1:]: the flexible header's empty tags
		b.Fatal(err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		b.Fatalf("fetch response: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) < int(req.MaxBytes) {
		b.Fatalf("fetch response: partition error %d, %d record bytes for a %d-byte fetch", p.ErrorCode, len(p.RecordBatches), req.MaxBytes)
	}
	return int64(len(p.RecordBatches))
}

// BenchmarkFetch: fetches of cached data through the broker (Fetch v17 from a raw connection:
// decode, offset index, writev of the headers, sendfile of the records) against the raw
// loopback sendfile bandwidth of the same bytes from a plain file, for 64 KiB, 1 MiB (the Java
// consumer's max.partition.fetch.bytes) and 16 MiB fetches.
// Every case reports the process CPU time per op (client and broker or sender and receiver).
//
//	broker            one fetch per op; B/op and allocs/op are the broker's (the client side
//	                  allocates nothing): they must not grow with the fetch size
//	sendfile          the baseline alone: sendfile(2) of the same number of bytes from a plain
//	                  file written at once, to a loopback socket, read by the same receiving loop
//	sendfile-appends  the same from a plain file written in the log's batch-sized appends
//	ratio             one fetch and one transfer of each baseline per op, in rotating order,
//	                  timed separately: broker-MB/s, sendfile-MB/s, appends-MB/s and the
//	                  broker's percentage of each, from one run
func BenchmarkFetch(b *testing.B) {
	fx := newFetchFixture(b)
	for _, size := range []Size{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}} {
		req := fx.request(int32(size.Bytes))
		records := fx.check(b, req)
		ops := []func() error{
			func() error { _, _, err := fx.conn.Roundtrip(req, false, time.Minute); return err },
			func() error { return fx.whole.Transfer(0, records) },
			func() error { return fx.appended.Transfer(0, records) },
		}
		for i, name := range []string{"broker", "sendfile", "sendfile-appends"} {
			b.Run(size.Name+"/"+name, func(b *testing.B) {
				b.SetBytes(records)
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					if err := ops[i](); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, processCPU()-cpu0, "")
			})
		}
		b.Run(size.Name+"/ratio", func(b *testing.B) {
			var wall, cpu [3]time.Duration
			n := 0
			for b.Loop() {
				for k := range len(ops) {
					i := (n + k) % len(ops)
					cpu0 := processCPU()
					start := time.Now()
					if err := ops[i](); err != nil {
						b.Fatal(err)
					}
					wall[i] += time.Since(start)
					cpu[i] += processCPU() - cpu0
				}
				n++
			}
			mbs := func(d time.Duration) float64 { return float64(records) * float64(b.N) / d.Seconds() / 1e6 }
			b.ReportMetric(mbs(wall[0]), "broker-MB/s")
			b.ReportMetric(mbs(wall[1]), "sendfile-MB/s")
			b.ReportMetric(mbs(wall[2]), "appends-MB/s")
			b.ReportMetric(100*wall[1].Seconds()/wall[0].Seconds(), "broker-%-of-sendfile")
			b.ReportMetric(100*wall[2].Seconds()/wall[0].Seconds(), "broker-%-of-appends")
			reportCPU(b, cpu[0], "broker-")
			reportCPU(b, cpu[1], "sendfile-")
			reportCPU(b, cpu[2], "appends-")
		})
	}
}

// processCPU is the CPU time (user + system) the process has used so far. Unlike wall time it
// barely moves when other processes compete for the cores, so it compares two code paths on a
// shared machine more steadily.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process CPU time per op in microseconds as "<prefix>cpu-us/op".
func reportCPU(b *testing.B, cpu time.Duration, prefix string) {
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(b.N), prefix+"cpu-us/op")
}
