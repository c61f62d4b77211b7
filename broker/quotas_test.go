package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestQuotaPrecedence checks the 8 levels of Kafka's DefaultQuotaCallback, most specific
// first, and who shares a sensor at each level.
func TestQuotaPrecedence(t *testing.T) {
	all := []quotaEntity{
		{HasUser: true, User: "alice", HasClient: true, Client: "c1"},            // 1
		{HasUser: true, User: "alice", HasClient: true, ClientDefault: true},     // 2
		{HasUser: true, User: "alice"},                                           // 3
		{HasUser: true, UserDefault: true, HasClient: true, Client: "c1"},        // 4
		{HasUser: true, UserDefault: true, HasClient: true, ClientDefault: true}, // 5
		{HasUser: true, UserDefault: true},                                       // 6
		{HasClient: true, Client: "c1"},                                          // 7
		{HasClient: true, ClientDefault: true},                                   // 8
	}
	wantTags := [][2]string{{"alice", "c1"}, {"alice", "c1"}, {"alice", ""}, {"alice", "c1"}, {"alice", "c1"}, {"alice", ""}, {"", "c1"}, {"", "c1"}}
	for drop := 0; drop < len(all); drop++ {
		recs := map[string]string{}
		for i, e := range all[drop:] {
			recs[e.key()] = fmt.Sprintf(`{"producer_byte_rate":%d}`, drop+i+1)
		}
		tb := buildQuotaTable(recs)
		bound, sk, ok := tb.match(quotaProduce, "alice", "c1")
		if !ok || bound != float64(drop+1) {
			t.Fatalf("levels %d..8 set: bound %v ok %v, want level %d's", drop+1, bound, ok, drop+1)
		}
		if sk.user != wantTags[drop][0] || sk.client != wantTags[drop][1] {
			t.Errorf("level %d: sensor (%q, %q), want %q", drop+1, sk.user, sk.client, wantTags[drop])
		}
		if _, _, ok := tb.match(quotaFetch, "alice", "c1"); ok {
			t.Errorf("level %d: consumer_byte_rate matched, none is set", drop+1)
		}
	}
	// Keys round-trip, with names that need escaping.
	for _, e := range append(all, quotaEntity{HasUser: true, User: "CN=a,O=b&c=d*", HasClient: true, Client: "x=y"}) {
		got, err := parseQuotaEntityKey(e.key())
		if err != nil || got != e {
			t.Errorf("key %q: parsed %+v, %v; want %+v", e.key(), got, err, e)
		}
	}
}

// TestQuotaSensorRate drives a sensor with a scripted clock: held to the bound, the rate over
// Kafka's window stays at the bound; the throttle is (rate-bound)/bound x window.
func TestQuotaSensorRate(t *testing.T) {
	q := &quotaSensor{num: 11, windowMs: 1000, samples: make([]rateSample, 12)}
	const bound = 1000.0
	now := int64(1_000_000)
	// The first 10 s window holds 10 x bound without throttling.
	if ms := q.record(10*bound, now, bound, true); ms != 0 {
		t.Fatalf("10 x bound at once: throttle %d, want 0 (window of num-1 samples)", ms)
	}
	// One more bound: rate 11000/10 s = 1100/s, 10%% over: throttle 10%% of 10 s = 1000 ms.
	if ms := q.record(bound, now, bound, true); ms != 1000 {
		t.Fatalf("11 x bound: throttle %d ms, want 1000", ms)
	}
	// A client that waits its throttles and sends bound-sized requests averages the bound.
	q = &quotaSensor{num: 11, windowMs: 1000, samples: make([]rateSample, 12)}
	start := now
	var sent float64
	for now < start+60_000 {
		ms := q.record(100, now, bound, true)
		sent += 100
		now += 100 + ms
	}
	rate := sent / 60
	if rate < 0.9*bound || rate > 1.1*bound {
		t.Fatalf("rate %.0f/s over 60 s, bound %.0f", rate, bound)
	}
	// Token bucket: a burst of num x size x rate, then debt throttles.
	m := &quotaSensor{num: 11, windowMs: 1000, samples: make([]rateSample, 12)}
	if ms := m.mutationThrottle(2); ms != 0 {
		t.Fatalf("fresh bucket throttles %d", ms)
	}
	m.recordMutations(30, 2) // burst 22: 8 in debt, 4 s at 2/s
	if ms := m.mutationThrottle(2); ms < 3900 || ms > 4000 {
		t.Fatalf("8 partitions in debt at 2/s: throttle %d ms, want ~4000", ms)
	}
}

