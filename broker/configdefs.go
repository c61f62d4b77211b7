package broker

import (
	"fmt"
	"strconv"
	"strings"
)

// ConfigType is a config value's type, with Kafka's names.
type ConfigType string

const (
	TypeBoolean  ConfigType = "BOOLEAN"
	TypeString   ConfigType = "STRING"
	TypeInt      ConfigType = "INT"
	TypeShort    ConfigType = "SHORT"
	TypeLong     ConfigType = "LONG"
	TypeDouble   ConfigType = "DOUBLE"
	TypeList     ConfigType = "LIST"
	TypePassword ConfigType = "PASSWORD"
)

// ConfigDef defines one broker config key (server.properties), with its default and meaning.
// Topic is the topic-level key the broker key provides the default for, if any.
type ConfigDef struct {
	Name    string
	Type    ConfigType
	Default string
	Doc     string
	// Dynamic keys can be changed at run time with IncrementalAlterConfigs.
	Dynamic bool
	Topic   string
}

// brokerConfigDefs is every broker key weir understands. Kafka's names and defaults, except
// log.flush.interval.messages: weir acknowledges durably by default (group commit keeps it cheap).
var brokerConfigDefs = []ConfigDef{
	{Name: "node.id", Type: TypeInt, Default: "1", Doc: "This broker's id."},
	{Name: "broker.id", Type: TypeInt, Default: "-1", Doc: "Alias of node.id kept for older tools; node.id wins when both are set."},
	{Name: "listeners", Type: TypeList, Default: "PLAINTEXT://127.0.0.1:9092", Doc: "Listeners to bind: NAME://host:port, comma-separated. An empty host binds every interface."},
	{Name: "advertised.listeners", Type: TypeList, Default: "", Doc: "Addresses sent to clients in Metadata; empty = the listeners (an empty or 0.0.0.0 host is replaced by the machine's hostname)."},
	{Name: "log.dirs", Type: TypeList, Default: "./data", Doc: "Directories holding the partition logs."},
	{Name: "log.dir", Type: TypeString, Default: "", Doc: "Single log directory, used when log.dirs is not set."},
	{Name: "cluster.id", Type: TypeString, Default: "", Doc: "Cluster id reported in Metadata; generated and stored in meta.properties when empty."},
	{Name: "num.partitions", Type: TypeInt, Default: "1", Doc: "Partitions of an auto-created topic, or of CreateTopics with -1.", Dynamic: false},
	{Name: "default.replication.factor", Type: TypeShort, Default: "1", Doc: "Replication factor of auto-created topics."},
	{Name: "auto.create.topics.enable", Type: TypeBoolean, Default: "true", Doc: "Create a topic when Metadata names an unknown one and allows auto creation."},
	{Name: "delete.topic.enable", Type: TypeBoolean, Default: "true", Doc: "Allow DeleteTopics."},
	{Name: "message.max.bytes", Type: TypeInt, Default: "1048588", Doc: "Largest record batch accepted.", Dynamic: true, Topic: "max.message.bytes"},
	{Name: "log.segment.bytes", Type: TypeInt, Default: "1073741824", Doc: "Segment size before a roll.", Dynamic: true, Topic: "segment.bytes"},
	{Name: "log.roll.ms", Type: TypeLong, Default: "604800000", Doc: "Roll a segment whose first batch is older than this.", Dynamic: true, Topic: "segment.ms"},
	{Name: "log.retention.ms", Type: TypeLong, Default: "604800000", Doc: "Delete segments whose newest record is older than this; -1 keeps them.", Dynamic: true, Topic: "retention.ms"},
	{Name: "log.retention.bytes", Type: TypeLong, Default: "-1", Doc: "Delete oldest segments while a partition is larger than this; -1 = no limit.", Dynamic: true, Topic: "retention.bytes"},
	{Name: "log.retention.check.interval.ms", Type: TypeLong, Default: "300000", Doc: "How often retention runs."},
	{Name: "log.index.interval.bytes", Type: TypeInt, Default: "4096", Doc: "Bytes between offset index entries.", Dynamic: true, Topic: "index.interval.bytes"},
	{Name: "log.index.size.max.bytes", Type: TypeInt, Default: "10485760", Doc: "Maximum size of a segment's offset or time index.", Dynamic: true, Topic: "segment.index.bytes"},
	{Name: "log.flush.interval.messages", Type: TypeLong, Default: "1", Doc: "Unflushed messages that force an fdatasync. 1 (weir's default) = every acknowledged write is durable (group commit); larger = acknowledge from the page cache as Kafka's default does.", Dynamic: true, Topic: "flush.messages"},
	{Name: "log.flush.interval.ms", Type: TypeLong, Default: "0", Doc: "Also fdatasync when the oldest unflushed write is this old; 0 disables.", Dynamic: true, Topic: "flush.ms"},
	{Name: "log.cleanup.policy", Type: TypeList, Default: "delete", Doc: "delete, compact, or both.", Dynamic: true, Topic: "cleanup.policy"},
	{Name: "log.message.timestamp.type", Type: TypeString, Default: "CreateTime", Doc: "CreateTime keeps the producer's record timestamps (checked against the two bounds below); LogAppendTime stamps each appended batch with the broker's clock (timestamp-type attribute set, maxTimestamp = now, CRC recomputed) and returns that time in the Produce response.", Dynamic: true, Topic: "message.timestamp.type"},
	{Name: "log.message.timestamp.before.max.ms", Type: TypeLong, Default: "9223372036854775807", Doc: "Largest allowed age of a CreateTime record timestamp: a batch holding a record older than the broker's clock minus this is refused (INVALID_TIMESTAMP). Ignored under LogAppendTime.", Dynamic: true, Topic: "message.timestamp.before.max.ms"},
	{Name: "log.message.timestamp.after.max.ms", Type: TypeLong, Default: "3600000", Doc: "Largest allowed lead of a CreateTime record timestamp over the broker's clock (Kafka 4's default, one hour): a batch holding a later record is refused (INVALID_TIMESTAMP). A far-future timestamp would keep its segment, and every later one, from time retention. Ignored under LogAppendTime.", Dynamic: true, Topic: "message.timestamp.after.max.ms"},
	{Name: "compression.type", Type: TypeString, Default: "producer", Doc: "Stored compression; weir stores batches as the producer sent them.", Dynamic: true, Topic: "compression.type"},
	{Name: "min.insync.replicas", Type: TypeInt, Default: "1", Doc: "Minimum in-sync replicas for acks=all.", Dynamic: true, Topic: "min.insync.replicas"},
	{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false", Doc: "Allow leaders from outside the ISR.", Dynamic: true, Topic: "unclean.leader.election.enable"},
	{Name: "log.cleaner.delete.retention.ms", Type: TypeLong, Default: "86400000", Doc: "How long compaction keeps tombstones.", Dynamic: true, Topic: "delete.retention.ms"},
	{Name: "log.cleaner.enable", Type: TypeBoolean, Default: "true", Doc: "Run the log cleaner (compaction of cleanup.policy=compact topics, __consumer_offsets among them)."},
	{Name: "log.cleaner.threads", Type: TypeInt, Default: "1", Doc: "Log cleaner goroutines."},
	{Name: "log.cleaner.backoff.ms", Type: TypeLong, Default: "15000", Doc: "Sleep of the cleaner when no log is dirty enough."},
	{Name: "log.cleaner.dedupe.buffer.size", Type: TypeLong, Default: "134217728", Doc: "Memory for the cleaners' key-to-offset maps, all threads together."},
	{Name: "log.cleaner.io.buffer.size", Type: TypeInt, Default: "524288", Doc: "Read and write buffer of each cleaner thread."},
	{Name: "log.cleaner.io.max.bytes.per.second", Type: TypeLong, Default: "0", Doc: "Cap on the cleaners' I/O; 0 = unbounded."},
	{Name: "socket.request.max.bytes", Type: TypeInt, Default: "104857600", Doc: "Largest request frame; larger closes the connection."},
	{Name: "max.connections", Type: TypeInt, Default: "2147483647", Doc: "Maximum client connections (read at start)."},
	{Name: "connections.max.idle.ms", Type: TypeLong, Default: "600000", Doc: "Close connections idle this long."},
	{Name: "num.recovery.threads.per.data.dir", Type: TypeInt, Default: "2", Doc: "Threads opening and recovering partition logs per log dir at start."},
	{Name: "log.flush.offset.checkpoint.interval.ms", Type: TypeInt, Default: "60000", Doc: "How often the recovery-point checkpoint is written."},
	{Name: "offsets.topic.num.partitions", Type: TypeInt, Default: "50", Doc: "Partitions of __consumer_offsets."},
	{Name: "offsets.topic.replication.factor", Type: TypeShort, Default: "1", Doc: "Replication factor of __consumer_offsets."},
	{Name: "offsets.topic.segment.bytes", Type: TypeInt, Default: "104857600", Doc: "segment.bytes of __consumer_offsets (small segments let compaction reclaim space sooner)."},
	{Name: "offsets.retention.minutes", Type: TypeInt, Default: "10080", Doc: "Committed offsets of a group expire this long after the group became empty (standalone commits: after the commit)."},
	{Name: "offsets.retention.check.interval.ms", Type: TypeLong, Default: "600000", Doc: "How often expired offsets and empty groups are removed."},
	{Name: "offset.metadata.max.bytes", Type: TypeInt, Default: "4096", Doc: "Largest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE beyond)."},
	{Name: "group.initial.rebalance.delay.ms", Type: TypeInt, Default: "3000", Doc: "How long a group coming from Empty waits for more members before its first rebalance (extended while members keep joining, up to the rebalance timeout)."},
	{Name: "group.min.session.timeout.ms", Type: TypeInt, Default: "6000", Doc: "Smallest session timeout a member may ask for (INVALID_SESSION_TIMEOUT below)."},
	{Name: "group.max.session.timeout.ms", Type: TypeInt, Default: "1800000", Doc: "Largest session timeout a member may ask for (INVALID_SESSION_TIMEOUT above)."},
	{Name: "group.max.size", Type: TypeInt, Default: "2147483647", Doc: "Most members a consumer group may have (GROUP_MAX_SIZE_REACHED beyond)."},
	{Name: "producer.id.expiration.ms", Type: TypeInt, Default: "86400000", Doc: "Forget an idempotent producer's state after this long without writes.", Dynamic: true},
	{Name: "controller.quorum.voters", Type: TypeList, Default: "", Doc: "The metadata quorum: id@host:port of every voter, comma-separated (Kafka's format). The address is the voter's Raft and controller port. Empty = a single broker that is its own one-node quorum."},
	{Name: "controller.listener", Type: TypeString, Default: "", Doc: "host:port of this broker's Raft and controller port when it is not a voter (a voter uses its address in controller.quorum.voters)."},
	{Name: "metadata.log.dir", Type: TypeString, Default: "", Doc: "Where the metadata log (Raft log, snapshots) is kept; empty = the first log dir (in weir-metadata)."},
	{Name: "broker.session.timeout.ms", Type: TypeInt, Default: "2000", Doc: "A broker that has not heartbeated to the controller for this long is fenced and loses its leaderships (Kafka: 9000; weir's default keeps failover under 3 s)."},
	{Name: "broker.heartbeat.interval.ms", Type: TypeInt, Default: "500", Doc: "How often a broker heartbeats to the controller."},
	{Name: "replica.lag.time.max.ms", Type: TypeLong, Default: "30000", Doc: "A follower that has not caught up with the leader's log end for this long leaves the ISR."},
	{Name: "replica.fetch.wait.max.ms", Type: TypeInt, Default: "500", Doc: "Longest wait of a follower's fetch at its leader."},
	{Name: "replica.fetch.max.bytes", Type: TypeInt, Default: "1048576", Doc: "Bytes a follower fetches per partition per request (at least one batch)."},
	{Name: "replica.fetch.response.max.bytes", Type: TypeInt, Default: "10485760", Doc: "Bytes a follower fetches per request."},
	{Name: "replica.fetch.backoff.ms", Type: TypeInt, Default: "1000", Doc: "Wait of a follower after a fetch error."},
	{Name: "controlled.shutdown.enable", Type: TypeBoolean, Default: "true", Doc: "On SIGTERM, move this broker's leaderships to other in-sync replicas before stopping."},
	{Name: "request.timeout.ms", Type: TypeInt, Default: "30000", Doc: "Bound of broker-to-controller requests (topic creation and deletion, ISR changes)."},
	{Name: "max.incremental.fetch.session.cache.slots", Type: TypeInt, Default: "1000", Doc: "Fetch sessions kept (KIP-227)."},
	// Observability: the admin HTTP listener (broker/metrics.go, docs/operations.md).
	{Name: "metrics.listener", Type: TypeString, Default: "127.0.0.1:9644", Doc: "host:port of the admin HTTP listener serving /metrics (Prometheus text format), /healthz and /readyz; empty disables it. Bind it to a private or loopback interface: it is not authenticated. A listener that cannot be bound is logged and the broker serves clients without it."},
	{Name: "metrics.pprof.enable", Type: TypeBoolean, Default: "false", Doc: "Also serve Go's pprof profiling endpoints under /debug/pprof/ on metrics.listener."},
	// Listener security: TLS and SASL (broker/security.go, docs/security.md).
	{Name: "listener.security.protocol.map", Type: TypeList, Default: "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", Doc: "Security protocol of each listener name: NAME:PROTOCOL, comma-separated; protocols PLAINTEXT, SSL (TLS), SASL_PLAINTEXT, SASL_SSL (SASL over TLS)."},
	{Name: "ssl.certificate.location", Type: TypeString, Default: "", Doc: "PEM file of the broker's certificate (and its chain) for SSL and SASL_SSL listeners. Per listener: listener.name.<name>.ssl.certificate.location."},
	{Name: "ssl.key.location", Type: TypeString, Default: "", Doc: "PEM file of the broker certificate's private key (unencrypted)."},
	{Name: "ssl.ca.location", Type: TypeString, Default: "", Doc: "PEM file of the CA certificates that sign client certificates (needed when ssl.client.auth is requested or required), and that brokers trust for the other brokers' certificates on an SSL or SASL_SSL inter-broker listener (unset: the system's roots)."},
	{Name: "ssl.client.auth", Type: TypeString, Default: "none", Doc: "Client certificates on SSL listeners: none, requested (verified if sent) or required. The principal is User:<subject DN>. Applies to SASL_SSL listeners only with the listener.name.<name>. prefix."},
	{Name: "sasl.enabled.mechanisms", Type: TypeList, Default: "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", Doc: "SASL mechanisms served on SASL_PLAINTEXT and SASL_SSL listeners. PLAIN checks the password against the user's SCRAM credential."},
	// Inter-broker security (broker/interbroker.go, docs/security.md#inter-broker).
	{Name: "inter.broker.listener.name", Type: TypeString, Default: "", Doc: "Listener followers use to fetch from their leaders: they connect to the leader's advertised endpoint of this name and speak its security protocol (listener.security.protocol.map). Empty: the listener of security.inter.broker.protocol, else the first listener. Must be in listeners and advertised.listeners."},
	{Name: "security.inter.broker.protocol", Type: TypeString, Default: "", Doc: "Picks the inter-broker listener by protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL): the listener named like it, else the first listener with that protocol. Only one of it and inter.broker.listener.name may be set; with neither, the first listener is used (Kafka's default is PLAINTEXT)."},
	{Name: "sasl.mechanism.inter.broker.protocol", Type: TypeString, Default: "PLAIN", Doc: "SASL mechanism followers authenticate with on a SASL_PLAINTEXT or SASL_SSL inter-broker listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default GSSAPI is not offered). It must be in the listener's sasl.enabled.mechanisms."},
	{Name: "sasl.jaas.config", Type: TypePassword, Default: "", Doc: "The brokers' own SASL credentials on the inter-broker listener, as a Kafka JAAS line: org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" password=\"...\"; (PlainLoginModule for PLAIN). listener.name.<listener>.<mechanism in lower case>.sasl.jaas.config wins over it. Never logged nor described."},
	{Name: "sasl.server.max.receive.size", Type: TypeInt, Default: "524288", Doc: "Largest request frame accepted on a SASL listener before the connection authenticated; larger closes it."},
	{Name: "connection.failed.authentication.delay.ms", Type: TypeInt, Default: "100", Doc: "A failed SASL authentication is answered, and its connection closed, after this delay. Failures are also rate-limited per client address (a burst of 10, then 1 per second)."},
	// Authorizer (ACLs, broker/authz.go).
	{Name: "authorizer.class.name", Type: TypeString, Default: "", Doc: "Kafka's authorizer class; weir turns its built-in ACL authorizer on for any non-empty value (e.g. org.apache.kafka.metadata.authorizer.StandardAuthorizer). Empty (default): no authorization, everything is allowed."},
	{Name: "authorizer.enable", Type: TypeBoolean, Default: "false", Doc: "Turn the ACL authorizer on (the same as a non-empty authorizer.class.name)."},
	{Name: "super.users", Type: TypeList, Default: "", Doc: "Principals allowed every operation whatever the ACLs say, semicolon-separated (User:admin;User:broker). Followers fetch as the inter-broker listener's principal (the SASL user of sasl.jaas.config, the TLS client certificate's subject, or User:ANONYMOUS on PLAINTEXT): with the authorizer on, list it here or give it CLUSTER_ACTION on the cluster."},
	{Name: "allow.everyone.if.no.acl.found", Type: TypeBoolean, Default: "false", Doc: "With the authorizer on, allow an operation on a resource that no ACL applies to (of any principal)."},
}

// topicConfigDefault lists topic-level keys with no broker key, with their defaults.
var topicOnlyConfigDefs = []ConfigDef{
	{Name: "min.compaction.lag.ms", Type: TypeLong, Default: "0", Doc: "Minimum age before a record may be compacted."},
	{Name: "max.compaction.lag.ms", Type: TypeLong, Default: "9223372036854775807", Doc: "Maximum age before a record must be compacted."},
	{Name: "min.cleanable.dirty.ratio", Type: TypeDouble, Default: "0.5", Doc: "Dirty ratio that triggers compaction."},
	{Name: "segment.jitter.ms", Type: TypeLong, Default: "0", Doc: "Random jitter subtracted from segment.ms."},
	{Name: "file.delete.delay.ms", Type: TypeLong, Default: "60000", Doc: "Delay before deleted segment files are removed."},
	{Name: "preallocate", Type: TypeBoolean, Default: "false", Doc: "Preallocate segment files."},
	{Name: "message.downconversion.enable", Type: TypeBoolean, Default: "true", Doc: "Accepted for compatibility; weir stores only magic 2."},
}

var brokerDefByName = func() map[string]*ConfigDef {
	m := map[string]*ConfigDef{}
	for i := range brokerConfigDefs {
		m[brokerConfigDefs[i].Name] = &brokerConfigDefs[i]
	}
	return m
}()

// topicDefs maps each topic-level key to its definition (with the broker key supplying its default).
var topicDefs = func() map[string]ConfigDef {
	m := map[string]ConfigDef{}
	for _, d := range brokerConfigDefs {
		if d.Topic != "" {
			td := d
			td.Name = d.Topic
			td.Topic = d.Name // for a topic def, Topic names the broker key behind the default
			m[d.Topic] = td
		}
	}
	for _, d := range topicOnlyConfigDefs {
		m[d.Name] = d
	}
	return m
}()

// validateValue checks that v parses as the def's type.
func validateValue(d ConfigDef, v string) error {
	switch d.Type {
	case TypeBoolean:
		if v != "true" && v != "false" {
			return fmt.Errorf("%s: %q is not a boolean", d.Name, v)
		}
	case TypeInt:
		if _, err := strconv.ParseInt(v, 10, 32); err != nil {
			return fmt.Errorf("%s: %q is not an int", d.Name, v)
		}
	case TypeShort:
		if _, err := strconv.ParseInt(v, 10, 16); err != nil {
			return fmt.Errorf("%s: %q is not a short", d.Name, v)
		}
	case TypeLong:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("%s: %q is not a long", d.Name, v)
		}
	case TypeDouble:
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return fmt.Errorf("%s: %q is not a double", d.Name, v)
		}
	}
	switch d.Name {
	case "message.timestamp.type", "log.message.timestamp.type":
		if v != "CreateTime" && v != "LogAppendTime" {
			return fmt.Errorf("%s: %q is not CreateTime or LogAppendTime", d.Name, v)
		}
	case "message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", "message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms":
		if n, _ := strconv.ParseInt(v, 10, 64); n < 0 {
			return fmt.Errorf("%s: %q is negative", d.Name, v)
		}
	}
	if d.Name == "cleanup.policy" || d.Name == "log.cleanup.policy" {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "delete" && p != "compact" {
				return fmt.Errorf("%s: %q is not delete or compact", d.Name, p)
			}
		}
	}
	return nil
}
