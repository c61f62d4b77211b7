package broker

// Wiring of the group coordinator (package coordinator): its configuration from the broker's
// keys, and its store, __consumer_offsets, over the broker's partition logs. The topic is
// created on first use (FindCoordinator, or the first record a group writes) with
// offsets.topic.num.partitions partitions, cleanup.policy=compact and no time retention.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/coordinator/assignor"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/sharestate"
)

// offsetsTopic is Kafka's internal topic of committed offsets and group metadata.
const offsetsTopic = "__consumer_offsets"

// groupsState is the broker's coordinator (embedded in Broker as groups).
type groupsState struct {
	coord *coordinator.Coordinator
	// createMu serializes the creation of __consumer_offsets; ready is set once it exists with
	// all its partition logs (topic metadata is published before the logs are created).
	createMu sync.Mutex
	ready    atomic.Bool
	// topicsSig is a hash of the topics' names, ids and partition counts in the last image
	// seen (groupsImageChanged): consumer groups are told only when it changes.
	topicsSig atomic.Uint64
	// sharePersister is the share-partition state persister (KIP-932), one per broker: the
	// group coordinator initializes and deletes state through it, the share-partition leaders
	// read and write it.
	sharePersister sharestate.Persister
}

// consumerGroupSettings are the group.consumer.* keys, checked as Kafka's GroupCoordinatorConfig
// checks them.
type consumerGroupSettings struct {
	sessionTimeout, heartbeatInterval time.Duration
	maxSize                           int
	assignors                         []assignor.Assignor
	regexRefresh                      time.Duration
	migration                         coordinator.MigrationPolicy
}

func (b *Broker) consumerGroupConfig() (consumerGroupSettings, error) {
	var cs consumerGroupSettings
	st, minSt, maxSt := keyGroupConsumerSessionTimeout.Get(b.cfg), keyGroupConsumerMinSessionTimeout.Get(b.cfg), keyGroupConsumerMaxSessionTimeout.Get(b.cfg)
	hb, minHb, maxHb := keyGroupConsumerHeartbeatInterval.Get(b.cfg), keyGroupConsumerMinHeartbeat.Get(b.cfg), keyGroupConsumerMaxHeartbeat.Get(b.cfg)
	switch {
	case maxSt < minSt:
		return cs, errors.New("group.consumer.max.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms")
	case st < minSt:
		return cs, errors.New("group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms")
	case st > maxSt:
		return cs, errors.New("group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms")
	case maxHb < minHb:
		return cs, errors.New("group.consumer.max.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms")
	case hb < minHb:
		return cs, errors.New("group.consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms")
	case hb > maxHb:
		return cs, errors.New("group.consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms")
	case hb >= st:
		return cs, errors.New("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
	}
	cs.sessionTimeout, cs.heartbeatInterval = st, hb
	cs.maxSize = int(keyGroupConsumerMaxSize.Get(b.cfg))
	cs.regexRefresh = keyGroupConsumerRegexRefresh.Get(b.cfg)
	seen := map[string]bool{}
	for _, name := range keyGroupConsumerAssignors.Get(b.cfg) {
		var a assignor.Assignor
		switch strings.TrimSpace(name) {
		case "uniform", "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
			a = assignor.Uniform()
		case "range", "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
			a = assignor.Range()
		case "":
			continue
		default:
			return cs, fmt.Errorf("group.consumer.assignors: %q is not an assignor weir has (uniform, range); custom assignor classes are not supported", name)
		}
		if !seen[a.Name()] {
			seen[a.Name()] = true
			cs.assignors = append(cs.assignors, a)
		}
	}
	if len(cs.assignors) == 0 {
		return cs, errors.New("group.consumer.assignors must name at least one assignor")
	}
	mp, ok := coordinator.ParseMigrationPolicy(keyGroupConsumerMigrationPolicy.Get(b.cfg))
	if !ok {
		return cs, fmt.Errorf("group.consumer.migration.policy: %q is not one of disabled, upgrade, downgrade, bidirectional", keyGroupConsumerMigrationPolicy.Get(b.cfg))
	}
	cs.migration = mp
	return cs, nil
}

// consumerGroupTopics is the coordinator's view of the topics (Config.Topics).
func (b *Broker) consumerGroupTopics() map[string]coordinator.TopicMeta {
	img := b.ctl.Image()
	out := make(map[string]coordinator.TopicMeta, len(img.Topics))
	for name, t := range img.Topics {
		out[name] = coordinator.TopicMeta{ID: t.ID, Partitions: int32(len(t.Partitions))}
	}
	return out
}

// topicsSignature hashes the topics' names, ids and partition counts of img (order-independent).
func topicsSignature(img *controller.Image) uint64 {
	var sum uint64
	for name, t := range img.Topics {
		h := fnv.New64a()
		h.Write([]byte(name))
		h.Write(t.ID[:])
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(t.Partitions)))
		h.Write(n[:])
		sum += h.Sum64()
	}
	return sum + uint64(len(img.Topics))
}

