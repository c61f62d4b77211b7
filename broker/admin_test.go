package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weir-mq/weir/engine"
)

// admClient returns a franz-go client and its kadm wrapper on b; extra options apply to the
// client (kgo.MaxVersions pins request versions).
func admClient(t *testing.T, b *Broker, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// admRaw sends req to the seed broker (no sharding or routing by kgo) at the highest
// version both sides allow.
func admRaw[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return resp.(R)
}

// pinned returns client options capping API key's version at v.
func admPinned(key, v int16) kgo.Opt {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(key, v)
	return kgo.MaxVersions(vs)
}

func admCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func admWantErr(t *testing.T, what string, got error, want *kerr.Error) {
	t.Helper()
	if !errors.Is(got, want) {
		t.Errorf("%s: got error %v, want %s", what, got, want.Message)
	}
}

func admWantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var admWantCode int16
	if want != nil {
		admWantCode = want.Code
	}
	if got != admWantCode {
		t.Errorf("%s: got error code %d (%v), want %d", what, got, kerr.ErrorForCode(got), admWantCode)
	}
}

func admCreateTopic(t *testing.T, adm *kadm.Client, name string, partitions int32, configs map[string]*string) kadm.CreateTopicResponse {
	t.Helper()
	resp, err := adm.CreateTopic(admCtx(t), partitions, 1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return resp
}

func admStr(s string) *string { return &s }

func TestAdminApiVersions(t *testing.T) {
	b := startBroker(t, nil)
	cl, _ := admClient(t, b)
	resp := admRaw[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest())
	want := map[int16][2]int16{20: {1, 6}, 21: {0, 2}, 32: {1, 4}, 33: {0, 2}, 37: {0, 3}, 44: {0, 1}, 60: {0, 2}}
	for _, k := range resp.ApiKeys {
		if w, ok := want[k.ApiKey]; ok {
			if k.MinVersion != w[0] || k.MaxVersion != w[1] {
				t.Errorf("key %d: versions %d-%d, want %d-%d", k.ApiKey, k.MinVersion, k.MaxVersion, w[0], w[1])
			}
			delete(want, k.ApiKey)
		}
	}
	for k := range want {
		t.Errorf("key %d not advertised", k)
	}
}

func TestAdminCreateDescribeDeleteTopics(t *testing.T) {
	b := startBroker(t, nil)
	cl, adm := admClient(t, b)
	ctx := admCtx(t)
	logDir := b.cfg.LogDirs()[0]
	admCreateTopic(t, adm, "alpha", 2, nil)
	beta := admCreateTopic(t, adm, "beta", 1, map[string]*string{"retention.ms": admStr("60000")})
	admCreateTopic(t, adm, "gamma", 1, nil)

	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := topics.Names(); fmt.Sprint(got) != "[alpha beta gamma]" {
		t.Fatalf("topics %v", got)
	}
	if n := len(topics["alpha"].Partitions); n != 2 {
		t.Fatalf("alpha has %d partitions", n)
	}
	for _, d := range []string{"alpha-0", "alpha-1", "beta-0"} {
		if _, err := os.Stat(filepath.Join(logDir, d)); err != nil {
			t.Fatalf("partition dir: %v", err)
		}
	}

	// By name (v6 by name, as kadm sends it), with an unknown topic alongside.
	resps, err := adm.DeleteTopics(ctx, "alpha", "nope")
	if err != nil {
		t.Fatal(err)
	}
	if err := resps["alpha"].Err; err != nil {
		t.Fatalf("delete alpha: %v", err)
	}
	admWantErr(t, "delete unknown topic", resps["nope"].Err, kerr.UnknownTopicOrPartition)
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = admStr("alpha")
	mreq.Topics = append(mreq.Topics, mt)
	mresp := admRaw[*kmsg.MetadataResponse](t, cl, mreq)
	admWantCode(t, "metadata of deleted topic", mresp.Topics[0].ErrorCode, kerr.UnknownTopicOrPartition)
	if got := admTopicNames(t, cl); fmt.Sprint(got) != "[beta gamma]" {
		t.Fatalf("topics after deleting alpha: %v", got)
	}
	if left, _ := filepath.Glob(filepath.Join(logDir, "alpha-*")); len(left) != 0 {
		t.Fatalf("deleted topic's directories remain: %v", left)
	}
	if _, ok := b.Logs().Log(engine.TopicPartition{Topic: "alpha", Partition: 0}); ok {
		t.Fatal("deleted topic's log still open")
	}

	// By id (v6), and the request errors.
	req := kmsg.NewPtrDeleteTopicsRequest()
	for _, tt := range []kmsg.DeleteTopicsRequestTopic{
		{TopicID: beta.ID},
		{TopicID: [16]byte{1, 2, 3}},
		{Topic: admStr("gamma"), TopicID: [16]byte{9}},
		{Topic: admStr("dup")}, {Topic: admStr("dup")},
	} {
		req.Topics = append(req.Topics, tt)
	}
	dresp := admRaw[*kmsg.DeleteTopicsResponse](t, cl, req)
	if dresp.Version != 6 || len(dresp.Topics) != 5 {
		t.Fatalf("DeleteTopics v%d answered %d topics", dresp.Version, len(dresp.Topics))
	}
	admWantCode(t, "delete by id", dresp.Topics[0].ErrorCode, nil)
	if n := dresp.Topics[0].Topic; n == nil || *n != "beta" || dresp.Topics[0].TopicID != beta.ID {
		t.Errorf("delete by id answered name %v id %x", n, dresp.Topics[0].TopicID)
	}
	admWantCode(t, "delete unknown id", dresp.Topics[1].ErrorCode, kerr.UnknownTopicID)
	admWantCode(t, "name and id", dresp.Topics[2].ErrorCode, kerr.InvalidRequest)
	admWantCode(t, "duplicate name", dresp.Topics[3].ErrorCode, kerr.InvalidRequest)
	if left, _ := filepath.Glob(filepath.Join(logDir, "beta-*")); len(left) != 0 {
		t.Fatalf("deleted topic's directories remain: %v", left)
	}

	// v1 names topics in topic_names.
	_, adm1 := admClient(t, b, admPinned(20, 1))
	resps, err = adm1.DeleteTopics(ctx, "gamma")
	if err != nil || resps["gamma"].Err != nil {
		t.Fatalf("delete gamma at v1: %v %v", err, resps["gamma"].Err)
	}

	// Kafka 4's controller deletes internal topics (only its CLI refuses); weir refuses
	// (internal_topics_test.go has the rest of the internal-topic rules).
	admCreateTopic(t, adm, "__consumer_offsets", 1, nil)
	if resps, err := adm.DeleteTopics(ctx, "__consumer_offsets"); err != nil || !errors.Is(resps["__consumer_offsets"].Err, kerr.InvalidTopicException) {
		t.Fatalf("delete __consumer_offsets: %v %v, want INVALID_TOPIC_EXCEPTION", err, resps["__consumer_offsets"].Err)
	}

	// A deleted topic can be created again, empty.
	admCreateTopic(t, adm, "alpha", 1, nil)
	l, ok := b.Logs().Log(engine.TopicPartition{Topic: "alpha", Partition: 0})
	if !ok || l.LogEndOffset() != 0 {
		t.Fatalf("recreated topic: log %v", ok)
	}
	if got := admTopicNames(t, cl); fmt.Sprint(got) != "[__consumer_offsets alpha]" {
		t.Fatalf("topics after deletes %v", got)
	}
}

// admTopicNames lists the broker's topics with a Metadata request of its own (kadm answers
// from the client's metadata cache, which outlives a deletion for a few seconds).
func admTopicNames(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil
	var names []string
	for _, mt := range admRaw[*kmsg.MetadataResponse](t, cl, req).Topics {
		names = append(names, *mt.Topic)
	}
	sort.Strings(names)
	return names
}

func TestAdminDeleteTopicsDisabled(t *testing.T) {
	b := startBroker(t, map[string]string{"delete.topic.enable": "false"})
	_, adm := admClient(t, b)
	admCreateTopic(t, adm, "keep", 1, nil)
	resps, err := adm.DeleteTopics(admCtx(t), "keep")
	if err != nil {
		t.Fatal(err)
	}
	admWantErr(t, "delete with delete.topic.enable=false", resps["keep"].Err, kerr.TopicDeletionDisabled)
	if _, ok := b.topics.get("keep"); !ok {
		t.Fatal("topic deleted although deletion is disabled")
	}
	_, adm2 := admClient(t, b, admPinned(20, 2))
	resps, err = adm2.DeleteTopics(admCtx(t), "keep")
	if err != nil {
		t.Fatal(err)
	}
	admWantErr(t, "delete at v2 with deletion disabled", resps["keep"].Err, kerr.InvalidRequest)
}

func TestAdminCreatePartitions(t *testing.T) {
	b := startBroker(t, nil)
	cl, adm := admClient(t, b)
	ctx := admCtx(t)
	admCreateTopic(t, adm, "grow", 1, nil)

	resps, err := adm.CreatePartitions(ctx, 2, "grow")
	if err != nil || resps["grow"].Err != nil {
		t.Fatalf("create partitions: %v %v", err, resps["grow"].Err)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = admStr("grow")
	mreq.Topics = append(mreq.Topics, mt)
	if n := len(admRaw[*kmsg.MetadataResponse](t, cl, mreq).Topics[0].Partitions); n != 3 {
		t.Fatalf("grow has %d partitions after adding 2", n)
	}
	for p := 0; p < 3; p++ {
		if _, err := os.Stat(filepath.Join(b.cfg.LogDirs()[0], fmt.Sprintf("grow-%d", p))); err != nil {
			t.Fatal(err)
		}
	}
	resps, err = adm.UpdatePartitions(ctx, 3, "grow")
	if err != nil {
		t.Fatal(err)
	}
	admWantErr(t, "same count", resps["grow"].Err, kerr.InvalidPartitions)

	req := kmsg.NewPtrCreatePartitionsRequest()
	add := func(topic string, count int32, assignment ...[]int32) {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, count
		for _, a := range assignment {
			ra := kmsg.NewCreatePartitionsRequestTopicAssignment()
			ra.Replicas = a
			rt.Assignment = append(rt.Assignment, ra)
		}
		req.Topics = append(req.Topics, rt)
	}
	add("grow", 2)
	add("nope", 4)
	resp := admRaw[*kmsg.CreatePartitionsResponse](t, cl, req)
	admWantCode(t, "decrease", resp.Topics[0].ErrorCode, kerr.InvalidPartitions)
	admWantCode(t, "unknown topic", resp.Topics[1].ErrorCode, kerr.UnknownTopicOrPartition)

	for _, tc := range []struct {
		name       string
		assignment [][]int32
	}{
		{"other broker", [][]int32{{7}}},
		{"two replicas", [][]int32{{b.nodeID, b.nodeID}}},
		{"empty replica list", [][]int32{{}}},
		{"too few assignments", [][]int32{{b.nodeID}, {b.nodeID}}[:1]},
	} {
		req.Topics = nil
		count := int32(4)
		if tc.name == "too few assignments" {
			count = 5
		}
		add("grow", count, tc.assignment...)
		resp = admRaw[*kmsg.CreatePartitionsResponse](t, cl, req)
		admWantCode(t, tc.name, resp.Topics[0].ErrorCode, kerr.InvalidReplicaAssignment)
	}

	req.Topics = nil
	req.ValidateOnly = true
	add("grow", 5, []int32{b.nodeID}, []int32{b.nodeID})
	resp = admRaw[*kmsg.CreatePartitionsResponse](t, cl, req)
	admWantCode(t, "validate only", resp.Topics[0].ErrorCode, nil)
	if tp, _ := b.topics.get("grow"); tp.Partitions != 3 {
		t.Fatalf("validate_only changed the partition count to %d", tp.Partitions)
	}
	if _, ok := b.Logs().Log(engine.TopicPartition{Topic: "grow", Partition: 3}); ok {
		t.Fatal("validate_only created a log")
	}

	// Produce to the new partitions and read the records back.
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("grow"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for p := int32(0); p < 3; p++ {
		r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("p%d", p))}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to partition %d: %v", p, err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"grow": {1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()},
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := map[int32]string{}
	for len(got) < 2 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = string(r.Value) })
	}
	if got[1] != "p1" || got[2] != "p2" {
		t.Fatalf("consumed %v", got)
	}
}

