package broker

// The broker's side of observability (package metrics): the admin listener (metrics.listener:
// /metrics, /healthz, /readyz, pprof when metrics.pprof.enable), readiness, the request and
// fsync observers handed to netio and the engine, the produce/fetch counting helpers called by
// the handlers, and a collector that reads the broker's state at scrape time (partition offsets
// and sizes, follower lag, under-replicated partitions, the active controller, group states,
// connections). Every series is listed in docs/operations.md.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/weir-mq/weir/internal/faultctl"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/metrics"
	"github.com/weir-mq/weir/record"
)

// brokerObs is the broker's observability state (the Broker's obs field).
type brokerObs struct {
	reg   *metrics.Registry
	admin *metrics.Server
	// built is set once New has set every field of the Broker: before, the collector and
	// /readyz read nothing of it. started: Start ran; stopping: Shutdown began.
	built    atomic.Bool
	started  atomic.Bool
	stopping atomic.Bool
}

// initObs creates the registry and, unless metrics.listener is empty, binds the admin listener.
// A listener that cannot be bound is logged and skipped: the broker still serves clients (its
// /readyz is then unreachable, which health checks treat as not ready).
func (b *Broker) initObs() {
	b.obs.reg = metrics.New()
	b.obs.reg.MustRegister(&brokerCollector{b: b})
	b.obs.reg.MustRegister(&quotaCollector{b: b}) // client quotas (quotas.go)
	b.obs.reg.SetTopicAlive(func(topic string) bool {
		if !b.obs.built.Load() {
			return true
		}
		_, ok := b.topics.get(topic)
		return ok
	})
	addr := keyMetricsListener.Get(b.cfg)
	if addr == "" {
		return
	}
	s, err := metrics.Listen(metrics.ServerConfig{
		Addr:  addr,
		Pprof: keyMetricsPprofEnable.Get(b.cfg),
		Ready: b.ready,
		Extra: faultctl.Handlers(),
	}, b.obs.reg)
	if err != nil {
		slog.Error("metrics.listener: cannot listen; /metrics, /healthz and /readyz are not served", "addr", addr, "err", err)
		return
	}
	b.obs.admin = s
	slog.Info("admin listener", "metrics.listener", s.Addr(), "pprof", keyMetricsPprofEnable.Get(b.cfg))
	if faultctl.Enabled() {
		slog.Warn("this binary was built with -tags faults: the admin listener serves unauthenticated fault control (test clusters only)", "paths", faultctl.Paths())
	}
}

// stopObs closes the admin listener.
func (b *Broker) stopObs() {
	if b.obs.admin == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = b.obs.admin.Close(ctx)
}

// MetricsAddr is the bound address of the admin listener ("" when disabled or not bound).
func (b *Broker) MetricsAddr() string {
	if b.obs.admin == nil {
		return ""
	}
	return b.obs.admin.Addr()
}

// Metrics exposes the broker's metrics registry (tests, tools).
func (b *Broker) Metrics() *metrics.Registry { return b.obs.reg }

// ready is /readyz: nil once the log dirs are recovered, the listeners serve, a controller is
// known and this broker is registered and unfenced; else why not.
func (b *Broker) ready() error {
	switch {
	case b.obs.stopping.Load():
		return errors.New("shutting down")
	case !b.obs.built.Load():
		return errors.New("starting: waiting for the metadata quorum and recovering the log dirs")
	case !b.obs.started.Load():
		return errors.New("log dirs recovered; listeners not serving yet")
	}
	if id := b.ctl.ActiveID(); id < 0 {
		return errors.New("no active controller known")
	}
	bi, ok := b.ctl.Image().Brokers[b.nodeID]
	switch {
	case !ok:
		return fmt.Errorf("broker %d is not registered with the controller", b.nodeID)
	case bi.Fenced:
		return fmt.Errorf("broker %d is fenced", b.nodeID)
	}
	return nil
}

// observeISRChange counts an ISR change applied to a partition this broker leads (called by
// the replica manager when the controller accepted it).
func (b *Broker) observeISRChange(before, after []int32) {
	if b.obs.reg != nil {
		b.obs.reg.ISRChanged(before, after)
	}
}

// produceTally sums one topic's appended batches while a Produce request is handled, so the
// topic's counters are updated once per topic of the request instead of once per partition
// (each update is three atomic adds on one shared cache line). It lives on the handler's stack.
type produceTally struct {
	bytes, records, batches int
}

