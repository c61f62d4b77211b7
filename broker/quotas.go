package broker

// Client quotas as Kafka's (KIP-13, KIP-124, KIP-546, KIP-599): the quota table, built from the
// metadata records of kind "client-quota", the precedence that picks the quota of a request,
// and the per-entity sensors that turn what a client did into a throttle time.
//
// Storage: one record per quota entity (user, client id, or both; a nil name is the entity's
// <default>), key quotaEntity.key(), value the JSON object of its quota keys and values. The
// broker's table is rebuilt only when the kind's version (Image.RecordsIndex) moves; a request
// finds it with one pointer comparison.
//
// Precedence (Kafka's DefaultQuotaCallback), for a request of user U and client id C, each
// quota key separately: /users/U/clients/C, /users/U/clients/<default>, /users/U,
// /users/<default>/clients/C, /users/<default>/clients/<default>, /users/<default>,
// /clients/C, /clients/<default>. The first entity that sets the key gives the bound, and the
// level decides who shares a sensor: levels 1, 2, 4, 5 one sensor per (U, C); levels 3 and 6
// one per user U (all its client ids together); levels 7 and 8 one per client id C. A user is
// the principal's name (alice for User:alice, ANONYMOUS when unauthenticated).
//
// Sensors: byte rates and request_percentage are Kafka's Rate over quota.window.num samples of
// quota.window.size.seconds (SampledStat: the window is at least num-1 whole samples); when a
// recorded value takes the rate over the bound the throttle is (rate-bound)/bound x window
// (QuotaUtils.throttleTime). controller_mutation_rate is Kafka's TokenBucket: a burst of
// num x size x rate partitions, refilled at the rate; an empty bucket throttles for
// -tokens/rate.
//
// Hot path: with no entity setting a key, a produce or fetch pays an image pointer load and
// compare, and one bool: no lock, no allocation.

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/netio"
)

const quotaRecordKind = controller.RecordKindClientQuota

// quotaType is one of the quota keys weir enforces.
type quotaType int

const (
	quotaProduce  quotaType = iota // producer_byte_rate, bytes/s of produce requests
	quotaFetch                     // consumer_byte_rate, bytes/s of fetch responses
	quotaRequest                   // request_percentage, % of one handler thread
	quotaMutation                  // controller_mutation_rate, partitions created/deleted per second
	numQuotaTypes
)

// quotaKeyNames are the quota keys, by quotaType: the only keys AlterClientQuotas accepts for
// user and client-id entities (Kafka's QuotaConfig.userAndClientQuotaConfigs).
var quotaKeyNames = [numQuotaTypes]string{"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}

// quotaKeyIntegral: Kafka types the byte rates LONG (whole numbers only), the others DOUBLE.
var quotaKeyIntegral = [numQuotaTypes]bool{true, true, false, false}

func quotaTypeOf(key string) (quotaType, bool) {
	for i, n := range quotaKeyNames {
		if n == key {
			return quotaType(i), true
		}
	}
	return 0, false
}

// Entity types of KIP-546.
const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
	quotaEntityIP       = "ip"
)

// quotaEntity names a quota entity: a user, a client id, or both. A Default flag means the
// entity type's <default> (a nil name on the wire), and then the name is "".
type quotaEntity struct {
	HasUser     bool
	UserDefault bool
	User        string
	HasClient   bool
	// ClientDefault is the client-id <default>.
	ClientDefault bool
	Client        string
}

// key is the entity's record key: "user=<escaped>" or "user*" (default), then
// "&client-id=<escaped>" or "&client-id*", in that order.
func (e quotaEntity) key() string {
	var parts []string
	if e.HasUser {
		if e.UserDefault {
			parts = append(parts, quotaEntityUser+"*")
		} else {
			parts = append(parts, quotaEntityUser+"="+url.QueryEscape(e.User))
		}
	}
	if e.HasClient {
		if e.ClientDefault {
			parts = append(parts, quotaEntityClientID+"*")
		} else {
			parts = append(parts, quotaEntityClientID+"="+url.QueryEscape(e.Client))
		}
	}
	return strings.Join(parts, "&")
}

