package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/weir-mq/weir/internal/faults/history"
	"github.com/weir-mq/weir/internal/testcluster"
)

// Network is the fault surface of the network the nodes run in (internal/faults/netns behind an
// adapter). Nodes are named by their node ids, 1..N. Every method replaces the previous fault:
// Heal restores full connectivity, and each other call starts from a healed network.
type Network interface {
	// Isolate cuts node off from every other node and from the clients.
	Isolate(node int) error
	// Split puts the nodes in groups that reach only their own group's members.
	Split(groups ...[]int) error
	// Bridge splits the nodes into a and b, both of which reach mid (a member of neither).
	Bridge(a, b []int, mid int) error
	// OneWay drops the packets from node from to node to; to still reaches from.
	OneWay(from, to int) error
	// Heal removes every fault.
	Heal() error
	// Method says how faults are made ("netns+nftables", ...), for the report.
	Method() string
}

// Dialer dials a node's Kafka address on the clients' behalf (kgo.Dialer's signature).
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Workloads.
const (
	WorkloadQueue = "queue"
	WorkloadTxn   = "txn"
)

// Nemesis families.
const (
	NemesisPause      = "pause"
	NemesisKill       = "kill"
	NemesisPartition  = "partition"
	NemesisMembership = "membership"
	NemesisDisk       = "disk"
	NemesisClock      = "clock"
)

// Families is every nemesis family a run may name, available or not.
var Families = []string{NemesisPause, NemesisKill, NemesisPartition, NemesisMembership, NemesisDisk, NemesisClock}

// RunConfig says what one fault run does. Zero values take the defaults named on each field.
type RunConfig struct {
	// Broker is the broker under test: BrokerWeir (default) or BrokerKafka, Apache Kafka 4.x in
	// KRaft combined mode (kafkacluster.go), to set its unavailability per fault beside weir's.
	// The disk and clock families are weir's only.
	Broker string
	// Binary is the weir binary; "" builds cmd/weir with -tags faults (testcluster.BuildTags):
	// the disk and clock families need its fault control (internal/faultctl).
	Binary string
	// KafkaLibs is the folder of Kafka's jars (scripts/kafka-libs.sh prints it), or several
	// separated by ':' (Kafka's Maven artifacts lack the distribution's SLF4J binding, without
	// which a broker logs nothing: scripts/faults.sh adds log4j-slf4j-impl's), for BrokerKafka;
	// Java is the java binary that runs them ("": java on PATH).
	KafkaLibs, Java string
	// Dir is the run's output directory (created): history.jsonl, verdict.json, report.md and
	// cluster/node-i/ (each node's data and weir.log).
	Dir string
	// Nodes is the cluster size (3).
	Nodes int
	// Workload is WorkloadQueue (default) or WorkloadTxn.
	Workload string
	// Nemeses are the families to inject (none: a run without faults). A family that is not
	// available (see Report.Unavailable) is reported and skipped; an unknown name is an error.
	Nemeses []string
	// TimeLimit is how long workloads and nemeses run (60 s).
	TimeLimit time.Duration
	// Seed fixes the nemesis schedule and the workloads' random choices (0: from the clock;
	// Report.Seed is the seed used). Timing still varies from run to run.
	Seed int64
	// MaxFaults, when positive, ends the schedule after that many faults (the workloads run on
	// to TimeLimit).
	MaxFaults int
	// FaultGap bounds the quiet time before each fault ([5 s, 15 s]).
	FaultGap [2]time.Duration
	// FaultHold bounds how long a fault lasts ([1 s, 30 s]): a pause, a partition, a killed
	// node's downtime.
	FaultHold [2]time.Duration
	// Partitions of each workload topic (3); Producers (2) and Consumers (2) of the workload.
	Partitions, Producers, Consumers int
	// OpsPerSecond is each producer's op rate (40); consumers poll as fast as records come.
	OpsPerSecond float64
	// MaxOps bounds each producer's ops (100000).
	MaxOps int
	// Network, when set, is the nodes' network (Config sets the nodes' addresses and Wrap); nil
	// runs the nodes on 127.0.0.1 and the partition family is unavailable.
	Network Network
	// Dial, when set, is how clients reach the nodes.
	Dial Dialer
	// Cluster, when set, adjusts the cluster's configuration before it starts (for a Network:
	// each node's host address, Wrap to run it inside its namespace).
	Cluster func(cfg *testcluster.Config)
	// Check judges the history; nil uses CheckHistory (internal/faults/checker).
	Check func(ops []history.Op) (valid bool, summary string, verdict any)
	// HealTimeout bounds the wait for a fully in-sync cluster after healing (120 s).
	HealTimeout time.Duration
	// Logger logs the run's progress (slog.Default()).
	Logger *slog.Logger
}

