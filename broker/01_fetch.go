package broker

// Fetch (key 1), v4-v17 (Kafka 4 removed v0-v3). v13+ names topics by id. Record bytes are
// never copied: each partition's records are a file slice sent with sendfile(2), the rest of
// the response is encoded here (fetchenc.go) and written with writev. Consumers read up to the
// high watermark, replicas (replica id >= 0) up to the log end. An offset past the log end or
// before the log start is OFFSET_OUT_OF_RANGE; between the high watermark and the log end the
// answer is empty. A fetch offset inside a batch returns the whole batch. The first partition
// with data gets at least one whole batch even beyond max_bytes (KIP-74). With fewer than
// min_bytes available the request parks on the partitions' high-watermark notifications until
// min_bytes or max_wait_ms: no polling. Fetch sessions (KIP-227) are declined (session id 0),
// which every client handles by sending full fetches; an incremental fetch naming a session
// answers FETCH_SESSION_ID_NOT_FOUND.

import (
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 1, min: 4, max: 17, handle: handleFetch})
}

// maxFetchWait bounds max_wait_ms from the network.
const maxFetchWait = 5 * time.Minute

func handleFetch(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.FetchRequest)
	if req.SessionID != 0 && req.SessionEpoch > 0 {
		enc := newFetchEncoder(r.Version)
		enc.begin(0, kerr.FetchSessionIDNotFound.Code, 0, 0)
		enc.end()
		b.obs.reg.FetchError(kerr.FetchSessionIDNotFound.Code)
		return netio.Reply{Body: enc.body}
	}
	// The tally counts bytes out and errors of the response actually sent (metrics.go).
	tally := fetchTally{b: b}
	denied := b.fetchDenied(r, req) // ACL: READ on topics, CLUSTER_ACTION for replicas (authz_handlers.go)
	w := waiterPool.Get().(*engine.Waiter)
	body, total, watched := b.buildFetch(r.Version, req, &tally, denied, w)
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if total >= int64(req.MinBytes) || wait <= 0 || !watched {
		w.Stop()
		waiterPool.Put(w)
		tally.commit()
		return netio.Reply{Body: body}
	}
	body.Release()
	deadline := time.Now().Add(min(wait, maxFetchWait))
	var closing <-chan struct{}
	if r.Conn != nil {
		closing = r.Conn.Closing
	}
	return netio.Reply{Deferred: func() netio.Reply {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		defer waiterPool.Put(w)
		tally := fetchTally{b: b}
		for {
			// One channel for every partition read (engine.Waiter): no goroutine per
			// partition. The connection closing (client gone, or broker shutdown) ends the
			// wait too, so a shutdown answers parked fetches at once.
			timedOut := false
			select {
			case <-w.C:
			case <-closing:
			case <-timer.C:
				timedOut = true
			}
			w.Stop()
			if timedOut || isClosed(closing) {
				body, _, _ := b.buildFetch(r.Version, req, &tally, denied, nil)
				tally.commit()
				return netio.Reply{Body: body}
			}
			body, total, watched := b.buildFetch(r.Version, req, &tally, denied, w)
			if total >= int64(req.MinBytes) || time.Now().After(deadline) || !watched {
				w.Stop()
				tally.commit()
				return netio.Reply{Body: body}
			}
			body.Release()
			tally.reset()
		}
	}}
}