// add counts one appended batch as the producer sent it: its bytes and its records
// (lastOffsetDelta + 1, read from the header).
func (t *produceTally) add(batch []byte) {
	records := 0
	if len(batch) >= record.RecordCountOffset {
		records = int(int32(binary.BigEndian.Uint32(batch[record.LastOffsetDeltaOffset:]))) + 1
	}
	t.bytes += len(batch)
	t.records += records
	t.batches++
}

// observeProduced counts the batches a Produce appended to topic (the partitions answered
// without error so far, summed in t) and resets t for the next topic.
func (b *Broker) observeProduced(topic string, t *produceTally) {
	if t.batches == 0 {
		return
	}
	b.obs.reg.Topic(topic).AddProducedBatches(t.bytes, t.records, t.batches)
	*t = produceTally{}
}

// observeProduceErrors counts a Produce response's partition errors (call once, on the final
// response).
func (b *Broker) observeProduceErrors(resp *kmsg.ProduceResponse) {
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if c := resp.Topics[i].Partitions[j].ErrorCode; c != 0 {
				b.obs.reg.ProduceError(c)
			}
		}
	}
}

// fetchTally accumulates one Fetch response's record bytes per topic until the response is
// final: a long poll rebuilds its response, and only the one sent is counted. It lives on the
// handler's stack; up to len(topics) topics with data need no allocation.
type fetchTally struct {
	b       *Broker
	replica bool
	cur     string
	curN    int64
	n       int
	topics  [8]topicBytes
	more    []topicBytes
}

type topicBytes struct {
	topic string
	n     int64
}

// setTopic starts the next topic of the response.
func (t *fetchTally) setTopic(name string) {
	t.flushTopic()
	t.cur = name
}

// partition records one partition of the response: its error code (counted at once: a response
// with an error is never rebuilt) and its record bytes.
func (t *fetchTally) partition(code int16, n int64) {
	if code != 0 {
		t.b.obs.reg.FetchError(code)
	}
	t.curN += n
}

func (t *fetchTally) flushTopic() {
	if t.curN == 0 {
		return
	}
	tb := topicBytes{t.cur, t.curN}
	t.curN = 0
	if t.n < len(t.topics) {
		t.topics[t.n] = tb
		t.n++
		return
	}
	t.more = append(t.more, tb)
}

// reset forgets a response that is not sent (a long poll waiting for more).
func (t *fetchTally) reset() {
	t.cur, t.curN, t.n, t.more = "", 0, 0, t.more[:0]
}

// commit counts the response that is sent.
func (t *fetchTally) commit() {
	t.flushTopic()
	reg := t.b.obs.reg
	if t.replica {
		var sum int64
		for _, tb := range t.topics[:t.n] {
			sum += tb.n
		}
		for _, tb := range t.more {
			sum += tb.n
		}
		reg.AddReplicationBytesOut(sum)
		return
	}
	for _, tb := range t.topics[:t.n] {
		reg.Topic(tb.topic).AddFetched(tb.n)
	}
	for _, tb := range t.more {
		reg.Topic(tb.topic).AddFetched(tb.n)
	}
}

// brokerCollector reads the broker's state at scrape time.
type brokerCollector struct{ b *Broker }

