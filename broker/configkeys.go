package broker

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Key is the typed accessor of one config key: code reads every config value through one,
// never by a name string. Values are checked against their definition (configdefs.go) when
// they enter (NewConfigFrom at start, SetDynamic and the topic config changes of CreateTopics
// and (Incremental)AlterConfigs), so a read cannot fail to parse: parse failure here is a bug
// and panics with the key's name. TestConfigKeysAreRead fails when a defined key has no
// accessor that the code uses.
type Key[T any] struct {
	name  string
	parse func(string) (T, error)
}

// Name is the key's name (for messages).
func (k Key[T]) Name() string { return k.name }

// Get is the broker key's effective value (Config.Get: dynamic, static, synonyms, default).
func (k Key[T]) Get(c *Config) T {
	v, _ := c.Get(k.name)
	return k.must(v)
}

// String is the broker key's effective value as set (for messages).
func (k Key[T]) String(c *Config) string {
	v, _ := c.Get(k.name)
	return v
}

// IsSet reports whether the broker key is set (in the file, with --set or at run time), not
// at its default.
func (k Key[T]) IsSet(c *Config) bool {
	_, src := c.Get(k.name)
	return src != "" && src != "DEFAULT_CONFIG"
}

// Topic is the topic key's effective value given the topic's overrides: the override, else the
// broker key behind it, else the key's default (Config.TopicConfigValue).
func (k Key[T]) Topic(c *Config, overrides map[string]string) T {
	v, _, _ := c.TopicConfigValue(overrides, k.name)
	return k.must(v)
}

// TopicOverride is the topic's own value of the key, if it sets one.
func (k Key[T]) TopicOverride(overrides map[string]string) (T, bool) {
	v, ok := overrides[k.name]
	if !ok {
		var zero T
		return zero, false
	}
	return k.must(v), true
}

// ListenerOverride is listener.name.<listener>.<key>, if set.
func (k Key[T]) ListenerOverride(c *Config, listener string) (T, bool) {
	v, ok := c.listenerSetting(listener, k.name)
	if !ok {
		var zero T
		return zero, false
	}
	return k.must(v), true
}

// ForListener is listener.name.<listener>.<key> when set, else the key.
func (k Key[T]) ForListener(c *Config, listener string) T {
	if v, ok := k.ListenerOverride(c, listener); ok {
		return v
	}
	return k.Get(c)
}

func (k Key[T]) must(v string) T {
	x, err := k.parse(v)
	if err != nil { // validated when set: cannot happen
		panic(fmt.Sprintf("config %s: validated value %q does not parse: %v", k.name, v, err))
	}
	return x
}

// listenerSetting is the value of listener.name.<listener>.<suffix>, if set. Per-listener keys
// that weir does not define (a mechanism's JAAS line) are read with it directly.
func (c *Config) listenerSetting(listener, suffix string) (string, bool) {
	key := "listener.name." + strings.ToLower(listener) + "." + suffix
	c.mu.RLock()
	defer c.mu.RUnlock()
	if v, ok := c.dynamic[key]; ok {
		return v, true
	}
	v, ok := c.static[key]
	return v, ok
}

func boolKey(name string) Key[bool] {
	return Key[bool]{name, func(v string) (bool, error) { return strconv.ParseBool(v) }}
}

func intKey(name string) Key[int] {
	return Key[int]{name, func(v string) (int, error) { return strconv.Atoi(v) }}
}

func longKey(name string) Key[int64] {
	return Key[int64]{name, func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }}
}

func doubleKey(name string) Key[float64] {
	return Key[float64]{name, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }}
}

// durationKey reads a whole number of unit (time.Millisecond for *.ms keys).
func durationKey(name string, unit time.Duration) Key[time.Duration] {
	return Key[time.Duration]{name, func(v string) (time.Duration, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		return time.Duration(n) * unit, err
	}}
}

func msKey(name string) Key[time.Duration] { return durationKey(name, time.Millisecond) }

func stringKey(name string) Key[string] {
	return Key[string]{name, func(v string) (string, error) { return v, nil }}
}

// listKey reads a comma-separated list, items trimmed, empty items dropped.
func listKey(name string) Key[[]string] {
	return Key[[]string]{name, func(v string) ([]string, error) { return splitList(v), nil }}
}

