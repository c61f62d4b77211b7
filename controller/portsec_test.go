package controller

// The controller/Raft port secured with TLS + SASL PLAIN (in-process voters on 127.0.0.1, real
// connections): peers without credentials, with wrong ones, or authenticated as a principal
// that is no broker change nothing, neither over the controller RPC nor over raft; a broker
// cannot act for another broker's id; frames over their operation's bound, unknown operations
// and unknown fields close the connection.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/netio/testcert"

	"github.com/weir-mq/weir/internal/peerauth"
)

type secFixture struct {
	ca     *testcert.CA
	server testcert.Pair
	users  map[string]string
}

func newSecFixture(t *testing.T) *secFixture {
	ca := testcert.NewCA(t)
	return &secFixture{ca: ca, server: ca.Server(t), users: map[string]string{
		"broker1": "pw-one", "broker2": "pw-two", "broker3": "pw-three", "mallory": "pw-mallory",
	}}
}

// port is a SASL_SSL port security dialling as user/pass; brokers 1-3 are allowed, mallory
// is a valid user but no broker.
func (f *secFixture) port(t *testing.T, user, pass string) *PortSecurity {
	t.Helper()
	var creds *peerauth.SASLCredentials
	if user != "" {
		var err error
		if creds, err = peerauth.NewSASLCredentials(peerauth.MechanismPlain, user, pass); err != nil {
			t.Fatal(err)
		}
	}
	return &PortSecurity{
		Protocol:    "SASL_SSL",
		ServerTLS:   &tls.Config{Certificates: []tls.Certificate{f.server.TLS}, MinVersion: tls.VersionTLS12},
		ClientTLS:   &tls.Config{RootCAs: f.ca.Pool, MinVersion: tls.VersionTLS12},
		PlainUsers:  f.users,
		Credentials: creds,
		Principal:   "User:" + user,
		Allowed:     []string{"User:broker1", "User:broker2", "User:broker3"},
		FailDelay:   50 * time.Millisecond,
	}
}

func (f *secFixture) broker(t *testing.T, id int32) *PortSecurity {
	u := fmt.Sprintf("broker%d", id)
	return f.port(t, u, f.users[u])
}

// call sends one controller RPC with sec and returns the transport or Kafka error.
func call(ctx context.Context, sec *PortSecurity, addr string, req *request) error {
	cl := newRPCClient(sec)
	defer cl.close()
	resp, err := cl.call(ctx, addr, req)
	if err != nil {
		return err
	}
	return resp.err()
}

