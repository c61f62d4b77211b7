package broker

// The share-partition leader (KIP-932) as ShareFetch (78_share_fetch.go) and ShareAcknowledge
// (79_share_acknowledge.go) use it: the share partitions this broker leads (package sharepart),
// the share sessions, the limits from the broker's and the group's configs, and the response
// encoder that sends record bytes as file slices.
//
// A fetch of a share partition reads the log from the partition's next fetch offset (its first
// available record, else the end of its in-flight window) up to the high watermark, walks the
// batch headers of the bytes read (one pread of 61 bytes per batch, no allocation), acquires
// the acquirable records of those batches for the member and sends the batches that hold
// acquired records with the acquired ranges; the client skips the rest. A share partition is
// loaded from the persister on first use at the replica's leader epoch and dropped when this
// broker no longer leads the partition.

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/sharepart"
	"github.com/weir-mq/weir/sharestate"
)

// shareLeaderState is the broker's share-partition leader.
type shareLeaderState struct {
	once      sync.Once
	persister sharestate.Persister
	parts     *sharepart.Manager
	sessions  *sharepart.Sessions
	// lastSweep is when sessions of closed connections were last dropped (unix nanoseconds).
	lastSweep atomic.Int64

	// availMu guards avail: a channel closed (and replaced) whenever records of some share
	// partition become available again (released, lock expired), to wake parked fetches.
	availMu sync.Mutex
	avail   chan struct{}
}

// maxSharePartitions bounds the share partitions held (groups x partitions led).
const maxSharePartitions = 1 << 17

// maxShareBatches bounds the log batches one partition's read walks.
const maxShareBatches = 10000

// shareDefaultMaxRecords is the record limit of a ShareFetch without one (v0), Kafka's
// max.poll.records default.
const shareDefaultMaxRecords = 500

// shares returns the share-partition leader, created on first use.
func (b *Broker) shares() *shareLeaderState {
	s := &b.shareLeader
	s.once.Do(func() {
		s.persister = b.newSharePersister()
		s.parts = sharepart.NewManager(maxSharePartitions)
		s.sessions = sharepart.NewSessions(keyShareMaxSessions.Get(b.cfg))
		s.avail = make(chan struct{})
	})
	return s
}

// closeShares drops the share partitions and stops their lock timers (Shutdown, once no request
// is served any more).
func (b *Broker) closeShares() {
	b.shares().parts.Close()
}

// availChan returns the channel the next availability closes.
func (s *shareLeaderState) availChan() <-chan struct{} {
	s.availMu.Lock()
	defer s.availMu.Unlock()
	return s.avail
}

// notifyAvailable wakes the fetches parked for available records.
func (s *shareLeaderState) notifyAvailable() {
	s.availMu.Lock()
	close(s.avail)
	s.avail = make(chan struct{})
	s.availMu.Unlock()
}

// shareConfig is group's share-partition limits: the broker's keys, the group's
// share.record.lock.duration.ms over group.share.record.lock.duration.ms.
func (b *Broker) shareConfig(group string) sharepart.Config {
	c := sharepart.Config{
		LockDuration:  keyShareRecordLockDuration.Get(b.cfg),
		DeliveryLimit: int16(keyShareDeliveryCountLimit.Get(b.cfg)),
		MaxInFlight:   int64(keySharePartitionMaxRecordLocks.Get(b.cfg)),
	}
	if v, ok := b.groupConfigValue(group, "share.record.lock.duration.ms"); ok {
		if ms, err := strconv.Atoi(v); err == nil && ms > 0 {
			c.LockDuration = time.Duration(ms) * time.Millisecond
		}
	}
	return c
}

// shareStartOffset resolves the start offset of a share partition with no state from the
// group's share.auto.offset.reset: latest (the default: the high watermark), earliest (the log
// start) or by_duration:<ISO-8601 duration> (the first offset at or after now minus it; the
// high watermark when none).
func (b *Broker) shareStartOffset(group string, l *engine.Log) (int64, error) {
	v, ok := b.groupConfigValue(group, "share.auto.offset.reset")
	if !ok {
		v = "latest"
	}
	switch {
	case v == "latest":
		return l.HighWatermark(), nil
	case v == "earliest":
		return l.LogStartOffset(), nil
	case strings.HasPrefix(v, "by_duration:"):
		d, err := parseISODuration(strings.TrimPrefix(v, "by_duration:"))
		if err != nil {
			return 0, fmt.Errorf("share.auto.offset.reset %q of group %s: %w", v, group, kerr.InvalidConfig)
		}
		off, _, err := l.OffsetForTimestamp(clock.Now().Add(-d).UnixMilli())
		if err != nil {
			return 0, err
		}
		if off < 0 {
			return l.HighWatermark(), nil
		}
		return off, nil
	}
	return 0, fmt.Errorf("share.auto.offset.reset %q of group %s: %w", v, group, kerr.InvalidConfig)
}

