package broker

// Racks with real `weir serve` processes (issue 14): broker.rack reported in Metadata and
// DescribeCluster, rack-aware placement of new topics (and a re-registration with another rack
// moving a broker between racks), and fetching from the closest replica (KIP-392): a consumer
// with client.rack reads every record from the follower in its rack, shown by each broker's
// metrics; without client.rack it reads from the leader.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
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

// racksPortBase returns the first base in this part's port range (40400-40599, in steps of 30)
// whose ports base..base+n-1, +10 and +20 (Kafka, controller, metrics) can all be bound now:
// the range lies among the ephemeral ports, where a client connection may hold one.
func racksPortBase(t *testing.T, n int) int {
	t.Helper()
	for base := 40400; base+29 <= 40599; base += 30 {
		free := true
		for _, off := range []int{0, 10, 20} {
			for i := range n {
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+off+i))
				if err != nil {
					free = false
					break
				}
				l.Close()
			}
		}
		if free {
			return base
		}
	}
	t.Fatal("no free block of ports in 40400-40599")
	return 0
}

// startRackCluster starts n brokers whose broker.rack is racks[id] (read at each start, under
// mu, so a test may move a broker to another rack before restarting it), on free ports of this
// part's range.
func startRackCluster(t *testing.T, n int, mu *sync.Mutex, racks map[int32]string, extra map[string]string) *testCluster {
	t.Helper()
	base := racksPortBase(t, n)
	props := map[string]string{"group.initial.rebalance.delay.ms": "0"}
	for k, v := range extra {
		props[k] = v
	}
	return wrapCluster(t, tbcluster.Start(t, testcluster.Config{N: n, Props: props,
		BasePort: base, ControllerBasePort: base + 10, MetricsBasePort: base + 20,
		NodeProps: func(nd *testcluster.Node) map[string]string {
			mu.Lock()
			defer mu.Unlock()
			if r := racks[nd.ID]; r != "" {
				return map[string]string{"broker.rack": r}
			}
			return nil
		}}))
}

// brokerRacks returns the rack of every broker as Metadata and DescribeCluster report them
// (an error when the two differ).
func brokerRacks(cl *kgo.Client) (map[int32]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mreq := kmsg.NewPtrMetadataRequest()
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]string{}
	for _, b := range mresp.Brokers {
		out[b.NodeID] = derefRack(b.Rack)
	}
	dreq := kmsg.NewPtrDescribeClusterRequest()
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(dresp.Brokers) != len(out) {
		return nil, fmt.Errorf("DescribeCluster lists %d brokers, Metadata %d", len(dresp.Brokers), len(out))
	}
	for _, b := range dresp.Brokers {
		if r := derefRack(b.Rack); r != out[b.NodeID] {
			return nil, fmt.Errorf("broker %d: DescribeCluster rack %q, Metadata %q", b.NodeID, r, out[b.NodeID])
		}
	}
	return out, nil
}

func derefRack(r *string) string {
	if r == nil {
		return ""
	}
	return *r
}

func waitRacks(t *testing.T, cl *kgo.Client, want map[int32]string) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("broker racks %v", want), func() (bool, string) {
		got, err := brokerRacks(cl)
		if err != nil {
			return false, err.Error()
		}
		for id, r := range want {
			if got[id] != r {
				return false, fmt.Sprint(got)
			}
		}
		return len(got) == len(want), fmt.Sprint(got)
	})
}

