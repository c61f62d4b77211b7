package broker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/weir-mq/weir/record"
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

// ConfigDef defines one config key: the single definition of its type, unit, default, valid
// values, whether it can change at run time, its scope and its synonyms. Broker keys are in
// brokerConfigDefs; Topic names the topic-level key a broker key provides the default for (scope
// "broker, default of a topic key"); topic-only keys are in topicOnlyConfigDefs. Code reads a
// key through its typed accessor (configkeys.go), never by its name.
type ConfigDef struct {
	Name string
	Type ConfigType
	// Unit of a numeric value: ms, hours, bytes, or what is counted; "" when it has none.
	Unit    string
	Default string
	// Valid is the range or the enumeration of valid values (Kafka's validator for the key);
	// nil accepts every value of the type.
	Valid Validator
	// TopicValid is the topic key's validator when it differs from the broker key's (Kafka
	// accepts any log.retention.ms, a negative one meaning -1, but retention.ms only from -1).
	TopicValid Validator
	Doc        string
	// Dynamic keys can be changed at run time with IncrementalAlterConfigs.
	Dynamic bool
	Topic   string
	// SynonymOf names the key this one is a lower-precedence synonym of (Kafka's synonyms:
	// log.retention.hours of log.retention.ms); Scale converts its value to that key's unit.
	// Synonyms of one key take precedence in the order they are defined.
	SynonymOf string
	Scale     int64
	// Internal keys are for tests (Kafka 4's internal.* keys): accepted, documented as such,
	// not listed by DescribeConfigs.
	Internal bool
}

