package broker

// Clusters of real `weir serve` processes on 127.0.0.1: SIGKILL of partition leaders under an
// acks=all idempotent producer, paused followers (SIGSTOP) leaving and rejoining the ISR, too few
// replicas for acks=all, consumer groups across a coordinator kill, and the controller quorum
// leader's loss.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
	"github.com/weir-mq/weir/record"
)

// clusterNode is one broker of a testCluster.
type clusterNode struct {
	id    int32
	port  int    // Kafka listener
	cport int    // controller quorum port
	dir   string // log.dirs
	node  *testcluster.Node
}

// output is the node's output of its current run.
func (n *clusterNode) output() string { return n.node.Output() }

// testCluster is a cluster of `weir serve` processes started by internal/testcluster (readiness
// from each node's /readyz), with the helpers the cluster tests share.
type testCluster struct {
	t     *testing.T
	tc    *testcluster.Cluster
	nodes []*clusterNode
}

// startCluster starts n brokers, every one a controller quorum voter, with extra set on each.
func startCluster(t *testing.T, n int, extra map[string]string) *testCluster {
	t.Helper()
	props := map[string]string{"group.initial.rebalance.delay.ms": "0"}
	for k, v := range extra {
		props[k] = v
	}
	return wrapCluster(t, tbcluster.Start(t, testcluster.Config{N: n, Props: props}))
}

// wrapCluster gives a started harness cluster the cluster tests' helpers.
func wrapCluster(t *testing.T, tc *testcluster.Cluster) *testCluster {
	c := &testCluster{t: t, tc: tc}
	for _, n := range tc.Nodes() {
		c.nodes = append(c.nodes, &clusterNode{id: n.ID, port: n.Port, cport: n.ControllerPort, dir: n.Dir, node: n})
	}
	return c
}

func tail(s string, lines int) string {
	return testcluster.LastLines(s, lines)
}

// restart starts a stopped node again on the same ports and data and waits for its /readyz.
func (c *testCluster) restart(i int) {
	c.t.Helper()
	if err := c.nodes[i].node.Restart(context.Background()); err != nil {
		c.t.Fatal(err)
	}
}

// signal sends sig to node i; after SIGKILL or SIGTERM it waits (30 s at most) for the exit.
func (c *testCluster) signal(i int, sig syscall.Signal) {
	c.t.Helper()
	n := c.nodes[i].node
	if err := n.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		if err := n.WaitExit(30 * time.Second); err != nil {
			c.t.Fatalf("after %v: %v", sig, err)
		}
	}
}

// addrs are the brokers' Kafka addresses.
func (c *testCluster) addrs() []string { return c.tc.Bootstrap() }

func (c *testCluster) index(id int32) int {
	for i, n := range c.nodes {
		if n.id == id {
			return i
		}
	}
	return -1
}

func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs()...), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// partitionState returns topic's partitions as the cluster reports them.
func (c *testCluster) partitions(adm *kadm.Client, topic string) (map[int32]kadm.PartitionDetail, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s: %v", topic, td.Err)
	}
	return td.Partitions, nil
}

// listEndOffsets lists topic's end offsets, asking again while a partition answers a retriable
// error: OFFSET_NOT_AVAILABLE from a new leader whose high watermark has not reached the start of
// its leader epoch yet (02_list_offsets.go), or a leadership moving.
func listEndOffsets(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) kadm.ListedOffsets {
	t.Helper()
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			return ends
		}
		if !kerr.IsRetriable(err) || ctx.Err() != nil {
			t.Fatalf("end offsets of %s: %v", topic, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not reached within %v (last: %s)", what, within, last)
}

func (c *testCluster) waitISR(adm *kadm.Client, topic string, size int, within time.Duration) {
	c.t.Helper()
	waitFor(c.t, within, fmt.Sprintf("ISR of %d on every partition of %s", size, topic), func() (bool, string) {
		ps, err := c.partitions(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if len(p.ISR) < size || p.Leader < 0 {
				return false, fmt.Sprintf("partition %d leader %d isr %v", p.Partition, p.Leader, p.ISR)
			}
		}
		return true, ""
	})
}

func createReplicatedTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, partitions, rf, configs, topic)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp[topic]; r.Err != nil {
		t.Fatalf("create %s: %v", topic, r.Err)
	}
}

