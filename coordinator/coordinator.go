package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/coordinator/assignor"
)

// Config configures a Coordinator. Zero durations and sizes take Kafka's defaults except where
// noted.
type Config struct {
	Store Store
	// Clock is the time source of deadlines and timers (nil: Go's time.Now, whose Sub and
	// After use the monotonic clock, as Kafka's timers do). Tests inject a fake one.
	Clock Clock
	// Wall is the wall clock of the timestamps the coordinator writes or compares with written
	// ones: commit timestamps and offsets retention, currentStateTimestamp, regex refresh
	// timestamps, batch timestamps (Kafka's Time.milliseconds()). Nil: Clock.Now. The broker
	// passes internal/clock.Now.
	Wall func() time.Time
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (0 is honoured: no delay).
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout are group.min/max.session.timeout.ms.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxGroupSize is group.max.size (0: unlimited).
	MaxGroupSize int
	// OffsetsRetention is offsets.retention.minutes: offsets of an empty group expire this long
	// after it became empty (standalone commits: after their commit).
	OffsetsRetention time.Duration
	// RetentionCheckInterval is offsets.retention.check.interval.ms (0: 10 minutes; <0: never).
	RetentionCheckInterval time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes (0: 4096).
	OffsetMetadataMaxBytes int
	// LoadThreads bounds how many partitions load at once at start (0: 4).
	LoadThreads int
	// ManualOwnership: the coordinator owns no partition until Elect (the broker calls Elect
	// and Resign as it gains and loses the leadership of __consumer_offsets partitions); Start
	// loads nothing. Without it every partition is owned and Start loads them all.
	ManualOwnership bool
	Logger          *slog.Logger

	// KIP-848 consumer groups. Topics returns the broker's topics (nil: none known); the
	// broker calls MetadataChanged when they change. ConsumerSessionTimeout and
	// ConsumerHeartbeatInterval are group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms (0: 45s and 5s); ConsumerMaxSize is
	// group.consumer.max.size (0: unlimited); ConsumerAssignors are group.consumer.assignors,
	// the first the default (nil: uniform, range). ConsumerRegexRefreshInterval is
	// group.consumer.regex.refresh.interval.ms (0: 10 minutes): a group whose regexes were last
	// resolved longer ago resolves them again at the next heartbeat.
	Topics                       func() map[string]TopicMeta
	ConsumerSessionTimeout       time.Duration
	ConsumerHeartbeatInterval    time.Duration
	ConsumerMaxSize              int
	ConsumerAssignors            []assignor.Assignor
	ConsumerRegexRefreshInterval time.Duration
	// MigrationPolicy is group.consumer.migration.policy: which online conversions between a
	// non-empty classic group and a consumer group happen (migrate.go). The zero value is
	// Kafka's default, bidirectional.
	MigrationPolicy MigrationPolicy

	// Share configures KIP-932 share groups (share.go).
	Share ShareConfig
}

const (
	// maxStringLen is the longest string Kafka's record schemas can hold (int16 length).
	maxStringLen = 32767
	// maxMemberProtocolBytes bounds one member's protocol names and metadata: a JoinGroup
	// above it is refused with INVALID_REQUEST rather than stored.
	maxMemberProtocolBytes = 1 << 20
	// maxAssignmentBytes bounds one member's assignment in the leader's SyncGroup.
	maxAssignmentBytes = 1 << 20
	// maxPendingMembers bounds the members holding an id from MEMBER_ID_REQUIRED that have not
	// joined yet, per group (GROUP_MAX_SIZE_REACHED beyond it, or beyond group.max.size).
	maxPendingMembers = 10000
	// newMemberJoinTimeout is how long a new member may wait in a join phase (Kafka's 5 minutes).
	newMemberJoinTimeout = 5 * time.Minute
)

// partition load states.
const (
	partLoading int8 = iota
	partLoaded
	partFailed
	partNotOwned // another broker leads this __consumer_offsets partition (ManualOwnership)
)