// callAtLeader sends req to the current raft leader's port, again at the new leader when
// leadership moved on the way (NOT_CONTROLLER: an election on a loaded machine), as a broker's
// controller client does.
func callAtLeader(ctx context.Context, cl *testCluster, sec *PortSecurity, req *request) error {
	for {
		err := call(ctx, sec, cl.addrs[cl.leader().cfg.NodeID], req)
		if !errors.Is(err, kerr.NotController) || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// snapshotOf is what an attacker must not change.
type snapshotOf struct {
	topics  map[string][16]byte
	records map[string]map[string]string
	brokers map[int32]BrokerInfo
}

func takeSnapshot(img *Image) snapshotOf {
	s := snapshotOf{topics: map[string][16]byte{}, records: map[string]map[string]string{}, brokers: map[int32]BrokerInfo{}}
	for n, t := range img.Topics {
		s.topics[n] = t.ID
	}
	for k, v := range img.Records {
		s.records[k] = maps.Clone(v)
	}
	for id, b := range img.Brokers {
		b.Fenced = false // liveness may change on a slow machine; identity must not
		b.Epoch = 0
		s.brokers[id] = b
	}
	return s
}

func (s snapshotOf) equal(o snapshotOf) bool {
	if !maps.Equal(s.topics, o.topics) || len(s.records) != len(o.records) || len(s.brokers) != len(o.brokers) {
		return false
	}
	for k, v := range s.records {
		if !maps.Equal(v, o.records[k]) {
			return false
		}
	}
	for id, b := range s.brokers {
		ob := o.brokers[id]
		if !slices.Equal(b.Endpoints, ob.Endpoints) || b.Principal != ob.Principal || b.Incarnation != ob.Incarnation {
			return false
		}
	}
	return true
}

func TestControllerPortSecurity(t *testing.T) {
	f := newSecFixture(t)
	cl := newTestClusterSec(t, 3, func(id int32) *PortSecurity { return f.broker(t, id) })
	ctx := ctxT(t, 60*time.Second)
	// Leadership can move under load (race detector, a busy machine): create at whichever node
	// leads, and count a create that committed before a move as done.
	for tries := 0; ; tries++ {
		_, err := cl.leader().CreateTopic(ctx, CreateTopicRequest{Name: "keep", Partitions: 2, ReplicationFactor: 3})
		if err == nil || (tries > 0 && errors.Is(err, kerr.TopicAlreadyExists)) {
			break
		}
		if !errors.Is(err, kerr.NotController) || ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	leader := cl.leader()
	// A non-leader's request crosses the secured port (forwarded to the leader).
	if err := cl.follower().PutRecords(ctx, RecordKindACL, map[string]string{"k": "v"}, nil); err != nil {
		t.Fatal(err)
	}
	img := cl.converged()
	for id := int32(1); id <= 3; id++ {
		if got, want := img.Brokers[id].Principal, fmt.Sprintf("User:broker%d", id); got != want {
			t.Fatalf("broker %d registered by %q, want %q", id, got, want)
		}
	}
	before := takeSnapshot(img)
	addr := cl.addrs[leader.cfg.NodeID]

	attacks := []*request{
		{Op: reqDeleteTopic, Name: "keep"},
		{Op: reqPutRecords, Kind: RecordKindSCRAM, Puts: map[string]string{"mallory": "credential"}},
		{Op: reqPutRecords, Kind: RecordKindACL, Deletes: []string{"k"}},
		{Op: reqHeartbeat, BrokerID: 2, Register: true, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "evil.example", Port: 1}}},
		{Op: reqControlledStop, BrokerID: 3},
		{Op: reqAlterPartition, AlterPartition: &AlterPartitionRequest{Topic: "keep", Partition: 0, LeaderID: 1, ISR: []int32{1}}},
	}
	noTLS := f.port(t, "broker1", "pw-one")
	noTLS.ClientTLS, noTLS.ServerTLS = nil, nil
	noCreds := f.port(t, "", "")
	noCreds.Principal = "User:ANONYMOUS"
	cases := []struct {
		name   string
		sec    *PortSecurity
		status byte // the refusal's status; 0: the connection is just closed
	}{
		{"no security at all", nil, 0},
		{"right password without TLS", noTLS, 0},
		{"TLS without credentials", noCreds, statusBadHandshake},
		{"wrong password", f.port(t, "broker1", "pw-two"), statusAuthFailed},
		{"unknown user", f.port(t, "nobody", "pw-one"), statusAuthFailed},
		{"valid user that is no broker", f.port(t, "mallory", "pw-mallory"), statusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			for _, req := range attacks {
				start := time.Now()
				err := call(ctx, tc.sec, addr, req)
				if err == nil {
					t.Fatalf("%s accepted", req.Op)
				}
				var pe *PortAuthError
				switch {
				case tc.status != 0 && (!errors.As(err, &pe) || pe.Status != tc.status):
					t.Fatalf("%s: error %v, want refusal status %d", req.Op, err, tc.status)
				case tc.status != 0 && time.Since(start) < 50*time.Millisecond:
					t.Fatalf("%s: refused after %v, before connection.failed.authentication.delay.ms", req.Op, time.Since(start))
				case strings.Contains(err.Error(), "pw-"):
					t.Fatalf("a password in the error: %v", err)
				}
			}
			// Raft: the connection is refused before raft sees a byte.
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if tc.sec == nil {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = conn.Write(append([]byte{connRaft}, bytes.Repeat([]byte{0x80}, 64)...))
				_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
				if _, err := io.Copy(io.Discard, conn); err != nil {
					t.Fatalf("raft bytes without TLS: %v (want the connection closed)", err)
				}
				conn.Close()
			} else if conn, err := dialPort(rctx, tc.sec, addr, connRaft, time.Second); err == nil {
				conn.Close()
				t.Fatalf("raft connection accepted")
			}
		})
	}
	// A broker's own credentials open a raft connection (positive control).
	conn, err := dialPort(ctx, f.broker(t, 2), addr, connRaft, time.Second)
	if err != nil {
		t.Fatalf("raft connection with broker credentials: %v", err)
	}
	conn.Close()

	t.Run("BrokerCannotActForAnotherID", func(t *testing.T) {
		b2 := f.broker(t, 2)
		other := cl.follower(leader.cfg.NodeID) // a live broker that is not the leader
		oid := other.cfg.NodeID
		sec := b2
		if oid == 2 {
			sec = f.broker(t, 3)
		}
		for _, req := range []*request{
			{Op: reqHeartbeat, BrokerID: oid, Register: true, Incarnation: "forged", Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "evil.example", Port: 1}}},
			{Op: reqHeartbeat, BrokerID: oid, Incarnation: other.incarnation, Endpoints: other.cfg.Endpoints},
			{Op: reqControlledStop, BrokerID: oid},
			{Op: reqAlterPartition, AlterPartition: &AlterPartitionRequest{Topic: "keep", Partition: 0, LeaderID: oid, ISR: []int32{oid}}},
		} {
			if err := callAtLeader(ctx, cl, sec, req); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
				t.Fatalf("%s for broker %d with another broker's credentials: %v, want CLUSTER_AUTHORIZATION_FAILED", req.Op, oid, err)
			}
		}
		// The right principal but another process while the broker lives: Kafka's duplicate
		// registration.
		err := callAtLeader(ctx, cl, f.broker(t, oid), &request{Op: reqHeartbeat, BrokerID: oid, Register: true, Incarnation: "second-process", Endpoints: other.cfg.Endpoints})
		if !errors.Is(err, kerr.DuplicateBrokerRegistration) {
			t.Fatalf("second incarnation of a live broker: %v, want DUPLICATE_BROKER_REGISTRATION", err)
		}
	})

	t.Run("FramesAndFields", func(t *testing.T) {
		frames := map[string][]byte{
			"heartbeat frame over its bound": frameHeader(1<<20, `{"op":"heartbeat","broker":1,"endpoints":[`+strings.Repeat(" ", 40)),
			"unknown op":                     frameOf(`{"op":"become_leader","broker":1}`),
			"unknown field":                  frameOf(`{"op":"sync","broker":0,"evil":true}`),
			"field of another op":            frameOf(`{"op":"sync","broker":0,"name":"keep"}`),
			"record kind not allowed":        frameOf(`{"op":"put_records","broker":0,"kind":"topics","puts":{"a":"b"}}`),
			"op not first":                   frameOf(`{"broker":0,"op":"sync"}`),
			"trailing data":                  frameOf(`{"op":"sync","broker":0}{"op":"sync"}`),
		}
		for name, frame := range frames {
			conn, err := dialPort(ctx, f.broker(t, 2), addr, connRPC, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = conn.Write(frame)
			n, err := io.Copy(io.Discard, conn)
			conn.Close()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || n > 0 {
				t.Fatalf("%s: connection not closed at once (read %d bytes, %v)", name, n, err)
			}
		}
	})

	if after := takeSnapshot(cl.converged()); !before.equal(after) {
		t.Fatalf("metadata changed:\nbefore %+v\nafter  %+v", before, after)
	}
	for id, c := range cl.nodes {
		if c.Image().Topics["keep"] == nil {
			t.Fatalf("node %d lost topic keep", id)
		}
	}

	// Once a broker is gone (fenced, session over), another allowed principal may register its
	// id: a replaced machine, a new certificate subject.
	gone := cl.follower(cl.leader().cfg.NodeID)
	gid, gEndpoints := gone.cfg.NodeID, gone.cfg.Endpoints
	cl.stop(gid)
	eventually(t, 20*time.Second, "the stopped broker fenced", func() error {
		if b := leader.Image().Brokers[gid]; !b.Fenced {
			return fmt.Errorf("broker %d not fenced", gid)
		}
		return nil
	})
	time.Sleep(leader.cfg.SessionTimeout)
	newcomer := int32(2)
	if gid == 2 {
		newcomer = 3
	}
	if err := callAtLeader(ctx, cl, f.broker(t, newcomer), &request{Op: reqHeartbeat, BrokerID: gid, Register: true, Incarnation: "replacement", Endpoints: gEndpoints}); err != nil {
		t.Fatalf("registering a gone broker's id with another principal: %v", err)
	}
	if got, want := leader.Image().Brokers[gid].Principal, fmt.Sprintf("User:broker%d", newcomer); got != want {
		t.Fatalf("broker %d registered by %s, want %s", gid, got, want)
	}
}