// waiterPool recycles the long polls' waiters.
var waiterPool = sync.Pool{New: func() any { return engine.NewWaiter() }}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// buildFetch reads every requested partition and encodes the response. It returns the body and
// the record bytes it holds; with w set it first registers w on each partition read (the high
// watermark for consumers, the log end for replicas), before reading so no append is missed,
// and watched says whether the caller may park on w. When a partition has an error it reports
// watched false: as in Kafka, an error is answered at once, not after max_wait_ms.
// Topics denied (ACLs; nil: none) answer TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) buildFetch(version int16, req *kmsg.FetchRequest, tally *fetchTally, denied func(string) bool, w *engine.Waiter) (body *netio.Body, total int64, watched bool) {
	enc := newFetchEncoder(version)
	enc.begin(0, 0, 0, len(req.Topics))
	iso := engine.ReadUpToHighWatermark
	replicaID := req.ReplicaID
	if version >= 15 {
		replicaID = req.ReplicaState.ID
	}
	if replicaID >= 0 {
		iso = engine.ReadUpToLogEnd
	}
	tally.replica = replicaID >= 0
	maxBytes := int64(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1 << 31
	}
	failed := false
	for i := range req.Topics {
		rt := &req.Topics[i]
		var t Topic
		var ok bool
		missing := kerr.UnknownTopicOrPartition
		if version >= 13 {
			t, ok = b.topics.getByID(rt.TopicID)
			missing = kerr.UnknownTopicID
		} else {
			t, ok = b.topics.get(rt.Topic)
		}
		enc.topic(rt.Topic, rt.TopicID, len(rt.Partitions))
		tally.setTopic(t.Name)
		unauthorized := denied != nil && (ok || version < 13) && denied(topicNameOf(rt.Topic, t.Name, version >= 13))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			p := fetchPartition{partition: rp.Partition, hw: -1, lso: -1, logStart: -1, readCommitted: req.IsolationLevel == 1}
			if unauthorized {
				p.errorCode = kerr.TopicAuthorizationFailed.Code
				failed = true
				tally.partition(p.errorCode, 0)
				enc.partition(&p)
				continue
			}
			var l *engine.Log
			var rep *replica
			if ok && rp.Partition >= 0 && rp.Partition < t.Partitions {
				rep = b.rm.get(engine.TopicPartition{Topic: t.Name, Partition: rp.Partition})
				if rep == nil {
					missing = kerr.NotLeaderForPartition
				}
			}
			var roleErr error
			if rep != nil {
				l = rep.log
				epoch := int32(-1)
				if version >= 9 {
					epoch = rp.CurrentLeaderEpoch
				}
				if replicaID >= 0 {
					roleErr = rep.followerFetched(replicaID, rp.FetchOffset, epoch)
				} else {
					roleErr = rep.checkLeader(epoch)
				}
			}
			if l == nil || roleErr != nil {
				p.errorCode = missing.Code
				if roleErr != nil {
					p.errorCode = errorCode(roleErr)
				}
				failed = true
				tally.partition(p.errorCode, 0)
				enc.partition(&p)
				continue
			}
			if w != nil {
				if replicaID >= 0 {
					w.WatchEnd(l)
				} else {
					w.WatchHighWatermark(l)
				}
				watched = true
			}
			p.hw = l.HighWatermark()
			p.lso = p.hw
			p.logStart = l.LogStartOffset()
			partMax := int64(rp.PartitionMaxBytes)
			if remaining := maxBytes - total; remaining < partMax {
				partMax = remaining
			}
			if partMax > 0 || total == 0 {
				if total == 0 && partMax <= 0 {
					partMax = 1 // the first partition with data still gets one whole batch
				}
				sl, err := b.readPartition(l, rp.FetchOffset, partMax, iso)
				if err != nil {
					p.errorCode = errorCode(err)
					failed = true
				} else {
					p.slice = sl
					total += sl.Length
				}
			}
			tally.partition(p.errorCode, p.slice.Length)
			enc.partition(&p)
		}
		enc.endTopic()
	}
	enc.end()
	return enc.body, total, watched && !failed
}

// readPartition reads from one partition: OFFSET_OUT_OF_RANGE outside [log start, log end], an
// empty slice between the bound and the log end.
func (b *Broker) readPartition(l *engine.Log, offset, maxBytes int64, iso engine.Isolation) (sl segmentSlice, err error) {
	if offset >= l.HighWatermark() && iso == engine.ReadUpToHighWatermark && offset <= l.LogEndOffset() && offset >= l.LogStartOffset() {
		return segmentSlice{}, nil
	}
	sl, err = l.Read(offset, maxBytes, iso)
	if err != nil && !errors.Is(err, kerr.OffsetOutOfRange) {
		return sl, err
	}
	return sl, err
}