// Coordinator is the group coordinator of one broker: every classic consumer group whose
// __consumer_offsets partition this broker leads (on a single broker: all of them).
type Coordinator struct {
	cfg   Config
	clock Clock
	log   *slog.Logger
	parts int32

	mu     sync.Mutex
	groups map[string]*group // guarded by mu
	pstate []int8            // per-partition load state, guarded by mu
	pgen   []uint64          // per-partition ownership generation (Elect/Resign), guarded by mu
	closed bool              // guarded by mu
	// txnOpen is, per partition, which groups hold pending transactional offsets of each
	// producer id (txn.go); guarded by mu.
	txnOpen []map[int64]map[string]struct{}
	// deferred holds, per partition, the end markers CompleteTxn received while the partition
	// was loading (applied at install when the load did not read them); reloadAfter is set when
	// they overflowed maxDeferredMarkers: the partition is read again. Guarded by mu.
	deferred    [][]txnMarker
	reloadAfter []bool
	loaded      chan struct{} // closed once every partition is loaded (or failed)
	stats       coordStats    // rebalance counters (metrics.go)
	// metaVersion counts MetadataChanged calls: a consumer group that has not seen the
	// latest recomputes its subscribed topics at its next heartbeat.
	metaVersion atomic.Uint64

	quit chan struct{}
	wg   sync.WaitGroup
}

// New returns a coordinator over cfg.Store. Start loads __consumer_offsets; until a partition is
// loaded its groups answer COORDINATOR_LOAD_IN_PROGRESS.
func New(cfg Config) (*Coordinator, error) {
	if cfg.Store == nil {
		return nil, errors.New("coordinator: no store")
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Wall == nil {
		cfg.Wall = cfg.Clock.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MinSessionTimeout == 0 {
		cfg.MinSessionTimeout = 6 * time.Second
	}
	if cfg.MaxSessionTimeout == 0 {
		cfg.MaxSessionTimeout = 30 * time.Minute
	}
	if cfg.OffsetsRetention == 0 {
		cfg.OffsetsRetention = 7 * 24 * time.Hour
	}
	if cfg.RetentionCheckInterval == 0 {
		cfg.RetentionCheckInterval = 10 * time.Minute
	}
	if cfg.OffsetMetadataMaxBytes <= 0 {
		cfg.OffsetMetadataMaxBytes = 4096
	}
	if cfg.OffsetMetadataMaxBytes > maxStringLen {
		cfg.OffsetMetadataMaxBytes = maxStringLen
	}
	if cfg.LoadThreads <= 0 {
		cfg.LoadThreads = 4
	}
	if cfg.ConsumerSessionTimeout <= 0 {
		cfg.ConsumerSessionTimeout = 45 * time.Second
	}
	if cfg.ConsumerHeartbeatInterval <= 0 {
		cfg.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if cfg.ConsumerRegexRefreshInterval <= 0 {
		cfg.ConsumerRegexRefreshInterval = 10 * time.Minute
	}
	if len(cfg.ConsumerAssignors) == 0 {
		cfg.ConsumerAssignors = []assignor.Assignor{assignor.Uniform(), assignor.Range()}
	}
	parts := cfg.Store.Partitions()
	if parts <= 0 {
		return nil, fmt.Errorf("coordinator: %d offsets partitions", parts)
	}
	return &Coordinator{
		cfg: cfg, clock: cfg.Clock, log: cfg.Logger, parts: parts,
		groups:      map[string]*group{},
		pstate:      make([]int8, parts),
		pgen:        make([]uint64, parts),
		txnOpen:     make([]map[int64]map[string]struct{}, parts),
		deferred:    make([][]txnMarker, parts),
		reloadAfter: make([]bool, parts),
		loaded:      make(chan struct{}),
		quit:        make(chan struct{}),
	}, nil
}

// Partitions is the partition count of __consumer_offsets the coordinator hashes groups onto.
func (c *Coordinator) Partitions() int32 { return c.parts }

// PartitionFor is group's __consumer_offsets partition.
func (c *Coordinator) PartitionFor(group string) int32 { return PartitionFor(group, c.parts) }

// Start loads every existing partition of __consumer_offsets in the background and starts the
// offset expiry loop.
func (c *Coordinator) Start() {
	if c.cfg.ManualOwnership {
		c.mu.Lock()
		for p := range c.pstate {
			if c.pgen[p] == 0 {
				c.pstate[p] = partNotOwned
			}
		}
		c.mu.Unlock()
		close(c.loaded)
	} else {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.loadAll()
		}()
	}
	if c.cfg.RetentionCheckInterval > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.expiryLoop()
		}()
	}
}

