package controller

import (
	"fmt"
	"runtime"
	"testing"
)

// The per-partition costs of the metadata image, for sizing clusters of many partitions
// (docs/benchmarks.md, "Many partitions", the 100,000-partition plan): the bytes each partition
// adds to the image in memory and to its snapshot, and the controller's work to apply one
// partition change (AlterPartition) and one broker fence as the partition count grows.

// scaleImage returns an image of brokers brokers and topics topics of parts partitions each,
// replication factor min(3, brokers), leaders and ISRs as a new topic gets them.
func scaleImage(tb testing.TB, brokers, topics, parts int) *Image {
	tb.Helper()
	img := newImage("c")
	idx := uint64(1)
	for i := 1; i <= brokers; i++ {
		img = scaleApply(tb, img, idx, &command{Op: opRegister, BrokerID: int32(i)})
		idx++
	}
	rf := min(3, brokers)
	for t := 0; t < topics; t++ {
		ti := &TopicInfo{Name: fmt.Sprintf("topic-%05d", t), ID: [16]byte{byte(t >> 16), byte(t >> 8), byte(t), 1}, Configs: map[string]string{}}
		ti.Partitions = make([]PartitionInfo, parts)
		for p := range ti.Partitions {
			reps := make([]int32, rf)
			for j := range reps {
				reps[j] = int32((t+p+j)%brokers) + 1
			}
			ti.Partitions[p] = PartitionInfo{Replicas: reps, ISR: append([]int32(nil), reps...), Leader: reps[0]}
		}
		img = scaleApply(tb, img, idx, &command{Op: opCreateTopic, Topic: ti})
		idx++
	}
	return img
}

func scaleApply(tb testing.TB, img *Image, index uint64, cmd *command) *Image {
	next, res := apply(img, index, cmd)
	if res.err != nil {
		tb.Fatalf("%s: %v", cmd.Op, res.err)
	}
	if next == nil {
		return img
	}
	return next
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestImageBytesPerPartition reports what a partition adds to the image (heap) and to its
// snapshot (encoded), for 3 brokers, replication factor 3, as one topic and as topics of 100
// partitions. It checks only that the costs stay per partition (no quadratic term): run with -v
// for the figures.
func TestImageBytesPerPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("builds images of 100,000 partitions")
	}
	for _, shape := range []struct{ topics, parts int }{{1, 10000}, {1, 100000}, {100, 100}, {1000, 100}} {
		before := heapInUse()
		img := scaleImage(t, 3, shape.topics, shape.parts)
		heap := heapInUse() - before
		enc, err := encodeImage(img)
		if err != nil {
			t.Fatal(err)
		}
		n := shape.topics * shape.parts
		perHeap, perEnc := float64(heap)/float64(n), float64(len(enc))/float64(n)
		t.Logf("%d topics x %d partitions: heap %.1f MiB (%.0f B/partition), snapshot %.1f MiB (%.0f B/partition)",
			shape.topics, shape.parts, float64(heap)/(1<<20), perHeap, float64(len(enc))/(1<<20), perEnc)
		if perEnc > 1024 || perHeap > 4096 {
			t.Fatalf("%d partitions: %.0f B/partition encoded, %.0f B/partition in memory", n, perEnc, perHeap)
		}
		runtime.KeepAlive(img)
	}
}

// BenchmarkApplyAlterPartition: one ISR change (shrink, then expand back) applied to an image of
// N partitions, as one topic or as topics of 100 partitions. The image is copied on write: the
// topic maps (O(topics)) and the changed topic's partition list (O(its partitions)).
func BenchmarkApplyAlterPartition(b *testing.B) {
	for _, shape := range []struct{ topics, parts int }{{1, 1000}, {1, 10000}, {1, 100000}, {10, 100}, {100, 100}, {1000, 100}} {
		b.Run(fmt.Sprintf("topics=%d/partitions=%d", shape.topics, shape.topics*shape.parts), func(b *testing.B) {
			img := scaleImage(b, 3, shape.topics, shape.parts)
			name := fmt.Sprintf("topic-%05d", shape.topics/2)
			idx := uint64(1 << 20)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := img.Topics[name].Partitions[7]
				isr := p.Replicas
				if len(p.ISR) == len(p.Replicas) {
					isr = p.Replicas[:2]
				}
				img = scaleApply(b, img, idx, &command{Op: opAlterPartition, Alter: &AlterPartitionRequest{
					Topic: name, Partition: 7, LeaderID: p.Leader, LeaderEpoch: p.LeaderEpoch,
					PartitionEpoch: p.PartitionEpoch, ISR: append([]int32(nil), isr...)}})
				idx++
			}
		})
	}
}

// BenchmarkApplyFence: a broker fenced and unfenced again (a third of the partitions change
// leader, the ISR of two thirds shrinks and grows back): the work per broker failure.
func BenchmarkApplyFence(b *testing.B) {
	for _, shape := range []struct{ topics, parts int }{{1, 10000}, {1, 100000}, {1000, 100}} {
		b.Run(fmt.Sprintf("topics=%d/partitions=%d", shape.topics, shape.topics*shape.parts), func(b *testing.B) {
			img := scaleImage(b, 3, shape.topics, shape.parts)
			idx := uint64(1 << 20)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				img = scaleApply(b, img, idx, &command{Op: opFence, BrokerID: 2})
				img = scaleApply(b, img, idx+1, &command{Op: opUnfence, BrokerID: 2})
				idx += 2
			}
		})
	}
}