func parseQuotaEntityKey(k string) (quotaEntity, error) {
	var e quotaEntity
	for _, part := range strings.Split(k, "&") {
		typ, name, named := strings.Cut(part, "=")
		def := !named && strings.HasSuffix(typ, "*")
		if def {
			typ = strings.TrimSuffix(typ, "*")
		} else if !named {
			return e, fmt.Errorf("quota entity key %q: bad part %q", k, part)
		}
		n, err := url.QueryUnescape(name)
		if err != nil {
			return e, fmt.Errorf("quota entity key %q: %w", k, err)
		}
		switch typ {
		case quotaEntityUser:
			e.HasUser, e.UserDefault, e.User = true, def, n
		case quotaEntityClientID:
			e.HasClient, e.ClientDefault, e.Client = true, def, n
		default:
			return e, fmt.Errorf("quota entity key %q: unknown type %q", k, typ)
		}
	}
	if !e.HasUser && !e.HasClient {
		return e, fmt.Errorf("quota entity key %q: empty", k)
	}
	return e, nil
}

// components returns the entity as KIP-546 (type, name) pairs, nil name = default.
func (e quotaEntity) components() []quotaComponent {
	var out []quotaComponent
	if e.HasUser {
		c := quotaComponent{Type: quotaEntityUser}
		if !e.UserDefault {
			n := e.User
			c.Name = &n
		}
		out = append(out, c)
	}
	if e.HasClient {
		c := quotaComponent{Type: quotaEntityClientID}
		if !e.ClientDefault {
			n := e.Client
			c.Name = &n
		}
		out = append(out, c)
	}
	return out
}

type quotaComponent struct {
	Type string
	Name *string
}

// quotaTable is the quotas of one version of the client-quota records. Read-only once built.
type quotaTable struct {
	// entries are every entity's quota keys and values (DescribeClientQuotas).
	entries map[quotaEntity]map[string]float64
	// byType[t] maps each entity that sets quota t to its bound.
	byType [numQuotaTypes]map[quotaEntity]float64
	// any[t]: some entity sets quota t (false: nothing to check on the hot path).
	any [numQuotaTypes]bool
}

func buildQuotaTable(recs map[string]string) *quotaTable {
	t := &quotaTable{entries: make(map[quotaEntity]map[string]float64, len(recs))}
	for i := range t.byType {
		t.byType[i] = map[quotaEntity]float64{}
	}
	for k, v := range recs {
		e, err := parseQuotaEntityKey(k)
		if err != nil {
			slog.Warn("ignoring an undecodable client quota record", "key", k, "err", err)
			continue
		}
		var vals map[string]float64
		if err := json.Unmarshal([]byte(v), &vals); err != nil {
			slog.Warn("ignoring an undecodable client quota record", "key", k, "err", err)
			continue
		}
		t.entries[e] = vals
		for key, val := range vals {
			if typ, ok := quotaTypeOf(key); ok {
				t.byType[typ][e] = val
				t.any[typ] = true
			}
		}
	}
	return t
}

// sensorKey names who shares a sensor: the metric tags of Kafka's quota sensors.
type sensorKey struct {
	typ          quotaType
	user, client string
}

// match walks the 8 levels of precedence for quota typ and returns the bound and the sensor
// key, ok false when no entity sets typ for (user, client).
func (t *quotaTable) match(typ quotaType, user, client string) (bound float64, sk sensorKey, ok bool) {
	m := t.byType[typ]
	levels := [8]struct {
		e          quotaEntity
		tagU, tagC bool
	}{
		{quotaEntity{HasUser: true, User: user, HasClient: true, Client: client}, true, true},
		{quotaEntity{HasUser: true, User: user, HasClient: true, ClientDefault: true}, true, true},
		{quotaEntity{HasUser: true, User: user}, true, false},
		{quotaEntity{HasUser: true, UserDefault: true, HasClient: true, Client: client}, true, true},
		{quotaEntity{HasUser: true, UserDefault: true, HasClient: true, ClientDefault: true}, true, true},
		{quotaEntity{HasUser: true, UserDefault: true}, true, false},
		{quotaEntity{HasClient: true, Client: client}, false, true},
		{quotaEntity{HasClient: true, ClientDefault: true}, false, true},
	}
	for i := range levels {
		l := &levels[i]
		if v, found := m[l.e]; found {
			sk.typ = typ
			if l.tagU {
				sk.user = user
			}
			if l.tagC {
				sk.client = client
			}
			return v, sk, true
		}
	}
	return 0, sk, false
}