// WaitLoaded blocks until every partition is loaded (or ctx ends).
func (c *Coordinator) WaitLoaded(ctx context.Context) error {
	select {
	case <-c.loaded:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops every group (parked JoinGroup and SyncGroup requests answer NOT_COORDINATOR) and
// the background loops. Requests after Close answer NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.quit)
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *Coordinator) expiryLoop() {
	t := time.NewTicker(c.cfg.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
			c.ExpireOffsets()
		}
	}
}

// validGroupID refuses ids Kafka's record schemas cannot hold and, for group-membership APIs,
// the empty id.
func validGroupID(id string, allowEmpty bool) *kerr.Error {
	if len(id) > maxStringLen || (id == "" && !allowEmpty) {
		return kerr.InvalidGroupID
	}
	return nil
}

// lookup returns group id's group, creating it when create is set. A nil group with a nil error
// means it does not exist.
func (c *Coordinator) lookup(id string, create bool) (*group, *kerr.Error) {
	p := PartitionFor(id, c.parts)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, kerr.NotCoordinator
	}
	switch c.pstate[p] {
	case partLoading:
		return nil, kerr.CoordinatorLoadInProgress
	case partFailed:
		return nil, kerr.CoordinatorNotAvailable
	case partNotOwned:
		return nil, kerr.NotCoordinator
	}
	g := c.groups[id]
	if g == nil && create {
		g = c.newGroupLocked(id, p)
	}
	return g, nil
}

// newGroupLocked creates and starts an Empty group. c.mu must be held.
func (c *Coordinator) newGroupLocked(id string, p int32) *group {
	g := newGroup(c, id, p)
	c.groups[id] = g
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		g.run()
	}()
	return g
}

// removeGroup forgets g (it went Dead). Called on g's goroutine.
func (c *Coordinator) removeGroup(g *group) {
	c.mu.Lock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
	c.mu.Unlock()
}

// withGroup runs f on group id's goroutine (creating the group if create is set), or, when the
// group does not exist, runs f(nil) on the caller's goroutine. A group that dies between the
// lookup and the call is looked up again (bounded).
func (c *Coordinator) withGroup(id string, create bool, f func(g *group)) *kerr.Error {
	for range 8 {
		g, err := c.lookup(id, create)
		if err != nil {
			return err
		}
		if g == nil {
			f(nil)
			return nil
		}
		if g.do(func() { f(g) }) {
			return nil
		}
	}
	return kerr.CoordinatorNotAvailable
}

// allGroups returns a snapshot of the live groups.
func (c *Coordinator) allGroups() []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	return gs
}

// Join handles a JoinGroup. It registers the member at once (in request order); the returned
// function waits for the join phase to complete (or cancel to close) and returns the response.
func (c *Coordinator) Join(req JoinRequest) func(cancel <-chan struct{}) JoinResult {
	fail := func(err *kerr.Error) func(<-chan struct{}) JoinResult {
		return func(<-chan struct{}) JoinResult { return JoinResult{Err: err, MemberID: req.MemberID, Generation: -1} }
	}
	if err := validGroupID(req.Group, false); err != nil {
		return fail(err)
	}
	if err := c.checkJoinRequest(&req); err != nil {
		return fail(err)
	}
	var wait chan JoinResult
	err := c.withGroup(req.Group, req.MemberID == "", func(g *group) {
		if g == nil {
			wait = resultNow(JoinResult{Err: kerr.UnknownMemberID, MemberID: req.MemberID, Generation: -1})
			return
		}
		wait = g.join(&req)
	})
	if err != nil {
		return fail(err)
	}
	return func(cancel <-chan struct{}) JoinResult {
		select {
		case r := <-wait:
			if err := c.awaitDurable(r.durable); err != nil {
				return JoinResult{Err: err, MemberID: req.MemberID, Generation: -1}
			}
			return r
		case <-cancel:
			return JoinResult{Err: kerr.CoordinatorNotAvailable, MemberID: req.MemberID, Generation: -1}
		}
	}
}

