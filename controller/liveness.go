package controller

// Liveness and fencing: this broker's registration and heartbeats (heartbeatLoop), and on the
// raft leader the sessions of every broker (heartbeat, leaderLoop, checkSessions), the voters
// raft cannot reach (watchPeers, peerReachable) and fencing of brokers whose session ended.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
)

func (c *Controller) heartbeat(ctx context.Context, req *request, principal string) *response {
	id := req.BrokerID
	img := c.Image()
	b, ok := img.Brokers[id]
	secured := c.cfg.Security != nil
	if secured && ok {
		// Kafka's rule for BrokerRegistration: the id belongs to the principal that registered
		// it, and a new incarnation takes it over only once the old one is fenced or its
		// session is over. Refused heartbeats do not refresh the session.
		if b.Principal != "" && b.Principal != principal {
			// A registration whose broker is gone (fenced, session over) may be taken over by
			// another allowed principal: a broker replaced, or given a new certificate subject.
			// A live broker's id cannot.
			if !req.Register || !b.Fenced || c.sessionValid(id) {
				c.log.Warn("controller: heartbeat refused: broker id registered by another principal", "broker", id, "principal", principal)
				return errorResponse(kerrf(kerr.ClusterAuthorizationFailed, "broker %d is registered by another principal than %s", id, principal))
			}
			c.log.Warn("controller: a fenced broker id is registered by another principal", "broker", id, "principal", principal, "was", b.Principal)
		}
		if b.Incarnation != "" && req.Incarnation != b.Incarnation {
			if !req.Register {
				return errorResponse(kerrf(kerr.StaleBrokerEpoch, "broker %d was registered again by another process", id))
			}
			if !b.Fenced && c.sessionValid(id) {
				return errorResponse(kerrf(kerr.DuplicateBrokerRegistration, "broker %d is registered by another live process; retry once its session (%v) is over", id, c.cfg.SessionTimeout))
			}
		}
	}
	c.lmu.Lock()
	c.lastHB[id] = time.Now()
	knownAddr := c.nonvoters[id]
	c.lmu.Unlock()
	c.noteReplicaIndex(id, req.LastIndex) // quorum.go
	if _, voter := c.voters[id]; !voter && req.Addr != "" && knownAddr != req.Addr && len(c.voters) > 0 {
		c.ensureNonvoter(id, req.Addr)
	}
	var cmd *command
	switch {
	case req.Register || !ok || !slices.Equal(b.Endpoints, req.Endpoints) || (secured && b.Incarnation != req.Incarnation) || b.Rack != req.Rack:
		cmd = &command{Op: opRegister, BrokerID: id, Endpoints: req.Endpoints, Unclean: c.uncleanTopics(img), Incarnation: req.Incarnation, Rack: req.Rack}
		if secured {
			cmd.Principal = principal
		}
	case b.Fenced:
		cmd = &command{Op: opUnfence, BrokerID: id, Unclean: c.uncleanTopics(img)}
	default:
		return &response{Epoch: b.Epoch}
	}
	res, errResp := c.leaderApply(ctx, cmd)
	if errResp != nil {
		return errResp
	}
	if cmd.Op == opRegister {
		c.log.Info("broker registered", "broker", id, "epoch", res.epoch)
		return &response{Index: res.index, Epoch: res.epoch}
	}
	c.log.Info("broker unfenced", "broker", id)
	return &response{Index: res.index, Epoch: b.Epoch}
}

// sessionValid reports whether broker id heartbeated within the session timeout (on this
// leader; a newly elected leader gives every broker a fresh session).
func (c *Controller) sessionValid(id int32) bool {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	last := c.lastHB[id]
	if last.Before(c.leaderSince) {
		last = c.leaderSince
	}
	return time.Since(last) <= c.cfg.SessionTimeout
}

// ensureNonvoter adds a registering broker that is not a voter to the raft configuration as a
// non-voter, so that it receives the metadata log.
func (c *Controller) ensureNonvoter(id int32, addr string) {
	sid := raft.ServerID(strconv.Itoa(int(id)))
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == sid {
			if s.Suffrage == raft.Voter || string(s.Address) == addr {
				c.lmu.Lock()
				c.nonvoters[id] = addr
				c.lmu.Unlock()
				return
			}
		}
	}
	if err := c.raft.AddNonvoter(sid, raft.ServerAddress(addr), 0, 5*time.Second).Error(); err != nil {
		c.log.Warn("controller: add non-voter failed", "broker", id, "addr", addr, "err", err)
		return
	}
	c.log.Info("controller: added non-voter", "broker", id, "addr", addr)
	c.lmu.Lock()
	c.nonvoters[id] = addr
	c.lmu.Unlock()
}

func (c *Controller) uncleanTopics(img *Image) []string {
	if c.cfg.UncleanLeaderElection == nil {
		return nil
	}
	var out []string
	for _, n := range sortedTopicNames(img.Topics) {
		if c.cfg.UncleanLeaderElection(n) {
			out = append(out, n)
		}
	}
	return out
}

