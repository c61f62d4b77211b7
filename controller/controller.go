package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/bbolt"
)

// Voter is a member of the controller quorum: its node id and the host:port that carries both
// its raft traffic and its controller RPC.
type Voter struct {
	ID   int32
	Addr string
}

// Config configures a Controller.
type Config struct {
	NodeID int32
	// Voters is the controller quorum, as parsed by ParseVoters from controller.quorum.voters.
	// Empty means a single-node cluster: a one-voter quorum of NodeID without any network port.
	Voters []Voter
	// Addr is the raft + controller RPC address (host:port) of a node that is not one of Voters
	// (a raft non-voter). Voters listen on their address in Voters and ignore Addr.
	Addr string
	// Dir holds the raft log (bolt) and the metadata snapshots; created if missing.
	Dir string
	// ClusterID is proposed as the cluster id by the first controller ever elected; after that the
	// cluster id is the one in the image (Image.ClusterID), whatever a node's Config says.
	// Empty: generate one.
	ClusterID string
	// Endpoints are this broker's advertised listeners, registered with the controller.
	Endpoints []Endpoint
	// SessionTimeout (broker.session.timeout.ms; default 2500ms): a broker that has not heartbeated
	// for this long is fenced.
	SessionTimeout time.Duration
	// HeartbeatInterval (broker.heartbeat.interval.ms; default 500ms).
	HeartbeatInterval time.Duration
	// UncleanLeaderElection reports whether a topic may elect a leader from outside its ISR.
	// nil means false for every topic.
	UncleanLeaderElection func(topic string) bool
	Logger                *slog.Logger
	// Security secures the raft + controller RPC port (portsec.go): TLS and/or SASL PLAIN on
	// both the accepting and the dialling side, and the principals allowed. nil: PLAINTEXT,
	// anyone who reaches the port may use it (a warning is logged at start of a multi-node
	// cluster).
	Security *PortSecurity

	// listener, if set, is used instead of listening on the node's address (tests).
	listener net.Listener
	// raftTimeout, if set, overrides the cluster heartbeat/election timeout (tests).
	raftTimeout time.Duration
}

// CreateTopicRequest asks the controller to create a topic.
type CreateTopicRequest struct {
	Name string
	ID   [16]byte // zero: generate one
	// Partitions and ReplicationFactor are the resolved values (the caller applies defaults);
	// with an explicit Assignment, Partitions may be <= 0 or must equal len(Assignment) and
	// ReplicationFactor is ignored.
	Partitions        int32
	ReplicationFactor int16
	Assignment        [][]int32 // optional explicit replicas per partition
	Configs           map[string]string
	Internal          bool
	ValidateOnly      bool
}

// AlterPartitionRequest is a partition leader's request to change the ISR.
type AlterPartitionRequest struct {
	Topic          string
	Partition      int32
	LeaderID       int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

const (
	defaultSessionTimeout    = 2500 * time.Millisecond
	defaultHeartbeatInterval = 500 * time.Millisecond
	maxPartitionsPerRequest  = 100000
	maxVoters                = 64
)

// Controller is this node's member of the cluster controller: a raft replica of the metadata log
// (a voter if the node is in Config.Voters, a non-voter otherwise) and the client that registers
// and heartbeats this broker.
//
// Invariants:
//   - The raft leader is the only writer. Every state change is a command appended to the raft
//     log; other nodes forward their requests to the leader over the controller RPC. Decisions
//     that are not deterministic (placement, topic ids, who is alive) are taken by the leader and
//     carried in the command; applying a command to an image is deterministic.
//   - Images are immutable. Each applied command that changes anything produces a new Image
//     (copy-on-write) published with an atomic pointer; the channel returned by Changed is closed
//     at the same moment. To observe changes without missing one, call Changed before Image.
//   - Broker liveness is tracked only in memory on the raft leader. A newly elected leader gives
//     every broker a fresh SessionTimeout; a broker that does not heartbeat within it is fenced
//     (a FenceBroker command, which also elects new partition leaders), and a heartbeat from a
//     fenced broker unfences it.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	fsm      *fsm
	raft     *raft.Raft
	raftPtr  atomic.Pointer[raft.Raft] // c.raft, for the transport's goroutines
	closing  atomic.Bool
	store    *raftboltdb.BoltStore
	trans    raft.Transport
	mux      *mux
	client   *rpcClient
	selfAddr string // raft/RPC address; empty for a single node
	peers    []string
	voters   map[int32]string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	hbMu     sync.Mutex // held while a heartbeat is in flight
	stopHB   atomic.Bool
	regEpoch atomic.Int64
	// incarnation identifies this process's registration (random per Start, Kafka's broker
	// incarnation id): on a secured port, a different incarnation may take over a broker id
	// only once the old one is fenced or its session expired.
	incarnation string
	rr          atomic.Uint32
	hint        atomic.Pointer[string]

	lmu         sync.Mutex // leader-only liveness state
	leading     bool
	leadingTerm uint64 // raft term in which this node took over as controller
	leaderSince time.Time
	lastHB      map[int32]time.Time
	nonvoters   map[int32]string
	// unreachable holds the voters raft's own heartbeats currently fail to reach (a killed
	// process refuses connections at once), since when. Guarded by lmu.
	unreachable map[int32]time.Time

	closeOnce sync.Once
	closeErr  error
}