// checkJoinRequest validates and copies what the group will keep (the request's byte slices
// alias the connection's buffer).
func (c *Coordinator) checkJoinRequest(req *JoinRequest) *kerr.Error {
	if req.SessionTimeoutMs < int32(c.cfg.MinSessionTimeout/time.Millisecond) ||
		req.SessionTimeoutMs > int32(min(c.cfg.MaxSessionTimeout/time.Millisecond, 1<<31-1)) {
		return kerr.InvalidSessionTimeout
	}
	if req.RebalanceTimeoutMs <= 0 {
		req.RebalanceTimeoutMs = req.SessionTimeoutMs
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return kerr.InconsistentGroupProtocol
	}
	if len(req.ProtocolType) > maxStringLen || len(req.MemberID) > maxStringLen ||
		(req.InstanceID != nil && (len(*req.InstanceID) > maxStringLen || *req.InstanceID == "")) {
		return kerr.InvalidRequest
	}
	if len(req.ClientID) > 1024 {
		req.ClientID = req.ClientID[:1024] // it becomes part of member ids
	}
	total := len(req.ProtocolType)
	protos := make([]Protocol, len(req.Protocols))
	for i, p := range req.Protocols {
		if len(p.Name) > maxStringLen {
			return kerr.InvalidRequest
		}
		total += len(p.Name) + len(p.Metadata)
		protos[i] = Protocol{Name: p.Name, Metadata: append([]byte{}, p.Metadata...)}
	}
	if total > maxMemberProtocolBytes {
		return kerr.InvalidRequest
	}
	req.Protocols = protos
	return nil
}

func resultNow[T any](r T) chan T {
	ch := make(chan T, 1)
	ch <- r
	return ch
}

// Sync handles a SyncGroup: like Join, it registers at once and the returned function waits.
func (c *Coordinator) Sync(req SyncRequest) func(cancel <-chan struct{}) SyncResult {
	fail := func(err *kerr.Error) func(<-chan struct{}) SyncResult {
		return func(<-chan struct{}) SyncResult { return SyncResult{Err: err} }
	}
	if err := validGroupID(req.Group, false); err != nil {
		return fail(err)
	}
	as := make([]Assignment, len(req.Assignments))
	for i, a := range req.Assignments {
		if len(a.Assignment) > maxAssignmentBytes {
			return fail(kerr.InvalidRequest)
		}
		as[i] = Assignment{MemberID: a.MemberID, Assignment: append([]byte{}, a.Assignment...)}
	}
	req.Assignments = as
	var wait chan SyncResult
	err := c.withGroup(req.Group, false, func(g *group) {
		if g == nil {
			wait = resultNow(SyncResult{Err: kerr.UnknownMemberID})
			return
		}
		wait = g.sync(&req)
	})
	if err != nil {
		return fail(err)
	}
	return func(cancel <-chan struct{}) SyncResult {
		select {
		case r := <-wait:
			if err := c.awaitDurable(r.durable); err != nil {
				return SyncResult{Err: err}
			}
			return r
		case <-cancel:
			return SyncResult{Err: kerr.CoordinatorNotAvailable}
		}
	}
}

// Heartbeat handles a Heartbeat.
func (c *Coordinator) Heartbeat(req HeartbeatRequest) *kerr.Error {
	if err := validGroupID(req.Group, false); err != nil {
		return err
	}
	var res *kerr.Error
	if err := c.withGroup(req.Group, false, func(g *group) {
		if g == nil {
			res = kerr.UnknownMemberID
			return
		}
		res = g.heartbeat(&req)
	}); err != nil {
		return err
	}
	return res
}

