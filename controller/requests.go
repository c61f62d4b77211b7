package controller

// Request handling: the public operations (topics, partitions, configs, ISR changes, producer
// ids, records, sync) become requests that run on the raft leader, locally or forwarded over
// the controller RPC; on the leader a request is authorized, planned and appended to the raft
// log as a command.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
)

// CreateTopic creates a topic (placed round-robin over the unfenced brokers unless an assignment
// is given) and returns it as created.
func (c *Controller) CreateTopic(ctx context.Context, r CreateTopicRequest) (TopicInfo, error) {
	resp, err := c.submit(ctx, &request{Op: reqCreateTopic, CreateTopic: &r})
	if err != nil {
		return TopicInfo{}, err
	}
	if resp.Topic == nil {
		return TopicInfo{}, kerrf(kerr.UnknownServerError, "create topic %q: no topic in response", r.Name)
	}
	return *cloneTopic(resp.Topic), nil // on the leader, resp.Topic is the image's own
}

// DeleteTopic deletes a topic.
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	_, err := c.submit(ctx, &request{Op: reqDeleteTopic, Name: name})
	return err
}

// CreatePartitions grows topic name to total partitions; assignment optionally gives the replicas
// of each new partition.
func (c *Controller) CreatePartitions(ctx context.Context, name string, total int32, assignment [][]int32) error {
	_, err := c.submit(ctx, &request{Op: reqCreatePartitions, Name: name, Total: total, Assignment: assignment})
	return err
}

// AlterTopicConfigs replaces the configs of topic name.
func (c *Controller) AlterTopicConfigs(ctx context.Context, name string, configs map[string]string) error {
	if configs == nil {
		configs = map[string]string{}
	}
	_, err := c.submit(ctx, &request{Op: reqAlterConfigs, Name: name, Configs: configs})
	return err
}

// AlterPartition changes a partition's ISR on behalf of its leader.
func (c *Controller) AlterPartition(ctx context.Context, r AlterPartitionRequest) (PartitionInfo, error) {
	resp, err := c.submit(ctx, &request{Op: reqAlterPartition, AlterPartition: &r})
	if err != nil {
		return PartitionInfo{}, err
	}
	if resp.Partition == nil {
		return PartitionInfo{}, kerrf(kerr.UnknownServerError, "alter partition: no partition in response")
	}
	return *resp.Partition, nil
}

// AllocateProducerIDs reserves a block of n producer ids and returns the first. Blocks are
// never handed out twice, across restarts too.
func (c *Controller) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	if n <= 0 || n > 1<<30 {
		return 0, kerrf(kerr.InvalidRequest, "cannot allocate %d producer ids", n)
	}
	resp, err := c.submit(ctx, &request{Op: reqAllocPIDs, N: n})
	if err != nil {
		return 0, err
	}
	return resp.First, nil
}

func (c *Controller) isLeader() bool { return c.raft.State() == raft.Leader }

// target picks where to send a request: the known raft leader, else the last hint, else the
// voters in turn.
func (c *Controller) target() string {
	if addr, _ := c.raft.LeaderWithID(); addr != "" && string(addr) != c.selfAddr {
		return string(addr)
	}
	if h := c.hint.Load(); h != nil && *h != c.selfAddr {
		return *h
	}
	if len(c.peers) == 0 {
		return ""
	}
	for range len(c.peers) {
		p := c.peers[int(c.rr.Add(1))%len(c.peers)]
		if p != c.selfAddr {
			return p
		}
	}
	return ""
}