// ParseVoters parses Kafka's controller.quorum.voters: "id@host:port,id@host:port,...".
// An empty string means no voters (single node).
func ParseVoters(s string) ([]Voter, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if len(s) > 16<<10 {
		return nil, errors.New("controller.quorum.voters: too long")
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxVoters {
		return nil, fmt.Errorf("controller.quorum.voters: %d voters, at most %d", len(parts), maxVoters)
	}
	seen := map[int32]bool{}
	out := make([]Voter, 0, len(parts))
	for _, p := range parts {
		p = strings.TrimSpace(p)
		idStr, addr, ok := strings.Cut(p, "@")
		if !ok {
			return nil, fmt.Errorf("controller.quorum.voters: %q is not id@host:port", p)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(idStr), 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("controller.quorum.voters: bad node id in %q", p)
		}
		host, port, err := net.SplitHostPort(strings.TrimSpace(addr))
		if err != nil || host == "" || len(host) > 255 {
			return nil, fmt.Errorf("controller.quorum.voters: bad address in %q", p)
		}
		pn, err := strconv.ParseUint(port, 10, 16)
		if err != nil || pn == 0 {
			return nil, fmt.Errorf("controller.quorum.voters: bad port in %q", p)
		}
		if seen[int32(id)] {
			return nil, fmt.Errorf("controller.quorum.voters: node id %d listed twice", id)
		}
		seen[int32(id)] = true
		out = append(out, Voter{ID: int32(id), Addr: net.JoinHostPort(host, port)})
	}
	return out, nil
}

// Start opens (or creates) the metadata log in cfg.Dir, joins the quorum and starts registering
// and heartbeating this broker. It does not wait for a leader: use WaitReady.
func Start(cfg Config) (*Controller, error) {
	if cfg.NodeID < 0 {
		return nil, fmt.Errorf("controller: node id %d must be >= 0", cfg.NodeID)
	}
	if cfg.Dir == "" {
		return nil, errors.New("controller: no directory")
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = defaultSessionTimeout
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = defaultHeartbeatInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Security != nil {
		if err := cfg.Security.Validate(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.Dir, metaDirMode); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	if err := os.Chmod(cfg.Dir, metaDirMode); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	var inc [16]byte
	_, _ = rand.Read(inc[:])
	c := &Controller{
		cfg:         cfg,
		log:         cfg.Logger.With("component", "controller", "node", cfg.NodeID),
		client:      newRPCClient(cfg.Security),
		incarnation: base64.RawURLEncoding.EncodeToString(inc[:]),
		voters:      map[int32]string{},
		lastHB:      map[int32]time.Time{},
		nonvoters:   map[int32]string{},
	}
	c.fsm = newFSM(c.log)
	for _, v := range cfg.Voters {
		c.voters[v.ID] = v.Addr
	}
	single := len(cfg.Voters) == 0
	_, isVoter := c.voters[cfg.NodeID]
	hlog := newHCLogger(c.log, "raft")

	ok := false
	defer func() {
		if !ok {
			c.closeResources()
		}
	}()

	var err error
	c.store, err = raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.Dir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: 2 * time.Second},
	})
	if err != nil {
		return nil, fmt.Errorf("controller: open raft store: %w", err)
	}
	fileSnaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		return nil, fmt.Errorf("controller: snapshot store: %w", err)
	}
	snaps, err := newPrivateSnapshotStore(fileSnaps, cfg.Dir) // 0700/0600 (snapshotmode.go)
	if err != nil {
		return nil, fmt.Errorf("controller: snapshot store: %w", err)
	}
	logs, err := raft.NewLogCache(512, c.store)
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(cfg.NodeID)))
	rc.Logger = hlog
	rc.SnapshotThreshold = 1024
	rc.SnapshotInterval = 30 * time.Second
	rc.TrailingLogs = 1024
	if single {
		rc.HeartbeatTimeout = 50 * time.Millisecond
		rc.ElectionTimeout = 50 * time.Millisecond
		rc.LeaderLeaseTimeout = 50 * time.Millisecond
		rc.CommitTimeout = 5 * time.Millisecond
	} else {
		t := 300 * time.Millisecond
		if cfg.raftTimeout > 0 {
			t = cfg.raftTimeout
		}
		rc.HeartbeatTimeout = t
		rc.ElectionTimeout = t
		rc.LeaderLeaseTimeout = t / 2
		rc.CommitTimeout = 20 * time.Millisecond
	}

	var bootstrap raft.Configuration
	if single {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress("weir-node-" + strconv.Itoa(int(cfg.NodeID))))
		c.trans = tr
		bootstrap.Servers = []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: addr}}
	} else {
		listenAddr := cfg.Addr
		if isVoter {
			listenAddr = c.voters[cfg.NodeID]
		}
		ln := cfg.listener
		if ln == nil {
			if listenAddr == "" {
				return nil, fmt.Errorf("controller: node %d is not a voter and has no address", cfg.NodeID)
			}
			ln, err = net.Listen("tcp", listenAddr)
			if err != nil {
				return nil, fmt.Errorf("controller: listen: %w", err)
			}
		}
		if listenAddr == "" {
			listenAddr = ln.Addr().String()
		}
		c.selfAddr = listenAddr
		c.mux = newMux(ln, c.log, cfg.Security)
		c.mux.handler = c.handleRPC
		c.trans = &patientTransport{
			NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
				Stream:  &streamLayer{m: c.mux},
				MaxPool: 3,
				Timeout: 2 * time.Second,
				Logger:  hlog,
			}),
			reachable: c.peerReachable,
			keepTrying: func() bool {
				r := c.raftPtr.Load()
				return !c.closing.Load() && r != nil && r.State() == raft.Leader
			},
		}
		for _, v := range cfg.Voters {
			c.peers = append(c.peers, v.Addr)
			bootstrap.Servers = append(bootstrap.Servers, raft.Server{
				Suffrage: raft.Voter,
				ID:       raft.ServerID(strconv.Itoa(int(v.ID))),
				Address:  raft.ServerAddress(v.Addr),
			})
		}
	}

	hasState, err := raft.HasExistingState(logs, c.store, snaps)
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	if !hasState && (single || isVoter) {
		if err := raft.BootstrapCluster(rc, logs, c.store, snaps, c.trans, bootstrap); err != nil {
			return nil, fmt.Errorf("controller: bootstrap: %w", err)
		}
	}
	c.raft, err = raft.NewRaft(rc, c.fsm, logs, c.store, snaps, c.trans)
	if err != nil {
		return nil, fmt.Errorf("controller: start raft: %w", err)
	}
	c.raftPtr.Store(c.raft)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.mux != nil {
		c.mux.serve()
	}
	c.wg.Add(3)
	go c.heartbeatLoop()
	go c.leaderLoop()
	go c.watchPeers()
	ok = true
	c.log.Info("controller started", append([]any{"voter", single || isVoter, "addr", c.selfAddr, "voters", len(cfg.Voters)}, cfg.Security.describe()...)...)
	if !single && cfg.Security == nil {
		c.log.Warn("THE CONTROLLER PORT IS UNAUTHENTICATED: anyone who can reach " + c.selfAddr +
			" can delete topics, write ACLs and SCRAM credentials, fence brokers or join the metadata quorum and read every credential." +
			" Secure it (controller.listener.names with an SSL, SASL_PLAINTEXT or SASL_SSL protocol; docs/security.md, \"Controller port\")" +
			" or bind it to an interface only the brokers reach")
	}
	return c, nil
}