// quotaState is the broker's quota table and sensors (the Broker's quotas field).
type quotaState struct {
	// windowNum and windowMs are quota.window.num and quota.window.size.seconds, read once.
	once      sync.Once
	windowNum int
	windowMs  int64

	cur atomic.Pointer[quotaCache]

	mu sync.Mutex // guards rebuilding cur, and sensors
	// sensors are the quota sensors of entities with a quota (bounded by maxQuotaSensors; idle
	// ones are dropped when it is reached).
	sensors map[sensorKey]*quotaSensor
}

// maxQuotaSensors bounds the sensors kept: a <default> client-id quota makes one per client
// id seen.
const maxQuotaSensors = 10000

type quotaCache struct {
	img  *controller.Image
	recs uint64
	t    *quotaTable
}

func (s *quotaState) init(cfg *Config) {
	s.once.Do(func() {
		s.windowNum = keyQuotaWindowNum.Get(cfg)
		s.windowMs = int64(keyQuotaWindowSizeSeconds.Get(cfg)) * 1000
		s.sensors = map[sensorKey]*quotaSensor{}
	})
}

// quotaTable returns the quota table of the current metadata image.
func (b *Broker) quotaTable() *quotaTable {
	img := b.ctl.Image()
	if c := b.quotas.cur.Load(); c != nil && c.img == img {
		return c.t
	}
	s := &b.quotas
	s.init(b.cfg)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur.Load()
	if c != nil && c.img == img {
		return c.t
	}
	id := img.RecordsIndex[quotaRecordKind]
	if c != nil && c.recs == id {
		s.cur.Store(&quotaCache{img: img, recs: id, t: c.t})
		return c.t
	}
	t := buildQuotaTable(img.Records[quotaRecordKind])
	s.cur.Store(&quotaCache{img: img, recs: id, t: t})
	return t
}