// parseISODuration parses the ISO-8601 durations Java's Duration.parse accepts in the
// PnDTnHnMn.nS form (days, hours, minutes, seconds; no sign).
func parseISODuration(s string) (time.Duration, error) {
	if len(s) < 3 || (s[0] != 'P' && s[0] != 'p') {
		return 0, fmt.Errorf("duration %q does not start with P", s)
	}
	s = s[1:]
	var d time.Duration
	inTime := false
	for len(s) > 0 {
		if s[0] == 'T' || s[0] == 't' {
			inTime = true
			s = s[1:]
			continue
		}
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 || i == len(s) {
			return 0, fmt.Errorf("duration part %q", s)
		}
		n, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return 0, err
		}
		var unit time.Duration
		switch u := s[i] | 0x20; {
		case u == 'd' && !inTime:
			unit = 24 * time.Hour
		case u == 'h' && inTime:
			unit = time.Hour
		case u == 'm' && inTime:
			unit = time.Minute
		case u == 's' && inTime:
			unit = time.Second
		default:
			return 0, fmt.Errorf("duration unit %q", s[i])
		}
		if n*float64(unit) > float64(1<<62) {
			return 0, fmt.Errorf("duration %q too long", s)
		}
		d += time.Duration(n * float64(unit))
		s = s[i+1:]
	}
	return d, nil
}

// shareReadCommitted reports whether group reads committed records only (the group config
// share.isolation.level read_committed; read_uncommitted by default).
func (b *Broker) shareReadCommitted(group string) bool {
	v, ok := b.groupConfigValue(group, "share.isolation.level")
	return ok && v == "read_committed"
}

// shareTarget is one share partition a request names, resolved.
type shareTarget struct {
	topic Topic
	rep   *replica
	log   *engine.Log
	sp    *sharepart.Partition
}

// sharePartition resolves (topic id, partition) to the share partition of group this broker
// leads, loading it on first use. The error is the partition's error code (UNKNOWN_TOPIC_ID,
// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, a persister's).
func (b *Broker) sharePartition(ctx context.Context, group string, topicID [16]byte, partition int32) (shareTarget, error) {
	var tg shareTarget
	t, ok := b.topics.getByID(topicID)
	if !ok {
		return tg, kerr.UnknownTopicID
	}
	tg.topic = t
	if partition < 0 || partition >= t.Partitions {
		return tg, kerr.UnknownTopicOrPartition
	}
	s := b.shares()
	rep := b.rm.get(engine.TopicPartition{Topic: t.Name, Partition: partition})
	if rep == nil {
		s.dropShareParts(t.Name, topicID, partition)
		return tg, kerr.NotLeaderForPartition
	}
	if err := rep.checkLeader(-1); err != nil {
		s.dropShareParts(t.Name, topicID, partition)
		return tg, err
	}
	epoch, leading := rep.leaderEpoch()
	if !leading {
		s.dropShareParts(t.Name, topicID, partition)
		return tg, kerr.NotLeaderForPartition
	}
	tg.rep, tg.log = rep, rep.log
	cfg := b.shareConfig(group)
	l := rep.log
	sp, err := s.parts.Get(ctx, sharestate.Key{Group: group, TopicID: topicID, Partition: partition}, epoch, sharepart.Options{
		Persister:    s.persister,
		Config:       cfg,
		ResolveStart: func() (int64, error) { return b.shareStartOffset(group, l) },
		OnAvailable:  s.notifyAvailable,
	})
	if err != nil {
		slog.Warn("share partition unavailable", "group", group, "topic", t.Name, "partition", partition, "err", err)
		return tg, err
	}
	sp.SetConfig(cfg)
	tg.sp = sp
	return tg, nil
}

