package faults

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster"
)

// Apache Kafka in place of weir (RunConfig.Broker BrokerKafka), so that a fault's unavailability
// on weir can be set beside the same fault's on Kafka. Each node is one JVM running kafka.Kafka
// in KRaft combined mode (process.roles=broker,controller) with the same ports, hosts,
// namespaces and run settings (clusterProps) as a weir node; testcluster runs it through its
// Command and Ready hooks, so the nemeses signal the JVM itself (java is the command, and
// `ip netns exec` execs it).
//
// Layout of node i (DIR/cluster/node-i):
//
//	server.properties   kafkaNodeProps, written before the first start
//	log4j2.properties   INFO to stdout, which testcluster appends to weir.log
//	data/               log.dirs, formatted once (kafka.tools.StorageTool format) before the
//	                    first start with the run's cluster id and the static voter set
//
// Readiness (kafkaReady) is a Metadata request to the node itself, through the run's dialer:
// the node is ready once it lists every node as a broker (a broker is listed once registered
// and unfenced) and names a controller. The active controller (cluster.controller) is the
// leader of the metadata quorum in DescribeQuorum, since Kafka's Metadata answers a random
// broker as the controller id.

// Brokers a run can test.
const (
	BrokerWeir  = "weir"
	BrokerKafka = "kafka"
)

// Kafka 4.x entry points (kafka_2.13 jar) and the files of a node's directory.
const (
	kafkaMain        = "kafka.Kafka"
	kafkaStorageTool = "kafka.tools.StorageTool"
	kafkaConfigFile  = "server.properties"
	kafkaLog4jFile   = "log4j2.properties"
	kafkaDataDir     = "data"
	// kafkaHeap is each node's JVM heap (-Xms and -Xmx): Kafka's scripts default to 1 GiB; the
	// workload's few hundred records a second need far less, and 3 JVMs share the machine.
	kafkaHeap = "512m"
	// kafkaStartTimeout bounds a node's start: a JVM on a loaded machine is slower than weir.
	kafkaStartTimeout = 180 * time.Second
)

// kafkaUnavailable is why the disk and clock families do not run against Kafka.
const kafkaUnavailable = "weir only: it drives weir's fault control (internal/faultctl, a -tags faults build); Kafka has none"

// kafkaNodeProps is node n's server.properties: KRaft combined mode with the static voter set
// voters (testcluster's controller.quorum.voters), the Kafka listener on n's address and the
// controller listener on its controller port, log.dirs under n's directory, and the run's
// settings (clusterProps: RF 3, min.insync.replicas 2, ...).
func kafkaNodeProps(n *testcluster.Node, voters string) map[string]string {
	p := clusterProps()
	maps.Copy(p, map[string]string{
		"process.roles":                  "broker,controller",
		"node.id":                        strconv.Itoa(int(n.ID)),
		"controller.quorum.voters":       voters,
		"listeners":                      "PLAINTEXT://" + n.Addr() + ",CONTROLLER://" + n.ControllerAddr(),
		"advertised.listeners":           "PLAINTEXT://" + n.Addr(),
		"inter.broker.listener.name":     "PLAINTEXT",
		"controller.listener.names":      "CONTROLLER",
		"listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"log.dirs":                       filepath.Join(n.Dir, kafkaDataDir),
		"num.partitions":                 "3",
		"share.coordinator.state.topic.replication.factor": "3",
		"share.coordinator.state.topic.min.isr":            "2",
	})
	return p
}

// propertiesText is props as a properties file, one key=value a line in key order.
func propertiesText(props map[string]string) string {
	var b strings.Builder
	b.WriteString("# written by the fault runner (internal/faults/kafkacluster.go)\n")
	for _, k := range slices.Sorted(maps.Keys(props)) {
		b.WriteString(k + "=" + props[k] + "\n")
	}
	return b.String()
}

// kafkaLog4j sends Kafka's log (INFO and up) to stdout; the request log only from WARN.
const kafkaLog4j = `rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.target = SYSTEM_OUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.request.name = kafka.request.logger
logger.request.level = WARN
`

// kafkaCommand is node n's command line: the JVM (with the flags of Kafka's
// kafka-server-start.sh, a smaller heap) running kafka.Kafka on n's server.properties.
func kafkaCommand(java, libs string, n *testcluster.Node) []string {
	return []string{java,
		"-Xms" + kafkaHeap, "-Xmx" + kafkaHeap,
		"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(n.Dir, kafkaLog4jFile),
		"-Dkafka.logs.dir=" + n.Dir,
		"-cp", kafkaClasspath(libs),
		kafkaMain, filepath.Join(n.Dir, kafkaConfigFile),
	}
}

