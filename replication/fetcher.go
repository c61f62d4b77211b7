package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"

	"github.com/weir-mq/weir/internal/peerauth"
)

// Follow is one partition this broker follows: its log and the leader it copies.
type Follow struct {
	Topic       string
	Partition   int32
	Leader      int32
	LeaderEpoch int32
	Log         FollowerLog
	// Throttled, when set and true, says this replica is listed in the topic's
	// follower.replication.throttled.replicas (KIP-73): while it has not caught up with the
	// leader, its fetches count against FetcherConfig.Quota and wait while the quota is
	// exceeded. The owner may change it at any time.
	Throttled *atomic.Bool
}

// FollowerLog is what a follower fetcher needs of a partition's log: its offsets, the leader
// epoch cache (to find a divergent tail with OffsetForLeaderEpoch), truncation, the append of
// the leader's batches with their offsets and epochs kept, durability, and moving the high
// watermark and log start after the leader's. engine.Log (the disk log) and engine.MemLog (the
// in-memory reference) both satisfy it; fetcher_oracle_test.go runs the same leader
// histories against both. The semantics are engine.PartitionLog's.
type FollowerLog interface {
	LogStartOffset() int64
	LogEndOffset() int64
	HighWatermark() int64
	// LatestEpoch is the newest epoch in the leader epoch cache (false: none).
	LatestEpoch() (epoch int32, ok bool)
	// EndOffsetForEpoch is Kafka's endOffsetFor: where epoch ends in this log.
	EndOffsetForEpoch(epoch int32) (endOffset int64, foundEpoch int32)
	TruncateTo(offset int64) error
	// AppendStored appends the leader's batches with their offsets and leader epochs kept.
	AppendStored(batches []byte) (engine.AppendInfo, error)
	// AwaitDurable waits until every offset below upTo is durable (durable policy).
	AwaitDurable(upTo int64) error
	SetHighWatermark(offset int64) error
	// AdvanceHighWatermark moves the high watermark up (a lower offset is ignored).
	AdvanceHighWatermark(offset int64) error
	DeleteRecordsBefore(offset int64) (int64, error)
}

var (
	_ FollowerLog = (*engine.Log)(nil)
	_ FollowerLog = (*engine.MemLog)(nil)
	_ diskLog     = (*engine.Log)(nil)
)

// diskLog is what a log on disk (engine.Log) adds to FollowerLog: its flush policy, the offset
// below which it is fdatasync'd, and its log dir's sticky error. A FollowerLog without it
// (engine.MemLog) counts everything appended as durable, and its dir never fails.
type diskLog interface {
	Durable() bool
	RecoveryPoint() int64
	DirErr() error
}

// reportableEnd is the fetch offset a follower may report to its leader: its log end, or under
// the durable policy only what is fdatasync'd of it (the leader counts the fetch offset toward
// the high watermark, so acks=all means "on disk on every in-sync replica").
func reportableEnd(l FollowerLog) int64 {
	end := l.LogEndOffset()
	if d, ok := l.(diskLog); ok && d.Durable() {
		return min(end, d.RecoveryPoint())
	}
	return end
}

// dirErr is the log's log dir's sticky error (nil while it is online).
func dirErr(l FollowerLog) error {
	if d, ok := l.(diskLog); ok {
		return d.DirErr()
	}
	return nil
}

// FetcherConfig configures the follower fetchers.
type FetcherConfig struct {
	NodeID int32
	// Addr returns a broker's address on the inter-broker listener (from the metadata image).
	Addr func(broker int32) (string, bool)
	// Security is the inter-broker listener's security protocol: TLS and SASL settings of
	// the connections to leaders (zero: PLAINTEXT).
	Security ClientSecurity
	// MaxWait is replica.fetch.wait.max.ms (default 500ms).
	MaxWait time.Duration
	// MaxBytes is replica.fetch.response.max.bytes (default 10 MiB); PartitionMaxBytes is
	// replica.fetch.max.bytes (default 1 MiB).
	MaxBytes, PartitionMaxBytes int32
	// Backoff is replica.fetch.backoff.ms after an error (default 1s).
	Backoff time.Duration
	Logger  *slog.Logger
	// Quota is follower.replication.throttled.rate (throttle.go); nil: unlimited.
	Quota *Quota
}