// Leave handles a LeaveGroup.
func (c *Coordinator) Leave(groupID string, members []LeaveMember) LeaveResult {
	if err := validGroupID(groupID, false); err != nil {
		return LeaveResult{Err: err}
	}
	var res LeaveResult
	if err := c.withGroup(groupID, false, func(g *group) {
		if g == nil {
			res.Members = make([]*kerr.Error, len(members))
			for i := range res.Members {
				res.Members[i] = kerr.UnknownMemberID
			}
			return
		}
		res = g.leave(members)
	}); err != nil {
		return LeaveResult{Err: err}
	}
	return res
}

// Commit handles an OffsetCommit. The records are appended at once (in request order); the
// returned function waits until they are durable and returns the per-partition errors.
func (c *Coordinator) Commit(req CommitRequest) func() CommitResult {
	res := CommitResult{Errors: make([]*kerr.Error, len(req.Partitions))}
	failAll := func(err *kerr.Error) func() CommitResult {
		for i := range res.Errors {
			res.Errors[i] = err
		}
		return func() CommitResult { return res }
	}
	if err := validGroupID(req.Group, true); err != nil {
		return failAll(err)
	}
	// A member's commit to a group that does not exist gets ILLEGAL_GENERATION (Kafka's answer
	// before v9).
	return c.commitIn(res, req.Group, req.Generation < 0, func(g *group) durableMark { return g.commit(&req, res.Errors) })
}

// commitIn runs commit on group id (created when create is set; a missing group answers every
// partition ILLEGAL_GENERATION) and returns the answer, which waits until the commit's records
// are durable. res.Errors has one entry per partition.
func (c *Coordinator) commitIn(res CommitResult, id string, create bool, commit func(g *group) durableMark) func() CommitResult {
	var mark durableMark
	err := c.withGroup(id, create, func(g *group) {
		if g == nil {
			for i := range res.Errors {
				res.Errors[i] = kerr.IllegalGeneration
			}
			return
		}
		mark = commit(g)
	})
	if err != nil {
		for i := range res.Errors {
			res.Errors[i] = err
		}
		return func() CommitResult { return res }
	}
	return func() CommitResult {
		if err := c.awaitDurable(mark); err != nil {
			for i := range res.Errors {
				if res.Errors[i] == nil {
					res.Errors[i] = err
				}
			}
		}
		return res
	}
}

// Fetch handles one group of an OffsetFetch: topics nil means every committed partition, else
// the answer lists the requested partitions in request order (-1 for those with no offset).
// The returned function waits until the offsets it read are durable.
func (c *Coordinator) Fetch(groupID string, topics []FetchTopic) func() FetchResult {
	return c.FetchStable(groupID, topics, false)
}

// FetchStable is Fetch with OffsetFetch v7+'s require_stable: a partition with pending
// transactional offsets answers UNSTABLE_OFFSET_COMMIT (offset -1) instead of its committed
// offset, as Kafka does; the client retries until the transaction completes.
func (c *Coordinator) FetchStable(groupID string, topics []FetchTopic, requireStable bool) func() FetchResult {
	return c.FetchMember(groupID, topics, requireStable, nil, -1)
}