// rackSpread returns, for each partition of topic, how many replicas each rack holds.
func rackSpread(t *testing.T, c *testCluster, adm *kadm.Client, topic string, racks map[int32]string) map[int32]map[string]int {
	t.Helper()
	// The broker asked may not have applied the image with a just-created topic yet.
	var ps map[int32]kadm.PartitionDetail
	waitFor(t, 30*time.Second, "the partitions of "+topic, func() (bool, string) {
		var err error
		if ps, err = c.partitions(adm, topic); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	out := map[int32]map[string]int{}
	for p, d := range ps {
		m := map[string]int{}
		for _, r := range d.Replicas {
			m[racks[r]]++
		}
		out[p] = m
		t.Logf("%s-%d replicas %v racks %v", topic, p, d.Replicas, m)
	}
	return out
}

// TestClusterRackPlacement: 3 racks x 2 brokers, rf=3, every partition has one replica per
// rack; then two brokers re-register in other racks (2 racks of 3), rf=3 uses both racks.
func TestClusterRackPlacement(t *testing.T) {
	var mu sync.Mutex
	racks := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
	c := startRackCluster(t, 6, &mu, racks, nil)
	cl := c.client()
	adm := kadm.NewClient(cl)
	waitRacks(t, cl, racks)

	createReplicatedTopic(t, adm, "racks-three", 12, 3, nil)
	for p, m := range rackSpread(t, c, adm, "racks-three", racks) {
		if len(m) != 3 || m["a"] != 1 || m["b"] != 1 || m["c"] != 1 {
			t.Errorf("racks-three-%d: replicas per rack %v, want one in each of a, b, c", p, m)
		}
	}
	// CreatePartitions without assignments places the same way.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreatePartitions(ctx, 6, "racks-three"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "18 partitions", func() (bool, string) {
		ps, err := c.partitions(adm, "racks-three")
		return err == nil && len(ps) == 18, fmt.Sprint(len(ps), err)
	})
	for p, m := range rackSpread(t, c, adm, "racks-three", racks) {
		if len(m) != 3 {
			t.Errorf("racks-three-%d after CreatePartitions: replicas per rack %v", p, m)
		}
	}

	// Brokers 5 and 6 restart in racks a and b: their re-registration moves them.
	for _, i := range []int{4, 5} {
		c.signal(i, syscall.SIGTERM)
		mu.Lock()
		racks[int32(i+1)] = map[int]string{4: "a", 5: "b"}[i]
		mu.Unlock()
		c.restart(i)
	}
	mu.Lock()
	want := map[int32]string{}
	for k, v := range racks {
		want[k] = v
	}
	mu.Unlock()
	waitRacks(t, cl, want)
	// Every broker is back (unfenced) before placing over all six.
	waitFor(t, 30*time.Second, "6 live brokers", func() (bool, string) {
		got, err := brokerRacks(cl)
		return err == nil && len(got) == 6, fmt.Sprint(got, err)
	})
	createReplicatedTopic(t, adm, "racks-two", 12, 3, nil)
	for p, m := range rackSpread(t, c, adm, "racks-two", want) {
		if len(m) != 2 || m["a"] == 0 || m["b"] == 0 {
			t.Errorf("racks-two-%d: replicas per rack %v, want both a and b", p, m)
		}
	}
}

// scrapeNode reads one node's /metrics.
func scrapeNode(t *testing.T, n *clusterNode) series {
	t.Helper()
	code, body := httpGet(t, "http://"+n.node.MetricsAddr()+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics of broker %d: %d", n.id, code)
	}
	out := series{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// served is what each broker returned to consumers: record bytes of topic and Fetch requests.
type served struct{ bytes, fetches [3]float64 }

func servedBy(t *testing.T, c *testCluster, topic string) served {
	var s served
	for i, n := range c.nodes {
		m := scrapeNode(t, n)
		s.bytes[i], _ = m.sum("weir_topic_bytes_out_total", "topic", topic)
		s.fetches[i], _ = m.sum("weir_requests_total", "api", "Fetch")
	}
	return s
}

// consumeAll reads partition 0 of topic from offset 0 until n records, checking their values.
func consumeAll(t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", got, n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want := "v" + strconv.Itoa(got); string(r.Value) != want || r.Offset != int64(got) {
				t.Fatalf("record at offset %d: %q, want %q at %d", r.Offset, r.Value, want, got)
			}
			got++
		})
	}
}

