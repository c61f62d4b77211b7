package controller

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
)

// One TCP port per node carries both raft traffic and the controller RPC: the first byte of
// every connection says which ('R' raft, 'C' controller RPC).
const (
	connRaft byte = 'R'
	connRPC  byte = 'C'

	maxFrame        = 16 << 20 // largest controller RPC frame
	firstByteWait   = 5 * time.Second
	rpcIdleTimeout  = 2 * time.Minute
	rpcWriteTimeout = 10 * time.Second
	rpcDialTimeout  = 2 * time.Second
	rpcCallTimeout  = 10 * time.Second // default when ctx has no deadline
)

// mux accepts connections on the node's port and dispatches them by their first byte. With
// security (portsec.go), TLS and the authentication exchange come first, and only an
// authenticated, allowed principal gets its routing byte read.
type mux struct {
	ln     net.Listener
	raftCh chan net.Conn
	// handler executes a controller RPC; principal is the peer's authenticated principal ("" on
	// a PLAINTEXT port).
	handler  func(ctx context.Context, req *request, principal string) *response
	log      *slog.Logger
	sec      *PortSecurity // nil: PLAINTEXT
	refusals rateLog
	// handshakes are the connections in the security handshake (maxHandshakes, and
	// maxHandshakesPerIP per client address; the oldest is closed to admit a new one).
	handshakes *handshakeSlots

	closeOnce sync.Once
	done      chan struct{}
	mu        sync.Mutex // guards conns, the open RPC connections that close closes
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

func newMux(ln net.Listener, log *slog.Logger, sec *PortSecurity) *mux {
	return &mux{ln: ln, raftCh: make(chan net.Conn), log: log, done: make(chan struct{}), conns: map[net.Conn]struct{}{},
		sec: sec, refusals: rateLog{log: log, interval: 10 * time.Second}, handshakes: newHandshakeSlots(maxHandshakes, maxHandshakesPerIP)}
}

func (m *mux) serve() {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		var delay time.Duration
		for {
			conn, err := m.ln.Accept()
			if err != nil {
				select {
				case <-m.done:
					return
				default:
				}
				if errors.Is(err, net.ErrClosed) {
					return
				}
				// Temporary accept failure (e.g. out of file descriptors): back off.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			delay = 0
			if !m.track(conn) {
				conn.Close()
				return
			}
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				m.dispatch(conn)
			}()
		}
	}()
}

func (m *mux) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns == nil {
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

func (m *mux) untrack(c net.Conn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conns, c)
}

func (m *mux) dispatch(raw net.Conn) {
	conn, principal := raw, ""
	if m.sec != nil {
		slot, displaced := m.handshakes.enter(raw)
		if displaced {
			m.refusals.refused("controller port: too many connections in the security handshake; closed the oldest", "remote", raw.RemoteAddr().String())
		}
		c, p, err := m.serverHandshake(raw)
		if m.handshakes.leave(slot) && err == nil {
			err = errors.New("closed to admit newer connections in the security handshake")
		}
		if err != nil {
			m.refusals.refused("controller port: connection refused", "remote", raw.RemoteAddr().String(), "err", err)
			m.closeConn(raw)
			return
		}
		conn, principal = c, p
	}
	var b [1]byte
	_ = conn.SetReadDeadline(time.Now().Add(firstByteWait))
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		m.closeConn(raw)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	switch b[0] {
	case connRaft:
		select {
		case m.raftCh <- &trackedConn{Conn: conn, raw: raw, m: m}: // raft's transport owns it now
		case <-m.done:
			m.closeConn(raw)
		}
	case connRPC:
		m.serveRPC(conn, principal)
		conn.Close()
		m.closeConn(raw)
	default:
		m.closeConn(raw)
	}
}

func (m *mux) closeConn(c net.Conn) {
	c.Close()
	m.untrack(c)
}

// serveRPC serves size-prefixed JSON requests on conn, one at a time, until an error. A frame
// that is too large for its operation, does not decode strictly, or fails validation closes the
// connection (rpcvalidate.go).
func (m *mux) serveRPC(conn net.Conn, principal string) {
	for {
		_ = conn.SetReadDeadline(time.Now().Add(rpcIdleTimeout))
		req, err := readRequest(conn)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
				m.refusals.refused("controller rpc: bad request; closing the connection", "remote", conn.RemoteAddr().String(), "principal", principal, "err", err)
			}
			return
		}
		timeout := time.Duration(req.TimeoutMs) * time.Millisecond
		if timeout <= 0 || timeout > time.Minute {
			timeout = rpcCallTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		go func() { // a Close of the node ends the request too
			select {
			case <-m.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		resp := m.handler(ctx, req, principal)
		cancel()
		out, err := json.Marshal(resp)
		if err != nil {
			return
		}
		_ = conn.SetWriteDeadline(time.Now().Add(rpcWriteTimeout))
		if err := writeFrame(conn, out); err != nil {
			return
		}
	}
}

func (m *mux) close() {
	m.closeOnce.Do(func() {
		close(m.done)
		m.ln.Close()
		m.mu.Lock()
		conns := m.conns
		m.conns = nil
		m.mu.Unlock()
		for c := range conns {
			c.Close()
		}
	})
	m.wg.Wait()
}

// trackedConn is a raft connection (TLS-wrapped on a TLS port) that leaves the mux's set, which
// holds the raw connection, when raft closes it.
type trackedConn struct {
	net.Conn
	raw net.Conn
	m   *mux
}

// Read reports a connection closed by the mux's shutdown as the end of the stream, which raft
// expects of a closing peer, rather than as an error.
func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		select {
		case <-c.m.done:
			return n, io.EOF
		default:
		}
	}
	return n, err
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.raw.Close()
	c.m.untrack(c.raw)
	return err
}