func TestAdminDeleteRecords(t *testing.T) {
	b := startBroker(t, nil)
	_, adm := admClient(t, b)
	ctx := admCtx(t)
	// Small segments, so deleting records deletes whole segment files.
	admCreateTopic(t, adm, "trim", 1, map[string]*string{"internal.segment.bytes": admStr("200")}) // below segment.bytes' 1 MiB minimum
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("trim"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := 0; i < 10; i++ { // one batch per record
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("record-%d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := b.Logs().Log(engine.TopicPartition{Topic: "trim", Partition: 0})
	segsBefore := len(l.Segments())
	if segsBefore < 3 {
		t.Fatalf("expected several segments, got %d", segsBefore)
	}

	deleteRecords := func(topic string, offset int64) kadm.DeleteRecordsResponse {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset})
		resps, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := resps.Lookup(topic, 0)
		return r
	}
	r := deleteRecords("trim", 5)
	if r.Err != nil || r.LowWatermark != 5 {
		t.Fatalf("delete records before 5: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	if l.LogStartOffset() != 5 {
		t.Fatalf("log start %d", l.LogStartOffset())
	}
	if len(l.Segments()) >= segsBefore {
		t.Fatalf("no segment deleted: %d before, %d after", segsBefore, len(l.Segments()))
	}
	if _, err := os.Stat(filepath.Join(l.Dir(), "00000000000000000000.log")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("first segment still on disk: %v", err)
	}
	starts, err := adm.ListStartOffsets(ctx, "trim")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := starts.Lookup("trim", 0); o.Offset != 5 {
		t.Fatalf("ListOffsets earliest = %d, want 5", o.Offset)
	}

	// Fetch below the new log start: OFFSET_OUT_OF_RANGE; at it: the records from 5.
	fcl, _ := admClient(t, b, admPinned(1, 12))
	fetch := func(offset int64) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.MaxWaitMillis = -1, 1<<20, 0
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "trim"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, offset, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp := admRaw[*kmsg.FetchResponse](t, fcl, req)
		return resp.Topics[0].Partitions[0]
	}
	fp := fetch(2)
	admWantCode(t, "fetch below the log start", fp.ErrorCode, kerr.OffsetOutOfRange)
	fp = fetch(5)
	admWantCode(t, "fetch at the log start", fp.ErrorCode, nil)
	if fp.LogStartOffset != 5 {
		t.Errorf("fetch answered log start %d", fp.LogStartOffset)
	}
	var first kmsg.RecordBatch
	if err := first.ReadFrom(fp.RecordBatches); err != nil || first.FirstOffset != 5 {
		t.Fatalf("fetch at 5: first batch at %d (%v)", first.FirstOffset, err)
	}

	// Below the log start: nothing changes. Past the high watermark: OFFSET_OUT_OF_RANGE.
	if r := deleteRecords("trim", 3); r.Err != nil || r.LowWatermark != 5 {
		t.Fatalf("delete before 3: %d %v", r.LowWatermark, r.Err)
	}
	admWantErr(t, "delete past the high watermark", deleteRecords("trim", 11).Err, kerr.OffsetOutOfRange)
	if r := deleteRecords("trim", -1); r.Err != nil || r.LowWatermark != 10 {
		t.Fatalf("delete to the high watermark: %d %v", r.LowWatermark, r.Err)
	}

	// Internal topics are refused, as Kafka does.
	admCreateTopic(t, adm, "__consumer_offsets", 1, nil)
	admWantErr(t, "internal topic", deleteRecords("__consumer_offsets", 0).Err, kerr.InvalidTopicException)
}

// admConfigOf finds key in a kadm resource config.
func admConfigOf(t *testing.T, rc kadm.ResourceConfig, key string) kadm.Config {
	t.Helper()
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("%s: no config %s", rc.Name, key)
	return kadm.Config{}
}

func admDescribeTopicConfigs(t *testing.T, adm *kadm.Client, topic string) kadm.ResourceConfig {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(admCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		t.Fatalf("describe configs of %s: %v", topic, err)
	}
	return rc
}

func admWantConfig(t *testing.T, c kadm.Config, value string, source kmsg.ConfigSource) {
	t.Helper()
	if c.MaybeValue() != value || c.Source != source {
		t.Errorf("%s = %q from %v, want %q from %v", c.Key, c.MaybeValue(), c.Source, value, source)
	}
}

func TestAdminDescribeConfigs(t *testing.T) {
	b := startBroker(t, map[string]string{"log.retention.bytes": "999999"})
	cl, adm := admClient(t, b)
	admCreateTopic(t, adm, "conf", 1, map[string]*string{"retention.ms": admStr("1234")})

	rc := admDescribeTopicConfigs(t, adm, "conf")
	if len(rc.Configs) != len(TopicConfigKeys()) {
		t.Errorf("%d topic configs described, want %d", len(rc.Configs), len(TopicConfigKeys()))
	}
	ret := admConfigOf(t, rc, "retention.ms")
	admWantConfig(t, ret, "1234", kmsg.ConfigSourceDynamicTopicConfig)
	if len(ret.Synonyms) != 2 ||
		ret.Synonyms[0].Key != "retention.ms" || ret.Synonyms[0].Source != kmsg.ConfigSourceDynamicTopicConfig ||
		ret.Synonyms[1].Key != "log.retention.hours" || *ret.Synonyms[1].Value != "168" || ret.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig { // Kafka: log.retention.ms has no default of its own
		t.Errorf("retention.ms synonyms %+v", ret.Synonyms)
	}
	admWantConfig(t, admConfigOf(t, rc, "cleanup.policy"), "delete", kmsg.ConfigSourceDefaultConfig)
	admWantConfig(t, admConfigOf(t, rc, "retention.bytes"), "999999", kmsg.ConfigSourceStaticBrokerConfig)
	admWantConfig(t, admConfigOf(t, rc, "min.compaction.lag.ms"), "0", kmsg.ConfigSourceDefaultConfig)

	// Named keys (unknown ones omitted), documentation and types (v3+), and resource errors.
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation = true
	addRes := func(typ kmsg.ConfigResourceType, name string, keys ...string) {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, keys
		req.Resources = append(req.Resources, r)
	}
	addRes(kmsg.ConfigResourceTypeTopic, "conf", "retention.ms", "no.such.key", "cleanup.policy")
	addRes(kmsg.ConfigResourceTypeTopic, "missing")
	addRes(kmsg.ConfigResourceTypeTopic, "bad name!")
	addRes(kmsg.ConfigResourceTypeBrokerLogger, "1")
	resp := admRaw[*kmsg.DescribeConfigsResponse](t, cl, req)
	if resp.Version != 4 || len(resp.Resources) != 4 {
		t.Fatalf("DescribeConfigs v%d answered %d resources", resp.Version, len(resp.Resources))
	}
	cfgs := resp.Resources[0].Configs
	if len(cfgs) != 2 || cfgs[0].Name != "retention.ms" || cfgs[1].Name != "cleanup.policy" {
		t.Fatalf("named keys answered %+v", cfgs)
	}
	// is_default is a v0 field (Kafka 4 serves v1+, where source says it).
	if c := cfgs[0]; c.Source != kmsg.ConfigSourceDynamicTopicConfig || c.ReadOnly || c.IsSensitive || c.ConfigType != kmsg.ConfigTypeLong || c.Documentation == nil || *c.Documentation == "" || len(c.ConfigSynonyms) != 0 {
		t.Errorf("retention.ms entry %+v", c)
	}
	if c := cfgs[1]; c.Source != kmsg.ConfigSourceDefaultConfig || c.ConfigType != kmsg.ConfigTypeList {
		t.Errorf("cleanup.policy entry %+v", c)
	}
	admWantCode(t, "unknown topic", resp.Resources[1].ErrorCode, kerr.UnknownTopicOrPartition)
	admWantCode(t, "bad topic name", resp.Resources[2].ErrorCode, kerr.InvalidTopicException)
	admWantCode(t, "broker logger", resp.Resources[3].ErrorCode, kerr.InvalidRequest)

	// v1: no documentation or types on the wire.
	cl1, _ := admClient(t, b, admPinned(32, 1))
	resp = admRaw[*kmsg.DescribeConfigsResponse](t, cl1, req)
	if resp.Version != 1 || resp.Resources[0].Configs[0].Documentation != nil {
		t.Errorf("v%d answered documentation %v", resp.Version, resp.Resources[0].Configs[0].Documentation)
	}
}

func TestAdminAlterTopicConfigs(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, map[string]string{"log.dirs": dir})
	_, adm := admClient(t, b)
	ctx := admCtx(t)
	admCreateTopic(t, adm, "alt", 1, nil)

	alter := func(validate bool, topic string, ops ...kadm.AlterConfig) error {
		t.Helper()
		f := adm.AlterTopicConfigs
		if validate {
			f = adm.ValidateAlterTopicConfigs
		}
		resps, err := f(ctx, ops, topic)
		if err != nil {
			return err
		}
		r, err := resps.On(topic, nil)
		if err != nil {
			return err
		}
		return r.Err
	}
	if err := alter(false, "alt",
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: admStr("5000")},
		kadm.AlterConfig{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: admStr("compact")},
	); err != nil {
		t.Fatal(err)
	}
	rc := admDescribeTopicConfigs(t, adm, "alt")
	admWantConfig(t, admConfigOf(t, rc, "retention.ms"), "5000", kmsg.ConfigSourceDynamicTopicConfig)
	admWantConfig(t, admConfigOf(t, rc, "cleanup.policy"), "delete,compact", kmsg.ConfigSourceDynamicTopicConfig)

	if err := alter(false, "alt", kadm.AlterConfig{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: admStr("delete")}); err != nil {
		t.Fatal(err)
	}
	admWantConfig(t, admConfigOf(t, admDescribeTopicConfigs(t, adm, "alt"), "cleanup.policy"), "compact", kmsg.ConfigSourceDynamicTopicConfig)
	// A compacted topic refuses DeleteRecords.
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "alt", Partition: 0, At: 0})
	dr, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := dr.Lookup("alt", 0)
	admWantErr(t, "delete records of a compacted topic", r.Err, kerr.PolicyViolation)

	if err := alter(false, "alt", kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"}); err != nil {
		t.Fatal(err)
	}
	admWantConfig(t, admConfigOf(t, admDescribeTopicConfigs(t, adm, "alt"), "retention.ms"), "604800000", kmsg.ConfigSourceDefaultConfig)

	admWantErr(t, "append to a non-list key", alter(false, "alt", kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: admStr("1")}), kerr.InvalidConfig)
	admWantErr(t, "unknown key", alter(false, "alt", kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.key", Value: admStr("1")}), kerr.InvalidConfig)
	admWantErr(t, "bad value", alter(false, "alt", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: admStr("soon")}), kerr.InvalidConfig)
	admWantErr(t, "null value", alter(false, "alt", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms"}), kerr.InvalidRequest)
	admWantErr(t, "unknown topic", alter(false, "missing", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: admStr("1")}), kerr.UnknownTopicOrPartition)
	// A failed change changes nothing, even its valid part.
	_ = alter(false, "alt",
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "segment.ms", Value: admStr("1000")},
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: admStr("soon")})
	if err := alter(true, "alt", kadm.AlterConfig{Op: kadm.SetConfig, Name: "segment.ms", Value: admStr("1000")}); err != nil {
		t.Fatal(err)
	}
	admWantConfig(t, admConfigOf(t, admDescribeTopicConfigs(t, adm, "alt"), "segment.ms"), "604800000", kmsg.ConfigSourceDefaultConfig)

	// Legacy AlterConfigs replaces the whole set of overrides.
	resps, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: admStr("100000")}}, "alt")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := resps.On("alt", nil); r.Err != nil {
		t.Fatal(r.Err)
	}
	rc = admDescribeTopicConfigs(t, adm, "alt")
	admWantConfig(t, admConfigOf(t, rc, "retention.bytes"), "100000", kmsg.ConfigSourceDynamicTopicConfig)
	admWantConfig(t, admConfigOf(t, rc, "cleanup.policy"), "delete", kmsg.ConfigSourceDefaultConfig)

	// Overrides are persisted and reach the partition logs when they are next opened.
	ctxShut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctxShut); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, map[string]string{"log.dirs": dir})
	_, adm2 := admClient(t, b2)
	admWantConfig(t, admConfigOf(t, admDescribeTopicConfigs(t, adm2, "alt"), "retention.bytes"), "100000", kmsg.ConfigSourceDynamicTopicConfig)
	l, ok := b2.Logs().Log(engine.TopicPartition{Topic: "alt", Partition: 0})
	if !ok || l.Config().RetentionBytes != 100000 {
		t.Fatalf("reopened log: retention.bytes %d", l.Config().RetentionBytes)
	}
}

