package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
)

// A real three-node cluster in namespaces, its client dialing from the bridge namespace:
// isolating a partition's leader moves the leadership to another node and produces succeed there;
// the isolated node reaches no one; after Heal all three are in the ISR again.
func TestIsolateLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of weir processes")
	}
	nt := create(t, "wncluster", 3) // closed after the cluster is killed (cleanups run last first)
	c := tbcluster.Start(t, testcluster.Config{N: 3, StartTimeout: 60 * time.Second,
		Host:        nt.Addr,
		DialContext: nt.DialContext,
		Wrap:        func(n *testcluster.Node, argv []string) []string { return nt.Exec(int(n.ID), argv) },
		Props: map[string]string{"default.replication.factor": "3", "offsets.topic.replication.factor": "3",
			"min.insync.replicas": "2", "replica.lag.time.max.ms": "5000"}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.Dialer(nt.DialContext),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("t"), kgo.RecordRetries(1000),
		kgo.RetryTimeout(50*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "t"); err != nil {
		t.Fatal(err)
	}
	produce := func(v string) {
		t.Helper()
		pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
		defer pcancel()
		if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s (cuts %q): %v", v, nt.Cuts(), err)
		}
	}
	// partition is t-0's leader and ISR as the reachable brokers report them.
	partition := func() (int32, []int32, error) {
		mctx, mcancel := context.WithTimeout(ctx, 5*time.Second)
		defer mcancel()
		md, err := adm.Metadata(mctx, "t")
		if err != nil {
			return 0, nil, err
		}
		p, ok := md.Topics["t"].Partitions[0]
		if !ok {
			return 0, nil, errors.New("no partition t-0 in metadata")
		}
		if p.Err != nil {
			return 0, nil, p.Err
		}
		isr := slices.Clone(p.ISR)
		slices.Sort(isr)
		return p.Leader, isr, nil
	}
	// waitFor polls partition until ok says so, for at most within.
	waitFor := func(what string, within time.Duration, ok func(leader int32, isr []int32) bool) (int32, []int32) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			leader, isr, err := partition()
			if err == nil && ok(leader, isr) {
				return leader, isr
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v: leader %d, isr %v, err %v (cuts %q)", what, within, leader, isr, err, nt.Cuts())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	produce("before")
	old, _ := waitFor("a leader with all three in sync", 30*time.Second, func(l int32, isr []int32) bool {
		return l > 0 && len(isr) == 3
	})
	t.Logf("t-0 leader is node %d; isolating it", old)

	if err := nt.Isolate(int(old)); err != nil {
		t.Fatal(err)
	}
	// (b) From the isolated node's namespace nothing answers: a dial to a peer's Kafka port
	// times out (no refusal: the SYN is silently dropped).
	peer := c.Node(old%3 + 1)
	err = nt.inNamespace(int(old), func() error {
		dctx, dcancel := context.WithTimeout(ctx, time.Second)
		defer dcancel()
		conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", peer.Addr())
		if err == nil {
			conn.Close()
			return fmt.Errorf("connected to %s", peer.Addr())
		}
		return err
	})
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("isolated node %d dialing node %d: %v, want a timeout", old, peer.ID, err)
	}
	// (a) The others elect a new leader and take writes.
	leader, isr := waitFor("a new leader", 60*time.Second, func(l int32, _ []int32) bool { return l > 0 && l != old })
	t.Logf("new leader %d, isr %v", leader, isr)
	produce("during")

	if err := nt.Heal(); err != nil {
		t.Fatal(err)
	}
	waitFor("all three in sync after heal", 90*time.Second, func(l int32, isr []int32) bool {
		return l > 0 && slices.Equal(isr, []int32{1, 2, 3})
	})
	produce("after")

	// Every acknowledged record is there, in order.
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.Dialer(nt.DialContext),
		kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var got []string
	for len(got) < 3 && ctx.Err() == nil {
		fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
		rd.PollFetches(fctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		fcancel()
	}
	if !slices.Equal(got, []string{"before", "during", "after"}) {
		t.Fatalf("read back %q", got)
	}
	for _, n := range c.Nodes() {
		if !n.Running() {
			t.Errorf("node %d exited: %s", n.ID, n.ExitString())
		}
	}
}
