// Command fetchsessions measures what one consumer of many partitions costs a broker, fetch by
// fetch: the workload of incremental fetch sessions (KIP-227). It runs against any
// Kafka-protocol broker already listening (-bootstrap) whose process id is -pid, so weir and
// Apache Kafka are measured the same way.
//
// With -create it creates one topic fs-N of N partitions for every N of -partitions and waits
// until each answers ListOffsets. Otherwise, for the topic of -partitions (one N), it measures
// three windows and prints one tab-separated row per window:
//
//	baseline  no client: the broker's own background CPU (timers, flushers, a JVM's threads)
//	idle      a franz-go consumer of every partition from the log end, nothing produced: each
//	          fetch parks for fetch.max.wait.ms (-max-wait, 500 ms as the Java consumer's
//	          default) and answers empty; with sessions the requests after the first name no
//	          partition and the responses carry none
//	trickle   the same consumer while a producer sends -rate records/s round robin to -hot
//	          partitions spread over the topic (acks=1, no linger): produce-to-consume latency
//	          of each record (the value carries its send time) as p50/p99/max
//
// Per window: fetch requests the consumer sent (counted by client hooks), request and response
// bytes per fetch, the broker's CPU over the window and per fetch. The broker's CPU is the sum
// of the on-CPU nanoseconds of its threads (/proc/PID/task/*/schedstat): /proc/PID/stat counts
// in 10 ms ticks, too coarse for an idle window. Every wait is bounded by -timeout.
//
//	go run ./scripts/fetchsessions -create -bootstrap 127.0.0.1:29400 -partitions 10,1000,10000
//	go run ./scripts/fetchsessions -bootstrap 127.0.0.1:29400 -pid 1234 -broker weir -partitions 1000
//
// scripts/bench-fetch-sessions.sh runs it against weir and Kafka; docs/benchmarks.md ("Fetch
// sessions and consumers at scale") has the results.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	bootstrap  = flag.String("bootstrap", "127.0.0.1:9092", "broker address")
	pid        = flag.Int("pid", 0, "the broker's process id (CPU time); 0: not measured")
	label      = flag.String("broker", "broker", "broker label in the output")
	rep        = flag.Int("rep", 1, "repetition number in the output")
	partsFlag  = flag.String("partitions", "10", "partition counts, comma-separated (one when measuring)")
	create     = flag.Bool("create", false, "create the topics and exit")
	warm       = flag.Duration("warm", 3*time.Second, "consumer warm-up before the idle window")
	baseline   = flag.Duration("baseline", 4*time.Second, "baseline window (no client)")
	idle       = flag.Duration("idle", 8*time.Second, "idle window")
	trickle    = flag.Duration("trickle", 8*time.Second, "trickle window")
	rate       = flag.Int("rate", 100, "trickle records per second (1..10000)")
	hot        = flag.Int("hot", 4, "partitions the trickle goes to")
	maxWait    = flag.Duration("max-wait", 500*time.Millisecond, "consumer fetch.max.wait.ms")
	noSessions = flag.Bool("no-sessions", false, "consumer without fetch sessions (every fetch names every partition)")
	timeout    = flag.Duration("timeout", 5*time.Minute, "bound of every wait")
	header     = flag.Bool("header", false, "print the header row first")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fetchsessions:", err)
		os.Exit(1)
	}
}

func topicOf(n int) string { return "fs-" + strconv.Itoa(n) }