// Fetchers copies followed partitions from their leaders: one goroutine and connection per
// source broker, many partitions per Fetch request (replica id set). A follower reports an
// offset to its leader (its fetch offset) only once everything below it is durable when the
// log's policy is durable, so the leader's high watermark means "on disk on every in-sync
// replica"; a partition whose log dir failed stops fetching at once. Before fetching a
// partition for a new leader epoch the follower truncates any divergent tail with
// OffsetForLeaderEpoch, in as many rounds as KIP-279 takes (truncateDivergentWith).
type Fetchers struct {
	cfg FetcherConfig

	// mu guards parts, sources and closed: Set and Close change them, Following reads them.
	// Lock order: mu, then a followed's mu (Set deactivates partitions under both).
	mu      sync.Mutex
	parts   map[tpKey]*followed
	sources map[int32]*sourceFetcher
	closed  bool
}

type tpKey struct {
	topic     string
	partition int32
}

// followed is one partition's follower state.
type followed struct {
	Follow
	// mu guards active and is held by the fetcher goroutine across every change to the log
	// (append and its durability wait, truncation, the log start), so a partition removed
	// from the fetchers (it became leader, or follows another broker) sees no change after
	// Set returns: Set clears active under it. This is the one lock held across disk I/O
	// here, by design: it is per partition and only Set and Close wait on it. The other
	// fields belong to the source fetcher's goroutine.
	mu     sync.Mutex
	active bool
	// failed: the log's dir went offline; the partition left the fetchers (active is false)
	// and stays out until Set follows it anew (Kafka's failed partitions).
	failed    bool
	truncated bool // divergence check done for this leader epoch
	// askEpoch is the epoch the divergence check asks the leader about: set by epochRequest,
	// then, when askAgain, the older local epoch the next round asks about (KIP-279).
	askEpoch int32
	askAgain bool
	failures int
	retryAt  time.Time // after a partition error: not fetched again before this
	// fetchFrom, when above the log end, is where fetching resumes: the leader's log start,
	// after the local log was found entirely below it (an empty or long-gone replica) and
	// emptied.
	fetchFrom int64
	// caughtUp: at the last fetch the log reached the leader's high watermark (Kafka's
	// isReplicaInSync for throttling); throttled partitions that have not are held to Quota.
	caughtUp bool
}

// throttled reports whether p's fetches count against the follower quota now.
func (p *followed) throttled() bool {
	return p.Throttled != nil && p.Throttled.Load() && !p.caughtUp
}

// NewFetchers returns an empty fetcher set.
func NewFetchers(cfg FetcherConfig) *Fetchers {
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 10 << 20
	}
	if cfg.PartitionMaxBytes <= 0 {
		cfg.PartitionMaxBytes = 1 << 20
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Fetchers{cfg: cfg, parts: map[tpKey]*followed{}, sources: map[int32]*sourceFetcher{}}
}

// Set replaces the followed partitions. A partition whose leader or leader epoch changed starts
// over (divergence check, then fetching from the new leader). When Set returns, no partition
// left out of follows is appended to any more.
func (f *Fetchers) Set(follows []Follow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	want := make(map[tpKey]Follow, len(follows))
	for _, fl := range follows {
		want[tpKey{fl.Topic, fl.Partition}] = fl
	}
	for k, p := range f.parts {
		w, ok := want[k]
		if ok && w.Leader == p.Leader && w.LeaderEpoch == p.LeaderEpoch && w.Log == p.Log {
			continue
		}
		p.mu.Lock()
		p.active = false
		p.mu.Unlock()
		delete(f.parts, k)
	}
	for k, w := range want {
		if _, ok := f.parts[k]; ok {
			continue
		}
		f.parts[k] = &followed{Follow: w, active: true}
	}
	bySource := map[int32][]*followed{}
	for _, p := range f.parts {
		bySource[p.Leader] = append(bySource[p.Leader], p)
	}
	for id, s := range f.sources {
		if _, ok := bySource[id]; !ok {
			s.stop()
			delete(f.sources, id)
		}
	}
	for id, ps := range bySource {
		s, ok := f.sources[id]
		if !ok {
			s = newSourceFetcher(f, id)
			f.sources[id] = s
			go s.run()
		}
		s.setParts(ps)
	}
}

// Close stops every fetcher and waits for them.
func (f *Fetchers) Close() {
	f.mu.Lock()
	f.closed = true
	for _, p := range f.parts {
		p.mu.Lock()
		p.active = false
		p.mu.Unlock()
	}
	srcs := f.sources
	f.sources = map[int32]*sourceFetcher{}
	f.parts = map[tpKey]*followed{}
	f.mu.Unlock()
	for _, s := range srcs {
		s.stop()
		<-s.done
	}
}

