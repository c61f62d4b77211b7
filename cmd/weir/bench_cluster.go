package main

// weir bench cluster: failover and catch-up of a 3-node weir cluster started as child processes
// (internal/testcluster: node i's data and weir.log in DIR/node-i, readiness from /readyz) on
// 127.0.0.1 only; used by scripts/bench-cluster.sh.
//
//	weir bench cluster failover --dir DIR [--cycles 5] [--rate 2000]
//	    acks=all producer at a fixed rate on an RF=3 topic; SIGKILL the leader of partition 0 and
//	    time the kill to the first acknowledgement of a partition-0 batch written by another
//	    broker (franz-go's OnProduceBatchWritten hook names the broker that acknowledged it);
//	    restart the killed broker, wait for the full ISR, repeat.
//	weir bench cluster catchup --dir DIR [--bytes 1GiB]
//	    SIGTERM one broker of an RF=3 topic, produce --bytes while it is down, restart it and
//	    time the restart to its return to the ISR of every partition.
//
// Both print a human summary and write result.json into --out. Every wait is bounded, and an
// interrupt (SIGINT/SIGTERM of weir) SIGKILLs the brokers and ends the run.

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/testcluster"
)

// benchClusterCmd runs `weir bench cluster failover|catchup ...`.
func benchClusterCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("bench cluster: want failover or catchup")
	}
	switch args[0] {
	case "failover":
		return benchClusterFailover(ctx, args[1:], stdout, stderr)
	case "catchup":
		return benchClusterCatchup(ctx, args[1:], stdout, stderr)
	}
	return fmt.Errorf("bench cluster: unknown mode %q (want failover or catchup)", args[0])
}

// cluster lays out the 3-node cluster of a run (not started): ports from --port-base, data and
// weir.log of node i in DIR/node-i, extra ("key=value") set on every node.
func (cm *clusterBenchFlags) cluster(extra []string) (*testcluster.Cluster, error) {
	bin := cm.bin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the weir binary: %w", err)
		}
		bin = exe
	}
	props := make(map[string]string, len(extra))
	for _, kv := range extra {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--set %q: want key=value", kv)
		}
		props[k] = v
	}
	return testcluster.New(testcluster.Config{Binary: bin, N: 3, Dir: cm.dir, BasePort: cm.basePort,
		ControllerBasePort: cm.basePort + 100, MetricsBasePort: cm.basePort + 200, Props: props,
		LogFile: true, SysProcAttr: devSysProcAttr, StartTimeout: 120 * time.Second})
}

func cbClient(c *testcluster.Cluster, metaMinAge time.Duration, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...), kgo.MetadataMinAge(metaMinAge),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}, opts...)...)
}

// cbSignal sends sig to nd and waits up to within for it to exit; past that it is SIGKILLed and
// an error returned.
func cbSignal(nd *testcluster.Node, sig syscall.Signal, within time.Duration) error {
	if err := nd.Signal(sig); err != nil {
		return err
	}
	if err := nd.WaitExit(within); err != nil {
		_ = nd.Kill()
		return fmt.Errorf("%w of %v; killed", err, sig)
	}
	return nil
}

func cbPartitions(adm *kadm.Client, topic string) (map[int32]kadm.PartitionDetail, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	return td.Partitions, nil
}

// cbWaitISR waits (bounded by within and ctx) until every partition has a leader and an ISR of size (and holds want, if >0).
func cbWaitISR(ctx context.Context, adm *kadm.Client, topic string, size int, want int32, within time.Duration, poll time.Duration) error {
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for an ISR of %d on %s: %w", size, topic, err)
		}
		ps, err := cbPartitions(adm, topic)
		ok := err == nil && len(ps) > 0
		if err != nil {
			last = err.Error()
		}
		for _, p := range ps {
			if p.Leader < 0 || len(p.ISR) < size || (want > 0 && !slices.Contains(p.ISR, want)) {
				ok = false
				last = fmt.Sprintf("partition %d leader %d isr %v", p.Partition, p.Leader, p.ISR)
				break
			}
		}
		if ok {
			return nil
		}
		time.Sleep(poll)
	}
	return fmt.Errorf("ISR of %d on %s not reached within %v: %s", size, topic, within, last)
}