// kafkaClasspath is the JVM class path of the jar folders libs (a list separated by ':'): each
// folder's jars (the JVM expands "folder/*").
func kafkaClasspath(libs string) string {
	var cp []string
	for _, dir := range filepath.SplitList(libs) {
		cp = append(cp, filepath.Join(dir, "*"))
	}
	return strings.Join(cp, string(filepath.ListSeparator))
}

// useKafka makes tcfg run Kafka nodes (see prepareKafka for what must happen before Start).
func useKafka(cfg *RunConfig, tcfg *testcluster.Config) {
	tcfg.Binary = ""
	tcfg.Command = func(n *testcluster.Node) []string { return kafkaCommand(cfg.Java, cfg.KafkaLibs, n) }
	tcfg.Ready = kafkaReady(cfg.Dial, cfg.Nodes)
	tcfg.StartTimeout = kafkaStartTimeout
}

// prepareKafka writes every node's configuration and formats its storage with a new cluster id
// (the nodes in parallel, each a short JVM run on the host: formatting needs no network).
func prepareKafka(ctx context.Context, cfg *RunConfig, tc *testcluster.Cluster) error {
	id, err := kafkaClusterID()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(tc.Nodes()))
	for i, n := range tc.Nodes() {
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return fmt.Errorf("kafka node %d: %w", n.ID, err)
		}
		props := propertiesText(kafkaNodeProps(n, tc.Voters()))
		if err := os.WriteFile(filepath.Join(n.Dir, kafkaConfigFile), []byte(props), 0o644); err != nil {
			return fmt.Errorf("kafka node %d: %w", n.ID, err)
		}
		if err := os.WriteFile(filepath.Join(n.Dir, kafkaLog4jFile), []byte(kafkaLog4j), 0o644); err != nil {
			return fmt.Errorf("kafka node %d: %w", n.ID, err)
		}
		wg.Go(func() { errs[i] = formatKafka(ctx, cfg, n, id) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// formatKafka formats node n's log dir (kafka-storage.sh format) for cluster id.
func formatKafka(ctx context.Context, cfg *RunConfig, n *testcluster.Node, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cfg.Java, "-Xmx256m",
		"-Dlog4j2.configurationFile="+filepath.Join(n.Dir, kafkaLog4jFile),
		"-cp", kafkaClasspath(cfg.KafkaLibs), kafkaStorageTool,
		"format", "--cluster-id", id, "--config", filepath.Join(n.Dir, kafkaConfigFile))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kafka node %d: storage format: %w\n%s", n.ID, err, testcluster.LastLines(string(out), 20))
	}
	return nil
}

// kafkaClusterID is a new Kafka cluster id: 16 random bytes in URL-safe base64 without padding,
// as Kafka's Uuid.randomUuid().toString().
func kafkaClusterID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("kafka cluster id: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// kafkaReady is the readiness probe of a Kafka node: a Metadata request (no topics) to the node
// itself through dial answers every node 1..nodes as a broker and a controller id.
func kafkaReady(dial Dialer, nodes int) func(ctx context.Context, n *testcluster.Node) error {
	return func(ctx context.Context, n *testcluster.Node) error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		opts := []kgo.Opt{kgo.SeedBrokers(n.Addr()), kgo.DialTimeout(time.Second)}
		if dial != nil {
			opts = append(opts, kgo.Dialer(dial))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return fmt.Errorf("metadata client: %w", err)
		}
		defer cl.Close()
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(ctx, cl.SeedBrokers()[0])
		if err != nil {
			return fmt.Errorf("metadata: %w", err)
		}
		return kafkaMetadataReady(resp, nodes)
	}
}

// kafkaMetadataReady says what a node's Metadata answer lacks for the node to be ready (nil: it
// lists every node 1..nodes as a broker and names a controller).
func kafkaMetadataReady(resp *kmsg.MetadataResponse, nodes int) error {
	var ids []int32
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	for id := int32(1); id <= int32(nodes); id++ {
		if !slices.Contains(ids, id) {
			return fmt.Errorf("metadata lists brokers %v, not yet %d", ids, id)
		}
	}
	if resp.ControllerID < 0 {
		return errors.New("metadata names no controller")
	}
	return nil
}

// kafkaController is the node leading Kafka's metadata quorum (DescribeQuorum of
// __cluster_metadata, which a broker forwards to the controllers).
func (c *cluster) kafkaController(ctx context.Context) (int32, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return -1, fmt.Errorf("describe quorum: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, fmt.Errorf("describe quorum: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, errors.New("describe quorum: no __cluster_metadata partition in the answer")
	}
	rp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return -1, fmt.Errorf("describe quorum: %w", err)
	}
	if rp.LeaderID < 0 {
		return -1, errors.New("describe quorum: no quorum leader")
	}
	return rp.LeaderID, nil
}
