package broker

// Incremental fetch sessions (KIP-227), as Kafka 4's FetchSession / FetchSessionCache /
// FetchManager do.
//
// A client opens a session with a full fetch (session id 0, epoch 0): the response names a new
// session id, and the broker remembers every partition of the request with its fetch
// parameters (offset, max bytes, leader epoch) and what it last answered for it (high
// watermark, last stable offset, log start offset). The client then sends incremental fetches
// (that id, epochs 1, 2, ...) naming only the partitions whose parameters changed, plus the
// partitions to forget; the broker reads every partition of the session and answers only those
// with something to say: records, a changed high watermark, last stable offset or log start
// offset, or an error (Kafka's CachedPartition.maybeUpdateResponseData). A partition that
// returned records moves to the end of the session's order, so a session whose first partitions
// always have data does not starve the others under max_bytes (as Kafka does).
//
// Request metadata, as Kafka's FetchMetadata:
//   - epoch -1, id 0: sessionless (librdkafka, sarama, kafka-go); with an
//     id, that session is closed first.
//   - epoch 0: full fetch; a session named by id is closed, a new one is created when the
//     response is sent (id 0 in the response when none could be made).
//   - any other epoch: incremental. An unknown id answers FETCH_SESSION_ID_NOT_FOUND, a wrong
//     epoch INVALID_FETCH_SESSION_EPOCH, a version on the other side of v13 from the session's
//     (topic ids vs names, KIP-516) FETCH_SESSION_TOPIC_ID_ERROR, and an incremental fetch
//     while another on the same session is unanswered INVALID_FETCH_SESSION_EPOCH (below);
//     these errors name session id 0 and no partitions. An incremental fetch that leaves the
//     session empty closes it and is answered sessionless. As in Kafka, a response finds the
//     session still at the epoch its request moved it to, or answers
//     INVALID_FETCH_SESSION_EPOCH with the session's id.
//
// The cache holds at most max.incremental.fetch.session.cache.slots sessions (1000). A new
// session takes a free slot, or else evicts, as Kafka's tryEvict: first the least recently used
// session if it was unused for 120 s (Kafka's internal min.incremental.fetch.session.eviction.ms),
// else the least valuable evictable session, ordered by (privileged, partitions, id), if the new
// one is worth more. Sessions of followers (replica id >= 0) are privileged; a session becomes
// evictable by followers when it is a consumer's or older than 120 s, and by everyone when older
// than 120 s (membership as of its last use, as in Kafka). The least-valuable choice scans the
// sessions (O(slots)) and runs only when the cache is full and nothing is stale. Kafka splits
// its cache into shards (KAFKA-9401), each with its share of the slots and evicting within
// itself; weir keeps one cache under one mutex, held to insert, find, touch and evict sessions
// and, as Kafka does, while an incremental request is applied to its session. A new session's
// partitions are indexed before the lock is taken to insert it (room is made first, so a full
// fetch the cache cannot take builds nothing): a full fetch of thousands of partitions does not
// hold every other fetch up.
//
// Memory bounds (weir's choice: Kafka bounds sessions only by request size). Every partition of
// a session is attacker-chosen, so a session holds at most maxFetchSessionPartitions partitions
// and all sessions together at most maxFetchSessionCachedPartitions; a cached partition costs
// about 240 bytes plus its topic name (v<13 only; at most 249 bytes, Kafka's longest topic
// name). A full fetch over the bounds gets no session (answered with session id 0, as when the
// cache is full: the client keeps sending full fetches); an incremental fetch that would grow a
// session past them closes the session and answers FETCH_SESSION_ID_NOT_FOUND, upon which
// clients send a full fetch. Worst case: 2^18 partitions * (240 + 249) bytes, about 128 MB.
// A session serves one fetch at a time (clients never send more; a second incremental fetch
// while one is unanswered, e.g. pipelined behind a long poll, answers INVALID_FETCH_SESSION_EPOCH
// and leaves the session's epoch as it was), so the copies of sessions' partitions that
// in-flight fetches hold (about 160 bytes a partition, plus 16 bytes of long-poll watch) are
// bounded by the same 2^18 partitions.
//
// Locking, as in Kafka: fetchSessionCache.mu guards the cache (sessions, the LRU list, the
// partition count, each session's place in them); fetchSession.mu guards one session's epoch
// and partitions. The cache lock may be taken before a session lock, never after. No lock is
// held while partitions are read: a fetch copies its session's partitions out under the session
// lock, reads without it, and takes it again to record what it answered.
//
// Each session partition keeps the replica the last fetch found for it and whether it passed
// the leader check, with the replica manager's generation at that time (replicaManager.gen,
// bumped when a replica joins or leaves, or changes role or leader epoch); a fetch reuses them
// while the generation is unchanged (and the client's leader epoch is the one checked), and looks
// up and checks again otherwise, so an incremental fetch of an unchanged session costs no map
// lookup and no leader check per partition.
//
// Followers (weir's replication fetchers, as Kafka's ReplicaFetcherThread) open sessions too: one
// per leader they fetch from, privileged, and a follower's incremental fetch moves the follower
// state (ISR, high watermark) of every partition of its session, named or not.

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
)