func cbCreateTopic(adm *kadm.Client, topic string, parts int32, rf int16, minISR string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := adm.CreateTopics(ctx, parts, rf, map[string]*string{"min.insync.replicas": &minISR}, topic)
		cancel()
		if err == nil {
			err = resp[topic].Err
		}
		if err == nil || strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("create %s: %w", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type cbDurStats struct {
	N        int       `json:"n"`
	MinMs    float64   `json:"min_ms"`
	MedianMs float64   `json:"median_ms"`
	MaxMs    float64   `json:"max_ms"`
	AllMs    []float64 `json:"all_ms"`
}

func cbStatsOf(ds []time.Duration) cbDurStats {
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = float64(d.Microseconds()) / 1000
	}
	s := cbDurStats{N: len(ms), AllMs: slices.Clone(ms)}
	if len(ms) == 0 {
		return s
	}
	slices.Sort(ms)
	s.MinMs, s.MaxMs = ms[0], ms[len(ms)-1]
	if len(ms)%2 == 1 {
		s.MedianMs = ms[len(ms)/2]
	} else {
		s.MedianMs = (ms[len(ms)/2-1] + ms[len(ms)/2]) / 2
	}
	return s
}

// cbAckHook records, per partition-0 batch acknowledgement, which broker acknowledged it and when.
type cbAckHook struct {
	mu     sync.Mutex
	events []cbAckEvent
}

type cbAckEvent struct {
	at   time.Time
	node int32
}

func (h *cbAckHook) OnProduceBatchWritten(meta kgo.BrokerMetadata, _ string, partition int32, _ kgo.ProduceBatchMetrics) {
	if partition != 0 {
		return
	}
	h.mu.Lock()
	h.events = append(h.events, cbAckEvent{time.Now(), meta.NodeID})
	h.mu.Unlock()
}

// firstAckAfter returns the first partition-0 acknowledgement after t by a broker other than old.
func (h *cbAckHook) firstAckAfter(t time.Time, old int32) (cbAckEvent, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.events {
		if e.at.After(t) && e.node != old {
			return e, true
		}
	}
	return cbAckEvent{}, false
}

type clusterBenchFlags struct {
	bin, dir, out string
	basePort      int
	extra         stringList
	metaMinAge    time.Duration
	timeout       time.Duration
}

func (cm *clusterBenchFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&cm.bin, "weir", "", "weir binary the brokers run (default: this weir binary)")
	fs.StringVar(&cm.dir, "dir", "", "data directory for the brokers (required)")
	fs.StringVar(&cm.out, "out", "", "directory for result.json (default: --dir)")
	fs.IntVar(&cm.basePort, "port-base", 29192, "client ports base..base+2, controller ports base+100..base+102, admin (/readyz) ports base+200..base+202")
	fs.Var(&cm.extra, "set", "extra broker setting key=value (repeatable)")
	fs.DurationVar(&cm.metaMinAge, "metadata-min-age", 100*time.Millisecond, "franz-go MetadataMinAge of the clients")
	fs.DurationVar(&cm.timeout, "timeout", 10*time.Minute, "bound of the whole measurement")
}

func cbWriteResult(dir string, v any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return os.WriteFile(filepath.Join(dir, "result.json"), append(b, '\n'), 0o644)
}