// FetchMember is FetchStable with OffsetFetch v9+'s member id and epoch: a consumer group
// checks them as Kafka's ConsumerGroup.validateOffsetFetch does (UNKNOWN_MEMBER_ID,
// STALE_MEMBER_EPOCH); a nil member id with a negative epoch (admin tools) is always accepted.
func (c *Coordinator) FetchMember(groupID string, topics []FetchTopic, requireStable bool, memberID *string, memberEpoch int32) func() FetchResult {
	if err := validGroupID(groupID, true); err != nil {
		return func() FetchResult { return FetchResult{Err: err} }
	}
	var res FetchResult
	var mark durableMark
	err := c.withGroup(groupID, false, func(g *group) {
		if g == nil {
			res.Offsets = unknownOffsets(topics)
			return
		}
		if g.typ == TypeConsumer {
			if err := g.cgValidateFetch(memberID, memberEpoch); err != nil {
				res.Err = err
				return
			}
		}
		res.Offsets, mark = g.fetch(topics, requireStable)
	})
	if err != nil {
		return func() FetchResult { return FetchResult{Err: err} }
	}
	return func() FetchResult {
		if res.Err != nil {
			return res
		}
		if err := c.awaitDurable(mark); err != nil {
			return FetchResult{Err: err}
		}
		return res
	}
}

func unknownOffsets(topics []FetchTopic) []FetchedOffset {
	var out []FetchedOffset
	for _, t := range topics {
		for _, p := range t.Partitions {
			out = append(out, FetchedOffset{TopicPartition: TopicPartition{t.Topic, p}, Offset: -1, LeaderEpoch: -1})
		}
	}
	return out
}

// Describe handles one group of a DescribeGroups: a classic group's description; a group that
// does not exist, is dead or is of another type (consumer, share) is Dead with NotFound set.
func (c *Coordinator) Describe(groupID string) GroupDescription {
	d := GroupDescription{Group: groupID, State: Dead.String(), NotFound: "Group " + groupID + " not found."}
	if err := validGroupID(groupID, true); err != nil {
		d.Err, d.NotFound = err, ""
		return d
	}
	if err := c.withGroup(groupID, false, func(g *group) {
		switch {
		case g == nil || g.state == Dead:
		case g.typ != TypeClassic:
			d.NotFound = "Group " + groupID + " is not a classic group."
		default:
			d = g.describe()
		}
	}); err != nil {
		d.Err, d.NotFound = err, ""
	}
	return d
}