const (
	// fetchSessionEvictionMs is Kafka's internal min.incremental.fetch.session.eviction.ms: a
	// session unused this long may be evicted by any new one, and a session this old becomes
	// evictable by larger ones.
	fetchSessionEvictionMs = 120_000
	// maxFetchSessionPartitions bounds the partitions of one session.
	maxFetchSessionPartitions = 1 << 15
	// maxFetchSessionCachedPartitions bounds the partitions of all sessions.
	maxFetchSessionCachedPartitions = 1 << 18
	// maxSessionTopicName is Kafka's longest legal topic name: a longer one (which no topic can
	// have) makes the fetch sessionless instead of being cached.
	maxSessionTopicName = 249
	// fetchSessionSlotsDefault is used when the configured slot count does not parse.
	fetchSessionSlotsDefault = 1000
)

// Session epochs (Kafka's FetchMetadata).
const (
	fetchInitialEpoch = 0
	fetchFinalEpoch   = -1
)

// nextFetchEpoch is Kafka's FetchMetadata.nextEpoch.
func nextFetchEpoch(e int32) int32 {
	switch {
	case e < 0:
		return fetchFinalEpoch
	case e == math.MaxInt32:
		return 1
	default:
		return e + 1
	}
}

// sessionKey names a partition in a session: by topic id (v13+, name empty) or by name (v<13,
// id zero).
type sessionKey struct {
	id        [16]byte
	name      string
	partition int32
}

// sessionPartition is one partition of a session: the last fetch parameters the client sent for
// it, and what the broker last answered (-1: nothing yet, or an error, so the next response
// carries it).
type sessionPartition struct {
	name        string // v<13 sessions; topic-id sessions resolve the name at each fetch
	id          [16]byte
	partition   int32
	maxBytes    int32
	fetchOffset int64
	leaderEpoch int32
	gone        bool // forgotten; dropped by compactLocked
	hw, lso     int64
	logStart    int64
	// rep (and its log) is the partition's replica as the last fetch found it, valid while the
	// replica manager's gen is repGen (nil: look it up); leaderOK says it passed the leader check
	// for the client's leader epoch okEpoch at that gen. They save a map lookup and a leader
	// check (a lock and a cache miss on the replica) per partition per fetch; they keep a replica
	// that left the broker reachable until the next fetch of the session.
	rep      *replica
	repLog   *engine.Log
	repGen   uint64
	okEpoch  int32
	leaderOK bool
}

func (p *sessionPartition) key() sessionKey {
	return sessionKey{id: p.id, name: p.name, partition: p.partition}
}

// fetchSession is one incremental fetch session.
type fetchSession struct {
	id         int32
	privileged bool // opened by a follower (replica id >= 0)
	topicIDs   bool // opened with v13+: partitions are named by topic id
	createdMs  int64

	// Guarded by fetchSessionCache.mu.
	lastUsedMs int64
	cachedSize int  // partitions as of the last touch; -1 once out of the cache
	byAll      bool // evictable by any new session (as of the last touch)
	byPriv     bool // evictable by a privileged new session (as of the last touch)
	prev, next *fetchSession

	mu       sync.Mutex // guards epoch, inflight, parts, index, order, moved
	epoch    int32      // the epoch the next incremental fetch must carry
	inflight bool       // an incremental fetch on the session is not answered yet
	parts    []sessionPartition
	index    map[sessionKey]int32 // key -> index in parts
	order    []int32              // indexes into parts: the response order
	moved    []int32              // scratch for reordering
}

