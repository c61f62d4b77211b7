package engine

import (
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

// Config is one partition log's configuration. Field names follow Kafka's topic configs; the
// broker-level defaults are the log.* keys of server.properties.
type Config struct {
	// SegmentBytes is segment.bytes / log.segment.bytes: roll when the active segment would exceed it.
	SegmentBytes int64
	// SegmentMs is segment.ms / log.roll.ms: roll when the active segment's first batch is older.
	SegmentMs int64
	// RetentionMs is retention.ms / log.retention.ms; -1 keeps segments forever.
	RetentionMs int64
	// RetentionBytes is retention.bytes / log.retention.bytes; -1 means no size limit.
	RetentionBytes int64
	// IndexIntervalBytes is index.interval.bytes / log.index.interval.bytes.
	IndexIntervalBytes int
	// MaxIndexBytes is segment.index.bytes / log.index.size.max.bytes.
	MaxIndexBytes int
	// MaxMessageBytes is max.message.bytes / message.max.bytes: the largest batch accepted.
	MaxMessageBytes int
	// FlushIntervalMessages is flush.messages / log.flush.interval.messages. 1 (weir's default)
	// makes every acknowledged append durable, with group commit; larger values acknowledge from the
	// page cache and fsync once that many messages are unflushed.
	FlushIntervalMessages int64
	// FlushIntervalMs is flush.ms / log.flush.interval.ms: also fsync when the oldest unflushed
	// append is this old. 0 disables the timer (the broker maps Kafka's default, Long.MAX, here).
	FlushIntervalMs int64
	// FlushOnAppend is flush.ms=0 (Kafka: no message stays unflushed): every append wakes the
	// flusher at once. Acknowledgements still wait for fdatasync only when Durable.
	FlushOnAppend bool
	// LocalHighWatermark makes the high watermark follow the log itself, for a partition with no
	// followers: with durable acks it advances to each fdatasync'd offset (consumers never see
	// an unacknowledged write), with page-cache acks to the log end after each append. When false,
	// the high watermark is set from outside (replication).
	LocalHighWatermark bool
	// CleanupPolicy is cleanup.policy / log.cleanup.policy: "delete" (the default, also when
	// empty), "compact", or both ("compact,delete" in either order). Retention by retention.ms
	// and retention.bytes applies only when it includes delete; the cleaner compacts the log
	// (see cleaner.go) and Append refuses keyless records when it includes compact.
	CleanupPolicy string
	// DeleteRetentionMs is delete.retention.ms / log.cleaner.delete.retention.ms: a tombstone
	// survives this long after the cleaning that first reached it. Zero is kept as given
	// (removed by the next cleaning); negative means the default.
	DeleteRetentionMs int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: the cleaner picks a log once its
	// dirty bytes exceed this share of its cleanable bytes. Zero is kept as given; negative
	// means the default.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms: a segment whose newest record is younger
	// stays uncleaned. Negative means 0.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms / log.cleaner.max.compaction.lag.ms (KIP-354):
	// on a compacted log, the cleaner cleans a log whose oldest uncleaned record is older than
	// this even below min.cleanable.dirty.ratio, and the active segment rolls no later than this
	// after its first batch (Kafka's LogConfig.maxSegmentMs). Zero or negative means no bound
	// (Kafka's default Long.MAX_VALUE; Kafka refuses 0, weir treats it as unbounded).
	MaxCompactionLagMs int64
	// SegmentJitterMs is segment.jitter.ms / log.roll.jitter.ms: each segment gets a random
	// jitter in [0, min(SegmentJitterMs, segment.ms)) subtracted from its time-based roll
	// deadline (Kafka's rollJitterMs), so segments created together do not all roll together.
	SegmentJitterMs int64
	// Preallocate is preallocate / log.preallocate: a new segment's .log is preallocated to
	// segment.bytes and trimmed to its real size when it rolls and at a clean close (see
	// segment.Config.Preallocate).
	Preallocate bool
	// FileDeleteDelayMs is file.delete.delay.ms / log.segment.delete.delay.ms: a segment
	// deleted by retention, DeleteRecords, a cleaner swap or a truncation is renamed with the
	// .deleted suffix at once and its files are removed this much later (deleteq.go). Zero or
	// negative removes them at once.
	FileDeleteDelayMs int64
	// ProducerIDExpirationMs is producer.id.expiration.ms (a broker key): an idempotent
	// producer whose last write is this old is forgotten (Manager: every
	// ProducerIDExpirationCheckInterval). Zero or negative means Kafka's default, one day.
	ProducerIDExpirationMs int64
	// MessageTimestampType is message.timestamp.type / log.message.timestamp.type: "CreateTime"
	// (also when empty) keeps the producer's timestamps; "LogAppendTime" stamps every appended
	// batch with the broker's clock (timestamp-type attribute set, maxTimestamp = now, the CRC
	// recomputed in place), as Kafka does.
	MessageTimestampType string
	// CheckTimestamps applies the two bounds below to every CreateTime record on Append
	// (INVALID_TIMESTAMP). The broker always sets it; the zero Config (tests, tools) checks none.
	CheckTimestamps bool
	// MessageTimestampBeforeMaxMs is message.timestamp.before.max.ms: the largest allowed age
	// of a CreateTime timestamp (Kafka's default Long.MAX_VALUE, unbounded). Negative means
	// unbounded.
	MessageTimestampBeforeMaxMs int64
	// MessageTimestampAfterMaxMs is message.timestamp.after.max.ms: the largest allowed lead of
	// a CreateTime timestamp over the broker's clock (Kafka 4's default 3600000). A record stamped
	// far in the future would otherwise hold its segment past time retention, and every later
	// segment with it (retention deletes the oldest segments first and stops at the first one
	// it keeps, as Kafka does). Negative means unbounded.
	MessageTimestampAfterMaxMs int64
	// Now is the wall clock (the broker passes internal/clock.Now; tests inject one): LogAppendTime,
	// retention, time rolls, producer-id expiry, compaction lags, timestamp bounds, marker
	// timestamps. Nil means internal/clock.Now.
	Now func() time.Time
	// Nanotime is the monotonic clock in nanoseconds (the broker passes internal/clock.Nanotime),
	// never moved by a wall-clock step: it keeps a producer that is writing from expiring when
	// the wall clock jumps ahead. Nil: Now's UnixNano when Now is set (so a test's fake clock
	// drives both), else internal/clock.Nanotime.
	Nanotime func() int64
	// Observer receives fsync measurements. Nil disables.
	Observer Observer
}

// Observer receives the durability path's measurements (exported as metrics by the broker).
type Observer interface {
	// ObserveFsync is called once per flush cycle with the fdatasync time and the number of
	// appends the cycle made durable (the group-commit batch size).
	ObserveFsync(d time.Duration, appends int)
}

// DefaultConfig holds Kafka's defaults, with weir's durable acknowledgement.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:          1 << 30,
		SegmentMs:             7 * 24 * 3600 * 1000,
		RetentionMs:           7 * 24 * 3600 * 1000,
		RetentionBytes:        -1,
		IndexIntervalBytes:    4096,
		MaxIndexBytes:         10 << 20,
		MaxMessageBytes:       1048588,
		FlushIntervalMessages: 1,
		FlushIntervalMs:       0,

		CleanupPolicy:          "delete",
		DeleteRetentionMs:      24 * 3600 * 1000,
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		FileDeleteDelayMs:      60_000,
		ProducerIDExpirationMs: 86_400_000,
	}
}