// List handles ListGroups: every group, filtered by state and type (case-insensitive, empty
// filters match everything). It fails with COORDINATOR_LOAD_IN_PROGRESS while loading.
func (c *Coordinator) List(states, types []string) ([]GroupListing, *kerr.Error) {
	c.mu.Lock()
	for _, s := range c.pstate {
		if s == partLoading {
			c.mu.Unlock()
			return nil, kerr.CoordinatorLoadInProgress
		}
	}
	c.mu.Unlock()
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	var out []GroupListing
	for _, g := range c.allGroups() {
		var l GroupListing
		ok := g.do(func() { l = g.listing() })
		if ok && l.State != Dead.String() && match(states, l.State) && match(types, l.Type) {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// DeleteGroup handles one group of a DeleteGroups: only an empty group can be deleted; its
// offsets and metadata get tombstones. The returned function waits until they are durable.
func (c *Coordinator) DeleteGroup(groupID string) func() *kerr.Error {
	if err := validGroupID(groupID, true); err != nil {
		return func() *kerr.Error { return err }
	}
	if f, ok := c.deleteShareGroup(groupID); ok {
		return f
	}
	var res *kerr.Error
	var mark durableMark
	if err := c.withGroup(groupID, false, func(g *group) {
		if g == nil {
			res = kerr.GroupIDNotFound
			return
		}
		res, mark = g.delete()
	}); err != nil {
		return func() *kerr.Error { return err }
	}
	return func() *kerr.Error {
		if res == nil {
			res = c.awaitDurable(mark)
		}
		return res
	}
}

// DeleteOffsets handles OffsetDelete: a group-level error, or one error per partition.
func (c *Coordinator) DeleteOffsets(groupID string, parts []TopicPartition) (*kerr.Error, []*kerr.Error, func() *kerr.Error) {
	noWait := func() *kerr.Error { return nil }
	if err := validGroupID(groupID, true); err != nil {
		return err, nil, noWait
	}
	var gerr *kerr.Error
	var perr []*kerr.Error
	var mark durableMark
	if err := c.withGroup(groupID, false, func(g *group) {
		if g == nil {
			gerr = kerr.GroupIDNotFound
			return
		}
		gerr, perr, mark = g.deleteOffsets(parts)
	}); err != nil {
		return err, nil, noWait
	}
	return gerr, perr, func() *kerr.Error { return c.awaitDurable(mark) }
}

// ExpireOffsets runs one offset-expiry pass over every group (offsets.retention.minutes), and
// removes empty groups left with no offsets.
func (c *Coordinator) ExpireOffsets() {
	now := c.cfg.Wall()
	for _, g := range c.allGroups() {
		g.do(func() { g.expire(now) })
	}
}

// durableMark is the offset of a group's __consumer_offsets partition up to which a response
// must wait for durability. A zero mark needs no wait.
type durableMark struct {
	log  OffsetsLog
	upTo int64
}

// awaitDurable waits until mark is durable. It runs on the caller's goroutine (the
// connection's writer, for a deferred reply), never on a group's.
func (c *Coordinator) awaitDurable(mark durableMark) *kerr.Error {
	if mark.log == nil || mark.upTo <= 0 {
		return nil
	}
	if err := mark.log.AwaitDurable(mark.upTo); err != nil {
		c.log.Warn("__consumer_offsets write failed", "err", err)
		return kerr.NotCoordinator
	}
	return nil
}

// Generation returns group's current generation (tests, tools).
func (c *Coordinator) Generation(groupID string) (int32, bool) {
	var gen int32
	found := false
	_ = c.withGroup(groupID, false, func(g *group) {
		if g != nil {
			gen, found = g.generation, true
		}
	})
	return gen, found
}

// Leader returns the member id of group's current leader (tests, tools).
func (c *Coordinator) Leader(groupID string) (string, bool) {
	var leader string
	found := false
	_ = c.withGroup(groupID, false, func(g *group) {
		if g != nil {
			leader, found = g.leader, g.leader != ""
		}
	})
	return leader, found
}

// Elect makes the coordinator own partition p (this broker now leads it): its groups load from
// the store in the background; meanwhile they answer COORDINATOR_LOAD_IN_PROGRESS. Owning it
// already is a no-op.
func (c *Coordinator) Elect(p int32) {
	c.mu.Lock()
	if c.closed || p < 0 || p >= c.parts || c.pstate[p] == partLoading || c.pstate[p] == partLoaded {
		c.mu.Unlock()
		return
	}
	c.pstate[p] = partLoading
	c.pgen[p]++
	gen := c.pgen[p]
	c.mu.Unlock()
	l, ok := c.cfg.Store.Existing(p)
	if !ok {
		// Nothing stored yet: owned and loaded at once.
		c.mu.Lock()
		if c.pgen[p] == gen {
			c.pstate[p] = partLoaded
		}
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		start := time.Now()
		ld, err := c.loadPartition(p, l)
		c.mu.Lock()
		current := c.pgen[p] == gen && !c.closed
		c.mu.Unlock()
		if !current {
			return
		}
		if err != nil {
			c.log.Error("loading __consumer_offsets partition failed; its groups are unavailable", "partition", p, "err", err)
			c.setPartState(p, partFailed)
			return
		}
		c.installGroupsGen(p, l, ld, gen)
		c.log.Info("coordinator elected for __consumer_offsets partition", "partition", p, "groups", len(ld.groups), "took", time.Since(start))
	}()
}

// Resign gives up partition p: its groups stop (parked requests answer NOT_COORDINATOR) and
// requests for them answer NOT_COORDINATOR until Elect.
func (c *Coordinator) Resign(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || p < 0 || p >= c.parts || c.pstate[p] == partNotOwned {
		return
	}
	c.pstate[p] = partNotOwned
	c.pgen[p]++
	c.txnOpen[p] = nil
	c.deferred[p] = nil
	c.reloadAfter[p] = false
	n := 0
	for id, g := range c.groups {
		if g.partition == p {
			delete(c.groups, id)
			close(g.resigned)
			n++
		}
	}
	c.log.Info("coordinator resigned __consumer_offsets partition", "partition", p, "groups", n)
}
