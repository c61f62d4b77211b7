// Package metrics is weir's observability: a Prometheus registry with the broker's series
// (requests, bytes in and out per topic, produce and fetch errors, fdatasync latency and
// group-commit batch sizes, ISR changes) and the admin HTTP server that serves /metrics,
// /healthz, /readyz and, when enabled, Go's pprof endpoints.
//
// Hot paths (every request, every produce and fetch, every fsync) only touch atomics and
// pre-created histogram children: no allocation, no lock. Per-topic counters live in a
// copy-on-write map read without locking. State that is already kept elsewhere (log end
// offsets, ISRs, group states) is read at scrape time by collectors the broker registers
// (prometheus.Collector), not mirrored into gauges on every change.
//
// The package knows nothing of the broker: it imports only the Prometheus client and
// franz-go's API and error names.
package metrics

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Namespace prefixes every weir series.
const Namespace = "weir"

const (
	maxAPIKey  = 128 // Kafka API keys are < 100 today
	maxVersion = 32
	maxCode    = 256 // error codes 0..254; index 255 holds -1 (UNKNOWN_SERVER_ERROR) and anything else
)

// Registry holds weir's metrics. Its methods are safe for concurrent use; the hot-path ones
// (RequestDone, ObserveFsync, Topic, the TopicCounters adders, ProduceError, FetchError)
// allocate nothing once a topic or API has been seen.
type Registry struct {
	reg *prometheus.Registry

	requests [maxAPIKey][maxVersion]atomic.Uint64
	latency  *prometheus.HistogramVec
	latCache [maxAPIKey]atomic.Pointer[observer]

	flushTime  prometheus.Histogram
	flushBatch prometheus.Histogram

	produceErrs [maxCode]atomic.Uint64
	fetchErrs   [maxCode]atomic.Uint64

	isrShrinks prometheus.Counter
	isrExpands prometheus.Counter

	replicationBytesOut atomic.Uint64

	topicsMu sync.Mutex // serializes writers of topics
	topics   atomic.Pointer[map[string]*TopicCounters]
	// TopicAlive, when set, tells at scrape time whether a topic still exists; the counters
	// of deleted topics are dropped so their series disappear.
	topicAlive atomic.Pointer[func(string) bool]
}

type observer struct{ prometheus.Observer }

// TopicCounters are one topic's traffic counters.
type TopicCounters struct {
	bytesIn     atomic.Uint64
	bytesOut    atomic.Uint64
	messagesIn  atomic.Uint64
	produceReqs atomic.Uint64
	fetchReqs   atomic.Uint64
}

// AddProduced counts one appended batch of n bytes holding records records.
func (t *TopicCounters) AddProduced(n, records int) {
	t.bytesIn.Add(uint64(n))
	t.messagesIn.Add(uint64(records))
	t.produceReqs.Add(1)
}

// AddProducedBatches counts batches appended batches of n bytes in all holding records records
// (one call for all the batches of a topic in one Produce request).
func (t *TopicCounters) AddProducedBatches(n, records, batches int) {
	t.bytesIn.Add(uint64(n))
	t.messagesIn.Add(uint64(records))
	t.produceReqs.Add(uint64(batches))
}

// AddFetched counts n record bytes returned to a consumer.
func (t *TopicCounters) AddFetched(n int64) {
	t.bytesOut.Add(uint64(n))
	t.fetchReqs.Add(1)
}

// LatencyBuckets are the request latency histogram's upper bounds in seconds: 50 us to ~52 s.
var LatencyBuckets = prometheus.ExponentialBuckets(0.00005, 2, 21)

// FsyncBuckets are the fdatasync latency histogram's upper bounds in seconds: 10 us to ~5 s.
var FsyncBuckets = prometheus.ExponentialBuckets(0.00001, 2, 20)

// BatchBuckets are the group-commit batch size histogram's upper bounds (appends per fsync).
var BatchBuckets = prometheus.ExponentialBuckets(1, 2, 14)

