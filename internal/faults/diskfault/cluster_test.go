package diskfault_test

// Disk faults on live `weir serve` processes built with -tags faults: a 3-node cluster (RF 3,
// min.insync.replicas 2) under an idempotent acks=all producer meets a failing fdatasync on a
// follower and on a leader, a full disk at a segment roll, a 5 s stall of the leader's disk, the
// power loss of one node and of all three at once, and a flipped bit and a torn tail on a
// stopped replica's logs. After each, every partition is read to its end and every acknowledged
// value must be at the offset it was acknowledged at, once. One cluster serves every step (nodes
// restart between them) to keep the run short.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/faults/diskfault"
	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
	"github.com/weir-mq/weir/vfs"
)

const (
	// topic has 16 KiB segments (rolling often); topicG, made by the last step, has the default
	// size (no roll, so no recovery-point checkpoint is written after its records).
	topic      = "disk"
	topicG     = "disk-g"
	partitions = 2
)

// fault POSTs one /faults/disk operation to node n.
func fault(t testing.TB, n *testcluster.Node, form url.Values) {
	t.Helper()
	if _, err := postFault(n, form); err != nil {
		t.Fatal(err)
	}
}

func postFault(n *testcluster.Node, form url.Values) ([]byte, error) {
	resp, err := http.PostForm("http://"+n.MetricsAddr()+"/faults/disk", form)
	if err != nil {
		return nil, fmt.Errorf("node %d /faults/disk %v: %w", n.ID, form, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node %d /faults/disk %v: %s: %s", n.ID, form, resp.Status, body)
	}
	return body, nil
}

// powerLoss drops every byte node n has not fdatasync'd (op=crash), SIGKILLs it, and returns what
// the crash dropped.
func powerLoss(n *testcluster.Node) (vfs.CrashStats, error) {
	body, err := postFault(n, url.Values{"op": {"crash"}})
	if err != nil {
		return vfs.CrashStats{}, err
	}
	var st struct{ Crash *vfs.CrashStats }
	if err := json.Unmarshal(body, &st); err != nil || st.Crash == nil {
		return vfs.CrashStats{}, fmt.Errorf("node %d crash answer %q: %v", n.ID, body, err)
	}
	return *st.Crash, n.Kill()
}

// logSize is the size of the .log files of partition part on node n.
func logSize(n *testcluster.Node, topic string, part int32) int64 {
	b, _ := logBytes(diskfault.PartitionDir(n.Dir, topic, part))
	return int64(len(b))
}

// holdSyncs stalls every fdatasync of the nodes for a minute, sends n records and waits until
// the first node's partition 0 log has grown: records are in the page cache, none is durable on
// the stalled nodes, none is acknowledged. It returns the records' wait group.
func holdSyncs(t testing.TB, p *producer, n int, nodes ...*testcluster.Node) *sync.WaitGroup {
	t.Helper()
	before := logSize(nodes[0], topic, 0)
	for _, nd := range nodes {
		fault(t, nd, url.Values{"op": {"stall"}, "for": {"60s"}, "what": {"sync"}})
	}
	wg := p.produce(n)
	waitFor(t, 30*time.Second, "records written, not synced", func() (bool, string) {
		s := logSize(nodes[0], topic, 0)
		return s > before, fmt.Sprintf("%d bytes", s)
	})
	return wg
}

// padding is every record's value: the records' keys ("v<n>") are the values the checks follow;
// the padding makes 1,000 records roll the topic's 16 KiB segments several times.
var padding = []byte(strings.Repeat("weir-disk-fault-", 8))

// ackedRecord is where an acknowledged value was put.
type ackedRecord struct {
	topic     string
	partition int32
	offset    int64
}

// producer is an idempotent acks=all producer of unique keys ("v<n>") over the topic's
// partitions, recording where each acknowledged value went.
type producer struct {
	cl      *kgo.Client
	next    atomic.Int64
	mu      sync.Mutex // guards acked, failed and maxLatency
	acked   map[string]ackedRecord
	topics  map[string]bool // written to
	to      string          // the topic of the next records
	failed  int
	lastErr error
	maxLat  time.Duration
}

func newProducer(t testing.TB, c *testcluster.Cluster) *producer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(90*time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(4096), // batches fit the 16 KiB segments
		kgo.RetryTimeout(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &producer{cl: cl, acked: map[string]ackedRecord{}, topics: map[string]bool{topic: true}, to: topic}
}

// switchTo makes the next records go to topic t.
func (p *producer) switchTo(t string) {
	p.mu.Lock()
	p.to, p.topics[t] = t, true
	p.mu.Unlock()
}

// produce sends n records (spread over the partitions); wait for their answers on the returned
// group.
func (p *producer) produce(n int) *sync.WaitGroup {
	var wg sync.WaitGroup
	p.mu.Lock()
	to := p.to
	p.mu.Unlock()
	for range n {
		i := p.next.Add(1)
		r := &kgo.Record{Topic: to, Key: []byte("v" + strconv.FormatInt(i, 10)), Value: padding, Partition: int32(i % partitions)}
		start := time.Now()
		wg.Add(1)
		p.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			defer wg.Done()
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				p.failed++
				p.lastErr = err
				return
			}
			p.acked[string(r.Key)] = ackedRecord{r.Topic, r.Partition, r.Offset}
			p.maxLat = max(p.maxLat, time.Since(start))
		})
	}
	return &wg
}

