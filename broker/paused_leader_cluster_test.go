package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/record"
)

// rawRequest writes req (at its set version) on conn with correlation id corr and reads its
// response, within the deadline.
func rawRequest(conn net.Conn, req kmsg.Request, corr int32, deadline time.Time) (kmsg.Response, error) {
	if err := rawSend(conn, req, corr); err != nil {
		return nil, err
	}
	return rawReceive(conn, req, corr, deadline)
}

func rawSend(conn net.Conn, req kmsg.Request, corr int32) error {
	_, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("paused-leader-test")).AppendRequest(nil, req, corr))
	return err
}

func rawReceive(conn net.Conn, req kmsg.Request, corr int32, deadline time.Time) (kmsg.Response, error) {
	_ = conn.SetReadDeadline(deadline)
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, fmt.Errorf("reading response %d: %w", corr, err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, frame); err != nil {
		return nil, fmt.Errorf("reading response %d: %w", corr, err)
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	body := frame[4:]
	if req.IsFlexible() && len(body) > 0 {
		body = body[1:] // response header v1: an empty tag section
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding response %d: %w", corr, err)
	}
	return resp, nil
}

// TestClusterPausedLeader: the leader of a 3-replica partition (min.insync.replicas 2) is
// stopped (SIGSTOP) for longer than the broker session while an idempotent acks=all producer
// runs; the controller fences it and elects another leader from the ISR, and the producer
// carries on there. A Produce (acks=all) and a Fetch sent to the stopped leader wait in its
// sockets and are among the first requests it serves when it resumes (SIGCONT), before it
// learns of the new leader epoch; it keeps being fetched from directly until it says it no
// longer leads.
//
// Invariants: no acknowledged record is lost, and nothing read from the old leader is past the
// high watermark the new leader keeps (every record read is in the final committed log at the
// same offset). What keeps them: the old leader's high watermark is the minimum over the ISR
// the controller committed (plus pending additions), and only a controller-committed change
// alters that ISR; its shrink proposals carry the fenced leader epoch and are refused
// (FENCED_LEADER_EPOCH), so it never counts itself alone. Its followers fetch from the new
// leader once they see the new epoch, so the only offsets reported to it after the pause come
// from fetches sent before it (their sockets' backlog): offsets the followers hold, which the
// new leader keeps. The old leader learns the new epoch within tens of milliseconds of resuming
// (the controller's replication traffic waits in its sockets too), so this is an end-to-end
// guard of the invariants; the deterministic checks of the rules are replication's scripted
// tests (a pending shrink does not move the high watermark) and TestISRExpansionAnswerLost.
func TestClusterPausedLeader(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"min.insync.replicas": "2", "replica.lag.time.max.ms": "2000"})
	adm := kadm.NewClient(c.client())
	const topic = "paused-leader"
	createReplicatedTopic(t, adm, topic, 1, 3, nil)
	c.waitISR(adm, topic, 3, 30*time.Second)
	ps, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	old, oldEpoch := ps[0].Leader, ps[0].LeaderEpoch
	oi := c.index(old)
	if oi < 0 {
		t.Fatalf("partition 0 has leader %d", old)
	}
	// A stopped process's listening sockets still accept connections, and a request sent there
	// waits: clients other than the direct connections below know only the other brokers.
	var others []string
	for _, n := range c.nodes {
		if n.id != old {
			others = append(others, fmt.Sprintf("127.0.0.1:%d", n.port))
		}
	}
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(others...), kgo.MetadataMinAge(100 * time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	otherAdm := kadm.NewClient(client())
	prod := client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RequestTimeoutOverhead(2*time.Second),
		kgo.RecordDeliveryTimeout(60*time.Second), kgo.RecordRetries(1<<30))

	var mu sync.Mutex // guards acked and failed
	acked := map[int64]string{}
	failed := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sem := make(chan struct{}, 32)
		for i := 0; ; i++ {
			select {
			case <-stop:
				for range cap(sem) {
					sem <- struct{}{}
				}
				return
			case sem <- struct{}{}:
			}
			prod.Produce(context.Background(), &kgo.Record{Value: []byte(fmt.Sprintf("v%08d", i))}, func(r *kgo.Record, err error) {
				<-sem
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					return
				}
				acked[r.Offset] = string(r.Value)
			})
		}
	}()
	stopProducing := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopProducing()
	ackCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitFor(t, 30*time.Second, "first acknowledgements", func() (bool, string) { return ackCount() > 200, "" })

	oldAddr := fmt.Sprintf("127.0.0.1:%d", c.nodes[oi].port)
	fetchConn, err := net.Dial("tcp", oldAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer fetchConn.Close()
	produceConn, err := net.Dial("tcp", oldAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer produceConn.Close()
	fetchReq := func() *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(12)
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.PartitionMaxBytes = 0, oldEpoch, 0, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	// Both connections are served before the pause, so the requests below need no handshake.
	if _, err := rawRequest(fetchConn, fetchReq(), 0, time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	md := kmsg.NewPtrMetadataRequest()
	if _, err := rawRequest(produceConn, md, 0, time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}

	c.signal(oi, syscall.SIGSTOP)
	paused := true
	defer func() {
		if paused {
			c.signal(oi, syscall.SIGCONT)
		}
	}()
	pausedAt := time.Now()
	var newLeader int32
	waitFor(t, 30*time.Second, fmt.Sprintf("a leader other than the stopped broker %d", old), func() (bool, string) {
		ps, err := c.partitions(otherAdm, topic)
		if err != nil {
			return false, err.Error()
		}
		p := ps[0]
		newLeader = p.Leader
		return p.Leader >= 0 && p.Leader != old && p.LeaderEpoch > oldEpoch, fmt.Sprintf("leader %d epoch %d isr %v", p.Leader, p.LeaderEpoch, p.ISR)
	})
	before := ackCount()
	waitFor(t, 30*time.Second, fmt.Sprintf("acknowledgements from the new leader %d", newLeader), func() (bool, string) {
		return ackCount() > before+200, fmt.Sprint(ackCount())
	})

	// Queued in the stopped leader's sockets: an acks=all write and a read from offset 0.
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	produce.Acks, produce.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = record.Build(nil, record.BuildOptions{ProducerID: -1, BaseSequence: -1}, []record.Record{{Value: []byte("to-the-old-leader")}})
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	if err := rawSend(produceConn, produce, 1); err != nil {
		t.Fatal(err)
	}
	if err := rawSend(fetchConn, fetchReq(), 1); err != nil {
		t.Fatal(err)
	}
	c.signal(oi, syscall.SIGCONT)
	paused = false
	t.Logf("broker %d (leader epoch %d) stopped for %v; broker %d leads now", old, oldEpoch, time.Since(pausedAt).Round(time.Millisecond), newLeader)

	// Reads from the old leader, from its resumption until it says it no longer leads.
	read := map[int64]string{}
	var lastFetch string
	resumed := time.Now()
	for corr := int32(1); ; corr++ {
		if corr > 1 {
			if err := rawSend(fetchConn, fetchReq(), corr); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := rawReceive(fetchConn, fetchReq(), corr, time.Now().Add(10*time.Second))
		if err != nil {
			t.Fatalf("fetch %d from the resumed broker %d: %v", corr, old, err)
		}
		fr := resp.(*kmsg.FetchResponse)
		if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch %d: response %+v", corr, fr)
		}
		rp := &fr.Topics[0].Partitions[0]
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic}, rp, kgo.DefaultDecompressor(), nil)
		for _, r := range fp.Records {
			if r.Offset >= rp.HighWatermark {
				t.Errorf("fetch %d from broker %d: record at offset %d, at or past its high watermark %d", corr, old, r.Offset, rp.HighWatermark)
			}
			read[r.Offset] = string(r.Value)
		}
		lastFetch = fmt.Sprintf("fetch %d at %v after resuming: error %v, high watermark %d, %d records", corr,
			time.Since(resumed).Round(time.Millisecond), kerr.ErrorForCode(rp.ErrorCode), rp.HighWatermark, len(fp.Records))
		if corr == 1 {
			t.Log(lastFetch)
		}
		if rp.ErrorCode != 0 || time.Since(resumed) > 20*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Log(lastFetch)
	resp, err := rawReceive(produceConn, produce, 1, time.Now().Add(20*time.Second))
	if err != nil {
		t.Fatalf("the acks=all write to the resumed broker %d: %v", old, err)
	}
	pr := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	t.Logf("the acks=all write to the resumed broker %d: %v (base offset %d)", old, kerr.ErrorForCode(pr.ErrorCode), pr.BaseOffset)
	if pr.ErrorCode == 0 {
		mu.Lock()
		acked[pr.BaseOffset] = "to-the-old-leader" // acknowledged: it must be in the log
		mu.Unlock()
	}

	before = ackCount()
	waitFor(t, 30*time.Second, "acknowledgements after the old leader resumed", func() (bool, string) {
		return ackCount() > before+200, fmt.Sprint(ackCount())
	})
	stopProducing()
	mu.Lock()
	want := acked
	t.Logf("acknowledged %d records, %d failed sends; read %d records from the old leader after it resumed", len(want), failed, len(read))
	mu.Unlock()

	// The committed log, read through the current leaders, holds every acknowledged record and
	// everything read from the old leader, at the same offsets.
	need := int64(-1)
	for o := range want {
		need = max(need, o)
	}
	for o := range read {
		need = max(need, o)
	}
	cons := client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	log := map[int64]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for last := int64(-1); last < need; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consuming back: at offset %d of %d: %v", last, need, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			log[r.Offset] = string(r.Value)
			last = max(last, r.Offset)
		})
	}
	seen := map[string]int64{}
	for o, v := range log {
		if prev, dup := seen[v]; dup {
			t.Errorf("value %s stored at offsets %d and %d", v, prev, o)
		}
		seen[v] = o
	}
	for o, v := range want {
		if got, ok := log[o]; !ok || got != v {
			t.Errorf("acknowledged %s at offset %d; the log has %q", v, o, got)
		}
	}
	for o, v := range read {
		if got, ok := log[o]; !ok || got != v {
			t.Errorf("read %s at offset %d from the old leader %d; the committed log has %q", v, o, old, got)
		}
	}
}
