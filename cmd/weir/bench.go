package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/benchmarks"
)

// benchPreset is one of the OpenMessaging Benchmark's standard workloads.
type benchPreset struct {
	partitions, size int
	rate             float64
}

var benchPresets = map[string]benchPreset{
	"1topic-1part-100b-maxrate":   {1, 100, 0},
	"1topic-1part-1kb-50k":        {1, 1024, 50000},
	"1topic-16part-100b-maxrate":  {16, 100, 0},
	"1topic-16part-1kb-50k":       {16, 1024, 50000},
	"1topic-16part-1kb-maxrate":   {16, 1024, 0},
	"1topic-100part-1kb-50k":      {100, 1024, 50000},
	"1topic-100part-1kb-maxrate":  {100, 1024, 0},
	"1topic-100part-100b-maxrate": {100, 100, 0},
}

func presetNames() string {
	var names []string
	for n := range benchPresets {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// benchCmd runs `weir bench produce|e2e|consume|disk|report`.
func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("bench: want produce, e2e, txn, consume, disk, report, tools-report or cluster")
	}
	switch args[0] {
	case "produce", "e2e":
		return benchLoad(ctx, args[0], args[1:], stdout, stderr)
	case "txn":
		return benchTxn(ctx, args[1:], stdout, stderr)
	case "tools-report":
		return benchToolsReport(args[1:], stdout)
	case "consume":
		return benchConsume(ctx, args[1:], stdout, stderr)
	case "disk":
		return benchDisk(ctx, args[1:], stdout, stderr)
	case "report":
		return benchReport(args[1:], stdout)
	case "cluster":
		return benchClusterCmd(ctx, args[1:], stdout, stderr)
	}
	return fmt.Errorf("bench: unknown mode %q (want produce, e2e, txn, consume, disk, report, tools-report or cluster)", args[0])
}

type loadFlags struct {
	cf                clientFlags
	workload          string
	topic             string
	topics            int
	partitions        int
	size              int
	producers         int
	rate              float64
	duration, warmup  time.Duration
	maxMessages       int64
	acks, compression string
	batchMaxBytes     int
	linger            time.Duration
	maxBuffered       int
	out, dataDir      string
	replicationFactor int
	quiet             bool
	consumers         int
	cpuProfile        string
	nullSink          bool
	brokerName        string
	flushMode         string
}

func (f *loadFlags) register(fs *flag.FlagSet) {
	f.cf.register(fs)
	fs.StringVar(&f.workload, "workload", "", "OMB preset setting --partitions, --message-size, --rate (explicit flags win): "+presetNames())
	fs.StringVar(&f.topic, "topic", "weir-bench", "topic (created with --partitions if missing)")
	fs.IntVar(&f.topics, "topics", 1, "topics: with N > 1, <topic>-0 .. <topic>-(N-1), each with --partitions; producers send to all in turn, e2e consumers read all")
	fs.IntVar(&f.partitions, "partitions", 1, "partitions of each topic when it is created")
	fs.IntVar(&f.replicationFactor, "replication-factor", -1, "replication factor when the topic is created (-1: broker default)")
	fs.IntVar(&f.size, "message-size", 1024, "bytes per message value")
	fs.IntVar(&f.producers, "producers", 1, "producer clients")
	fs.Float64Var(&f.rate, "rate", 0, "messages/s over all producers; 0 = as fast as possible")
	fs.DurationVar(&f.duration, "duration", 30*time.Second, "measurement time (after the warm-up)")
	fs.DurationVar(&f.warmup, "warmup", 5*time.Second, "warm-up time, not measured")
	fs.Int64Var(&f.maxMessages, "max-messages", 100_000_000, "stop after sending this many messages (warm-up included)")
	fs.StringVar(&f.acks, "acks", "all", "all, 1 or 0")
	fs.StringVar(&f.compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	fs.IntVar(&f.batchMaxBytes, "batch-max-bytes", 1_000_000, "maximum bytes of one record batch")
	fs.DurationVar(&f.linger, "linger", time.Millisecond, "how long a producer waits to fill a batch")
	fs.IntVar(&f.maxBuffered, "max-buffered", 0, "records in flight per producer (0: 64 MiB worth, at least 1000)")
	fs.StringVar(&f.out, "out", "", "directory for the .hgrm files and summary.json")
	fs.StringVar(&f.dataDir, "data-dir", "", "the broker's data directory, to record its filesystem in the summary")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress lines")
	fs.IntVar(&f.consumers, "consumers", 1, "e2e: consumer clients, the partitions split between them")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write the load generator's CPU profile here")
	fs.BoolVar(&f.nullSink, "null-sink", false, "produce: no broker; records go to a sink that acknowledges at once (measures the generator's own ceiling)")
	fs.StringVar(&f.brokerName, "broker-name", "", "label of the broker under test in summary.json (e.g. weir, kafka), for `weir bench report`")
	fs.StringVar(&f.flushMode, "flush-mode", "", "label of the broker's flush policy in summary.json (e.g. durable, pagecache), for `weir bench report`")
}

// parse parses args and applies --workload to every flag not given explicitly.
func (f *loadFlags) parse(fs *flag.FlagSet, args []string) error {
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments %q", rest)
	}
	if f.workload != "" {
		p, ok := benchPresets[f.workload]
		if !ok {
			return fmt.Errorf("unknown --workload %q (have %s)", f.workload, presetNames())
		}
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		if !set["partitions"] {
			f.partitions = p.partitions
		}
		if !set["message-size"] {
			f.size = p.size
		}
		if !set["rate"] {
			f.rate = p.rate
		}
	}
	if f.topics < 1 {
		return fmt.Errorf("--topics must be at least 1, not %d", f.topics)
	}
	if f.maxBuffered == 0 {
		f.maxBuffered = max(1000, (64<<20)/max(f.size, 1))
	}
	return nil
}