// openGroups creates the coordinator (New); startGroups starts loading (Start).
func (b *Broker) openGroups() error {
	cc, err := b.consumerGroupConfig()
	if err != nil {
		return err
	}
	b.groups.sharePersister = b.newSharePersister()
	share, err := b.shareGroupConfig()
	if err != nil {
		return err
	}
	c, err := coordinator.New(coordinator.Config{
		Topics:                       b.consumerGroupTopics,
		ConsumerSessionTimeout:       cc.sessionTimeout,
		ConsumerHeartbeatInterval:    cc.heartbeatInterval,
		ConsumerMaxSize:              cc.maxSize,
		ConsumerAssignors:            cc.assignors,
		ConsumerRegexRefreshInterval: cc.regexRefresh,
		MigrationPolicy:              cc.migration,
		Store:                        &offsetsStore{b: b},
		Wall:                         clock.Now, // written timestamps; deadlines stay monotonic
		InitialRebalanceDelay:        keyGroupInitialRebalanceDelay.Get(b.cfg),
		MinSessionTimeout:            keyGroupMinSessionTimeout.Get(b.cfg),
		MaxSessionTimeout:            keyGroupMaxSessionTimeout.Get(b.cfg),
		MaxGroupSize:                 int(keyGroupMaxSize.Get(b.cfg)),
		OffsetsRetention:             keyOffsetsRetention.Get(b.cfg),
		RetentionCheckInterval:       keyOffsetsRetentionCheckInterval.Get(b.cfg),
		OffsetMetadataMaxBytes:       int(keyOffsetMetadataMaxBytes.Get(b.cfg)),
		ManualOwnership:              true,
		Share:                        share,
	})
	if err != nil {
		return err
	}
	b.groups.coord = c
	return nil
}

func (b *Broker) startGroups() { b.groups.coord.Start() }

func (b *Broker) closeGroups() { b.groups.coord.Close() }

// Coordinator exposes the group coordinator (tests, tools).
func (b *Broker) Coordinator() *coordinator.Coordinator { return b.groups.coord }

// groupsImageChanged gives the coordinator the __consumer_offsets partitions this broker leads
// and takes away the others (coordinator failover: the new leader loads the groups).
func (b *Broker) groupsImageChanged(img *controller.Image) {
	c := b.groups.coord
	if c == nil {
		return
	}
	// KIP-848 consumer groups re-check their subscribed topics (and regexes) when topics
	// are created, deleted or gain partitions.
	if sig := topicsSignature(img); b.groups.topicsSig.Swap(sig) != sig {
		c.MetadataChanged()
	}
	t, ok := img.Topics[offsetsTopic]
	for p := int32(0); p < c.Partitions(); p++ {
		if !ok && !b.clustered() {
			c.Elect(p) // a single broker coordinates every group, before the topic exists too
			continue
		}
		if ok && p < int32(len(t.Partitions)) && t.Partitions[p].Leader == b.nodeID {
			c.Elect(p)
		} else if ok {
			c.Resign(p)
		}
	}
}

