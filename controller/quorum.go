package controller

// The controller quorum as Kafka's DescribeQuorum, AddRaftVoter and RemoveRaftVoter show and
// change it, over hashicorp/raft.
//
// DescribeQuorum (Controller.DescribeQuorum, answered by the raft leader): the leader id, the
// leader epoch (the raft term), the high watermark (the raft commit index), and every replica
// of the metadata log: the voters and the observers (raft non-voters: brokers that are not
// voters), each with its log end (its last raft log index) and, as Kafka's last fetch and last
// caught-up timestamps, the time its last report reached the leader and the last time that
// report showed it at or past the leader's commit index. hashicorp/raft does not expose its
// followers' match indexes, so every node reports its last log index in the heartbeat it sends
// the active controller every broker.heartbeat.interval.ms (500 ms by default): a follower's
// log end is that old at most (plus the heartbeat's own latency); a replica not heard from
// since this node became the active controller has log end -1 and timestamps -1. A node sends
// its index only once the current leader's heartbeat answer said it takes it
// (response.TakesLastIndex), so a leader of an older version, whose strict decoder would refuse
// the field, never receives it during a rolling upgrade. The leader's
// own entry is current. Raft indexes are inclusive (the index of the last entry), where Kafka's
// offsets are exclusive; lags computed from them are the same.
//
// Voters (Controller.AddVoter, RemoveVoter): raft's AddVoter and RemoveServer on the leader.
// The configuration is in the raft log and survives restarts. A new node joins as a voter by
// starting with controller.quorum.voters naming the current voters (not itself) and its own
// controller.listener address: it is not a voter, so it does not bootstrap; it registers, the
// leader adds it as a non-voter (liveness.go ensureNonvoter) and it receives the log; AddVoter
// then promotes it. A removed voter must not be restarted with its old data (it would still
// believe it is a voter): wipe its metadata directory or leave it stopped.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
)

// QuorumInfo is the metadata quorum as DescribeQuorum reports it.
type QuorumInfo struct {
	LeaderID      int32          `json:"leader"`
	LeaderEpoch   int64          `json:"epoch"`          // the raft term
	HighWatermark int64          `json:"high_watermark"` // the raft commit index
	Voters        []ReplicaState `json:"voters"`
	Observers     []ReplicaState `json:"observers,omitempty"`
}

// ReplicaState is one replica of the metadata log. Times are Unix milliseconds; -1 is unknown.
type ReplicaState struct {
	ID int32 `json:"id"`
	// Addr is the replica's raft address (its controller listener).
	Addr           string `json:"addr"`
	LogEndOffset   int64  `json:"leo"`
	LastFetchMs    int64  `json:"last_fetch_ms"`
	LastCaughtUpMs int64  `json:"last_caught_up_ms"`
}

// quorumState is what the active controller heard from each replica.
type quorumState struct {
	// mu guards reports; held only for map updates and copies.
	mu      sync.Mutex
	reports map[int32]replicaReport
	// indexLeader is the raft address of the leader whose last heartbeat answer said it takes
	// log ends in heartbeats (request.LastIndex); nil: send none.
	indexLeader atomic.Pointer[string]
}

type replicaReport struct {
	lastIndex uint64
	at        time.Time // when the report arrived
	caughtUp  time.Time // last report at or past the leader's commit index
}

// noteReplicaIndex records, on the active controller, a replica's reported last log index.
func (c *Controller) noteReplicaIndex(id int32, lastIndex uint64) {
	if lastIndex == 0 {
		return
	}
	now := time.Now()
	commit := c.raft.CommitIndex()
	c.quorum.mu.Lock()
	defer c.quorum.mu.Unlock()
	if c.quorum.reports == nil {
		c.quorum.reports = map[int32]replicaReport{}
	}
	r := c.quorum.reports[id]
	r.lastIndex, r.at = lastIndex, now
	if lastIndex >= commit {
		r.caughtUp = now
	}
	c.quorum.reports[id] = r
}

// reportedLastIndex is the last raft index this node reports in its heartbeat, or 0 (the field
// left out) unless the current raft leader said in its last heartbeat answer that it takes it:
// an active controller of an older version decodes requests strictly and would refuse the
// field, so a rolling upgrade never sends it to one.
func (c *Controller) reportedLastIndex() uint64 {
	ok := c.quorum.indexLeader.Load()
	if ok == nil {
		return 0
	}
	if addr, _ := c.raft.LeaderWithID(); string(addr) != *ok {
		return 0
	}
	return c.raft.LastIndex()
}