func (f *loadFlags) workloadOf(e2e bool) benchmarks.Workload {
	var topics []string
	if f.topics > 1 {
		topics = benchmarks.MultiTopicNames(f.topic, f.topics)
	}
	return benchmarks.Workload{
		Name: f.workload, Topic: f.topic, Topics: topics, Partitions: f.partitions, MessageSize: f.size,
		Producers: f.producers, Rate: f.rate, Duration: f.duration, Warmup: f.warmup,
		MaxMessages: f.maxMessages, Acks: f.acks, Compression: f.compression,
		BatchMaxBytes: int32(f.batchMaxBytes), Linger: f.linger, MaxBuffered: f.maxBuffered, E2E: e2e,
		NullSink: f.nullSink,
	}
}

// ensureTopic creates topic with partitions unless it exists, and returns its partition count.
func ensureTopic(ctx context.Context, adm *kadm.Client, topic string, partitions, rf int) (int, error) {
	resp, err := adm.CreateTopic(ctx, int32(partitions), int16(rf), nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("create topic %s: %w", topic, err)
	}
	// Wait until the metadata shows every partition with a leader.
	deadline := time.Now().Add(10 * time.Second)
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil {
			if d, ok := td[topic]; ok && d.Err == nil && len(d.Partitions) > 0 {
				ready := true
				for _, p := range d.Partitions {
					if p.Leader < 0 || p.Err != nil {
						ready = false
					}
				}
				if ready {
					return len(d.Partitions), nil
				}
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("topic %s: partitions have no leader after 10s", topic)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// benchSummary is summary.json.
type benchSummary struct {
	Mode     string              `json:"mode"`
	Started  time.Time           `json:"started"`
	Command  string              `json:"command"`
	Workload benchmarks.Workload `json:"workload"`
	Broker   brokerInfo          `json:"broker"`
	Machine  machineInfo         `json:"machine"`
	Results  map[string]any      `json:"results"`
}

type brokerInfo struct {
	Name        string           `json:"name,omitempty"`       // --broker-name
	FlushMode   string           `json:"flush_mode,omitempty"` // --flush-mode
	Bootstrap   string           `json:"bootstrap"`
	APIVersions map[string]int16 `json:"api_max_versions,omitempty"`
}

type machineInfo struct {
	CPU        string `json:"cpu"`
	CPUs       int    `json:"cpus"`
	Kernel     string `json:"kernel"`
	Hostname   string `json:"hostname"`
	DataDir    string `json:"data_dir,omitempty"`
	Filesystem string `json:"data_dir_filesystem,omitempty"`
	GoVersion  string `json:"go_version"`
}

func machine(dataDir string) machineInfo {
	m := machineInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), DataDir: dataDir}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
	}
	m.Hostname, _ = os.Hostname()
	if dataDir != "" {
		m.Filesystem = benchmarks.FilesystemType(dataDir)
	}
	return m
}

