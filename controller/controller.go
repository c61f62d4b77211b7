package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/twmb/franz-go/pkg/kerr"
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

	// Leader balance (elect.go). AutoLeaderRebalance (auto.leader.rebalance.enable): the
	// active controller moves leaderships back to preferred replicas, every
	// LeaderImbalanceCheckInterval (leader.imbalance.check.interval.seconds; 0: 300 s) and when
	// a preferred replica rejoins the ISR, for brokers whose imbalance is over
	// LeaderImbalancePerBrokerPercentage (leader.imbalance.per.broker.percentage).
	AutoLeaderRebalance                bool
	LeaderImbalanceCheckInterval       time.Duration
	LeaderImbalancePerBrokerPercentage int
	// Rack is this broker's broker.rack ("" none), carried in its registration (racks, issue 14).
	Rack string

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

	// hbMu is held by heartbeatLoop for the whole of one heartbeat (a controller RPC, so
	// across network I/O) and guards nothing else: ControlledShutdown takes it once after
	// setting stopHB to wait out a heartbeat in flight, which could otherwise unfence this
	// broker again. It is kept apart from lmu so that a slow heartbeat never stalls the
	// leader's liveness bookkeeping.
	hbMu     sync.Mutex
	stopHB   atomic.Bool
	regEpoch atomic.Int64
	// incarnation identifies this process's registration (random per Start, Kafka's broker
	// incarnation id): on a secured port, a different incarnation may take over a broker id
	// only once the old one is fenced or its session expired.
	incarnation string
	rr          atomic.Uint32
	hint        atomic.Pointer[string]

	// lmu guards the raft leader's liveness state, the fields below up to unreachable:
	// whether and since when this node is the active controller (leading, leadingTerm,
	// leaderSince), each broker's last heartbeat, the non-voters added to raft, and the voters
	// raft cannot reach. It is held only for map and field updates, never across raft calls
	// or I/O.
	lmu         sync.Mutex
	leading     bool
	leadingTerm uint64 // raft term in which this node took over as controller
	leaderSince time.Time
	lastHB      map[int32]time.Time
	nonvoters   map[int32]string
	// unreachable holds the voters raft's own heartbeats currently fail to reach (a killed
	// process refuses connections at once), since when.
	unreachable map[int32]time.Time

	closeOnce sync.Once
	closeErr  error

	// quorum is the active controller's view of every replica's raft log (quorum.go).
	quorum quorumState
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
