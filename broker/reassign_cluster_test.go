package broker

// Partition reassignment (KIP-455) on clusters of real `weir serve` processes: every partition
// of a topic moved from brokers {1,2,3} to {2,3,4} while an idempotent acks=all producer writes
// and a consumer group reads, then broker 1 stopped (nothing acknowledged lost, the new replicas
// byte-identical); a reassignment that cannot finish, cancelled; and a throttled one that keeps
// to its replication rate.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
)

// reassignPortBase returns the first base in this part's port range (40300-40399) whose ports
// base..base+n-1, +20 and +40 (Kafka, controller, metrics) can all be bound now: the range lies
// among the ephemeral ports, where a client connection may hold one.
func reassignPortBase(t *testing.T, n int) int {
	t.Helper()
	for base := 40300; base+40+n-1 <= 40399; base += 5 {
		free := true
		for _, off := range []int{0, 20, 40} {
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
	t.Fatal("no free block of ports in 40300-40399")
	return 0
}

// startClusterAt is startCluster on ports of this part's range: Kafka base..., controller
// base+20..., metrics base+40... (base from reassignPortBase).
func startClusterAt(t *testing.T, n int, extra map[string]string) *testCluster {
	t.Helper()
	base := reassignPortBase(t, n)
	props := map[string]string{"group.initial.rebalance.delay.ms": "0"}
	for k, v := range extra {
		props[k] = v
	}
	return wrapCluster(t, tbcluster.Start(t, testcluster.Config{N: n, Props: props,
		BasePort: base, ControllerBasePort: base + 20, MetricsBasePort: base + 40}))
}

// createAssignedTopic creates topic with an explicit replica assignment (one list per partition).
func createAssignedTopic(t *testing.T, cl *kgo.Client, topic string, assign [][]int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for i, a := range assign {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(i), a
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if ec := resp.Topics[0].ErrorCode; ec != 0 {
		t.Fatalf("create %s: error %d %v", topic, ec, resp.Topics[0].ErrorMessage)
	}
}

// reassignAll asks for every partition of topic (0..parts-1) to move to target (nil: cancel).
func reassignAll(t *testing.T, adm *kadm.Client, topic string, parts int32, target []int32) {
	t.Helper()
	var req kadm.AlterPartitionAssignmentsReq
	for p := range parts {
		req.Assign(topic, p, target)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		t.Fatalf("reassign %s to %v: %v", topic, target, err)
	}
}

// listReassignments lists every partition in reassignment (ListPartitionReassignments with
// topics null), as "topic-p replicas +adding -removing".
func listReassignments(cl *kgo.Client) ([]string, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 5000
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("list reassignments: error %d", resp.ErrorCode)
	}
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s-%d %v +%v -%v", t.Topic, p.Partition, p.Replicas, p.AddingReplicas, p.RemovingReplicas))
		}
	}
	return out, nil
}

func sortedIDs(ids []int32) []int32 {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}