// TestQuotaAdminAlterDescribe: AlterClientQuotas then DescribeClientQuotas through kadm, with
// Kafka's shapes, filters and errors.
func TestQuotaAdminAlterDescribe(t *testing.T) {
	b := startBroker(t, nil)
	_, adm := admClient(t, b)
	ctx := admCtx(t)
	alice, c1 := "alice", "c1"
	alter := func(validate bool, entries ...kadm.AlterClientQuotaEntry) kadm.AlteredClientQuotas {
		t.Helper()
		var res kadm.AlteredClientQuotas
		var err error
		if validate {
			res, err = adm.ValidateAlterClientQuotas(ctx, entries)
		} else {
			res, err = adm.AlterClientQuotas(ctx, entries)
		}
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ok := func(res kadm.AlteredClientQuotas) {
		t.Helper()
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("%v: %v %s", r.Entity, r.Err, r.ErrMessage)
			}
		}
	}
	set := func(k string, v float64) kadm.AlterClientQuotaOp { return kadm.AlterClientQuotaOp{Key: k, Value: v} }
	ok(alter(false,
		kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &c1}}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1024), set("consumer_byte_rate", 2048)}},
		kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}, {Type: "client-id"}}, Ops: []kadm.AlterClientQuotaOp{set("request_percentage", 12.5)}},
		kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "user"}}, Ops: []kadm.AlterClientQuotaOp{set("controller_mutation_rate", 3)}},
	))
	// validate_only changes nothing.
	ok(alter(true, kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &alice}}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 5)}}))

	all, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("describe all: %d entities, want 3: %+v", len(all), all)
	}
	got := map[string]map[string]float64{}
	for _, q := range all {
		vals := map[string]float64{}
		for _, v := range q.Values {
			vals[v.Key] = v.Value
		}
		got[entityKeyForTest(q.Entity)] = vals
	}
	want := map[string]map[string]float64{
		"client-id=c1":                   {"producer_byte_rate": 1024, "consumer_byte_rate": 2048},
		"user=alice,client-id=<default>": {"request_percentage": 12.5},
		"user=<default>":                 {"controller_mutation_rate": 3},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("describe all:\n got %v\nwant %v", got, want)
	}
	// Filters: exact client-id, strict; default user; specified user (non-strict).
	for _, f := range []struct {
		strict bool
		comps  []kadm.DescribeClientQuotaComponent
		want   []string
	}{
		{true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 0, MatchName: &c1}}, []string{"client-id=c1"}},
		{false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 1}}, []string{"user=alice,client-id=<default>"}},
		{true, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: 1}}, nil},
		{false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}}, []string{"user=alice,client-id=<default>"}},
		{false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 1}}, []string{"user=<default>"}},
	} {
		res, err := adm.DescribeClientQuotas(ctx, f.strict, f.comps)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range res {
			names = append(names, entityKeyForTest(q.Entity))
		}
		if fmt.Sprint(names) != fmt.Sprint(f.want) {
			t.Errorf("filter %+v strict %v: %v, want %v", f.comps, f.strict, names, f.want)
		}
	}
	// Kafka's errors: INVALID_REQUEST for an unknown key, a value <= 0, a fractional byte
	// rate, an empty entity, an empty name, an unknown entity type; ip is refused by weir.
	empty := ""
	bad := []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &c1}}, Ops: []kadm.AlterClientQuotaOp{set("io_thread_rate", 1)}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &c1}}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 0)}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &c1}}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1.5)}},
		{Entity: kadm.ClientQuotaEntity{}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &empty}}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: kadm.ClientQuotaEntity{{Type: "group", Name: &c1}}, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: admStr("127.0.0.1")}}, Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 1)}},
	}
	for i, r := range alter(false, bad...) {
		if !errors.Is(r.Err, kerr.InvalidRequest) {
			t.Errorf("bad entry %d: %v %s, want INVALID_REQUEST", i, r.Err, r.ErrMessage)
		}
	}
	// No match is an empty array, never null (null is an error to Kafka's admin client).
	cl, _ := admClient(t, b)
	noMatch := kmsg.NewPtrDescribeClientQuotasRequest()
	noMatch.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 0, Match: admStr("nobody")}}
	if resp := admRaw[*kmsg.DescribeClientQuotasResponse](t, cl, noMatch); resp.ErrorCode != 0 || resp.Entries == nil {
		t.Errorf("describe matching nothing: error %d, entries %v; want 0 and an empty array", resp.ErrorCode, resp.Entries)
	}
	if _, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "group", MatchType: 2}}); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("describe with an unknown entity type: %v, want INVALID_REQUEST", err)
	}
	// Remove: one key, then the last key removes the entity.
	ok(alter(false, kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &c1}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}}))
	ok(alter(false, kadm.AlterClientQuotaEntry{Entity: kadm.ClientQuotaEntity{{Type: "user"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Remove: true}}}))
	all, err = adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || entityKeyForTest(all[0].Entity) != "client-id=c1" || len(all[0].Values) != 1 || all[0].Values[0].Key != "consumer_byte_rate" {
		t.Fatalf("after removals: %+v", all)
	}
}

