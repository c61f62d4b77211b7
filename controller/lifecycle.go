package controller

// The controller's lifecycle: Start opens the metadata store, builds the raft configuration
// and transport, bootstraps or rejoins the quorum and starts the controller's goroutines;
// ControlledShutdown and Close stop it.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Start opens (or creates) the metadata log in cfg.Dir, joins the quorum and starts registering
// and heartbeating this broker. It does not wait for a leader: use WaitReady.
func Start(cfg Config) (*Controller, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if err := makePrivateDir(cfg.Dir); err != nil {
		return nil, err
	}
	c := newController(cfg)
	ok := false
	defer func() {
		if !ok {
			c.closeResources()
		}
	}()
	hlog := newHCLogger(c.log, "raft")
	logs, snaps, err := c.openStore(hlog)
	if err != nil {
		return nil, err
	}
	rc := c.raftConfig(hlog)
	bootstrap, err := c.openTransport(hlog)
	if err != nil {
		return nil, err
	}
	if err := c.startRaft(rc, logs, snaps, bootstrap); err != nil {
		return nil, err
	}
	c.startGoroutines()
	ok = true
	c.logStarted()
	return c, nil
}

// normalize checks cfg and fills in the defaults.
func (cfg *Config) normalize() error {
	if cfg.NodeID < 0 {
		return fmt.Errorf("controller: node id %d must be >= 0", cfg.NodeID)
	}
	if cfg.Dir == "" {
		return errors.New("controller: no directory")
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
			return err
		}
	}
	return nil
}

// makePrivateDir creates the controller's directory, private to the broker's user (it holds
// SCRAM credentials in its snapshots).
func makePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, metaDirMode); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if err := os.Chmod(dir, metaDirMode); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	return nil
}

// newController builds the Controller of a normalized cfg, with a fresh incarnation id.
func newController(cfg Config) *Controller {
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
	return c
}

// single reports whether this is a single-node cluster: no voters configured, a one-voter quorum
// of this node over an in-memory transport.
func (c *Controller) single() bool { return len(c.cfg.Voters) == 0 }

// isVoter reports whether this node is one of the configured voters.
func (c *Controller) isVoter() bool {
	_, ok := c.voters[c.cfg.NodeID]
	return ok
}

// openStore opens the raft log (bolt) and the snapshot store (private modes, snapshotmode.go)
// under cfg.Dir.
func (c *Controller) openStore(hlog hclog.Logger) (raft.LogStore, raft.SnapshotStore, error) {
	var err error
	c.store, err = raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(c.cfg.Dir, "raft.db"),
		BoltOptions: &bbolt.Options{Timeout: 2 * time.Second},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("controller: open raft store: %w", err)
	}
	fileSnaps, err := raft.NewFileSnapshotStoreWithLogger(c.cfg.Dir, 2, hlog)
	if err != nil {
		return nil, nil, fmt.Errorf("controller: snapshot store: %w", err)
	}
	snaps, err := newPrivateSnapshotStore(fileSnaps, c.cfg.Dir) // 0700/0600 (snapshotmode.go)
	if err != nil {
		return nil, nil, fmt.Errorf("controller: snapshot store: %w", err)
	}
	logs, err := raft.NewLogCache(512, c.store)
	if err != nil {
		return nil, nil, fmt.Errorf("controller: %w", err)
	}
	return logs, snaps, nil
}

// raftConfig is hashicorp/raft's configuration: short timeouts for a single node, 300ms (or the
// tests' override) for a quorum.
func (c *Controller) raftConfig(hlog hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(c.cfg.NodeID)))
	rc.Logger = hlog
	rc.SnapshotThreshold = 1024
	rc.SnapshotInterval = 30 * time.Second
	rc.TrailingLogs = 1024
	if c.single() {
		rc.HeartbeatTimeout = 50 * time.Millisecond
		rc.ElectionTimeout = 50 * time.Millisecond
		rc.LeaderLeaseTimeout = 50 * time.Millisecond
		rc.CommitTimeout = 5 * time.Millisecond
		return rc
	}
	t := 300 * time.Millisecond
	if c.cfg.raftTimeout > 0 {
		t = c.cfg.raftTimeout
	}
	rc.HeartbeatTimeout = t
	rc.ElectionTimeout = t
	rc.LeaderLeaseTimeout = t / 2
	rc.CommitTimeout = 20 * time.Millisecond
	return rc
}