// streamLayer is the raft.StreamLayer over the mux.
type streamLayer struct {
	m *mux
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.m.raftCh:
		return c, nil
	case <-s.m.done:
		return nil, net.ErrClosed
	}
}

// Close is called by raft's transport on shutdown; the mux itself is closed by the controller.
func (s *streamLayer) Close() error { return nil }

func (s *streamLayer) Addr() net.Addr { return s.m.ln.Addr() }

// Dial connects to a peer's port as raft (after the security handshake on a secured port). The
// connection and the handshake together take at most about 2 x timeout (raft's transport
// timeout), so a peer that accepts but never answers (a paused process) holds raft no longer
// than without security.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 {
		timeout = handshakeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	return dialPort(ctx, s.m.sec, string(address), connRaft, timeout)
}

func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > maxFrame {
		return nil, fmt.Errorf("controller rpc: frame length %d out of range", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

func writeFrame(w io.Writer, data []byte) error {
	if len(data) == 0 || len(data) > maxFrame {
		return fmt.Errorf("controller rpc: frame length %d out of range", len(data))
	}
	buf := make([]byte, 4+len(data))
	binary.BigEndian.PutUint32(buf, uint32(len(data)))
	copy(buf[4:], data)
	_, err := w.Write(buf)
	return err
}

// ---- messages ----

// Request operations (controller RPC and local execution on the leader).
const (
	reqHeartbeat        = "heartbeat"
	reqCreateTopic      = "create_topic"
	reqDeleteTopic      = "delete_topic"
	reqCreatePartitions = "create_partitions"
	reqAlterConfigs     = "alter_configs"
	reqAlterPartition   = "alter_partition"
	reqAllocPIDs        = "alloc_pids"
	reqControlledStop   = "controlled_shutdown"
	reqPutRecords       = "put_records"
	reqSync             = "sync"
	reqElectLeaders     = "elect_leaders" // elect.go
	// The quorum's state and its voters (quorum.go).
	reqDescribeQuorum = "describe_quorum"
	reqAddVoter       = "add_voter"
	reqRemoveVoter    = "remove_voter"
)

type request struct {
	Op             string                 `json:"op"`
	TimeoutMs      int64                  `json:"timeout_ms,omitempty"`
	BrokerID       int32                  `json:"broker"`
	Endpoints      []Endpoint             `json:"endpoints,omitempty"`
	Addr           string                 `json:"addr,omitempty"` // raft address of the sender
	Register       bool                   `json:"register,omitempty"`
	CreateTopic    *CreateTopicRequest    `json:"create_topic,omitempty"`
	Name           string                 `json:"name,omitempty"`
	Total          int32                  `json:"total,omitempty"`
	Assignment     [][]int32              `json:"assignment,omitempty"`
	Configs        map[string]string      `json:"configs,omitempty"`
	AlterPartition *AlterPartitionRequest `json:"alter_partition,omitempty"`
	N              int64                  `json:"n,omitempty"`
	Kind           string                 `json:"kind,omitempty"`
	Puts           map[string]string      `json:"puts,omitempty"`
	Deletes        []string               `json:"deletes,omitempty"`
	// Incarnation identifies the broker process that sends a heartbeat (a random id per start,
	// as Kafka's BrokerRegistration incarnation id).
	Incarnation string `json:"incarnation,omitempty"`
	// Elect is an ElectLeaders request (elect.go).
	Elect *ElectLeadersRequest `json:"elect,omitempty"`
	// Racks (issue 14): Rack is the heartbeating broker's broker.rack ("" none).
	Rack string `json:"rack,omitempty"`
	// jbod: the sender's replicas in an offline log dir (log_dirs_offline, logdirs.go).
	OfflineReplicas []PartitionRef `json:"offline_replicas,omitempty"`
	// Partition reassignment (reassign.go).
	Reassign *ReassignRequest `json:"reassign,omitempty"`
	// Quorum (quorum.go): LastIndex is the sender's last raft log index, reported in each
	// heartbeat so the active controller can describe every replica's log end.
	LastIndex uint64 `json:"last_index,omitempty"`
}

type response struct {
	Code       int16          `json:"code,omitempty"`
	Msg        string         `json:"msg,omitempty"`
	LeaderAddr string         `json:"leader_addr,omitempty"`
	Index      uint64         `json:"index,omitempty"`
	Topic      *TopicInfo     `json:"topic,omitempty"`
	Partition  *PartitionInfo `json:"partition,omitempty"`
	First      int64          `json:"first,omitempty"`
	Epoch      int64          `json:"epoch,omitempty"`
	// Elections are the per-partition results of an ElectLeaders request (elect.go).
	Elections []ElectionResult `json:"elections,omitempty"`
	// Quorum answers describe_quorum (quorum.go).
	Quorum *QuorumInfo `json:"quorum,omitempty"`
	// TakesLastIndex, in a heartbeat's answer: this leader takes request.LastIndex (quorum.go).
	TakesLastIndex bool `json:"takes_last_index,omitempty"`
}

// remoteError is an error returned by another node: its text, wrapping the Kafka error code.
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }

func errorResponse(err error) *response {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		ke = kerr.UnknownServerError
	}
	return &response{Code: ke.Code, Msg: err.Error()}
}