var (
	partLabels          = []string{"topic", "partition"}
	descLogEndOffset    = prometheus.NewDesc("weir_partition_log_end_offset", "Offset after the last record of each partition replica on this broker.", partLabels, nil)
	descHighWatermark   = prometheus.NewDesc("weir_partition_high_watermark", "High watermark (last committed offset + 1) of each partition replica on this broker.", partLabels, nil)
	descLogStartOffset  = prometheus.NewDesc("weir_partition_log_start_offset", "First offset still kept of each partition replica on this broker.", partLabels, nil)
	descSizeBytes       = prometheus.NewDesc("weir_partition_size_bytes", "Bytes of segment files of each partition replica on this broker.", partLabels, nil)
	descReplicaLag      = prometheus.NewDesc("weir_partition_replica_lag_messages", "On the leader: its log end offset minus each follower's last fetch offset (the follower's durable end), by follower broker id.", []string{"topic", "partition", "replica"}, nil)
	descPartitions      = prometheus.NewDesc("weir_partitions", "Partition replicas on this broker (Kafka's PartitionCount).", nil, nil)
	descLeaders         = prometheus.NewDesc("weir_leader_partitions", "Partitions this broker leads (Kafka's LeaderCount).", nil, nil)
	descUnderReplicated = prometheus.NewDesc("weir_under_replicated_partitions", "Partitions this broker leads whose ISR is smaller than their replica set (Kafka's UnderReplicatedPartitions).", nil, nil)
	descUnderMinISR     = prometheus.NewDesc("weir_under_min_isr_partitions", "Partitions this broker leads whose ISR is smaller than min.insync.replicas: acks=all produce is refused (Kafka's UnderMinIsrPartitionCount).", nil, nil)
	descOffline         = prometheus.NewDesc("weir_offline_partitions", "Partitions without a leader; reported by the active controller only, 0 elsewhere (Kafka's OfflinePartitionsCount).", nil, nil)
	descControllerActv  = prometheus.NewDesc("weir_controller_active", "1 on the broker that is the active controller (the Raft leader of the metadata quorum), else 0 (Kafka's ActiveControllerCount).", nil, nil)
	descControllerID    = prometheus.NewDesc("weir_controller_active_id", "Node id of the active controller as this broker knows it; -1 when none is known.", nil, nil)
	descBrokers         = prometheus.NewDesc("weir_brokers", "Registered brokers in the metadata image, by state (fenced or unfenced).", []string{"state"}, nil)
	descGroups          = prometheus.NewDesc("weir_groups", "Consumer groups this broker coordinates, by state.", []string{"state"}, nil)
	descRebalStarted    = prometheus.NewDesc("weir_group_rebalances_started_total", "Rebalances started: groups this broker coordinates entering PreparingRebalance.", nil, nil)
	descRebalDone       = prometheus.NewDesc("weir_group_rebalances_total", "Rebalances completed: join phases of groups this broker coordinates that produced a new generation (entering CompletingRebalance).", nil, nil)
	descConnections     = prometheus.NewDesc("weir_connections", "Open client connections (all listeners).", nil, nil)
	descPanics          = prometheus.NewDesc("weir_handler_panics_total", "Request handler panics recovered (each closed its connection); should stay 0.", nil, nil)
	// The transport's memory and connection bounds (netio/budget.go, docs/security.md#what-a-client-can-cost-the-broker).
	descHeldBytes       = prometheus.NewDesc("weir_request_bytes_held", "Bytes of request frames read (or being read) and not yet released, all connections (bounded by queued.max.request.bytes).", nil, nil)
	descDecodeBytes     = prometheus.NewDesc("weir_request_decode_bytes_held", "Estimated memory of decoded requests and their responses beyond their frames (decode charges), all connections; counted with the frames against queued.max.request.bytes.", nil, nil)
	descHeldRequests    = prometheus.NewDesc("weir_requests_in_flight", "Requests read and not yet answered, all connections.", nil, nil)
	descMuted           = prometheus.NewDesc("weir_connections_muted", "Connections whose reader waits for room now (queued.max.request.bytes[.per.connection], the in-flight limit or queued.max.requests) instead of reading.", nil, nil)
	descMutes           = prometheus.NewDesc("weir_connection_mutes_total", "Times a connection's reader had to wait for room before reading a request.", nil, nil)
	descRefused         = prometheus.NewDesc("weir_connections_refused_total", "Connections closed at accept, by the limit that refused them.", []string{"limit"}, nil)
	descThrottled       = prometheus.NewDesc("weir_connection_accepts_throttled_total", "Accepts delayed by max.connection.creation.rate (broker-wide or a listener's).", nil, nil)
	descAcceptBlocked   = prometheus.NewDesc("weir_listeners_accept_blocked", "Listeners not accepting now because max.connections (or the listener's own max.connections) is reached.", nil, nil)
	descLogDirOnline    = prometheus.NewDesc("weir_log_dir_online", "1 when the log dir is online, 0 after a write or fsync failure made it read-only (KAFKA_STORAGE_ERROR).", []string{"dir"}, nil)
	descInfo            = prometheus.NewDesc("weir_broker_info", "Constant 1, labelled with this broker's version, node id and cluster id.", []string{"version", "node_id", "cluster_id"}, nil)
	descReady           = prometheus.NewDesc("weir_broker_ready", "1 when /readyz answers 200, else 0.", nil, nil)
	descFilesUsed       = prometheus.NewDesc("weir_open_files_budget_used", "Descriptors held by partition segments in this process (3 per segment).", nil, nil)
	descFilesLimit      = prometheus.NewDesc("weir_open_files_budget_limit", "Descriptors partition segments may hold (storage.descriptor.budget; derived from RLIMIT_NOFILE): creating partitions or rolling segments past it is refused. 0 = no budget.", nil, nil)
	descFilesRlimit     = prometheus.NewDesc("weir_open_files_rlimit", "RLIMIT_NOFILE soft limit after start-up raised it to the hard limit.", nil, nil)
	descMapsUsed        = prometheus.NewDesc("weir_mmap_budget_used", "Memory mappings held by partition segments in this process (2 index mappings per segment, plus read mappings).", nil, nil)
	descMapsLimit       = prometheus.NewDesc("weir_mmap_budget_limit", "Memory mappings partition segments may hold (storage.mapping.budget; derived from vm.max_map_count). 0 = no budget.", nil, nil)
	descMapsSysctl      = prometheus.NewDesc("weir_mmap_max_map_count", "vm.max_map_count read at start.", nil, nil)
	descRefusals        = prometheus.NewDesc("weir_log_dir_resource_refusals_total", "Operations (log creation, roll, checkpoint, flush) refused for lack of a descriptor, mapping or memory, or by the budget; the log dir stayed online.", []string{"dir"}, nil)
	descReplicaFailures = prometheus.NewDesc("weir_replica_log_create_failures_total", "Replica logs assigned to this broker that could not be created (retried every 5 s).", nil, nil)
	// Incremental fetch sessions (KIP-227, fetchsession.go).
	descFetchSessions      = prometheus.NewDesc("weir_fetch_sessions", "Incremental fetch sessions cached (Kafka's NumIncrementalFetchSessions; at most max.incremental.fetch.session.cache.slots).", nil, nil)
	descFetchSessionParts  = prometheus.NewDesc("weir_fetch_session_partitions", "Partitions cached by all incremental fetch sessions (Kafka's NumIncrementalFetchPartitionsCached).", nil, nil)
	descFetchSessionEvicts = prometheus.NewDesc("weir_fetch_session_evictions_total", "Fetch sessions evicted to make room for new ones (Kafka's IncrementalFetchSessionEvictionsPerSec).", nil, nil)
	descFetchSessionReqs   = prometheus.NewDesc("weir_fetch_session_requests_total", "Fetch requests by how they were served: sessionless (epoch -1), full (opens a session), incremental, or error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR).", []string{"kind"}, nil)
)