// maxSegmentMs is the time after which the active segment rolls: segment.ms, or
// max.compaction.lag.ms when smaller on a compacted log (Kafka's LogConfig.maxSegmentMs).
func (c *Config) maxSegmentMs() int64 {
	if c.PolicyCompact() && c.MaxCompactionLagMs > 0 {
		return min(c.SegmentMs, c.MaxCompactionLagMs)
	}
	return c.SegmentMs
}

// randomSegmentJitter draws a new segment's roll jitter, as Kafka's
// LogConfig.randomSegmentJitter: uniform in [0, min(segment.jitter.ms, segment.ms)), 0 when no
// jitter is configured.
func (c *Config) randomSegmentJitter() int64 {
	if c.SegmentJitterMs <= 0 {
		return 0
	}
	return rand.Int64N(min(c.SegmentJitterMs, c.SegmentMs))
}

// LogAppendTime reports whether message.timestamp.type is LogAppendTime.
func (c *Config) LogAppendTime() bool {
	return strings.EqualFold(c.MessageTimestampType, "LogAppendTime")
}

// PolicyCompact reports whether the cleanup policy includes compact.
func (c *Config) PolicyCompact() bool { return policyHas(c.CleanupPolicy, "compact") }

// PolicyDelete reports whether the cleanup policy includes delete (an empty policy is delete).
func (c *Config) PolicyDelete() bool {
	return strings.TrimSpace(c.CleanupPolicy) == "" || policyHas(c.CleanupPolicy, "delete")
}