func (r *response) err() error {
	if r.Code == 0 && r.Msg == "" {
		return nil
	}
	ke, ok := kerr.ErrorForCode(r.Code).(*kerr.Error)
	if !ok || ke == nil {
		ke = kerr.UnknownServerError
	}
	return &remoteError{msg: r.Msg, err: ke}
}

// ---- client ----

type rpcClient struct {
	sec    *PortSecurity // nil: PLAINTEXT
	mu     sync.Mutex    // guards idle and closed
	idle   map[string][]net.Conn
	closed bool
}

const maxIdlePerAddr = 4

func newRPCClient(sec *PortSecurity) *rpcClient {
	return &rpcClient{sec: sec, idle: map[string][]net.Conn{}}
}

// getConn returns an idle connection to addr, or dials a new one: concurrent calls never wait
// behind each other.
func (c *rpcClient) getConn(ctx context.Context, addr string, deadline time.Time) (net.Conn, error) {
	c.mu.Lock()
	if conns := c.idle[addr]; len(conns) > 0 {
		conn := conns[len(conns)-1]
		c.idle[addr] = conns[:len(conns)-1]
		c.mu.Unlock()
		return conn, nil
	}
	c.mu.Unlock()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return dialPort(ctx, c.sec, addr, connRPC, rpcDialTimeout)
}

func (c *rpcClient) putConn(addr string, conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.idle[addr]) >= maxIdlePerAddr {
		conn.Close()
		return
	}
	c.idle[addr] = append(c.idle[addr], conn)
}

// call sends req to addr and waits for the response. Transport failures are returned as errors
// (the connection is dropped); Kafka errors are in the response.
func (c *rpcClient) call(ctx context.Context, addr string, req *request) (*response, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(rpcCallTimeout)
	}
	req.TimeoutMs = max(time.Until(deadline).Milliseconds(), 1)
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	conn, err := c.getConn(ctx, addr, deadline)
	if err != nil {
		return nil, err
	}
	resp, err := roundTrip(ctx, conn, deadline, data)
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.putConn(addr, conn)
	return resp, nil
}

func roundTrip(ctx context.Context, conn net.Conn, deadline time.Time, data []byte) (*response, error) {
	// Allow the server a little longer than the request's own timeout to answer.
	_ = conn.SetDeadline(deadline.Add(500 * time.Millisecond))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if err := writeFrame(conn, data); err != nil {
		return nil, err
	}
	out, err := readFrame(conn)
	if err != nil {
		return nil, err
	}
	if !stop() {
		return nil, ctx.Err() // the deadline may have been cut short: don't reuse the conn
	}
	var resp response
	if err := json.Unmarshal(out, &resp); err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return &resp, nil
}

func (c *rpcClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, conns := range c.idle {
		for _, conn := range conns {
			conn.Close()
		}
	}
	c.idle = map[string][]net.Conn{}
}

// patientTransport is raft's NetworkTransport, except that AppendEntries towards a peer that
// cannot be dialled is retried every dialRetry for as long as this node leads, instead of
// failing at once. Raft backs off exponentially (to ~10 s) between failed AppendEntries and
// nothing wakes it when the peer returns, so a broker restarted after a short outage would wait
// seconds for the metadata log; with this it catches up within dialRetry of listening again.
// Other RPCs (votes, snapshots, pipelines) pass through unchanged.
type patientTransport struct {
	*raft.NetworkTransport
	keepTrying func() bool // this node still leads and is not shutting down
	// reachable, when set, is told when a peer cannot be dialled (false) and when an
	// AppendEntries to it succeeds again (true): the controller fences a silent broker sooner
	// when its port refuses connections.
	reachable func(id raft.ServerID, ok bool)
}

const (
	dialRetry    = 50 * time.Millisecond
	maxDialRetry = 10 * time.Minute
)

func (t *patientTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	deadline := time.Now().Add(maxDialRetry)
	for {
		err := t.NetworkTransport.AppendEntries(id, target, args, resp)
		var oe *net.OpError
		isDial := err != nil && errors.As(err, &oe) && oe.Op == "dial"
		if t.reachable != nil && (err == nil || isDial) {
			t.reachable(id, err == nil)
		}
		if !isDial || time.Now().After(deadline) || !t.keepTrying() {
			return err
		}
		time.Sleep(dialRetry)
	}
}