// TestClusterReassignUnderLoad: 4 brokers, a 3-partition topic on {1,2,3} (RF 3,
// min.insync.replicas 2); while an idempotent acks=all producer writes 30,000 records and a
// consumer group reads, every partition is reassigned to {2,3,4}. Once
// ListPartitionReassignments is empty, broker 1 has deleted its replicas and is stopped; the
// group reads every acknowledged record and the replicas on 2, 3 and 4 are byte-identical. Then
// a reassignment onto the stopped broker stays in progress (Metadata shows all replicas) and is
// cancelled.
func TestClusterReassignUnderLoad(t *testing.T) {
	c := startClusterAt(t, 4, map[string]string{"min.insync.replicas": "2", "offsets.topic.replication.factor": "3"})
	cl := c.client()
	adm := kadm.NewClient(cl)
	const topic, parts, records = "moving", 3, 30000
	createAssignedTopic(t, cl, topic, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)

	// The consumer group reads everything from the start.
	var mu sync.Mutex
	seen := map[string]bool{}
	acked := map[string]bool{}
	failures := 0
	cons := c.client(kgo.ConsumerGroup("reassign-readers"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		for cctx.Err() == nil {
			fs := cons.PollFetches(cctx)
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)] = true
				mu.Unlock()
			})
		}
	}()

	prod := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), // every partition gets records (the default sticky partitioner may skip one)
		kgo.ProducerLinger(2*time.Millisecond), kgo.RecordDeliveryTimeout(60*time.Second), kgo.RecordRetries(1<<30))
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		sem := make(chan struct{}, 64)
		for i := range records {
			sem <- struct{}{}
			if i%100 == 0 {
				time.Sleep(10 * time.Millisecond) // spread the writes over the reassignment
			}
			v := fmt.Sprintf("v%08d", i)
			prod.Produce(context.Background(), &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				<-sem
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures++
					return
				}
				acked[string(r.Value)] = true
			})
		}
		prod.Flush(context.Background())
	}()
	count := func(m map[string]bool) int {
		mu.Lock()
		defer mu.Unlock()
		return len(m)
	}
	waitFor(t, 30*time.Second, "first acknowledgements", func() (bool, string) { return count(acked) > 2000, "" })

	start := time.Now()
	reassignAll(t, adm, topic, parts, []int32{2, 3, 4})
	ackedAtStart := count(acked)
	waitFor(t, 90*time.Second, "no reassignment in progress", func() (bool, string) {
		l, err := listReassignments(cl)
		if err != nil {
			return false, err.Error()
		}
		return len(l) == 0, fmt.Sprint(l)
	})
	took := time.Since(start)
	// The listing came from one broker; each broker's Metadata answer follows its own image.
	waitFor(t, 10*time.Second, "Metadata showing every partition on {2,3,4}, led there", func() (bool, string) {
		ps, err := c.partitions(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if !slices.Equal(sortedIDs(p.Replicas), []int32{2, 3, 4}) || p.Leader == 1 || p.Leader < 0 {
				return false, fmt.Sprintf("partition %d: replicas %v leader %d isr %v", p.Partition, p.Replicas, p.Leader, p.ISR)
			}
		}
		return true, ""
	})
	one := c.nodes[c.index(1)]
	waitFor(t, 30*time.Second, "broker 1 deleting its replicas", func() (bool, string) {
		for p := range int32(parts) {
			if _, err := os.Stat(filepath.Join(one.dir, fmt.Sprintf("%s-%d", topic, p))); err == nil {
				return false, fmt.Sprintf("%s-%d still on broker 1", topic, p)
			}
		}
		return true, ""
	})
	pwg.Wait()
	ackedAtEnd := count(acked)
	c.signal(c.index(1), syscall.SIGTERM)
	t.Logf("reassignment of %d partitions completed in %v; %d records acknowledged before it started, %d in all (%d failed)",
		parts, took, ackedAtStart, ackedAtEnd, failures)
	if ackedAtEnd <= ackedAtStart {
		t.Errorf("nothing was acknowledged during or after the reassignment")
	}

	waitFor(t, 60*time.Second, "the group reading every acknowledged record", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		first := ""
		for v := range acked {
			if !seen[v] {
				missing++
				if first == "" {
					first = v
				}
			}
		}
		return missing == 0, fmt.Sprintf("%d acknowledged records not read (e.g. %s)", missing, first)
	})
	ccancel()
	cwg.Wait()

	waitFor(t, 30*time.Second, "byte-identical replicas on brokers 2, 3 and 4", func() (bool, string) {
		for p := range int32(parts) {
			var ref []byte
			for _, id := range []int32{2, 3, 4} {
				b := logBytes(t, c.nodes[c.index(id)].dir, topic, p)
				if id == 2 {
					ref = b
					continue
				}
				if len(ref) == 0 || !bytes.Equal(ref, b) {
					var ls []string
					for _, id := range []int32{2, 3, 4} {
						pdir := filepath.Join(c.nodes[c.index(id)].dir, fmt.Sprintf("%s-%d", topic, p))
						es, err := os.ReadDir(pdir)
						ls = append(ls, fmt.Sprintf("broker %d %s err=%v:", id, pdir, err))
						for _, e := range es {
							fi, _ := e.Info()
							ls = append(ls, fmt.Sprintf("  %s %d", e.Name(), fi.Size()))
						}
					}
					return false, fmt.Sprintf("partition %d: broker 2 has %d bytes, broker %d %d\n%s", p, len(ref), id, len(b), strings.Join(ls, "\n"))
				}
			}
		}
		return true, ""
	})

	// A reassignment onto the stopped broker 1 (registered, fenced) cannot finish: it is listed,
	// Metadata shows every replica, and a cancel puts the partition back.
	reassignAll(t, adm, topic, 1, []int32{2, 1})
	listed := func(want ...string) func() (bool, string) {
		return func() (bool, string) {
			l, err := listReassignments(cl)
			if err != nil {
				return false, err.Error()
			}
			return slices.Equal(l, want), fmt.Sprint(l)
		}
	}
	waitFor(t, 10*time.Second, "the reassignment onto broker 1 listed", listed(topic+"-0 [2 1 3 4] +[1] -[3 4]"))
	// Every broker's Metadata answer shows all four replicas (each applies the change on its own).
	replicasAre := func(want ...int32) func() (bool, string) {
		return func() (bool, string) {
			ps, err := c.partitions(adm, topic)
			if err != nil {
				return false, err.Error()
			}
			return slices.Equal(sortedIDs(ps[0].Replicas), want), fmt.Sprintf("%+v", ps[0])
		}
	}
	waitFor(t, 10*time.Second, "Metadata listing replicas 1-4 during the reassignment", replicasAre(1, 2, 3, 4))
	reassignAll(t, adm, topic, 1, nil)
	waitFor(t, 10*time.Second, "no reassignment listed after the cancel", listed())
	waitFor(t, 10*time.Second, "Metadata listing replicas 2-4 after the cancel", replicasAre(2, 3, 4))
	// Cancelling again: NO_REASSIGNMENT_IN_PROGRESS.
	var req kadm.AlterPartitionAssignmentsReq
	req.CancelAssign(topic, 0)
	resp, err := adm.AlterPartitionAssignments(context.Background(), req)
	if err != nil || resp.Error() == nil {
		t.Fatalf("second cancel: %v %v", resp, err)
	}
	t.Logf("second cancel: %v", resp.Error())

	// CreatePartitions with an explicit assignment: partition 3 on {4,3,2}, leader 4.
	t.Logf("create partitions")
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 30000
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = topic, parts+1
	ca := kmsg.NewCreatePartitionsRequestTopicAssignment()
	ca.Replicas = []int32{4, 3, 2}
	ct.Assignment = append(ct.Assignment, ca)
	cp.Topics = append(cp.Topics, ct)
	cpResp, err := cp.RequestWith(context.Background(), cl)
	if err != nil || cpResp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create partitions with an assignment: %v %+v", err, cpResp)
	}
	waitFor(t, 30*time.Second, "partition 3 on {4,3,2} led by 4 with a full ISR", func() (bool, string) {
		ps, err := c.partitions(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		p := ps[parts]
		return slices.Equal(p.Replicas, []int32{4, 3, 2}) && p.Leader == 4 && len(p.ISR) == 3, fmt.Sprintf("%+v", p)
	})

	// A single-replica partition moves too ({2} to {3}): its leader starts tracking the new
	// follower, which joins the ISR and takes the leadership.
	const single = "single"
	t.Logf("single-replica move")
	createAssignedTopic(t, cl, single, [][]int32{{2}}, nil)
	sp := c.client(kgo.DefaultProduceTopic(single), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 100 {
		if err := sp.ProduceSync(context.Background(), &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("reassigning the single replica")
	reassignAll(t, adm, single, 1, []int32{3})
	waitFor(t, 30*time.Second, "the single replica moved to broker 3", func() (bool, string) {
		ps, err := c.partitions(adm, single)
		if err != nil {
			return false, err.Error()
		}
		l, _ := listReassignments(cl)
		return len(l) == 0 && slices.Equal(ps[0].Replicas, []int32{3}) && ps[0].Leader == 3, fmt.Sprintf("%+v %v", ps[0], l)
	})
	t.Logf("moved")
	if err := sp.ProduceSync(context.Background(), &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after moving the single replica: %v", err)
	}
	waitFor(t, 10*time.Second, "broker 3 holding all 101 records", func() (bool, string) {
		b := logBytes(t, c.nodes[c.index(3)].dir, single, 0)
		return batchesEnd(b) == 101, fmt.Sprint(batchesEnd(b))
	})
}

// TestClusterReassignThrottled: a partition holding ~8 MiB on {1,2} is reassigned to {2,3} with
// KIP-73 throttles at 1 MiB/s, set as kafka-reassign-partitions.sh --throttle sets them (the
// brokers' leader and follower rates, the topic's leader.replication.throttled.replicas for the
// current replicas and follower.replication.throttled.replicas for the added one). The
// reassignment must take the log size over the rate, within 20%.
func TestClusterReassignThrottled(t *testing.T) {
	c := startClusterAt(t, 3, nil)
	cl := c.client()
	adm := kadm.NewClient(cl)
	const topic = "throttled"
	createAssignedTopic(t, cl, topic, [][]int32{{1, 2}}, nil)
	c.waitISR(adm, topic, 2, 30*time.Second)
	prod := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(256<<10))
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(i*7 + i/13)
	}
	for i := range 8 << 10 {
		value[0], value[1] = byte(i), byte(i>>8)
		prod.Produce(context.Background(), &kgo.Record{Value: slices.Clone(value)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	size := len(logBytes(t, c.nodes[c.index(1)].dir, topic, 0))

	const rate = 1 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := fmt.Sprint(rate)
	for _, b := range []int32{1, 2, 3} {
		resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
			{Name: "leader.replication.throttled.rate", Value: &r},
			{Name: "follower.replication.throttled.rate", Value: &r}}, b)
		if err == nil {
			err = alterErr(resp)
		}
		if err != nil {
			t.Fatalf("throttle rates on broker %d: %v", b, err)
		}
	}
	leaders, followers := "0:1,0:2", "0:3"
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Name: "leader.replication.throttled.replicas", Value: &leaders},
		{Name: "follower.replication.throttled.replicas", Value: &followers}}, topic)
	if err == nil {
		err = alterErr(resp)
	}
	if err != nil {
		t.Fatalf("throttled replicas: %v", err)
	}

	start := time.Now()
	reassignAll(t, adm, topic, 1, []int32{2, 3})
	waitFor(t, 60*time.Second, "the throttled reassignment completing", func() (bool, string) {
		l, err := listReassignments(cl)
		if err != nil {
			return false, err.Error()
		}
		return len(l) == 0, fmt.Sprint(l)
	})
	took := time.Since(start)
	want := time.Duration(float64(size) / rate * float64(time.Second))
	t.Logf("reassigned %d bytes in %v at %d B/s (expected %v, %.0f%%)", size, took, rate, want, 100*took.Seconds()/want.Seconds())
	if took < want*8/10 || took > want*12/10 {
		t.Fatalf("throttled reassignment of %d bytes took %v; at %d B/s it should take %v ± 20%%", size, took, rate, want)
	}
	waitFor(t, 30*time.Second, "byte-identical replicas on 2 and 3", func() (bool, string) {
		a, b := logBytes(t, c.nodes[c.index(2)].dir, topic, 0), logBytes(t, c.nodes[c.index(3)].dir, topic, 0)
		return len(a) == size && bytes.Equal(a, b), fmt.Sprintf("%d and %d bytes of %d", len(a), len(b), size)
	})
}

// alterErr is the first error of an AlterConfigs answer.
func alterErr(rs kadm.AlterConfigsResponses) error {
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%s: %w (%s)", r.Name, r.Err, r.ErrMessage)
		}
	}
	return nil
}
