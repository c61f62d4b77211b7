package broker

// Fetch (key 1), v4-v17 (Kafka 4 removed v0-v3). v13+ names topics by id. Record bytes are
// never copied: each partition's records are a file slice sent with sendfile(2), the rest of
// the response is encoded here (fetchenc.go) and written with writev. Consumers read up to the
// high watermark, replicas (replica id >= 0) up to the log end. An offset past the log end or
// before the log start is OFFSET_OUT_OF_RANGE; between the high watermark and the log end the
// answer is empty. A fetch offset inside a batch returns the whole batch. The first partition
// with data gets at least one whole batch even beyond max_bytes (KIP-74). With fewer than
// min_bytes available the request parks on the partitions' high-watermark notifications until
// min_bytes or max_wait_ms: no polling.
//
// Fetch sessions (KIP-227, fetchsession.go): a request is sessionless, full (opens a session)
// or incremental (reads every partition of its session; the response carries only those with
// something to say). The long poll watches every partition read, so new data in a partition an
// incremental response would omit still wakes it. A fetch's partitions are collected in a
// pooled fetchRun (no allocation per partition once warm), read, and then encoded.
//
// Per-partition work of a consumer's long poll (weir's choice; Kafka's DelayedFetch reads every
// partition again when it completes): when the read that parked returned no records, the
// wake-up and the expiry first compare each partition's high watermark, last stable offset and
// log start offset with what that read saw (atomic loads on the log it found). At expiry with
// nothing moved, that read's answers are sent; woken by new data, only the partitions that
// moved are read again (with their leader check) and the others keep their answers. Anything
// else (a wake-up with nothing moved, as a leadership change makes, a replica's fetch, a read
// short of min_bytes but not empty) reads every partition again. An incremental fetch starts
// from the replicas its session found last time (fetchsession.go), so an idle consumer of N
// partitions costs one read of each per fetch, with no map lookup.
//
// Fetch from the closest replica (KIP-392, racks.go): with the rack-aware replica selector, a
// leader may answer a consumer's v11+ fetch with a preferred read replica and no records; a
// follower serves consumers' v11+ fetches up to the high watermark it knows.

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
	replicaID := req.ReplicaID
	if r.Version >= 15 {
		replicaID = req.ReplicaState.ID
	}
	ctx := b.fetchSessionCache().newContext(r.Version, req, replicaID >= 0)
	if ctx.kind == fetchSessionError {
		return netio.Reply{Body: b.fetchSessionErrorBody(r.Version, ctx.err, 0)}
	}
	f := fetchRunPool.Get().(*fetchRun)
	f.b, f.version, f.req, f.ctx = b, r.Version, req, ctx
	f.replica = replicaID >= 0
	f.replicaID = replicaID
	f.clientRack = b.fetchClientRack(r.Version, req, f.replica) // racks.go (KIP-392)
	if f.clientRack != "" {
		f.selfRack = keyBrokerRack.Get(b.cfg)
		if r.Conn != nil {
			f.listener = r.Conn.Listener
		}
	}
	// ACL: READ on topics, CLUSTER_ACTION for replicas (authz_handlers.go).
	f.denied = b.fetchDenied(r, req)
	if !f.load() {
		id := ctx.session.id
		f.free()
		return netio.Reply{Body: b.fetchSessionErrorBody(r.Version, kerr.InvalidFetchSessionEpoch, id)}
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	var w *engine.Waiter
	if wait > 0 && req.MinBytes > 0 {
		w = waiterPool.Get().(*engine.Waiter)
	}
	total, watched := f.read(w)
	if w == nil || total >= int64(req.MinBytes) || !watched {
		if w != nil {
			w.Stop()
			waiterPool.Put(w)
		}
		body := f.answer()
		f.free()
		return netio.Reply{Body: body}
	}
	f.releaseSlices()
	deadline := time.Now().Add(min(wait, maxFetchWait))
	var closing <-chan struct{}
	if r.Conn != nil {
		closing = r.Conn.Closing
	}
	return netio.Reply{Deferred: func() netio.Reply {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		defer waiterPool.Put(w)
		defer f.free()
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
			// A wake-up that raced the timer is still in w.C until Stop drains it.
			signaled := len(w.C) > 0
			w.Stop()
			if timedOut && !signaled && f.unchanged() {
				// Nothing moved on any partition since the read that parked: its answers
				// stand, and the partitions are not read again (an idle consumer of many
				// partitions pays one read per fetch, not two).
				return netio.Reply{Body: f.answer()}
			}
			if timedOut || isClosed(closing) {
				f.read(nil)
				return netio.Reply{Body: f.answer()}
			}
			if total, moved := f.readMoved(); moved > 0 {
				if total >= int64(req.MinBytes) || time.Now().After(deadline) {
					return netio.Reply{Body: f.answer()}
				}
				f.releaseSlices()
			}
			total, watched := f.read(w)
			if total >= int64(req.MinBytes) || time.Now().After(deadline) || !watched {
				w.Stop()
				return netio.Reply{Body: f.answer()}
			}
			f.releaseSlices()
		}
	}}
}

