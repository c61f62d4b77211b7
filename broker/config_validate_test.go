package broker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConfigDefaultsValid: every key's default parses and is in its range, so no typed read
// can fail (configkeys.go), and every definition is complete.
func TestConfigDefaultsValid(t *testing.T) {
	check := func(d ConfigDef) {
		if d.Doc == "" || d.Type == "" {
			t.Errorf("%s: no doc or type", d.Name)
		}
		if d.Default != "" {
			if err := validateValue(d, d.Default); err != nil {
				t.Errorf("default of %s: %v", d.Name, err)
			}
		}
		if d.SynonymOf != "" && (brokerDefByName[d.SynonymOf] == nil || d.Scale <= 0) {
			t.Errorf("%s: synonym of %q with scale %d", d.Name, d.SynonymOf, d.Scale)
		}
	}
	for _, d := range brokerConfigDefs {
		check(d)
	}
	for _, d := range topicDefs {
		check(d)
	}
	c, err := NewConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"log.retention.ms", "log.roll.ms"} {
		if v, src := c.Get(k); v != "604800000" || src != "DEFAULT_CONFIG" {
			t.Errorf("%s = %s (%s): want 168 hours from its synonym's default", k, v, src)
		}
	}
}

// TestConfigRangeRefusedAtStart: a value out of range, or that does not parse, stops the start
// with one message naming the file and line (or --set), the key and the rule.
func TestConfigRangeRefusedAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte("# Kafka's stock file sets these\nlog.retention.hours=168\nnum.network.threads=3\n\n"+
		"log.segment.bytes=10\nnum.partitions=0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := ReadProperties(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewConfigFrom(p)
	if err == nil || err.Error() != path+":5: log.segment.bytes=10: value must be at least 1048576" {
		t.Errorf("got %v", err) // log.segment.bytes is the first bad key in name order
	}
	p.Values["log.segment.bytes"] = "1048576"
	if _, err = NewConfigFrom(p); err == nil || err.Error() != path+":6: num.partitions=0: value must be at least 1" {
		t.Errorf("got %v", err)
	}
	p.Values["num.partitions"], p.Values["log.retention.minutes"], p.Origin["log.retention.minutes"] = "3", "soon", "--set"
	if _, err = NewConfigFrom(p); err == nil || err.Error() != "--set: log.retention.minutes=soon: not a 32-bit integer (int)" {
		t.Errorf("got %v", err)
	}
	delete(p.Values, "log.retention.minutes")
	if _, err = NewConfigFrom(p); err != nil {
		t.Errorf("valid file refused: %v", err)
	}
	for k, v := range map[string]string{
		"min.insync.replicas": "0", "log.index.size.max.bytes": "3", "log.flush.interval.messages": "0",
		"message.max.bytes": "-1", "log.roll.hours": "0", "queued.max.requests": "0", "broker.heartbeat.interval.ms": "0",
		"log.message.timestamp.after.max.ms": "-1", "listener.name.plaintext.max.connections": "-1", "node.id": "x",
	} {
		if _, err := NewConfig(map[string]string{k: v}); err == nil || !strings.HasPrefix(err.Error(), k+"="+v+": ") {
			t.Errorf("%s=%s: %v, want an error naming the key", k, v, err)
		}
	}
}

// TestConfigEnumerationsRefused: each enumeration (cleanup.policy, message.timestamp.type,
// compression.type, ssl.client.auth, ...) refuses a value outside it, broker and topic keys.
func TestConfigEnumerationsRefused(t *testing.T) {
	n := 0
	for _, d := range append(append([]ConfigDef{}, brokerConfigDefs...), topicOnlyConfigDefs...) {
		e, ok := d.Valid.(enumValidator)
		if !ok {
			continue
		}
		n++
		if _, err := NewConfig(map[string]string{d.Name: "bogus"}); err == nil || !strings.Contains(err.Error(), d.Name+"=bogus: ") || !strings.Contains(err.Error(), "must be one of") {
			t.Errorf("%s=bogus: %v", d.Name, err)
		}
		for _, v := range e.values {
			if v == "" {
				continue
			}
			if _, err := NewConfig(map[string]string{d.Name: v}); err != nil && !strings.Contains(err.Error(), "listener") {
				t.Errorf("%s=%s refused: %v", d.Name, v, err)
			}
		}
		if d.Topic != "" {
			if err := validateValue(topicDefs[d.Topic], "bogus"); err == nil || !strings.Contains(err.Error(), d.Topic+"=bogus") {
				t.Errorf("topic key %s=bogus: %v", d.Topic, err)
			}
		}
	}
	if n < 5 {
		t.Errorf("only %d enumerations", n)
	}
	if _, err := NewConfig(map[string]string{"log.cleanup.policy": "compact,delete"}); err != nil {
		t.Error(err)
	}
	if _, err := NewConfig(map[string]string{"listener.name.external.ssl.client.auth": "REQUIRED"}); err == nil || !strings.Contains(err.Error(), "listener.name.external.ssl.client.auth=REQUIRED") {
		t.Errorf("per-listener enumeration: %v", err)
	}
}

