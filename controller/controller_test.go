package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/goleak"
)

func testLogger() *slog.Logger {
	level := slog.LevelError
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func eventually(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantKerr(t *testing.T, err error, want *kerr.Error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %s", err, want.Message)
	}
}

func startSingle(t *testing.T, dir string) *Controller {
	t.Helper()
	start := time.Now()
	c, err := Start(Config{NodeID: 0, Dir: dir, ClusterID: "test", Logger: testLogger(),
		Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctxT(t, 5*time.Second)); err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Logf("single node ready in %v", time.Since(start))
	return c
}

func TestSingleNode(t *testing.T) {
	dir := t.TempDir()
	c := startSingle(t, dir)
	ctx := ctxT(t, 10*time.Second)
	if c.ActiveID() != 0 || c.Image().ClusterID != "test" {
		t.Fatalf("active id %d, cluster id %q", c.ActiveID(), c.Image().ClusterID)
	}
	ti, err := c.CreateTopic(ctx, CreateTopicRequest{Name: "orders", Partitions: 3, ReplicationFactor: 1, Configs: map[string]string{"cleanup.policy": "delete"}})
	if err != nil {
		t.Fatal(err)
	}
	if ti.ID == ([16]byte{}) || len(ti.Partitions) != 3 {
		t.Fatalf("topic %+v", ti)
	}
	for i, p := range ti.Partitions {
		if p.Leader != 0 || !slices.Equal(p.Replicas, []int32{0}) || !slices.Equal(p.ISR, []int32{0}) {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}
	if got := c.Image().Topics["orders"]; got == nil || got.ID != ti.ID || c.Image().TopicsByID[ti.ID] != got {
		t.Fatalf("image does not have the topic")
	}
	_, err = c.CreateTopic(ctx, CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 1})
	wantKerr(t, err, kerr.TopicAlreadyExists)
	_, err = c.CreateTopic(ctx, CreateTopicRequest{Name: "x", Partitions: 1, ReplicationFactor: 2})
	wantKerr(t, err, kerr.InvalidReplicationFactor)
	_, err = c.CreateTopic(ctx, CreateTopicRequest{Name: "x", Partitions: 0, ReplicationFactor: 1})
	wantKerr(t, err, kerr.InvalidPartitions)
	_, err = c.CreateTopic(ctx, CreateTopicRequest{Name: "x", Assignment: [][]int32{{0, 0}}})
	wantKerr(t, err, kerr.InvalidReplicaAssignment)
	_, err = c.CreateTopic(ctx, CreateTopicRequest{Name: "x", Assignment: [][]int32{{7}}})
	wantKerr(t, err, kerr.InvalidReplicaAssignment)
	v, err := c.CreateTopic(ctx, CreateTopicRequest{Name: "x", Partitions: 2, ReplicationFactor: 1, ValidateOnly: true})
	if err != nil || len(v.Partitions) != 2 || c.Image().Topics["x"] != nil {
		t.Fatalf("validate only: %v %+v", err, v)
	}
	if err := c.DeleteTopic(ctx, "nope"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete unknown: %v", err)
	}
	if _, err := c.CreateTopic(ctx, CreateTopicRequest{Name: "gone", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteTopic(ctx, "gone"); err != nil || c.Image().Topics["gone"] != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := c.CreatePartitions(ctx, "orders", 5, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(c.Image().Topics["orders"].Partitions); n != 5 {
		t.Fatalf("%d partitions", n)
	}
	wantKerr(t, c.CreatePartitions(ctx, "orders", 5, nil), kerr.InvalidPartitions)
	if err := c.AlterTopicConfigs(ctx, "orders", map[string]string{"retention.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	if cf := c.Image().Topics["orders"].Configs; len(cf) != 1 || cf["retention.ms"] != "1000" {
		t.Fatalf("configs %v", cf)
	}
	seen := map[int64]bool{}
	first, err := c.AllocateProducerIDs(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := first; i < first+10; i++ {
		seen[i] = true
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = startSingle(t, dir)
	defer c.Close()
	got := c.Image().Topics["orders"]
	if got == nil || got.ID != ti.ID || len(got.Partitions) != 5 || got.Configs["retention.ms"] != "1000" {
		t.Fatalf("after restart: %+v", got)
	}
	if c.Image().Topics["gone"] != nil {
		t.Fatalf("deleted topic came back")
	}
	if b := c.Image().Brokers[0]; b.Fenced || len(b.Endpoints) != 1 {
		t.Fatalf("broker %+v", b)
	}
	second, err := c.AllocateProducerIDs(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := second; i < second+10; i++ {
		if seen[i] {
			t.Fatalf("producer id %d handed out twice", i)
		}
	}
}

func TestSnapshotRestart(t *testing.T) {
	dir := t.TempDir()
	c := startSingle(t, dir)
	ctx := ctxT(t, 20*time.Second)
	for i := range 5 {
		if _, err := c.CreateTopic(ctx, CreateTopicRequest{Name: fmt.Sprintf("t%d", i), Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, CreateTopicRequest{Name: "after", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	want, _ := encodeImage(c.Image())
	c.Close()
	c = startSingle(t, dir)
	defer c.Close()
	if len(c.Image().Topics) != 6 {
		t.Fatalf("%d topics after restart", len(c.Image().Topics))
	}
	// The image equals the one before the restart, except for this run's registration.
	img := c.Image()
	b := newBuilder(img)
	old, _ := decodeImage(want)
	b.img.Brokers = old.Brokers
	b.img.Index = old.Index
	got, _ := encodeImage(b.img)
	if !bytes.Equal(got, want) {
		t.Fatalf("image after restart differs:\n%s\n%s", got, want)
	}
}

func TestParseVoters(t *testing.T) {
	v, err := ParseVoters("1@127.0.0.1:19093, 2@localhost:19094,3@[::1]:19095")
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 3 || v[0] != (Voter{1, "127.0.0.1:19093"}) || v[2] != (Voter{3, "[::1]:19095"}) {
		t.Fatalf("%+v", v)
	}
	if v, err := ParseVoters(""); err != nil || v != nil {
		t.Fatal(v, err)
	}
	for _, bad := range []string{"1", "x@h:1", "-1@h:1", "1@h", "1@h:0", "1@h:70000", "1@:1", "1@h:1,1@g:2", "99999999999@h:1"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// ---- clusters ----

type testCluster struct {
	t      *testing.T
	voters []Voter
	dirs   map[int32]string
	addrs  map[int32]string
	nodes  map[int32]*Controller
	// sec, when set, secures each node's port (portsec_test.go).
	sec map[int32]*PortSecurity
}

func (cl *testCluster) config(id int32, ln net.Listener) Config {
	return Config{
		NodeID:            id,
		Voters:            cl.voters,
		Dir:               cl.dirs[id],
		ClusterID:         "test-cluster",
		Endpoints:         []Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9000 + id}},
		SessionTimeout:    time.Second,
		HeartbeatInterval: 100 * time.Millisecond,
		Logger:            testLogger().With("test-node", id),
		listener:          ln,
		Security:          cl.sec[id],
	}
}

func listenRetry(t *testing.T, addr string) net.Listener {
	t.Helper()
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("listen %s: %v", addr, err)
	return nil
}

func newTestCluster(t *testing.T, n int) *testCluster {
	return newTestClusterSec(t, n, nil)
}

// newTestClusterSec starts n voters; sec(id), when set, is node id's port security.
func newTestClusterSec(t *testing.T, n int, sec func(id int32) *PortSecurity) *testCluster {
	cl := &testCluster{t: t, dirs: map[int32]string{}, addrs: map[int32]string{}, nodes: map[int32]*Controller{}, sec: map[int32]*PortSecurity{}}
	if sec != nil {
		for i := int32(1); i <= int32(n); i++ {
			cl.sec[i] = sec(i)
		}
	}
	lns := map[int32]net.Listener{}
	for i := int32(1); i <= int32(n); i++ {
		ln := listenRetry(t, "127.0.0.1:0")
		lns[i] = ln
		cl.addrs[i] = ln.Addr().String()
		cl.dirs[i] = t.TempDir()
		cl.voters = append(cl.voters, Voter{ID: i, Addr: cl.addrs[i]})
	}
	t.Cleanup(func() {
		for _, c := range cl.nodes {
			c.Close()
		}
	})
	for i := int32(1); i <= int32(n); i++ {
		c, err := Start(cl.config(i, lns[i]))
		if err != nil {
			t.Fatal(err)
		}
		cl.nodes[i] = c
	}
	for i, c := range cl.nodes {
		if err := c.WaitReady(ctxT(t, 15*time.Second)); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	return cl
}

func (cl *testCluster) stop(id int32) {
	cl.t.Helper()
	if err := cl.nodes[id].Close(); err != nil {
		cl.t.Logf("close %d: %v", id, err)
	}
	delete(cl.nodes, id)
}

func (cl *testCluster) restart(id int32) *Controller {
	cl.t.Helper()
	c, err := Start(cl.config(id, listenRetry(cl.t, cl.addrs[id])))
	if err != nil {
		cl.t.Fatal(err)
	}
	cl.nodes[id] = c
	return c
}

// leader returns the raft leader's controller, waiting for one that all running nodes agree on.
func (cl *testCluster) leader() *Controller {
	cl.t.Helper()
	var l *Controller
	eventually(cl.t, 10*time.Second, "leader agreed", func() error {
		l = nil
		var ids []int32
		for _, c := range cl.nodes {
			ids = append(ids, c.ActiveID())
		}
		for _, id := range ids {
			if id != ids[0] {
				return fmt.Errorf("active ids %v", ids)
			}
		}
		l = cl.nodes[ids[0]]
		if l == nil || !l.isLeader() {
			return fmt.Errorf("active id %d not a running leader", ids[0])
		}
		return nil
	})
	return l
}

func (cl *testCluster) follower(not ...int32) *Controller {
	l := cl.leader()
	for id, c := range cl.nodes {
		if c != l && !slices.Contains(not, id) {
			return c
		}
	}
	cl.t.Fatal("no follower")
	return nil
}

// converged waits until every running node has the same image.
func (cl *testCluster) converged() *Image {
	cl.t.Helper()
	var img *Image
	eventually(cl.t, 10*time.Second, "images converge", func() error {
		var first []byte
		for id, c := range cl.nodes {
			img = c.Image()
			data, _ := encodeImage(img)
			if first == nil {
				first = data
			} else if !bytes.Equal(first, data) {
				return fmt.Errorf("node %d differs", id)
			}
		}
		return nil
	})
	return img
}

func checkPlacement(t *testing.T, ti *TopicInfo, brokers []int32, rf int) {
	t.Helper()
	n := len(brokers)
	start := slices.Index(brokers, ti.Partitions[0].Replicas[0])
	if start < 0 {
		t.Fatalf("first replica %d not a broker", ti.Partitions[0].Replicas[0])
	}
	for i, p := range ti.Partitions {
		if len(p.Replicas) != rf {
			t.Fatalf("partition %d: %d replicas", i, len(p.Replicas))
		}
		for j, r := range p.Replicas {
			if want := brokers[(start+i+j)%n]; r != want {
				t.Fatalf("partition %d replica %d on %d, want %d (%v)", i, j, r, want, p.Replicas)
			}
		}
		if p.Leader != p.Replicas[0] || !slices.Equal(p.ISR, p.Replicas) || p.LeaderEpoch != 0 || p.PartitionEpoch != 0 {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}
}

func TestCluster(t *testing.T) {
	cl := newTestCluster(t, 3)
	ctx := ctxT(t, 50*time.Second)

	img := cl.converged()
	if len(img.Brokers) != 3 || !slices.Equal(img.UnfencedBrokers(), []int32{1, 2, 3}) || img.ClusterID != "test-cluster" {
		t.Fatalf("brokers %+v", img.Brokers)
	}

	// CreateTopic from a follower is forwarded to the leader.
	f := cl.follower()
	t3, err := f.CreateTopic(ctx, CreateTopicRequest{Name: "rf3", Partitions: 6, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	if f.Image().Topics["rf3"] == nil {
		t.Fatal("forwarded create not in the follower's image on return")
	}
	checkPlacement(t, &t3, []int32{1, 2, 3}, 3)
	t1, err := f.CreateTopic(ctx, CreateTopicRequest{Name: "rf1", Partitions: 6, ReplicationFactor: 1})
	if err != nil {
		t.Fatal(err)
	}
	checkPlacement(t, &t1, []int32{1, 2, 3}, 1)
	_, err = f.CreateTopic(ctx, CreateTopicRequest{Name: "rf4", Partitions: 1, ReplicationFactor: 4})
	wantKerr(t, err, kerr.InvalidReplicationFactor)
	if err := f.CreatePartitions(ctx, "rf3", 8, nil); err != nil {
		t.Fatal(err)
	}
	img = cl.converged()
	grown := img.Topics["rf3"]
	checkPlacement(t, grown, []int32{1, 2, 3}, 3)

	t.Run("AlterPartition", func(t *testing.T) {
		c := cl.follower()
		p := img.Topics["rf3"].Partitions[0]
		req := AlterPartitionRequest{Topic: "rf3", Partition: 0, LeaderID: p.Leader, LeaderEpoch: p.LeaderEpoch - 1, PartitionEpoch: p.PartitionEpoch, ISR: p.ISR}
		_, err := c.AlterPartition(ctx, req)
		wantKerr(t, err, kerr.FencedLeaderEpoch)
		req.LeaderEpoch = p.LeaderEpoch
		req.PartitionEpoch = p.PartitionEpoch + 1
		_, err = c.AlterPartition(ctx, req)
		wantKerr(t, err, kerr.InvalidUpdateVersion)
		req.PartitionEpoch = p.PartitionEpoch
		req.ISR = append(slices.Clone(p.ISR), 99)
		_, err = c.AlterPartition(ctx, req)
		wantKerr(t, err, kerr.InvalidRequest)
		req.ISR = []int32{p.Replicas[1]}
		_, err = c.AlterPartition(ctx, req)
		wantKerr(t, err, kerr.InvalidRequest) // without the leader
		req.ISR = []int32{p.Leader, p.Replicas[1]}
		np, err := c.AlterPartition(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if np.PartitionEpoch != p.PartitionEpoch+1 || np.LeaderEpoch != p.LeaderEpoch || !slices.Equal(np.ISR, req.ISR) {
			t.Fatalf("altered %+v", np)
		}
		_, err = c.AlterPartition(ctx, req) // same epoch again: stale
		wantKerr(t, err, kerr.InvalidUpdateVersion)
		req.PartitionEpoch = np.PartitionEpoch
		req.ISR = p.Replicas
		if np, err = c.AlterPartition(ctx, req); err != nil || len(np.ISR) != 3 {
			t.Fatalf("%+v %v", np, err)
		}
		_, err = c.AlterPartition(ctx, AlterPartitionRequest{Topic: "nope"})
		wantKerr(t, err, kerr.UnknownTopicOrPartition)
	})

	// Stop a broker that is not the raft leader: it is fenced after its session timeout and
	// its partitions get new leaders.
	victim := cl.follower().cfg.NodeID
	before := cl.converged()
	stopped := time.Now()
	cl.stop(victim)
	l := cl.leader()
	eventually(t, 5*time.Second, "victim fenced", func() error {
		if !l.Image().Brokers[victim].Fenced {
			return errors.New("not fenced")
		}
		return nil
	})
	t.Logf("broker %d fenced %v after Close (session timeout 1s)", victim, time.Since(stopped))
	after := cl.converged()
	checkFenced(t, before, after, victim)

	// Restart it: unfenced; the partitions left without a leader get it back.
	c := cl.restart(victim)
	if err := c.WaitReady(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	img = cl.converged()
	if img.Brokers[victim].Fenced || img.Brokers[victim].Epoch <= before.Brokers[victim].Epoch {
		t.Fatalf("restarted broker %+v (was %+v)", img.Brokers[victim], before.Brokers[victim])
	}
	for i, p := range img.Topics["rf1"].Partitions {
		if p.Leader != p.Replicas[0] {
			t.Fatalf("rf1-%d has leader %d", i, p.Leader)
		}
		if p.Leader == victim && p.LeaderEpoch != after.Topics["rf1"].Partitions[i].LeaderEpoch+1 {
			t.Fatalf("rf1-%d epoch not bumped: %+v", i, p)
		}
	}

	t.Run("ControlledShutdown", func(t *testing.T) {
		c := cl.follower()
		id := c.cfg.NodeID
		before := cl.converged()
		if err := c.ControlledShutdown(ctx); err != nil {
			t.Fatal(err)
		}
		after := c.Image()
		if !after.Brokers[id].Fenced {
			t.Fatal("not fenced after controlled shutdown")
		}
		checkFenced(t, before, after, id)
		again := time.Now()
		if err := c.ControlledShutdown(ctxT(t, 3*time.Second)); err != nil || time.Since(again) > time.Second {
			t.Fatalf("second controlled shutdown: %v after %v", err, time.Since(again))
		}
		// It stays fenced while the node keeps running without heartbeats.
		time.Sleep(300 * time.Millisecond)
		if !cl.leader().Image().Brokers[id].Fenced {
			t.Fatal("unfenced again")
		}
		cl.stop(id)
		nc := cl.restart(id)
		if err := nc.WaitReady(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("KillLeader", func(t *testing.T) {
		old := cl.leader()
		oid := old.cfg.NodeID
		before := cl.converged()
		stopped := time.Now()
		cl.stop(oid)
		nl := cl.leader()
		t.Logf("new raft leader %d after %v", nl.cfg.NodeID, time.Since(stopped))
		eventually(t, 8*time.Second, "old leader fenced", func() error {
			if !nl.Image().Brokers[oid].Fenced {
				return errors.New("not fenced")
			}
			return nil
		})
		after := cl.converged()
		checkFenced(t, before, after, oid)
		// Two brokers left: RF 3 is refused, RF 2 works, from either node.
		_, err := cl.follower().CreateTopic(ctx, CreateTopicRequest{Name: "late3", Partitions: 1, ReplicationFactor: 3})
		wantKerr(t, err, kerr.InvalidReplicationFactor)
		lt, err := cl.follower().CreateTopic(ctx, CreateTopicRequest{Name: "late2", Partitions: 4, ReplicationFactor: 2})
		if err != nil {
			t.Fatal(err)
		}
		checkPlacement(t, &lt, after.UnfencedBrokers(), 2)
		c := cl.restart(oid)
		if err := c.WaitReady(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if img := cl.converged(); len(img.UnfencedBrokers()) != 3 {
			t.Fatalf("brokers %+v", img.Brokers)
		}
	})

	t.Run("NonVoter", func(t *testing.T) {
		ln := listenRetry(t, "127.0.0.1:0")
		cl.dirs[4] = t.TempDir()
		cl.addrs[4] = ln.Addr().String()
		cfg := cl.config(4, ln)
		cfg.Addr = ln.Addr().String()
		cfg.ClusterID = "other" // the cluster's id is the one in the log
		c, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cl.nodes[4] = c
		if err := c.WaitReady(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		img := cl.converged()
		if img.Topics["rf3"] == nil || len(img.UnfencedBrokers()) != 4 || img.ClusterID != "test-cluster" {
			t.Fatalf("non-voter image: %d topics, brokers %v", len(img.Topics), img.UnfencedBrokers())
		}
		cf := cl.leader().raft.GetConfiguration()
		if err := cf.Error(); err != nil {
			t.Fatal(err)
		}
		for _, s := range cf.Configuration().Servers {
			if s.ID == "4" && s.Suffrage.String() != "Nonvoter" {
				t.Fatalf("node 4 is %v", s.Suffrage)
			}
		}
		nt, err := c.CreateTopic(ctx, CreateTopicRequest{Name: "from-nonvoter", Partitions: 4, ReplicationFactor: 2})
		if err != nil {
			t.Fatal(err)
		}
		checkPlacement(t, &nt, []int32{1, 2, 3, 4}, 2)
	})

	t.Run("BadInput", func(t *testing.T) {
		target := cl.follower()
		addr := cl.addrs[target.cfg.NodeID]
		inputs := [][]byte{
			[]byte("GET / HTTP/1.1\r\n\r\n"),
			{'C', 0xff, 0xff, 0xff, 0xff},
			{'C', 0, 0, 0, 0},
			append([]byte{'C', 0, 0, 0, 5}, "{{{{{"...),
			append([]byte{'R'}, bytes.Repeat([]byte{0xc1, 0xff}, 64)...),
		}
		for i, in := range inputs {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = conn.Write(in)
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.Copy(io.Discard, conn)
			conn.Close()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("input %d: connection not closed", i)
			}
		}
		// A silent connection is dropped too, and the node keeps serving.
		if _, err := target.CreateTopic(ctx, CreateTopicRequest{Name: "after-garbage", Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
		resp, err := newRPCClient(nil).call(ctx, addr, &request{Op: reqHeartbeat, BrokerID: target.cfg.NodeID, Endpoints: target.cfg.Endpoints})
		if err != nil || (resp.Code != 0 && resp.Code != kerr.NotController.Code) {
			t.Fatalf("rpc after garbage: %+v %v", resp, err)
		}
	})
}

// checkFenced checks the partitions after broker id was fenced (or shut down).
func checkFenced(t *testing.T, before, after *Image, id int32) {
	t.Helper()
	if !after.Brokers[id].Fenced {
		t.Fatalf("broker %d not fenced", id)
	}
	for name, bt := range before.Topics {
		at := after.Topics[name]
		for i, bp := range bt.Partitions {
			ap := at.Partitions[i]
			if !slices.Contains(bp.Replicas, id) {
				if ap.LeaderEpoch != bp.LeaderEpoch || ap.PartitionEpoch != bp.PartitionEpoch {
					t.Fatalf("%s-%d changed without %d: %+v -> %+v", name, i, id, bp, ap)
				}
				continue
			}
			if ap.Leader == id {
				t.Fatalf("%s-%d still led by fenced %d", name, i, id)
			}
			if slices.Contains(ap.ISR, id) && len(ap.ISR) > 1 {
				t.Fatalf("%s-%d: fenced %d still in ISR %v", name, i, id, ap.ISR)
			}
			if bp.Leader == id {
				if ap.LeaderEpoch <= bp.LeaderEpoch {
					t.Fatalf("%s-%d: leader epoch not bumped: %+v -> %+v", name, i, bp, ap)
				}
				want := int32(-1)
				for _, r := range bp.Replicas {
					if r != id && slices.Contains(bp.ISR, r) && !after.Brokers[r].Fenced {
						want = r
						break
					}
				}
				if ap.Leader != want {
					t.Fatalf("%s-%d: leader %d, want %d (%+v -> %+v)", name, i, ap.Leader, want, bp, ap)
				}
			}
			touched := bp.Leader == id || (slices.Contains(bp.ISR, id) && len(bp.ISR) > 1)
			if touched && ap.PartitionEpoch <= bp.PartitionEpoch {
				t.Fatalf("%s-%d: partition epoch not bumped", name, i)
			}
		}
	}
}

func TestCloseLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c := startSingle(t, t.TempDir())
	if _, err := c.CreateTopic(ctxT(t, 5*time.Second), CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	c.Close()

	cl := newTestCluster(t, 3)
	if _, err := cl.follower().CreateTopic(ctxT(t, 5*time.Second), CreateTopicRequest{Name: "t", Partitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	for id := range cl.nodes {
		cl.stop(id)
	}
}