// fetchSessionCache returns the broker's fetch sessions, sized on first use.
func (b *Broker) fetchSessionCache() *fetchSessionCache {
	c := &b.fetchSessions
	c.once.Do(func() { c.init(int64(keyMaxIncrementalFetchSessionCacheSlots.Get(b.cfg))) })
	return c
}

// fetchSessionErrorBody is a response with a top-level error and no partitions (Kafka's
// SessionErrorContext; INVALID_FETCH_SESSION_EPOCH found when answering names the session).
func (b *Broker) fetchSessionErrorBody(version int16, err *kerr.Error, sessionID int32) *netio.Body {
	enc := newFetchEncoder(version)
	enc.begin(0, err.Code, sessionID, 0)
	enc.end()
	b.obs.reg.FetchError(err.Code)
	return enc.body
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

// fetchItem is one partition of a Fetch: what is asked (from the request, or from the session
// for an incremental fetch) and, once read, the answer.
type fetchItem struct {
	name        string   // topic name as requested (v<13)
	id          [16]byte // topic id as requested (v13+)
	tname       string   // the topic's name, once resolved ("" unknown)
	partition   int32
	maxBytes    int32
	fetchOffset int64
	leaderEpoch int32
	include     bool // an incremental response carries it
	p           fetchPartition
	// log is the partition's log when the last read found it without error (consumers only;
	// fetchRun.unchanged checks it again), else nil.
	log *engine.Log
	// rep and repLog are the partition's replica and its log, looked up at the replica
	// manager's gen repGen; leaderOK: it passed the leader check for the client's epoch okEpoch
	// at that gen (an incremental fetch starts from its session's; nil: not looked up).
	rep      *replica
	repLog   *engine.Log
	repGen   uint64
	okEpoch  int32
	leaderOK bool
}

// fetchRun is one Fetch request being served: its partitions and their answers. Pooled; one
// goroutine at a time (the handler, then the long poll's writer goroutine).
type fetchRun struct {
	b         *Broker
	version   int16
	req       *kmsg.FetchRequest
	ctx       fetchContext
	replica   bool
	replicaID int32
	denied    func(string) bool
	items     []fetchItem
	enc       fetchEncoder
	// readBytes is what the last read returned; a long poll parks only on a read short of
	// min_bytes.
	readBytes int64

	// clientRack is the consumer's rack when a preferred read replica may be chosen (racks.go),
	// selfRack this broker's and listener the request's listener; "" otherwise.
	clientRack, selfRack, listener string
}

var fetchRunPool = sync.Pool{New: func() any { return new(fetchRun) }}

// maxPooledFetchItems bounds what a pooled fetchRun keeps between requests.
const maxPooledFetchItems = 1 << 14

// free releases what was not sent, ends the session's fetch and returns f to the pool.
func (f *fetchRun) free() {
	f.releaseSlices()
	if s := f.ctx.session; s != nil {
		s.finish()
	}
	clear(f.items)
	items := f.items[:0]
	if cap(items) > maxPooledFetchItems {
		items = nil
	}
	*f = fetchRun{items: items}
	fetchRunPool.Put(f)
}

// releaseSlices drops the record slices read by a pass whose response is not sent.
func (f *fetchRun) releaseSlices() {
	for i := range f.items {
		f.items[i].p.slice.Release()
	}
}

// load collects the partitions to read: the request's, or the session's for an incremental
// fetch (false: the session moved to another epoch meanwhile).
func (f *fetchRun) load() bool {
	if f.ctx.kind == fetchIncremental {
		var ok bool
		f.items, ok = f.ctx.session.snapshot(f.ctx.epoch, f.items[:0])
		return ok
	}
	for i := range f.req.Topics {
		rt := &f.req.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			it := fetchItem{id: rt.TopicID, partition: rp.Partition, maxBytes: rp.PartitionMaxBytes,
				fetchOffset: rp.FetchOffset, leaderEpoch: rp.CurrentLeaderEpoch}
			if f.version < 13 {
				it.name, it.id = rt.Topic, [16]byte{}
			}
			f.items = append(f.items, it)
		}
	}
	return true
}