// submit executes req on the raft leader (locally, or forwarded over the controller RPC),
// retrying on leader changes until ctx ends. On success it waits (bounded by ctx) until the local
// image reflects the change.
func (c *Controller) submit(ctx context.Context, req *request) (*response, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()

	backoff := 10 * time.Millisecond
	var lastErr error
	for {
		if ctx.Err() != nil {
			if c.ctx.Err() != nil {
				return nil, fmt.Errorf("controller closed: %w", kerr.BrokerNotAvailable)
			}
			if lastErr == nil {
				lastErr = errors.New("no controller reachable")
			}
			return nil, fmt.Errorf("%s: %w", lastErr.Error(), kerr.RequestTimedOut)
		}
		var resp *response
		if c.isLeader() {
			resp = c.execute(ctx, req, c.selfPrincipal())
		} else if addr := c.target(); addr != "" {
			r, err := c.client.call(ctx, addr, req)
			if err != nil {
				lastErr = fmt.Errorf("controller rpc to %s: %w", addr, err)
				c.hint.Store(nil)
			} else {
				resp = r
			}
		} else {
			lastErr = kerrf(kerr.NotController, "no controller known")
		}
		if resp != nil {
			if resp.Code != kerr.NotController.Code {
				if err := resp.err(); err != nil {
					return resp, err
				}
				if resp.Index > 0 && req.Op != reqHeartbeat {
					c.waitApplied(ctx, resp.Index)
				}
				return resp, nil
			}
			lastErr = resp.err()
			if resp.LeaderAddr != "" {
				h := resp.LeaderAddr
				c.hint.Store(&h)
			} else {
				c.hint.Store(nil)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

func (c *Controller) waitApplied(ctx context.Context, index uint64) {
	for {
		ch := c.Changed()
		if c.Image().Index >= index {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// handleRPC serves a forwarded request from a peer authenticated as principal ("" on a
// PLAINTEXT port): only the raft leader executes it.
func (c *Controller) handleRPC(ctx context.Context, req *request, principal string) *response {
	if !c.isLeader() {
		addr, _ := c.raft.LeaderWithID()
		return &response{Code: kerr.NotController.Code, Msg: "node " + strconv.Itoa(int(c.cfg.NodeID)) + " is not the controller", LeaderAddr: string(addr)}
	}
	return c.execute(ctx, req, principal)
}

// selfPrincipal is this node's own principal on a secured port ("" on a PLAINTEXT one).
func (c *Controller) selfPrincipal() string {
	if c.cfg.Security == nil {
		return ""
	}
	return c.cfg.Security.Principal
}

// authorizeRequest checks, on a secured port, that principal may ask for req: a broker acts
// only for its own broker id: the id configured for its principal (BrokerPrincipals), else the
// id its principal registered (heartbeats are checked in heartbeat too). Registrations without
// a principal (a PLAINTEXT port, or before the port was secured) bind nothing until the broker
// registers again.
func (c *Controller) authorizeRequest(img *Image, req *request, principal string) error {
	if c.cfg.Security == nil {
		return nil
	}
	owns := func(id int32) error {
		if err := c.configuredOwner(id, principal); err != nil {
			return err
		}
		b, ok := img.Brokers[id]
		if ok && b.Principal != "" && b.Principal != principal {
			return kerrf(kerr.ClusterAuthorizationFailed, "broker %d is registered by another principal than %s", id, principal)
		}
		return nil
	}
	switch req.Op {
	case reqHeartbeat:
		return c.configuredOwner(req.BrokerID, principal) // the registration's binding: heartbeat
	case reqControlledStop, reqLogDirsOffline:
		return owns(req.BrokerID)
	case reqAlterPartition:
		if req.AlterPartition != nil {
			return owns(req.AlterPartition.LeaderID)
		}
	}
	return nil
}

// configuredOwner checks principal against the configured principals of the brokers
// (PortSecurity.BrokerPrincipals): a listed id is only its principal's, and a listed principal
// acts only for its id. Without the list, nothing is refused here.
func (c *Controller) configuredOwner(id int32, principal string) error {
	bp := c.cfg.Security.BrokerPrincipals
	if len(bp) == 0 {
		return nil
	}
	if want, ok := bp[id]; ok {
		if want != principal {
			return kerrf(kerr.ClusterAuthorizationFailed, "broker %d is configured for principal %s, not %s (controller.broker.principals)", id, want, principal)
		}
		return nil
	}
	for other, p := range bp {
		if p == principal {
			return kerrf(kerr.ClusterAuthorizationFailed, "principal %s is broker %d's (controller.broker.principals); it may not act for broker %d", principal, other, id)
		}
	}
	return nil
}

func (c *Controller) notController(err error) *response {
	addr, _ := c.raft.LeaderWithID()
	return &response{Code: kerr.NotController.Code, Msg: err.Error(), LeaderAddr: string(addr)}
}

// leaderApply appends cmd to the raft log and waits for it to be applied.
func (c *Controller) leaderApply(ctx context.Context, cmd *command) (*applyResult, *response) {
	data, err := json.Marshal(cmd)
	if err != nil {
		return nil, errorResponse(kerrf(kerr.UnknownServerError, "encode command: %v", err))
	}
	if len(data) > maxFrame {
		return nil, errorResponse(kerrf(kerr.PolicyViolation, "metadata command of %d bytes is too large", len(data)))
	}
	enqueue := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		enqueue = max(time.Until(d), time.Millisecond)
	}
	f := c.raft.Apply(data, enqueue)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			// Not leader any more, leadership lost, shut down, or enqueue timeout: retryable.
			return nil, c.notController(fmt.Errorf("apply: %w", err))
		}
	case <-ctx.Done():
		return nil, errorResponse(kerrf(kerr.RequestTimedOut, "metadata command not applied in time"))
	}
	res, ok := f.Response().(*applyResult)
	if !ok || res == nil {
		return nil, errorResponse(kerrf(kerr.UnknownServerError, "no result for command"))
	}
	if res.err != nil {
		return res, errorResponse(res.err)
	}
	return res, nil
}

// execute runs req on the raft leader, on behalf of principal (this node's own for local
// requests).
func (c *Controller) execute(ctx context.Context, req *request, principal string) *response {
	if !c.leadingNow() {
		// Newly elected: the image may lag the log until the leader's barrier is applied.
		return c.notController(errors.New("controller is taking over"))
	}
	img := c.Image()
	if err := c.authorizeRequest(img, req, principal); err != nil {
		c.log.Warn("controller: request refused", "op", req.Op, "principal", principal, "err", err)
		return errorResponse(err)
	}
	var cmd *command
	switch req.Op {
	case reqHeartbeat:
		r := c.heartbeat(ctx, req, principal)
		if r != nil && r.Code == 0 {
			r.TakesLastIndex = true // quorum.go
		}
		return r
	case reqCreateTopic:
		if req.CreateTopic == nil {
			return errorResponse(kerrf(kerr.InvalidRequest, "create topic without a request"))
		}
		t, err := c.planTopic(img, req.CreateTopic)
		if err != nil {
			return errorResponse(err)
		}
		if req.CreateTopic.ValidateOnly {
			return &response{Topic: t}
		}
		cmd = &command{Op: opCreateTopic, Topic: t}
	case reqDeleteTopic:
		cmd = &command{Op: opDeleteTopic, Name: req.Name}
	case reqCreatePartitions:
		var err error
		cmd, err = planPartitions(img, req.Name, req.Total, req.Assignment)
		if err != nil {
			return errorResponse(err)
		}
	case reqAlterConfigs:
		cmd = &command{Op: opAlterConfigs, Name: req.Name, Configs: req.Configs}
	case reqAlterPartition:
		if req.AlterPartition == nil {
			return errorResponse(kerrf(kerr.InvalidRequest, "alter partition without a request"))
		}
		cmd = &command{Op: opAlterPartition, Alter: req.AlterPartition}
	case reqAllocPIDs:
		cmd = &command{Op: opAllocPIDs, N: req.N}
	case reqReassign:
		var err error
		if cmd, err = planReassign(img, req.Reassign); err != nil {
			return errorResponse(err)
		}
	case reqControlledStop:
		cmd = &command{Op: opControlledStop, BrokerID: req.BrokerID}
	case reqPutRecords:
		cmd = &command{Op: opPutRecords, Kind: req.Kind, Puts: req.Puts, Deletes: req.Deletes}
	case reqElectLeaders:
		return c.executeElect(ctx, img, req.Elect)
	case reqLogDirsOffline: // jbod (logdirs.go)
		cmd = &command{Op: opLogDirsOffline, BrokerID: req.BrokerID, OfflineReplicas: req.OfflineReplicas}
	case reqDescribeQuorum, reqAddVoter, reqRemoveVoter:
		return c.executeQuorum(ctx, req) // quorum.go
	case reqSync:
		// Everything committed so far is applied here once the barrier returns; the caller
		// waits until its own image has reached the same point.
		timeout := c.cfg.SessionTimeout
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		if err := c.raft.Barrier(max(timeout, time.Millisecond)).Error(); err != nil {
			return c.notController(fmt.Errorf("barrier: %w", err))
		}
		return &response{Index: c.Image().Index}
	default:
		return errorResponse(kerrf(kerr.InvalidRequest, "unknown controller request %q", req.Op))
	}
	res, errResp := c.leaderApply(ctx, cmd)
	if errResp != nil {
		return errResp
	}
	resp := &response{Index: res.index, Topic: res.topic, Partition: res.partition, First: res.first, Epoch: res.epoch}
	if req.Op == reqCreatePartitions || req.Op == reqAlterConfigs {
		resp.Topic = nil
	}
	return resp
}

// PutRecords atomically stores puts and removes deletes among the records of kind (ACL
// bindings, SCRAM credentials: Image.Records). It returns once the change is in this broker's
// image.
func (c *Controller) PutRecords(ctx context.Context, kind string, puts map[string]string, deletes []string) error {
	if !slices.Contains(allowedRecordKinds, kind) {
		return kerrf(kerr.InvalidRequest, "record kind %q (acl, scram, sasl, deleted-topic, broker_config, feature, group_config)", kind)
	}
	_, err := c.submit(ctx, &request{Op: reqPutRecords, Kind: kind, Puts: puts, Deletes: deletes})
	return err
}

// Sync waits until this broker's image holds every metadata change committed before the call
// (read-your-writes across brokers: a topic created through another broker is visible here once
// Sync returns).
func (c *Controller) Sync(ctx context.Context) error {
	_, err := c.submit(ctx, &request{Op: reqSync})
	return err
}
