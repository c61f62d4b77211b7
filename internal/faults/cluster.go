package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/testcluster"
)

// cluster is the running cluster as the runner sees it: the nodes and an admin client.
type cluster struct {
	tc     *testcluster.Cluster
	broker string // BrokerWeir or BrokerKafka
	dial   Dialer
	cl     *kgo.Client
	adm    *kadm.Client
	seeds  []string
}

// clientOpts are the options every client of the run starts from: the seeds, the dialer, quick
// metadata refreshes and short backoffs, so that a client follows leadership changes quickly.
func (c *cluster) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.seeds...),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.MetadataMaxAge(5 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.RequestTimeoutOverhead(5 * time.Second),
		kgo.DialTimeout(3 * time.Second),
	}
	if c.dial != nil {
		opts = append(opts, kgo.Dialer(c.dial))
	}
	return append(opts, extra...)
}

func newCluster(tc *testcluster.Cluster, dial Dialer, broker string) (*cluster, error) {
	c := &cluster{tc: tc, broker: broker, dial: dial, seeds: tc.Bootstrap()}
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	c.cl, c.adm = cl, kadm.NewClient(cl)
	return c, nil
}

func (c *cluster) close() { c.cl.Close() }

// createTopic creates topic with partitions, replication factor 3 and min.insync.replicas 2.
func (c *cluster) createTopic(ctx context.Context, topic string, partitions int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	minISR := "2"
	resp, err := c.adm.CreateTopics(ctx, int32(partitions), 3, map[string]*string{"min.insync.replicas": &minISR}, topic)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if r := resp[topic]; r.Err != nil {
		return fmt.Errorf("create topic %s: %w", topic, r.Err)
	}
	return nil
}

// partitions are topic's partitions as the cluster reports them now.
func (c *cluster) partitions(ctx context.Context, topic string) (kadm.PartitionDetails, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := c.adm.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok {
		return nil, fmt.Errorf("metadata of %s: topic missing", topic)
	}
	if td.Err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, td.Err)
	}
	return td.Partitions, nil
}

// leader is the leader of topic's partition p (an error when it has none).
func (c *cluster) leader(ctx context.Context, topic string, p int32) (int32, error) {
	ps, err := c.partitions(ctx, topic)
	if err != nil {
		return -1, err
	}
	d, ok := ps[p]
	if !ok || d.Leader < 0 {
		return -1, fmt.Errorf("%s/%d has no leader", topic, p)
	}
	return d.Leader, nil
}

// controller is the active controller: for weir Metadata's controller id, which weir sets to the
// node leading the controller quorum (as `weir cluster info` shows); for Kafka, whose Metadata
// answers a random broker, the quorum leader of DescribeQuorum.
func (c *cluster) controller(ctx context.Context) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c.broker == BrokerKafka {
		return c.kafkaController(ctx)
	}
	md, err := c.adm.BrokerMetadata(ctx)
	if err != nil {
		return -1, fmt.Errorf("metadata: %w", err)
	}
	if md.Controller < 0 {
		return -1, errors.New("no active controller known")
	}
	return md.Controller, nil
}

// coordinator is the coordinator of a group, or of a transactional id (txn).
func (c *cluster) coordinator(ctx context.Context, txn bool, key string) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var rs kadm.FindCoordinatorResponses
	if txn {
		rs = c.adm.FindTxnCoordinators(ctx, key)
	} else {
		rs = c.adm.FindGroupCoordinators(ctx, key)
	}
	r, ok := rs[key]
	if !ok {
		return -1, fmt.Errorf("coordinator of %s: no answer", key)
	}
	if r.Err != nil {
		return -1, fmt.Errorf("coordinator of %s: %w", key, r.Err)
	}
	return r.NodeID, nil
}

// inSync says whether every node is running and ready (testcluster's ReadyState) and every partition of topics has a
// leader and its whole replica set in its ISR ("" when it does, else what is not).
func (c *cluster) inSync(ctx context.Context, topics []string) string {
	for _, n := range c.tc.Nodes() {
		if !n.Running() {
			return "node " + strconv.Itoa(int(n.ID)) + " is not running"
		}
		if err := n.ReadyState(ctx); err != nil {
			return fmt.Sprintf("node %d not ready: %v", n.ID, err)
		}
	}
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md, err := c.adm.Metadata(mctx, topics...)
	if err != nil {
		return fmt.Sprintf("metadata: %v", err)
	}
	if len(md.Brokers) < len(c.tc.Nodes()) {
		return fmt.Sprintf("%d brokers in metadata, want %d", len(md.Brokers), len(c.tc.Nodes()))
	}
	for _, t := range topics {
		td, ok := md.Topics[t]
		if !ok || td.Err != nil {
			return fmt.Sprintf("topic %s: %v", t, td.Err)
		}
		for _, p := range td.Partitions.Sorted() {
			if p.Leader < 0 || len(p.ISR) < len(p.Replicas) {
				return fmt.Sprintf("%s/%d: leader %d, replicas %v, isr %v", t, p.Partition, p.Leader, p.Replicas, p.ISR)
			}
		}
	}
	return ""
}

// internalTopics are the internal topics that exist now, among __consumer_offsets and
// __transaction_state.
func (c *cluster) internalTopics(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	td, err := c.adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, t := range []string{"__consumer_offsets", "__transaction_state"} {
		if _, ok := td[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

// waitInSync waits (polling every 500 ms, at most within) until inSync holds for topics and
// the internal topics.
func (c *cluster) waitInSync(ctx context.Context, topics []string, within time.Duration) error {
	deadline := time.Now().Add(within)
	last := ""
	for {
		all := append(slices.Clone(topics), c.internalTopics(ctx)...)
		if last = c.inSync(ctx, all); last == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not in sync within %v: %s", within, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for an in-sync cluster (%s): %w", last, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