// heartbeatLoop registers this broker and then heartbeats it to the active controller.
func (c *Controller) heartbeatLoop() {
	defer c.wg.Done()
	registered := false
	for {
		if !c.stopHB.Load() {
			c.hbMu.Lock()
			if !c.stopHB.Load() {
				// Half a session at most: a heartbeat stuck on a controller that stopped
				// answering (paused, partitioned) must give up in time for the next one to
				// reach the newly elected controller within the fresh session it gives every
				// broker when it takes over (leaderLoop), or that controller fences them all.
				ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SessionTimeout/2)
				hb := &request{
					Op:          reqHeartbeat,
					BrokerID:    c.cfg.NodeID,
					Endpoints:   c.cfg.Endpoints,
					Addr:        c.selfAddr,
					Register:    !registered,
					Incarnation: c.incarnation,
					Rack:        c.cfg.Rack,
					LastIndex:   c.reportedLastIndex(), // quorum.go
				}
				resp, err := c.submit(ctx, hb)
				c.noteHeartbeatAnswer(resp, err) // quorum.go
				cancel()
				switch {
				case err == nil && !registered:
					registered = true
					c.regEpoch.Store(resp.Epoch)
				case err != nil && c.ctx.Err() == nil:
					if errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.DuplicateBrokerRegistration) || errors.Is(err, kerr.StaleBrokerEpoch) {
						c.log.Info("controller refused this broker's heartbeat", "err", err)
					} else {
						c.log.Debug("controller heartbeat failed", "err", err)
					}
				}
			}
			c.hbMu.Unlock()
		}
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(c.cfg.HeartbeatInterval):
		}
	}
}

// leaderLoop does the raft leader's duties: on taking over it gives every broker a fresh session;
// then it fences brokers whose session expired.
func (c *Controller) leaderLoop() {
	defer c.wg.Done()
	tick := min(c.cfg.HeartbeatInterval, c.cfg.SessionTimeout/5, 50*time.Millisecond)
	tick = max(tick, 5*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	var maint leaderMaint // leader election and balance (elect.go)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		if !c.isLeader() {
			c.lmu.Lock()
			c.leading = false
			c.lmu.Unlock()
			continue
		}
		if !c.leadingNow() {
			// Make sure every committed entry is applied before judging the image.
			term := c.raft.CurrentTerm()
			if err := c.raft.Barrier(c.cfg.SessionTimeout).Error(); err != nil {
				continue
			}
			if c.Image().ClusterID == "" {
				ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SessionTimeout)
				_, errResp := c.leaderApply(ctx, &command{Op: opInitCluster, ClusterID: c.newClusterID()})
				cancel()
				if errResp != nil {
					c.log.Warn("controller: cannot set the cluster id", "err", errResp.Msg)
					continue
				}
			}
			c.lmu.Lock()
			c.leading = true
			c.leadingTerm = term
			c.leaderSince = time.Now()
			c.lastHB = map[int32]time.Time{}
			c.nonvoters = map[int32]string{}
			c.lmu.Unlock()
			c.log.Info("controller: became active controller")
			continue
		}
		c.checkSessions()
		c.maintainLeaders(&maint)
	}
}

func (c *Controller) newClusterID() string {
	if c.cfg.ClusterID != "" {
		return c.cfg.ClusterID
	}
	var u [16]byte
	_, _ = rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// leadingNow reports whether this node is the raft leader and has taken over as the active
// controller in the current term.
func (c *Controller) leadingNow() bool {
	c.lmu.Lock()
	leading, term := c.leading, c.leadingTerm
	c.lmu.Unlock()
	return leading && c.isLeader() && c.raft.CurrentTerm() == term
}

// watchPeers records which voters raft's heartbeats fail to reach (raft observations), so a
// broker whose process died is fenced after one and a half broker heartbeat intervals of silence
// instead of the whole session timeout.
func (c *Controller) watchPeers() {
	defer c.wg.Done()
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	c.raft.RegisterObserver(obs)
	defer c.raft.DeregisterObserver(obs)
	for {
		select {
		case <-c.ctx.Done():
			return
		case o := <-ch:
			var peer raft.ServerID
			failed := false
			switch d := o.Data.(type) {
			case raft.FailedHeartbeatObservation:
				peer, failed = d.PeerID, true
			case raft.ResumedHeartbeatObservation:
				peer = d.PeerID
			}
			c.peerReachable(peer, !failed)
		}
	}
}

// peerReachable records whether raft reaches voter peer (raft observations, and the transport's
// dial failures, which the patient transport would otherwise hide from raft).
func (c *Controller) peerReachable(peer raft.ServerID, ok bool) {
	id, err := strconv.Atoi(string(peer))
	if err != nil {
		return
	}
	c.lmu.Lock()
	defer c.lmu.Unlock()
	if c.unreachable == nil {
		c.unreachable = map[int32]time.Time{}
	}
	if _, seen := c.unreachable[int32(id)]; !ok && !seen {
		c.unreachable[int32(id)] = time.Now()
	} else if ok && seen {
		delete(c.unreachable, int32(id))
	}
}

func (c *Controller) checkSessions() {
	img := c.Image()
	now := time.Now()
	var expired []int32
	reason := map[int32]string{}
	c.lmu.Lock()
	for id, b := range img.Brokers {
		if b.Fenced {
			continue
		}
		last := c.lastHB[id]
		if last.Before(c.leaderSince) {
			last = c.leaderSince
		}
		_, unreachable := c.unreachable[id]
		switch {
		case now.Sub(last) > c.cfg.SessionTimeout:
			expired = append(expired, id)
			reason[id] = "session timeout"
		case unreachable && now.Sub(last) > c.cfg.HeartbeatInterval*3/2:
			// Its raft port refuses connections and it missed two heartbeats: the process
			// is gone; waiting out the session timeout would only delay the failover.
			expired = append(expired, id)
			reason[id] = "unreachable and silent"
		}
	}
	c.lmu.Unlock()
	slices.Sort(expired)
	for _, id := range expired {
		c.log.Info("controller: fencing broker", "broker", id, "reason", reason[id], "timeout", c.cfg.SessionTimeout)
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SessionTimeout)
		_, errResp := c.leaderApply(ctx, &command{Op: opFence, BrokerID: id, Unclean: c.uncleanTopics(img)})
		cancel()
		if errResp != nil {
			c.log.Warn("controller: fence failed", "broker", id, "err", errResp.Msg)
			return
		}
	}
}