func TestAdminBrokerConfigs(t *testing.T) {
	b := startBroker(t, nil)
	cl, adm := admClient(t, b)
	ctx := admCtx(t)
	admCreateTopic(t, adm, "bc", 1, nil)
	node := b.nodeID

	describe := func() kadm.ResourceConfig {
		t.Helper()
		rcs, err := adm.DescribeBrokerConfigs(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(strconv.Itoa(int(node)), nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	rc := describe()
	if len(rc.Configs) != len(BrokerConfigKeys()) {
		t.Errorf("%d broker configs described, want %d", len(rc.Configs), len(BrokerConfigKeys()))
	}
	admWantConfig(t, admConfigOf(t, rc, "message.max.bytes"), "1048588", kmsg.ConfigSourceDefaultConfig)
	admWantConfig(t, admConfigOf(t, rc, "listeners"), "PLAINTEXT://127.0.0.1:0", kmsg.ConfigSourceStaticBrokerConfig)
	// advertised.listeners unset: the listeners this broker derived and advertises; broker.id
	// is the node id (as a Kafka 4 broker reports them).
	admWantConfig(t, admConfigOf(t, rc, "advertised.listeners"), "PLAINTEXT://"+b.Addr(), kmsg.ConfigSourceDefaultConfig)
	admWantConfig(t, admConfigOf(t, rc, "broker.id"), strconv.Itoa(int(node)), kmsg.ConfigSourceDefaultConfig)

	alterBroker := func(ops ...kadm.AlterConfig) error {
		t.Helper()
		resps, err := adm.AlterBrokerConfigs(ctx, ops, node)
		if err != nil {
			return err
		}
		for _, r := range resps {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}
	if err := alterBroker(kadm.AlterConfig{Op: kadm.SetConfig, Name: "message.max.bytes", Value: admStr("2000000")}); err != nil {
		t.Fatal(err)
	}
	mm := admConfigOf(t, describe(), "message.max.bytes")
	admWantConfig(t, mm, "2000000", kmsg.ConfigSourceDynamicBrokerConfig)
	if len(mm.Synonyms) != 2 || mm.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("message.max.bytes synonyms %+v", mm.Synonyms)
	}
	// The topic-level key follows the broker key behind it.
	admWantConfig(t, admConfigOf(t, admDescribeTopicConfigs(t, adm, "bc"), "max.message.bytes"), "2000000", kmsg.ConfigSourceDynamicBrokerConfig)

	admWantErr(t, "read-only broker key", alterBroker(kadm.AlterConfig{Op: kadm.SetConfig, Name: "log.dirs", Value: admStr("/tmp/x")}), kerr.InvalidRequest) // Kafka: INVALID_REQUEST (KAFKA-13609)
	admWantErr(t, "unknown broker key", alterBroker(kadm.AlterConfig{Op: kadm.SetConfig, Name: "no.such.key", Value: admStr("1")}), kerr.InvalidConfig)
	if err := alterBroker(kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "message.max.bytes"}); err != nil {
		t.Fatal(err)
	}
	admWantConfig(t, admConfigOf(t, describe(), "message.max.bytes"), "1048588", kmsg.ConfigSourceDefaultConfig)

	// Read-only flags, the "" resource, and other brokers (raw: kgo would route by broker id).
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, name := range []string{"", "7", "x"} {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeBroker, name, []string{"log.dirs", "message.max.bytes"}
		req.Resources = append(req.Resources, r)
	}
	resp := admRaw[*kmsg.DescribeConfigsResponse](t, cl, req)
	admWantCode(t, `broker ""`, resp.Resources[0].ErrorCode, nil)
	if cs := resp.Resources[0].Configs; len(cs) != 0 { // "" is the cluster-wide default: nothing set
		t.Errorf(`broker "" configs %+v, want none`, cs)
	}
	admWantCode(t, "another broker", resp.Resources[1].ErrorCode, kerr.InvalidRequest)
	admWantCode(t, "a non-numeric broker", resp.Resources[2].ErrorCode, kerr.InvalidRequest)

	areq := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ar := kmsg.NewIncrementalAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeBroker, "7"
	areq.Resources = append(areq.Resources, ar)
	aresp := admRaw[*kmsg.IncrementalAlterConfigsResponse](t, cl, areq)
	admWantCode(t, "alter another broker", aresp.Resources[0].ErrorCode, kerr.InvalidRequest)
}

func TestAdminDescribeCluster(t *testing.T) {
	b := startBroker(t, nil)
	host, portStr, _ := net.SplitHostPort(b.Addr())
	port, _ := strconv.Atoi(portStr)
	for v := int16(0); v <= 2; v++ {
		cl, _ := admClient(t, b, admPinned(60, v))
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = endpointTypeBrokers
		req.IncludeClusterAuthorizedOperations = true
		resp := admRaw[*kmsg.DescribeClusterResponse](t, cl, req)
		if resp.Version != v {
			t.Fatalf("asked v%d, got v%d", v, resp.Version)
		}
		admWantCode(t, "describe cluster", resp.ErrorCode, nil)
		if resp.ClusterID != b.clusterID || resp.ControllerID != b.nodeID || len(resp.Brokers) != 1 {
			t.Fatalf("v%d: cluster %q controller %d brokers %d", v, resp.ClusterID, resp.ControllerID, len(resp.Brokers))
		}
		if br := resp.Brokers[0]; br.NodeID != b.nodeID || br.Host != host || br.Port != int32(port) || br.IsFenced {
			t.Errorf("v%d: broker %+v, want %d at %s:%d", v, br, b.nodeID, host, port)
		}
		if resp.ClusterAuthorizedOperations <= 0 {
			t.Errorf("v%d: authorized operations %d", v, resp.ClusterAuthorizedOperations)
		}
		if v >= 1 {
			if resp.EndpointType != endpointTypeBrokers {
				t.Errorf("v%d: endpoint type %d", v, resp.EndpointType)
			}
			req.EndpointType = endpointTypeControllers
			admWantCode(t, "controllers endpoint", admRaw[*kmsg.DescribeClusterResponse](t, cl, req).ErrorCode, kerr.MismatchedEndpointType)
			req.EndpointType = 9
			admWantCode(t, "unknown endpoint type", admRaw[*kmsg.DescribeClusterResponse](t, cl, req).ErrorCode, kerr.UnsupportedEndpointType)
		}
	}
}
