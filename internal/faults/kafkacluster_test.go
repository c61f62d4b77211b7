package faults

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster"
)

// kafkaTestCluster lays out (does not start) a 3-node Kafka cluster on 10.9.0.i with fixed ports.
func kafkaTestCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	cfg := RunConfig{Broker: BrokerKafka, KafkaLibs: "/opt/kafka/libs", Java: "/usr/bin/java", Nodes: 3}
	tcfg := testcluster.Config{N: 3, Dir: t.TempDir(), BasePort: 9092, ControllerBasePort: 19092, MetricsBasePort: 29092,
		Host: func(id int) string { return "10.9.0." + string(rune('0'+id)) }}
	useKafka(&cfg, &tcfg)
	tc, err := testcluster.New(tcfg)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// TestKafkaNodeConfig: a Kafka node's server.properties is KRaft combined mode with the static
// voter set of every node's controller address, listeners on the node's own host, its log dir
// under the node directory, and the run's settings (RF 3, min.insync.replicas 2, ...), the same
// as weir's nodes get; its command line runs the JVM itself (what the nemeses signal).
func TestKafkaNodeConfig(t *testing.T) {
	tc := kafkaTestCluster(t)
	n := tc.Node(2)
	props := kafkaNodeProps(n, tc.Voters())
	want := map[string]string{
		"process.roles":                            "broker,controller",
		"node.id":                                  "2",
		"controller.quorum.voters":                 "1@10.9.0.1:19092,2@10.9.0.2:19093,3@10.9.0.3:19094",
		"listeners":                                "PLAINTEXT://10.9.0.2:9093,CONTROLLER://10.9.0.2:19093",
		"advertised.listeners":                     "PLAINTEXT://10.9.0.2:9093",
		"controller.listener.names":                "CONTROLLER",
		"inter.broker.listener.name":               "PLAINTEXT",
		"listener.security.protocol.map":           "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"log.dirs":                                 filepath.Join(n.Dir, "data"),
		"default.replication.factor":               "3",
		"min.insync.replicas":                      "2",
		"offsets.topic.replication.factor":         "3",
		"transaction.state.log.replication.factor": "3",
		"transaction.state.log.min.isr":            "2",
		"group.initial.rebalance.delay.ms":         "0",
		"replica.lag.time.max.ms":                  "10000",
	}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("%s=%q, want %q", k, props[k], v)
		}
	}
	for k, v := range clusterProps() {
		if props[k] != v {
			t.Errorf("%s=%q: weir's nodes get %q", k, props[k], v)
		}
	}
	text := propertiesText(props)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(props) || !slices.IsSorted(lines) || !slices.Contains(lines, "node.id=2") {
		t.Errorf("server.properties:\n%s", text)
	}

	argv := kafkaCommand("/usr/bin/java", "/opt/kafka/libs:/opt/log4j-slf4j", n)
	if argv[0] != "/usr/bin/java" || !slices.Contains(argv, "/opt/kafka/libs/*:/opt/log4j-slf4j/*") ||
		!slices.Equal(argv[len(argv)-2:], []string{"kafka.Kafka", filepath.Join(n.Dir, "server.properties")}) {
		t.Errorf("command %q", argv)
	}
	if id, err := kafkaClusterID(); err != nil || len(id) != 22 {
		t.Errorf("cluster id %q, %v", id, err)
	} else if b, err := base64.RawURLEncoding.DecodeString(id); err != nil || len(b) != 16 {
		t.Errorf("cluster id %q: %d bytes, %v", id, len(b), err)
	}
}

// TestKafkaRunConfig: a Kafka run needs the jar folder; disk and clock faults are weir's only.
func TestKafkaRunConfig(t *testing.T) {
	cfg := RunConfig{Dir: t.TempDir(), Broker: BrokerKafka}
	if err := cfg.defaults(); err == nil || !strings.Contains(err.Error(), "jar") {
		t.Errorf("no jar folder: %v", err)
	}
	libs := t.TempDir()
	cfg = RunConfig{Dir: t.TempDir(), Broker: BrokerKafka, KafkaLibs: t.TempDir() + ":" + libs, Java: "sh"}
	if err := cfg.defaults(); err == nil || !strings.Contains(err.Error(), "kafka_2.13") {
		t.Errorf("jar folder without Kafka: %v", err)
	}
	if err := os.WriteFile(filepath.Join(libs, "kafka_2.13-4.4.0.jar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cfg.defaults(); err != nil || !filepath.IsAbs(cfg.Java) {
		t.Fatalf("defaults: %v (java %q)", err, cfg.Java)
	}
	for _, f := range []string{NemesisDisk, NemesisClock} {
		if cfg.unavailable(f) == "" {
			t.Errorf("%s available against Kafka", f)
		}
	}
	for _, f := range []string{NemesisPause, NemesisKill, NemesisMembership} {
		if why := cfg.unavailable(f); why != "" {
			t.Errorf("%s unavailable against Kafka: %s", f, why)
		}
	}
	weir := RunConfig{Dir: t.TempDir()}
	if err := weir.defaults(); err != nil || weir.Broker != BrokerWeir || weir.unavailable(NemesisDisk) != "" {
		t.Errorf("weir run: broker %q, %v, disk: %q", weir.Broker, err, weir.unavailable(NemesisDisk))
	}
	if err := (&RunConfig{Dir: t.TempDir(), Broker: "redpanda"}).defaults(); err == nil {
		t.Error("unknown broker accepted")
	}
}

// TestKafkaMetadataReady: a Kafka node is ready once its Metadata lists every node and names a
// controller.
func TestKafkaMetadataReady(t *testing.T) {
	resp := func(controller int32, ids ...int32) *kmsg.MetadataResponse {
		r := kmsg.NewPtrMetadataResponse()
		r.ControllerID = controller
		for _, id := range ids {
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID = id
			r.Brokers = append(r.Brokers, b)
		}
		return r
	}
	if err := kafkaMetadataReady(resp(2, 3, 1, 2), 3); err != nil {
		t.Errorf("all brokers and a controller: %v", err)
	}
	if err := kafkaMetadataReady(resp(2, 1, 2), 3); err == nil {
		t.Error("ready with broker 3 missing")
	}
	if err := kafkaMetadataReady(resp(-1, 1, 2, 3), 3); err == nil {
		t.Error("ready without a controller")
	}
}