// New returns a registry with weir's series and the Go runtime and process collectors.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	empty := map[string]*TopicCounters{}
	r.topics.Store(&empty)
	r.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "request_duration_seconds",
		Help:    "Time from reading a request to writing its response (long-polling fetches and acks=all produces include their wait), by API.",
		Buckets: LatencyBuckets,
	}, []string{"api"})
	r.flushTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "log_flush_duration_seconds",
		Help:    "Duration of one flush cycle of a partition's group-commit flusher: the fdatasync (plus any segment seal) that makes the waiting appends durable.",
		Buckets: FsyncBuckets,
	})
	r.flushBatch = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "log_flush_batch_appends",
		Help:    "Appends made durable by one flush cycle (group-commit batch size).",
		Buckets: BatchBuckets,
	})
	r.isrShrinks = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "isr_shrinks_total",
		Help: "ISR changes applied for partitions this broker leads that removed replicas.",
	})
	r.isrExpands = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "isr_expands_total",
		Help: "ISR changes applied for partitions this broker leads that added replicas.",
	})
	r.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		r.latency, r.flushTime, r.flushBatch, r.isrShrinks, r.isrExpands,
		(*counterCollector)(r),
	)
	return r
}

// Prometheus returns the underlying registry (to register more collectors, or to gather).
func (r *Registry) Prometheus() *prometheus.Registry { return r.reg }

// MustRegister registers collectors with the registry.
func (r *Registry) MustRegister(cs ...prometheus.Collector) { r.reg.MustRegister(cs...) }

// RequestDone counts one answered request and observes its latency (netio.Observer).
func (r *Registry) RequestDone(key, version int16, d time.Duration) {
	if key < 0 || key >= maxAPIKey {
		return
	}
	if version >= 0 && version < maxVersion {
		r.requests[key][version].Add(1)
	}
	o := r.latCache[key].Load()
	if o == nil {
		o = &observer{r.latency.WithLabelValues(apiName(key))}
		if !r.latCache[key].CompareAndSwap(nil, o) {
			o = r.latCache[key].Load()
		}
	}
	o.Observe(d.Seconds())
}

// ObserveFsync records one flush cycle (engine.Observer).
func (r *Registry) ObserveFsync(d time.Duration, appends int) {
	r.flushTime.Observe(d.Seconds())
	r.flushBatch.Observe(float64(appends))
}

// Topic returns topic's counters, creating them on first use.
func (r *Registry) Topic(name string) *TopicCounters {
	if t, ok := (*r.topics.Load())[name]; ok {
		return t
	}
	r.topicsMu.Lock()
	defer r.topicsMu.Unlock()
	old := *r.topics.Load()
	if t, ok := old[name]; ok {
		return t
	}
	m := make(map[string]*TopicCounters, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	t := &TopicCounters{}
	m[name] = t
	r.topics.Store(&m)
	return t
}

// SetTopicAlive sets the function that tells, at scrape time, whether a topic still exists.
func (r *Registry) SetTopicAlive(f func(topic string) bool) { r.topicAlive.Store(&f) }

// pruneTopics drops the counters of topics that no longer exist.
func (r *Registry) pruneTopics() {
	fp := r.topicAlive.Load()
	if fp == nil {
		return
	}
	alive := *fp
	cur := *r.topics.Load()
	dead := false
	for name := range cur {
		if !alive(name) {
			dead = true
			break
		}
	}
	if !dead {
		return
	}
	r.topicsMu.Lock()
	defer r.topicsMu.Unlock()
	old := *r.topics.Load()
	m := make(map[string]*TopicCounters, len(old))
	for k, v := range old {
		if alive(k) {
			m[k] = v
		}
	}
	r.topics.Store(&m)
}

func codeIndex(code int16) int {
	if code < 0 || code >= maxCode-1 {
		return maxCode - 1
	}
	return int(code)
}

// ProduceError counts one produced partition answered with error code (non-zero).
func (r *Registry) ProduceError(code int16) { r.produceErrs[codeIndex(code)].Add(1) }

// FetchError counts one fetched partition answered with error code (non-zero).
func (r *Registry) FetchError(code int16) { r.fetchErrs[codeIndex(code)].Add(1) }

// ISRChanged counts an applied ISR change of a partition this broker leads from before to
// after members: a shrink, an expansion, or (a replacement) both.
func (r *Registry) ISRChanged(before, after []int32) {
	removed, added := false, false
	for _, id := range before {
		if !contains(after, id) {
			removed = true
		}
	}
	for _, id := range after {
		if !contains(before, id) {
			added = true
		}
	}
	if removed {
		r.isrShrinks.Inc()
	}
	if added {
		r.isrExpands.Inc()
	}
}

// AddReplicationBytesOut counts record bytes sent to follower replicas.
func (r *Registry) AddReplicationBytesOut(n int64) { r.replicationBytesOut.Add(uint64(n)) }

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func apiName(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return "Unknown" + strconv.Itoa(int(key))
}

func codeName(i int) string {
	if i == maxCode-1 {
		return kerr.UnknownServerError.Message
	}
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(int16(i)), &ke) {
		return ke.Message
	}
	return "CODE_" + strconv.Itoa(i)
}