// Following returns the partitions being followed, sorted by topic and partition, each with
// the leader and leader epoch it follows (tools, tests).
func (f *Fetchers) Following() []Follow {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Follow, 0, len(f.parts))
	for _, p := range f.parts {
		out = append(out, p.Follow)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// sourceFetcher fetches every partition led by one broker.
type sourceFetcher struct {
	f      *Fetchers
	source int32

	// mu guards parts, replaced by setParts (under Fetchers.mu) and read by the goroutine.
	mu      sync.Mutex
	parts   []*followed
	changed chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	conn   *kconn // used by the fetcher goroutine only
	addr   string

	// cmu guards live, the connection under conn, which setParts may cut short.
	cmu         sync.Mutex
	live        net.Conn
	interrupted atomic.Bool

	// lastWarn and lastWarnKey rate-limit the warnings about security failures, and
	// securityFailures counts them in a row (the fetcher goroutine only).
	lastWarn         time.Time
	lastWarnKey      string
	securityFailures int

	// sess is the incremental fetch session with the leader (KIP-227; the fetcher goroutine
	// only).
	sess fetchSession
}

// fetchSession is a follower's side of an incremental fetch session with its leader (KIP-227,
// Kafka's FetchSessionHandler). The first Fetch is a full one (epoch 0) naming every partition;
// the leader answers with a session id and remembers each partition's fetch parameters. Later
// Fetches (that id, epochs 1, 2, ...) name only the partitions whose fetch offset, log start
// offset or leader epoch moved since the leader last saw them, and the partitions to forget; the
// leader reads every partition of the session (so an idle, caught-up follower still counts as
// fetching it: its ISR membership and the high watermark are kept) and answers only those with
// records or a changed high watermark, log start offset or error. A follower of N idle partitions
// then sends and parses a few bytes per Fetch instead of N partitions.
//
// On any failure of a Fetch (connection, a session error from the leader) the next Fetch is a
// full one that names the old session id, which closes it on the leader (epoch 0 with an id).
type fetchSession struct {
	id    int32 // 0: none
	epoch int32 // epoch of the next Fetch: 0 is a full fetch
	// sent is what the leader's session holds for each partition (as of the last answered Fetch).
	sent map[tpKey]sentPart
	// pending is what the Fetch in flight will leave in the session once answered.
	pending map[tpKey]sentPart
}

// sentPart is a partition's fetch parameters as the leader's session holds them.
type sentPart struct {
	fetchOffset, logStart int64
	leaderEpoch           int32
}

// reset makes the next Fetch a full one (closing the session on the leader, if any).
func (fs *fetchSession) reset() {
	fs.epoch = 0
	clear(fs.sent)
}

// answered records a successful answer to the Fetch just sent: respID is the answer's session
// id.
func (fs *fetchSession) answered(respID int32) {
	fs.sent, fs.pending = fs.pending, fs.sent
	clear(fs.pending)
	switch {
	case fs.epoch == 0 && respID == 0:
		// The leader made no session (its cache is full): the next Fetch is a full one again.
		fs.id = 0
		clear(fs.sent)
	case fs.epoch == 0:
		fs.id, fs.epoch = respID, 1
	case fs.epoch == math.MaxInt32:
		fs.epoch = 1
	default:
		fs.epoch++
	}
}

// securityWarnEvery is how often a persisting connection security failure (TLS, SASL) is
// logged again; securityBackoffMax bounds the wait between attempts after such failures.
const (
	securityWarnEvery  = 30 * time.Second
	securityBackoffMax = 10 * time.Second
)

func newSourceFetcher(f *Fetchers, source int32) *sourceFetcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &sourceFetcher{f: f, source: source, changed: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

func (s *sourceFetcher) setParts(ps []*followed) {
	s.mu.Lock()
	added := false
	for _, p := range ps {
		if !slices.Contains(s.parts, p) {
			added = true
			break
		}
	}
	s.parts = ps
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	if added {
		// A partition that just started following this leader (a leadership moved here)
		// must not wait for the long poll in flight (up to replica.fetch.wait.max.ms): the
		// new leader's high watermark, and so every acks=all write, waits on this fetch.
		// Cut the poll short; the fetcher reconnects at once.
		s.interrupted.Store(true)
		s.cmu.Lock()
		if s.live != nil {
			_ = s.live.SetDeadline(time.Now())
		}
		s.cmu.Unlock()
	}
}

func (s *sourceFetcher) stop() { s.cancel() }

func (s *sourceFetcher) snapshot() []*followed {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*followed, 0, len(s.parts))
	for _, p := range s.parts {
		p.mu.Lock()
		if p.active {
			out = append(out, p)
		}
		p.mu.Unlock()
	}
	return out
}

func (s *sourceFetcher) run() {
	defer close(s.done)
	defer func() {
		if s.conn != nil {
			s.conn.Close()
		}
	}()
	log := s.f.cfg.Logger.With("leader", s.source)
	for s.ctx.Err() == nil {
		parts := s.snapshot()
		if len(parts) == 0 {
			select {
			case <-s.ctx.Done():
				return
			case <-s.changed:
			}
			continue
		}
		err := s.round(parts)
		if err == nil && s.lastWarnKey != "" {
			log.Info("replicating from the leader again", "listener", s.f.cfg.Security.Listener, "security.protocol", s.f.cfg.Security.Protocol())
			s.lastWarnKey, s.securityFailures = "", 0
		}
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.dropConn()
			if s.interrupted.Swap(false) {
				continue // cut short for new partitions: no backoff
			}
			backoff := s.f.cfg.Backoff
			if se := (*peerauth.SecurityError)(nil); errors.As(err, &se) {
				s.warnSecurity(log, se)
				// A refused credential or certificate stays refused until an operator acts:
				// back off exponentially (up to securityBackoffMax), sparing the leader's
				// failed-authentication limiter, which would lock this address out.
				s.securityFailures++
				backoff = max(backoff, min(backoff<<min(s.securityFailures-1, 6), securityBackoffMax))
			} else {
				log.Debug("replica fetch failed", "err", err)
			}
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}
}

// warnSecurity logs a failure to connect securely to the leader: at once when it is new, then
// at most every securityWarnEvery while it persists (the fetcher retries every backoff).
func (s *sourceFetcher) warnSecurity(log *slog.Logger, se *peerauth.SecurityError) {
	msg, key := se.Error(), se.Stage+" "+se.Addr
	if key == s.lastWarnKey && time.Since(s.lastWarn) < securityWarnEvery {
		log.Debug("replica connection failed", "err", msg)
		return
	}
	s.lastWarn, s.lastWarnKey = time.Now(), key
	sec := s.f.cfg.Security
	log.Warn("cannot replicate from the leader: its inter-broker listener refused this broker's connection",
		"listener", sec.Listener, "security.protocol", sec.Protocol(), "err", msg)
}

// ensureConn connects to the source broker's current address (again when the connection's
// SASL session is over).
func (s *sourceFetcher) ensureConn() error {
	addr, ok := s.f.cfg.Addr(s.source)
	if !ok {
		return fmt.Errorf("broker %d has no known address on the inter-broker listener %s", s.source, s.f.cfg.Security.Listener)
	}
	if s.conn != nil && addr == s.addr && !s.conn.expired() {
		return nil
	}
	s.dropConn()
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	c, err := dialKafka(ctx, addr, fmt.Sprintf("weir-replica-%d", s.f.cfg.NodeID), s.f.cfg.Security)
	if err != nil {
		return err
	}
	s.conn, s.addr = c, addr
	s.cmu.Lock()
	s.live = c.c
	s.cmu.Unlock()
	s.interrupted.Store(false) // the new connection has nothing in flight
	return nil
}

// dropConn closes the connection to the source broker (the fetcher goroutine only).
func (s *sourceFetcher) dropConn() {
	if s.conn == nil {
		return
	}
	s.cmu.Lock()
	s.live = nil
	s.cmu.Unlock()
	s.conn.Close()
	s.conn = nil
}

// round runs the divergence checks that are due, then one Fetch.
func (s *sourceFetcher) round(parts []*followed) error {
	if err := s.ensureConn(); err != nil {
		return err
	}
	var check []*followed
	for _, p := range parts {
		if !p.truncated {
			check = append(check, p)
		}
	}
	if len(check) > 0 {
		if err := s.truncateDivergent(check); err != nil {
			return err
		}
	}
	var fetch []*followed
	now := time.Now()
	quotaWait := s.f.cfg.Quota.Wait(now)
	held := false
	for _, p := range parts {
		if p.truncated && !now.Before(p.retryAt) {
			if quotaWait > 0 && p.throttled() {
				held = true // KIP-73: over follower.replication.throttled.rate
				continue
			}
			if !s.settle(p) {
				continue
			}
			fetch = append(fetch, p)
		}
	}
	if len(fetch) == 0 {
		wait := s.f.cfg.Backoff
		if held {
			wait = min(wait, max(quotaWait, time.Millisecond))
		}
		for _, p := range parts {
			if p.truncated && p.retryAt.After(now) {
				wait = min(wait, p.retryAt.Sub(now))
			}
		}
		select {
		case <-s.ctx.Done():
		case <-s.changed:
		case <-time.After(wait):
		}
		return nil
	}
	return s.fetch(fetch)
}

// truncateDivergent runs the divergence check of parts against the leader (Kafka's
// KIP-101/KIP-279 protocol, truncateDivergentWith) over the connection.
func (s *sourceFetcher) truncateDivergent(parts []*followed) error {
	return s.truncateDivergentWith(parts, func(req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
		r, err := s.conn.request(req, time.Now().Add(10*time.Second))
		if err != nil {
			return nil, err
		}
		return r.(*kmsg.OffsetForLeaderEpochResponse), nil
	})
}

// epochAsker sends one OffsetForLeaderEpoch request to the leader and returns its answer.
type epochAsker func(*kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error)

// truncateDivergentWith truncates each partition of parts to where its log and the leader's
// agree, asking the leader with ask (KIP-279). A partition asks where its latest local epoch
// ends on the leader; the leader answers with the largest epoch it holds at or below the one
// asked and where that epoch ends there. When this log holds the epoch the leader answered, the
// log keeps what lies below both ends and the check is over. When it does not (the log's
// epochs after some epoch e are not on the leader, a history of two or more leader changes),
// the log is truncated to where its own epoch e (the largest below the leader's) ends, and
// the leader is asked again about e: the asked epoch falls with every round, so the check ends.
// Partitions whose check ended are marked truncated; the others (a per-partition error, no
// answer) are asked again in a later round.
func (s *sourceFetcher) truncateDivergentWith(parts []*followed, ask epochAsker) error {
	for len(parts) > 0 {
		req, asked, err := s.epochRequest(parts)
		if err != nil || len(asked) == 0 {
			return err
		}
		resp, err := ask(req)
		if err != nil {
			return err
		}
		if parts, err = s.applyEpochResponse(asked, resp); err != nil {
			return err
		}
	}
	return nil
}

// epochRequest builds the OffsetForLeaderEpoch request for parts, and returns the partitions it
// asks about. A partition asks about its latest epoch, or in a later round of its check, the
// epoch the previous round named (followed.askEpoch). A partition without any epoch in its
// cache is not asked about: it is truncated to its high watermark at once.
func (s *sourceFetcher) epochRequest(parts []*followed) (*kmsg.OffsetForLeaderEpochRequest, []*followed, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(4)
	req.ReplicaID = s.f.cfg.NodeID
	byTopic := map[string]int{}
	var asked []*followed
	for _, p := range parts {
		epoch, ok := p.Log.LatestEpoch()
		if p.askAgain {
			epoch, ok = p.askEpoch, true
		}
		if !ok {
			// Nothing stamped with an epoch here (an empty log, or one written before
			// epochs): keep only what the high watermark covers.
			p.mu.Lock()
			if p.active {
				if hw := p.Log.HighWatermark(); hw < p.Log.LogEndOffset() {
					if err := p.Log.TruncateTo(hw); err != nil && !s.storageFailedLocked(p, err) {
						p.mu.Unlock()
						return nil, nil, fmt.Errorf("truncate %s-%d to high watermark %d: %w", p.Topic, p.Partition, hw, err)
					}
				}
				p.truncated = true
			}
			p.mu.Unlock()
			continue
		}
		p.askEpoch = epoch
		i, ok := byTopic[p.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[p.Topic] = i
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = p.Topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition = p.Partition
		rp.CurrentLeaderEpoch = p.LeaderEpoch
		rp.LeaderEpoch = epoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		asked = append(asked, p)
	}
	return req, asked, nil
}

// applyEpochResponse truncates each asked partition as the leader's OffsetForLeaderEpoch answer
// says, and returns the partitions to ask again (truncateTo).
func (s *sourceFetcher) applyEpochResponse(asked []*followed, resp *kmsg.OffsetForLeaderEpochResponse) (again []*followed, err error) {
	byTP := map[tpKey]*followed{}
	for _, p := range asked {
		byTP[tpKey{p.Topic, p.Partition}] = p
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			p := byTP[tpKey{t.Topic, rp.Partition}]
			if p == nil {
				continue
			}
			delete(byTP, tpKey{t.Topic, rp.Partition}) // a partition named twice is applied once
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				s.partitionError(p, err)
				continue
			}
			more, err := s.truncateTo(p, rp.LeaderEpoch, rp.EndOffset)
			if err != nil {
				return nil, err
			}
			if more {
				again = append(again, p)
			}
		}
	}
	return again, nil
}