func entityKeyForTest(e kadm.ClientQuotaEntity) string {
	var b bytes.Buffer
	for i, c := range e {
		if i > 0 {
			b.WriteByte(',')
		}
		name := "<default>"
		if c.Name != nil {
			name = *c.Name
		}
		b.WriteString(c.Type + "=" + name)
	}
	return b.String()
}

func setQuota(t *testing.T, adm *kadm.Client, entity kadm.ClientQuotaEntity, key string, v float64) {
	t.Helper()
	res, err := adm.AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: v}}}})
	if err == nil && res[0].Err != nil {
		err = fmt.Errorf("%w: %s", res[0].Err, res[0].ErrMessage)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// produceFor produces 1 KiB records with client id as fast as acknowledgements allow, for d,
// and returns the record bytes acknowledged per second.
func produceFor(t *testing.T, addr, topic, clientID string, d time.Duration) float64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(clientID), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(256), kgo.ProducerBatchMaxBytes(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	value := bytes.Repeat([]byte("q"), 1024)
	var acked atomic.Int64
	var failed atomic.Value
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	for ctx.Err() == nil {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
			if err == nil {
				acked.Add(int64(len(r.Value)))
			} else if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				failed.Store(err)
			}
		})
	}
	elapsed := time.Since(start)
	n := acked.Load()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("%s: produce: %v", clientID, err)
	}
	return float64(n) / elapsed.Seconds()
}

// TestQuotaProduceRate: a producer with producer_byte_rate 1 MiB/s is held to it within 20%
// over 10 s, while an unlimited producer on the same broker is not held back with it.
func TestQuotaProduceRate(t *testing.T) {
	b := startBroker(t, map[string]string{"log.flush.interval.messages": "9223372036854775807"})
	_, adm := admClient(t, b)
	admCreateTopic(t, adm, "quota-produce", 1, nil)
	const rate = 1 << 20
	limited := "limited-producer"
	setQuota(t, adm, kadm.ClientQuotaEntity{{Type: "client-id", Name: &limited}}, "producer_byte_rate", rate)

	// The unlimited producer alone before and after, and beside the limited one: on a shared
	// machine its rate alone is taken as the lower of the two.
	before := produceFor(t, b.Addr(), "quota-produce", "free-producer", 3*time.Second)
	var wg sync.WaitGroup
	var got, together float64
	wg.Add(2)
	go func() { defer wg.Done(); got = produceFor(t, b.Addr(), "quota-produce", limited, 10*time.Second) }()
	go func() {
		defer wg.Done()
		time.Sleep(3 * time.Second)
		together = produceFor(t, b.Addr(), "quota-produce", "free-producer", 3*time.Second)
	}()
	wg.Wait()
	after := produceFor(t, b.Addr(), "quota-produce", "free-producer", 3*time.Second)
	alone := min(before, after)
	t.Logf("limited producer: %.0f B/s (quota %d, %.2f); unlimited alone %.0f and %.0f B/s, beside the limited one %.0f B/s (%.2f)", got, rate, got/rate, before, after, together, together/alone)
	if math.Abs(got-rate)/rate > 0.2 {
		t.Errorf("limited producer at %.0f B/s, want %d within 20%%", got, rate)
	}
	// Not a speed check (the machine is shared and its two cores also run the clients): a
	// throttle that held anything beyond the limited connection would bring the unlimited
	// producer down towards the quota; it must stay far above it.
	if together < 4*rate || together < 0.2*alone {
		t.Errorf("unlimited producer slowed from %.0f to %.0f B/s beside the limited one", alone, together)
	}
	if s := b.server.Stats(); s.QuotaMutes == 0 {
		t.Errorf("no connection was muted for a quota")
	}
}

