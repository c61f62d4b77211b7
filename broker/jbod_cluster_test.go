package broker

// Several log dirs per broker, with real `weir serve` processes: partitions spread over the
// dirs, DescribeLogDirs sizes against the files, AlterReplicaLogDirs moving a leader's and a
// follower's replica under an acks=all producer, and a failed log dir taking only its partitions
// offline on its broker (their leadership moves, the others keep serving), across restarts with
// the dir still failing and then fixed.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
)

// jbodDirs are node n's log dirs in the JBOD tests.
func jbodDirs(n *testcluster.Node, per int) []string {
	out := make([]string, per)
	for i := range out {
		out[i] = filepath.Join(n.Dir, "disk-"+strconv.Itoa(i+1))
	}
	return out
}

// startJBODCluster starts n brokers with per log dirs each, on free ports (fixed ports among the
// ephemeral range could be held by a client connection at start).
func startJBODCluster(t *testing.T, n, per int, extra map[string]string) *testCluster {
	t.Helper()
	props := map[string]string{"group.initial.rebalance.delay.ms": "0"}
	for k, v := range extra {
		props[k] = v
	}
	tc := tbcluster.Start(t, testcluster.Config{N: n, Props: props,
		NodeProps: func(node *testcluster.Node) map[string]string {
			return map[string]string{"log.dirs": joinComma(jbodDirs(node, per))}
		}})
	return wrapCluster(t, tc)
}

func joinComma(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}