// noteHeartbeatAnswer remembers whether the raft leader takes log ends in heartbeats.
func (c *Controller) noteHeartbeatAnswer(resp *response, err error) {
	if err != nil || resp == nil || !resp.TakesLastIndex {
		c.quorum.indexLeader.Store(nil)
		return
	}
	addr, _ := c.raft.LeaderWithID()
	a := string(addr)
	if a == "" {
		a = c.selfAddr
	}
	c.quorum.indexLeader.Store(&a)
}

// DescribeQuorum returns the quorum as the raft leader sees it.
func (c *Controller) DescribeQuorum(ctx context.Context) (*QuorumInfo, error) {
	resp, err := c.submit(ctx, &request{Op: reqDescribeQuorum})
	if err != nil {
		return nil, err
	}
	if resp.Quorum == nil {
		return nil, kerrf(kerr.UnknownServerError, "describe quorum: no answer")
	}
	return resp.Quorum, nil
}

// AddVoter makes node id a voter of the quorum at addr (its controller listener; empty: the
// address it registered as a non-voter with). It returns once raft committed the new
// configuration.
func (c *Controller) AddVoter(ctx context.Context, id int32, addr string) error {
	if c.single() {
		return kerrf(kerr.InvalidRequest, "a single-node controller (no controller.quorum.voters) cannot add voters")
	}
	if id < 0 {
		return kerrf(kerr.InvalidRequest, "voter id %d", id)
	}
	if addr != "" {
		if _, _, err := net.SplitHostPort(addr); err != nil || len(addr) > maxAddrLen {
			return kerrf(kerr.InvalidRequest, "voter address %q is not host:port", addr)
		}
	}
	_, err := c.submit(ctx, &request{Op: reqAddVoter, BrokerID: id, Addr: addr})
	return err
}

// RemoveVoter removes node id from the quorum's voters (and from its replicas).
func (c *Controller) RemoveVoter(ctx context.Context, id int32) error {
	if c.single() {
		return kerrf(kerr.InvalidRequest, "a single-node controller (no controller.quorum.voters) cannot remove voters")
	}
	if id < 0 {
		return kerrf(kerr.InvalidRequest, "voter id %d", id)
	}
	_, err := c.submit(ctx, &request{Op: reqRemoveVoter, BrokerID: id})
	return err
}

// executeQuorum runs a quorum request on the raft leader.
func (c *Controller) executeQuorum(ctx context.Context, req *request) *response {
	switch req.Op {
	case reqDescribeQuorum:
		q, err := c.describeQuorumLocal()
		if err != nil {
			return c.notController(err)
		}
		return &response{Quorum: q}
	case reqAddVoter:
		return c.addVoterLocal(ctx, req.BrokerID, req.Addr)
	case reqRemoveVoter:
		return c.removeVoterLocal(ctx, req.BrokerID)
	}
	return errorResponse(kerrf(kerr.InvalidRequest, "unknown quorum request %q", req.Op))
}

// raftServers returns raft's current configuration.
func (c *Controller) raftServers() ([]raft.Server, error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raft configuration: %w", err)
	}
	return f.Configuration().Servers, nil
}

func (c *Controller) describeQuorumLocal() (*QuorumInfo, error) {
	servers, err := c.raftServers()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	q := &QuorumInfo{
		LeaderID:      c.cfg.NodeID,
		LeaderEpoch:   int64(c.raft.CurrentTerm()),
		HighWatermark: int64(c.raft.CommitIndex()),
	}
	c.quorum.mu.Lock()
	reports := make(map[int32]replicaReport, len(c.quorum.reports))
	for id, r := range c.quorum.reports {
		reports[id] = r
	}
	c.quorum.mu.Unlock()
	c.lmu.Lock()
	since := c.leaderSince
	c.lmu.Unlock()
	inConfig := map[int32]bool{}
	for _, s := range servers {
		n, err := strconv.ParseInt(string(s.ID), 10, 32)
		if err != nil {
			continue
		}
		id := int32(n)
		inConfig[id] = true
		st := ReplicaState{ID: id, Addr: string(s.Address), LogEndOffset: -1, LastFetchMs: -1, LastCaughtUpMs: -1}
		if id == c.cfg.NodeID {
			st.LogEndOffset = int64(c.raft.LastIndex())
			st.LastFetchMs, st.LastCaughtUpMs = now.UnixMilli(), now.UnixMilli()
		} else if r, ok := reports[id]; ok && !r.at.Before(since) {
			st.LogEndOffset = int64(r.lastIndex)
			st.LastFetchMs = r.at.UnixMilli()
			if !r.caughtUp.IsZero() {
				st.LastCaughtUpMs = r.caughtUp.UnixMilli()
			}
		}
		if s.Suffrage == raft.Voter {
			q.Voters = append(q.Voters, st)
		} else {
			q.Observers = append(q.Observers, st)
		}
	}
	// Registered brokers outside raft's configuration (not yet added as non-voters) are
	// observers too.
	for id := range c.Image().Brokers {
		if inConfig[id] {
			continue
		}
		st := ReplicaState{ID: id, LogEndOffset: -1, LastFetchMs: -1, LastCaughtUpMs: -1}
		if r, ok := reports[id]; ok && !r.at.Before(since) {
			st.LogEndOffset, st.LastFetchMs = int64(r.lastIndex), r.at.UnixMilli()
		}
		q.Observers = append(q.Observers, st)
	}
	byID := func(a, b ReplicaState) int { return int(a.ID) - int(b.ID) }
	slices.SortFunc(q.Voters, byID)
	slices.SortFunc(q.Observers, byID)
	return q, nil
}