// Image returns the latest applied image; never nil.
func (c *Controller) Image() *Image { return c.fsm.image() }

// Changed returns a channel closed when the image next changes (call it before Image).
func (c *Controller) Changed() <-chan struct{} { return c.fsm.changed() }

// ActiveID returns the node id of the raft leader, or -1 if none is known.
func (c *Controller) ActiveID() int32 {
	_, id := c.raft.LeaderWithID()
	if id == "" {
		return -1
	}
	n, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil {
		return -1
	}
	return int32(n)
}

// WaitReady waits until a raft leader is known and this broker is registered (by this process)
// and unfenced in the local image.
func (c *Controller) WaitReady(ctx context.Context) error {
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	for {
		ch := c.Changed()
		img := c.Image()
		if c.ActiveID() >= 0 {
			if b, ok := img.Brokers[c.cfg.NodeID]; ok && !b.Fenced {
				if e := c.regEpoch.Load(); e > 0 && b.Epoch >= e {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controller not ready: %w: %w", kerr.RequestTimedOut, ctx.Err())
		case <-c.ctx.Done():
			return fmt.Errorf("controller closed: %w", kerr.BrokerNotAvailable)
		case <-ch:
		case <-t.C:
		}
	}
}

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

// ControlledShutdown stops heartbeating, moves every leadership of this broker to another ISR
// member, drops it from the ISRs (unless it is the last member) and marks it fenced. It returns
// once the change is applied on the raft leader and in the local image.
func (c *Controller) ControlledShutdown(ctx context.Context) error {
	c.stopHB.Store(true)
	c.hbMu.Lock() // wait for an in-flight heartbeat, which could otherwise unfence us again
	c.hbMu.Unlock()
	_, err := c.submit(ctx, &request{Op: reqControlledStop, BrokerID: c.cfg.NodeID})
	if err != nil {
		return err
	}
	if c.isLeader() && len(c.voters) > 1 {
		// Hand the active controller over too. Besides sparing the others an election, the
		// new leader learns that this command committed: a follower only learns a commit
		// index from later traffic, which a leader that stops now would never send.
		f := c.raft.LeadershipTransfer()
		done := make(chan error, 1)
		go func() { done <- f.Error() }()
		select {
		case err := <-done:
			if err != nil {
				c.log.Warn("controller: leadership transfer at shutdown failed", "err", err)
			} else {
				c.log.Info("controller: handed the active controller over at shutdown")
			}
		case <-ctx.Done():
		}
	}
	return nil
}

// Close stops heartbeating and raft (without handing over leadership) and closes the port and the
// raft store.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.wg.Wait()
		c.closeErr = c.closeResources()
		c.log.Info("controller closed")
	})
	return c.closeErr
}