func counts() ([]int, error) {
	var ns []int
	for _, s := range strings.Split(*partsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 100000 {
			return nil, fmt.Errorf("bad partition count %q (1..100000)", s)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

func run() error {
	ns, err := counts()
	if err != nil {
		return err
	}
	if *rate < 1 || *rate > 10000 || *hot < 1 {
		return errors.New("-rate must be 1..10000 and -hot at least 1")
	}
	if *create {
		return createTopics(ns)
	}
	if len(ns) != 1 {
		return errors.New("measure one partition count at a time")
	}
	return measure(ns[0])
}

func createTopics(ns []int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap), kgo.RetryTimeout(*timeout))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(timeout.Milliseconds()))
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	for _, n := range ns {
		t0 := time.Now()
		// Kafka's controller refuses an operation of more than 10,000 records
		// (max.records.per.user.op): create at most 5,000 partitions at a time.
		const step = 5000
		resp, err := adm.CreateTopic(ctx, int32(min(n, step)), 1, nil, topicOf(n))
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create %s: %w", topicOf(n), err)
		}
		for have := min(n, step); have < n; have = min(have+step, n) {
			rs, err := adm.UpdatePartitions(ctx, min(have+step, n), topicOf(n))
			if err == nil {
				err = rs.Error()
			}
			if err != nil {
				return fmt.Errorf("grow %s to %d partitions: %w", topicOf(n), min(have+step, n), err)
			}
		}
		// Ready when every partition answers ListOffsets without an error.
		for {
			offs, err := adm.ListEndOffsets(ctx, topicOf(n))
			ready := err == nil && len(offs[topicOf(n)]) == n
			if ready {
				offs.Each(func(o kadm.ListedOffset) {
					if o.Err != nil {
						ready = false
					}
				})
			}
			if ready {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%s not ready: %v", topicOf(n), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		fmt.Fprintf(os.Stderr, "fetchsessions: %s created and ready in %.1f s\n", topicOf(n), time.Since(t0).Seconds())
	}
	return nil
}

// cpuNanos is the on-CPU time of every thread of the process, from schedstat.
func cpuNanos() int64 {
	if *pid <= 0 {
		return 0
	}
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", *pid))
	var total int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			total += v
		}
	}
	return total
}

// fetchHook counts the consumer's Fetch requests and their bytes.
type fetchHook struct {
	requests, reqBytes, respBytes atomic.Int64
}

func (h *fetchHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == 1 && err == nil {
		h.requests.Add(1)
		h.reqBytes.Add(int64(n))
	}
}

func (h *fetchHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == 1 && err == nil {
		h.respBytes.Add(int64(n))
	}
}

type snapshot struct {
	at                            time.Time
	cpu                           int64
	requests, reqBytes, respBytes int64
}

func (h *fetchHook) snap() snapshot {
	return snapshot{at: time.Now(), cpu: cpuNanos(), requests: h.requests.Load(), reqBytes: h.reqBytes.Load(),
		respBytes: h.respBytes.Load()}
}

// latencies collects the trickle's produce-to-consume latencies while on.
type latencies struct {
	mu      sync.Mutex // guards on, samples
	on      bool
	samples []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	if l.on && len(l.samples) < 1<<20 {
		l.samples = append(l.samples, d)
	}
	l.mu.Unlock()
}

func (l *latencies) set(on bool) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = on
	s := l.samples
	if on {
		l.samples = nil
	}
	return s
}