// read reads every partition of the fetch. It returns the record bytes read; with w set it
// first registers w on each partition read (the high watermark for consumers, the log end for
// replicas), before reading so no append is missed, and watched says whether the caller may
// park on w. When a partition has an error it reports watched false: as in Kafka, an error is
// answered at once, not after max_wait_ms. Denied topics answer TOPIC_AUTHORIZATION_FAILED.
func (f *fetchRun) read(w *engine.Waiter) (total int64, watched bool) {
	b, version := f.b, f.version
	readCommitted := f.req.IsolationLevel == 1
	iso := engine.ReadUpToHighWatermark
	switch {
	case f.replica:
		iso = engine.ReadUpToLogEnd
	case readCommitted:
		iso = engine.ReadCommitted
	}
	maxBytes := int64(f.req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1 << 31
	}
	failed := false
	// Loaded before any lookup: a replica looked up after a change that this gen misses is
	// looked up again next time, never kept past a change.
	gen := b.rm.gen.Load()
	var (
		t            Topic
		ok           bool
		unauthorized bool
		missing      *kerr.Error
		zstdRefused  bool
	)
	for i := range f.items {
		it := &f.items[i]
		// Resolve the topic once per run of partitions of the same topic.
		if i == 0 || it.id != f.items[i-1].id || it.name != f.items[i-1].name {
			missing = kerr.UnknownTopicOrPartition
			if version >= 13 {
				t, ok = b.topics.getByID(it.id)
				missing = kerr.UnknownTopicID
			} else {
				t, ok = b.topics.get(it.name)
			}
			unauthorized = f.denied != nil && (ok || version < 13) && f.denied(topicNameOf(it.name, t.Name, version >= 13))
			// A consumer below Fetch v10 cannot read zstd (KIP-110): Kafka answers
			// UNSUPPORTED_COMPRESSION_TYPE for a topic whose compression.type is zstd.
			zstdRefused = version < 10 && !f.replica && ok && keyCompressionType.Topic(b.cfg, t.Configs) == "zstd"
		}
		it.tname = t.Name
		if !ok {
			it.tname = ""
		}
		p := &it.p
		*p = fetchPartition{partition: it.partition, hw: -1, lso: -1, logStart: -1, readCommitted: readCommitted}
		it.log = nil
		if unauthorized {
			p.errorCode = kerr.TopicAuthorizationFailed.Code
			failed = true
			continue
		}
		if zstdRefused {
			p.errorCode = kerr.UnsupportedCompressionType.Code
			failed = true
			continue
		}
		var l *engine.Log
		var rep *replica
		partMissing := missing
		if ok && it.partition >= 0 && it.partition < t.Partitions {
			// A session partition names one topic (by id or by name) and one partition, so an
			// unchanged gen means get would return the same replica.
			if it.rep != nil && it.repGen == gen {
				rep = it.rep
			} else {
				rep = b.rm.get(engine.TopicPartition{Topic: t.Name, Partition: it.partition})
				it.rep, it.repLog, it.repGen, it.leaderOK = rep, nil, gen, false
				if rep != nil {
					it.repLog = rep.log
				}
			}
			if rep == nil {
				partMissing = kerr.NotLeaderForPartition
			}
		}
		var roleErr error
		if rep != nil {
			l = it.repLog
			epoch := int32(-1)
			if version >= 9 {
				epoch = it.leaderEpoch
			}
			switch {
			case f.replica:
				roleErr = rep.followerFetched(f.replicaID, it.fetchOffset, epoch)
			case it.leaderOK && it.okEpoch == epoch:
				// Checked at this gen for this epoch: no role or epoch change since.
			default:
				// A consumer's Fetch v11+ may read from a follower (KIP-392, racks.go); only a
				// leader's check is kept for the session.
				var leading bool
				leading, roleErr = rep.checkRead(epoch, version >= 11)
				it.leaderOK, it.okEpoch = roleErr == nil && leading, epoch
			}
		}
		if l == nil || roleErr != nil {
			p.errorCode = partMissing.Code
			if roleErr != nil {
				p.errorCode = errorCode(roleErr)
			}
			failed = true
			continue
		}
		if w != nil {
			if f.replica {
				w.WatchEnd(l)
			} else {
				w.WatchHighWatermark(l)
			}
			watched = true
		}
		p.hw = l.HighWatermark()
		p.lso = l.LastStableOffset() // reported at both isolation levels, as Kafka does
		p.logStart = l.LogStartOffset()
		if f.clientRack != "" {
			if id := rep.preferredReadReplica(b.ctl.Image(), f.selfRack, f.clientRack, it.fetchOffset, f.listener); id >= 0 {
				// The consumer is sent to a follower in its rack: no records, answered at once.
				p.preferredReadReplica, p.preferred = id, true
				failed = true
				continue
			}
		}
		if !f.replica {
			it.log = l
		}
		if !f.readRecords(it, l, iso, maxBytes, &total) {
			failed = true
		}
		if p.errorCode != 0 {
			it.log = nil
		}
	}
	f.readBytes = total
	return total, watched && !failed
}