// produceSync sends n records and waits for every answer.
func (p *producer) produceSync(n int) {
	p.produce(n).Wait()
}

func (p *producer) stats() (acked, failed int, maxLat time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked), p.failed, p.maxLat
}

// background produces batches of n records until stop is called (which waits for the answers).
func (p *producer) background(n int) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			p.produceSync(n)
		}
	}()
	return func() { close(quit); <-done }
}

// checkAcked reads every partition of the topics written to from its start to its high
// watermark and checks that every acknowledged value is at the offset it was acknowledged at, and
// that no value is there twice.
func checkAcked(t testing.TB, c *testcluster.Cluster, p *producer) {
	t.Helper()
	if lost := countLost(t, c, p); lost > 0 {
		t.Fatalf("%d acknowledged values lost or moved", lost)
	}
}

// countLost is checkAcked's reading: the number of acknowledged values not read back at their
// offsets (the first few are logged). A duplicate fails the test.
func countLost(t testing.TB, c *testcluster.Cluster, p *producer) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := admin(t, c)
	p.mu.Lock()
	var topics []string
	for tp := range p.topics {
		topics = append(topics, tp)
	}
	p.mu.Unlock()
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	type tp struct {
		topic     string
		partition int32
	}
	want := map[tp]int64{}
	offsets := map[string]map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want[tp{o.Topic, o.Partition}] = o.Offset
		if offsets[o.Topic] == nil {
			offsets[o.Topic] = map[int32]kgo.Offset{}
		}
		offsets[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...),
		kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	at := map[string]ackedRecord{}
	next := map[tp]int64{}
	for {
		done := true
		for k, end := range want {
			if next[k] < end {
				done = false
			}
		}
		if done {
			break
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading back: %v (at %v, ends %v)", ctx.Err(), next, want)
		}
		fs.EachError(func(topic string, part int32, err error) { t.Logf("fetch %s/%d: %v", topic, part, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if prev, dup := at[string(r.Key)]; dup {
				t.Errorf("value %s at %+v and at %s/%d/%d: a duplicate", r.Key, prev, r.Topic, r.Partition, r.Offset)
			}
			at[string(r.Key)] = ackedRecord{r.Topic, r.Partition, r.Offset}
			next[tp{r.Topic, r.Partition}] = r.Offset + 1
		})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lost := 0
	for v, a := range p.acked {
		if got, ok := at[v]; !ok || got != a {
			lost++
			if lost <= 5 {
				t.Logf("acknowledged %s at %+v: read back at %+v (found %v)", v, a, got, ok)
			}
		}
	}
	t.Logf("%d of %d acknowledged values read back at their offsets (ends %v; %d produce requests failed, the last with %v)", len(p.acked)-lost, len(p.acked), want, p.failed, p.lastErr)
	return lost
}

func admin(t testing.TB, c *testcluster.Cluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// partitionState is topic's leaders and ISRs by partition.
func partitionState(adm *kadm.Client, topic string) (map[int32]int32, map[int32][]int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, nil, fmt.Errorf("metadata of %s: %v", topic, td.Err)
	}
	leaders, isrs := map[int32]int32{}, map[int32][]int32{}
	for p, pd := range td.Partitions {
		leaders[p], isrs[p] = pd.Leader, pd.ISR
	}
	return leaders, isrs, nil
}

// waitFor polls cond every 100 ms for up to within.
func waitFor(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
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
	t.Fatalf("%s: not within %v (last: %s)", what, within, last)
}

// waitFullISR waits until every partition of topic has a leader and all three replicas in its ISR.
func waitFullISR(t testing.TB, adm *kadm.Client) { waitFullISROf(t, adm, topic) }

func waitFullISROf(t testing.TB, adm *kadm.Client, topic string) {
	t.Helper()
	waitFor(t, 60*time.Second, "every replica back in the ISR", func() (bool, string) {
		leaders, isrs, err := partitionState(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		for p := range int32(partitions) {
			if leaders[p] < 0 || len(isrs[p]) != 3 {
				return false, fmt.Sprintf("leaders %v isrs %v", leaders, isrs)
			}
		}
		return true, ""
	})
}

// waitOffline waits until node's log dir answers KAFKA_STORAGE_ERROR in DescribeLogDirs.
func waitOffline(t testing.TB, adm *kadm.Client, node int32) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("node %d's log dir offline", node), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dirs, err := adm.DescribeBrokerLogDirs(ctx, node, nil)
		if err != nil {
			return false, err.Error()
		}
		for dir, d := range dirs {
			if errors.Is(d.Err, kerr.KafkaStorageError) {
				return true, dir
			}
		}
		return false, fmt.Sprintf("%d dirs online", len(dirs))
	})
}