func apiVersions(ctx context.Context, adm *kadm.Client) map[string]int16 {
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		return nil
	}
	out := map[string]int16{}
	vs.Each(func(b kadm.BrokerApiVersions) {
		if b.Err != nil {
			return
		}
		b.EachKeySorted(func(key, _, maxV int16) {
			name := kmsg.NameForKey(key)
			if name == "" {
				name = fmt.Sprint("key", key)
			}
			out[name] = maxV
		})
	})
	return out
}

// latencySummary is one latency kind in summary.json, in milliseconds.
type latencySummary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	P9999 float64 `json:"p99_99_ms"`
	Max   float64 `json:"max_ms"`
	File  string  `json:"hgrm,omitempty"`
}

func summarize(h *hdrhistogram.Histogram) latencySummary {
	ms := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	return latencySummary{Count: h.TotalCount(), Mean: h.Mean() / 1000, P50: ms(50), P90: ms(90), P99: ms(99),
		P999: ms(99.9), P9999: ms(99.99), Max: float64(h.Max()) / 1000}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func printLatencyTable(w io.Writer, rows []string, sums []latencySummary) {
	fmt.Fprintf(w, "%-10s %10s %9s %9s %9s %9s %9s %9s %9s\n", "latency", "count", "mean", "p50", "p90", "p99", "p99.9", "p99.99", "max")
	for i, s := range sums {
		fmt.Fprintf(w, "%-10s %10d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", rows[i], s.Count, s.Mean, s.P50, s.P90, s.P99, s.P999, s.P9999, s.Max)
	}
	fmt.Fprintln(w, "(milliseconds)")
}

func benchLoad(ctx context.Context, mode string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench "+mode, flag.ContinueOnError)
	var f loadFlags
	f.register(fs)
	if err := f.parse(fs, args); err != nil {
		return err
	}
	e2e := mode == "e2e"
	if f.nullSink && e2e {
		return errors.New("bench e2e: --null-sink has no consumer; use it with produce")
	}
	w := f.workloadOf(e2e)
	sum := benchSummary{Mode: mode, Started: time.Now().UTC(), Command: "weir bench " + mode + " " + strings.Join(args, " "),
		Workload: w, Broker: brokerInfo{Name: f.brokerName, FlushMode: f.flushMode, Bootstrap: f.cf.bootstrap}, Machine: machine(f.dataDir)}
	topics := w.TopicNames()
	parts := f.partitions
	var consumers []*kgo.Client
	if f.nullSink {
		sum.Broker = brokerInfo{Name: "null-sink", FlushMode: f.flushMode}
	} else {
		cl, err := f.cf.client()
		if err != nil {
			return err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		for i, t := range topics {
			n, err := ensureTopic(ctx, adm, t, f.partitions, f.replicationFactor)
			if err != nil {
				return err
			}
			if n != f.partitions {
				fmt.Fprintf(stderr, "bench: topic %s exists with %d partitions (not %d)\n", t, n, f.partitions)
			}
			if i == 0 {
				parts = n
			}
		}
		w.Partitions = parts
		sum.Workload = w
		sum.Broker.APIVersions = apiVersions(ctx, adm)
		if e2e {
			if consumers, err = e2eConsumers(ctx, adm, &f, topics); err != nil {
				return err
			}
			defer func() {
				for _, c := range consumers {
					c.Close()
				}
			}()
		}
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cpu0 := processCPU()
	var progress io.Writer = stderr
	if f.quiet {
		progress = nil
	}
	newClient := f.cf.client
	if f.nullSink {
		newClient = nil
	}
	res, err := benchmarks.RunLoad(ctx, w, newClient, consumers, progress)
	if err != nil {
		return err
	}
	secs := res.Measured.Seconds()
	results := map[string]any{
		"sent": res.Sent, "acked": res.Acked, "failed": res.Failed,
		"messages": res.Messages, "bytes": res.Bytes, "duration_s": secs,
		"msgs_per_s": float64(res.Messages) / secs, "mb_per_s": float64(res.Bytes) / secs / 1e6,
	}
	// The generator's own CPU (this process: producers, and consumers with e2e), to show it is
	// not the bottleneck: cpu_s over the whole run, per message sent.
	cpu := (processCPU() - cpu0).Seconds()
	results["generator_cpu_s"] = cpu
	if res.Sent > 0 {
		results["generator_cpu_us_per_msg"] = cpu / float64(res.Sent) * 1e6
	}
	pub := summarize(res.Publish)
	rows, sums := []string{"publish"}, []latencySummary{pub}
	if e2e {
		results["consumed"] = res.Consumed
		rows, sums = append(rows, "e2e"), append(sums, summarize(res.E2E))
	}
	if res.FirstError != nil {
		results["first_error"] = res.FirstError.Error()
	}
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return err
		}
		sums[0].File = "publish.hgrm"
		if err := benchmarks.WriteHgrmFile(filepath.Join(f.out, "publish.hgrm"), res.Publish); err != nil {
			return err
		}
		if e2e {
			sums[1].File = "e2e.hgrm"
			if err := benchmarks.WriteHgrmFile(filepath.Join(f.out, "e2e.hgrm"), res.E2E); err != nil {
				return err
			}
		}
	}
	for i, r := range rows {
		results[r] = sums[i]
	}
	sum.Results = results

	target := f.topic
	if len(topics) > 1 {
		target = fmt.Sprintf("%s-0..%d", f.topic, len(topics)-1)
	}
	if f.nullSink {
		target += " (null sink, no broker)"
	}
	fmt.Fprintf(stdout, "%s %s: %d topics x %d partitions, %d B messages, %d producers, rate %s, acks=%s, compression=%s\n",
		mode, target, len(topics), parts, f.size, f.producers, rateString(f.rate), f.acks, f.compression)
	fmt.Fprintf(stdout, "sent %d, acked %d, failed %d", res.Sent, res.Acked, res.Failed)
	if e2e {
		fmt.Fprintf(stdout, ", consumed %d", res.Consumed)
	}
	fmt.Fprintf(stdout, "\nmeasured %d messages in %.2fs: %.0f msg/s, %.2f MB/s (generator CPU %.2fs, %.2f µs/msg)\n", res.Messages, secs,
		float64(res.Messages)/secs, float64(res.Bytes)/secs/1e6, cpu, cpu/float64(max(res.Sent, 1))*1e6)
	printLatencyTable(stdout, rows, sums)
	if f.out != "" {
		if err := writeJSON(filepath.Join(f.out, "summary.json"), sum); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", f.out)
	}
	if res.FirstError != nil {
		return fmt.Errorf("bench %s: %d messages failed, first: %w", mode, res.Failed, res.FirstError)
	}
	return nil
}

// e2eConsumers makes the e2e consumers: each is assigned its share of the partitions of all topics
// directly (no group), round-robin, from the end offsets before the first send, so it sees exactly
// the messages of this run.
func e2eConsumers(ctx context.Context, adm *kadm.Client, f *loadFlags, topics []string) ([]*kgo.Client, error) {
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	type tp struct {
		topic     string
		partition int32
		offset    int64
	}
	var all []tp
	var ferr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && ferr == nil {
			ferr = fmt.Errorf("end offset of %s[%d]: %w", o.Topic, o.Partition, o.Err)
		}
		all = append(all, tp{o.Topic, o.Partition, o.Offset})
	})
	if ferr != nil {
		return nil, ferr
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].topic != all[j].topic {
			return all[i].topic < all[j].topic
		}
		return all[i].partition < all[j].partition
	})
	perTopic := map[string]int{}
	for _, p := range all {
		perTopic[p.topic]++
	}
	for _, t := range topics {
		if perTopic[t] == 0 {
			return nil, fmt.Errorf("no end offsets for topic %s", t)
		}
	}
	n := max(min(f.consumers, len(all)), 1)
	assign := make([]map[string]map[int32]kgo.Offset, n)
	for i := range assign {
		assign[i] = map[string]map[int32]kgo.Offset{}
	}
	for i, p := range all {
		a := assign[i%n]
		if a[p.topic] == nil {
			a[p.topic] = map[int32]kgo.Offset{}
		}
		a[p.topic][p.partition] = kgo.NewOffset().At(p.offset)
	}
	var cs []*kgo.Client
	for _, a := range assign {
		c, err := f.cf.client(kgo.ConsumePartitions(a), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			for _, c := range cs {
				c.Close()
			}
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func rateString(r float64) string {
	if r <= 0 {
		return "max"
	}
	return fmt.Sprintf("%.0f msg/s", r)
}

// benchConsume reads the topic from the beginning of every partition as fast as it can, up to the
// end offsets at start (or --duration, or --max-messages).
func benchConsume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench consume", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	topic := fs.String("topic", "weir-bench", "topic to read")
	duration := fs.Duration("duration", time.Minute, "stop after this long")
	maxMessages := fs.Int64("max-messages", 100_000_000, "stop after this many messages")
	fetchMax := fs.Int("fetch-max-bytes", 50<<20, "fetch.max.bytes")
	partMax := fs.Int("partition-max-bytes", 1<<20, "max.partition.fetch.bytes")
	out := fs.String("out", "", "directory for summary.json")
	dataDir := fs.String("data-dir", "", "the broker's data directory, to record its filesystem in the summary")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("bench consume: unexpected arguments %q", rest)
	}
	cl, err := cf.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, *topic)
	if err != nil {
		return fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, *topic)
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	assign := map[int32]kgo.Offset{}
	target := map[int32]int64{}
	var want int64
	starts.Each(func(o kadm.ListedOffset) {
		assign[o.Partition] = kgo.NewOffset().At(o.Offset)
		if e, ok := ends.Lookup(*topic, o.Partition); ok && e.Offset > o.Offset {
			target[o.Partition] = e.Offset
			want += e.Offset - o.Offset
		}
	})
	if len(assign) == 0 {
		return fmt.Errorf("bench consume: topic %s has no partitions", *topic)
	}
	want = min(want, *maxMessages)
	consumer, err := cf.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: assign}),
		kgo.FetchMaxBytes(int32(*fetchMax)), kgo.FetchMaxPartitionBytes(int32(*partMax)), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer consumer.Close()
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	var n, bytes int64
	last, lastN := start, int64(0)
	for n < want && rctx.Err() == nil {
		fetches := consumer.PollFetches(rctx)
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
				ferr = fmt.Errorf("fetch %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if end, ok := target[r.Partition]; ok && r.Offset < end {
				n++
				bytes += int64(len(r.Value))
			}
		})
		if now := time.Now(); now.Sub(last) >= time.Second {
			fmt.Fprintf(stderr, "[%4.0fs] consumed %8.0f msg/s (%d of %d)\n", now.Sub(start).Seconds(), float64(n-lastN)/now.Sub(last).Seconds(), n, want)
			last, lastN = now, n
		}
	}
	secs := time.Since(start).Seconds()
	fmt.Fprintf(stdout, "consume %s: %d partitions, %d of %d messages, %d bytes in %.2fs: %.0f msg/s, %.2f MB/s\n",
		*topic, len(assign), n, want, bytes, secs, float64(n)/secs, float64(bytes)/secs/1e6)
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		sum := benchSummary{Mode: "consume", Started: start.UTC(), Command: "weir bench consume " + strings.Join(args, " "),
			Workload: benchmarks.Workload{Topic: *topic, Partitions: len(assign), Duration: *duration, MaxMessages: *maxMessages},
			Broker:   brokerInfo{Bootstrap: cf.bootstrap, APIVersions: apiVersions(ctx, adm)}, Machine: machine(*dataDir),
			Results: map[string]any{"messages": n, "bytes": bytes, "duration_s": secs,
				"msgs_per_s": float64(n) / secs, "mb_per_s": float64(bytes) / secs / 1e6}}
		if err := writeJSON(filepath.Join(*out, "summary.json"), sum); err != nil {
			return err
		}
	}
	if n < want && ctx.Err() == nil && rctx.Err() == nil {
		return fmt.Errorf("bench consume: read %d of %d messages", n, want)
	}
	return nil
}

// processCPU is this process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
