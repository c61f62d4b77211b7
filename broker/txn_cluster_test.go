package broker

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

// startInprocCluster starts n in-process brokers forming one cluster (every one a quorum voter).
func startInprocCluster(t *testing.T, n int, props map[string]string) []*Broker {
	t.Helper()
	ports := make([]int, 2*n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	voters := make([]string, n)
	for i := range n {
		voters[i] = fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[n+i])
	}
	brokers := make([]*Broker, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for i := range n {
		p := map[string]string{"listeners": "PLAINTEXT://127.0.0.1:" + strconv.Itoa(ports[i]), "node.id": strconv.Itoa(i + 1),
			"controller.quorum.voters": strings.Join(voters, ","), "log.dirs": t.TempDir(), "metrics.listener": ""}
		for k, v := range props {
			p[k] = v
		}
		cfg, err := NewConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := New(cfg)
			if err == nil {
				if err = b.Start(); err == nil {
					brokers[i] = b
					return
				}
			}
			mu.Lock()
			errs = append(errs, err.Error())
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, b := range brokers {
			if b != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_ = b.Shutdown(ctx)
				cancel()
			}
		}
	})
	if len(errs) > 0 {
		t.Fatalf("start cluster: %v", errs)
	}
	return brokers
}

// TestTxnReplicatedMarkers: 3 brokers, RF 3. Transactional batches and markers written on the
// leader reach the followers, whose .txnindex files and producer state are the leader's, and a
// read_committed consumer of the cluster sees exactly the committed records.
func TestTxnReplicatedMarkers(t *testing.T) {
	brokers := startInprocCluster(t, 3, map[string]string{"default.replication.factor": "3", "min.insync.replicas": "2"})
	var seeds []string
	for _, b := range brokers {
		seeds = append(seeds, b.Addr())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic = "txn-repl"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cr := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 1, 3
	cr.Topics = append(cr.Topics, ct)
	cr.TimeoutMillis = 30000
	if resp, err := cr.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, resp)
	}
	tp := engine.TopicPartition{Topic: topic, Partition: 0}
	var leader *Broker
	var lrep *replica
	deadline := time.Now().Add(30 * time.Second)
	for leader == nil || lrep.isrSize() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no leader with a full ISR")
		}
		for _, b := range brokers {
			if r := b.rm.get(tp); r != nil {
				if _, leading := r.leaderEpoch(); leading {
					leader, lrep = b, r
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	appendTxn := func(pid int64, seq int32, values ...string) {
		recs := make([]record.Record, len(values))
		for i, v := range values {
			recs[i] = record.Record{Value: []byte(v)}
		}
		o := record.BuildOptions{ProducerID: pid, BaseSequence: seq, Attributes: record.AttrTransactional}
		if pid < 0 {
			o = record.BuildOptions{ProducerID: -1, BaseSequence: -1}
		}
		info, epoch, err := lrep.appendAsLeader(record.Build(nil, o, recs))
		if err != nil {
			t.Fatal(err)
		}
		dl := time.NewTimer(20 * time.Second)
		defer dl.Stop()
		if err := lrep.waitCommitted(info.LastOffset+1, epoch, 2, dl.C, nil); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(pid int64, commit bool) {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.Committed = pid, commit
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp, err := cl.Broker(int(leader.nodeID)).Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("marker: %v", kerr.ErrorForCode(code))
		}
	}
	var want []string
	for i := 0; i < 20; i++ {
		pid := int64(500 + i%3)
		v := fmt.Sprintf("t%d", i)
		appendTxn(pid, int32(i/3), v)
		appendTxn(-1, 0, fmt.Sprintf("plain%d", i))
		want = append(want, fmt.Sprintf("plain%d", i))
		commit := i%2 == 0
		marker(pid, commit)
		if commit {
			// Committed records appear at their own offsets, before the plain one.
			want = append(want[:len(want)-1], v, fmt.Sprintf("plain%d", i))
		}
	}
	appendTxn(900, 0, "open") // holds back what follows
	appendTxn(-1, 0, "after-open")

	// Followers catch up; their .txnindex and producer state are the leader's.
	end := lrep.log.LogEndOffset()
	for _, b := range brokers {
		r := b.rm.get(tp)
		for r.log.LogEndOffset() < end || r.log.HighWatermark() < end {
			if time.Now().After(deadline.Add(30 * time.Second)) {
				t.Fatalf("broker %d stuck at %d/%d", b.nodeID, r.log.LogEndOffset(), end)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	idx := func(b *Broker) []byte {
		p := filepath.Join(b.cfg.LogDirs()[0], topic+"-0", segment.FileName(0, segment.TxnIndexSuffix))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	li := idx(leader)
	if len(li) != 10*segment.TxnEntrySize {
		t.Fatalf("leader .txnindex of %d bytes, want 10 entries", len(li))
	}
	for _, b := range brokers {
		if !bytes.Equal(idx(b), li) {
			t.Fatalf("broker %d .txnindex differs from the leader's", b.nodeID)
		}
		if got, wantP := fmt.Sprint(b.rm.get(tp).log.Producers()), fmt.Sprint(lrep.log.Producers()); got != wantP {
			t.Fatalf("broker %d producers %s, leader %s", b.nodeID, got, wantP)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	quiet := time.Time{}
	for time.Now().Before(deadline.Add(60 * time.Second)) {
		if len(got) >= len(want) {
			if quiet.IsZero() {
				quiet = time.Now().Add(500 * time.Millisecond)
			} else if time.Now().After(quiet) {
				break
			}
		}
		pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("read_committed got %v\nwant %v", got, want)
	}
}