func racksProduce(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: 0, Value: []byte("v" + strconv.Itoa(from+i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestClusterFetchFromFollower: 3 brokers in racks rack-a, rack-b, rack-c with the rack-aware
// replica selector; a topic led by broker 1 (rack-a). A consumer with kgo.Rack("rack-b") reads
// every record, also ones produced while it waits, and broker 2 (rack-b) served them: the leader
// returned it no record bytes. A consumer without a rack reads from the leader. Raw fetches
// show a follower's answers: v11+ served, v10 NOT_LEADER_OR_FOLLOWER, past its log end
// OFFSET_OUT_OF_RANGE, and the leader's preferred_read_replica.
func TestClusterFetchFromFollower(t *testing.T) {
	var mu sync.Mutex
	racks := map[int32]string{1: "rack-a", 2: "rack-b", 3: "rack-c"}
	c := startRackCluster(t, 3, &mu, racks, map[string]string{
		"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"})
	plain := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(plain)
	waitRacks(t, plain, racks)

	const topic = "racks-follower"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	creq := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 2, 3}
	ct.ReplicaAssignment = append(ct.ReplicaAssignment, ra)
	creq.Topics = append(creq.Topics, ct)
	cresp, err := creq.RequestWith(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(cresp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	c.waitISR(adm, topic, 3, 30*time.Second)

	const n1, n2 = 3000, 500
	racksProduce(t, plain, topic, 0, n1)
	before := servedBy(t, c, topic)

	near := c.client(kgo.Rack("rack-b"), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxBytes(64<<10))
	consumeAll(t, near, n1)
	// Records produced while the consumer waits on the follower reach it once the follower
	// learns the new high watermark.
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(300 * time.Millisecond)
		racksProduce(t, plain, topic, n1, n2)
	}()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	for got := n1; got < n1+n2; {
		fs := near.PollFetches(ctx2)
		if ctx2.Err() != nil {
			t.Fatalf("consumed %d of %d records", got, n1+n2)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := "v" + strconv.Itoa(got); string(r.Value) != want {
				t.Fatalf("offset %d: %q, want %q", r.Offset, r.Value, want)
			}
			got++
		})
	}
	<-done
	after := servedBy(t, c, topic)
	t.Logf("record bytes served to consumers per broker %v (before %v); Fetch requests %v (before %v)", after.bytes, before.bytes, after.fetches, before.fetches)
	if d := after.bytes[0] - before.bytes[0]; d != 0 {
		t.Errorf("leader (rack-a) returned %v record bytes to the rack-b consumer, want 0", d)
	}
	if d := after.bytes[2] - before.bytes[2]; d != 0 {
		t.Errorf("broker 3 (rack-c) returned %v record bytes, want 0", d)
	}
	if after.bytes[1]-before.bytes[1] <= 0 || after.fetches[1]-before.fetches[1] < 2 {
		t.Errorf("broker 2 (rack-b) served %v bytes in %v fetches", after.bytes[1]-before.bytes[1], after.fetches[1]-before.fetches[1])
	}
	near.Close()

	// Without client.rack the leader serves.
	mid := servedBy(t, c, topic)
	far := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	consumeAll(t, far, n1+n2)
	far.Close()
	end := servedBy(t, c, topic)
	t.Logf("without a rack: record bytes per broker %v (before %v)", end.bytes, mid.bytes)
	if end.bytes[0]-mid.bytes[0] <= 0 || end.bytes[1] != mid.bytes[1] || end.bytes[2] != mid.bytes[2] {
		t.Errorf("without a rack the leader should serve every byte: before %v after %v", mid.bytes, end.bytes)
	}

	// Raw fetches, at pinned versions.
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	topicID := md.Topics[topic].ID
	fetch := func(broker int32, version int16, rack string, offset int64) kmsg.FetchResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.SessionEpoch, req.Rack = -1, 1<<20, -1, rack
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = offset, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rawDial(t, c.nodes[broker-1].node.Addr()).roundTrip(req, version).(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch v%d from broker %d: %+v", version, broker, resp)
		}
		return resp.Topics[0].Partitions[0]
	}
	if p := fetch(1, 11, "rack-c", 0); p.ErrorCode != 0 || p.PreferredReadReplica != 3 || len(p.RecordBatches) != 0 || p.HighWatermark != n1+n2 {
		t.Errorf("leader, rack-c consumer: error %d preferred %d records %d hw %d; want preferred 3, no records", p.ErrorCode, p.PreferredReadReplica, len(p.RecordBatches), p.HighWatermark)
	}
	if p := fetch(1, 11, "rack-a", 0); p.ErrorCode != 0 || p.PreferredReadReplica != -1 || len(p.RecordBatches) == 0 {
		t.Errorf("leader, rack-a consumer: error %d preferred %d records %d; want the leader's records", p.ErrorCode, p.PreferredReadReplica, len(p.RecordBatches))
	}
	if p := fetch(1, 11, "rack-z", 0); p.PreferredReadReplica != -1 || len(p.RecordBatches) == 0 {
		t.Errorf("leader, consumer in an unknown rack: preferred %d records %d", p.PreferredReadReplica, len(p.RecordBatches))
	}
	if p := fetch(2, 11, "", 0); p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.HighWatermark != n1+n2 {
		t.Errorf("follower, v11: error %d records %d hw %d", p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
	}
	if p := fetch(2, 10, "", 0); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("follower, v10: error %d, want NOT_LEADER_OR_FOLLOWER", p.ErrorCode)
	}
	if p := fetch(2, 12, "", n1+n2+100); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("follower past its log end: error %d, want OFFSET_OUT_OF_RANGE", p.ErrorCode)
	}

	// How long a record takes from the producer to a consumer waiting on the follower, and on
	// the leader (logged, not judged: the follower learns the high watermark from its next
	// fetch response).
	const samples = 5
	next := n1 + n2
	for _, rack := range []string{"rack-b", ""} {
		opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(int64(next))}})}
		if rack != "" {
			opts = append(opts, kgo.Rack(rack))
		}
		cons := c.client(opts...)
		var lat []time.Duration
		for range samples {
			done := make(chan time.Time, 1)
			go func() {
				pctx, pcancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer pcancel()
				for {
					fs := cons.PollFetches(pctx)
					if pctx.Err() != nil {
						close(done)
						return
					}
					seen := false
					fs.EachRecord(func(r *kgo.Record) { seen = seen || string(r.Value) == "v"+strconv.Itoa(next) })
					if seen {
						done <- time.Now()
						return
					}
				}
			}()
			time.Sleep(200 * time.Millisecond) // the consumer is parked on its fetch
			start := time.Now()
			racksProduce(t, plain, topic, next, 1)
			at, ok := <-done
			if !ok {
				t.Fatalf("record %d not consumed (rack %q)", next, rack)
			}
			lat = append(lat, at.Sub(start).Round(time.Millisecond))
			next++
		}
		t.Logf("produce (acks=all) to consume, consumer rack %q: %v", rack, lat)
		cons.Close()
	}
}