// logBytes concatenates a partition's segment files in a node's log dir.
func logBytes(t *testing.T, dir, topic string, partition int32) []byte {
	t.Helper()
	pdir := filepath.Join(dir, fmt.Sprintf("%s-%d", topic, partition))
	files, err := filepath.Glob(filepath.Join(pdir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// batchesEnd returns the offset after the last whole batch of b.
func batchesEnd(b []byte) int64 {
	end := int64(0)
	for len(b) >= record.HeaderSize {
		h, err := record.ParseHeader(b)
		if err != nil || h.Size() > int64(len(b)) {
			break
		}
		end = h.NextOffset()
		b = b[h.Size():]
	}
	return end
}

// TestClusterLeaderKillCycles: 3 brokers, RF 3, min.insync.replicas 2; an idempotent acks=all
// producer writes continuously while the leader of partition 0 is SIGKILLed and restarted, 10
// times. Every acknowledged record must be read back exactly once, in order, and the replicas'
// logs must end up byte-identical.
func TestClusterLeaderKillCycles(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2", "default.replication.factor": "3",
		"offsets.topic.replication.factor": "3"})
	leaderKillCycles(t, c, 10)
}

// leaderKillCycles produces acks=all to a 3-replica topic while it SIGKILLs and restarts
// partition 0's leader cycles times, then checks that every acknowledged record is stored once,
// in order, and that the replicas' logs are identical.
func leaderKillCycles(t *testing.T, c *testCluster, cycles int) {
	adm := kadm.NewClient(c.client())
	const topic = "repl"
	const parts = 3
	createReplicatedTopic(t, adm, topic, parts, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)

	prod := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.RecordRetries(1<<30))
	type acked = ackedRecord
	var mu sync.Mutex
	ackedBy := map[int32][]acked{}
	var failures int
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var lastAck time.Time
	seq := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		sem := make(chan struct{}, 64)
		for i := 0; i < 2_000_000; i++ {
			select {
			case <-stop:
				for range cap(sem) {
					sem <- struct{}{}
				}
				return
			case sem <- struct{}{}:
			}
			p := int32(i % parts)
			v := fmt.Sprintf("v%08d", i)
			seq = i
			prod.Produce(context.Background(), &kgo.Record{Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
				<-sem
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures++
					return
				}
				ackedBy[r.Partition] = append(ackedBy[r.Partition], acked{r.Offset, string(r.Value)})
				if r.Partition == 0 {
					lastAck = time.Now()
				}
			})
		}
	}()
	ackCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range ackedBy {
			n += len(a)
		}
		return n
	}
	waitFor(t, 30*time.Second, "first acknowledgements", func() (bool, string) { return ackCount() > 500, "" })

	var failovers []time.Duration
	for cycle := 0; cycle < cycles; cycle++ {
		ps, err := c.partitions(adm, topic)
		if err != nil {
			t.Fatal(err)
		}
		leader := ps[0].Leader
		i := c.index(leader)
		if i < 0 {
			t.Fatalf("cycle %d: partition 0 has leader %d", cycle, leader)
		}
		mdCtx, mdCancel := context.WithTimeout(context.Background(), 5*time.Second)
		md, _ := adm.Metadata(mdCtx)
		mdCancel()
		mu.Lock()
		before := len(ackedBy[0])
		mu.Unlock()
		killed := time.Now()
		c.signal(i, syscall.SIGKILL)
		// Failover time: from the kill to the first acknowledgement of a record of partition 0
		// sent to a new leader.
		waitFor(t, 30*time.Second, fmt.Sprintf("cycle %d: acknowledgements after killing broker %d", cycle, leader), func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			// Responses already on their way when the leader died arrive within milliseconds:
			// count only acknowledgements from later than that.
			return lastAck.After(killed.Add(100*time.Millisecond)) && len(ackedBy[0]) > before, ""
		})
		mu.Lock()
		failovers = append(failovers, lastAck.Sub(killed))
		t.Logf("cycle %d: killed broker %d (active controller: %v): next acknowledgement after %v", cycle, leader, md.Controller == leader, lastAck.Sub(killed))
		mu.Unlock()
		c.restart(i)
		c.waitISR(adm, topic, 3, 60*time.Second)
	}
	close(stop)
	wg.Wait()
	prod.Flush(context.Background())
	sort.Slice(failovers, func(i, j int) bool { return failovers[i] < failovers[j] })
	t.Logf("failover (leader SIGKILL -> next acks=all ack) over %d cycles: min %v median %v max %v; acked %d records, %d failed sends, last seq %d",
		len(failovers), failovers[0], failovers[len(failovers)/2], failovers[len(failovers)-1], ackCount(), failures, seq)

	// Every acknowledged record, exactly once and in offset order.
	cons := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}}))
	got := map[int32][]acked{}
	mu.Lock()
	want := ackedBy
	mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		done := true
		for p := int32(0); p < parts; p++ {
			if len(want[p]) > 0 && (len(got[p]) == 0 || got[p][len(got[p])-1].offset < maxOffset(want[p])) {
				done = false
			}
		}
		if done {
			break
		}
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming back: %v", ctx.Err())
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("fetch error partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], acked{r.Offset, string(r.Value)}) })
	}
	for p := int32(0); p < parts; p++ {
		byOffset := map[int64]string{}
		seen := map[string]int{}
		for _, r := range got[p] {
			byOffset[r.offset] = r.value
			seen[r.value]++
		}
		for v, n := range seen {
			if n > 1 {
				t.Errorf("partition %d: value %s stored %d times", p, v, n)
			}
		}
		prev := ""
		for _, a := range sortedAcks(want[p]) {
			if v, ok := byOffset[a.offset]; !ok || v != a.value {
				t.Fatalf("partition %d: acknowledged %s at offset %d, log has %q", p, a.value, a.offset, v)
			}
			if a.value < prev {
				t.Errorf("partition %d: %s acknowledged at a later offset than %s", p, a.value, prev)
			}
			prev = a.value
		}
	}

	// The replicas' logs are identical (everything is replicated now: ISR = 3).
	c.waitISR(adm, topic, 3, 30*time.Second)
	time.Sleep(time.Second)
	for i := range c.nodes {
		c.signal(i, syscall.SIGTERM)
	}
	for p := int32(0); p < parts; p++ {
		ref := logBytes(t, c.nodes[0].dir, topic, p)
		for i := 1; i < len(c.nodes); i++ {
			other := logBytes(t, c.nodes[i].dir, topic, p)
			if !bytes.Equal(ref, other) {
				t.Errorf("partition %d: broker %d's log (%d bytes, end %d) differs from broker %d's (%d bytes, end %d)",
					p, c.nodes[i].id, len(other), batchesEnd(other), c.nodes[0].id, len(ref), batchesEnd(ref))
			}
		}
	}
}