// dropShareParts drops the share partitions of (topic, partition): this broker does not lead
// it (any more).
func (s *shareLeaderState) dropShareParts(topic string, topicID [16]byte, partition int32) {
	if n := s.parts.DropPartition(topicID, partition); n > 0 {
		slog.Info("share partitions dropped: not the partition's leader", "topic", topic, "partition", partition, "share_partitions", n)
	}
}

// sweepShareSessions drops, at most once a second, the share sessions whose connection closed
// and releases the records their members hold, as Kafka does when a share consumer's
// connection closes.
func (b *Broker) sweepShareSessions(ctx context.Context) {
	s := b.shares()
	now := clock.Nanotime()
	last := s.lastSweep.Load()
	if now-last < int64(time.Second) || !s.lastSweep.CompareAndSwap(last, now) {
		return
	}
	for _, ev := range s.sessions.DropClosed() {
		b.releaseShareSession(ctx, ev.Key, ev.Parts)
	}
}

// releaseShareSession releases the records member holds on the session's partitions (a closed
// session).
func (b *Broker) releaseShareSession(ctx context.Context, k sharepart.SessionKey, parts []sharepart.TopicPartition) {
	s := b.shares()
	for _, tp := range parts {
		sp := s.parts.Peek(sharestate.Key{Group: k.Group, TopicID: tp.TopicID, Partition: tp.Partition})
		if sp == nil {
			continue
		}
		if err := sp.ReleaseMember(ctx, k.Member); err != nil {
			slog.Warn("share session close: release records", "group", k.Group, "member", k.Member, "partition", tp.Partition, "err", err)
		}
	}
}

// shareLeader returns the current leader of topic's partition from the metadata image and its
// endpoint on listener (NOT_LEADER_OR_FOLLOWER answers carry both).
func (b *Broker) shareLeaderOf(topic string, partition int32, listener string) (leader, epoch int32, ep shareEndpoint, ok bool) {
	img := b.ctl.Image()
	t := img.Topics[topic]
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return -1, -1, ep, false
	}
	pi := t.Partitions[partition]
	if pi.Leader < 0 {
		return -1, pi.LeaderEpoch, ep, false
	}
	e, found := b.brokerAddr(img, pi.Leader, listener)
	if !found {
		return pi.Leader, pi.LeaderEpoch, ep, false
	}
	ep = shareEndpoint{id: pi.Leader, host: e.Host, port: e.Port}
	if bi, ok := img.Brokers[pi.Leader]; ok && bi.Rack != "" {
		ep.rack = bi.Rack
	}
	return pi.Leader, pi.LeaderEpoch, ep, true
}

// shareEndpoint is a NodeEndpoints entry.
type shareEndpoint struct {
	id   int32
	host string
	port int32
	rack string
}

// shareBatches walks the batch headers of sl (sorted log batches) into dst: each batch's range
// and its position in the slice; control batches and batches of the aborted transactions
// (read_committed) are marked Skip. At most maxShareBatches; a header that cannot be read ends
// the walk.
func shareBatches(sl *segmentSlice, dst []sharepart.Range, pos []int64, aborted []engine.AbortedTxn) ([]sharepart.Range, []int64) {
	var buf [record.HeaderSize]byte
	off := int64(0)
	for off+record.HeaderSize <= sl.Length && len(dst) < maxShareBatches {
		if _, err := sl.File.ReadAt(buf[:], sl.Position+off); err != nil {
			break
		}
		h, err := record.ParseHeader(buf[:])
		if err != nil || h.BatchLength < record.HeaderSize-record.LogOverhead {
			break
		}
		skip := h.IsControl()
		if !skip && h.IsTransactional() {
			for i := range aborted {
				if a := &aborted[i]; a.ProducerID == h.ProducerID && h.BaseOffset >= a.FirstOffset && h.BaseOffset <= a.LastOffset {
					skip = true
					break
				}
			}
		}
		dst = append(dst, sharepart.Range{First: h.BaseOffset, Last: h.LastOffset(), Skip: skip})
		pos = append(pos, off)
		off += h.Size()
	}
	// The end of the last whole batch.
	pos = append(pos, min(off, sl.Length))
	return dst, pos
}

