package broker

// Tests of what Kafka's admin tools ask first (issue 14, part "admin"): finalized features and
// UpdateFeatures, DescribeQuorum, cluster-wide dynamic broker configs, broker.id and
// advertised.listeners in DescribeConfigs, the internal topics' replication factor.

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
)

// admFinalized returns ApiVersions' finalized feature levels and epoch.
func admFinalized(t *testing.T, b *Broker) (map[string]int16, map[string][2]int16, int64) {
	t.Helper()
	cl, _ := admClient(t, b)
	resp := admRaw[*kmsg.ApiVersionsResponse](t, cl, kmsg.NewPtrApiVersionsRequest())
	fin := map[string]int16{}
	for _, f := range resp.FinalizedFeatures {
		if f.MinVersionLevel != f.MaxVersionLevel {
			t.Errorf("finalized %s: %d-%d", f.Name, f.MinVersionLevel, f.MaxVersionLevel)
		}
		fin[f.Name] = f.MaxVersionLevel
	}
	sup := map[string][2]int16{}
	for _, f := range resp.SupportedFeatures {
		sup[f.Name] = [2]int16{f.MinVersion, f.MaxVersion}
	}
	return fin, sup, resp.FinalizedFeaturesEpoch
}

func updateFeature(t *testing.T, b *Broker, version int16, name string, level int16, upgradeType int8, validateOnly bool) (int16, *string) {
	t.Helper()
	cl, _ := admClient(t, b, admPinned(57, version))
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.TimeoutMillis = 10000
	req.ValidateOnly = validateOnly
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = name, level, upgradeType
	u.AllowDowngrade = upgradeType >= upgradeTypeSafeDowngrade
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	resp := admRaw[*kmsg.UpdateFeaturesResponse](t, cl, req)
	if version < 2 {
		if len(resp.Results) != 1 || resp.Results[0].Feature != name || resp.Results[0].ErrorCode != resp.ErrorCode {
			t.Errorf("v%d results %+v (top-level code %d)", version, resp.Results, resp.ErrorCode)
		}
	}
	return resp.ErrorCode, resp.ErrorMessage
}

// TestAdminFeatures: ApiVersions lists every feature Kafka 4.4 knows with weir's supported
// levels and finalizes metadata.version 33, kraft.version 1 and transaction.version 2;
// UpdateFeatures changes transaction.version (at once, in ApiVersions and the transaction
// coordinator, kept across a restart) and refuses what Kafka refuses.
func TestAdminFeatures(t *testing.T) {
	dir := t.TempDir()
	props := map[string]string{"log.dirs": dir}
	b, stop := startStoppableBroker(t, props)
	fin, sup, epoch := admFinalized(t, b)
	wantFin := map[string]int16{"metadata.version": 33, "kraft.version": 1, "transaction.version": 2, "group.version": 1, "share.version": 1}
	for k, v := range wantFin {
		if fin[k] != v {
			t.Errorf("finalized %s = %d, want %d (all: %v)", k, fin[k], v, fin)
		}
	}
	if len(fin) != len(wantFin) {
		t.Errorf("finalized %v, want %v", fin, wantFin)
	}
	wantSup := map[string][2]int16{"metadata.version": {33, 33}, "kraft.version": {0, 1}, "transaction.version": {0, 2},
		"group.version": {0, 1}, "eligible.leader.replicas.version": {0, 0}, "share.version": {0, 1}, "streams.version": {0, 0}}
	for k, v := range wantSup {
		if sup[k] != v {
			t.Errorf("supported %s = %v, want %v", k, sup[k], v)
		}
	}

	for _, tc := range []struct {
		what    string
		version int16
		name    string
		level   int16
		typ     int8
		want    *kerr.Error
	}{
		{"downgrade as an upgrade", 1, "transaction.version", 1, upgradeTypeUpgrade, kerr.InvalidUpdateVersion},
		{"downgrade without allow_downgrade (v0)", 0, "transaction.version", 1, upgradeTypeUpgrade, kerr.InvalidUpdateVersion},
		{"above the supported range", 1, "transaction.version", 3, upgradeTypeUpgrade, kerr.InvalidUpdateVersion},
		{"group.version 2 (above the supported range)", 1, "group.version", 2, upgradeTypeUpgrade, kerr.InvalidUpdateVersion},
		{"metadata.version 20", 2, "metadata.version", 20, upgradeTypeSafeDowngrade, kerr.InvalidUpdateVersion},
		{"unknown feature", 2, "no.such.version", 1, upgradeTypeUpgrade, kerr.InvalidUpdateVersion},
		{"unknown upgrade type", 1, "transaction.version", 1, 0, kerr.InvalidUpdateVersion},
		{"kraft.version", 1, "kraft.version", 0, upgradeTypeSafeDowngrade, kerr.InvalidUpdateVersion},
		{"share.version", 1, "share.version", 0, upgradeTypeSafeDowngrade, kerr.InvalidUpdateVersion},
		{"validate only", 1, "transaction.version", 0, upgradeTypeSafeDowngrade, nil},
		{"same level", 2, "metadata.version", 33, upgradeTypeUpgrade, nil},
	} {
		code, msg := updateFeature(t, b, tc.version, tc.name, tc.level, tc.typ, tc.what == "validate only")
		admWantCode(t, tc.what, code, tc.want)
		if tc.want != nil && msg == nil {
			t.Errorf("%s: no error message", tc.what)
		}
	}
	if fin, _, _ := admFinalized(t, b); fin["transaction.version"] != 2 {
		t.Fatalf("after refusals and validate_only: transaction.version %d", fin["transaction.version"])
	}

	code, _ := updateFeature(t, b, 1, "transaction.version", 0, upgradeTypeSafeDowngrade, false)
	admWantCode(t, "downgrade to 0", code, nil)
	fin, _, epoch2 := admFinalized(t, b)
	if _, ok := fin["transaction.version"]; ok || epoch2 <= epoch {
		t.Errorf("after the downgrade: finalized %v epoch %d (was %d)", fin, epoch2, epoch)
	}
	if got := b.txns.coord.TransactionVersion(); got != 0 {
		t.Errorf("coordinator transaction version %d, want 0", got)
	}
	code, _ = updateFeature(t, b, 2, "transaction.version", 1, upgradeTypeUpgrade, false)
	admWantCode(t, "upgrade to 1", code, nil)

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, props)
	if fin, _, _ := admFinalized(t, b2); fin["transaction.version"] != 1 {
		t.Errorf("after a restart: transaction.version %d, want 1", fin["transaction.version"])
	}
	if got := b2.txns.coord.TransactionVersion(); got != 1 {
		t.Errorf("after a restart: coordinator transaction version %d, want 1", got)
	}
}