// The keys. Broker keys are read with Get; the topic keys (and through them the broker keys
// that provide their defaults, and those keys' synonyms) with Topic.
var (
	keyNodeID                    = intKey("node.id")
	keyBrokerID                  = intKey("broker.id")
	keyListeners                 = stringKey("listeners")
	keyAdvertisedListeners       = stringKey("advertised.listeners")
	keyLogDirs                   = listKey("log.dirs")
	keyLogDir                    = stringKey("log.dir")
	keyClusterID                 = stringKey("cluster.id")
	keyNumPartitions             = intKey("num.partitions")
	keyDefaultReplicationFactor  = intKey("default.replication.factor")
	keyAutoCreateTopicsEnable    = boolKey("auto.create.topics.enable")
	keyDeleteTopicEnable         = boolKey("delete.topic.enable")
	keyLogRetentionCheckInterval = msKey("log.retention.check.interval.ms")
	keyLogFlushIntervalMessages  = longKey("log.flush.interval.messages")

	keyLogCleanerEnable                     = boolKey("log.cleaner.enable")
	keyLogCleanerThreads                    = intKey("log.cleaner.threads")
	keyLogCleanerBackoff                    = msKey("log.cleaner.backoff.ms")
	keyProducerIDExpirationMs               = longKey("producer.id.expiration.ms")
	keyMaxIncrementalFetchSessionCacheSlots = intKey("max.incremental.fetch.session.cache.slots")
	keyProducerIDExpirationCheckInterval    = msKey("producer.id.expiration.check.interval.ms")
	keyLogCleanerDedupeBufferSize           = longKey("log.cleaner.dedupe.buffer.size")
	keyLogCleanerIOBufferSize               = intKey("log.cleaner.io.buffer.size")
	keyLogCleanerIOMaxBytesPerSec           = doubleKey("log.cleaner.io.max.bytes.per.second")

	keySocketRequestMaxBytes            = intKey("socket.request.max.bytes")
	keyMaxConnections                   = intKey("max.connections")
	keyMaxConnectionsPerIP              = intKey("max.connections.per.ip")
	keyMaxConnectionsPerIPOverrides     = stringKey("max.connections.per.ip.overrides")
	keyMaxConnectionCreationRate        = intKey("max.connection.creation.rate")
	keyQueuedMaxRequests                = intKey("queued.max.requests")
	keyQueuedMaxRequestBytes            = longKey("queued.max.request.bytes")
	keyQueuedMaxRequestBytesPerConn     = longKey("queued.max.request.bytes.per.connection")
	keyConnectionsMaxIdle               = msKey("connections.max.idle.ms")
	keyNumRecoveryThreadsPerDataDir     = intKey("num.recovery.threads.per.data.dir")
	keyLogFlushOffsetCheckpointInterval = msKey("log.flush.offset.checkpoint.interval.ms")
	keyOffsetsTopicNumPartitions        = intKey("offsets.topic.num.partitions")
	keyOffsetsTopicReplicationFactor    = intKey("offsets.topic.replication.factor")
	keyOffsetsTopicSegmentBytes         = intKey("offsets.topic.segment.bytes")
	keyOffsetsRetention                 = durationKey("offsets.retention.minutes", time.Minute)
	keyOffsetsRetentionCheckInterval    = msKey("offsets.retention.check.interval.ms")
	keyOffsetMetadataMaxBytes           = intKey("offset.metadata.max.bytes")
	keyGroupInitialRebalanceDelay       = msKey("group.initial.rebalance.delay.ms")
	keyGroupMinSessionTimeout           = msKey("group.min.session.timeout.ms")
	keyGroupMaxSessionTimeout           = msKey("group.max.session.timeout.ms")
	keyGroupMaxSize                     = intKey("group.max.size")
	keyShareRecordLockDuration          = msKey("group.share.record.lock.duration.ms")
	keyShareDeliveryCountLimit          = intKey("group.share.delivery.count.limit")
	keySharePartitionMaxRecordLocks     = intKey("group.share.partition.max.record.locks")
	keyShareMaxSessions                 = intKey("group.share.max.share.sessions")
	keyGroupConsumerSessionTimeout      = msKey("group.consumer.session.timeout.ms")
	keyGroupConsumerMinSessionTimeout   = msKey("group.consumer.min.session.timeout.ms")
	keyGroupConsumerMaxSessionTimeout   = msKey("group.consumer.max.session.timeout.ms")
	keyGroupConsumerHeartbeatInterval   = msKey("group.consumer.heartbeat.interval.ms")
	keyGroupConsumerMinHeartbeat        = msKey("group.consumer.min.heartbeat.interval.ms")
	keyGroupConsumerMaxHeartbeat        = msKey("group.consumer.max.heartbeat.interval.ms")
	keyGroupConsumerMaxSize             = intKey("group.consumer.max.size")
	keyGroupConsumerAssignors           = listKey("group.consumer.assignors")
	keyGroupConsumerRegexRefresh        = msKey("group.consumer.regex.refresh.interval.ms")
	keyGroupConsumerMigrationPolicy     = stringKey("group.consumer.migration.policy")
	keyGroupShareSessionTimeout         = msKey("group.share.session.timeout.ms")
	keyGroupShareMinSessionTimeout      = msKey("group.share.min.session.timeout.ms")
	keyGroupShareMaxSessionTimeout      = msKey("group.share.max.session.timeout.ms")
	keyGroupShareHeartbeatInterval      = msKey("group.share.heartbeat.interval.ms")
	keyGroupShareMinHeartbeatInterval   = msKey("group.share.min.heartbeat.interval.ms")
	keyGroupShareMaxHeartbeatInterval   = msKey("group.share.max.heartbeat.interval.ms")
	keyGroupShareMaxSize                = intKey("group.share.max.size")
	keyTxnMaxTimeout                    = msKey("transaction.max.timeout.ms")
	keyTxnIDExpiration                  = msKey("transactional.id.expiration.ms")
	keyTxnAbortTimedOutInterval         = msKey("transaction.abort.timed.out.transaction.cleanup.interval.ms")
	keyTxnRemoveExpiredInterval         = msKey("transaction.remove.expired.transaction.cleanup.interval.ms")
	keyTxnStateNumPartitions            = intKey("transaction.state.log.num.partitions")
	keyTxnStateReplicationFactor        = intKey("transaction.state.log.replication.factor")
	keyTxnStateMinISR                   = intKey("transaction.state.log.min.isr")
	keyTxnStateSegmentBytes             = intKey("transaction.state.log.segment.bytes")
	keyShareStateNumPartitions          = intKey("share.coordinator.state.topic.num.partitions")
	keyShareStateReplicationFactor      = intKey("share.coordinator.state.topic.replication.factor")
	keyShareStateMinISR                 = intKey("share.coordinator.state.topic.min.isr")
	keyShareStateSegmentBytes           = intKey("share.coordinator.state.topic.segment.bytes")
	keyShareSnapshotUpdateRecords       = intKey("share.coordinator.snapshot.update.records.per.snapshot")
	keyTxnPartitionVerification         = boolKey("transaction.partition.verification.enable")
	keyTxnVersion                       = intKey("internal.transaction.version")
	keyAddPartitionsRetryBackoff        = msKey("add.partitions.to.txn.retry.backoff.ms")
	keyAddPartitionsRetryBackoffMax     = msKey("add.partitions.to.txn.retry.backoff.max.ms")
	keyControllerQuorumVoters           = stringKey("controller.quorum.voters")
	keyControllerListener               = stringKey("controller.listener")
	keyMetadataLogDir                   = stringKey("metadata.log.dir")
	keyBrokerSessionTimeout             = msKey("broker.session.timeout.ms")
	keyBrokerHeartbeatInterval          = msKey("broker.heartbeat.interval.ms")
	keyReplicaLagTimeMax                = msKey("replica.lag.time.max.ms")
	keyReplicaFetchWaitMax              = msKey("replica.fetch.wait.max.ms")
	keyReplicaFetchMaxBytes             = intKey("replica.fetch.max.bytes")
	keyReplicaFetchResponseMaxBytes     = intKey("replica.fetch.response.max.bytes")
	keyReplicaFetchBackoff              = msKey("replica.fetch.backoff.ms")
	keyControlledShutdownEnable         = boolKey("controlled.shutdown.enable")
	// Leader balance (controller/elect.go).
	keyAutoLeaderRebalanceEnable          = boolKey("auto.leader.rebalance.enable")
	keyLeaderImbalanceCheckInterval       = longKey("leader.imbalance.check.interval.seconds")
	keyLeaderImbalancePerBrokerPercentage = intKey("leader.imbalance.per.broker.percentage")
	keyRequestTimeout                     = msKey("request.timeout.ms")
	keyStorageDescriptorBudget            = longKey("storage.descriptor.budget")
	keyStorageMappingBudget               = longKey("storage.mapping.budget")
	keyStorageDescriptorCacheSize         = longKey("storage.descriptor.cache.size")
	keyStorageIndexCacheSize              = longKey("storage.index.cache.size")
	keyMetricsListener                    = stringKey("metrics.listener")
	keyMetricsPprofEnable                 = boolKey("metrics.pprof.enable")
	keyListenerSecurityProtocolMap        = stringKey("listener.security.protocol.map")
	keySSLCertificateLocation             = stringKey("ssl.certificate.location")
	keySSLKeyLocation                     = stringKey("ssl.key.location")
	keySSLCALocation                      = stringKey("ssl.ca.location")
	keySSLClientAuth                      = stringKey("ssl.client.auth")
	keySASLEnabledMechanisms              = stringKey("sasl.enabled.mechanisms")
	keyInterBrokerListenerName            = stringKey("inter.broker.listener.name")
	keySecurityInterBrokerProtocol        = stringKey("security.inter.broker.protocol")
	keySASLMechanismInterBrokerProtocol   = stringKey("sasl.mechanism.inter.broker.protocol")
	keySASLJAASConfig                     = stringKey("sasl.jaas.config")
	keySASLServerMaxReceiveSize           = intKey("sasl.server.max.receive.size")
	keyConnectionFailedAuthDelay          = msKey("connection.failed.authentication.delay.ms")
	keyControllerListenerNames            = listKey("controller.listener.names")
	keySASLMechanismControllerProtocol    = stringKey("sasl.mechanism.controller.protocol")
	keyControllerBrokerPrincipals         = stringKey("controller.broker.principals")
	keyControllerNetworkTrusted           = boolKey("controller.network.trusted")
	keyAuthorizerClassName                = stringKey("authorizer.class.name")
	keyAuthorizerEnable                   = boolKey("authorizer.enable")
	keySuperUsers                         = stringKey("super.users")
	keyAllowEveryoneIfNoACLFound          = boolKey("allow.everyone.if.no.acl.found")
	// Racks (issue 14, racks.go).
	keyBrokerRack           = stringKey("broker.rack")
	keyReplicaSelectorClass = stringKey("replica.selector.class")
	// Client quotas (quotas.go).
	keyQuotaWindowNum         = intKey("quota.window.num")
	keyQuotaWindowSizeSeconds = intKey("quota.window.size.seconds")

	// Topic keys (read with Topic; each names the broker key behind its default in configdefs.go).
	keyMaxMessageBytes             = intKey("max.message.bytes")
	keySegmentBytes                = longKey("segment.bytes")
	keyInternalSegmentBytes        = longKey("internal.segment.bytes")
	keySegmentMs                   = longKey("segment.ms")
	keyRetentionMs                 = longKey("retention.ms")
	keyRetentionBytes              = longKey("retention.bytes")
	keyIndexIntervalBytes          = intKey("index.interval.bytes")
	keySegmentIndexBytes           = intKey("segment.index.bytes")
	keyFlushMessages               = longKey("flush.messages")
	keyFlushMs                     = longKey("flush.ms")
	keyCleanupPolicy               = stringKey("cleanup.policy")
	keyDeleteRetentionMs           = longKey("delete.retention.ms")
	keyMinCleanableDirtyRatio      = doubleKey("min.cleanable.dirty.ratio")
	keyMinCompactionLagMs          = longKey("min.compaction.lag.ms")
	keyMessageTimestampType        = stringKey("message.timestamp.type")
	keyMessageTimestampBeforeMaxMs = longKey("message.timestamp.before.max.ms")
	keyMessageTimestampAfterMaxMs  = longKey("message.timestamp.after.max.ms")
	keyMinInsyncReplicas           = intKey("min.insync.replicas")
	keyUncleanLeaderElectionEnable = boolKey("unclean.leader.election.enable")
	keyCompressionType             = stringKey("compression.type")
	keyMaxCompactionLagMs          = longKey("max.compaction.lag.ms")
	keySegmentJitterMs             = longKey("segment.jitter.ms")
	keyFileDeleteDelayMs           = longKey("file.delete.delay.ms")
	keyPreallocate                 = boolKey("preallocate")
	keyCompressionGzipLevel        = intKey("compression.gzip.level")
	keyCompressionLZ4Level         = intKey("compression.lz4.level")
	keyCompressionZstdLevel        = intKey("compression.zstd.level")

	// Replication throttles (KIP-73; reassign_throttle.go).
	keyLeaderReplicationThrottledRate       = longKey("leader.replication.throttled.rate")
	keyFollowerReplicationThrottledRate     = longKey("follower.replication.throttled.rate")
	keyLeaderReplicationThrottledReplicas   = stringKey("leader.replication.throttled.replicas")
	keyFollowerReplicationThrottledReplicas = stringKey("follower.replication.throttled.replicas")
	keyReplicaAlterLogDirsIOMaxBytes        = longKey("replica.alter.log.dirs.io.max.bytes.per.second")
)