// truncateTo applies one OffsetForLeaderEpoch answer for p, which asked about p.askEpoch: the
// leader's largest epoch at or below it is leaderEpoch and ends at endOffset there. As Kafka's
// AbstractFetcherThread does (KIP-279), the log looks up its own end for leaderEpoch (its
// largest epoch at or below it, and where that ends here):
//   - the leader knows no such epoch: keep what the high watermark covers;
//   - the log has no epoch at or below leaderEpoch: keep what lies below the leader's end;
//   - the log's epoch found is leaderEpoch: keep what lies below both ends, and the check is
//     over;
//   - the log's epoch found is an older one e: the log's epochs after e are not on the leader,
//     so truncate to where e ends here, and ask again about e (again is true).
//
// The kept prefix is the longest one whose epochs the leader holds at the same offsets, so
// after the check and the fetches that follow, no offset holds a record other than the
// leader's (no two values at one offset).
func (s *sourceFetcher) truncateTo(p *followed, leaderEpoch int32, endOffset int64) (again bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.active {
		return false, nil
	}
	l := p.Log
	end := l.LogEndOffset()
	to := end
	switch local, localEpoch := l.EndOffsetForEpoch(leaderEpoch); {
	case leaderEpoch < 0 || endOffset < 0:
		to = min(end, l.HighWatermark())
	case local < 0:
		to = min(end, endOffset)
	case localEpoch != leaderEpoch && localEpoch < p.askEpoch:
		to = min(end, local)
		again = true
		p.askEpoch = localEpoch
	default:
		// Also when the leader answered an epoch above the one asked (which a leader never
		// does): the smaller end is kept, and the check ends.
		to = min(end, local, endOffset)
	}
	if to < end {
		s.f.cfg.Logger.Info("truncating divergent follower tail", "topic", p.Topic, "partition", p.Partition,
			"from", end, "to", to, "leader", s.source, "leader_epoch", p.LeaderEpoch, "epoch_asked", leaderEpoch, "again", again)
		if err := l.TruncateTo(to); err != nil {
			if s.storageFailedLocked(p, err) {
				return false, nil
			}
			return false, fmt.Errorf("truncate %s-%d to %d: %w", p.Topic, p.Partition, to, err)
		}
		if l.HighWatermark() > to {
			_ = l.SetHighWatermark(to)
		}
	}
	p.askAgain = again
	p.truncated = !again
	return again, nil
}