// consumeFor consumes topic from the start with client id for at most d or until want bytes,
// and returns the record bytes per second from the first records received.
func consumeFor(t *testing.T, addr, topic, clientID string, d time.Duration, want int64) float64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(clientID), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	// Timed from the first records: the client's start (metadata, offsets) is not the broker's
	// rate.
	var start time.Time
	var n int64
	for n < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if start.IsZero() {
				start = time.Now()
			}
			n += int64(len(r.Value))
		})
	}
	if start.IsZero() {
		t.Fatalf("%s: nothing consumed", clientID)
	}
	return float64(n) / time.Since(start).Seconds()
}

// TestQuotaFetchRate: a consumer with consumer_byte_rate 1 MiB/s is held to it within 20% over
// 10 s, while an unlimited consumer keeps the rate it had alone.
func TestQuotaFetchRate(t *testing.T) {
	b := startBroker(t, map[string]string{"log.flush.interval.messages": "9223372036854775807"})
	_, adm := admClient(t, b)
	admCreateTopic(t, adm, "quota-fetch", 1, nil)
	// 40 MiB to read.
	pcl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("quota-fetch"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("f"), 1024)
	const total = 40 << 20
	for i := 0; i < total/1024; i++ {
		pcl.Produce(context.Background(), &kgo.Record{Value: value}, nil)
	}
	if err := pcl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	pcl.Close()
	const rate = 1 << 20
	limited := "limited-consumer"
	setQuota(t, adm, kadm.ClientQuotaEntity{{Type: "client-id", Name: &limited}}, "consumer_byte_rate", rate)

	before := consumeFor(t, b.Addr(), "quota-fetch", "free-consumer", 20*time.Second, total)
	var wg sync.WaitGroup
	var got, together float64
	wg.Add(2)
	go func() { defer wg.Done(); got = consumeFor(t, b.Addr(), "quota-fetch", limited, 10*time.Second, total) }()
	go func() {
		defer wg.Done()
		time.Sleep(2 * time.Second)
		together = consumeFor(t, b.Addr(), "quota-fetch", "free-consumer", 20*time.Second, total)
	}()
	wg.Wait()
	after := consumeFor(t, b.Addr(), "quota-fetch", "free-consumer", 20*time.Second, total)
	alone := min(before, after)
	t.Logf("limited consumer: %.0f B/s (quota %d, %.2f); unlimited alone %.0f and %.0f B/s, beside the limited one %.0f B/s (%.2f)", got, rate, got/rate, before, after, together, together/alone)
	if math.Abs(got-rate)/rate > 0.2 {
		t.Errorf("limited consumer at %.0f B/s, want %d within 20%%", got, rate)
	}
	if together < 0.6*alone {
		t.Errorf("unlimited consumer slowed from %.0f to %.0f B/s beside the limited one", alone, together)
	}
}

