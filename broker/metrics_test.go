package broker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/metrics"
)

// series is one scrape: the text-format sample lines, keyed by `name{labels}` as printed.
type series map[string]float64

func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func scrape(t testing.TB, b *Broker) series {
	t.Helper()
	return scrapeAddr(t, b.MetricsAddr())
}

// scrapeAddr reads the /metrics of the admin HTTP listener at addr (host:port).
func scrapeAddr(t testing.TB, addr string) series {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	out := series{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// sum adds the samples of name whose labels include every label="value" pair given.
func (s series) sum(name string, labels ...string) (float64, bool) {
	var total float64
	found := false
	for k, v := range s {
		n, ls, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(ls, labels[i]+`="`+labels[i+1]+`"`) {
				ok = false
			}
		}
		if ok {
			total += v
			found = true
		}
	}
	return total, found
}

func (s series) must(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.sum(name, labels...)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// TestMetricsEndpoint scrapes an in-process broker before and after a produce, fetch and
// consumer-group load and checks that the documented series exist and move.
func TestMetricsEndpoint(t *testing.T) {
	b := startBroker(t, map[string]string{"metrics.listener": "127.0.0.1:0", "group.initial.rebalance.delay.ms": "0"})
	base := "http://" + b.MetricsAddr()
	if code, body := httpGet(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := httpGet(t, base+"/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := httpGet(t, base+"/debug/pprof/"); code != 404 {
		t.Errorf("pprof served by default: %d", code)
	}

	before := scrape(t, b)
	for _, name := range []string{
		"weir_broker_info", "weir_broker_ready", "weir_partitions", "weir_leader_partitions",
		"weir_under_replicated_partitions", "weir_under_min_isr_partitions", "weir_offline_partitions",
		"weir_controller_active", "weir_controller_active_id", "weir_brokers", "weir_groups",
		"weir_group_rebalances_total", "weir_group_rebalances_started_total", "weir_connections",
		"weir_handler_panics_total", "weir_log_dir_online", "weir_isr_shrinks_total", "weir_isr_expands_total",
		"weir_log_flush_duration_seconds_count", "weir_log_flush_batch_appends_count",
		"weir_replication_bytes_out_total", "go_goroutines", "process_open_fds",
		"weir_request_bytes_held", "weir_request_decode_bytes_held", "weir_requests_in_flight", "weir_connections_muted", "weir_connection_mutes_total",
		"weir_listeners_accept_blocked", "weir_connection_accepts_throttled_total",
		"weir_open_files_budget_used", "weir_open_files_budget_limit", "weir_open_files_rlimit",
		"weir_mmap_budget_used", "weir_mmap_budget_limit", "weir_mmap_max_map_count",
		"weir_log_dir_resource_refusals_total", "weir_replica_log_create_failures_total",
	} {
		before.must(t, name)
	}
	if used, limit := before.must(t, "weir_open_files_budget_used"), before.must(t, "weir_open_files_budget_limit"); used < 0 || limit <= used {
		t.Errorf("descriptor budget: %v used of %v", used, limit)
	}
	if v := before.must(t, "weir_controller_active"); v != 1 {
		t.Errorf("weir_controller_active = %v on a single broker", v)
	}
	if v := before.must(t, "weir_controller_active_id"); v != float64(b.nodeID) {
		t.Errorf("weir_controller_active_id = %v, want %d", v, b.nodeID)
	}
	if v := before.must(t, "weir_broker_ready"); v != 1 {
		t.Errorf("weir_broker_ready = %v", v)
	}

	// Load: a topic, 500 records produced, consumed by a group member.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic, n = "metrics-demo", 500
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var produced int64
	for i := 0; i < n; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("value-%04d", i))}
		produced += int64(len(r.Value))
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumerGroup("metrics-group"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll after %d: %v", got, err)
		}
		got += fs.NumRecords()
	}
	// Errors: a produce to a partition that does not exist, a fetch past the log end.
	seed := cl.Broker(int(b.nodeID))
	tds, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = 1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic, pt.TopicID = topic, tds[topic].ID
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = 99
	pp.Records = []byte{0}
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	if _, err := seed.Request(ctx, preq); err != nil {
		t.Fatal(err)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.ReplicaID, freq.MaxBytes = -1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, tds[topic].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 1<<40, 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	if _, err := seed.Request(ctx, freq); err != nil {
		t.Fatal(err)
	}

	// The group reaches Stable; the scrape-time series follow.
	var after series
	for deadline := time.Now().Add(10 * time.Second); ; {
		after = scrape(t, b)
		stable, _ := after.sum("weir_groups", "state", "Stable")
		synced, _ := after.sum("weir_requests_total", "api", "SyncGroup") // counted once its reply is written
		if stable == 1 && synced > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("weir_groups{state=Stable} = %v", after.must(t, "weir_groups", "state", "Stable"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	grew := func(name string, labels ...string) {
		t.Helper()
		b0, _ := before.sum(name, labels...)
		a := after.must(t, name, labels...)
		if a <= b0 {
			t.Errorf("%s%v did not grow: %v -> %v", name, labels, b0, a)
		}
	}
	for _, api := range []string{"Produce", "Fetch", "Metadata", "JoinGroup", "SyncGroup", "FindCoordinator", "CreateTopics"} {
		grew("weir_requests_total", "api", api)
		grew("weir_request_duration_seconds_count", "api", api)
	}
	grew("weir_log_flush_duration_seconds_count")
	grew("weir_log_flush_batch_appends_sum")
	grew("weir_group_rebalances_total")
	grew("weir_group_rebalances_started_total")
	grew("weir_produce_errors_total") // UNKNOWN_TOPIC_OR_PARTITION, or UNKNOWN_TOPIC_ID for Produce v13+
	grew("weir_fetch_errors_total", "error", "OFFSET_OUT_OF_RANGE")
	if v := after.must(t, "weir_topic_messages_in_total", "topic", topic); v != n {
		t.Errorf("weir_topic_messages_in_total = %v, want %d", v, n)
	}
	if v := after.must(t, "weir_topic_bytes_in_total", "topic", topic); v < float64(produced) {
		t.Errorf("weir_topic_bytes_in_total = %v, less than the %d value bytes produced", v, produced)
	}
	in := after.must(t, "weir_topic_bytes_in_total", "topic", topic)
	if v := after.must(t, "weir_topic_bytes_out_total", "topic", topic); v < in {
		t.Errorf("weir_topic_bytes_out_total = %v, less than the %v bytes in (everything was consumed)", v, in)
	}
	if v := after.must(t, "weir_partition_log_end_offset", "topic", topic); v != n {
		t.Errorf("sum of weir_partition_log_end_offset = %v, want %d", v, n)
	}
	if v := after.must(t, "weir_partition_high_watermark", "topic", topic); v != n {
		t.Errorf("sum of weir_partition_high_watermark = %v, want %d", v, n)
	}
	after.must(t, "weir_partition_log_start_offset", "topic", topic, "partition", "1")
	if v := after.must(t, "weir_partition_size_bytes", "topic", topic); v != in {
		t.Errorf("weir_partition_size_bytes = %v, want the %v bytes appended", v, in)
	}
	if v := after.must(t, "weir_connections"); v < 2 {
		t.Errorf("weir_connections = %v with two clients connected", v)
	}
	if v := after.must(t, "weir_leader_partitions"); v < 2 {
		t.Errorf("weir_leader_partitions = %v", v)
	}
	if v := after.must(t, "weir_under_replicated_partitions"); v != 0 {
		t.Errorf("weir_under_replicated_partitions = %v on a single broker", v)
	}
}

// TestReadyzAndPprof checks /readyz before Start (not ready, with a reason) and after, and
// that metrics.pprof.enable serves the profiling endpoints.
func TestReadyzAndPprof(t *testing.T) {
	cfg, err := NewConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir(),
		"metrics.listener": "127.0.0.1:0", "metrics.pprof.enable": "true"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
	}()
	base := "http://" + b.MetricsAddr()
	if code, body := httpGet(t, base+"/readyz"); code != 503 || !strings.Contains(body, "not serving") {
		t.Errorf("/readyz before Start: %d %q", code, body)
	}
	if code, _ := httpGet(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz before Start: %d", code)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if code, body := httpGet(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz after Start: %d %q", code, body)
	}
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap?debug=1"} {
		if code, _ := httpGet(t, base+p); code != 200 {
			t.Errorf("%s with metrics.pprof.enable=true: %d", p, code)
		}
	}
	// Disabled listener: no address.
	b2 := startBroker(t, map[string]string{"metrics.listener": ""})
	if a := b2.MetricsAddr(); a != "" {
		t.Errorf("metrics.listener empty but bound %s", a)
	}
}

// TestFetchTallyNoAlloc checks the per-request counting of the fetch path allocates nothing.
func TestFetchTallyNoAlloc(t *testing.T) {
	b := &Broker{}
	b.obs.reg = metrics.New()
	b.obs.reg.Topic("a")
	b.obs.reg.Topic("b")
	n := testing.AllocsPerRun(1000, func() {
		tally := fetchTally{b: b}
		tally.setTopic("a")
		tally.partition(0, 100)
		tally.partition(1, 0)
		tally.setTopic("b")
		tally.partition(0, 50)
		tally.reset()
		tally.setTopic("a")
		tally.partition(0, 10)
		tally.commit()
	})
	if n != 0 {
		t.Errorf("%v allocations per fetch tally", n)
	}
}