// TestAdminDescribeQuorumSingle: a single broker is the one voter and leader of its quorum;
// another partition than __cluster_metadata-0 is UNKNOWN_TOPIC_OR_PARTITION; a single-node
// controller cannot add voters.
func TestAdminDescribeQuorumSingle(t *testing.T) {
	b := startBroker(t, nil)
	for v := int16(0); v <= 2; v++ {
		cl, _ := admClient(t, b, admPinned(55, v))
		req := kmsg.NewPtrDescribeQuorumRequest()
		for _, name := range []string{clusterMetadataTopic, "other"} {
			rt := kmsg.NewDescribeQuorumRequestTopic()
			rt.Topic = name
			rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
			req.Topics = append(req.Topics, rt)
		}
		resp := admRaw[*kmsg.DescribeQuorumResponse](t, cl, req)
		admWantCode(t, "describe quorum", resp.ErrorCode, nil)
		if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: %+v", v, resp.Topics)
		}
		p := resp.Topics[0].Partitions[0]
		admWantCode(t, "metadata partition", p.ErrorCode, nil)
		if p.LeaderID != b.nodeID || p.LeaderEpoch < 1 || p.HighWatermark < 1 || len(p.CurrentVoters) != 1 || p.CurrentVoters[0].ReplicaID != b.nodeID || p.CurrentVoters[0].LogEndOffset < p.HighWatermark {
			t.Errorf("v%d: quorum %+v", v, p)
		}
		admWantCode(t, "other topic", resp.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
		if v >= 2 && len(resp.Nodes) != 1 {
			t.Errorf("v2 nodes %+v", resp.Nodes)
		}
	}
	cl, _ := admClient(t, b)
	add := kmsg.NewPtrAddRaftVoterRequest()
	add.VoterID = 9
	admWantCode(t, "add voter to a single node", admRaw[*kmsg.AddRaftVoterResponse](t, cl, add).ErrorCode, kerr.InvalidRequest)
	wrong := "not-this-cluster"
	rm := kmsg.NewPtrRemoveRaftVoterRequest()
	rm.VoterID, rm.ClusterID = 1, &wrong
	admWantCode(t, "remove voter, another cluster id", admRaw[*kmsg.RemoveRaftVoterResponse](t, cl, rm).ErrorCode, kerr.InconsistentClusterID)
}