// fetchSessionCache is the broker's fetch sessions (Broker.fetchSessions; sized on first use by
// Broker.fetchSessionCache).
type fetchSessionCache struct {
	once  sync.Once // init
	slots int
	nowMs func() int64 // tests replace it

	mu         sync.Mutex // guards sessions, head/tail (LRU, least recently used first), partitions and the sessions' cache fields
	sessions   map[int32]*fetchSession
	head, tail *fetchSession
	partitions int

	// Counters read by the metrics collector.
	numSessions   atomic.Int64
	numPartitions atomic.Int64
	evictions     atomic.Uint64
	requests      [fetchKinds]atomic.Uint64
}

// init sizes the cache (once, before use: Broker.fetchSessionCache).
func (c *fetchSessionCache) init(slots int64) {
	if slots < 0 || slots > math.MaxInt32 {
		slots = fetchSessionSlotsDefault
	}
	c.slots = int(slots)
	if c.nowMs == nil {
		start := time.Now()
		c.nowMs = func() int64 { return time.Since(start).Milliseconds() }
	}
	c.sessions = make(map[int32]*fetchSession)
}

// fetchKind is how a Fetch is served.
type fetchKind uint8

const (
	fetchSessionless fetchKind = iota
	fetchFull
	fetchIncremental
	fetchSessionError
	fetchKinds
)

var fetchKindNames = [fetchKinds]string{"sessionless", "full", "incremental", "error"}

// fetchContext is Kafka's FetchContext for one request: how its partitions are found and how
// its response is made.
type fetchContext struct {
	kind       fetchKind
	err        *kerr.Error   // fetchSessionError
	session    *fetchSession // fetchIncremental
	epoch      int32         // fetchIncremental: the session's epoch when the response is made
	privileged bool
	topicIDs   bool
}