// counterCollector emits the atomic counters (requests, errors, per-topic traffic) at scrape time.
type counterCollector Registry

var (
	descRequests = prometheus.NewDesc(Namespace+"_requests_total",
		"Requests answered, by API and version.", []string{"api", "version"}, nil)
	descProduceErrs = prometheus.NewDesc(Namespace+"_produce_errors_total",
		"Produced partitions answered with an error, by Kafka error code name.", []string{"error"}, nil)
	descFetchErrs = prometheus.NewDesc(Namespace+"_fetch_errors_total",
		"Fetched partitions (consumers and followers) answered with an error, by Kafka error code name.", []string{"error"}, nil)
	descBytesIn = prometheus.NewDesc(Namespace+"_topic_bytes_in_total",
		"Record batch bytes appended by producers, by topic (Kafka's BytesInPerSec).", []string{"topic"}, nil)
	descBytesOut = prometheus.NewDesc(Namespace+"_topic_bytes_out_total",
		"Record bytes returned to consumers by Fetch, by topic (Kafka's BytesOutPerSec; follower fetches are in weir_replication_bytes_out_total).", []string{"topic"}, nil)
	descMessagesIn = prometheus.NewDesc(Namespace+"_topic_messages_in_total",
		"Records appended by producers, by topic (Kafka's MessagesInPerSec).", []string{"topic"}, nil)
	descProduceParts = prometheus.NewDesc(Namespace+"_topic_produced_batches_total",
		"Record batches appended by producers, by topic.", []string{"topic"}, nil)
	descFetchParts = prometheus.NewDesc(Namespace+"_topic_fetched_partitions_total",
		"Partition reads of consumer fetches that returned records, by topic.", []string{"topic"}, nil)
	descReplOut = prometheus.NewDesc(Namespace+"_replication_bytes_out_total",
		"Record bytes returned to follower replicas by Fetch.", nil, nil)
)

func (c *counterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descProduceErrs, descFetchErrs, descBytesIn,
		descBytesOut, descMessagesIn, descProduceParts, descFetchParts, descReplOut} {
		ch <- d
	}
}

func (c *counterCollector) Collect(ch chan<- prometheus.Metric) {
	r := (*Registry)(c)
	for k := range r.requests {
		var name string
		for v := range r.requests[k] {
			n := r.requests[k][v].Load()
			if n == 0 {
				continue
			}
			if name == "" {
				name = apiName(int16(k))
			}
			ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(n), name, strconv.Itoa(v))
		}
	}
	for i := range r.produceErrs {
		if n := r.produceErrs[i].Load(); n > 0 {
			ch <- prometheus.MustNewConstMetric(descProduceErrs, prometheus.CounterValue, float64(n), codeName(i))
		}
	}
	for i := range r.fetchErrs {
		if n := r.fetchErrs[i].Load(); n > 0 {
			ch <- prometheus.MustNewConstMetric(descFetchErrs, prometheus.CounterValue, float64(n), codeName(i))
		}
	}
	r.pruneTopics()
	for name, t := range *r.topics.Load() {
		ch <- prometheus.MustNewConstMetric(descBytesIn, prometheus.CounterValue, float64(t.bytesIn.Load()), name)
		ch <- prometheus.MustNewConstMetric(descBytesOut, prometheus.CounterValue, float64(t.bytesOut.Load()), name)
		ch <- prometheus.MustNewConstMetric(descMessagesIn, prometheus.CounterValue, float64(t.messagesIn.Load()), name)
		ch <- prometheus.MustNewConstMetric(descProduceParts, prometheus.CounterValue, float64(t.produceReqs.Load()), name)
		ch <- prometheus.MustNewConstMetric(descFetchParts, prometheus.CounterValue, float64(t.fetchReqs.Load()), name)
	}
	ch <- prometheus.MustNewConstMetric(descReplOut, prometheus.CounterValue, float64(r.replicationBytesOut.Load()))
}