// settle readies p for a Fetch: a partition whose log dir failed leaves the fetchers now, and
// under the durable policy a log end not yet fdatasync'd (appends of this broker as leader, a
// flush refused for lack of a resource) is made durable first, so the fetch offset reported is
// the log end. It reports whether p is to be fetched now (a refused flush backs p off).
func (s *sourceFetcher) settle(p *followed) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.active {
		return false
	}
	if err := dirErr(p.Log); err != nil {
		s.failLocked(p, err)
		return false
	}
	if end := p.Log.LogEndOffset(); reportableEnd(p.Log) < end {
		if err := p.Log.AwaitDurable(end); err != nil {
			if !s.storageFailedLocked(p, err) {
				s.partitionError(p, err)
			}
			return false
		}
	}
	return true
}

// storageFailedLocked reports whether err, an error of p's log, comes with p's log dir offline;
// then p leaves the fetchers at once (failLocked). A refusal for lack of a resource leaves the
// dir online and is not such a failure. Requires p.mu.
func (s *sourceFetcher) storageFailedLocked(p *followed, err error) bool {
	derr := dirErr(p.Log)
	if derr == nil {
		return false
	}
	s.failLocked(p, fmt.Errorf("%w (after %w)", derr, err))
	return true
}

// failLocked takes p out of the fetchers because its log dir failed (Kafka's
// markPartitionFailed): from now on it is neither fetched (the next Fetch of the session
// forgets it) nor truncated nor appended to, so the leader counts nothing more from this
// replica, in particular no offset whose fdatasync failed; the broker's report of the offline
// dir moves its leaderships and ISR memberships later. Requires p.mu.
func (s *sourceFetcher) failLocked(p *followed, err error) {
	if p.failed {
		return
	}
	p.active, p.failed = false, true
	s.f.cfg.Logger.Error("follower log dir offline: the partition stops fetching from its leader", "topic", p.Topic, "partition", p.Partition,
		"leader", s.source, "log_end", p.Log.LogEndOffset(), "reported", reportableEnd(p.Log), "err", err)
}