// quotaUser is the quota user of a request: its principal's name.
func (b *Broker) quotaUser(r *netio.Request) string {
	p := b.principal(r)
	if i := strings.IndexByte(p, ':'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// quotaSensorFor returns the sensor and bound of quota typ for the request, nil when no quota
// applies (a few atomic loads and no allocation).
func (b *Broker) quotaSensorFor(typ quotaType, r *netio.Request) (*quotaSensor, float64) {
	t := b.quotaTable()
	if !t.any[typ] {
		return nil, 0
	}
	bound, sk, ok := t.match(typ, b.quotaUser(r), r.ClientID)
	if !ok {
		return nil, 0
	}
	return b.quotas.sensor(sk), bound
}

func (s *quotaState) sensor(k sensorKey) *quotaSensor {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.sensors[k]; q != nil {
		return q
	}
	if len(s.sensors) >= maxQuotaSensors {
		idle := monoMs() - 2*int64(s.windowNum)*s.windowMs
		for key, q := range s.sensors {
			if q.lastUse.Load() < idle {
				delete(s.sensors, key)
			}
		}
	}
	q := &quotaSensor{key: k, num: s.windowNum, windowMs: s.windowMs, samples: make([]rateSample, s.windowNum+1)}
	s.sensors[k] = q
	return q
}

// quotaSensor is one entity's sensor for one quota type.
type quotaSensor struct {
	key      sensorKey
	num      int
	windowMs int64

	mu sync.Mutex // guards samples, cur, used, tokens, lastMs
	// samples is Kafka's SampledStat: num samples plus one overlapping; used of them exist.
	samples []rateSample
	cur     int
	used    int
	// tokens and lastMs are the token bucket (controller_mutation_rate); filled is false until
	// the first refill (the bucket starts full).
	tokens float64
	lastMs int64
	filled bool

	// Metrics: throttleMsTotal is the throttle time given; valueTotal what was recorded (bytes,
	// or partitions mutated); lastUse the last record (monoMs).
	throttleMsTotal atomic.Int64
	throttled       atomic.Int64
	valueTotal      atomic.Int64
	lastUse         atomic.Int64
}

type rateSample struct {
	start, last int64
	value       float64
}

// record adds value at nowMs and returns the throttle time (ms) when check is set and the rate
// is over bound (Kafka's Sensor.record with checkQuotas and QuotaUtils.throttleTime).
func (q *quotaSensor) record(value float64, nowMs int64, bound float64, check bool) int64 {
	q.lastUse.Store(nowMs)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.purgeLocked(nowMs)
	if q.used == 0 {
		q.samples[0] = rateSample{start: nowMs, last: nowMs}
		q.used = 1
		q.cur = 0
	}
	s := &q.samples[q.cur]
	if nowMs-s.start >= q.windowMs {
		prevEnd := s.start + q.windowMs
		start := nowMs - ((nowMs - prevEnd) % q.windowMs)
		q.cur = (q.cur + 1) % len(q.samples)
		if q.cur >= q.used {
			q.used++
		}
		q.samples[q.cur] = rateSample{start: start, last: start}
		s = &q.samples[q.cur]
	}
	s.value += value
	s.last = nowMs
	if !check {
		return 0
	}
	ws := q.windowSizeLocked(nowMs)
	sum := 0.0
	for i := 0; i < q.used; i++ {
		sum += q.samples[i].value
	}
	rate := sum / (float64(ws) / 1000)
	if rate <= bound || bound <= 0 {
		return 0
	}
	return int64(math.Round((rate - bound) / bound * float64(ws)))
}

// purgeLocked resets samples without an event in the last num windows.
func (q *quotaSensor) purgeLocked(nowMs int64) {
	expire := int64(q.num) * q.windowMs
	for i := 0; i < q.used; i++ {
		if nowMs-q.samples[i].last >= expire {
			q.samples[i] = rateSample{start: nowMs, last: nowMs}
		}
	}
}

// windowSizeLocked is Rate.windowSize: the time since the oldest sample began, at least num-1
// whole windows, at least 1 ms.
func (q *quotaSensor) windowSizeLocked(nowMs int64) int64 {
	oldest := q.samples[0].start
	for i := 1; i < q.used; i++ {
		oldest = min(oldest, q.samples[i].start)
	}
	total := nowMs - oldest
	full := total / q.windowMs
	if minFull := int64(q.num - 1); full < minFull {
		total += (minFull - full) * q.windowMs
	}
	return max(total, 1)
}

// monoMs is the quota windows' clock: milliseconds on the monotonic clock (clock.Nanotime).
// Kafka's quota sensors read the wall clock; a backward wall-clock step would keep their
// current window open for the length of the step and the rate, summed over an ever longer
// window, would throttle without end. The windows are in memory only, so the monotonic clock
// serves.
func monoMs() int64 { return clock.Nanotime() / int64(time.Millisecond) }

// recordThrottle records a value and returns the throttle, counting both for the metrics.
func (q *quotaSensor) recordThrottle(value float64, bound float64) int64 {
	ms := q.record(value, monoMs(), bound, true)
	q.valueTotal.Add(int64(value))
	if ms > 0 {
		q.throttleMsTotal.Add(ms)
		q.throttled.Add(1)
	}
	return ms
}

// unrecord takes value back out (a throttled fetch answers no records; Kafka's
// unrecordQuotaSensor).
func (q *quotaSensor) unrecord(value float64) {
	q.record(-value, monoMs(), 0, false)
	q.valueTotal.Add(-int64(value))
}

// bucketLocked refills the token bucket (Kafka's TokenBucket) and returns the tokens.
func (q *quotaSensor) bucketLocked(nowMs int64, rate float64) float64 {
	burst := float64(q.num) * float64(q.windowMs) / 1000 * rate
	if !q.filled {
		q.tokens, q.lastMs, q.filled = burst, nowMs, true
	}
	q.tokens = math.Min(burst, q.tokens+rate*float64(nowMs-q.lastMs)/1000)
	q.lastMs = nowMs
	return q.tokens
}

// mutationThrottle is the throttle time (ms) while the bucket is in debt, else 0.
func (q *quotaSensor) mutationThrottle(rate float64) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	tok := q.bucketLocked(monoMs(), rate)
	if tok >= 0 {
		return 0
	}
	return int64(math.Round(-tok / rate * 1000))
}

// recordMutations takes n partitions from the bucket.
func (q *quotaSensor) recordMutations(n int, rate float64) {
	q.lastUse.Store(monoMs())
	q.mu.Lock()
	q.bucketLocked(monoMs(), rate)
	q.tokens -= float64(n)
	q.mu.Unlock()
	q.valueTotal.Add(int64(n))
}

// throttleReply gives a reply a throttle of ms: the response's throttle_time_ms (when the API
// has one; the larger of the two when it already carries one) and the connection's mute after
// it is written (KIP-219).
func throttleReply(rep *netio.Reply, ms int64) {
	if ms <= 0 {
		return
	}
	ms = min(ms, math.MaxInt32)
	d := time.Duration(ms) * time.Millisecond
	rep.Throttle = max(rep.Throttle, d)
	setThrottle := func(resp kmsg.Response) {
		if t, ok := resp.(kmsg.ThrottleResponse); ok {
			if cur, _ := t.Throttle(); int64(cur) >= ms {
				return
			}
		}
		if t, ok := resp.(kmsg.SetThrottleResponse); ok {
			t.SetThrottle(int32(ms))
		}
	}
	if rep.Response != nil {
		setThrottle(rep.Response)
	}
	if inner := rep.Deferred; inner != nil {
		rep.Deferred = func() netio.Reply {
			r := inner()
			if r.Response != nil {
				setThrottle(r.Response)
			}
			r.Throttle = max(r.Throttle, d)
			return r
		}
	}
}

// handleProduceQuota is Produce with producer_byte_rate and request_percentage: the request's
// size is recorded once it is handled and, over the quota, the response carries
// throttle_time_ms and the connection is muted for that time after it (acks=0 too, as Kafka
// mutes without a response).
func handleProduceQuota(b *Broker, r *netio.Request) netio.Reply {
	rep := handleProduce(b, r)
	if q, bound := b.quotaSensorFor(quotaProduce, r); q != nil {
		throttleReply(&rep, q.recordThrottle(float64(r.Size), bound))
	}
	return rep
}

// requestQuotaExempt are the APIs Kafka does not count against request_percentage: those
// between brokers and the controller and the ones a client needs before it can be throttled.
func requestQuotaExempt(key int16) bool {
	switch key {
	case 4, 5, 6, 7, 17, 18, 36, 27, 52, 53, 54, 55, 56, 57, 58, 62, 63, 64, 67:
		return true
	}
	return false
}

// requestQuotaExemptReq reports whether r is not counted against request_percentage for what
// it is: a follower's Fetch (inter-broker traffic) or an acks=0 Produce, as in Kafka.
func requestQuotaExemptReq(r *netio.Request) bool {
	switch req := r.Body.(type) {
	case *kmsg.FetchRequest:
		if r.Version >= 15 {
			return req.ReplicaState.ID >= 0
		}
		return req.ReplicaID >= 0
	case *kmsg.ProduceRequest:
		return req.Acks == 0
	}
	return false
}

// handleWithRequestQuota runs a handler and, when a request_percentage quota applies to the
// request, records the time the handler took as a share of one thread (Kafka's
// ClientRequestQuotaManager: nanoseconds x 100 / 1e9 per second) and throttles over it. The
// long-poll part of a deferred reply is not handler time and is not counted.
func (b *Broker) handleWithRequestQuota(d apiDef, r *netio.Request) netio.Reply {
	if requestQuotaExempt(d.key) || !b.quotaTable().any[quotaRequest] || requestQuotaExemptReq(r) {
		return d.handle(b, r)
	}
	q, bound := b.quotaSensorFor(quotaRequest, r)
	if q == nil {
		return d.handle(b, r)
	}
	start := time.Now()
	rep := d.handle(b, r)
	pct := float64(time.Since(start).Nanoseconds()) * 100 / 1e9
	ms := q.record(pct, monoMs(), bound, true)
	if ms > 0 {
		q.throttleMsTotal.Add(ms)
		q.throttled.Add(1)
		throttleReply(&rep, ms)
	}
	return rep
}

// quotaDescribe returns every entity with its quotas, sorted by key (DescribeClientQuotas).
func (t *quotaTable) sortedEntities() []quotaEntity {
	out := make([]quotaEntity, 0, len(t.entries))
	for e := range t.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// quotaCollector exports the sensors: per entity with a quota, throttle time and value
// recorded (bounded: only entities a quota applies to have sensors, at most maxQuotaSensors).
type quotaCollector struct{ b *Broker }

var (
	quotaLabels          = []string{"quota", "user", "client_id"}
	descQuotaThrottleMs  = prometheus.NewDesc("weir_quota_throttle_time_ms_total", "Throttle time given to the entity's requests (ms), by quota key and the entity's sensor (user and/or client id, as Kafka's quota metric tags).", quotaLabels, nil)
	descQuotaThrottled   = prometheus.NewDesc("weir_quota_throttled_requests_total", "Responses throttled by the quota.", quotaLabels, nil)
	descQuotaValue       = prometheus.NewDesc("weir_quota_recorded_total", "What the quota counted: bytes (producer_byte_rate, consumer_byte_rate), partitions (controller_mutation_rate); 0 for request_percentage.", quotaLabels, nil)
	descQuotaSensorCount = prometheus.NewDesc("weir_quota_sensors", "Quota sensors kept (entities with a quota seen recently).", nil, nil)
)

func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descQuotaThrottleMs
	ch <- descQuotaThrottled
	ch <- descQuotaValue
	ch <- descQuotaSensorCount
}

func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	s := &c.b.quotas
	s.mu.Lock()
	sensors := make([]*quotaSensor, 0, len(s.sensors))
	for _, q := range s.sensors {
		sensors = append(sensors, q)
	}
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descQuotaSensorCount, prometheus.GaugeValue, float64(len(sensors)))
	for _, q := range sensors {
		l := []string{quotaKeyNames[q.key.typ], q.key.user, q.key.client}
		ch <- prometheus.MustNewConstMetric(descQuotaThrottleMs, prometheus.CounterValue, float64(q.throttleMsTotal.Load()), l...)
		ch <- prometheus.MustNewConstMetric(descQuotaThrottled, prometheus.CounterValue, float64(q.throttled.Load()), l...)
		ch <- prometheus.MustNewConstMetric(descQuotaValue, prometheus.CounterValue, float64(q.valueTotal.Load()), l...)
	}
}