// brokerConfigDefs is every broker key weir understands. Kafka's names and defaults, except
// log.flush.interval.messages: weir acknowledges durably by default (group commit keeps it cheap).
var brokerConfigDefs = []ConfigDef{
	{Name: "node.id", Type: TypeInt, Default: "1", Valid: atLeast(0), Doc: "This broker's id."},
	{Name: "broker.id", Type: TypeInt, Default: "-1", Valid: atLeast(-1), Doc: "Alias of node.id kept for older tools; node.id wins when both are set."},
	{Name: "listeners", Type: TypeList, Default: "PLAINTEXT://127.0.0.1:9092", Doc: "Listeners to bind: NAME://host:port, comma-separated. An empty host binds every interface."},
	{Name: "advertised.listeners", Type: TypeList, Default: "", Doc: "Addresses sent to clients in Metadata; empty = the listeners (an empty or 0.0.0.0 host is replaced by the machine's hostname)."},
	{Name: "log.dirs", Type: TypeList, Default: "./data", Doc: "Directories holding the partition logs. A new partition goes to the online dir holding the fewest partitions; AlterReplicaLogDirs moves one between them. A dir whose write or fsync fails (or that cannot be opened at start) goes offline: only its partitions stop being served here (KAFKA_STORAGE_ERROR) and their leadership moves; the broker keeps running while one dir is online (the first holds the broker's own state and must be)."},
	{Name: "log.dir", Type: TypeString, Default: "", Doc: "Single log directory, used when log.dirs is not set."},
	{Name: "cluster.id", Type: TypeString, Default: "", Doc: "Cluster id reported in Metadata; generated and stored in meta.properties when empty."},
	{Name: "num.partitions", Type: TypeInt, Unit: "partitions", Default: "1", Valid: atLeast(1), Doc: "Partitions of an auto-created topic, or of CreateTopics with -1.", Dynamic: false},
	{Name: "default.replication.factor", Type: TypeShort, Unit: "replicas", Default: "1", Valid: atLeast(1), Doc: "Replication factor of auto-created topics."},
	{Name: "auto.create.topics.enable", Type: TypeBoolean, Default: "true", Doc: "Create a topic when Metadata names an unknown one and allows auto creation."},
	{Name: "delete.topic.enable", Type: TypeBoolean, Default: "true", Doc: "Allow DeleteTopics."},
	{Name: "message.max.bytes", Type: TypeInt, Unit: "bytes", Default: "1048588", Valid: atLeast(0), Doc: "Largest record batch accepted.", Dynamic: true, Topic: "max.message.bytes"},
	{Name: "log.segment.bytes", Type: TypeInt, Unit: "bytes", Default: "1073741824", Valid: atLeast(1048576), Doc: "Segment size before a roll. At least 1 MiB, as in Kafka 4 (KIP-1030); tests that need small segments set the topic key internal.segment.bytes.", Dynamic: true, Topic: "segment.bytes"},
	{Name: "log.roll.ms", Type: TypeLong, Unit: "ms", Default: "", Valid: atLeast(1), Doc: "Roll a segment whose first batch is older than this. When unset, log.roll.hours gives it (Kafka's precedence and default: 168 hours).", Dynamic: true, Topic: "segment.ms"},
	{Name: "log.roll.hours", Type: TypeInt, Unit: "hours", Default: "168", Valid: atLeast(1), Doc: "log.roll.ms in hours, used when log.roll.ms is not set.", SynonymOf: "log.roll.ms", Scale: 3_600_000},
	{Name: "log.retention.ms", Type: TypeLong, Unit: "ms", Default: "", TopicValid: atLeast(-1), Doc: "Delete segments whose newest record is older than this; a negative value keeps them (-1). When unset, log.retention.minutes, else log.retention.hours gives it (Kafka's precedence and default: 168 hours).", Dynamic: true, Topic: "retention.ms"},
	{Name: "log.retention.minutes", Type: TypeInt, Unit: "minutes", Default: "", Doc: "log.retention.ms in minutes, used when log.retention.ms is not set (a negative value keeps segments).", SynonymOf: "log.retention.ms", Scale: 60_000},
	{Name: "log.retention.hours", Type: TypeInt, Unit: "hours", Default: "168", Doc: "log.retention.ms in hours, used when neither log.retention.ms nor log.retention.minutes is set (a negative value keeps segments).", SynonymOf: "log.retention.ms", Scale: 3_600_000},
	{Name: "log.retention.bytes", Type: TypeLong, Unit: "bytes", Default: "-1", Doc: "Delete oldest segments while a partition is larger than this; -1 = no limit.", Dynamic: true, Topic: "retention.bytes"},
	{Name: "log.retention.check.interval.ms", Type: TypeLong, Unit: "ms", Default: "300000", Valid: atLeast(1), Doc: "How often retention runs."},
	{Name: "log.index.interval.bytes", Type: TypeInt, Unit: "bytes", Default: "4096", Valid: atLeast(0), Doc: "Bytes between offset index entries.", Dynamic: true, Topic: "index.interval.bytes"},
	{Name: "log.index.size.max.bytes", Type: TypeInt, Unit: "bytes", Default: "10485760", Valid: atLeast(4), Doc: "Maximum size of a segment's offset or time index.", Dynamic: true, Topic: "segment.index.bytes"},
	{Name: "log.flush.interval.messages", Type: TypeLong, Unit: "messages", Default: "1", Valid: atLeast(1), Doc: "Unflushed messages that force an fdatasync. 1 (weir's default) = every acknowledged write is durable (group commit); larger = acknowledge from the page cache as Kafka's default does.", Dynamic: true, Topic: "flush.messages"},
	{Name: "log.flush.interval.ms", Type: TypeLong, Unit: "ms", Default: "9223372036854775807", Valid: atLeast(0), Doc: "Longest time a write stays unflushed: the partition is fdatasync'd this often while it has unflushed writes. 0 flushes after every append (acknowledgements still wait for the fdatasync only under log.flush.interval.messages=1). The default (Kafka's topic default, Long.MAX) never flushes by time. Unlike Kafka, which checks it only every log.flush.scheduler.interval.ms (by default never), weir's flusher keeps the time itself.", Dynamic: true, Topic: "flush.ms"},
	{Name: "log.roll.jitter.ms", Type: TypeLong, Unit: "ms", Default: "", Valid: atLeast(0), Doc: "Largest random jitter subtracted from a segment's time-based roll deadline (log.roll.ms): each segment draws one in [0, min(this, log.roll.ms)) when it becomes active, so partitions created together do not all roll together. When unset, log.roll.jitter.hours gives it (Kafka's precedence and default: 0).", Dynamic: true, Topic: "segment.jitter.ms"},
	{Name: "log.roll.jitter.hours", Type: TypeInt, Unit: "hours", Default: "0", Valid: atLeast(0), Doc: "log.roll.jitter.ms in hours, used when log.roll.jitter.ms is not set.", SynonymOf: "log.roll.jitter.ms", Scale: 3_600_000},
	{Name: "log.cleaner.max.compaction.lag.ms", Type: TypeLong, Unit: "ms", Valid: atLeast(1), Default: "9223372036854775807", Doc: "A record stays uncompacted at most about this long (KIP-354): a compacted log whose oldest dirty sealed segment's first batch is older is cleaned even below min.cleanable.dirty.ratio, and a compacted log's active segment rolls no later than this after its first batch. The default: no bound.", Dynamic: true, Topic: "max.compaction.lag.ms"},
	{Name: "log.segment.delete.delay.ms", Type: TypeLong, Unit: "ms", Valid: atLeast(0), Default: "60000", Doc: "A segment deleted by retention, DeleteRecords, compaction or a truncation is renamed <name>.deleted at once and its files are removed this much later (leftovers at start). Readers that already hold it keep reading; its descriptors and mappings are released as soon as none does. 0 removes the files at once.", Dynamic: true, Topic: "file.delete.delay.ms"},
	{Name: "log.preallocate", Type: TypeBoolean, Default: "false", Doc: "Make a new segment's .log segment.bytes long at creation (fallocate, or ftruncate where the filesystem has no fallocate or the disk not the room), trimmed to the bytes written when it rolls and at a clean close; appends then never change the file's size, so an fdatasync has no size to commit. After a crash the zeros after the last batch are trimmed.", Dynamic: true, Topic: "preallocate"},
	{Name: "log.cleanup.policy", Type: TypeList, Default: "delete", Valid: listOf("compact", "delete"), Doc: "delete, compact, or both.", Dynamic: true, Topic: "cleanup.policy"},
	{Name: "log.message.timestamp.type", Type: TypeString, Default: "CreateTime", Valid: oneOf("CreateTime", "LogAppendTime"), Doc: "CreateTime keeps the producer's record timestamps (checked against the two bounds below); LogAppendTime stamps each appended batch with the broker's clock (timestamp-type attribute set, maxTimestamp = now, CRC recomputed) and returns that time in the Produce response.", Dynamic: true, Topic: "message.timestamp.type"},
	{Name: "log.message.timestamp.before.max.ms", Type: TypeLong, Unit: "ms", Default: "9223372036854775807", Valid: atLeast(0), Doc: "Largest allowed age of a CreateTime record timestamp: a batch holding a record older than the broker's clock minus this is refused (INVALID_TIMESTAMP). Ignored under LogAppendTime.", Dynamic: true, Topic: "message.timestamp.before.max.ms"},
	{Name: "log.message.timestamp.after.max.ms", Type: TypeLong, Unit: "ms", Default: "3600000", Valid: atLeast(0), Doc: "Largest allowed lead of a CreateTime record timestamp over the broker's clock (Kafka 4's default, one hour): a batch holding a later record is refused (INVALID_TIMESTAMP). A far-future timestamp would keep its segment, and every later one, from time retention. Ignored under LogAppendTime.", Dynamic: true, Topic: "message.timestamp.after.max.ms"},
	{Name: "compression.type", Type: TypeString, Default: "producer", Valid: oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"), Doc: "Codec produced batches are stored in: uncompressed, gzip, snappy, lz4, zstd, or producer (each batch as the producer compressed it). With a codec, a batch in another codec is recompressed on the leader before it is appended (records and header fields unchanged but the codec, length and CRC; snappy in Kafka's xerial framing), as Kafka does; a batch already in that codec, whatever its level, and an uncompressed control batch are stored as they came. A recompressed batch larger than max.message.bytes is refused (MESSAGE_TOO_LARGE). Followers store the leader's bytes.", Dynamic: true, Topic: "compression.type"},
	{Name: "compression.gzip.level", Type: TypeInt, Valid: compressionLevel("gzip"), Default: "-1", Doc: "gzip level of batches recompressed to compression.type=gzip: 1 (fastest) to 9 (smallest), or -1 (zlib's default, 6).", Dynamic: true, Topic: "compression.gzip.level"},
	{Name: "compression.lz4.level", Type: TypeInt, Valid: compressionLevel("lz4"), Default: "9", Doc: "lz4 level of batches recompressed to compression.type=lz4, 1 to 17: 9 is lz4's fast compressor (Kafka's default); other levels use lz4's high-compression mode (weir's lz4 library has nine depths: 1-8 take the shallowest, 10-17 deeper ones).", Dynamic: true, Topic: "compression.lz4.level"},
	{Name: "compression.zstd.level", Type: TypeInt, Valid: compressionLevel("zstd"), Default: "3", Doc: "zstd level of batches recompressed to compression.type=zstd, -131072 to 22 (zstd's scale; weir's encoder has four speeds: below 3 fastest, 3-5 default, 6-9 better, 10 and above best; an encoder in use holds about 1.5, 2.6, 5.5 and 35 MiB respectively).", Dynamic: true, Topic: "compression.zstd.level"},
	{Name: "min.insync.replicas", Type: TypeInt, Unit: "replicas", Default: "1", Valid: atLeast(1), Doc: "Minimum in-sync replicas for acks=all, capped at the partition's replica count as in Kafka 3.7+ (a value above the replication factor asks for every replica).", Dynamic: true, Topic: "min.insync.replicas"},
	{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false", Doc: "Allow leaders from outside the ISR.", Dynamic: true, Topic: "unclean.leader.election.enable"},
	{Name: "log.cleaner.delete.retention.ms", Type: TypeLong, Unit: "ms", Default: "86400000", Valid: atLeast(0), Doc: "How long compaction keeps tombstones.", Dynamic: true, Topic: "delete.retention.ms"},
	{Name: "log.cleaner.enable", Type: TypeBoolean, Default: "true", Doc: "Run the log cleaner (compaction of cleanup.policy=compact topics, __consumer_offsets among them)."},
	{Name: "log.cleaner.threads", Type: TypeInt, Unit: "threads", Default: "1", Valid: atLeast(0), Doc: "Log cleaner goroutines."},
	{Name: "log.cleaner.backoff.ms", Type: TypeLong, Unit: "ms", Default: "15000", Valid: atLeast(0), Doc: "Sleep of the cleaner when no log is dirty enough."},
	{Name: "log.cleaner.dedupe.buffer.size", Type: TypeLong, Unit: "bytes", Default: "134217728", Doc: "Memory for the cleaners' key-to-offset maps, all threads together."},
	{Name: "log.cleaner.io.buffer.size", Type: TypeInt, Unit: "bytes", Default: "524288", Valid: atLeast(0), Doc: "Read and write buffer of each cleaner thread."},
	{Name: "log.cleaner.io.max.bytes.per.second", Type: TypeDouble, Unit: "bytes/s", Default: "0", Valid: atLeast(0), Doc: "Cap on the cleaners' I/O; 0 = unbounded (Kafka's default is the largest double)."},
	{Name: "log.cleaner.min.cleanable.ratio", Type: TypeDouble, Default: "0.5", Valid: between(0, 1), Doc: "Dirty ratio (bytes not yet compacted over the whole log) that makes a cleanup.policy=compact log eligible for compaction.", Dynamic: true, Topic: "min.cleanable.dirty.ratio"},
	{Name: "log.cleaner.min.compaction.lag.ms", Type: TypeLong, Unit: "ms", Default: "0", Valid: atLeast(0), Doc: "Minimum age of a record before compaction may remove it.", Dynamic: true, Topic: "min.compaction.lag.ms"},
	{Name: "socket.request.max.bytes", Type: TypeInt, Unit: "bytes", Default: "104857600", Valid: atLeast(1), Doc: "Largest request frame; larger closes the connection."},
	{Name: "max.connections", Type: TypeInt, Unit: "connections", Default: "2147483647", Valid: atLeast(0), Doc: "Maximum client connections over all listeners (read at start). At the limit a listener stops accepting (new connections wait in the kernel's backlog) until one closes, as Kafka does; the inter-broker listener is exempt from this broker-wide limit. Per listener: listener.name.<name>.max.connections."},
	{Name: "max.connections.per.ip", Type: TypeInt, Unit: "connections", Default: "2147483647", Valid: atLeast(0), Doc: "Maximum connections from one IP address (read at start); a connection over it is closed at once, as Kafka does. 0 is allowed only with max.connections.per.ip.overrides."},
	{Name: "max.connections.per.ip.overrides", Type: TypeString, Default: "", Doc: "Per-IP or per-hostname limits overriding max.connections.per.ip: host:count or ip:count, comma-separated (read at start; hostnames are resolved then)."},
	{Name: "max.connection.creation.rate", Type: TypeInt, Unit: "connections/s", Default: "2147483647", Valid: atLeast(0), Doc: "New connections accepted a second over all listeners but the inter-broker one, after a burst of one second's worth (read at start); faster, the listeners wait before accepting, as Kafka throttles its acceptor. Per listener: listener.name.<name>.max.connection.creation.rate (applies to the inter-broker listener too)."},
	{Name: "queued.max.requests", Type: TypeInt, Unit: "requests", Default: "500", Valid: atLeast(1), Doc: "Requests read and not yet handled, over every connection; at the limit readers wait (connections are muted) instead of reading. Like Kafka, a request that was handled and waits for its reply (a parked long poll, a produce waiting for fdatasync or acks=all) no longer counts."},
	{Name: "queued.max.request.bytes", Type: TypeLong, Unit: "bytes", Default: "0", Valid: atLeast(-1), Doc: "Bytes of request frames the broker holds over every connection: counted from a frame's size prefix until its reply is written (a produce's frame until its records are appended: the records are in the log, so the reply waiting for fdatasync or acks=all holds nothing). At the limit readers wait (muted) instead of reading; a frame always fits when nothing else is held, and frames of at most 64 KiB may use a reserve of 1/16 more, so the small requests that complete other replies (follower fetches, group requests) are still read. A positive value must be at least socket.request.max.bytes (Kafka's rule). -1 = unbounded (Kafka's default, which 0 also means in Kafka). 0 (weir's default) = a quarter of the memory the process may use (cgroup memory.max, else physical memory), at least socket.request.max.bytes: unbounded lets enough connections each sending socket.request.max.bytes exhaust memory and take every client down with the broker."},
	{Name: "queued.max.request.bytes.per.connection", Type: TypeLong, Default: "0", Valid: atLeast(0), Doc: "weir: bytes of request frames one connection may hold (read or being read, not yet released, as for queued.max.request.bytes); over it the connection is muted until its earlier replies are written. One frame always fits when the connection holds nothing else. 0 = the larger of socket.request.max.bytes and 8 MiB: Kafka holds one request per connection; weir pipelines up to that much."},
	{Name: "connections.max.idle.ms", Type: TypeLong, Unit: "ms", Default: "600000", Doc: "Close connections idle this long."},
	{Name: "num.recovery.threads.per.data.dir", Type: TypeInt, Unit: "threads", Default: "2", Valid: atLeast(1), Doc: "Threads opening and recovering partition logs per log dir at start."},
	{Name: "log.flush.offset.checkpoint.interval.ms", Type: TypeInt, Unit: "ms", Default: "60000", Valid: atLeast(0), Doc: "How often the recovery-point checkpoint is written. weir also writes it within about a second after a segment rolls and is synced (Kafka only at this interval), so a crash rescans at most about a second of rolled segments and the active ones."},
	{Name: "offsets.topic.num.partitions", Type: TypeInt, Unit: "partitions", Default: "50", Valid: atLeast(1), Doc: "Partitions of __consumer_offsets."},
	{Name: "offsets.topic.replication.factor", Type: TypeShort, Unit: "replicas", Default: "3", Valid: atLeast(1), Doc: "Replication factor of __consumer_offsets (Kafka's default, 3). As in Kafka, the topic is created with exactly this many replicas: until that many brokers are registered and unfenced, FindCoordinator answers COORDINATOR_NOT_AVAILABLE and a warning is logged (a cluster of fewer brokers sets this to its size); a single broker (no controller.quorum.voters) creates it with replication factor 1."},
	{Name: "offsets.topic.segment.bytes", Type: TypeInt, Unit: "bytes", Default: "104857600", Valid: atLeast(1), Doc: "segment.bytes of __consumer_offsets (small segments let compaction reclaim space sooner)."},
	{Name: "offsets.retention.minutes", Type: TypeInt, Unit: "minutes", Default: "10080", Valid: atLeast(1), Doc: "Committed offsets of a group expire this long after the group became empty (standalone commits: after the commit)."},
	{Name: "offsets.retention.check.interval.ms", Type: TypeLong, Unit: "ms", Default: "600000", Valid: atLeast(1), Doc: "How often expired offsets and empty groups are removed."},
	{Name: "offset.metadata.max.bytes", Type: TypeInt, Unit: "bytes", Default: "4096", Doc: "Largest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE beyond)."},
	{Name: "group.initial.rebalance.delay.ms", Type: TypeInt, Unit: "ms", Default: "3000", Doc: "How long a group coming from Empty waits for more members before its first rebalance (extended while members keep joining, up to the rebalance timeout)."},
	{Name: "group.min.session.timeout.ms", Type: TypeInt, Unit: "ms", Default: "6000", Doc: "Smallest session timeout a member may ask for (INVALID_SESSION_TIMEOUT below)."},
	{Name: "group.max.session.timeout.ms", Type: TypeInt, Unit: "ms", Default: "1800000", Doc: "Largest session timeout a member may ask for (INVALID_SESSION_TIMEOUT above)."},
	{Name: "group.max.size", Type: TypeInt, Unit: "members", Default: "2147483647", Valid: atLeast(1), Doc: "Most members a consumer group may have (GROUP_MAX_SIZE_REACHED beyond)."},
	{Name: "group.share.record.lock.duration.ms", Type: TypeInt, Unit: "ms", Default: "30000", Valid: between(1000, 3600000), Doc: "How long a share consumer holds the records a ShareFetch acquired for it before they are available to others again (a share group's share.record.lock.duration.ms overrides it)."},
	{Name: "group.share.delivery.count.limit", Type: TypeInt, Unit: "deliveries", Default: "5", Valid: between(2, 10), Doc: "Delivery attempts of a record to a share group: a record released or whose lock expired after this many deliveries is archived, never delivered again."},
	{Name: "group.share.partition.max.record.locks", Type: TypeInt, Unit: "records", Default: "2000", Valid: between(100, 10000), Doc: "In-flight records of a share partition (from its start offset to the last acquired): no new records are acquired while this many are in flight (a whole batch may pass it)."},
	{Name: "group.share.max.share.sessions", Type: TypeInt, Unit: "sessions", Default: "2000", Valid: atLeast(1), Doc: "Share sessions (ShareFetch sessions of share consumers) a broker keeps; opening one more answers SHARE_SESSION_LIMIT_REACHED."},
	{Name: "group.consumer.session.timeout.ms", Type: TypeInt, Unit: "ms", Default: "45000", Valid: atLeast(1), Doc: "Session timeout of the members of KIP-848 consumer groups: a member that does not heartbeat within it is removed. Between group.consumer.min.session.timeout.ms and group.consumer.max.session.timeout.ms, and larger than group.consumer.heartbeat.interval.ms (checked at start)."},
	{Name: "group.consumer.min.session.timeout.ms", Type: TypeInt, Unit: "ms", Default: "45000", Valid: atLeast(1), Doc: "Lower bound of group.consumer.session.timeout.ms."},
	{Name: "group.consumer.max.session.timeout.ms", Type: TypeInt, Unit: "ms", Default: "60000", Valid: atLeast(1), Doc: "Upper bound of group.consumer.session.timeout.ms."},
	{Name: "group.consumer.heartbeat.interval.ms", Type: TypeInt, Unit: "ms", Default: "5000", Valid: atLeast(1), Doc: "Heartbeat interval the coordinator gives the members of KIP-848 consumer groups. Between group.consumer.min.heartbeat.interval.ms and group.consumer.max.heartbeat.interval.ms (checked at start)."},
	{Name: "group.consumer.min.heartbeat.interval.ms", Type: TypeInt, Unit: "ms", Default: "5000", Valid: atLeast(1), Doc: "Lower bound of group.consumer.heartbeat.interval.ms."},
	{Name: "group.consumer.max.heartbeat.interval.ms", Type: TypeInt, Unit: "ms", Default: "15000", Valid: atLeast(1), Doc: "Upper bound of group.consumer.heartbeat.interval.ms."},
	{Name: "group.consumer.max.size", Type: TypeInt, Unit: "members", Default: "2147483647", Valid: atLeast(1), Doc: "Most members a KIP-848 consumer group may have (GROUP_MAX_SIZE_REACHED beyond)."},
	{Name: "group.consumer.regex.refresh.interval.ms", Type: TypeInt, Unit: "ms", Default: "600000", Valid: atLeast(10000), Internal: true, Doc: "How often a KIP-848 consumer group resolves its members' regular-expression subscriptions again (checked at a member's heartbeat) when nothing else asked for it, so that topics whose DESCRIBE ACLs were added or removed join or leave the resolution. Kafka 4.x's internal key of the same name (not listed by DescribeConfigs)."},
	{Name: "group.consumer.migration.policy", Type: TypeString, Default: "bidirectional", Valid: oneOfFold("disabled", "upgrade", "downgrade", "bidirectional"), Doc: "Online conversion of a non-empty group between the classic protocol and the KIP-848 consumer protocol (empty groups convert both ways whatever the policy). upgrade: a KIP-848 member joining a classic group of protocol type consumer turns it into a consumer group whose classic members keep their assignment and keep using JoinGroup/SyncGroup/Heartbeat/LeaveGroup; downgrade: when members of a consumer group leave or are fenced and only members of the classic protocol remain, the group becomes a classic group of them and rebalances; bidirectional: both; disabled: neither (a member of the other protocol gets INCONSISTENT_GROUP_PROTOCOL or GROUP_ID_NOT_FOUND). Case-insensitive."},
	{Name: "group.consumer.assignors", Type: TypeList, Default: "uniform,range", Doc: "Server-side assignors of KIP-848 consumer groups, by name (uniform, range) or by the class name of Kafka's built-in ones (org.apache.kafka.coordinator.group.assignor.UniformAssignor, ...RangeAssignor); the first is the default for members that name none. Custom assignor classes are refused at start."},
	{Name: "group.share.session.timeout.ms", Type: TypeInt, Unit: "ms", Default: "45000", Valid: atLeast(1), Doc: "Session timeout of share group members (KIP-932): a member that sends no ShareGroupHeartbeat for this long is removed from its group. A group's share.session.timeout.ms overrides it. Must lie within group.share.min.session.timeout.ms and group.share.max.session.timeout.ms and exceed group.share.heartbeat.interval.ms."},
	{Name: "group.share.min.session.timeout.ms", Type: TypeInt, Unit: "ms", Default: "45000", Valid: atLeast(1), Doc: "Smallest share.session.timeout.ms a share group may be given."},
	{Name: "group.share.max.session.timeout.ms", Type: TypeInt, Unit: "ms", Default: "60000", Valid: atLeast(1), Doc: "Largest share.session.timeout.ms a share group may be given."},
	{Name: "group.share.heartbeat.interval.ms", Type: TypeInt, Unit: "ms", Default: "5000", Valid: atLeast(1), Doc: "Interval at which share group members heartbeat (ShareGroupHeartbeat tells them). A group's share.heartbeat.interval.ms overrides it. Must lie within group.share.min.heartbeat.interval.ms and group.share.max.heartbeat.interval.ms."},
	{Name: "group.share.min.heartbeat.interval.ms", Type: TypeInt, Unit: "ms", Default: "5000", Valid: atLeast(1), Doc: "Smallest share.heartbeat.interval.ms a share group may be given."},
	{Name: "group.share.max.heartbeat.interval.ms", Type: TypeInt, Unit: "ms", Default: "15000", Valid: atLeast(1), Doc: "Largest share.heartbeat.interval.ms a share group may be given."},
	{Name: "group.share.max.size", Type: TypeInt, Unit: "members", Default: "200", Valid: between(1, 1000), Doc: "Most members a share group may have (GROUP_MAX_SIZE_REACHED beyond)."},
	{Name: "transaction.max.timeout.ms", Type: TypeInt, Unit: "ms", Default: "900000", Valid: atLeast(1), Doc: "Largest transaction.timeout.ms a transactional producer may ask for in InitProducerId (INVALID_TRANSACTION_TIMEOUT beyond)."},
	{Name: "transactional.id.expiration.ms", Type: TypeInt, Unit: "ms", Default: "604800000", Valid: atLeast(1), Doc: "A transactional id with no transaction open and no update for this long is removed from __transaction_state (tombstoned); its producer then starts over with a new producer id."},
	{Name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Type: TypeInt, Unit: "ms", Default: "10000", Valid: atLeast(1), Doc: "How often the transaction coordinator aborts transactions open longer than their transaction.timeout.ms."},
	{Name: "transaction.remove.expired.transaction.cleanup.interval.ms", Type: TypeInt, Unit: "ms", Default: "3600000", Valid: atLeast(1), Doc: "How often transactional ids past transactional.id.expiration.ms are removed."},
	{Name: "transaction.state.log.num.partitions", Type: TypeInt, Unit: "partitions", Default: "50", Valid: atLeast(1), Doc: "Partitions of __transaction_state (created on first use: the first FindCoordinator for a transactional id)."},
	{Name: "transaction.state.log.replication.factor", Type: TypeShort, Unit: "replicas", Default: "3", Valid: atLeast(1), Doc: "Replication factor of __transaction_state (Kafka's default, 3). As for offsets.topic.replication.factor: created with exactly this many replicas, the transaction coordinator is unavailable (COORDINATOR_NOT_AVAILABLE) until that many brokers are registered and unfenced; a single broker (no controller.quorum.voters) creates it with replication factor 1."},
	{Name: "transaction.state.log.min.isr", Type: TypeInt, Unit: "replicas", Default: "2", Valid: atLeast(1), Doc: "min.insync.replicas of __transaction_state (capped at its replication factor when the topic is created)."},
	{Name: "transaction.state.log.segment.bytes", Type: TypeInt, Unit: "bytes", Default: "104857600", Valid: atLeast(1), Doc: "segment.bytes of __transaction_state."},
	{Name: "share.coordinator.state.topic.num.partitions", Type: TypeInt, Unit: "partitions", Default: "50", Valid: atLeast(1), Doc: "Partitions of __share_group_state, the share coordinator's topic of share-partition state (created on first use: the first FindCoordinator for a share key or the first state operation)."},
	{Name: "share.coordinator.state.topic.replication.factor", Type: TypeShort, Unit: "replicas", Default: "3", Valid: atLeast(1), Doc: "Replication factor of __share_group_state (Kafka's default, 3). As for offsets.topic.replication.factor: created with exactly this many replicas, the share coordinator is unavailable (COORDINATOR_NOT_AVAILABLE) until that many brokers are registered and unfenced; a single broker (no controller.quorum.voters) creates it with replication factor 1."},
	{Name: "share.coordinator.state.topic.min.isr", Type: TypeShort, Unit: "replicas", Default: "2", Valid: atLeast(1), Doc: "min.insync.replicas of __share_group_state (capped at its replication factor when the topic is created)."},
	{Name: "share.coordinator.state.topic.segment.bytes", Type: TypeInt, Unit: "bytes", Default: "104857600", Valid: atLeast(1), Doc: "segment.bytes of __share_group_state."},
	{Name: "share.coordinator.snapshot.update.records.per.snapshot", Type: TypeInt, Unit: "records", Default: "500", Valid: between(0, 500), Doc: "ShareUpdate records the share coordinator writes for a share partition between two ShareSnapshot records of its full state (0: every write is a snapshot)."},
	{Name: "transaction.partition.verification.enable", Type: TypeBoolean, Default: "true", Doc: "KIP-890 part 1: before the first transactional batch of a transaction on a partition, its leader asks the transaction coordinator whether the partition is in the transaction (INVALID_TXN_STATE when not), so a stray batch cannot open a transaction no marker ends. Read per request."},
	{Name: "add.partitions.to.txn.retry.backoff.ms", Type: TypeInt, Unit: "ms", Default: "20", Valid: atLeast(1), Doc: "Transaction version 2 (KIP-890 part 2, Kafka's KAFKA-18654): when the partition leader adds a partition to a transaction for a Produce v12+ or TxnOffsetCommit v5+ and the coordinator answers CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being written), it retries after this long instead of sending the client away."},
	{Name: "add.partitions.to.txn.retry.backoff.max.ms", Type: TypeInt, Unit: "ms", Default: "100", Valid: atLeast(0), Doc: "The longest the partition leader keeps retrying such an add (add.partitions.to.txn.retry.backoff.ms) before answering the client with a retriable error (NOT_ENOUGH_REPLICAS for Produce, COORDINATOR_NOT_AVAILABLE for TxnOffsetCommit). Applies to adds only, not to verify-only checks; 0 never retries."},
	{Name: "internal.transaction.version", Type: TypeShort, Unit: "level", Default: "2", Valid: between(0, 2), Internal: true, Doc: "The transaction.version feature level this broker finalizes in ApiVersions (Kafka sets it cluster-wide with kafka-features.sh; weir has no UpdateFeatures yet). 2, Kafka 4's level for a new cluster: KIP-890 part 2 (clients skip AddPartitionsToTxn and AddOffsetsToTxn, Produce v12+ and TxnOffsetCommit v5+ make the broker add the partition, every EndTxn bumps the producer epoch). 1: flexible __transaction_state records, clients use transaction version 1. 0: Kafka 3.x's records and protocol. Set the same level on every broker of a cluster; clients read it when they start a producer. Older clients (EndTxn below v5, Produce below v12) keep working at any level."},
	{Name: "producer.id.expiration.ms", Type: TypeInt, Unit: "ms", Valid: atLeast(1), Default: "86400000", Doc: "Forget an idempotent producer's state (its epoch and last sequences) once its last write, judged on the batch's max timestamp as Kafka does, is this old; checked every 10 minutes (Kafka's producer.id.expiration.check.interval.ms) and when a partition is opened. A batch from a forgotten producer is accepted at any sequence.", Dynamic: true},
	{Name: "producer.id.expiration.check.interval.ms", Type: TypeInt, Unit: "ms", Valid: atLeast(1), Default: "600000", Doc: "How often idempotent producers past producer.id.expiration.ms are forgotten (an internal key in Kafka, with its default; read at start)."},
	{Name: "controller.quorum.voters", Type: TypeList, Default: "", Doc: "The metadata quorum: id@host:port of every voter, comma-separated (Kafka's format). The address is the voter's Raft and controller port. Empty = a single broker that is its own one-node quorum."},
	{Name: "controller.listener", Type: TypeString, Default: "", Doc: "host:port of this broker's Raft and controller port when it is not a voter (a voter uses its address in controller.quorum.voters)."},
	{Name: "metadata.log.dir", Type: TypeString, Default: "", Doc: "Where the metadata log (Raft log, snapshots) is kept; empty = the first log dir (in weir-metadata)."},
	{Name: "broker.session.timeout.ms", Type: TypeInt, Unit: "ms", Default: "2000", Valid: atLeast(1), Doc: "A broker that has not heartbeated to the controller for this long is fenced and loses its leaderships (Kafka: 9000; weir's default keeps failover under 3 s)."},
	{Name: "broker.heartbeat.interval.ms", Type: TypeInt, Unit: "ms", Default: "500", Valid: atLeast(1), Doc: "How often a broker heartbeats to the controller."},
	{Name: "replica.lag.time.max.ms", Type: TypeLong, Unit: "ms", Default: "30000", Doc: "A follower that has not caught up with the leader's log end for this long leaves the ISR."},
	{Name: "replica.fetch.wait.max.ms", Type: TypeInt, Unit: "ms", Default: "500", Doc: "Longest wait of a follower's fetch at its leader."},
	{Name: "replica.fetch.max.bytes", Type: TypeInt, Unit: "bytes", Default: "1048576", Valid: atLeast(0), Doc: "Bytes a follower fetches per partition per request (at least one batch)."},
	{Name: "replica.fetch.response.max.bytes", Type: TypeInt, Unit: "bytes", Default: "10485760", Valid: atLeast(0), Doc: "Bytes a follower fetches per request."},
	{Name: "replica.fetch.backoff.ms", Type: TypeInt, Unit: "ms", Default: "1000", Valid: atLeast(0), Doc: "Wait of a follower after a fetch error."},
	// Leader balance (controller/elect.go).
	{Name: "auto.leader.rebalance.enable", Type: TypeBoolean, Default: "true", Doc: "The active controller moves partition leaderships back to their preferred replicas (the first of each replica list) when they are alive and in the ISR, for every broker whose leader imbalance is over leader.imbalance.per.broker.percentage: every leader.imbalance.check.interval.seconds, and also (at most once a second) as soon as a preferred replica rejoins the ISR, so a restarted broker leads its partitions again once it has caught up. Read at start; the active controller's value applies."},
	{Name: "leader.imbalance.check.interval.seconds", Type: TypeLong, Unit: "seconds", Default: "300", Valid: atLeast(1), Doc: "How often the active controller checks the leader balance (auto.leader.rebalance.enable). Read at start."},
	{Name: "leader.imbalance.per.broker.percentage", Type: TypeInt, Unit: "percent", Default: "10", Valid: atLeast(0), Doc: "A broker's leader imbalance is the share of the partitions it is the preferred replica of that it does not lead; when it is over this percentage, the balance check moves the leaderships of those partitions back to it (where it is alive and in the ISR), as Kafka does. Read at start."},
	{Name: "controlled.shutdown.enable", Type: TypeBoolean, Default: "true", Doc: "On SIGTERM, move this broker's leaderships to other in-sync replicas before stopping."},
	{Name: "request.timeout.ms", Type: TypeInt, Unit: "ms", Default: "30000", Doc: "Bound of broker-to-controller requests (topic creation and deletion, ISR changes)."},
	{Name: "max.incremental.fetch.session.cache.slots", Type: TypeInt, Unit: "sessions", Default: "1000", Valid: atLeast(0), Doc: "Incremental fetch sessions (KIP-227) the broker keeps (read at start): a consumer or follower with a session sends and gets only the partitions that changed. When the cache is full a new session evicts, as Kafka does, a session unused for 2 minutes, else a less valuable one (followers before consumers, then larger sessions); a client without a session sends full fetches. Each session holds at most 32768 partitions and all sessions 262144. 0 disables sessions."},
	// Descriptor and mapping budget of the partitions (broker/budget.go, docs/operations.md).
	{Name: "storage.descriptor.budget", Type: TypeLong, Unit: "descriptors", Default: "-1", Valid: atLeast(-1), Doc: "weir only. Descriptors the partitions' segments may hold (3 per segment: .log, .index, .timeindex); creating partitions (CreateTopics, CreatePartitions, auto-creation, a replica assigned here) or rolling a segment past it is refused (POLICY_VIOLATION, or a retriable KAFKA_STORAGE_ERROR for a roll) instead of running out of descriptors. 0: no budget. -1: the RLIMIT_NOFILE soft limit (raised to the hard limit at start) minus a reserve of 512 plus min(max.connections, a fifth of the limit), at most half the limit, for connections, the metadata store and temporary files. See docs/operations.md."},
	{Name: "storage.mapping.budget", Type: TypeLong, Unit: "mappings", Default: "-1", Valid: atLeast(-1), Doc: "weir only. Memory mappings the partitions' segments may hold (2 index mappings per segment plus 1 for reads); creating partitions or rolling a segment past it is refused like storage.descriptor.budget. 0: no budget. -1: /proc/sys/vm/max_map_count minus a reserve of max(4096, a tenth of it), at most half of it, for the Go runtime, libraries and thread stacks. See docs/operations.md."},
	{Name: "storage.descriptor.cache.size", Type: TypeLong, Unit: "descriptors", Default: "-1", Valid: atLeast(-1), Doc: "weir only (Kafka keeps every segment's .log open). Open .log descriptors kept for settled segments (inactive and synced, or active with no append for a second or two and synced): beyond it the least recently used (CLOCK) is closed and opened again by the next read or append that needs it; a reader (a fetch being sent with sendfile, the cleaner, recovery) keeps its descriptor open until it is done, and segments being written keep theirs outside the bound. Descriptors not used for one log.retention.check.interval.ms are closed too. With both this and storage.index.cache.size on, partition creation checks the budget for one more segment, not one per partition (idle partitions hold nothing of their own). 0: no bound (every segment keeps its .log open, as Kafka). -1: half the RLIMIT_NOFILE soft limit (raised to the hard limit at start). See docs/operations.md."},
	{Name: "storage.index.cache.size", Type: TypeLong, Unit: "segments", Default: "-1", Valid: atLeast(-1), Doc: "weir only. Settled segments (see storage.descriptor.cache.size) whose offset and time indexes (two mappings) stay mapped: beyond it the least recently used (CLOCK) are unmapped and mapped again on the next lookup; a lookup keeps its mapping until it is done. Indexes not used for one log.retention.check.interval.ms are unmapped too. 0: no bound (mapped until the segment closes, as Kafka's LazyIndex). -1: an eighth of storage.mapping.budget (a quarter of its mappings), or no bound when that is 0. See docs/operations.md."},
	// Observability: the admin HTTP listener (broker/metrics.go, docs/operations.md).
	{Name: "metrics.listener", Type: TypeString, Default: "127.0.0.1:9644", Doc: "host:port of the admin HTTP listener serving /metrics (Prometheus text format), /healthz and /readyz; empty disables it. Bind it to a private or loopback interface: it is not authenticated. A listener that cannot be bound is logged and the broker serves clients without it."},
	{Name: "metrics.pprof.enable", Type: TypeBoolean, Default: "false", Doc: "Also serve Go's pprof profiling endpoints under /debug/pprof/ on metrics.listener."},
	// Listener security: TLS and SASL (broker/security.go, docs/security.md).
	{Name: "listener.security.protocol.map", Type: TypeList, Default: "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", Doc: "Security protocol of each listener name: NAME:PROTOCOL, comma-separated; protocols PLAINTEXT, SSL (TLS), SASL_PLAINTEXT, SASL_SSL (SASL over TLS)."},
	{Name: "ssl.certificate.location", Type: TypeString, Default: "", Doc: "PEM file of the broker's certificate (and its chain) for SSL and SASL_SSL listeners. Per listener: listener.name.<name>.ssl.certificate.location."},
	{Name: "ssl.key.location", Type: TypeString, Default: "", Doc: "PEM file of the broker certificate's private key (unencrypted)."},
	{Name: "ssl.ca.location", Type: TypeString, Default: "", Doc: "PEM file of the CA certificates that sign client certificates (needed when ssl.client.auth is requested or required), and that brokers trust for the other brokers' certificates on an SSL or SASL_SSL inter-broker listener (unset: the system's roots)."},
	{Name: "ssl.client.auth", Type: TypeString, Default: "none", Valid: oneOf("none", "requested", "required"), Doc: "Client certificates on SSL listeners: none, requested (verified if sent) or required. The principal is User:<subject DN>. Applies to SASL_SSL listeners only with the listener.name.<name>. prefix."},
	{Name: "sasl.enabled.mechanisms", Type: TypeList, Default: "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", Doc: "SASL mechanisms served on SASL_PLAINTEXT and SASL_SSL listeners. PLAIN checks the password against the user's SCRAM credential."},
	// Inter-broker security (broker/interbroker.go, docs/security.md#inter-broker).
	{Name: "inter.broker.listener.name", Type: TypeString, Default: "", Doc: "Listener followers use to fetch from their leaders: they connect to the leader's advertised endpoint of this name and speak its security protocol (listener.security.protocol.map). Empty: the listener of security.inter.broker.protocol, else the first listener. Must be in listeners and advertised.listeners."},
	{Name: "security.inter.broker.protocol", Type: TypeString, Default: "", Valid: oneOf("", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), Doc: "Picks the inter-broker listener by protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL): the listener named like it, else the first listener with that protocol. Only one of it and inter.broker.listener.name may be set; with neither, the first listener is used (Kafka's default is PLAINTEXT)."},
	{Name: "sasl.mechanism.inter.broker.protocol", Type: TypeString, Default: "PLAIN", Doc: "SASL mechanism followers authenticate with on a SASL_PLAINTEXT or SASL_SSL inter-broker listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default GSSAPI is not offered). It must be in the listener's sasl.enabled.mechanisms."},
	{Name: "sasl.jaas.config", Type: TypePassword, Default: "", Doc: "The brokers' own SASL credentials on the inter-broker listener, as a Kafka JAAS line: org.apache.kafka.common.security.scram.ScramLoginModule required username=\"broker\" password=\"...\"; (PlainLoginModule for PLAIN). listener.name.<listener>.<mechanism in lower case>.sasl.jaas.config wins over it. Never logged nor described."},
	{Name: "sasl.server.max.receive.size", Type: TypeInt, Unit: "bytes", Default: "524288", Doc: "Largest request frame accepted on a SASL listener before the connection authenticated; larger closes it."},
	{Name: "connection.failed.authentication.delay.ms", Type: TypeInt, Unit: "ms", Default: "100", Valid: atLeast(0), Doc: "A failed SASL authentication is answered, and its connection closed, after this delay (on the controller port too, for every refused connection). Failures are also rate-limited per client address (a burst of 10, then 1 per second)."},
	// Controller port security (broker/controllersec.go, docs/security.md#controller-port).
	{Name: "controller.listener.names", Type: TypeList, Default: "", Doc: "Name of the controller listener (e.g. CONTROLLER): the Raft and controller port of controller.quorum.voters / controller.listener. Its security protocol is its entry in listener.security.protocol.map (SSL, SASL_PLAINTEXT or SASL_SSL; a protocol name maps to itself); its ssl.* and sasl.* keys take the prefix listener.name.<name>. Empty or PLAINTEXT: the port is unauthenticated (a multi-broker cluster warns at start, and a cluster with a SASL listener, an SSL listener with ssl.client.auth=required or the authorizer on refuses to start unless controller.network.trusted=true). Only super.users, this broker's own principal on the port and the principals of controller.broker.principals may use it; it must not be in listeners."},
	{Name: "sasl.mechanism.controller.protocol", Type: TypeString, Default: "PLAIN", Doc: "SASL mechanism brokers authenticate with to each other's controller port on a SASL_PLAINTEXT or SASL_SSL controller listener. Only PLAIN, checked against the user_<name>=\"<password>\" entries of listener.name.<controller>.plain.sasl.jaas.config (SCRAM credentials live in the metadata log this port carries; Kafka's default GSSAPI is not offered)."},
	{Name: "controller.broker.principals", Type: TypeString, Default: "", Valid: brokerPrincipalsValidator{}, Doc: "The principal of each broker on a secured controller port, semicolon-separated id=principal (1=User:broker-1;2=User:broker-2;3=User:broker-3), the same on every broker. Each listed principal may use the port (without being in super.users), and a broker id is registered, heartbeated, shut down and leads partitions (AlterPartition) only as its principal, from the start and after the broker is gone; a listed principal acts for no other id. It must list this broker's node.id with its own principal on the port. Empty: an id belongs to the principal that registered it, until the broker is gone (brokers sharing one principal can act for each other)."},
	{Name: "controller.network.trusted", Type: TypeBoolean, Default: "false", Doc: "Say that only this cluster's brokers can reach the controller port (a private interface, a firewall). A cluster whose Kafka listeners authenticate clients (SASL_PLAINTEXT, SASL_SSL, or SSL with ssl.client.auth=required) or whose authorizer is on refuses to start with an unsecured (PLAINTEXT) controller port unless this is true: whoever reaches that port can rewrite ACLs, SCRAM credentials and topics, bypassing both."},
	// Authorizer (ACLs, broker/authz.go).
	{Name: "authorizer.class.name", Type: TypeString, Default: "", Doc: "Kafka's authorizer class; weir turns its built-in ACL authorizer on for any non-empty value (e.g. org.apache.kafka.metadata.authorizer.StandardAuthorizer). Empty (default): no authorization, everything is allowed."},
	{Name: "authorizer.enable", Type: TypeBoolean, Default: "false", Doc: "Turn the ACL authorizer on (the same as a non-empty authorizer.class.name)."},
	{Name: "super.users", Type: TypeList, Default: "", Doc: "Principals allowed every operation whatever the ACLs say, semicolon-separated (User:admin;User:broker). Followers fetch as the inter-broker listener's principal (the SASL user of sasl.jaas.config, the TLS client certificate's subject, or User:ANONYMOUS on PLAINTEXT): with the authorizer on, list it here or give it CLUSTER_ACTION on the cluster. On a secured controller port (controller.listener.names) these principals, the broker's own principal on that port and those of controller.broker.principals are the only ones allowed to use it."},
	{Name: "allow.everyone.if.no.acl.found", Type: TypeBoolean, Default: "false", Doc: "With the authorizer on, allow an operation on a resource that no ACL applies to (of any principal)."},
	// Racks and fetching from the closest replica (issue 14, broker/racks.go).
	{Name: "broker.rack", Type: TypeString, Default: "", Doc: "Rack of this broker (any name; empty: none). Registered with the controller, reported in Metadata and DescribeCluster; new topics and partitions without an explicit assignment spread their replicas across racks (Kafka's striped placement; brokers without a rack count as one rack of their own); with replica.selector.class, a consumer whose client.rack names this rack may be sent here to read."},
	{Name: "replica.selector.class", Type: TypeString, Default: "", Valid: oneOf("org.apache.kafka.common.replica.RackAwareReplicaSelector", "org.apache.kafka.common.replica.LeaderSelector"), Doc: "How a partition leader picks the replica a consumer (Fetch v11+) should read from (KIP-392). Empty (default) or LeaderSelector: always the leader. org.apache.kafka.common.replica.RackAwareReplicaSelector: a replica in the consumer's rack (client.rack) that is in the ISR and holds the fetch offset; the leader itself when it is in that rack or none is; the most caught-up one when several are. The leader then answers with preferred_read_replica and no records, and the consumer reads from that follower, up to the high watermark the follower knows. Any other class is refused at start."},
	// Client quotas (issue 14, quotas.go).
	{Name: "quota.window.num", Type: TypeInt, Unit: "samples", Default: "11", Valid: atLeast(1), Doc: "Samples kept in memory for client quotas: a quota's rate is measured over quota.window.num samples of quota.window.size.seconds, at least quota.window.num-1 whole ones (Kafka's Rate). A consumer_byte_rate quota also bounds one fetch response to rate x (quota.window.num-1) x quota.window.size.seconds bytes."},
	{Name: "quota.window.size.seconds", Type: TypeInt, Unit: "seconds", Default: "1", Valid: atLeast(1), Doc: "Time span of each client quota sample."},
	// Replication throttles (KIP-73; broker/reassign_throttle.go, replication/throttle.go).
	{Name: "leader.replication.throttled.rate", Type: TypeLong, Unit: "bytes/s", Default: "9223372036854775807", Valid: atLeast(0), Dynamic: true, Doc: "Bytes per second this broker, as a leader, sends to followers outside the ISR of the replicas listed in their topic's leader.replication.throttled.replicas (the default: unlimited). Set per broker with IncrementalAlterConfigs, as kafka-reassign-partitions.sh --throttle does."},
	{Name: "follower.replication.throttled.rate", Type: TypeLong, Unit: "bytes/s", Default: "9223372036854775807", Valid: atLeast(0), Dynamic: true, Doc: "Bytes per second this broker, as a follower that has not caught up, fetches for the replicas listed in their topic's follower.replication.throttled.replicas (the default: unlimited)."},
	{Name: "replica.alter.log.dirs.io.max.bytes.per.second", Type: TypeLong, Unit: "bytes/s", Default: "9223372036854775807", Valid: atLeast(0), Dynamic: true, Doc: "Bytes per second for copying a replica to another log dir of this broker (AlterReplicaLogDirs). All moves of the broker together copy at most this many bytes a second (the swap at the end, a few MB at most, is not bounded); kafka-reassign-partitions.sh --replica-alter-log-dirs-throttle sets it."},
}

// topicConfigDefault lists topic-level keys with no broker key, with their defaults.
var topicOnlyConfigDefs = []ConfigDef{
	{Name: "internal.segment.bytes", Type: TypeInt, Unit: "bytes", Default: "", Valid: atLeast(14), Internal: true, Doc: "For tests only (Kafka 4.1's internal key): when set, the segment size of the topic instead of segment.bytes, without segment.bytes' 1 MiB minimum (at least 14 bytes, Kafka's old minimum). Not listed by DescribeConfigs."},
	// Replication throttles (KIP-73; broker/reassign_throttle.go).
	{Name: "leader.replication.throttled.replicas", Type: TypeList, Default: "", Valid: throttledReplicasValidator{}, Doc: "Replicas throttled on the leader side: partition:broker pairs (the leader broker of each throttled partition) or * for every replica of the topic. Their leader sends followers outside the ISR at most leader.replication.throttled.rate."},
	{Name: "follower.replication.throttled.replicas", Type: TypeList, Default: "", Valid: throttledReplicasValidator{}, Doc: "Replicas throttled on the follower side: partition:broker pairs (the follower broker) or * for every replica of the topic. Such a follower that has not caught up fetches at most follower.replication.throttled.rate."},
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
			if d.TopicValid != nil {
				td.Valid = d.TopicValid
			}
			td.Topic = d.Name // for a topic def, Topic names the broker key behind the default
			m[d.Topic] = td
		}
	}
	for _, d := range topicOnlyConfigDefs {
		m[d.Name] = d
	}
	return m
}()

// Validator checks a value that parses as its key's type against the key's valid range or
// enumeration (Kafka's ConfigDef validators); String describes the valid values.
type Validator interface {
	check(v string) error
	String() string
}

// rangeValidator is Kafka's Range: atLeast(lo) or between(lo, hi), bounds included.
type rangeValidator struct {
	lo, hi float64
	hasHi  bool
}

func atLeast(lo float64) Validator     { return rangeValidator{lo: lo} }
func between(lo, hi float64) Validator { return rangeValidator{lo: lo, hi: hi, hasHi: true} }

func (r rangeValidator) check(v string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return fmt.Errorf("not a number")
	}
	if r.hasHi && (f < r.lo || f > r.hi) {
		return fmt.Errorf("value must be between %s and %s", fmtBound(r.lo), fmtBound(r.hi))
	}
	if f < r.lo {
		return fmt.Errorf("value must be at least %s", fmtBound(r.lo))
	}
	return nil
}