// openTransport sets up raft's transport and returns the configuration to bootstrap a new
// quorum with: in memory for a single node; otherwise the controller port (the mux that carries
// raft and the controller RPC, portsec.go) listening on this node's address.
func (c *Controller) openTransport(hlog hclog.Logger) (raft.Configuration, error) {
	var bootstrap raft.Configuration
	if c.single() {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress("weir-node-" + strconv.Itoa(int(c.cfg.NodeID))))
		c.trans = tr
		bootstrap.Servers = []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(c.cfg.NodeID))), Address: addr}}
		return bootstrap, nil
	}
	listenAddr := c.cfg.Addr
	if c.isVoter() {
		listenAddr = c.voters[c.cfg.NodeID]
	}
	ln := c.cfg.listener
	if ln == nil {
		if listenAddr == "" {
			return bootstrap, fmt.Errorf("controller: node %d is not a voter and has no address", c.cfg.NodeID)
		}
		var err error
		ln, err = net.Listen("tcp", listenAddr)
		if err != nil {
			return bootstrap, fmt.Errorf("controller: listen: %w", err)
		}
	}
	if listenAddr == "" {
		listenAddr = ln.Addr().String()
	}
	c.selfAddr = listenAddr
	c.mux = newMux(ln, c.log, c.cfg.Security)
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
	for _, v := range c.cfg.Voters {
		c.peers = append(c.peers, v.Addr)
		bootstrap.Servers = append(bootstrap.Servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(strconv.Itoa(int(v.ID))),
			Address:  raft.ServerAddress(v.Addr),
		})
	}
	return bootstrap, nil
}

// startRaft bootstraps the quorum if this voter has no state yet (a non-voter waits to be
// added by the leader), then starts raft.
func (c *Controller) startRaft(rc *raft.Config, logs raft.LogStore, snaps raft.SnapshotStore, bootstrap raft.Configuration) error {
	hasState, err := raft.HasExistingState(logs, c.store, snaps)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if !hasState && (c.single() || c.isVoter()) {
		if err := raft.BootstrapCluster(rc, logs, c.store, snaps, c.trans, bootstrap); err != nil {
			return fmt.Errorf("controller: bootstrap: %w", err)
		}
	}
	c.raft, err = raft.NewRaft(rc, c.fsm, logs, c.store, snaps, c.trans)
	if err != nil {
		return fmt.Errorf("controller: start raft: %w", err)
	}
	c.raftPtr.Store(c.raft)
	return nil
}

// startGoroutines serves the controller port and starts the three loops of liveness.go:
// heartbeatLoop, leaderLoop and watchPeers; Close stops them.
func (c *Controller) startGoroutines() {
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if c.mux != nil {
		c.mux.serve()
	}
	c.wg.Add(3)
	go c.heartbeatLoop()
	go c.leaderLoop()
	go c.watchPeers()
}

// logStarted logs the start, with a warning for an unauthenticated controller port.
func (c *Controller) logStarted() {
	single := c.single()
	c.log.Info("controller started", append([]any{"voter", single || c.isVoter(), "addr", c.selfAddr, "voters", len(c.cfg.Voters)}, c.cfg.Security.describe()...)...)
	if !single && c.cfg.Security == nil {
		c.log.Warn("THE CONTROLLER PORT IS UNAUTHENTICATED: anyone who can reach " + c.selfAddr +
			" can delete topics, write ACLs and SCRAM credentials, fence brokers or join the metadata quorum and read every credential." +
			" Secure it (controller.listener.names with an SSL, SASL_PLAINTEXT or SASL_SSL protocol; docs/security.md, \"Controller port\")" +
			" or bind it to an interface only the brokers reach")
	}
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