// createAssignedDirs creates topic with the given replicas per partition.
func createAssignedDirs(t *testing.T, cl *kgo.Client, topic string, assignment [][]int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, reps := range assignment {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), reps
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// describeDirs is DescribeLogDirs of one broker.
func describeDirs(adm *kadm.Client, broker int32) (kadm.DescribedLogDirs, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return adm.DescribeBrokerLogDirs(ctx, broker, nil)
}

// filesSize is the size of a partition directory's .log files.
func filesSize(t *testing.T, pdir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(pdir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// jbodProducer produces values "0", "1", ... (bounded in count and time) with an idempotent
// acks=all producer, spreading them over partitions, and remembers what was acknowledged.
type jbodProducer struct {
	mu     sync.Mutex
	acked  map[int32][]string // partition -> values
	count  atomic.Int64
	failed atomic.Int64
	stop   context.CancelFunc
	done   chan struct{}
}

func startJBODProducer(c *testCluster, topic string, partitions int32, max int) *jbodProducer {
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(60*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	p := &jbodProducer{acked: map[int32][]string{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; i < max && ctx.Err() == nil; i++ {
			v := strconv.Itoa(i)
			r := &kgo.Record{Value: []byte(v), Partition: int32(i) % partitions}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				p.failed.Add(1)
				continue
			}
			p.mu.Lock()
			p.acked[r.Partition] = append(p.acked[r.Partition], v)
			p.mu.Unlock()
			p.count.Add(1)
		}
	}()
	return p
}

func (p *jbodProducer) finish() {
	p.stop()
	<-p.done
}

// checkNothingLost reads every partition of topic from the start to its end and checks that
// every acknowledged value is there.
func checkNothingLost(t *testing.T, c *testCluster, adm *kadm.Client, topic string, p *jbodProducer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends := listEndOffsets(ctx, t, adm, topic)
	offsets := map[int32]kgo.Offset{}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		offsets[o.Partition] = kgo.NewOffset().AtStart()
		want[o.Partition] = o.Offset
	})
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}), kgo.FetchMaxWait(500*time.Millisecond))
	seen := map[int32]map[string]bool{}
	next := map[int32]int64{}
	for {
		doneAll := true
		for part, end := range want {
			if next[part] < end {
				doneAll = false
			}
		}
		if doneAll {
			break
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: %v (at %v, ends %v)", topic, ctx.Err(), next, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if seen[r.Partition] == nil {
				seen[r.Partition] = map[string]bool{}
			}
			seen[r.Partition][string(r.Value)] = true
			next[r.Partition] = r.Offset + 1
		})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lost := 0
	for part, vs := range p.acked {
		for _, v := range vs {
			if !seen[part][v] {
				lost++
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d acknowledged records lost", lost)
	}
	t.Logf("%d acknowledged records all read back (%d produce failures, retried or not acknowledged)", p.count.Load(), p.failed.Load())
}

// TestJBODSpreadDescribeMove: a broker with 3 log dirs spreads 30 partitions 10/10/10, and
// DescribeLogDirs shows each dir's partitions with the sizes of their files; AlterReplicaLogDirs
// moves a leader's and a follower's replica to another dir under an acks=all producer, nothing
// acknowledged is lost, and every replica holds the same bytes afterwards.
func TestJBODSpreadDescribeMove(t *testing.T) {
	c := startJBODCluster(t, 3, 3, map[string]string{"min.insync.replicas": "2"})
	cl := c.client()
	adm := kadm.NewClient(cl)
	node1 := c.nodes[c.index(1)].node
	dirs1 := jbodDirs(node1, 3)

	// Spread.
	const spread = "jbod-spread"
	assign := make([][]int32, 30)
	for i := range assign {
		assign[i] = []int32{1}
	}
	createAssignedDirs(t, cl, spread, assign, nil)
	waitFor(t, 30*time.Second, "30 partitions described on broker 1", func() (bool, string) {
		ds, err := describeDirs(adm, 1)
		if err != nil {
			return false, err.Error()
		}
		n := 0
		ds.EachPartition(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == spread {
				n++
			}
		})
		return n == 30, fmt.Sprint(n)
	})
	for _, d := range dirs1 {
		ents, _ := filepath.Glob(filepath.Join(d, spread+"-*"))
		if len(ents) != 10 {
			t.Fatalf("%s holds %d partitions of %s, want 10", d, len(ents), spread)
		}
	}
	// Sizes: some records in a few partitions, then DescribeLogDirs against the files.
	prod := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 300 {
		r := &kgo.Record{Topic: spread, Partition: int32(i % 7), Value: bytes.Repeat([]byte{'x'}, 100+i)}
		if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := describeDirs(adm, 1)
	if err != nil {
		t.Fatal(err)
	}
	perDir := map[string]int{}
	for _, d := range ds.Sorted() {
		if d.Err != nil {
			t.Fatalf("dir %s: %v", d.Dir, d.Err)
		}
		if !slices.Contains(dirs1, d.Dir) {
			t.Fatalf("described dir %s is not one of %v", d.Dir, dirs1)
		}
		if d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
			t.Fatalf("dir %s: total %d usable %d", d.Dir, d.TotalBytes, d.UsableBytes)
		}
		for p, dp := range d.Topics[spread] {
			perDir[d.Dir]++
			files := filesSize(t, filepath.Join(d.Dir, spread+"-"+strconv.Itoa(int(p))))
			if dp.Size != files || dp.OffsetLag != 0 || dp.IsFuture {
				t.Fatalf("%s-%d in %s: size %d (files %d), lag %d, future %v", spread, p, d.Dir, dp.Size, files, dp.OffsetLag, dp.IsFuture)
			}
			if p < 7 && dp.Size == 0 {
				t.Fatalf("%s-%d: size 0 after produces", spread, p)
			}
		}
	}
	for _, d := range dirs1 {
		if perDir[d] != 10 {
			t.Fatalf("DescribeLogDirs: %v partitions per dir, want 10 each", perDir)
		}
	}

	// Move a leader's and a follower's replica while producing.
	const topic = "jbod-move"
	createReplicatedTopic(t, adm, topic, 1, 3, map[string]*string{"segment.bytes": kadm.StringPtr("1048576")})
	c.waitISR(adm, topic, 3, 30*time.Second)
	ps, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := ps[0].Leader
	var follower int32
	for _, r := range ps[0].Replicas {
		if r != leader {
			follower = r
			break
		}
	}
	p := startJBODProducer(c, topic, 1, 200_000)
	defer p.finish()
	waitFor(t, 30*time.Second, "acknowledged writes", func() (bool, string) { return p.count.Load() > 3000, fmt.Sprint(p.count.Load()) })
	where := func(broker int32) (string, string) {
		ds, err := describeDirs(adm, broker)
		if err != nil {
			t.Fatal(err)
		}
		dp, ok := ds.LookupPartition(topic, 0)
		if !ok {
			t.Fatalf("broker %d does not describe %s-0", broker, topic)
		}
		dirs := jbodDirs(c.nodes[c.index(broker)].node, 3)
		for _, d := range dirs {
			if d != dp.Dir {
				return dp.Dir, d
			}
		}
		return "", ""
	}
	moved := map[int32]string{}
	for _, b := range []int32{leader, follower} {
		from, to := where(b)
		var req kadm.AlterReplicaLogDirsReq
		req.Add(to, kadm.TopicsSet{topic: {0: {}}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resps, err := adm.AlterBrokerReplicaLogDirs(ctx, b, req)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		resps.Each(func(r kadm.AlterReplicaLogDirsResponse) {
			if r.Err != nil {
				t.Fatalf("move %s-%d on broker %d to %s: %v", r.Topic, r.Partition, b, to, r.Err)
			}
		})
		t.Logf("moving %s-0 on broker %d from %s to %s", topic, b, from, to)
		moved[b] = to
	}
	for b, to := range moved {
		waitFor(t, 60*time.Second, fmt.Sprintf("%s-0 on broker %d in %s", topic, b, to), func() (bool, string) {
			ds, err := describeDirs(adm, b)
			if err != nil {
				return false, err.Error()
			}
			state := ""
			ok := false
			futures := 0
			ds.EachPartition(func(dp kadm.DescribedLogDirPartition) {
				if dp.Topic != topic {
					return
				}
				state += fmt.Sprintf("[%s future=%v lag=%d size=%d]", dp.Dir, dp.IsFuture, dp.OffsetLag, dp.Size)
				if dp.IsFuture {
					futures++
				} else if dp.Dir == to {
					ok = true
				}
			})
			return ok && futures == 0, state
		})
	}
	before := p.count.Load()
	waitFor(t, 30*time.Second, "writes after the moves", func() (bool, string) { return p.count.Load() > before+1000, fmt.Sprint(p.count.Load()) })
	p.finish()
	c.waitISR(adm, topic, 3, 30*time.Second)
	checkNothingLost(t, c, adm, topic, p)
	// Every replica holds the same bytes (the moved ones in their new dirs).
	dirOf := map[int32]string{}
	for _, b := range ps[0].Replicas {
		ds, err := describeDirs(adm, b)
		if err != nil {
			t.Fatal(err)
		}
		dp, _ := ds.LookupPartition(topic, 0)
		dirOf[b] = dp.Dir
	}
	waitFor(t, 30*time.Second, "byte-identical replicas", func() (bool, string) {
		ref := logBytes(t, dirOf[leader], topic, 0)
		for _, b := range ps[0].Replicas {
			if got := logBytes(t, dirOf[b], topic, 0); !bytes.Equal(got, ref) {
				return false, fmt.Sprintf("broker %d: %d bytes, leader %d", b, len(got), len(ref))
			}
		}
		return len(ref) > 0, ""
	})
	for b, to := range moved {
		if dirOf[b] != to {
			t.Fatalf("broker %d: %s-0 in %s, want %s", b, topic, dirOf[b], to)
		}
	}
}

// TestJBODFailedDir: on a 3-broker cluster, a log dir of one broker failing (moved away, a file
// in its place: the broker's next write there fails) takes only that dir's partitions offline
// there: DescribeLogDirs answers KAFKA_STORAGE_ERROR for the dir, the broker leaves those
// partitions' ISRs and leaderships, and keeps leading and following the others; an acks=all
// producer loses nothing. Restarted with the dir still failing the broker starts with the dir
// offline; restarted with it fixed, its replicas there come back into the ISRs.
func TestJBODFailedDir(t *testing.T) {
	c := startJBODCluster(t, 3, 2, map[string]string{
		"min.insync.replicas":                     "2",
		"replica.lag.time.max.ms":                 "3000",
		"log.flush.offset.checkpoint.interval.ms": "300",
	})
	cl := c.client()
	adm := kadm.NewClient(cl)
	const topic = "jbod-fail"
	const parts = 6
	createReplicatedTopic(t, adm, topic, parts, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	const victim int32 = 2
	vnode := c.nodes[c.index(victim)].node
	failDir := jbodDirs(vnode, 2)[1] // the first holds the broker's own state (the metadata log)
	// A new topic's ISR is every replica from the start: wait until the broker made its logs.
	var ds kadm.DescribedLogDirs
	waitFor(t, 30*time.Second, fmt.Sprintf("broker %d describing every partition of %s", victim, topic), func() (bool, string) {
		var err error
		if ds, err = describeDirs(adm, victim); err != nil {
			return false, err.Error()
		}
		for p := range int32(parts) {
			if _, ok := ds.LookupPartition(topic, p); !ok {
				return false, fmt.Sprintf("%s-%d not described", topic, p)
			}
		}
		return true, ""
	})
	var inFailed, inOther []int32
	for p := range int32(parts) {
		dp, _ := ds.LookupPartition(topic, p)
		if dp.Dir == failDir {
			inFailed = append(inFailed, p)
		} else {
			inOther = append(inOther, p)
		}
	}
	if len(inFailed) == 0 || len(inOther) == 0 {
		t.Fatalf("partitions in %s: %v, elsewhere: %v", failDir, inFailed, inOther)
	}
	prod := startJBODProducer(c, topic, parts, 300_000)
	defer prod.finish()
	waitFor(t, 30*time.Second, "acknowledged writes", func() (bool, string) { return prod.count.Load() > 600, fmt.Sprint(prod.count.Load()) })

	// The dir fails.
	if err := os.Rename(failDir, failDir+".broken"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(failDir, []byte("a failed disk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkOffline := func(what string) {
		t.Helper()
		waitFor(t, 30*time.Second, what+": "+failDir+" offline", func() (bool, string) {
			ds, err := describeDirs(adm, victim)
			if err != nil {
				return false, err.Error()
			}
			d, ok := ds[failDir]
			return ok && errors.Is(d.Err, kerr.KafkaStorageError), fmt.Sprint(d.Err)
		})
		waitFor(t, 30*time.Second, what+": leaderships and ISRs of the failed dir's partitions moved", func() (bool, string) {
			ps, err := c.partitions(adm, topic)
			if err != nil {
				return false, err.Error()
			}
			for _, p := range inFailed {
				if ps[p].Leader == victim || ps[p].Leader < 0 || slices.Contains(ps[p].ISR, victim) {
					return false, fmt.Sprintf("partition %d leader %d isr %v", p, ps[p].Leader, ps[p].ISR)
				}
			}
			return true, ""
		})
	}
	checkOthersServe := func(what string) {
		t.Helper()
		waitFor(t, 45*time.Second, what+": broker keeps its other partitions", func() (bool, string) {
			ps, err := c.partitions(adm, topic)
			if err != nil {
				return false, err.Error()
			}
			for _, p := range inOther {
				if !slices.Contains(ps[p].ISR, victim) {
					return false, fmt.Sprintf("partition %d isr %v", p, ps[p].ISR)
				}
			}
			return true, ""
		})
	}
	checkOffline("after the failure")
	checkOthersServe("after the failure")
	before := prod.count.Load()
	waitFor(t, 30*time.Second, "writes after the failure", func() (bool, string) { return prod.count.Load() > before+600, fmt.Sprint(prod.count.Load()) })

	// Restart with the dir still failing.
	vi := c.index(victim)
	c.signal(vi, syscall.SIGTERM)
	c.restart(vi)
	checkOffline("restarted with the dir failing")
	checkOthersServe("restarted with the dir failing")

	// Fixed: the replicas come back.
	c.signal(vi, syscall.SIGTERM)
	if err := os.Remove(failDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(failDir+".broken", failDir); err != nil {
		t.Fatal(err)
	}
	c.restart(vi)
	c.waitISR(adm, topic, 3, 60*time.Second)
	ds, err := describeDirs(adm, victim)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range inFailed {
		if dp, ok := ds.LookupPartition(topic, p); !ok || dp.Dir != failDir {
			t.Fatalf("after the fix %s-%d is in %q, want %s", topic, p, dp.Dir, failDir)
		}
	}
	before = prod.count.Load()
	waitFor(t, 30*time.Second, "writes after the fix", func() (bool, string) { return prod.count.Load() > before+300, fmt.Sprint(prod.count.Load()) })
	prod.finish()
	checkNothingLost(t, c, adm, topic, prod)
}
