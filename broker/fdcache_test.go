package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/segment"
)

// A broker with many more inactive segments than its descriptor and index caches hold serves
// fetches of all of them (file slices sent with sendfile on a plaintext listener) correctly, with
// the caches staying within their bounds, before and after an idle sweep closed everything.
func TestFetchServesMoreSegmentsThanTheDescriptorCache(t *testing.T) {
	const logBound, idxBound, perPartition = 3, 2, 150
	b := startBroker(t, map[string]string{
		"storage.descriptor.cache.size": fmt.Sprint(logBound),
		"storage.index.cache.size":      fmt.Sprint(idxBound),
	})
	t.Cleanup(func() { segment.SetLogDescriptorCacheSize(0); segment.SetIndexMappingCacheSize(0) })
	cl, adm := admClient(t, b, kgo.ProducerLinger(0), kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	admCreateTopic(t, adm, "fdc", 2, map[string]*string{"internal.segment.bytes": admStr("400")})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for p := int32(0); p < 2; p++ {
		for i := 0; i < perPartition; i++ { // one batch per record: a segment every two or three
			r := &kgo.Record{Topic: "fdc", Partition: p, Value: []byte(fmt.Sprintf("p%d-v%04d-%0100d", p, i, i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %d/%d: %v", p, i, err)
			}
		}
	}
	l, ok := b.logs.Log(engine.TopicPartition{Topic: "fdc", Partition: 0})
	if !ok {
		t.Fatal("no log fdc-0")
	}
	if n := len(l.Segments()); n < 20 {
		t.Fatalf("%d segments: want many more than the cache's %d", n, logBound)
	}
	consume := func(round string) {
		t.Helper()
		c, _ := admClient(t, b, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			"fdc": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()},
		}), kgo.FetchMaxPartitionBytes(2000), kgo.FetchMaxBytes(4000))
		next := map[int32]int{}
		for next[0] < perPartition || next[1] < perPartition {
			fs := c.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("%s: consumed %v before the deadline", round, next)
			}
			fs.EachError(func(_ string, p int32, err error) { t.Fatalf("%s: fetch partition %d: %v", round, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				want := fmt.Sprintf("p%d-v%04d-%0100d", r.Partition, next[r.Partition], next[r.Partition])
				if string(r.Value) != want || r.Offset != int64(next[r.Partition]) {
					t.Fatalf("%s: partition %d offset %d: %q, want offset %d %q", round, r.Partition, r.Offset, r.Value, next[r.Partition], want)
				}
				next[r.Partition]++
			})
			if c := segment.Caches(); c.Descriptors > logBound || c.IndexPairs > idxBound {
				t.Fatalf("%s: caches %+v over their bounds", round, c)
			}
		}
		c.Close()
	}
	consume("first read")
	if c := segment.Caches(); c.DescriptorEvictions == 0 || c.IndexPairEvictions == 0 {
		t.Fatalf("no evictions: %+v", c)
	}
	segment.EvictIdle()
	segment.EvictIdle()
	consume("after the idle sweep")
	// Appends after the sweep go on (the active segment may have been settled and evicted).
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fdc", Partition: 0, Value: []byte("last")}).FirstErr(); err != nil {
		t.Fatalf("produce after the sweep: %v", err)
	}
}