type ackedRecord struct {
	offset int64
	value  string
}

func maxOffset(as []ackedRecord) int64 {
	m := int64(-1)
	for _, a := range as {
		m = max(m, a.offset)
	}
	return m
}

func sortedAcks(as []ackedRecord) []ackedRecord {
	out := append([]ackedRecord(nil), as...)
	sort.Slice(out, func(i, j int) bool { return out[i].offset < out[j].offset })
	return out
}

// TestClusterPausedFollower: a follower stopped with SIGSTOP leaves the ISR while acks=all
// writes go on (min.insync.replicas 2 of 3), and rejoins it after SIGCONT once caught up.
func TestClusterPausedFollower(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2", "replica.lag.time.max.ms": "2000"})
	adm := kadm.NewClient(c.client())
	const topic = "paused"
	createReplicatedTopic(t, adm, topic, 1, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	ps, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	var follower int32 = -1
	for _, id := range ps[0].Replicas {
		if id != ps[0].Leader {
			follower = id
			break
		}
	}
	// A stopped process's listening sockets still accept connections, and a request sent
	// there waits for its timeout: from here on, ask only the partition's leader.
	leaderNode := c.nodes[c.index(ps[0].Leader)]
	adm = kadm.NewClient(c.clientAt(leaderNode))
	prod := c.clientAt(leaderNode, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordDeliveryTimeout(10*time.Second))
	var acked, failed atomic.Int64
	prodCtx, stopProducing := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 1_000_000 && prodCtx.Err() == nil; i++ {
			r := prod.ProduceSync(prodCtx, &kgo.Record{Value: []byte(strconv.Itoa(i))})
			if r.FirstErr() != nil {
				failed.Add(1)
			} else {
				acked.Add(1)
			}
		}
	}()
	defer func() {
		stopProducing() // a produce parked on a stopped broker must not hold the test
		<-done
	}()
	waitFor(t, 20*time.Second, "acknowledged writes", func() (bool, string) { return acked.Load() > 100, "" })
	c.signal(c.index(follower), syscall.SIGSTOP)
	waitFor(t, 45*time.Second, fmt.Sprintf("broker %d out of the ISR", follower), func() (bool, string) {
		ps, err := c.partitions(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		return len(ps[0].ISR) == 2 && !slices.Contains(ps[0].ISR, follower), fmt.Sprint(ps[0].ISR)
	})
	before := acked.Load()
	waitFor(t, 45*time.Second, "writes acknowledged by the remaining ISR", func() (bool, string) {
		return acked.Load() > before+100, fmt.Sprint(acked.Load())
	})
	c.signal(c.index(follower), syscall.SIGCONT)
	waitFor(t, 40*time.Second, fmt.Sprintf("broker %d back in the ISR", follower), func() (bool, string) {
		ps, err := c.partitions(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(ps[0].ISR, follower), fmt.Sprint(ps[0].ISR)
	})
	t.Logf("acked %d, failed %d", acked.Load(), failed.Load())
}

// TestClusterNotEnoughReplicas: with two of three brokers stopped, acks=all is refused with
// NOT_ENOUGH_REPLICAS and nothing is acknowledged or readable.
func TestClusterNotEnoughReplicas(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2"})
	adm := kadm.NewClient(c.client())
	const topic = "few"
	createReplicatedTopic(t, adm, topic, 1, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	ps, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := ps[0].Leader
	var stopped []int32
	for _, n := range c.nodes {
		if n.id != leader && len(stopped) < 2 {
			stopped = append(stopped, n.id)
		}
	}
	for _, id := range stopped {
		c.signal(c.index(id), syscall.SIGTERM)
	}
	survivor := c.nodes[c.index(leader)]
	one := kadm.NewClient(c.clientAt(survivor))
	waitFor(t, 30*time.Second, "ISR of the survivor alone", func() (bool, string) {
		ps, err := c.partitions(one, topic)
		if err != nil {
			return false, err.Error()
		}
		return len(ps[0].ISR) == 1 && ps[0].Leader == leader, fmt.Sprint(ps[0].Leader, ps[0].ISR)
	})
	prod := c.clientAt(survivor, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(5*time.Second), kgo.DisableIdempotentWrite())
	for i := 0; i < 5; i++ {
		err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte("never")}).FirstErr()
		if !errors.Is(err, kerr.NotEnoughReplicas) {
			t.Fatalf("produce with 1 of 3 in sync: %v, want NOT_ENOUGH_REPLICAS", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := one.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(topic, 0); o.Offset != 0 {
		t.Fatalf("end offset %d after refused writes, want 0", o.Offset)
	}
	// acks=1 still works (it does not need the ISR).
	one1 := c.clientAt(survivor, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DefaultProduceTopic(topic), kgo.DisableIdempotentWrite())
	if err := one1.ProduceSync(context.Background(), &kgo.Record{Value: []byte("leader only")}).FirstErr(); err != nil {
		t.Fatalf("acks=1 with 1 of 3 in sync: %v", err)
	}
}

// clientAt is a client bootstrapped from one node only.
func (c *testCluster) clientAt(n *clusterNode, opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", n.port)), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// TestClusterGroupCoordinatorKill: a consumer group keeps consuming, and keeps its committed
// offsets, while the broker hosting its coordinator is SIGKILLed.
func TestClusterGroupCoordinatorKill(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2", "offsets.topic.replication.factor": "3",
		"default.replication.factor": "3"})
	adm := kadm.NewClient(c.client())
	const topic, group = "grouped", "g-failover"
	createReplicatedTopic(t, adm, topic, 3, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	addr := c.addrs()[0]
	produce := func(from, n int) {
		t.Helper()
		cl := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
		for i := from; i < from+n; i++ {
			v := []byte(strconv.Itoa(i))
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: v, Value: v}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 300)
	m := startMember(t, addr, group, topic, "survivor", kgo.SeedBrokers(c.addrs()...), kgo.SessionTimeout(10*time.Second),
		kgo.AutoCommitInterval(200*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	waitSeen(t, []*groupMember{m}, 0, 300, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	coords := adm.FindGroupCoordinators(ctx, group)
	coord := coords[group].NodeID
	if c.index(coord) < 0 {
		t.Fatalf("coordinator %d: %+v", coord, coords[group])
	}
	time.Sleep(500 * time.Millisecond) // let an auto-commit land
	c.signal(c.index(coord), syscall.SIGKILL)
	produce(300, 300)
	waitSeen(t, []*groupMember{m}, 300, 600, 60*time.Second)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := m.cl.CommitUncommittedOffsets(ctx2); err != nil {
		t.Fatalf("commit after the coordinator moved: %v", err)
	}
	var total int64
	waitFor(t, 30*time.Second, "committed offsets covering all 600 records", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		os, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false, err.Error()
		}
		total = 0
		os.Each(func(o kadm.OffsetResponse) { total += o.At })
		return total == 600, fmt.Sprint(total)
	})
	newCoords := adm.FindGroupCoordinators(context.Background(), group)
	t.Logf("coordinator moved from broker %d to %d; committed %d", coord, newCoords[group].NodeID, total)
}

// TestClusterControllerKill: the metadata quorum's leader is SIGKILLed; a new one is elected and
// the cluster still elects partition leaders and creates topics.
func TestClusterControllerKill(t *testing.T) {
	c := startCluster(t, 3, nil)
	adm := kadm.NewClient(c.client())
	createReplicatedTopic(t, adm, "before", 3, 3, nil)
	c.waitISR(adm, "before", 3, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := md.Controller
	if c.index(ctrl) < 0 {
		t.Fatalf("active controller %d", ctrl)
	}
	c.signal(c.index(ctrl), syscall.SIGKILL)
	waitFor(t, 30*time.Second, "a new active controller and leaders without the killed broker", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx, "before")
		if err != nil {
			return false, err.Error()
		}
		if md.Controller == ctrl || md.Controller < 0 {
			return false, fmt.Sprintf("controller %d", md.Controller)
		}
		for _, p := range md.Topics["before"].Partitions {
			if p.Leader == ctrl || p.Leader < 0 {
				return false, fmt.Sprintf("partition %d leader %d", p.Partition, p.Leader)
			}
		}
		return true, ""
	})
	createReplicatedTopic(t, adm, "after", 3, 2, nil)
	waitFor(t, 30*time.Second, "leaders for a topic created after the controller died", func() (bool, string) {
		ps, err := c.partitions(adm, "after")
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if p.Leader < 0 || p.Leader == ctrl {
				return false, fmt.Sprintf("partition %d leader %d", p.Partition, p.Leader)
			}
		}
		return true, ""
	})
	prod := c.client(kgo.DefaultProduceTopic("after"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce after the controller died: %v", err)
	}
}

// TestClusterControlledShutdown: SIGTERM on a partition leader moves its leadership to another
// in-sync replica before the broker stops (well before the session timeout would), and acks=all
// writes go on.
func TestClusterControlledShutdown(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2", "broker.session.timeout.ms": "20000"})
	adm := kadm.NewClient(c.client())
	const topic = "moving"
	createReplicatedTopic(t, adm, topic, 1, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	ps, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := ps[0].Leader
	start := time.Now()
	c.signal(c.index(leader), syscall.SIGTERM) // waits for the exit
	stopped := time.Since(start)
	// With a 20 s session timeout only the controlled shutdown can move the leadership this
	// soon (the other brokers apply the committed change within milliseconds).
	waitFor(t, 2*time.Second, "a new leader after the controlled shutdown", func() (bool, string) {
		ps, err = c.partitions(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		return ps[0].Leader != leader && ps[0].Leader >= 0, fmt.Sprintf("leader %d isr %v (stop took %v)", ps[0].Leader, ps[0].ISR, stopped)
	})
	if slices.Contains(ps[0].ISR, leader) {
		t.Errorf("stopped broker %d still in the ISR %v", leader, ps[0].ISR)
	}
	prod := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(10*time.Second))
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("acks=all after the controlled shutdown: %v", err)
	}
	t.Logf("broker %d stopped in %v; new leader %d, isr %v", leader, stopped, ps[0].Leader, ps[0].ISR)
}

// TestClusterEmptyReplicaBehindLogStart: a replica that lost its data (its partition directory
// removed while it was down) rejoins a partition whose leader already deleted the first records:
// it starts over at the leader's log start, catches up and rejoins the ISR.
func TestClusterEmptyReplicaBehindLogStart(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "1", "default.replication.factor": "3"})
	adm := kadm.NewClient(c.client())
	const topic = "trimmed"
	createReplicatedTopic(t, adm, topic, 1, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	prod := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	for i := 0; i < 100; i++ {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	var lost int32 = -1
	for _, id := range ps[0].Replicas {
		if id != ps[0].Leader {
			lost = id
		}
	}
	i := c.index(lost)
	c.signal(i, syscall.SIGTERM)
	if err := os.RemoveAll(filepath.Join(c.nodes[i].dir, topic+"-0")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var del kadm.Offsets
	del.Add(kadm.Offset{Topic: topic, Partition: 0, At: 60})
	if _, err := adm.DeleteRecords(ctx, del); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 150; i++ {
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c.restart(i)
	c.waitISR(adm, topic, 3, 30*time.Second)
	c.signal(i, syscall.SIGTERM)
	got := logBytes(t, c.nodes[i].dir, topic, 0)
	if end := batchesEnd(got); end != 150 {
		t.Fatalf("restored replica ends at %d, want 150", end)
	}
	if h, err := record.ParseHeader(got); err != nil || h.BaseOffset < 60 {
		t.Fatalf("restored replica starts with batch at %d (%v), want >= 60", h.BaseOffset, err)
	}
}

// TestClusterTopicConfigReachesEveryBroker: a topic config altered through one broker applies on
// every broker's logs (here: max.message.bytes on partitions led by each of the three brokers).
func TestClusterTopicConfigReachesEveryBroker(t *testing.T) {
	c := startCluster(t, 3, nil)
	adm := kadm.NewClient(c.client())
	const topic = "configured"
	createReplicatedTopic(t, adm, topic, 3, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	ps, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	for _, p := range ps {
		leaders[p.Leader] = true
	}
	if len(leaders) != 3 {
		t.Fatalf("leaders %v: want one partition led by each broker", leaders)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	limit := "1000"
	// Through the first broker only.
	one := kadm.NewClient(c.clientAt(c.nodes[0]))
	rs, err := one.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &limit}}, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Err != nil {
			t.Fatalf("alter %s: %v (%s)", r.Name, r.Err, r.ErrMessage)
		}
	}
	prod := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(1), kgo.RecordDeliveryTimeout(5*time.Second))
	big := bytes.Repeat([]byte("x"), 4000)
	for p := int32(0); p < 3; p++ {
		waitFor(t, 10*time.Second, fmt.Sprintf("max.message.bytes applied on the leader of partition %d (broker %d)", p, ps[p].Leader), func() (bool, string) {
			err := prod.ProduceSync(context.Background(), &kgo.Record{Partition: p, Value: big}).FirstErr()
			return errors.Is(err, kerr.MessageTooLarge), fmt.Sprint(err)
		})
	}
}