// readRecords reads one partition's records into it.p (its offsets already set) within what is
// left of the request's max bytes, and adds them to *total; false when the read failed (the
// error is in it.p). The first partition with data gets at least one whole batch (KIP-74).
func (f *fetchRun) readRecords(it *fetchItem, l *engine.Log, iso engine.Isolation, maxBytes int64, total *int64) bool {
	p := &it.p
	partMax := int64(it.maxBytes)
	if remaining := maxBytes - *total; remaining < partMax {
		partMax = remaining
	}
	if partMax <= 0 && *total > 0 {
		return true
	}
	if partMax <= 0 {
		partMax = 1 // the first partition with data still gets one whole batch
	}
	sl, err := f.b.readPartition(l, it.fetchOffset, partMax, iso)
	if err != nil {
		p.errorCode = errorCode(err)
		return false
	}
	p.slice = sl
	*total += sl.Length
	if iso == engine.ReadCommitted && sl.Length > 0 {
		// The aborted transactions overlapping what is returned: from the fetch offset up to
		// the last stable offset (Kafka bounds it by the end of the records read; a longer
		// list is harmless to clients).
		if p.aborted, err = l.AbortedTransactions(nil, it.fetchOffset, l.LastStableOffset()); err != nil {
			p.slice.Release()
			p.slice, p.aborted = segmentSlice{}, nil
			*total -= sl.Length
			p.errorCode = errorCode(err)
			return false
		}
	}
	return true
}

// readMoved is the long poll's wake-up for a consumer whose last read returned no records: it
// reads again only the partitions whose high watermark, last stable offset or log start moved
// since (with their leader check), and keeps the others' answers, which a read would repeat.
// It returns the record bytes read and how many partitions moved; none moved (the wake-up came
// from a leadership change, say), or a replica's fetch, and the caller reads everything.
// An idle consumer of many partitions woken by one record pays three atomic loads per partition
// and one read, not a lookup, a leader check, a watch and a read for each.
func (f *fetchRun) readMoved() (total int64, moved int) {
	if f.replica || f.readBytes != 0 {
		return 0, 0
	}
	for i := range f.items {
		if f.items[i].log == nil {
			return 0, 0
		}
	}
	iso := engine.ReadUpToHighWatermark
	if f.req.IsolationLevel == 1 {
		iso = engine.ReadCommitted
	}
	maxBytes := int64(f.req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1 << 31
	}
	for i := range f.items {
		it := &f.items[i]
		l, p := it.log, &it.p
		hw, lso, logStart := l.HighWatermark(), l.LastStableOffset(), l.LogStartOffset()
		if hw == p.hw && lso == p.lso && logStart == p.logStart {
			continue
		}
		moved++
		p.hw, p.lso, p.logStart = hw, lso, logStart
		epoch := int32(-1)
		if f.version >= 9 {
			epoch = it.leaderEpoch
		}
		if _, err := it.rep.checkRead(epoch, f.version >= 11); err != nil {
			*p = fetchPartition{partition: it.partition, errorCode: errorCode(err), hw: -1, lso: -1, logStart: -1,
				readCommitted: p.readCommitted}
			it.log = nil
			continue
		}
		if !f.readRecords(it, l, iso, maxBytes, &total) {
			it.log = nil
		}
	}
	f.readBytes = total
	return total, moved
}