func frameHeader(n int, head string) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(n))
	return append(out, head...)
}

func frameOf(body string) []byte { return frameHeader(len(body), body) }

// TestControllerPortPlaintextWarning: a multi-node controller with an unsecured port says so.
func TestControllerPortPlaintextWarning(t *testing.T) {
	var buf syncBuf
	ln := listenRetry(t, "127.0.0.1:0")
	c, err := Start(Config{NodeID: 1, Voters: []Voter{{ID: 1, Addr: ln.Addr().String()}}, Dir: t.TempDir(), listener: ln,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if !strings.Contains(buf.String(), "THE CONTROLLER PORT IS UNAUTHENTICATED") {
		t.Fatalf("no warning:\n%s", buf.String())
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPortSecurityValidate: settings that cannot identify peers are refused.
func TestPortSecurityValidate(t *testing.T) {
	f := newSecFixture(t)
	ok := f.broker(t, 1)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	sslNoClientAuth := f.broker(t, 1)
	sslNoClientAuth.PlainUsers, sslNoClientAuth.Credentials = nil, nil
	noCreds := f.broker(t, 1)
	noCreds.Credentials = nil
	scram := f.broker(t, 1)
	scram.Credentials, _ = peerauth.NewSASLCredentials(peerauth.MechanismScramSHA512, "broker1", "pw")
	for name, s := range map[string]*PortSecurity{"SSL without client auth": sslNoClientAuth, "no credentials": noCreds, "SCRAM": scram, "nothing": {}} {
		if err := s.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// BenchmarkControllerPortConnect: opening a controller RPC connection and one sync request on
// it, plaintext and SASL_SSL (TLS 1.3 with ECDSA P-256, SASL PLAIN), against a one-voter quorum.
func BenchmarkControllerPortConnect(b *testing.B) {
	for _, secured := range []bool{false, true} {
		name := "PLAINTEXT"
		if secured {
			name = "SASL_SSL"
		}
		b.Run(name, func(b *testing.B) {
			var sec *PortSecurity
			if secured {
				ca := testcert.NewCA(b)
				server := ca.Server(b)
				creds, _ := peerauth.NewSASLCredentials(peerauth.MechanismPlain, "broker1", "pw")
				sec = &PortSecurity{Protocol: "SASL_SSL",
					ServerTLS:  &tls.Config{Certificates: []tls.Certificate{server.TLS}, MinVersion: tls.VersionTLS12},
					ClientTLS:  &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12},
					PlainUsers: map[string]string{"broker1": "pw"}, Credentials: creds, Principal: "User:broker1", Allowed: []string{"User:broker1"}}
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			c, err := Start(Config{NodeID: 1, Voters: []Voter{{ID: 1, Addr: ln.Addr().String()}}, Dir: b.TempDir(), listener: ln,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Security: sec})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := c.WaitReady(ctx); err != nil {
				b.Fatal(err)
			}
			addr := ln.Addr().String()
			b.ResetTimer()
			for range b.N {
				cl := newRPCClient(sec)
				if _, err := cl.call(ctx, addr, &request{Op: reqSync}); err != nil {
					b.Fatal(err)
				}
				cl.close()
			}
		})
	}
}

// TestControllerPortMutualTLS: an SSL port (no SASL) identifies peers by their client
// certificate's subject: the brokers' certificates pass, a certificate of the same CA for
// another subject is not authorized, and a peer without a certificate fails the TLS handshake.
func TestControllerPortMutualTLS(t *testing.T) {
	ca := testcert.NewCA(t)
	server := ca.Server(t)
	certs := map[int32]testcert.Pair{}
	var allowed []string
	for id := int32(1); id <= 3; id++ {
		certs[id] = ca.Client(t, pkix.Name{CommonName: fmt.Sprintf("broker%d", id), Organization: []string{"weir"}})
		allowed = append(allowed, netio.CertificatePrincipal(leafOf(t, certs[id])))
	}
	port := func(p testcert.Pair) *PortSecurity {
		return &PortSecurity{
			Protocol: "SSL",
			ServerTLS: &tls.Config{Certificates: []tls.Certificate{server.TLS}, MinVersion: tls.VersionTLS12,
				ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool},
			ClientTLS:     &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{p.TLS}},
			Principal:     netio.CertificatePrincipal(leafOf(t, p)),
			Allowed:       allowed,
			CertPrincipal: netio.CertificatePrincipal,
			FailDelay:     10 * time.Millisecond,
		}
	}
	cl := newTestClusterSec(t, 3, func(id int32) *PortSecurity { return port(certs[id]) })
	ctx := ctxT(t, 30*time.Second)
	if _, err := cl.follower().CreateTopic(ctx, CreateTopicRequest{Name: "mtls", Partitions: 1, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	img := cl.converged()
	if img.Topics["mtls"] == nil || img.Brokers[1].Principal != allowed[0] {
		t.Fatalf("topic or principal missing: %+v", img.Brokers[1])
	}
	addr := cl.addrs[cl.leader().cfg.NodeID]
	mallory := port(ca.Client(t, pkix.Name{CommonName: "mallory"}))
	var pe *PortAuthError
	if err := call(ctx, mallory, addr, &request{Op: reqDeleteTopic, Name: "mtls"}); !errors.As(err, &pe) || pe.Status != statusUnauthorized {
		t.Fatalf("another subject: %v, want not authorized", err)
	}
	noCert := port(certs[1])
	noCert.ClientTLS = &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
	if err := call(ctx, noCert, addr, &request{Op: reqDeleteTopic, Name: "mtls"}); err == nil {
		t.Fatal("a peer without a certificate was served")
	}
	if cl.converged().Topics["mtls"] == nil {
		t.Fatal("topic deleted")
	}
}

func leafOf(t *testing.T, p testcert.Pair) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(p.TLS.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}