func measure(n int) error {
	topic := topicOf(n)
	if *header {
		fmt.Println("rep\tbroker\tpartitions\tsessions\tphase\tseconds\tfetches\tfetches_per_s\treq_bytes_per_fetch\tresp_bytes_per_fetch\tbroker_cpu_ms\tcpu_us_per_fetch\tcpu_us_per_fetch_minus_baseline\trecords\tp50_ms\tp99_ms\tmax_ms")
	}
	sessions := "on"
	if *noSessions {
		sessions = "off"
	}
	row := func(phase string, a, b snapshot, baseNsPerS float64, lat []time.Duration, records int) {
		secs := b.at.Sub(a.at).Seconds()
		f := b.requests - a.requests
		cpuMs := float64(b.cpu-a.cpu) / 1e6
		per, perNet, reqB, respB := "-", "-", "-", "-"
		if f > 0 {
			per = fmt.Sprintf("%.1f", cpuMs*1000/float64(f))
			perNet = fmt.Sprintf("%.1f", (cpuMs*1000-baseNsPerS*secs/1000)/float64(f))
			reqB = strconv.FormatInt((b.reqBytes-a.reqBytes)/f, 10)
			respB = strconv.FormatInt((b.respBytes-a.respBytes)/f, 10)
		}
		p50, p99, pmax := "-", "-", "-"
		if len(lat) > 0 {
			slices.Sort(lat)
			ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1000) }
			p50, p99, pmax = ms(lat[len(lat)/2]), ms(lat[min(len(lat)-1, len(lat)*99/100)]), ms(lat[len(lat)-1])
		}
		fmt.Printf("%d\t%s\t%d\t%s\t%s\t%.1f\t%d\t%.1f\t%s\t%s\t%.1f\t%s\t%s\t%d\t%s\t%s\t%s\n", *rep, *label, n, sessions, phase,
			secs, f, float64(f)/secs, reqB, respB, cpuMs, per, perNet, records, p50, p99, pmax)
	}

	hook := &fetchHook{}
	// Baseline: the broker alone.
	b0 := hook.snap()
	time.Sleep(*baseline)
	b1 := hook.snap()
	baseNsPerS := float64(b1.cpu-b0.cpu) / b1.at.Sub(b0.at).Seconds()
	row("baseline", b0, b1, 0, nil, 0)

	opts := []kgo.Opt{kgo.SeedBrokers(*bootstrap), kgo.WithHooks(hook), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(*maxWait), kgo.RetryTimeout(*timeout)}
	if *noSessions {
		opts = append(opts, kgo.DisableFetchSessions())
	}
	cons, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cons.Close()
	lats := &latencies{}
	var consumed atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			now := time.Now().UnixNano()
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) >= 8 {
					lats.add(time.Duration(now - int64(binary.BigEndian.Uint64(r.Value))))
					consumed.Add(1)
				}
			})
		}
	}()
	// Warm-up: the consumer lists offsets and opens its session; wait for a few fetches.
	deadline := time.Now().Add(*timeout)
	time.Sleep(*warm)
	for hook.requests.Load() < 3 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the consumer sent %d fetches in %s", hook.requests.Load(), *timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}

	i0 := hook.snap()
	time.Sleep(*idle)
	i1 := hook.snap()
	row("idle", i0, i1, baseNsPerS, nil, 0)

	prod, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(*timeout))
	if err != nil {
		return err
	}
	defer prod.Close()
	// One record first, so the producer's metadata and connection are warm before the window.
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("warm")}).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	stride := max(n / *hot, 1)
	every := time.Second / time.Duration(*rate)
	lats.set(true)
	c0 := consumed.Load()
	t0 := hook.snap()
	tick := time.NewTicker(every)
	var failed atomic.Int64
	var sent int
	end := time.Now().Add(*trickle)
	for time.Now().Before(end) {
		<-tick.C
		v := make([]byte, 8, 100)
		binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
		v = v[:100]
		p := int32((sent % *hot) * stride % n)
		prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
		sent++
	}
	tick.Stop()
	// Let the last records arrive (bounded), then close the window.
	for wait := time.Now().Add(5 * time.Second); consumed.Load()-c0 < int64(sent) && time.Now().Before(wait); {
		time.Sleep(10 * time.Millisecond)
	}
	t1 := hook.snap()
	lat := lats.set(false)
	row("trickle", t0, t1, baseNsPerS, lat, len(lat))
	if f := failed.Load(); f > 0 {
		fmt.Fprintf(os.Stderr, "fetchsessions: %d of %d trickle records failed\n", f, sent)
	}
	if got := consumed.Load() - c0; got < int64(sent) {
		fmt.Fprintf(os.Stderr, "fetchsessions: %d of %d trickle records consumed\n", got, sent)
	}
	cancel()
	cons.Close()
	<-done
	return nil
}
