package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
)

// TestInternalTopicsRefused: with franz-go, clients cannot write to __consumer_offsets (Produce,
// even with Kafka's "__admin_client" client id), delete its records, delete it, add partitions
// to it, or take compaction away from it (IncrementalAlterConfigs set or delete, AlterConfigs
// replacing the overrides); other config changes are accepted. __transaction_state created by a
// client is internal too. The group coordinator's own writes keep working throughout: offsets
// committed before and after are fetched back.
func TestInternalTopicsRefused(t *testing.T) {
	b := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := admClient(t, b)
	admCreateTopic(t, adm, "data", 1, nil)
	commit := func(at int64) {
		t.Helper()
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "data", Partition: 0, At: at, LeaderEpoch: -1})
		res, err := adm.CommitOffsets(ctx, "g", os)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", at, err)
		}
	}
	fetched := func() int64 {
		t.Helper()
		res, err := adm.FetchOffsets(ctx, "g")
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		o, _ := res.Lookup("data", 0)
		return o.At
	}
	commit(5) // creates __consumer_offsets
	if _, ok := b.topics.get(offsetsTopic); !ok {
		t.Fatal("no __consumer_offsets after a commit")
	}

	// Produce: INVALID_TOPIC_EXCEPTION, whatever the client id.
	for _, id := range []string{"attacker", "__admin_client"} {
		pcl := newKgo(t, b.Addr(), kgo.ClientID(id), kgo.RecordRetries(1), kgo.DisableIdempotentWrite())
		for _, topic := range []string{offsetsTopic} {
			err := pcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("forged"), Value: []byte("x")}).FirstErr()
			admWantErr(t, "produce to "+topic+" as "+id, err, kerr.InvalidTopicException)
		}
	}
	// A raw Produce (a v9 request with a valid batch) is refused the same way.
	if l, ok := b.logs.Log(engine.TopicPartition{Topic: offsetsTopic, Partition: 0}); ok {
		before := l.LogEndOffset()
		preq := kmsg.NewPtrProduceRequest()
		preq.Acks = 1
		preq.TimeoutMillis = 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = offsetsTopic, mustTopic(t, b, offsetsTopic).ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = wireBatch("a", "b", "c")
		rt.Partitions = append(rt.Partitions, rp)
		preq.Topics = append(preq.Topics, rt)
		presp := admRaw[*kmsg.ProduceResponse](t, cl, preq)
		admWantCode(t, "raw produce to __consumer_offsets", presp.Topics[0].Partitions[0].ErrorCode, kerr.InvalidTopicException)
		if l.LogEndOffset() != before {
			t.Fatalf("__consumer_offsets-0 grew from %d to %d", before, l.LogEndOffset())
		}
	}

	// DeleteRecords, CreatePartitions, DeleteTopics.
	drs, err := adm.DeleteRecords(ctx, kadm.Offsets{offsetsTopic: {0: {Topic: offsetsTopic, Partition: 0, At: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	dr, _ := drs.Lookup(offsetsTopic, 0)
	admWantErr(t, "delete records of __consumer_offsets", dr.Err, kerr.InvalidTopicException)
	cps, err := adm.CreatePartitions(ctx, 2, offsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	admWantErr(t, "create partitions of __consumer_offsets", cps[offsetsTopic].Err, kerr.InvalidTopicException)
	dts, err := adm.DeleteTopics(ctx, offsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	admWantErr(t, "delete __consumer_offsets", dts[offsetsTopic].Err, kerr.InvalidTopicException)

	// Configs: compaction stays; other changes are accepted.
	alter := func(what string, op kadm.IncrementalOp, key, value string, want *kerr.Error) {
		t.Helper()
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: key, Value: &value}}, offsetsTopic)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := res.On(offsetsTopic, nil)
		if want == nil && r.Err != nil || want != nil && !errors.Is(r.Err, want) {
			t.Errorf("%s: %v, want %v", what, r.Err, want)
		}
	}
	alter("cleanup.policy=delete", kadm.SetConfig, "cleanup.policy", "delete", kerr.InvalidConfig)
	alter("cleanup.policy=compact,delete", kadm.SetConfig, "cleanup.policy", "compact,delete", kerr.InvalidConfig)
	alter("delete cleanup.policy", kadm.DeleteConfig, "cleanup.policy", "", kerr.InvalidConfig)
	alter("segment.bytes", kadm.SetConfig, "segment.bytes", "52428800", nil)
	legacy, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: admStr("52428800")}}, offsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := legacy.On(offsetsTopic, nil); !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Errorf("AlterConfigs dropping cleanup.policy: %v, want INVALID_CONFIG", r.Err)
	}
	if v, _, _ := b.cfg.TopicConfigValue(mustTopic(t, b, offsetsTopic).Configs, "cleanup.policy"); v != "compact" {
		t.Fatalf("cleanup.policy of __consumer_offsets is %q", v)
	}

	// Other internal topics: a client may create one (compacted), not write to it.
	if r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": admStr("delete")}, "__transaction_state"); err == nil && !errors.Is(r.Err, kerr.InvalidConfig) {
		t.Errorf("create __transaction_state with cleanup.policy=delete: %v", r.Err)
	}
	admCreateTopic(t, adm, "__transaction_state", 1, nil)
	ts := mustTopic(t, b, "__transaction_state")
	if v, _, _ := b.cfg.TopicConfigValue(ts.Configs, "cleanup.policy"); !ts.Internal || v != "compact" {
		t.Fatalf("__transaction_state: internal %v, cleanup.policy %q", ts.Internal, v)
	}
	err = newKgo(t, b.Addr(), kgo.RecordRetries(1)).ProduceSync(ctx, &kgo.Record{Topic: "__transaction_state", Value: []byte("x")}).FirstErr()
	admWantErr(t, "produce to __transaction_state", err, kerr.InvalidTopicException)
	// __cluster_metadata cannot be created (Kafka: INVALID_REQUEST).
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "__cluster_metadata"); err == nil && !errors.Is(r.Err, kerr.InvalidRequest) {
		t.Errorf("create __cluster_metadata: %v", r.Err)
	}
	// A user topic starting with "__" is an ordinary topic.
	admCreateTopic(t, adm, "__mine", 1, nil)
	if err := newKgo(t, b.Addr()).ProduceSync(ctx, &kgo.Record{Topic: "__mine", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce to __mine: %v", err)
	}

	// The coordinator still writes: a new commit is fetched back.
	if got := fetched(); got != 5 {
		t.Fatalf("fetched offset %d, want 5", got)
	}
	commit(9)
	if got := fetched(); got != 9 {
		t.Fatalf("fetched offset %d, want 9", got)
	}
}

func mustTopic(t *testing.T, b *Broker, name string) Topic {
	t.Helper()
	tp, ok := b.topics.get(name)
	if !ok {
		t.Fatalf("no topic %s", name)
	}
	return tp
}