func (c *Controller) closeResources() error {
	c.closing.Store(true)
	var errs []error
	if c.raft != nil {
		if err := c.raft.Shutdown().Error(); err != nil {
			errs = append(errs, err)
		}
	}
	if wc, ok := c.trans.(raft.WithClose); ok {
		_ = wc.Close()
	}
	if c.mux != nil {
		c.mux.close()
	}
	c.client.close()
	if c.store != nil {
		if err := c.store.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ---- request routing ----

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
// only for the broker id its principal registered (heartbeats are checked in heartbeat).
// Registrations without a principal (a PLAINTEXT port, or before the port was secured) bind
// nothing until the broker registers again.
func (c *Controller) authorizeRequest(img *Image, req *request, principal string) error {
	if c.cfg.Security == nil {
		return nil
	}
	owns := func(id int32) error {
		b, ok := img.Brokers[id]
		if ok && b.Principal != "" && b.Principal != principal {
			return kerrf(kerr.ClusterAuthorizationFailed, "broker %d is registered by another principal than %s", id, principal)
		}
		return nil
	}
	switch req.Op {
	case reqControlledStop:
		return owns(req.BrokerID)
	case reqAlterPartition:
		if req.AlterPartition != nil {
			return owns(req.AlterPartition.LeaderID)
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
		return c.heartbeat(ctx, req, principal)
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
	case reqControlledStop:
		cmd = &command{Op: opControlledStop, BrokerID: req.BrokerID}
	case reqPutRecords:
		cmd = &command{Op: opPutRecords, Kind: req.Kind, Puts: req.Puts, Deletes: req.Deletes}
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

// ---- liveness (raft leader only) ----

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
	if _, voter := c.voters[id]; !voter && req.Addr != "" && knownAddr != req.Addr && len(c.voters) > 0 {
		c.ensureNonvoter(id, req.Addr)
	}
	var cmd *command
	switch {
	case req.Register || !ok || !slices.Equal(b.Endpoints, req.Endpoints) || (secured && b.Incarnation != req.Incarnation):
		cmd = &command{Op: opRegister, BrokerID: id, Endpoints: req.Endpoints, Unclean: c.uncleanTopics(img), Incarnation: req.Incarnation}
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
				ctx, cancel := context.WithTimeout(c.ctx, c.cfg.SessionTimeout)
				resp, err := c.submit(ctx, &request{
					Op:          reqHeartbeat,
					BrokerID:    c.cfg.NodeID,
					Endpoints:   c.cfg.Endpoints,
					Addr:        c.selfAddr,
					Register:    !registered,
					Incarnation: c.incarnation,
				})
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

// ---- placement (raft leader only) ----

func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return kerrf(kerr.InvalidTopicException, "invalid topic name %q", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return kerrf(kerr.InvalidTopicException, "invalid character %q in topic name %q", r, name)
		}
	}
	return nil
}

// place returns the replicas of partitions first..first+count-1: partition i's replica j is on
// brokers[(start + i + j) mod n].
func place(brokers []int32, start, first, count, rf int) [][]int32 {
	n := len(brokers)
	out := make([][]int32, count)
	for k := range count {
		i := first + k
		reps := make([]int32, rf)
		for j := range rf {
			reps[j] = brokers[(start+i+j)%n]
		}
		out[k] = reps
	}
	return out
}

func validateAssignment(img *Image, a [][]int32) error {
	for i, reps := range a {
		if len(reps) == 0 {
			return kerrf(kerr.InvalidReplicaAssignment, "partition %d has no replicas", i)
		}
		seen := map[int32]bool{}
		for _, r := range reps {
			if seen[r] {
				return kerrf(kerr.InvalidReplicaAssignment, "partition %d lists broker %d twice", i, r)
			}
			seen[r] = true
			if _, ok := img.Brokers[r]; !ok {
				return kerrf(kerr.InvalidReplicaAssignment, "partition %d: broker %d is not registered", i, r)
			}
		}
	}
	return nil
}

func newPartitions(img *Image, a [][]int32) []PartitionInfo {
	out := make([]PartitionInfo, len(a))
	for i, reps := range a {
		p := PartitionInfo{Replicas: slices.Clone(reps), ISR: slices.Clone(reps), Leader: -1}
		for _, r := range reps {
			if img.alive(r) {
				p.Leader = r
				break
			}
		}
		out[i] = p
	}
	return out
}

func (c *Controller) planTopic(img *Image, r *CreateTopicRequest) (*TopicInfo, error) {
	if err := validTopicName(r.Name); err != nil {
		return nil, err
	}
	if _, ok := img.Topics[r.Name]; ok {
		return nil, kerrf(kerr.TopicAlreadyExists, "topic %q", r.Name)
	}
	var assignment [][]int32
	if len(r.Assignment) > 0 {
		if r.Partitions > 0 && int(r.Partitions) != len(r.Assignment) {
			return nil, kerrf(kerr.InvalidReplicaAssignment, "%d partitions but %d assignments", r.Partitions, len(r.Assignment))
		}
		if len(r.Assignment) > maxPartitionsPerRequest {
			return nil, kerrf(kerr.InvalidPartitions, "%d partitions, at most %d", len(r.Assignment), maxPartitionsPerRequest)
		}
		if err := validateAssignment(img, r.Assignment); err != nil {
			return nil, err
		}
		assignment = r.Assignment
	} else {
		if r.Partitions < 1 || r.Partitions > maxPartitionsPerRequest {
			return nil, kerrf(kerr.InvalidPartitions, "%d partitions", r.Partitions)
		}
		brokers := img.UnfencedBrokers()
		if r.ReplicationFactor < 1 || int(r.ReplicationFactor) > len(brokers) {
			return nil, kerrf(kerr.InvalidReplicationFactor, "replication factor %d with %d available brokers", r.ReplicationFactor, len(brokers))
		}
		assignment = place(brokers, mrand.IntN(len(brokers)), 0, int(r.Partitions), int(r.ReplicationFactor))
	}
	id := r.ID
	if id == ([16]byte{}) {
		for id == ([16]byte{}) || img.TopicsByID[id] != nil {
			_, _ = rand.Read(id[:])
		}
	} else if img.TopicsByID[id] != nil {
		return nil, kerrf(kerr.TopicAlreadyExists, "topic id of %q already in use", r.Name)
	}
	return &TopicInfo{
		Name:       r.Name,
		ID:         id,
		Configs:    cloneConfigs(r.Configs),
		Internal:   r.Internal,
		Partitions: newPartitions(img, assignment),
	}, nil
}

func planPartitions(img *Image, name string, total int32, assignment [][]int32) (*command, error) {
	t := img.Topics[name]
	if t == nil {
		return nil, kerrf(kerr.UnknownTopicOrPartition, "topic %q", name)
	}
	cur := int32(len(t.Partitions))
	if total <= cur || total-cur > maxPartitionsPerRequest {
		return nil, kerrf(kerr.InvalidPartitions, "topic %q has %d partitions; cannot grow to %d", name, cur, total)
	}
	if len(assignment) > 0 {
		if int32(len(assignment)) != total-cur {
			return nil, kerrf(kerr.InvalidReplicaAssignment, "%d assignments for %d new partitions", len(assignment), total-cur)
		}
		if err := validateAssignment(img, assignment); err != nil {
			return nil, err
		}
	} else {
		rf := 1
		if cur > 0 {
			rf = len(t.Partitions[0].Replicas)
		}
		brokers := img.UnfencedBrokers()
		if rf < 1 || rf > len(brokers) {
			return nil, kerrf(kerr.InvalidReplicationFactor, "replication factor %d with %d available brokers", rf, len(brokers))
		}
		start := -1
		if cur > 0 && len(t.Partitions[0].Replicas) > 0 {
			start = slices.Index(brokers, t.Partitions[0].Replicas[0])
		}
		if start < 0 {
			start = mrand.IntN(len(brokers))
		}
		assignment = place(brokers, start, int(cur), int(total-cur), rf)
	}
	return &command{Op: opCreatePartitions, Name: name, Base: cur, Partitions: newPartitions(img, assignment)}, nil
}

// PutRecords atomically stores puts and removes deletes among the records of kind (ACL
// bindings, SCRAM credentials: Image.Records). It returns once the change is in this broker's
// image.
func (c *Controller) PutRecords(ctx context.Context, kind string, puts map[string]string, deletes []string) error {
	if !slices.Contains(allowedRecordKinds, kind) {
		return kerrf(kerr.InvalidRequest, "record kind %q (acl, scram)", kind)
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