// cbLogger returns a progress logger writing timestamped lines to w.
func cbLogger(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(w, "weir bench cluster: %s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

func benchClusterFailover(parent context.Context, args []string, stdout, stderr io.Writer) error {
	logf := cbLogger(stderr)
	fs := flag.NewFlagSet("bench cluster failover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cm clusterBenchFlags
	cm.register(fs)
	cycles := fs.Int("cycles", 5, "leader kills")
	rate := fs.Float64("rate", 2000, "records/s over all partitions")
	parts := fs.Int("partitions", 3, "partitions of the topic")
	size := fs.Int("message-size", 1024, "bytes per record")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cm.dir == "" {
		return errors.New("--dir is required")
	}
	if cm.out == "" {
		cm.out = cm.dir
	}
	extra := append([]string{"min.insync.replicas=2", "default.replication.factor=3", "offsets.topic.replication.factor=3"}, cm.extra...)
	c, err := cm.cluster(extra)
	if err != nil {
		return err
	}
	defer c.StopAll(20*time.Second, nil)
	stopOnSignal := context.AfterFunc(parent, func() {
		logf("interrupted: stopping the brokers")
		c.Close()
	})
	defer stopOnSignal()
	if err := c.Start(parent); err != nil {
		return err
	}
	logf("cluster up: %s", strings.Join(c.Bootstrap(), ","))
	admCl, err := cbClient(c, cm.metaMinAge)
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	const topic = "failover"
	if err := cbCreateTopic(adm, topic, int32(*parts), 3, "2"); err != nil {
		return err
	}
	if err := cbWaitISR(parent, adm, topic, 3, 0, 60*time.Second, 100*time.Millisecond); err != nil {
		return err
	}
	hook := &cbAckHook{}
	prod, err := cbClient(c, cm.metaMinAge, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.RecordRetries(1<<30), kgo.WithHooks(hook),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer prod.Close()
	var acked, failed atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithTimeout(parent, cm.timeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	value := make([]byte, *size)
	go func() { // paced producer: one record every 1/rate, round robin over the partitions
		defer wg.Done()
		interval := time.Duration(float64(time.Second) / *rate)
		next := time.Now()
		for i := 0; ctx.Err() == nil; i++ {
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			prod.Produce(context.Background(), &kgo.Record{Partition: int32(i % *parts), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					if failed.Add(1) == 1 {
						firstErr.Store(err.Error())
					}
				} else {
					acked.Add(1)
				}
			})
		}
	}()
	for acked.Load() < 200 {
		if ctx.Err() != nil {
			return errors.New("no acknowledgements before the timeout")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var fos, els []time.Duration
	type cycleResult struct {
		Cycle      int     `json:"cycle"`
		Killed     int32   `json:"killed_leader"`
		NewLeader  int32   `json:"new_leader"`
		ElectedMs  float64 `json:"new_leader_in_metadata_ms"`
		FailoverMs float64 `json:"failover_ms"`
		RejoinMs   float64 `json:"restart_to_full_isr_ms"`
	}
	var results []cycleResult
	for cycle := 1; cycle <= *cycles; cycle++ {
		ps, err := cbPartitions(adm, topic)
		if err != nil {
			return err
		}
		leader := ps[0].Leader
		nd := c.Node(leader)
		if nd == nil {
			return fmt.Errorf("cycle %d: partition 0 has leader %d", cycle, leader)
		}
		killed := time.Now()
		if err := cbSignal(nd, syscall.SIGKILL, 10*time.Second); err != nil {
			return err
		}
		// Also when the metadata first names another leader of partition 0 (polled every 25 ms),
		// to split the failover into the cluster's part and the client's.
		elected := make(chan time.Duration, 1)
		go func() {
			for time.Since(killed) < 60*time.Second {
				if ps, err := cbPartitions(adm, topic); err == nil && ps[0].Leader >= 0 && ps[0].Leader != leader {
					elected <- time.Since(killed)
					return
				}
				time.Sleep(25 * time.Millisecond)
			}
			elected <- -1
		}()
		var ev cbAckEvent
		for {
			var ok bool
			if ev, ok = hook.firstAckAfter(killed, leader); ok {
				break
			}
			if time.Since(killed) > 60*time.Second || ctx.Err() != nil {
				return fmt.Errorf("cycle %d: no acknowledgement of partition 0 by a new leader within 60 s of killing broker %d", cycle, leader)
			}
			time.Sleep(5 * time.Millisecond)
		}
		fo := ev.at.Sub(killed)
		fos = append(fos, fo)
		el := <-elected
		els = append(els, el)
		logf("cycle %d: killed leader %d of partition 0; new leader in metadata after %v, first ack by broker %d after %v",
			cycle, leader, el.Round(time.Millisecond), ev.node, fo.Round(time.Millisecond))
		restarted := time.Now()
		if err := nd.Restart(parent); err != nil {
			return err
		}
		if err := cbWaitISR(parent, adm, topic, 3, 0, 120*time.Second, 100*time.Millisecond); err != nil {
			return fmt.Errorf("cycle %d: %w", cycle, err)
		}
		rejoin := time.Since(restarted)
		logf("cycle %d: broker %d restarted, full ISR again after %v", cycle, leader, rejoin.Round(time.Millisecond))
		results = append(results, cycleResult{cycle, leader, ev.node, float64(el.Microseconds()) / 1000,
			float64(fo.Microseconds()) / 1000, float64(rejoin.Microseconds()) / 1000})
		time.Sleep(time.Second) // steady acknowledgements before the next kill
	}
	cancel()
	wg.Wait()
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = prod.Flush(fctx)
	fcancel()
	st := cbStatsOf(fos)
	res := map[string]any{
		"what":                   "SIGKILL of partition 0's leader -> first acks=all acknowledgement of a partition-0 batch by another broker",
		"cycles":                 results,
		"failover":               st,
		"new_leader_in_metadata": cbStatsOf(els),
		"rate_msgs_per_s":        *rate,
		"partitions":             *parts,
		"message_size":           *size,
		"metadata_min_age":       cm.metaMinAge.String(),
		"acked":                  acked.Load(),
		"failed":                 failed.Load(),
		"first_error":            firstErr.Load(),
		"broker_settings":        extra,
	}
	fmt.Fprintf(stdout, "failover over %d kills: min %.0f ms, median %.0f ms, max %.0f ms (all: %v); %d acked, %d failed\n",
		st.N, st.MinMs, st.MedianMs, st.MaxMs, st.AllMs, acked.Load(), failed.Load())
	es := cbStatsOf(els)
	fmt.Fprintf(stdout, "  new leader of partition 0 in the metadata (polled every 25 ms) after: min %.0f ms, median %.0f ms, max %.0f ms\n",
		es.MinMs, es.MedianMs, es.MaxMs)
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(stdout, "first failed send: %v\n", e)
	}
	return cbWriteResult(cm.out, res)
}

// cbLogBytes sums the sizes of the topic's .log segment files under a node's log dir.
func cbLogBytes(dir, topic string) int64 {
	var n int64
	files, _ := filepath.Glob(filepath.Join(dir, topic+"-*", "*.log"))
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

func cbParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if strings.HasSuffix(s, u.suf) {
			mult, s = u.m, strings.TrimSuffix(s, u.suf)
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v * mult, err
}

func benchClusterCatchup(parent context.Context, args []string, stdout, stderr io.Writer) error {
	logf := cbLogger(stderr)
	fs := flag.NewFlagSet("bench cluster catchup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cm clusterBenchFlags
	cm.register(fs)
	bytesFlag := fs.String("bytes", "1GiB", "bytes of record values to produce while the follower is down")
	parts := fs.Int("partitions", 16, "partitions of the topic")
	size := fs.Int("message-size", 1024, "bytes per record")
	acks := fs.String("acks", "1", "acks of the producer while the follower is down: 1 or all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cm.dir == "" {
		return errors.New("--dir is required")
	}
	if cm.out == "" {
		cm.out = cm.dir
	}
	total, err := cbParseBytes(*bytesFlag)
	if err != nil {
		return fmt.Errorf("--bytes: %w", err)
	}
	extra := append([]string{"min.insync.replicas=2", "default.replication.factor=3", "offsets.topic.replication.factor=3"}, cm.extra...)
	c, err := cm.cluster(extra)
	if err != nil {
		return err
	}
	defer c.StopAll(20*time.Second, nil)
	stopOnSignal := context.AfterFunc(parent, func() {
		logf("interrupted: stopping the brokers")
		c.Close()
	})
	defer stopOnSignal()
	if err := c.Start(parent); err != nil {
		return err
	}
	logf("cluster up: %s", strings.Join(c.Bootstrap(), ","))
	admCl, err := cbClient(c, cm.metaMinAge)
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	const topic = "catchup"
	if err := cbCreateTopic(adm, topic, int32(*parts), 3, "2"); err != nil {
		return err
	}
	if err := cbWaitISR(parent, adm, topic, 3, 0, 60*time.Second, 100*time.Millisecond); err != nil {
		return err
	}
	// The follower: a broker that does not lead partition 0 (all are replicas of every partition).
	ps, err := cbPartitions(adm, topic)
	if err != nil {
		return err
	}
	var victim *testcluster.Node
	for _, nd := range c.Nodes() {
		if nd.ID != ps[0].Leader {
			victim = nd
		}
	}
	t0 := time.Now()
	if err := cbSignal(victim, syscall.SIGTERM, 60*time.Second); err != nil {
		return err
	}
	logf("broker %d stopped (SIGTERM) in %v", victim.ID, time.Since(t0).Round(time.Millisecond))
	if err := cbWaitISR(parent, adm, topic, 2, 0, 60*time.Second, 100*time.Millisecond); err != nil {
		return err
	}
	popts := []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(time.Millisecond), kgo.ProducerBatchMaxBytes(1_000_000),
		kgo.MaxBufferedBytes(64 << 20), kgo.RecordDeliveryTimeout(2 * time.Minute),
		kgo.ProducerBatchCompression(kgo.NoCompression())}
	if *acks != "all" { // acks=1 needs the idempotent producer off
		popts = append(popts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	}
	prod, err := cbClient(c, cm.metaMinAge, popts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(parent, cm.timeout)
	defer cancel()
	n := total / int64(*size)
	// Incompressible values: a random pool, each record a window into it.
	pool := make([]byte, 1<<20+*size)
	_, _ = crand.Read(pool)
	var failed atomic.Int64
	var firstErr atomic.Value
	tp := time.Now()
	for i := int64(0); i < n && ctx.Err() == nil; i++ {
		off := int(i*7919) % (1 << 20)
		prod.Produce(ctx, &kgo.Record{Value: pool[off : off+*size]}, func(_ *kgo.Record, err error) {
			if err != nil {
				if failed.Add(1) == 1 {
					firstErr.Store(err.Error())
				}
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		return fmt.Errorf("producing: %w", err)
	}
	prodTime := time.Since(tp)
	prod.Close()
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d records failed: %v", f, n, firstErr.Load())
	}
	logf("produced %d records (%d MiB of values) in %v: %.0f MB/s with acks=%s and broker %d down",
		n, n*int64(*size)>>20, prodTime.Round(time.Millisecond), float64(n*int64(*size))/prodTime.Seconds()/1e6, *acks, victim.ID)
	// Let the live replicas converge (the follower of the pair fetches the tail) before sizing.
	if err := cbWaitISR(parent, adm, topic, 2, 0, 60*time.Second, 100*time.Millisecond); err != nil {
		return err
	}
	time.Sleep(time.Second)
	// Behind: the largest live replica's segment bytes minus the stopped broker's own.
	var liveBytes int64
	for _, nd := range c.Nodes() {
		if nd != victim {
			liveBytes = max(liveBytes, cbLogBytes(nd.Dir, topic))
		}
	}
	behind := liveBytes - cbLogBytes(victim.Dir, topic)
	logf("broker %d is %d MiB behind (segment bytes of the live replicas minus its own)", victim.ID, behind>>20)
	// The stopped broker must be out of the ISR, else its return would be instantaneous.
	outOfISR := 0
	if ps, err := cbPartitions(adm, topic); err == nil {
		for _, p := range ps {
			if !slices.Contains(p.ISR, victim.ID) {
				outOfISR++
			}
		}
	}
	logf("broker %d is out of the ISR of %d of %d partitions before its restart", victim.ID, outOfISR, *parts)
	if outOfISR != *parts {
		return fmt.Errorf("broker %d is still in the ISR of %d partitions while down", victim.ID, *parts-outOfISR)
	}
	tr := time.Now()
	if err := victim.Restart(parent); err != nil {
		return err
	}
	started := time.Since(tr)
	if err := cbWaitISR(parent, adm, topic, 3, victim.ID, cm.timeout, 20*time.Millisecond); err != nil {
		return err
	}
	back := time.Since(tr)
	caughtUp := cbLogBytes(victim.Dir, topic) - (liveBytes - behind)
	logf("broker %d wrote %d MiB of the %d MiB it was behind by its return to every ISR", victim.ID, caughtUp>>20, behind>>20)
	mbs := float64(behind) / back.Seconds() / 1e6
	mbsRepl := float64(behind) / (back - started).Seconds() / 1e6
	logf("broker %d: started after %v, back in the ISR of all %d partitions after %v", victim.ID, started.Round(time.Millisecond), *parts, back.Round(time.Millisecond))
	fmt.Fprintf(stdout, "catch-up of %d MiB: restart -> ready (/readyz) %.2f s, -> back in every ISR %.2f s: %.0f MB/s (%.0f MB/s counting from ready); produce while down %.0f MB/s (acks=%s)\n",
		behind>>20, started.Seconds(), back.Seconds(), mbs, mbsRepl, float64(n*int64(*size))/prodTime.Seconds()/1e6, *acks)
	return cbWriteResult(cm.out, map[string]any{
		"what":                     "SIGTERM a follower, produce while it is down, restart it: time to its return to the ISR of every partition",
		"follower":                 victim.ID,
		"partitions":               *parts,
		"message_size":             *size,
		"records":                  n,
		"value_bytes":              n * int64(*size),
		"produce_acks":             *acks,
		"produce_s":                prodTime.Seconds(),
		"produce_mb_per_s":         float64(n*int64(*size)) / prodTime.Seconds() / 1e6,
		"bytes_behind":             behind,
		"bytes_fetched_by_return":  caughtUp,
		"out_of_isr_before":        outOfISR,
		"restart_to_started_s":     started.Seconds(),
		"restart_to_full_isr_s":    back.Seconds(),
		"catchup_mb_per_s":         mbs,
		"catchup_mb_per_s_started": mbsRepl,
		"broker_settings":          extra,
	})
}