// ensureOffsetsTopic returns __consumer_offsets, creating it on first use.
func (b *Broker) ensureOffsetsTopic() (Topic, error) {
	if b.groups.ready.Load() {
		if t, ok := b.topics.get(offsetsTopic); ok {
			return t, nil
		}
		b.groups.ready.Store(false) // deleted meanwhile
	}
	const rfKey = "offsets.topic.replication.factor"
	rf := b.internalTopicRF(offsetsTopic, rfKey, keyOffsetsTopicReplicationFactor.Get(b.cfg)) // internalrf.go
	if err := b.internalTopicAwaitsBrokers(offsetsTopic, rfKey, rf); err != nil {
		return Topic{}, err
	}
	b.groups.createMu.Lock()
	defer b.groups.createMu.Unlock()
	if t, ok := b.topics.get(offsetsTopic); ok {
		// Created by someone else (a CreateTopics, another broker): make sure its logs exist.
		b.rm.reconcile()
		b.groups.ready.Store(true)
		return t, nil
	}
	t, err := b.createTopic(offsetsTopic, int32(keyOffsetsTopicNumPartitions.Get(b.cfg)), int16(rf), nil, map[string]string{
		"cleanup.policy": "compact",
		// Compaction, not time, bounds this topic: keep every segment until the cleaner runs.
		"retention.ms":  "-1",
		"segment.bytes": strconv.Itoa(keyOffsetsTopicSegmentBytes.Get(b.cfg)),
	}, nil)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		if t, ok := b.topics.get(offsetsTopic); ok {
			return t, nil
		}
	}
	if err != nil {
		return t, b.internalTopicUnavailable(offsetsTopic, rfKey, rf, err)
	}
	b.groups.ready.Store(true)
	return t, nil
}

// clientHost formats a client address as Kafka does (InetAddress.toString: "/1.2.3.4").
func clientHost(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return "/" + ta.IP.String()
	}
	if a == nil {
		return ""
	}
	return "/" + a.String()
}

// offsetsStore is coordinator.Store over the broker's logs.
type offsetsStore struct{ b *Broker }

func (s *offsetsStore) Partitions() int32 {
	if t, ok := s.b.topics.get(offsetsTopic); ok {
		return t.Partitions
	}
	return int32(keyOffsetsTopicNumPartitions.Get(s.b.cfg))
}

func (s *offsetsStore) Log(p int32) (coordinator.OffsetsLog, error) {
	t, err := s.b.ensureOffsetsTopic()
	if err != nil {
		return nil, err
	}
	if p < 0 || p >= t.Partitions {
		return nil, fmt.Errorf("%s has no partition %d: %w", offsetsTopic, p, kerr.UnknownTopicOrPartition)
	}
	l, ok := s.b.logs.Log(engine.TopicPartition{Topic: offsetsTopic, Partition: p})
	if !ok {
		return nil, fmt.Errorf("%s-%d has no log: %w", offsetsTopic, p, kerr.UnknownTopicOrPartition)
	}
	return offsetsLog{l: l, b: s.b}, nil
}

func (s *offsetsStore) Existing(p int32) (coordinator.OffsetsLog, bool) {
	if _, ok := s.b.topics.get(offsetsTopic); !ok {
		return nil, false
	}
	l, ok := s.b.logs.Log(engine.TopicPartition{Topic: offsetsTopic, Partition: p})
	if !ok {
		return nil, false
	}
	return offsetsLog{l: l, b: s.b}, true
}

// offsetsLog is coordinator.OffsetsLog over one partition log.
type offsetsLog struct {
	l *engine.Log
	b *Broker
	// minISR is the in-sync replicas an append waits for on a replicated partition (0: 1, as
	// for __consumer_offsets; __transaction_state uses its min.insync.replicas).
	minISR int
}