func (r rangeValidator) String() string {
	if r.hasHi {
		return "[" + fmtBound(r.lo) + ",...," + fmtBound(r.hi) + "]"
	}
	return "[" + fmtBound(r.lo) + ",...]"
}

// levelValidator is the range of a compression.<codec>.level key (KIP-390), as record.CheckLevel
// checks it: gzip -1 or 1..9, lz4 1..17, zstd -131072..22.
type levelValidator struct{ codec string }

func compressionLevel(codec string) Validator { return levelValidator{codec} }

func (l levelValidator) check(v string) error {
	codec, _ := record.ParseCompressionType(l.codec)
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("not a number")
	}
	return record.CheckLevel(codec, n)
}

func (l levelValidator) String() string {
	switch l.codec {
	case "gzip":
		return "-1 or [1,...,9]"
	case "lz4":
		return "[1,...,17]"
	}
	return "[-131072,...,22]"
}

func fmtBound(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// enumValidator is Kafka's ValidString.in (one value) or ValidList.in (a comma-separated list
// of values, at least one); case-sensitive, as in Kafka (oneOfFold: ignoring case).
type enumValidator struct {
	values []string
	list   bool
	fold   bool // compare ignoring case (Kafka's CaseInsensitiveValidString)
}

func oneOf(values ...string) Validator  { return enumValidator{values: values} }
func listOf(values ...string) Validator { return enumValidator{values: values, list: true} }

// oneOfFold is Kafka's CaseInsensitiveValidString.in: one value, compared ignoring case.
func oneOfFold(values ...string) Validator { return enumValidator{values: values, fold: true} }

func (e enumValidator) check(v string) error {
	items := []string{v}
	if e.list {
		items = strings.Split(v, ",")
	}
	for _, it := range items {
		if e.list {
			it = strings.TrimSpace(it)
		}
		if e.fold {
			if !slices.ContainsFunc(e.values, func(v string) bool { return strings.EqualFold(v, it) }) {
				return fmt.Errorf("value must be one of (case-insensitive): %s", e.names())
			}
			continue
		}
		if !slices.Contains(e.values, it) && e.list {
			return fmt.Errorf("item %q must be one of: %s", it, e.names())
		} else if !slices.Contains(e.values, it) {
			return fmt.Errorf("value must be one of: %s", e.names())
		}
	}
	return nil
}

func (e enumValidator) String() string {
	if e.list {
		return "list of: " + e.names()
	}
	return "one of: " + e.names()
}

func (e enumValidator) names() string {
	out := make([]string, len(e.values))
	for i, v := range e.values {
		if out[i] = v; v == "" {
			out[i] = "(empty)"
		}
	}
	return strings.Join(out, ", ")
}

// validateValue checks that v parses as the def's type and is in its valid range. The error
// names the key and the value: "log.segment.bytes=10: value must be at least 1048576".
func validateValue(d ConfigDef, v string) error {
	if err := checkValue(d, v); err != nil {
		return fmt.Errorf("%s=%s: %w", d.Name, v, err)
	}
	return nil
}

func checkValue(d ConfigDef, v string) error {
	bits := 0
	switch d.Type {
	case TypeBoolean:
		if v != "true" && v != "false" {
			return fmt.Errorf("not a boolean (true or false)")
		}
	case TypeShort:
		bits = 16
	case TypeInt:
		bits = 32
	case TypeLong:
		bits = 64
	case TypeDouble:
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return fmt.Errorf("not a number")
		}
	}
	if bits > 0 {
		if _, err := strconv.ParseInt(v, 10, bits); err != nil {
			return fmt.Errorf("not a %d-bit integer (%s)", bits, strings.ToLower(string(d.Type)))
		}
	}
	if d.Valid != nil && !(v == "" && d.Default == "" && (d.Type == TypeString || d.Type == TypeList)) {
		return d.Valid.check(v)
	}
	return nil
}