// TestConfigDynamicOutOfRange: IncrementalAlterConfigs, AlterConfigs and CreateTopics apply the
// same checks: a topic's bad value is INVALID_CONFIG, a broker's INVALID_REQUEST (Kafka's
// answers), with a message naming the key.
func TestConfigDynamicOutOfRange(t *testing.T) {
	b := startBroker(t, nil)
	cl, adm := admClient(t, b)
	ctx := admCtx(t)
	admCreateTopic(t, adm, "dyn", 1, nil)

	wantMsg := func(what string, code int16, msg *string, want *kerr.Error, key string) {
		t.Helper()
		admWantCode(t, what, code, want)
		if msg == nil || !strings.Contains(*msg, key) {
			t.Errorf("%s: message %v does not name %s", what, msg, key)
		}
	}
	inc := func(typ kmsg.ConfigResourceType, name, key, value string) kmsg.IncrementalAlterConfigsResponseResource {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = typ, name
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = key, &value, kmsg.IncrementalAlterConfigOpSet
		r.Configs = append(r.Configs, c)
		req.Resources = append(req.Resources, r)
		return admRaw[*kmsg.IncrementalAlterConfigsResponse](t, cl, req).Resources[0]
	}
	node := strconv.Itoa(int(b.nodeID))
	for _, tc := range []struct{ key, value string }{
		{"segment.bytes", "10"}, {"cleanup.policy", "compact,bogus"}, {"min.insync.replicas", "0"},
		{"message.timestamp.type", "NoTime"}, {"min.cleanable.dirty.ratio", "1.5"}, {"retention.ms", "soon"}, {"retention.ms", "-5"},
	} {
		r := inc(kmsg.ConfigResourceTypeTopic, "dyn", tc.key, tc.value)
		wantMsg("topic "+tc.key+"="+tc.value, r.ErrorCode, r.ErrorMessage, kerr.InvalidConfig, tc.key)
	}
	r := inc(kmsg.ConfigResourceTypeBroker, node, "log.segment.bytes", "10")
	wantMsg("broker log.segment.bytes=10", r.ErrorCode, r.ErrorMessage, kerr.InvalidRequest, "log.segment.bytes")
	r = inc(kmsg.ConfigResourceTypeBroker, node, "log.cleanup.policy", "bogus")
	wantMsg("broker log.cleanup.policy=bogus", r.ErrorCode, r.ErrorMessage, kerr.InvalidRequest, "log.cleanup.policy")

	// Legacy AlterConfigs.
	areq := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "dyn"
	ac := kmsg.NewAlterConfigsRequestResourceConfig()
	ac.Name, ac.Value = "segment.index.bytes", admStr("3")
	ar.Configs = append(ar.Configs, ac)
	areq.Resources = append(areq.Resources, ar)
	aresp := admRaw[*kmsg.AlterConfigsResponse](t, cl, areq).Resources[0]
	wantMsg("AlterConfigs segment.index.bytes=3", aresp.ErrorCode, aresp.ErrorMessage, kerr.InvalidConfig, "segment.index.bytes")

	// CreateTopics.
	for _, tc := range []struct{ key, value string }{{"segment.bytes", "1000"}, {"compression.type", "brotli"}, {"internal.segment.bytes", "1"}} {
		resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{tc.key: admStr(tc.value)}, "bad-"+strings.ReplaceAll(tc.key, ".", "-"))
		if err == nil {
			err = resp.Err
		}
		admWantErr(t, "create with "+tc.key+"="+tc.value, err, kerr.InvalidConfig)
		if resp.ErrMessage == "" || !strings.Contains(resp.ErrMessage, tc.key) {
			t.Errorf("create with %s=%s: message %q", tc.key, tc.value, resp.ErrMessage)
		}
	}
	// Nothing changed.
	admWantConfig(t, admConfigOf(t, admDescribeTopicConfigs(t, adm, "dyn"), "segment.bytes"), "1073741824", kmsg.ConfigSourceDefaultConfig)
}