// TestAdminClusterDefaultConfigs: the BROKER resource "" is the cluster-wide default
// (DYNAMIC_DEFAULT_BROKER_CONFIG), a per-broker override wins over it, describing "" lists only
// the defaults, and both survive a restart (the metadata log).
func TestAdminClusterDefaultConfigs(t *testing.T) {
	props := map[string]string{"log.dirs": t.TempDir(), "node.id": "3"}
	b, stop := startStoppableBroker(t, props)
	_, adm := admClient(t, b)
	admCreateTopic(t, adm, "cdc", 1, nil)
	alter := func(name string, op kadm.IncrementalOp, key, value string) {
		t.Helper()
		var v *string
		if op != kadm.DeleteConfig {
			v = &value
		}
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = key, kmsg.IncrementalAlterConfigOp(op), v
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		cl, _ := admClient(t, b)
		resp := admRaw[*kmsg.IncrementalAlterConfigsResponse](t, cl, req)
		admWantCode(t, "alter "+name+" "+key, resp.Resources[0].ErrorCode, nil)
	}
	describe := func(name string, b *Broker) []kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		cl, _ := admClient(t, b)
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeBroker, name
		req.Resources = append(req.Resources, r)
		req.IncludeSynonyms = true
		resp := admRaw[*kmsg.DescribeConfigsResponse](t, cl, req)
		admWantCode(t, "describe "+name, resp.Resources[0].ErrorCode, nil)
		return resp.Resources[0].Configs
	}
	find := func(cs []kmsg.DescribeConfigsResponseResourceConfig, key string) kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		for _, c := range cs {
			if c.Name == key {
				return c
			}
		}
		t.Fatalf("%s not described", key)
		return kmsg.DescribeConfigsResponseResourceConfig{}
	}
	want := func(c kmsg.DescribeConfigsResponseResourceConfig, value string, src kmsg.ConfigSource) {
		t.Helper()
		if c.Value == nil || *c.Value != value || c.Source != src {
			v := "<nil>"
			if c.Value != nil {
				v = *c.Value
			}
			t.Errorf("%s = %s from %v, want %s from %v", c.Name, v, c.Source, value, src)
		}
	}
	alter("", kadm.SetConfig, "log.retention.ms", "3600000")
	want(find(describe("3", b), "log.retention.ms"), "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	want(find(admDescribeTopicConfigsRaw(t, b, "cdc"), "retention.ms"), "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	if cs := describe("", b); len(cs) != 1 || cs[0].Name != "log.retention.ms" {
		t.Errorf(`describe "": %+v`, cs)
	}
	alter("3", kadm.SetConfig, "log.retention.ms", "7200000")
	c := find(describe("3", b), "log.retention.ms")
	want(c, "7200000", kmsg.ConfigSourceDynamicBrokerConfig)
	if len(c.ConfigSynonyms) < 2 || c.ConfigSynonyms[0].Source != kmsg.ConfigSourceDynamicBrokerConfig || c.ConfigSynonyms[1].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("synonyms %+v", c.ConfigSynonyms)
	}
	if l, ok := b.logs.Log(engine.TopicPartition{Topic: "cdc", Partition: 0}); !ok || l.Config().RetentionMs != 7200000 {
		t.Errorf("the partition log does not use the per-broker value")
	}
	// Read-only keys are refused on the default too.
	cl, _ := admClient(t, b)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeBroker
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = "log.dirs", admStr("/x")
	rr.Configs = append(rr.Configs, rc)
	req.Resources = append(req.Resources, rr)
	admWantCode(t, "read-only key on the default", admRaw[*kmsg.IncrementalAlterConfigsResponse](t, cl, req).Resources[0].ErrorCode, kerr.InvalidRequest)

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b2 := startBroker(t, props)
	want(find(describe("3", b2), "log.retention.ms"), "7200000", kmsg.ConfigSourceDynamicBrokerConfig)
	alter2 := func(name, key string) {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, name
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = key, kmsg.IncrementalAlterConfigOpDelete
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		cl, _ := admClient(t, b2)
		admWantCode(t, "delete "+key, admRaw[*kmsg.IncrementalAlterConfigsResponse](t, cl, req).Resources[0].ErrorCode, nil)
	}
	alter2("3", "log.retention.ms")
	want(find(describe("3", b2), "log.retention.ms"), "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	if l, ok := b2.logs.Log(engine.TopicPartition{Topic: "cdc", Partition: 0}); !ok || l.Config().RetentionMs != 3600000 {
		t.Errorf("the partition log does not use the cluster default")
	}
}

// admDescribeTopicConfigsRaw describes a topic's configs.
func admDescribeTopicConfigsRaw(t *testing.T, b *Broker, topic string) []kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	cl, _ := admClient(t, b)
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	req.Resources = append(req.Resources, r)
	resp := admRaw[*kmsg.DescribeConfigsResponse](t, cl, req)
	admWantCode(t, "describe topic "+topic, resp.Resources[0].ErrorCode, nil)
	return resp.Resources[0].Configs
}