// waitNotLeaderNorISR waits until node leads no partition and is in no ISR.
func waitNotLeaderNorISR(t testing.TB, adm *kadm.Client, node int32) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("node %d out of every ISR", node), func() (bool, string) {
		leaders, isrs, err := partitionState(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		for p := range int32(partitions) {
			if leaders[p] == node || leaders[p] < 0 {
				return false, fmt.Sprintf("leaders %v", leaders)
			}
			for _, r := range isrs[p] {
				if r == node {
					return false, fmt.Sprintf("isrs %v", isrs)
				}
			}
		}
		return true, ""
	})
}

func node(c *testcluster.Cluster, id int32) *testcluster.Node { return c.Nodes()[id-1] }

// restart SIGKILLs node (if running) and starts it again.
func restart(t testing.TB, c *testcluster.Cluster, id int32) {
	t.Helper()
	n := node(c, id)
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func startDiskCluster(t testing.TB, props map[string]string) (*testcluster.Cluster, *kadm.Client) {
	t.Helper()
	all := map[string]string{
		"min.insync.replicas":        "2",
		"default.replication.factor": "3",
		"num.partitions":             strconv.Itoa(partitions),
		// A replica that stops fetching leaves the ISR within seconds, not 30.
		"replica.lag.time.max.ms": "5000",
		// The recovery-point checkpoint only after rolls (and at start and clean stops), so the
		// damaged replica's last batches are above it (step g).
		"log.flush.offset.checkpoint.interval.ms": "3600000",
	}
	for k, v := range props {
		all[k] = v
	}
	c := tbcluster.Start(t, testcluster.Config{Binary: tbcluster.BinaryTags(t, "faults"), N: 3, Props: all})
	adm := admin(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Small segments, so that producing rolls them.
	seg := "16384"
	resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"internal.segment.bytes": &seg}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	waitFullISR(t, adm)
	return c, adm
}

// leaderOf is partition p's leader; idle is a node that leads no partition of the topic.
func leaderOf(t testing.TB, adm *kadm.Client, p int32) int32 {
	t.Helper()
	leaders, _, err := partitionState(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	return leaders[p]
}

func idleNode(t testing.TB, adm *kadm.Client) int32 {
	t.Helper()
	leaders, _, err := partitionState(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	for id := int32(1); id <= 3; id++ {
		leads := false
		for _, l := range leaders {
			leads = leads || l == id
		}
		if !leads {
			return id
		}
	}
	t.Fatalf("every node leads a partition: %v", leaders)
	return 0
}

func TestDiskFaultsLiveCluster(t *testing.T) {
	started := time.Now()
	c, adm := startDiskCluster(t, nil)
	p := newProducer(t, c)
	p.produceSync(200)

	// (a) Every fdatasync of a follower fails: its log dir goes offline, it leaves the ISR, and
	// acks=all produces go on with the two others.
	t.Run("sync-eio-follower", func(t *testing.T) {
		f := idleNode(t, adm)
		fault(t, node(c, f), url.Values{"op": {"sync-eio"}})
		p.produceSync(200)
		waitOffline(t, adm, f)
		waitNotLeaderNorISR(t, adm, f)
		p.produceSync(200)
		checkAcked(t, c, p)
		restart(t, c, f)
		waitFullISR(t, adm)
	})

	// (b) The same on the leader of partition 0: leadership moves.
	t.Run("sync-eio-leader", func(t *testing.T) {
		l := leaderOf(t, adm, 0)
		fault(t, node(c, l), url.Values{"op": {"sync-eio"}})
		p.produceSync(200)
		waitOffline(t, adm, l)
		waitNotLeaderNorISR(t, adm, l)
		p.produceSync(200)
		checkAcked(t, c, p)
		restart(t, c, l)
		waitFullISR(t, adm)
	})

	// (c) A full disk at a segment roll (creating the next segment fails with ENOSPC), limited
	// to the topic's partition directories of one leader: its log dir goes offline at the first
	// roll, leadership moves.
	t.Run("enospc-roll", func(t *testing.T) {
		l := leaderOf(t, adm, 1)
		fault(t, node(c, l), url.Values{"op": {"enospc-roll"}, "match": {"/" + topic + "-"}})
		// 16 KiB segments: 1,000 records of ~150 bytes roll each partition several times.
		p.produceSync(1000)
		waitOffline(t, adm, l)
		waitNotLeaderNorISR(t, adm, l)
		p.produceSync(200)
		checkAcked(t, c, p)
		restart(t, c, l)
		waitFullISR(t, adm)
	})

	// (d) The leader's disk stops for 5 s (every write and sync waits): produces wait, nothing
	// fails, the log dir stays online.
	t.Run("stall-leader", func(t *testing.T) {
		l := leaderOf(t, adm, 0)
		fault(t, node(c, l), url.Values{"op": {"stall"}, "for": {"5s"}})
		start := time.Now()
		p.produceSync(200)
		_, _, maxLat := p.stats()
		t.Logf("200 records produced through a 5 s stall in %v (slowest %v)", time.Since(start), maxLat)
		if maxLat < 4*time.Second {
			t.Errorf("the slowest acknowledgement took %v: the stall did not hold the leader's acks", maxLat)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		dirs, err := adm.DescribeBrokerLogDirs(ctx, l, nil)
		if err != nil {
			t.Fatal(err)
		}
		for dir, d := range dirs {
			if d.Err != nil {
				t.Errorf("a stall took %s offline: %v", dir, d.Err)
			}
		}
		checkAcked(t, c, p)
	})

	// (e) Power loss of one node, the leader of partition 0, under load: its fdatasyncs held so
	// that records sit in its page cache unacknowledged, then every byte it had not fdatasync'd
	// is dropped, it is killed and restarted. The producer's retries land on the new leader.
	t.Run("power-loss-one", func(t *testing.T) {
		stop := p.background(20)
		l := node(c, leaderOf(t, adm, 0))
		inflight := holdSyncs(t, p, 100, l)
		cs, err := powerLoss(l)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("node %d power loss dropped %+v", l.ID, cs)
		if cs.BytesDropped+cs.RemovedBytes == 0 {
			t.Error("the power loss dropped nothing: the records were not in the page cache only")
		}
		p.produceSync(100)
		if err := l.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		inflight.Wait()
		stop()
		waitFullISR(t, adm)
		checkAcked(t, c, p)
	})

	// (f) Power loss of every node at once (default durable acks), with records written and not
	// yet fdatasync'd on all three: nothing acknowledged is lost after the restart.
	t.Run("power-loss-all", func(t *testing.T) {
		stop := p.background(20)
		inflight := holdSyncs(t, p, 100, c.Nodes()...)
		var wg sync.WaitGroup
		errs := make([]error, 3)
		stats := make([]vfs.CrashStats, 3)
		for i, n := range c.Nodes() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stats[i], errs[i] = powerLoss(n)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		t.Logf("the power loss dropped %+v", stats)
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		p.produceSync(100)
		inflight.Wait()
		stop()
		waitFullISR(t, adm)
		checkAcked(t, c, p)
	})

	// (g) A stopped replica's logs damaged: a bit flipped in the last batch of one partition and
	// the tail of the other torn off. At restart recovery cuts both at the damage (by CRC, by
	// length) and the replica fetches the rest again: its logs end equal to the leader's.
	t.Run("damaged-replica", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if resp, err := adm.CreateTopic(ctx, partitions, 3, nil, topicG); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topicG, err, resp.Err)
		}
		waitFullISROf(t, adm, topicG)
		p.switchTo(topicG)
		p.produceSync(100)
		f := idleNode(t, adm)
		for part := range int32(partitions) { // f holds every record before it stops
			l, _, err := partitionState(adm, topicG)
			if err != nil {
				t.Fatal(err)
			}
			waitSameLog(t, c, topicG, f, l[part], part)
		}
		n := node(c, f)
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
		p.produceSync(100)
		log0, err := diskfault.Newest(diskfault.PartitionDir(n.Dir, topicG, 0), diskfault.LogSuffix)
		if err != nil {
			t.Fatal(err)
		}
		last, err := diskfault.LastBatch(log0)
		if err != nil {
			t.Fatal(err)
		}
		// Recovery after an unclean stop checks batches by CRC from the recovery point on (as
		// Kafka's); below it only by their headers, so a flipped bit there is found only by a
		// reader's CRC check.
		if rp, ok, err := diskfault.RecoveryPoint(n.Dir, topicG, 0); err != nil || (ok && rp > last.BaseOffset) {
			t.Fatalf("recovery point %d (%v, %v) above the last batch %d: recovery would not check its CRC", rp, ok, err, last.BaseOffset)
		}
		d0, err := diskfault.FlipBit(log0, 0, 5) // the last record's last byte: inside the CRC
		if err != nil {
			t.Fatal(err)
		}
		log1, err := diskfault.Newest(diskfault.PartitionDir(n.Dir, topicG, 1), diskfault.LogSuffix)
		if err != nil {
			t.Fatal(err)
		}
		d1, err := diskfault.Truncate(log1, 7)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("damaged node %d: %v; %v", f, d0, d1)
		if err := n.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		if out := n.Output(); strings.Count(out, "truncated torn or corrupt tail") < 2 {
			t.Errorf("node %d did not report cutting both damaged tails:\n%s", f, testcluster.LastLines(out, 30))
		}
		p.produceSync(100)
		waitFullISROf(t, adm, topicG)
		for part := range int32(partitions) {
			l, _, err := partitionState(adm, topicG)
			if err != nil {
				t.Fatal(err)
			}
			waitSameLog(t, c, topicG, f, l[part], part)
		}
		checkAcked(t, c, p)
	})
	acked, failed, _ := p.stats()
	t.Logf("%d values acknowledged, %d produce requests failed (the last with %v), in %v", acked, failed, p.lastErr, time.Since(started))
}

// logBytes is the concatenation of a partition's .log files on a node, in offset order.
func logBytes(dir string) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*"+diskfault.LogSuffix))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// waitSameLog waits until the partition's batches on node a equal those on node b.
func waitSameLog(t testing.TB, c *testcluster.Cluster, topic string, a, b int32, part int32) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%s-%d on node %d equal to node %d", topic, part, a, b), func() (bool, string) {
		x, err := logBytes(diskfault.PartitionDir(node(c, a).Dir, topic, part))
		if err != nil {
			return false, err.Error()
		}
		y, err := logBytes(diskfault.PartitionDir(node(c, b).Dir, topic, part))
		if err != nil {
			return false, err.Error()
		}
		if string(x) != string(y) {
			return false, fmt.Sprintf("%d and %d bytes", len(x), len(y))
		}
		return true, ""
	})
}