// TestQuotaControllerMutationRate: CreateTopics v6+ over controller_mutation_rate gets
// THROTTLING_QUOTA_EXCEEDED with a throttle time; v5 is throttled instead.
func TestQuotaControllerMutationRate(t *testing.T) {
	b := startBroker(t, nil)
	_, adm := admClient(t, b)
	mut := "mutator"
	setQuota(t, adm, kadm.ClientQuotaEntity{{Type: "client-id", Name: &mut}}, "controller_mutation_rate", 1)
	cl7, _ := admClient(t, b, kgo.ClientID(mut))
	cl5, _ := admClient(t, b, kgo.ClientID(mut), admPinned(19, 5))
	create := func(cl *kgo.Client, name string, partitions int32) *kmsg.CreateTopicsResponse {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
		req.Topics = append(req.Topics, rt)
		return admRaw[*kmsg.CreateTopicsResponse](t, cl, req)
	}
	// Burst: 11 windows x 1 s x 1/s = 11 partitions; 14 puts the bucket 3 in debt. Strict
	// (v6+): a request whose topics were all accepted is not throttled.
	if r := create(cl7, "mut-a", 14); r.Topics[0].ErrorCode != 0 || r.ThrottleMillis != 0 {
		t.Fatalf("first create: %v, throttle %d", kerr.ErrorForCode(r.Topics[0].ErrorCode), r.ThrottleMillis)
	}
	r := create(cl7, "mut-b", 1)
	if r.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || r.ThrottleMillis < 2000 || r.ThrottleMillis > 3100 {
		t.Fatalf("create in debt (v7): %v, throttle %d ms; want THROTTLING_QUOTA_EXCEEDED and ~3 s", kerr.ErrorForCode(r.Topics[0].ErrorCode), r.ThrottleMillis)
	}
	refused := time.Now()
	// Permissive (v5, another connection of the same client id): created, and throttled for
	// the debt, now 4 partitions.
	r = create(cl5, "mut-c", 1)
	if r.Topics[0].ErrorCode != 0 || r.ThrottleMillis < 3000 {
		t.Fatalf("create in debt (v5): %v, throttle %d ms; want created and throttled ~4 s", kerr.ErrorForCode(r.Topics[0].ErrorCode), r.ThrottleMillis)
	}
	// The v7 connection was muted for the refused request's throttle.
	r = create(cl7, "mut-d", 1)
	if waited := time.Since(refused); waited < 2*time.Second {
		t.Errorf("the next request on the throttled connection was answered after %v: not muted", waited)
	}
	if r.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Errorf("create still in debt (v7): %v, want THROTTLING_QUOTA_EXCEEDED", kerr.ErrorForCode(r.Topics[0].ErrorCode))
	}
}

// TestQuotaRequestPercentage: a client over request_percentage (handler time as a share of
// one thread) gets throttle_time_ms in its responses; another client id does not.
func TestQuotaRequestPercentage(t *testing.T) {
	b := startBroker(t, nil)
	_, adm := admClient(t, b)
	busy := "busy-client"
	setQuota(t, adm, kadm.ClientQuotaEntity{{Type: "client-id", Name: &busy}}, "request_percentage", 0.1)
	send := func(cl *kgo.Client) int32 {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = nil // every topic
		return admRaw[*kmsg.MetadataResponse](t, cl, req).ThrottleMillis
	}
	cl, _ := admClient(t, b, kgo.ClientID(busy))
	free, _ := admClient(t, b, kgo.ClientID("free-client"))
	deadline := time.Now().Add(20 * time.Second)
	var throttled int32
	n := 0
	for ; throttled == 0 && n < 5000 && time.Now().Before(deadline); n++ {
		throttled = send(cl)
	}
	if throttled == 0 {
		t.Fatalf("%d requests at 0.1%% of a thread, none throttled", n)
	}
	t.Logf("throttled after %d metadata requests: %d ms", n, throttled)
	for range 50 {
		if ms := send(free); ms != 0 {
			t.Fatalf("a client without a quota throttled %d ms", ms)
		}
	}
	// The quota metrics name the throttled sensor, and only sensors of entities with a quota.
	resp, err := http.Get("http://" + b.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `weir_quota_throttled_requests_total{client_id="busy-client",quota="request_percentage",user=""}`) {
		t.Errorf("no throttle metric for busy-client in /metrics")
	}
	if strings.Contains(string(body), `client_id="free-client"`) {
		t.Errorf("a quota series for a client without a quota")
	}
}