func (o offsetsLog) Append(batch []byte) (int64, error) {
	rep := o.b.rm.get(engine.TopicPartition{Topic: o.l.Topic(), Partition: o.l.Partition()})
	if rep == nil {
		return 0, fmt.Errorf("%s-%d is not hosted here: %w", o.l.Topic(), o.l.Partition(), kerr.NotCoordinator)
	}
	info, _, err := rep.appendAsLeader(batch)
	if errors.Is(err, kerr.NotLeaderForPartition) {
		err = fmt.Errorf("%v: %w", err, kerr.NotCoordinator)
	}
	if err != nil {
		return 0, err
	}
	return info.LastOffset + 1, nil
}

// AwaitDurable waits for the fdatasync covering upTo and moves the high watermark there (as an
// acknowledged produce does), so the records are visible to fetches of __consumer_offsets.
// A replicated partition waits until the high watermark covers upTo (every in-sync replica has
// the records on disk), as a produce with acks=all does.
func (o offsetsLog) AwaitDurable(upTo int64) error {
	if err := o.l.AwaitDurable(upTo); err != nil {
		return err
	}
	if o.l.Config().LocalHighWatermark {
		_ = o.l.AdvanceHighWatermark(upTo)
		return nil
	}
	r := o.b.rm.get(engine.TopicPartition{Topic: o.l.Topic(), Partition: o.l.Partition()})
	if r == nil {
		return fmt.Errorf("%s-%d is not hosted here: %w", o.l.Topic(), o.l.Partition(), kerr.NotCoordinator)
	}
	epoch, ok := r.leaderEpoch()
	if !ok {
		return fmt.Errorf("%s-%d is not led here: %w", o.l.Topic(), o.l.Partition(), kerr.NotCoordinator)
	}
	timer := time.NewTimer(keyRequestTimeout.Get(o.b.cfg))
	defer timer.Stop()
	if err := r.waitCommitted(upTo, epoch, r.effectiveMinISR(max(o.minISR, 1)), timer.C, nil); err != nil {
		return fmt.Errorf("%v: %w", err, kerr.NotCoordinator)
	}
	return nil
}

// readChunk is how much of the log one read brings into memory while loading.
const readChunk = 1 << 20

// ReadBatches reads the log from its start to its end, a chunk at a time, and hands each whole
// batch to fn.
func (o offsetsLog) ReadBatches(fn func(batch []byte) error) error {
	offset := o.l.LogStartOffset()
	end := o.l.LogEndOffset()
	var buf []byte
	for offset < end {
		sl, err := o.l.Read(offset, readChunk, engine.ReadUpToLogEnd)
		if err != nil {
			return err
		}
		if sl.Length == 0 {
			sl.Release()
			return nil
		}
		if int64(cap(buf)) < sl.Length {
			buf = make([]byte, sl.Length)
		}
		buf = buf[:sl.Length]
		_, err = sl.File.ReadAt(buf, sl.Position)
		sl.Release()
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", o.l.Dir(), offset, err)
		}
		next := offset
		for p := buf; len(p) >= record.HeaderSize; {
			h, err := record.ParseHeader(p)
			if err != nil || h.BatchLength < record.HeaderSize-record.LogOverhead {
				return fmt.Errorf("%s at %d: bad batch header (%v)", o.l.Dir(), next, err)
			}
			if int64(len(p)) < h.Size() {
				break // the chunk ends inside this batch: read it again next time
			}
			if err := fn(p[:h.Size()]); err != nil {
				return err
			}
			next = h.NextOffset()
			p = p[h.Size():]
		}
		if next == offset {
			return fmt.Errorf("%s at %d: no whole batch in a %d-byte read", o.l.Dir(), offset, len(buf))
		}
		offset = next
	}
	return nil
}
