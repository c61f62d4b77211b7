package broker

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterFollowerFetchSessions: followers replicate through incremental fetch sessions
// (replication/fetcher.go, KIP-227). On a 3-broker cluster with 60 partitions, once every
// replica is caught up, the leaders serve the followers' fetches as incremental ones (no
// sessionless fetch from a follower), their sessions hold every followed partition, and acks=all
// writes still complete (the leader learns the followers' offsets from the sessions) and reach
// every replica.
func TestClusterFollowerFetchSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-broker cluster")
	}
	c := startCluster(t, 3, nil)
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("sessions"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const parts = 60
	createReplicatedTopic(t, adm, "sessions", parts, 3, nil)
	c.waitISR(adm, "sessions", 3, 60*time.Second)

	produce := func(round int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for p := int32(0); p < parts; p++ {
			r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("r%d-p%d", round, p))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce round %d partition %d: %v", round, p, err)
			}
		}
	}
	// acks=all on every partition: each write waits for both followers' fetch offsets.
	produce(0)

	kinds := func() (sessionless, full, incremental, cached float64) {
		for _, n := range c.tc.Nodes() {
			s := scrapeAddr(t, n.MetricsAddr())
			v, _ := s.sum("weir_fetch_session_requests_total", "kind", "sessionless")
			sessionless += v
			v, _ = s.sum("weir_fetch_session_requests_total", "kind", "full")
			full += v
			v, _ = s.sum("weir_fetch_session_requests_total", "kind", "incremental")
			incremental += v
			v, _ = s.sum("weir_fetch_session_partitions")
			cached += v
		}
		return
	}
	sl0, full0, inc0, _ := kinds()
	time.Sleep(3 * time.Second) // idle: the followers' long polls (replica.fetch.wait.max.ms) go on
	produce(1)
	sl1, full1, inc1, cached := kinds()
	t.Logf("fetches over ~3 s: sessionless %v, full %v, incremental %v; partitions in sessions %v", sl1-sl0, full1-full0, inc1-inc0, cached)
	if sl1 != sl0 {
		t.Errorf("followers sent %v sessionless fetches; want none", sl1-sl0)
	}
	if inc1-inc0 < 4 {
		t.Errorf("followers sent %v incremental fetches in ~3 s; want several", inc1-inc0)
	}
	// Each of the 60 partitions has two followers, each holding it in its session with the leader.
	if cached < 2*parts {
		t.Errorf("sessions hold %v partitions; want at least %d", cached, 2*parts)
	}

	// Every replica has every record: stop the brokers (SIGTERM) and compare their logs.
	c.waitISR(adm, "sessions", 3, 30*time.Second)
	time.Sleep(time.Second)
	for i := range c.nodes {
		c.signal(i, syscall.SIGTERM)
	}
	for p := int32(0); p < parts; p++ {
		ref := logBytes(t, c.nodes[0].dir, "sessions", p)
		if batchesEnd(ref) != 2 {
			t.Errorf("partition %d: broker %d's log ends at offset %d; want 2", p, c.nodes[0].id, batchesEnd(ref))
		}
		for i := 1; i < len(c.nodes); i++ {
			if other := logBytes(t, c.nodes[i].dir, "sessions", p); !bytes.Equal(ref, other) {
				t.Errorf("partition %d: broker %d's log (%d bytes, end %d) differs from broker %d's (%d bytes, end %d)",
					p, c.nodes[i].id, len(other), batchesEnd(other), c.nodes[0].id, len(ref), batchesEnd(ref))
			}
		}
	}
}