// policyHas reports whether the comma-separated policy names want. It allocates nothing: the
// append path asks it for every batch (producePolicy, maxSegmentMs).
func policyHas(policy, want string) bool {
	for policy != "" {
		p, rest, _ := strings.Cut(policy, ",")
		if strings.TrimSpace(p) == want {
			return true
		}
		policy = rest
	}
	return false
}

// Durable reports whether acknowledgements wait for fdatasync.
func (c Config) Durable() bool { return c.FlushIntervalMessages <= 1 }

func (c *Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return clock.Now()
}

func (c *Config) nanotime() int64 {
	switch {
	case c.Nanotime != nil:
		return c.Nanotime()
	case c.Now != nil:
		return c.Now().UnixNano()
	}
	return clock.Nanotime()
}

func (c *Config) segmentConfig() segment.Config {
	sc := segment.Config{IndexIntervalBytes: c.IndexIntervalBytes, MaxIndexBytes: c.MaxIndexBytes, ActiveMapBytes: c.SegmentBytes}
	if c.Preallocate {
		sc.PreallocateBytes = c.SegmentBytes // Kafka's LogConfig.initFileSize
	}
	return sc
}

func (c *Config) fillDefaults() {
	d := DefaultConfig()
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	if c.SegmentBytes > math.MaxInt32 {
		c.SegmentBytes = math.MaxInt32 // segment positions are int32 in the offset index
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.RetentionMs == 0 {
		c.RetentionMs = d.RetentionMs
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = d.RetentionBytes
	}
	if c.IndexIntervalBytes <= 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.MaxIndexBytes <= 0 {
		c.MaxIndexBytes = d.MaxIndexBytes
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.FlushIntervalMessages <= 0 {
		c.FlushIntervalMessages = d.FlushIntervalMessages
	}
	if c.DeleteRetentionMs < 0 {
		c.DeleteRetentionMs = d.DeleteRetentionMs
	}
	if c.MinCleanableDirtyRatio < 0 {
		c.MinCleanableDirtyRatio = d.MinCleanableDirtyRatio
	}
	if c.ProducerIDExpirationMs <= 0 {
		c.ProducerIDExpirationMs = d.ProducerIDExpirationMs
	}
	if c.MinCompactionLagMs < 0 {
		c.MinCompactionLagMs = 0
	}
}

// producePolicy is what Append asks of a producer's batch (record.ValidateProduce), read from
// the configuration in force at the append, so dynamic topic config changes apply to the next
// batch.
func (c *Config) producePolicy() record.Policy {
	return record.Policy{
		MaxBatchBytes:   c.MaxMessageBytes,
		DecompressLimit: record.DecompressLimit(c.MaxMessageBytes),
		Now:             c.now().UnixMilli(),
		LogAppendTime:   c.LogAppendTime(),
		CheckTimestamps: c.CheckTimestamps,
		BeforeMaxMs:     c.MessageTimestampBeforeMaxMs,
		AfterMaxMs:      c.MessageTimestampAfterMaxMs,
		RequireKeys:     c.PolicyCompact(),
	}
}