// partitionError handles a per-partition error from the leader: stale metadata errors wait for
// the next image (Set), others back off.
func (s *sourceFetcher) partitionError(p *followed, err error) {
	p.failures++
	// Back off this partition (the others keep their long polls): a stale leader answers at
	// once, and the new image usually arrives within milliseconds.
	p.retryAt = time.Now().Add(min(time.Duration(p.failures)*20*time.Millisecond, s.f.cfg.Backoff))
	if p.failures == 1 || p.failures%20 == 0 {
		if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
			// The leader's authorizer refuses this broker's principal: an operator must act.
			s.f.cfg.Logger.Warn("replica fetch not authorized: the inter-broker principal needs CLUSTER_ACTION on the cluster (or to be in super.users)",
				"topic", p.Topic, "partition", p.Partition, "leader", s.source, "listener", s.f.cfg.Security.Listener, "err", err)
			return
		}
		s.f.cfg.Logger.Debug("replica fetch partition error", "topic", p.Topic, "partition", p.Partition, "leader", s.source, "err", err)
	}
}

// fetch sends one Fetch for parts and applies the answer.
func (s *sourceFetcher) fetch(parts []*followed) error {
	req, byTP := s.fetchRequest(parts)
	r, err := s.conn.request(req, time.Now().Add(s.f.cfg.MaxWait+10*time.Second))
	if err != nil {
		s.sess.reset()
		return err
	}
	resp := r.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		s.sess.reset()
		switch {
		case errors.Is(err, kerr.FetchSessionIDNotFound), errors.Is(err, kerr.InvalidFetchSessionEpoch),
			errors.Is(err, kerr.FetchSessionTopicIDError):
			// The leader lost or evicted the session, or it restarted: a full Fetch opens
			// another one at once.
			s.sess.id = 0
			return nil
		}
		if errors.Is(err, kerr.ClusterAuthorizationFailed) {
			return &peerauth.SecurityError{Stage: "authorization of Fetch (the inter-broker principal needs CLUSTER_ACTION on the cluster)", Addr: s.addr, Err: err}
		}
		return fmt.Errorf("fetch from broker %d: %w", s.source, err)
	}
	s.sess.answered(resp.SessionID)
	idle, err := s.applyFetchResponse(byTP, resp)
	if err != nil {
		s.sess.reset()
		return err
	}
	if idle && len(resp.Topics) == 0 {
		// Every partition errored or the leader answered nothing: do not spin.
		select {
		case <-s.ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// fetchRequest builds the Fetch request (replica id set) for parts, each from its log end (only
// what is durable of it under the durable policy: reportableEnd; or where it restarts,
// fetchFrom), and indexes parts by topic and partition. In an incremental
// session (s.sess) it names only the partitions whose fetch parameters differ from what the
// leader's session holds, and forgets those of the session that are not in parts.
func (s *sourceFetcher) fetchRequest(parts []*followed) (*kmsg.FetchRequest, map[tpKey]*followed) {
	fs := &s.sess
	if fs.sent == nil {
		fs.sent, fs.pending = map[tpKey]sentPart{}, map[tpKey]sentPart{}
	}
	clear(fs.pending)
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = s.f.cfg.NodeID
	req.MaxWaitMillis = int32(s.f.cfg.MaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = s.f.cfg.MaxBytes
	req.SessionID, req.SessionEpoch = fs.id, fs.epoch
	incremental := fs.epoch > 0
	byTopic := map[string]int{}
	byTP := make(map[tpKey]*followed, len(parts))
	for _, p := range parts {
		k := tpKey{p.Topic, p.Partition}
		byTP[k] = p
		sp := sentPart{fetchOffset: max(reportableEnd(p.Log), p.fetchFrom), logStart: p.Log.LogStartOffset(), leaderEpoch: p.LeaderEpoch}
		fs.pending[k] = sp
		if prev, ok := fs.sent[k]; incremental && ok && prev == sp {
			continue // the leader's session has it as it is
		}
		i, ok := byTopic[p.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[p.Topic] = i
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.Topic
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.Partition
		rp.CurrentLeaderEpoch = p.LeaderEpoch
		rp.FetchOffset = sp.fetchOffset
		rp.LogStartOffset = sp.logStart
		rp.PartitionMaxBytes = s.f.cfg.PartitionMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	if incremental {
		forget := map[string]int{}
		for k := range fs.sent {
			if _, ok := fs.pending[k]; ok {
				continue
			}
			i, ok := forget[k.topic]
			if !ok {
				i = len(req.ForgottenTopics)
				forget[k.topic] = i
				ft := kmsg.NewFetchRequestForgottenTopic()
				ft.Topic = k.topic
				req.ForgottenTopics = append(req.ForgottenTopics, ft)
			}
			req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, k.partition)
		}
	}
	return req, byTP
}

// applyFetchResponse applies each partition's answer: its batches, or its error (a log that
// ends before the leader's log start starts over there; past the leader's end, the divergence
// is checked again). idle is true when nothing was appended.
func (s *sourceFetcher) applyFetchResponse(byTP map[tpKey]*followed, resp *kmsg.FetchResponse) (idle bool, err error) {
	idle = true
	for _, t := range resp.Topics {
		for i := range t.Partitions {
			rp := &t.Partitions[i]
			p := byTP[tpKey{t.Topic, rp.Partition}]
			if p == nil {
				continue
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				if errors.Is(err, kerr.OffsetOutOfRange) {
					if rp.LogStartOffset > max(p.Log.LogEndOffset(), p.fetchFrom) {
						if err := s.restartAt(p, rp.LogStartOffset); err != nil {
							return idle, err
						}
						continue
					}
					p.truncated, p.askAgain = false, false // past the leader's end: check the divergence again
				}
				s.partitionError(p, err)
				continue
			}
			p.failures = 0
			got, err := s.apply(p, rp)
			if err != nil {
				return idle, err
			}
			if got {
				idle = false
			}
		}
	}
	return idle, nil
}

// apply appends one partition's fetched batches, waits until they are durable (durable policy),
// and moves the follower's high watermark and log start offset after the leader's. Batches the
// log holds already (fetched from below the log end, which was not durable yet) are skipped. An
// error of the log with its dir offline takes the partition out of the fetchers (failLocked)
// and is not returned.
func (s *sourceFetcher) apply(p *followed, rp *kmsg.FetchResponseTopicPartition) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.active {
		return false, nil
	}
	l := p.Log
	batches, ok := skipHeld(wholeBatches(rp.RecordBatches), l.LogEndOffset())
	if !ok {
		// A batch of the leader's straddles the log end: the logs' batches differ there.
		p.truncated, p.askAgain = false, false
		return false, nil
	}
	appended := len(batches) > 0
	if appended && p.throttled() {
		s.f.cfg.Quota.Record(int64(len(batches)), time.Now())
	}
	if appended {
		if _, err := l.AppendStored(batches); err != nil {
			if s.storageFailedLocked(p, err) {
				return false, nil
			}
			return false, fmt.Errorf("append to follower %s-%d: %w", p.Topic, p.Partition, err)
		}
	}
	if end := l.LogEndOffset(); appended || reportableEnd(l) < end {
		if err := l.AwaitDurable(end); err != nil {
			if s.storageFailedLocked(p, err) {
				return false, nil
			}
			return false, fmt.Errorf("sync follower %s-%d: %w", p.Topic, p.Partition, err)
		}
	}
	p.caughtUp = l.LogEndOffset() >= rp.HighWatermark
	if hw := min(rp.HighWatermark, l.LogEndOffset()); hw > l.HighWatermark() {
		_ = l.AdvanceHighWatermark(hw)
	}
	if ls := rp.LogStartOffset; ls > l.LogStartOffset() && ls <= l.LogEndOffset() {
		if _, err := l.DeleteRecordsBefore(ls); err != nil {
			s.f.cfg.Logger.Debug("follower log start", "topic", p.Topic, "partition", p.Partition, "err", err)
		}
	}
	return appended, nil
}

// skipHeld drops the leading batches of b (whole batches) that end at or below end, the log end:
// the log holds them already. ok is false when a batch starts below end and ends past it.
func skipHeld(b []byte, end int64) (rest []byte, ok bool) {
	for len(b) > 0 {
		h, err := record.ParseHeader(b)
		if err != nil || h.BaseOffset >= end {
			break
		}
		if h.NextOffset() > end {
			return nil, false
		}
		b = b[h.Size():]
	}
	return b, true
}

// restartAt handles a local log that ends before the leader's log start (the leader's
// retention or DeleteRecords removed what this replica would fetch next): the local log is
// emptied and fetching resumes at the leader's log start, as Kafka's truncateFullyAndStartAt.
func (s *sourceFetcher) restartAt(p *followed, leaderStart int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.active {
		return nil
	}
	l := p.Log
	s.f.cfg.Logger.Info("follower log ends before the leader's log start; starting over there",
		"topic", p.Topic, "partition", p.Partition, "log_end", l.LogEndOffset(), "leader_log_start", leaderStart, "leader", s.source)
	if l.LogEndOffset() > l.LogStartOffset() {
		if err := l.TruncateTo(l.LogStartOffset()); err != nil {
			if s.storageFailedLocked(p, err) {
				return nil
			}
			return fmt.Errorf("empty follower %s-%d: %w", p.Topic, p.Partition, err)
		}
	}
	p.fetchFrom = leaderStart
	return nil
}

// wholeBatches drops a trailing partial batch (a leader may cut a response inside one).
func wholeBatches(b []byte) []byte {
	n := int64(0)
	for int64(len(b))-n >= record.HeaderSize {
		h, err := record.ParseHeader(b[n:])
		if err != nil || h.BatchLength < 0 || h.Size() > int64(len(b))-n {
			break
		}
		n += h.Size()
	}
	return b[:n]
}