// TestDescribeConfigsSynonyms: DescribeConfigs lists a key's synonyms as Kafka does: the topic
// override, then per source (dynamic broker, static broker, default) the broker key and its
// time synonyms in precedence order; read-only = not dynamic; types and documentation.
func TestDescribeConfigsSynonyms(t *testing.T) {
	b := startBroker(t, map[string]string{"log.retention.hours": "24", "log.roll.hours": "2"})
	_, adm := admClient(t, b)
	ctx := admCtx(t)
	admCreateTopic(t, adm, "syn", 1, map[string]*string{"retention.ms": admStr("1234")})
	admCreateTopic(t, adm, "plain", 1, nil)
	node := b.nodeID
	if _, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: admStr("5000")}}, node); err != nil {
		t.Fatal(err)
	}
	type syn struct {
		key, value string
		src        kmsg.ConfigSource
	}
	want := func(c kadm.Config, value string, src kmsg.ConfigSource, syns ...syn) {
		t.Helper()
		admWantConfig(t, c, value, src)
		var got []syn
		for _, s := range c.Synonyms {
			v := ""
			if s.Value != nil {
				v = *s.Value
			}
			got = append(got, syn{s.Key, v, s.Source})
		}
		if len(got) != len(syns) {
			t.Errorf("%s synonyms %v, want %v", c.Key, got, syns)
			return
		}
		for i := range syns {
			if got[i] != syns[i] {
				t.Errorf("%s synonyms %v, want %v", c.Key, got, syns)
				return
			}
		}
	}
	const (
		topicSrc   = kmsg.ConfigSourceDynamicTopicConfig
		dynSrc     = kmsg.ConfigSourceDynamicBrokerConfig
		staticSrc  = kmsg.ConfigSourceStaticBrokerConfig
		defaultSrc = kmsg.ConfigSourceDefaultConfig
	)
	rc := admDescribeTopicConfigs(t, adm, "syn")
	want(admConfigOf(t, rc, "retention.ms"), "1234", topicSrc,
		syn{"retention.ms", "1234", topicSrc}, syn{"log.retention.ms", "5000", dynSrc},
		syn{"log.retention.hours", "24", staticSrc}, syn{"log.retention.hours", "168", defaultSrc})
	want(admConfigOf(t, rc, "segment.ms"), "7200000", staticSrc,
		syn{"log.roll.hours", "2", staticSrc}, syn{"log.roll.hours", "168", defaultSrc})
	want(admConfigOf(t, rc, "min.cleanable.dirty.ratio"), "0.5", defaultSrc, syn{"log.cleaner.min.cleanable.ratio", "0.5", defaultSrc})
	want(admConfigOf(t, rc, "message.timestamp.type"), "CreateTime", defaultSrc, syn{"log.message.timestamp.type", "CreateTime", defaultSrc})
	want(admConfigOf(t, admDescribeTopicConfigs(t, adm, "plain"), "retention.ms"), "5000", dynSrc,
		syn{"log.retention.ms", "5000", dynSrc}, syn{"log.retention.hours", "24", staticSrc}, syn{"log.retention.hours", "168", defaultSrc})
	for _, c := range rc.Configs {
		if c.Key == "internal.segment.bytes" {
			t.Error("internal.segment.bytes described though not set")
		}
	}
	admCreateTopic(t, adm, "small", 1, map[string]*string{"internal.segment.bytes": admStr("16384")})
	want(admConfigOf(t, admDescribeTopicConfigs(t, adm, "small"), "internal.segment.bytes"), "16384", topicSrc, syn{"internal.segment.bytes", "16384", topicSrc}) // as Kafka 4.4

	rcs, err := adm.DescribeBrokerConfigs(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	brc, err := rcs.On(strconv.Itoa(int(node)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ms := admConfigOf(t, brc, "log.retention.ms")
	want(ms, "5000", dynSrc, syn{"log.retention.ms", "5000", dynSrc}, syn{"log.retention.hours", "24", staticSrc}, syn{"log.retention.hours", "168", defaultSrc})
	hours := admConfigOf(t, brc, "log.retention.hours")
	want(hours, "24", staticSrc, syn{"log.retention.hours", "24", staticSrc}, syn{"log.retention.hours", "168", defaultSrc})
	minutes := admConfigOf(t, brc, "log.retention.minutes")
	want(minutes, "", defaultSrc) // describing a synonym leaves out the keys above it

	// Types and documentation (v3+, with include_documentation).
	cl, _ := admClient(t, b)
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation, req.IncludeSynonyms = true, true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeBroker, strconv.Itoa(int(node)), []string{"log.retention.hours", "log.cleanup.policy", "log.retention.ms"}
	req.Resources = append(req.Resources, r)
	resp := admRaw[*kmsg.DescribeConfigsResponse](t, cl, req)
	cfgs := resp.Resources[0].Configs
	if len(cfgs) != 3 || cfgs[2].ReadOnly || cfgs[2].ConfigType != kmsg.ConfigTypeLong || len(cfgs[2].ConfigSynonyms) != 3 || cfgs[0].ConfigType != kmsg.ConfigTypeInt || cfgs[1].ConfigType != kmsg.ConfigTypeList ||
		cfgs[0].Documentation == nil || !strings.Contains(*cfgs[0].Documentation, "hours") || !cfgs[0].ReadOnly || cfgs[1].ReadOnly {
		t.Errorf("entries %+v", cfgs)
	}
}

// TestDescribeConfigsKafkaConfigsTool: Apache Kafka's own kafka-configs (ConfigCommand) describes
// weir's topic and broker configs with their synonyms. It needs the Kafka jars:
// WEIR_KAFKA_LIBS=<folder of jars> (../shared/anchors/kafka/setup.sh prints it).
func TestDescribeConfigsKafkaConfigsTool(t *testing.T) {
	libs := os.Getenv("WEIR_KAFKA_LIBS")
	if libs == "" {
		t.Skip("WEIR_KAFKA_LIBS not set: Kafka's ConfigCommand is not available")
	}
	b := startBroker(t, map[string]string{"log.retention.hours": "24"})
	_, adm := admClient(t, b)
	admCreateTopic(t, adm, "syn", 1, map[string]*string{"retention.ms": admStr("1234")})
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		args = append([]string{"-cp", libs + "/*", "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", b.Addr(), "--describe", "--all"}, args...)
		out, err := exec.CommandContext(ctx, "java", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("kafka-configs %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := run("--entity-type", "topics", "--entity-name", "syn")
	for _, want := range []string{
		"retention.ms=1234 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1234, STATIC_BROKER_CONFIG:log.retention.hours=24, DEFAULT_CONFIG:log.retention.hours=168}",
		"segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kafka-configs --entity-type topics: no %q in\n%s", want, out)
		}
	}
	out = run("--entity-type", "brokers", "--entity-name", strconv.Itoa(int(b.nodeID)))
	if want := "log.retention.hours=24 sensitive=false synonyms={STATIC_BROKER_CONFIG:log.retention.hours=24, DEFAULT_CONFIG:log.retention.hours=168}"; !strings.Contains(out, want) {
		t.Errorf("kafka-configs --entity-type brokers: no %q in\n%s", want, out)
	}
}

// TestConfigCompactionLagsConflict: a topic whose effective min.compaction.lag.ms exceeds its
// max.compaction.lag.ms is refused at creation and at alteration (INVALID_CONFIG), as Kafka's
// LogConfig.validateValues does.
func TestConfigCompactionLagsConflict(t *testing.T) {
	b := startBroker(t, map[string]string{"log.cleaner.max.compaction.lag.ms": "60000"})
	codes := wireCreateTopics(t, b, 7,
		wireTopic("bad", 1, "cleanup.policy", "compact", "min.compaction.lag.ms", "120000"),
		wireTopic("good", 1, "cleanup.policy", "compact", "min.compaction.lag.ms", "1000"))
	if codes["bad"] != kerr.InvalidConfig.Code || codes["good"] != 0 {
		t.Fatalf("create: %v, want bad INVALID_CONFIG and good created", codes)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "good"
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value = "max.compaction.lag.ms", kmsg.StringPtr("500")
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp := wireRoundTrip[*kmsg.IncrementalAlterConfigsResponse](dialWire(t, b.Addr()), req, 1)
	if got := resp.Resources[0].ErrorCode; got != kerr.InvalidConfig.Code {
		t.Fatalf("alter max.compaction.lag.ms below min: error %d, want INVALID_CONFIG", got)
	}
}

// TestControllerBrokerPrincipalsRefusedAtStart: a malformed controller.broker.principals stops
// the start with a message naming the key, on a single broker (no controller port, where the
// key is otherwise never read) as on a cluster; a well-formed one is accepted.
func TestControllerBrokerPrincipalsRefusedAtStart(t *testing.T) {
	for v, want := range map[string]string{
		"1:User:broker":               "<node id>=<principal>",
		"x=User:broker":               "<node id>=<principal>",
		"-1=User:broker":              "<node id>=<principal>",
		"1=broker":                    "User:<name>",
		"1=User:":                     "User:<name>",
		"1=User:a;1=User:b":           "listed twice",
		"1=User:broker;2=User:broker": "its own principal",
	} {
		for _, voters := range []string{"", "1@127.0.0.1:9093"} {
			props := map[string]string{"controller.broker.principals": v}
			if voters != "" {
				props["controller.quorum.voters"] = voters
			}
			_, err := NewConfig(props)
			if err == nil || !strings.HasPrefix(err.Error(), "controller.broker.principals="+v+": ") || !strings.Contains(err.Error(), want) {
				t.Errorf("controller.broker.principals=%s (voters %q): %v, want an error naming the key and mentioning %q", v, voters, err, want)
			}
		}
	}
	for _, v := range []string{"1=User:broker-1; 2=User:broker-2", " 1=User:b1 ;"} {
		if _, err := NewConfig(map[string]string{"controller.broker.principals": v}); err != nil {
			t.Errorf("controller.broker.principals=%s refused: %v", v, err)
		}
	}
}