// trimShareSlice narrows sl to the batches holding acquired offsets [first, last].
func trimShareSlice(sl *segmentSlice, batches []sharepart.Range, pos []int64, first, last int64) {
	i := 0
	for i < len(batches) && batches[i].Last < first {
		i++
	}
	j := len(batches) - 1
	for j > i && batches[j].First > last {
		j--
	}
	if i >= len(batches) {
		sl.Length = 0
		return
	}
	start, end := pos[i], pos[j+1]
	sl.Position += start
	sl.Length = end - start
}

// shareEncoder writes a ShareFetch response (v1+, flexible) into a netio.Body, record bytes as
// file slices.
type shareEncoder struct {
	version int16
	body    *netio.Body
	b       []byte
}

func (e *shareEncoder) init(version int16) {
	e.version = version
	e.body = netio.NewBody(true)
	e.b = e.body.Bytes()
}

// begin writes the top-level fields before the topics.
func (e *shareEncoder) begin(errorCode int16, lockMs int32, topics int) {
	e.b = kbin.AppendInt32(e.b, 0) // throttle
	e.b = kbin.AppendInt16(e.b, errorCode)
	e.b = append(e.b, 0) // error message: null
	if e.version >= 1 {
		e.b = kbin.AppendInt32(e.b, lockMs)
	}
	e.b = kbin.AppendCompactArrayLen(e.b, topics)
}

func (e *shareEncoder) topic(id [16]byte, partitions int) {
	e.b = kbin.AppendUuid(e.b, id)
	e.b = kbin.AppendCompactArrayLen(e.b, partitions)
}

func (e *shareEncoder) endTopic() { e.b = append(e.b, 0) }

// partition writes one partition; the body takes sl.
func (e *shareEncoder) partition(p *sharePartResult) {
	e.b = kbin.AppendInt32(e.b, p.partition)
	e.b = kbin.AppendInt16(e.b, p.errorCode)
	e.b = append(e.b, 0) // error message: null
	e.b = kbin.AppendInt16(e.b, p.ackErrorCode)
	e.b = append(e.b, 0) // acknowledge error message: null
	e.b = kbin.AppendInt32(e.b, p.leaderID)
	e.b = kbin.AppendInt32(e.b, p.leaderEpoch)
	e.b = append(e.b, 0) // current leader tags
	n := p.slice.Length
	if n > 0 {
		e.b = binary.AppendUvarint(e.b, uint64(n)+1)
		e.body.SetBytes(e.b)
		e.body.AppendSlice(p.slice)
		e.b = e.body.Bytes()
	} else {
		p.slice.Release()
		// Records is not nullable in Kafka's schema (the Java client fails the whole
		// response on a null): no records are an empty record set, compact length 0+1.
		e.b = append(e.b, 1)
	}
	p.slice = segmentSlice{}
	e.b = kbin.AppendCompactArrayLen(e.b, len(p.acquired))
	for _, a := range p.acquired {
		e.b = kbin.AppendInt64(e.b, a.First)
		e.b = kbin.AppendInt64(e.b, a.Last)
		e.b = kbin.AppendInt16(e.b, a.DeliveryCount)
		e.b = append(e.b, 0)
	}
	e.b = append(e.b, 0) // partition tags
}

// end writes the node endpoints and the top-level tags.
func (e *shareEncoder) end(eps []shareEndpoint) {
	e.b = kbin.AppendCompactArrayLen(e.b, len(eps))
	for _, ep := range eps {
		e.b = kbin.AppendInt32(e.b, ep.id)
		e.b = kbin.AppendCompactString(e.b, ep.host)
		e.b = kbin.AppendInt32(e.b, ep.port)
		if ep.rack == "" {
			e.b = append(e.b, 0)
		} else {
			e.b = kbin.AppendCompactString(e.b, ep.rack)
		}
		e.b = append(e.b, 0)
	}
	e.b = append(e.b, 0)
	e.body.SetBytes(e.b)
}

// sharePartResult is one partition of a ShareFetch answer.
type sharePartResult struct {
	tp           sharepart.TopicPartition
	partition    int32
	errorCode    int16
	ackErrorCode int16
	hasAck       bool
	leaderID     int32
	leaderEpoch  int32
	slice        segmentSlice
	acquired     []sharepart.AcquiredRange
	bytes        int64
}