func (c *RunConfig) defaults() error {
	if c.Dir == "" {
		return errors.New("faults: no output directory")
	}
	if c.Broker == "" {
		c.Broker = BrokerWeir
	}
	switch c.Broker {
	case BrokerWeir:
	case BrokerKafka:
		if err := c.kafkaDefaults(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("faults: unknown broker %q: want %s or %s", c.Broker, BrokerWeir, BrokerKafka)
	}
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Nodes < 3 {
		return fmt.Errorf("faults: %d nodes: want at least 3 (RF 3, min.insync.replicas 2)", c.Nodes)
	}
	if c.Workload == "" {
		c.Workload = WorkloadQueue
	}
	if c.Workload != WorkloadQueue && c.Workload != WorkloadTxn {
		return fmt.Errorf("faults: unknown workload %q: want %s or %s", c.Workload, WorkloadQueue, WorkloadTxn)
	}
	for _, n := range c.Nemeses {
		if !slices.Contains(Families, n) {
			return fmt.Errorf("faults: unknown nemesis %q: want some of %v", n, Families)
		}
	}
	if c.TimeLimit <= 0 {
		c.TimeLimit = 60 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano()
	}
	if c.FaultGap == [2]time.Duration{} {
		c.FaultGap = [2]time.Duration{5 * time.Second, 15 * time.Second}
	}
	if c.FaultHold == [2]time.Duration{} {
		c.FaultHold = [2]time.Duration{time.Second, 30 * time.Second}
	}
	if c.FaultGap[0] <= 0 || c.FaultGap[1] < c.FaultGap[0] || c.FaultHold[0] <= 0 || c.FaultHold[1] < c.FaultHold[0] {
		return fmt.Errorf("faults: fault gap %v and hold %v: want 0 < min <= max", c.FaultGap, c.FaultHold)
	}
	if c.Partitions <= 0 {
		c.Partitions = 3
	}
	if c.Producers <= 0 {
		c.Producers = 2
	}
	if c.Consumers <= 0 {
		c.Consumers = 2
	}
	if c.OpsPerSecond <= 0 {
		c.OpsPerSecond = 40
	}
	if c.MaxOps <= 0 {
		c.MaxOps = 100000
	}
	if c.Check == nil {
		c.Check = CheckHistory
	}
	if c.HealTimeout <= 0 {
		c.HealTimeout = 120 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// kafkaDefaults checks the settings of a Kafka run: the jars and java.
func (c *RunConfig) kafkaDefaults() error {
	if c.KafkaLibs == "" {
		return errors.New("faults: broker kafka: no Kafka jar folder (KafkaLibs; scripts/kafka-libs.sh prints one)")
	}
	found := false
	for _, dir := range filepath.SplitList(c.KafkaLibs) {
		jars, _ := filepath.Glob(filepath.Join(dir, "kafka_2.13-*.jar"))
		found = found || len(jars) > 0
	}
	if !found {
		return fmt.Errorf("faults: broker kafka: no kafka_2.13 jar in %s", c.KafkaLibs)
	}
	if c.Java == "" {
		c.Java = "java"
	}
	java, err := exec.LookPath(c.Java)
	if err != nil {
		return fmt.Errorf("faults: broker kafka: %w", err)
	}
	// An absolute path: the node's command runs through `ip netns exec`, whose PATH may differ.
	if c.Java, err = filepath.Abs(java); err != nil {
		return fmt.Errorf("faults: broker kafka: %w", err)
	}
	return nil
}

// unavailable says why family cannot run under c ("" when it can).
func (c *RunConfig) unavailable(family string) string {
	switch family {
	case NemesisPartition:
		if c.Network == nil {
			return "no network namespaces: the nodes share 127.0.0.1, which cannot be partitioned"
		}
	case NemesisDisk, NemesisClock:
		if c.Broker == BrokerKafka {
			return kafkaUnavailable
		}
	}
	return ""
}

// clusterProps are the settings of every node of a run, weir or Kafka.
func clusterProps() map[string]string {
	return map[string]string{
		"default.replication.factor":               "3",
		"min.insync.replicas":                      "2",
		"offsets.topic.replication.factor":         "3",
		"offsets.topic.num.partitions":             "3",
		"transaction.state.log.replication.factor": "3",
		"transaction.state.log.min.isr":            "2",
		"transaction.state.log.num.partitions":     "3",
		"group.initial.rebalance.delay.ms":         "0",
		"replica.lag.time.max.ms":                  "10000",
	}
}
