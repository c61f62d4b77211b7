package broker

// ListOffsets (key 2), v1-v10 (Kafka 4 removed v0). Timestamp -1 = latest (the high watermark,
// or with isolation_level 1, read_committed, the last stable offset; timestamp lookups are
// bounded the same way), -2 = earliest (log start), -3 = the
// record with the largest timestamp (KIP-734), -4 = earliest local (= earliest without tiered
// storage), -5 = latest tiered (none: offset -1). Other timestamps return the first record whose
// timestamp is >= the target: the batch is found through the time index, then its records are
// walked (a compressed batch is streamed through a bounded record.Reader, never inflated whole).
// A timestamp after every record answers offset -1 and timestamp -1. While a new leader's high
// watermark is below the start offset of its leader epoch, a consumer's LATEST (and a timestamp
// lookup that finds nothing below the high watermark) is OFFSET_NOT_AVAILABLE, as in Kafka
// (leaderListOffset).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/record"
)

func init() {
	register(apiDef{key: 2, min: 1, max: 10, handle: handleListOffsets})
}

func handleListOffsets(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	resp.SetVersion(r.Version)
	denied := b.topicDenied(r, acl.OpDescribe) // ACL: DESCRIBE on each topic (authz.go)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t, ok := b.topics.get(rt.Topic)
		unauthorized := denied != nil && denied(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, 0
			if unauthorized {
				sp.ErrorCode, sp.LeaderEpoch = kerr.TopicAuthorizationFailed.Code, -1
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			var rep *replica
			var roleErr error
			code := kerr.UnknownTopicOrPartition.Code
			if ok && rp.Partition >= 0 && rp.Partition < t.Partitions {
				code = kerr.NotLeaderForPartition.Code
				rep = b.rm.get(engine.TopicPartition{Topic: t.Name, Partition: rp.Partition})
				if rep != nil {
					epoch := int32(-1)
					if r.Version >= 4 {
						epoch = rp.CurrentLeaderEpoch
					}
					if roleErr = rep.checkLeader(epoch); roleErr == nil {
						sp.LeaderEpoch, _ = rep.leaderEpoch()
					} else {
						rep = nil
					}
				}
			}
			if rep == nil {
				sp.ErrorCode = code
				if roleErr != nil {
					sp.ErrorCode = errorCode(roleErr)
				}
				sp.LeaderEpoch = -1
			} else {
				off, ts, err := leaderListOffset(rep, rp.Timestamp, req.ReplicaID, req.IsolationLevel == 1, r.Version)
				sp.Offset, sp.Timestamp, sp.ErrorCode = off, ts, errorCode(err)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return netio.Reply{Response: resp}
}

// leaderListOffset answers one partition of a ListOffsets on its leader rep: timestamp ts for
// replicaID (-1: a consumer; >= 0: a follower, answered up to the log end).
// A consumer's LATEST, and a timestamp lookup that finds nothing below the high watermark, are
// OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5) while the leader's high watermark is
// below the start offset of its leader epoch (replica.offsetsAvailable), as in Kafka's
// Partition.fetchOffsetForTimestamp and ReplicaManager.fetchOffset: the answer could be below the
// high watermark an earlier leader exposed. EARLIEST, EARLIEST_LOCAL and LATEST_TIERED, and a
// follower's (or the debugging id's) request, are answered as usual.
func leaderListOffset(rep *replica, ts int64, replicaID int32, readCommitted bool, version int16) (offset, timestamp int64, err error) {
	lagging := error(nil)
	if replicaID == -1 {
		// Checked before the lookup: the high watermark only grows under one leadership, so the
		// lookup's high watermark is at least the one checked.
		lagging = rep.offsetsAvailable()
	}
	offset, timestamp, err = listOffset(rep.log, ts, replicaID >= 0, readCommitted)
	if err != nil || lagging == nil {
		return offset, timestamp, err
	}
	switch {
	case ts == -2 || ts == -4 || ts == -5:
		return offset, timestamp, nil
	case ts != -1 && offset >= 0:
		return offset, timestamp, nil // found below the high watermark
	case version < 5:
		return -1, -1, fmt.Errorf("%v: %w", lagging, kerr.LeaderNotAvailable)
	}
	return -1, -1, lagging
}

func listOffset(l *engine.Log, ts int64, replica, readCommitted bool) (offset, timestamp int64, err error) {
	hw := l.HighWatermark()
	switch {
	case replica:
		hw = l.LogEndOffset()
	case readCommitted:
		hw = l.LastStableOffset() // Kafka's fetchOffsetForTimestamp under READ_COMMITTED
	}
	switch ts {
	case -1:
		return hw, -1, nil
	case -2, -4:
		return l.LogStartOffset(), -1, nil
	case -5:
		return -1, -1, nil
	case -3:
		var best int64 = -1
		for _, s := range l.Segments() {
			best = max(best, s.MaxTimestamp())
		}
		if best < 0 {
			return -1, -1, nil
		}
		return findByTimestamp(l, best, hw)
	}
	if ts < 0 {
		return -1, -1, fmt.Errorf("timestamp %d: %w", ts, kerr.InvalidRequest)
	}
	return findByTimestamp(l, ts, hw)
}

// findByTimestamp returns the first record at or after ts below hw.
func findByTimestamp(l *engine.Log, ts, hw int64) (int64, int64, error) {
	base, batchTs, err := l.OffsetForTimestamp(ts)
	if err != nil {
		return -1, -1, err
	}
	if base < 0 || base >= hw {
		return -1, -1, nil
	}
	sl, err := l.Read(base, 1, engine.ReadUpToLogEnd)
	if err != nil || sl.Length < record.HeaderSize {
		sl.Release()
		return base, batchTs, nil
	}
	defer sl.Release()
	var hdr [record.HeaderSize]byte
	if _, err := sl.File.ReadAt(hdr[:], sl.Position); err != nil {
		return base, batchTs, nil
	}
	h, err := record.ParseHeader(hdr[:])
	if err != nil || h.Size() > sl.Length {
		return base, batchTs, nil
	}
	buf := make([]byte, h.Size())
	if _, err := sl.File.ReadAt(buf, sl.Position); err != nil {
		return base, batchTs, nil
	}
	// Kafka answers the exact record inside a compressed batch too: the records are streamed
	// through a pooled record.Reader, decompressing at most the log's bound (never the whole
	// batch at once).
	limit := record.DecompressLimit(l.Config().MaxMessageBytes)
	if off, rts, ok := record.FirstRecordAtOrAfter(buf, ts, limit); ok && off >= l.LogStartOffset() && off < hw {
		return off, rts, nil
	}
	return base, batchTs, nil
}
