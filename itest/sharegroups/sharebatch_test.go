package sharegroups

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weir-mq/weir/broker"
	"github.com/weir-mq/weir/internal/testcluster/inproc"
	"github.com/weir-mq/weir/sharestate"
)

// sbRequests sums weir_requests_total of api over brokers.
func sbRequests(t *testing.T, bs []*broker.Broker, api string) int {
	t.Helper()
	n := 0
	for _, b := range bs {
		mfs, err := b.Metrics().Prometheus().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "weir_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "api" && l.GetValue() == api {
						n += int(m.GetCounter().GetValue())
					}
				}
			}
		}
	}
	return n
}

// TestSharePersisterBatches: the persister sends the keys of one group that one share
// coordinator holds in one request (initialize, read summary, delete), on a 3-broker cluster
// where the 24 keys are spread over the coordinators.
func TestSharePersisterBatches(t *testing.T) {
	bs := inproc.StartCluster(t, 3, nil)
	var addrs []string
	for _, b := range bs {
		addrs = append(addrs, b.Addr())
	}
	cl := scClient(t, addrs...)
	id := scCreateTopic(t, cl, "sb-topic", 24, 3)
	keys := make([]sharestate.Key, 24)
	starts := make([]int64, len(keys))
	for i := range keys {
		keys[i] = sharestate.Key{Group: "sb-group", TopicID: id, Partition: int32(i)}
		starts[i] = int64(100 + i)
	}
	coords := map[int32]bool{}
	for _, k := range keys {
		coords[scCoordinator(t, cl, k)] = true
	}
	if len(coords) < 2 {
		t.Fatalf("keys on %d coordinators: want them spread", len(coords))
	}
	p, ok := bs[0].SharePersister().(sharestate.Batcher)
	if !ok {
		t.Fatal("the broker's persister does not batch")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// At most one request per remote coordinator (a retry while a coordinator loads adds one).
	remote := len(coords)
	if coords[1] { // bs[0] is node 1
		remote--
	}
	before := sbRequests(t, bs, "InitializeShareGroupState")
	for i, err := range p.InitializeBatch(ctx, keys, 1, starts) {
		if err != nil {
			t.Fatalf("initialize %d: %v", i, err)
		}
	}
	if n := sbRequests(t, bs, "InitializeShareGroupState") - before; n < 1 || n > 2*remote {
		t.Fatalf("%d InitializeShareGroupState requests for %d keys on %d remote coordinators", n, len(keys), remote)
	}
	before = sbRequests(t, bs, "ReadShareGroupStateSummary")
	sums, errs := p.ReadSummaryBatch(ctx, keys, 0)
	for i := range keys {
		if errs[i] != nil || sums[i].StartOffset != starts[i] || sums[i].StateEpoch != 1 {
			t.Fatalf("summary %d: %+v %v", i, sums[i], errs[i])
		}
	}
	if n := sbRequests(t, bs, "ReadShareGroupStateSummary") - before; n != remote {
		t.Fatalf("%d ReadShareGroupStateSummary requests for %d remote coordinators", n, remote)
	}
	for i, err := range p.DeleteBatch(ctx, keys[:12]) {
		if err != nil {
			t.Fatalf("delete %d: %v", i, err)
		}
	}
	_, errs = p.ReadSummaryBatch(ctx, keys, 0)
	for i := range keys {
		if deleted := i < 12; deleted != errors.Is(errs[i], sharestate.ErrNotInitialized) || (!deleted && errs[i] != nil) {
			t.Fatalf("summary %d after deleting 0-11: %v", i, errs[i])
		}
	}
}