// addVoterLocal promotes (or adds) node id to a voter at addr, on the raft leader.
func (c *Controller) addVoterLocal(ctx context.Context, id int32, addr string) *response {
	servers, err := c.raftServers()
	if err != nil {
		return c.notController(err)
	}
	sid := raft.ServerID(strconv.Itoa(int(id)))
	for _, s := range servers {
		if s.ID != sid {
			continue
		}
		if s.Suffrage == raft.Voter {
			return errorResponse(kerrf(kerr.DuplicateVoter, "node %d is already a voter of the quorum (at %s)", id, s.Address))
		}
		if addr == "" {
			addr = string(s.Address)
		}
	}
	if addr == "" {
		c.lmu.Lock()
		addr = c.nonvoters[id]
		c.lmu.Unlock()
	}
	if addr == "" {
		return errorResponse(kerrf(kerr.InvalidRequest, "node %d has no known controller address: start it (with controller.listener set) so it registers, or give its address", id))
	}
	c.log.Info("controller: adding a voter", "node", id, "addr", addr)
	if err := c.waitRaft(ctx, c.raft.AddVoter(sid, raft.ServerAddress(addr), 0, raftChangeTimeout(ctx))); err != nil {
		return c.quorumChangeFailed("add voter", id, err)
	}
	c.log.Info("controller: added a voter", "node", id, "addr", addr)
	return &response{}
}

// removeVoterLocal removes node id from the quorum, on the raft leader.
func (c *Controller) removeVoterLocal(ctx context.Context, id int32) *response {
	servers, err := c.raftServers()
	if err != nil {
		return c.notController(err)
	}
	sid := raft.ServerID(strconv.Itoa(int(id)))
	voters, found := 0, false
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			voters++
			if s.ID == sid {
				found = true
			}
		}
	}
	switch {
	case !found:
		return errorResponse(kerrf(kerr.VoterNotFound, "node %d is not a voter of the quorum", id))
	case voters == 1:
		return errorResponse(kerrf(kerr.InvalidRequest, "node %d is the last voter of the quorum", id))
	}
	c.log.Info("controller: removing a voter", "node", id)
	if err := c.waitRaft(ctx, c.raft.RemoveServer(sid, 0, raftChangeTimeout(ctx))); err != nil {
		return c.quorumChangeFailed("remove voter", id, err)
	}
	c.lmu.Lock()
	delete(c.nonvoters, id)
	c.lmu.Unlock()
	c.log.Info("controller: removed a voter", "node", id)
	return &response{}
}

// raftChangeTimeout bounds how long raft may wait to enqueue a configuration change.
func raftChangeTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return 10 * time.Second
}

// waitRaft waits for a raft future, bounded by ctx.
func (c *Controller) waitRaft(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Controller) quorumChangeFailed(what string, id int32, err error) *response {
	c.log.Warn("controller: quorum change failed", "op", what, "node", id, "err", err)
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		return c.notController(fmt.Errorf("%s %d: %w", what, id, err))
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, raft.ErrEnqueueTimeout) {
		return errorResponse(kerrf(kerr.RequestTimedOut, "%s %d: %v", what, id, err))
	}
	return errorResponse(kerrf(kerr.UnknownServerError, "%s %d: %v", what, id, err))
}