var groupStates = []string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}

func (c *brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLogEndOffset, descHighWatermark, descLogStartOffset, descSizeBytes,
		descReplicaLag, descPartitions, descLeaders, descUnderReplicated, descUnderMinISR, descOffline,
		descControllerActv, descControllerID, descBrokers, descGroups, descRebalStarted, descRebalDone,
		descConnections, descPanics, descLogDirOnline, descInfo, descReady,
		descHeldBytes, descDecodeBytes, descHeldRequests, descMuted, descMutes, descRefused, descAcceptBlocked, descThrottled,
		descFilesUsed, descFilesLimit, descFilesRlimit, descMapsUsed, descMapsLimit, descMapsSysctl, descRefusals, descReplicaFailures,
		descFetchSessions, descFetchSessionParts, descFetchSessionEvicts, descFetchSessionReqs} {
		ch <- d
	}
}

func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	ready := 0.0
	if b.ready() == nil {
		ready = 1
	}
	gauge(descReady, ready)
	if !b.obs.built.Load() || b.obs.stopping.Load() {
		return
	}
	gauge(descInfo, 1, Version, strconv.Itoa(int(b.nodeID)), b.clusterID)
	// Partition replicas: offsets and sizes from the logs.
	logs := b.logs.Logs()
	for tp, l := range logs {
		p := strconv.Itoa(int(tp.Partition))
		gauge(descLogEndOffset, float64(l.LogEndOffset()), tp.Topic, p)
		gauge(descHighWatermark, float64(l.HighWatermark()), tp.Topic, p)
		gauge(descLogStartOffset, float64(l.LogStartOffset()), tp.Topic, p)
		gauge(descSizeBytes, float64(l.Size()), tp.Topic, p)
	}
	gauge(descPartitions, float64(len(logs)))
	for _, d := range b.logs.Dirs() {
		online := 1.0
		if d.Err() != nil {
			online = 0
		}
		gauge(descLogDirOnline, online, d.Path)
		counter(descRefusals, float64(d.Refusals()), d.Path)
	}
	// The descriptor and mapping budget (budget.go).
	if bg := b.budget; bg != nil {
		files, maps := bg.Usage()
		gauge(descFilesUsed, float64(files))
		gauge(descFilesLimit, float64(bg.MaxDescriptors))
		gauge(descFilesRlimit, float64(bg.DescriptorLimit))
		gauge(descMapsUsed, float64(maps))
		gauge(descMapsLimit, float64(bg.MaxMappings))
		gauge(descMapsSysctl, float64(bg.MappingLimit))
	}
	counter(descReplicaFailures, float64(b.rm.createFailures.Load()))
	// Fetch sessions.
	fs := &b.fetchSessions
	gauge(descFetchSessions, float64(fs.numSessions.Load()))
	gauge(descFetchSessionParts, float64(fs.numPartitions.Load()))
	counter(descFetchSessionEvicts, float64(fs.evictions.Load()))
	for k, name := range fetchKindNames {
		counter(descFetchSessionReqs, float64(fs.requests[k].Load()), name)
	}
	// Follower lag, on the leader.
	b.rm.mu.RLock()
	reps := make([]*replica, 0, len(b.rm.parts))
	for _, r := range b.rm.parts {
		reps = append(reps, r)
	}
	b.rm.mu.RUnlock()
	for _, r := range reps {
		r.mu.Lock()
		if r.state != nil {
			end := r.log.LogEndOffset()
			for _, id := range r.info.Replicas {
				if id == b.nodeID {
					continue
				}
				if fe, ok := r.state.FollowerEnd(id); ok {
					gauge(descReplicaLag, float64(max(end-fe, 0)), r.tp.Topic, strconv.Itoa(int(r.tp.Partition)), strconv.Itoa(int(id)))
				}
			}
		}
		r.mu.Unlock()
	}
	// The metadata image: leaderships, ISRs, brokers, the controller.
	img := b.ctl.Image()
	active := b.ctl.ActiveID()
	var leaders, under, underMin, offline int
	for _, t := range img.Topics {
		minISR := -1
		for _, pi := range t.Partitions {
			if pi.Leader < 0 {
				offline++
			}
			if pi.Leader != b.nodeID {
				continue
			}
			leaders++
			if len(pi.ISR) < len(pi.Replicas) {
				under++
			}
			if minISR < 0 {
				minISR = b.minISR(t)
			}
			if len(pi.ISR) < min(minISR, len(pi.Replicas)) { // effective: capped at the replicas, as Kafka's isUnderMinIsr
				underMin++
			}
		}
	}
	gauge(descLeaders, float64(leaders))
	gauge(descUnderReplicated, float64(under))
	gauge(descUnderMinISR, float64(underMin))
	isActive := 0.0
	if active == b.nodeID {
		isActive = 1
	} else {
		offline = 0
	}
	gauge(descOffline, float64(offline))
	gauge(descControllerActv, isActive)
	gauge(descControllerID, float64(active))
	var fenced, unfenced int
	for _, bi := range img.Brokers {
		if bi.Fenced {
			fenced++
		} else {
			unfenced++
		}
	}
	gauge(descBrokers, float64(fenced), "fenced")
	gauge(descBrokers, float64(unfenced), "unfenced")
	// Groups.
	if co := b.groups.coord; co != nil {
		counts := co.GroupStateCounts()
		for _, s := range groupStates {
			gauge(descGroups, float64(counts[s]), s)
		}
		started, done := co.RebalanceCounts()
		counter(descRebalStarted, float64(started))
		counter(descRebalDone, float64(done))
	}
	gauge(descConnections, float64(b.server.ConnectionCount()))
	counter(descPanics, float64(b.server.HandlerPanics()))
	ns := b.server.Stats()
	gauge(descHeldBytes, float64(ns.HeldBytes))
	gauge(descDecodeBytes, float64(ns.DecodeBytes))
	gauge(descHeldRequests, float64(ns.HeldRequests))
	gauge(descMuted, float64(ns.Muted))
	counter(descMutes, float64(ns.MutedTotal))
	counter(descRefused, float64(ns.RefusedPerIP), "max.connections.per.ip")
	gauge(descAcceptBlocked, float64(ns.WaitingAccept))
	counter(descThrottled, float64(ns.Throttled))
}

// minISR is a topic's min.insync.replicas (each partition caps it at its replica count).
func (b *Broker) minISR(t *controller.TopicInfo) int {
	return keyMinInsyncReplicas.Topic(b.cfg, t.Configs)
}

var _ engine.Observer = (*metrics.Registry)(nil)