// newContext is Kafka's FetchManager.newContext: it applies an incremental request to its
// session (new and changed partitions, forgotten ones) and moves the session to its next epoch.
func (c *fetchSessionCache) newContext(version int16, req *kmsg.FetchRequest, privileged bool) fetchContext {
	ctx := fetchContext{kind: fetchSessionless, privileged: privileged, topicIDs: version >= 13}
	if version < 7 {
		c.count(fetchSessionless) // no sessions before v7
		return ctx
	}
	if req.SessionEpoch == fetchInitialEpoch || req.SessionEpoch == fetchFinalEpoch {
		if req.SessionID != 0 {
			c.remove(req.SessionID)
		}
		if req.SessionEpoch == fetchInitialEpoch {
			ctx.kind = fetchFull
		}
		c.count(ctx.kind)
		return ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[req.SessionID]
	if s == nil {
		return c.errorContext(kerr.FetchSessionIDNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.epoch != req.SessionEpoch:
		return c.errorContext(kerr.InvalidFetchSessionEpoch)
	case s.topicIDs != ctx.topicIDs:
		return c.errorContext(kerr.FetchSessionTopicIDError)
	case s.inflight:
		// One fetch at a time per session (clients never send more): a second one while the
		// first is unanswered would hold another copy of the session's partitions.
		return c.errorContext(kerr.InvalidFetchSessionEpoch)
	}
	if !s.updateLocked(req, c.partitions-s.cachedSize) {
		// Past the bounds: the session is dropped and the client starts over with a full fetch.
		c.removeLocked(s)
		return c.errorContext(kerr.FetchSessionIDNotFound)
	}
	if len(s.parts) == 0 {
		c.removeLocked(s)
		c.count(fetchSessionless)
		return ctx
	}
	c.touchLocked(s, c.nowMs())
	s.epoch = nextFetchEpoch(s.epoch)
	s.inflight = true // until fetchRun.free
	ctx.kind, ctx.session, ctx.epoch = fetchIncremental, s, s.epoch
	c.count(fetchIncremental)
	return ctx
}

func (c *fetchSessionCache) errorContext(err *kerr.Error) fetchContext {
	c.count(fetchSessionError)
	return fetchContext{kind: fetchSessionError, err: err}
}

func (c *fetchSessionCache) count(k fetchKind) { c.requests[k].Add(1) }

// updateLocked applies an incremental request's partitions and forgotten topics (Kafka's
// FetchSession.update). others is the partitions cached by the other sessions. It reports false,
// leaving the session half-updated (the caller drops it), when the session would outgrow the
// bounds or a topic name is longer than any topic's. Requires s.mu.
func (s *fetchSession) updateLocked(req *kmsg.FetchRequest, others int) bool {
	for i := range req.Topics {
		rt := &req.Topics[i]
		k := sessionKey{}
		if s.topicIDs {
			k.id = rt.TopicID
		} else {
			if len(rt.Topic) > maxSessionTopicName {
				return false
			}
			k.name = rt.Topic
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			k.partition = rp.Partition
			if idx, ok := s.index[k]; ok {
				p := &s.parts[idx]
				p.maxBytes, p.fetchOffset, p.leaderEpoch = rp.PartitionMaxBytes, rp.FetchOffset, rp.CurrentLeaderEpoch
				continue
			}
			if len(s.parts) >= maxFetchSessionPartitions || others+len(s.parts) >= maxFetchSessionCachedPartitions {
				return false
			}
			s.index[k] = int32(len(s.parts))
			s.order = append(s.order, int32(len(s.parts)))
			s.parts = append(s.parts, sessionPartition{name: k.name, id: k.id, partition: k.partition,
				maxBytes: rp.PartitionMaxBytes, fetchOffset: rp.FetchOffset, leaderEpoch: rp.CurrentLeaderEpoch,
				hw: -1, lso: -1, logStart: -1})
		}
	}
	forgotten := false
	for i := range req.ForgottenTopics {
		ft := &req.ForgottenTopics[i]
		k := sessionKey{}
		if s.topicIDs {
			k.id = ft.TopicID
		} else {
			k.name = ft.Topic
		}
		for _, p := range ft.Partitions {
			k.partition = p
			if idx, ok := s.index[k]; ok {
				delete(s.index, k)
				s.parts[idx].gone = true
				forgotten = true
			}
		}
	}
	if forgotten {
		s.compactLocked()
	}
	return true
}

// compactLocked drops the partitions marked gone and renumbers the index
// and the order. Requires s.mu.
func (s *fetchSession) compactLocked() {
	// remap[i] is part i's new index, or -1.
	remap := s.moved[:0]
	n := int32(0)
	for i := range s.parts {
		if s.parts[i].gone {
			remap = append(remap, -1)
			continue
		}
		remap = append(remap, n)
		if int(n) != i {
			s.parts[n] = s.parts[i]
			s.index[s.parts[n].key()] = n
		}
		n++
	}
	clear(s.parts[n:])
	s.parts = s.parts[:n]
	k := 0
	for _, idx := range s.order {
		if r := remap[idx]; r >= 0 {
			s.order[k] = r
			k++
		}
	}
	s.order = s.order[:k]
	s.moved = remap[:0]
}

// createSession makes a session of a full fetch's partitions with what its response carried
// (Kafka's FullFetchContext.updateAndGenerateResponseData, maybeCreateSession). It returns the
// new session's id, or 0 when none was made: past the bounds, or the cache is full and nothing
// may be evicted.
func (c *fetchSessionCache) createSession(ctx *fetchContext, items []fetchItem) int32 {
	if len(items) > maxFetchSessionPartitions {
		return 0
	}
	for i := range items {
		if len(items[i].name) > maxSessionTopicName {
			return 0
		}
	}
	// The session is built without the cache lock (a map of every partition: a millisecond or
	// more for thousands, during which every other fetch's newContext would wait); room is made
	// before (so a client the cache cannot take pays no build) and checked again after.
	now := c.nowMs()
	c.mu.Lock()
	room := c.makeRoomLocked(ctx.privileged, len(items), now)
	c.mu.Unlock()
	if !room {
		return 0
	}
	s := &fetchSession{privileged: ctx.privileged, topicIDs: ctx.topicIDs, createdMs: now, cachedSize: -1,
		epoch: nextFetchEpoch(fetchInitialEpoch), index: make(map[sessionKey]int32, len(items)),
		parts: make([]sessionPartition, 0, len(items)), order: make([]int32, 0, len(items))}
	for i := range items {
		it := &items[i]
		k := sessionKey{partition: it.partition}
		if s.topicIDs {
			k.id = it.id
		} else {
			k.name = it.name
		}
		sp := sessionPartition{name: k.name, id: k.id, partition: it.partition, maxBytes: it.maxBytes,
			fetchOffset: it.fetchOffset, leaderEpoch: it.leaderEpoch, hw: it.p.hw, lso: it.p.lso, logStart: it.p.logStart,
			rep: it.rep, repLog: it.repLog, repGen: it.repGen, okEpoch: it.okEpoch, leaderOK: it.leaderOK}
		if it.p.errorCode != 0 {
			sp.hw = -1
		}
		if idx, ok := s.index[k]; ok { // a partition named twice: the last one counts
			s.parts[idx] = sp
			continue
		}
		s.index[k] = int32(len(s.parts))
		s.order = append(s.order, int32(len(s.parts)))
		s.parts = append(s.parts, sp)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.makeRoomLocked(ctx.privileged, len(s.parts), now) {
		return 0 // taken meanwhile by another new session
	}
	for {
		s.id = rand.Int32N(math.MaxInt32) + 1 // 1..MaxInt32, never 0
		if c.sessions[s.id] == nil {
			break
		}
	}
	c.sessions[s.id] = s
	c.numSessions.Store(int64(len(c.sessions)))
	c.touchLocked(s, now)
	return s.id
}

// makeRoomLocked evicts sessions (tryEvictLocked) until a new one of size partitions fits in
// the slots and the partition bound; false when it cannot. Requires c.mu.
func (c *fetchSessionCache) makeRoomLocked(privileged bool, size int, now int64) bool {
	for len(c.sessions) >= c.slots || c.partitions+size > maxFetchSessionCachedPartitions {
		if !c.tryEvictLocked(privileged, size, now) {
			return false
		}
	}
	return true
}

// tryEvictLocked is Kafka's FetchSessionCacheShard.tryEvict: it evicts the least recently used
// session if it is stale, else the first evictable session by (privileged, size, id) if the new
// session (privileged, size, id 0) does not sort before it. Requires c.mu.
func (c *fetchSessionCache) tryEvictLocked(privileged bool, size int, now int64) bool {
	if c.head == nil {
		return false
	}
	if now-c.head.lastUsedMs > fetchSessionEvictionMs {
		c.removeLocked(c.head)
		c.evictions.Add(1)
		return true
	}
	var victim *fetchSession
	for _, s := range c.sessions {
		if !(privileged && s.byPriv || !privileged && s.byAll) {
			continue
		}
		if victim == nil || evictableLess(s, victim) {
			victim = s
		}
	}
	if victim == nil {
		return false
	}
	// The new key (privileged, size, 0) must not sort before the victim's.
	newLess := func() bool {
		if privileged != victim.privileged {
			return !privileged
		}
		if size != victim.cachedSize {
			return size < victim.cachedSize
		}
		return 0 < victim.id
	}
	if newLess() {
		return false
	}
	c.removeLocked(victim)
	c.evictions.Add(1)
	return true
}

// evictableLess orders sessions as Kafka's EvictableKey: unprivileged first, then smaller, then
// by id.
func evictableLess(a, b *fetchSession) bool {
	if a.privileged != b.privileged {
		return !a.privileged
	}
	if a.cachedSize != b.cachedSize {
		return a.cachedSize < b.cachedSize
	}
	return a.id < b.id
}

// touchLocked marks s used at now: it moves to the end of the LRU list, its size is recounted
// and its evictability re-evaluated (Kafka's touch). Requires c.mu and s.mu, or that s is not
// yet shared.
func (c *fetchSessionCache) touchLocked(s *fetchSession, now int64) {
	c.unlinkLocked(s)
	s.lastUsedMs = now
	s.prev, s.next = c.tail, nil
	if c.tail != nil {
		c.tail.next = s
	} else {
		c.head = s
	}
	c.tail = s
	if s.cachedSize >= 0 {
		c.partitions -= s.cachedSize
	}
	s.cachedSize = len(s.parts)
	c.partitions += s.cachedSize
	c.numPartitions.Store(int64(c.partitions))
	old := now-s.createdMs > fetchSessionEvictionMs
	s.byPriv = !s.privileged || old
	s.byAll = old
}

func (c *fetchSessionCache) unlinkLocked(s *fetchSession) {
	if s.prev != nil {
		s.prev.next = s.next
	} else if c.head == s {
		c.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else if c.tail == s {
		c.tail = s.prev
	}
	s.prev, s.next = nil, nil
}

// remove closes the session id if it exists.
func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.sessions[id]; s != nil {
		c.removeLocked(s)
	}
}

// removeLocked takes s out of the cache. A fetch still holding s finishes with it; the next
// request naming it gets FETCH_SESSION_ID_NOT_FOUND. Requires c.mu.
func (c *fetchSessionCache) removeLocked(s *fetchSession) {
	if c.sessions[s.id] != s {
		return
	}
	delete(c.sessions, s.id)
	c.unlinkLocked(s)
	if s.cachedSize >= 0 {
		c.partitions -= s.cachedSize
	}
	s.cachedSize = -1
	c.numSessions.Store(int64(len(c.sessions)))
	c.numPartitions.Store(int64(c.partitions))
}

// finish ends the session's fetch in flight (fetchRun.free).
func (s *fetchSession) finish() {
	s.mu.Lock()
	s.inflight = false
	s.mu.Unlock()
}

// snapshot copies the session's partitions, in response order, into items (an incremental
// fetch reads them without the session lock). It reports false when the session moved past
// epoch (a duplicate request took it): the response is then INVALID_FETCH_SESSION_EPOCH.
func (s *fetchSession) snapshot(epoch int32, items []fetchItem) ([]fetchItem, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch != epoch {
		return items, false
	}
	for _, idx := range s.order {
		p := &s.parts[idx]
		items = append(items, fetchItem{name: p.name, id: p.id, partition: p.partition, maxBytes: p.maxBytes,
			fetchOffset: p.fetchOffset, leaderEpoch: p.leaderEpoch, rep: p.rep, repLog: p.repLog, repGen: p.repGen,
			okEpoch: p.okEpoch, leaderOK: p.leaderOK})
	}
	return items, true
}

// respond decides which partitions an incremental response carries and records what they
// carried (Kafka's IncrementalFetchContext.updateAndGenerateResponseData): items were read from
// the session's snapshot at epoch. Partitions that returned records move to the end of the
// session's order. It reports false, changing nothing, when the session moved past epoch.
func (s *fetchSession) respond(epoch int32, items []fetchItem) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch != epoch || len(items) != len(s.order) {
		return false
	}
	moved := s.moved[:0]
	k := 0
	for i := range items {
		it := &items[i]
		idx := s.order[i]
		sp := &s.parts[idx]
		sp.rep, sp.repLog, sp.repGen, sp.okEpoch, sp.leaderOK = it.rep, it.repLog, it.repGen, it.okEpoch, it.leaderOK
		r := &it.p
		must := r.slice.Length > 0
		if sp.hw != r.hw {
			must, sp.hw = true, r.hw
		}
		if sp.lso != r.lso {
			must, sp.lso = true, r.lso
		}
		if sp.logStart != r.logStart {
			must, sp.logStart = true, r.logStart
		}
		if r.errorCode != 0 {
			must, sp.hw = true, -1 // resent once the error goes away
		}
		if r.preferred {
			must = true // a preferred read replica is always answered (KIP-392, racks.go)
		}
		it.include = must
		if r.slice.Length > 0 {
			moved = append(moved, idx)
		} else {
			s.order[k] = idx
			k++
		}
	}
	copy(s.order[k:], moved)
	s.moved = moved[:0]
	return true
}