// mutationQuota is a request's controller_mutation_rate (KIP-599) while CreateTopics,
// CreatePartitions or DeleteTopics is handled; nil when no quota applies (every method
// accepts nil). Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic
// whose turn comes while the bucket is in debt gets THROTTLING_QUOTA_EXCEEDED and is not
// changed; permissive (older versions): every topic is changed and the response is throttled.
type mutationQuota struct {
	q        *quotaSensor
	rate     float64
	strict   bool
	throttle int64
}

func (b *Broker) mutationQuota(r *netio.Request, strict bool) *mutationQuota {
	q, rate := b.quotaSensorFor(quotaMutation, r)
	if q == nil {
		return nil
	}
	return &mutationQuota{q: q, rate: rate, strict: strict}
}

// exceeded reports, in strict mode, whether the next topic must be refused
// (THROTTLING_QUOTA_EXCEEDED) because the bucket is in debt.
func (m *mutationQuota) exceeded() bool {
	if m == nil || !m.strict {
		return false
	}
	if ms := m.q.mutationThrottle(m.rate); ms > 0 {
		m.throttle = max(m.throttle, ms)
		return true
	}
	return false
}

// record takes n created or deleted partitions from the bucket.
func (m *mutationQuota) record(n int32) {
	if m == nil || n <= 0 {
		return
	}
	m.q.recordMutations(int(n), m.rate)
}

// finish throttles the reply: strict, by the throttle of a refused topic (a request whose
// topics were all accepted is not throttled, as Kafka's StrictControllerMutationQuota);
// permissive, by the time until the bucket is out of debt.
func (m *mutationQuota) finish(rep *netio.Reply) {
	if m == nil {
		return
	}
	ms := m.throttle
	if !m.strict {
		ms = m.q.mutationThrottle(m.rate)
	}
	if ms > 0 {
		m.q.throttleMsTotal.Add(ms)
		m.q.throttled.Add(1)
		throttleReply(rep, ms)
	}
}

// errThrottlingQuotaExceeded is a topic refused by a strict controller_mutation_rate.
var errThrottlingQuotaExceeded = fmt.Errorf("the controller mutation quota is exceeded: %w", kerr.ThrottlingQuotaExceeded)