// unchanged reports whether a consumer's fetch whose last read returned no records would read
// the same answer again: every partition still has the high watermark, last stable offset and
// log start offset that read saw (a record, a truncation, a transaction marker, retention or a
// leadership change moves one of them or wakes the long poll), so the long poll's expiry can
// answer from that read. Replicas always read again: a follower's read also records its fetch
// position for the ISR. It costs three atomic loads per partition, against a lookup, a leader
// check and a read for each.
func (f *fetchRun) unchanged() bool {
	if f.replica || f.readBytes != 0 {
		return false
	}
	for i := range f.items {
		it := &f.items[i]
		l := it.log
		if l == nil {
			return false
		}
		p := &it.p
		if l.HighWatermark() != p.hw || l.LastStableOffset() != p.lso || l.LogStartOffset() != p.logStart {
			return false
		}
	}
	return true
}

// answer encodes the response of the last read: every partition for a sessionless or full
// fetch (a full fetch first creates its session), those with something to say for an
// incremental one. The body takes the record slices it sends.
func (f *fetchRun) answer() *netio.Body {
	b := f.b
	sessions := &b.fetchSessions
	tally := fetchTally{b: b, replica: f.replica}
	defer tally.commit()
	var sessionID int32
	switch f.ctx.kind {
	case fetchFull:
		sessionID = sessions.createSession(&f.ctx, f.items)
	case fetchIncremental:
		s := f.ctx.session
		if !s.respond(f.ctx.epoch, f.items) {
			return b.fetchSessionErrorBody(f.version, kerr.InvalidFetchSessionEpoch, s.id)
		}
		return f.encodeIncremental(s.id, &tally)
	}
	enc := &f.enc
	enc.init(f.version)
	enc.begin(0, 0, sessionID, len(f.req.Topics))
	k := 0
	for i := range f.req.Topics {
		rt := &f.req.Topics[i]
		n := len(rt.Partitions)
		enc.topic(rt.Topic, rt.TopicID, n)
		if n > 0 {
			tally.setTopic(f.items[k].tname)
		}
		for range n {
			p := &f.items[k].p
			tally.partition(p.errorCode, p.slice.Length)
			enc.partition(p)
			p.slice = segmentSlice{} // the body owns it
			k++
		}
		enc.endTopic()
	}
	enc.end()
	return enc.body
}

// encodeIncremental encodes the included partitions, one topic entry per run of partitions of
// the same topic (a topic may appear more than once, as in Kafka's responses).
func (f *fetchRun) encodeIncremental(sessionID int32, tally *fetchTally) *netio.Body {
	items := f.items
	same := func(a, b *fetchItem) bool { return a.id == b.id && a.name == b.name }
	topics := 0
	var last *fetchItem
	for i := range items {
		if !items[i].include {
			continue
		}
		if last == nil || !same(last, &items[i]) {
			topics++
		}
		last = &items[i]
	}
	enc := &f.enc
	enc.init(f.version)
	enc.begin(0, 0, sessionID, topics)
	for i := 0; i < len(items); {
		if !items[i].include {
			i++
			continue
		}
		first := &items[i]
		n, end := 0, i
		for ; end < len(items); end++ {
			if !items[end].include {
				continue
			}
			if !same(first, &items[end]) {
				break
			}
			n++
		}
		enc.topic(first.name, first.id, n)
		tally.setTopic(first.tname)
		for ; i < end; i++ {
			if !items[i].include {
				continue
			}
			p := &items[i].p
			tally.partition(p.errorCode, p.slice.Length)
			enc.partition(p)
			p.slice = segmentSlice{}
		}
		enc.endTopic()
	}
	enc.end()
	return enc.body
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
