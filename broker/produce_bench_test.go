package broker

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/record"
)

// BenchmarkProduceHandler measures the broker's synchronous cost of one Produce request as netio runs
// it: the body's decode (kmsg ReadFrom from the frame, as netio's decode), the handler (lookups,
// validation, the append to every partition's active segment: one pwrite each) and the
// response's encoding. Page-cache acks (log.flush.interval.messages at its maximum), so no reply
// is deferred. The request is Produce v13 (topics by id, as Kafka 4.x's Java producer sends it)
// with one non-idempotent batch per partition (acks=1 producers are not idempotent), encoded
// once: every iteration decodes the same bytes, and the append rewrites only the base offset
// and leader epoch in place. "partitions=64/records=1/size=100" is the case where per-partition
// work weighs most: one small batch per partition. Run with -benchmem and a bounded count, e.g.
//
//	nice -n 19 go test -run '^$' -bench BenchmarkProduceHandler -benchmem -benchtime 1000x -count 6 ./broker/
//
// ns/op is wall time of the calling goroutine; cpu-ns/op is the process's user + system CPU per
// request (every goroutine: the flusher's and the scheduler's too), steadier on a shared
// machine.
func BenchmarkProduceHandler(b *testing.B) {
	br := startBroker(b, map[string]string{
		"log.flush.interval.messages": "9223372036854775807", // page-cache acks: the handler's cost alone
		"log.segment.bytes":           "1073741824",
	})
	cases := []struct{ partitions, records, size int }{
		{1, 1, 100},
		{64, 1, 100},
		{64, 10, 100},
		{64, 4, 1024},
	}
	// quotas=none is Produce as registered (handleProduceQuota: the client-quota check with no
	// quota set, which must add no allocation); quotas=off the handler alone.
	handlers := []struct {
		name   string
		handle func(*Broker, *netio.Request) netio.Reply
	}{{"quotas=none", handleProduceQuota}, {"quotas=off", handleProduce}}
	for _, c := range cases {
		topic := fmt.Sprintf("bench-p%d-r%d-s%d", c.partitions, c.records, c.size)
		createTopic(b, br.Addr(), topic, int32(c.partitions), nil)
		t, ok := br.topics.get(topic)
		if !ok {
			b.Fatal("topic not created")
		}
		for _, h := range handlers {
			b.Run(fmt.Sprintf("partitions=%d/records=%d/size=%d/%s", c.partitions, c.records, c.size, h.name), func(b *testing.B) {
				benchProduce(b, br, h.handle, t.ID, c.partitions, c.records, c.size)
			})
		}
	}
}

func benchProduce(b *testing.B, br *Broker, handle func(*Broker, *netio.Request) netio.Reply, id [16]byte, partitions, records, size int) {
	const version = 13
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	recs := make([]record.Record, records)
	for i := range recs {
		recs[i] = record.Record{Value: value}
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = 1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.TopicID = id
	for p := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Records = record.Build(nil, record.BuildOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	frame := req.AppendTo(nil)
	var out []byte
	produce := func() {
		body := kmsg.NewPtrProduceRequest()
		body.Version = version
		if err := body.ReadFrom(frame); err != nil {
			b.Fatal(err)
		}
		rep := handle(br, &netio.Request{Key: 0, Version: version, Body: body})
		resp, ok := rep.Response.(*kmsg.ProduceResponse)
		if !ok || rep.Deferred != nil {
			b.Fatal("no immediate response")
		}
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if ec := resp.Topics[i].Partitions[j].ErrorCode; ec != 0 {
					b.Fatalf("partition %d: error code %d", j, ec)
				}
			}
		}
		out = resp.AppendTo(out[:0])
	}
	produce() // the first append of each partition, and the response buffer's growth
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() {
		b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	}()
	for range b.N {
		produce()
	}
}

// BenchmarkProduceConn drives an in-process broker over loopback TCP as Kafka's Java producer
// does at --throughput -1: one connection, Produce v13 requests of one batch per partition,
// up to 5 requests in flight (max.in.flight.requests.per.connection), acks=1, page-cache
// acks. Unlike BenchmarkProduceHandler it includes the transport (netio's reads of the
// frames, the replies' writes, the goroutine wake-ups) and the garbage collector; the load
// generator is in the same process, so cpu-ns/record counts both sides (its part is small:
// writing pre-encoded frames and reading replies). Profile it to see the broker's share:
//
//	nice -n 19 go test -run '^$' -bench BenchmarkProduceConn -benchtime 3000x -cpuprofile cpu.out ./broker/
func BenchmarkProduceConn(b *testing.B) {
	br := startBroker(b, map[string]string{
		"log.flush.interval.messages": "9223372036854775807",
		"log.segment.bytes":           "1073741824",
	})
	cases := []struct{ partitions, records, size int }{
		{6, 16, 1024},
		{6, 150, 100},
		{64, 4, 1024},
	}
	for _, c := range cases {
		topic := fmt.Sprintf("conn-p%d-r%d-s%d", c.partitions, c.records, c.size)
		createTopic(b, br.Addr(), topic, int32(c.partitions), nil)
		t, ok := br.topics.get(topic)
		if !ok {
			b.Fatal("topic not created")
		}
		b.Run(fmt.Sprintf("partitions=%d/records=%d/size=%d", c.partitions, c.records, c.size), func(b *testing.B) {
			benchProduceConn(b, br, t.ID, c.partitions, c.records, c.size)
		})
	}
}

func benchProduceConn(b *testing.B, br *Broker, id [16]byte, partitions, records, size int) {
	const version, inFlight = 13, 5
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	recs := make([]record.Record, records)
	for i := range recs {
		recs[i] = record.Record{Value: value}
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, 1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.TopicID = id
	for p := range partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p)
		rp.Records = record.Build(nil, record.BuildOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	// The frame: size, key, version, correlation id, client id, the flexible header's empty
	// tags, then the body.
	body := req.AppendTo(nil)
	frame := binary.BigEndian.AppendUint32(nil, 0)
	frame = binary.BigEndian.AppendUint16(frame, 0)
	frame = binary.BigEndian.AppendUint16(frame, version)
	frame = binary.BigEndian.AppendUint32(frame, 0)
	frame = binary.BigEndian.AppendUint16(frame, 5)
	frame = append(frame, "bench"...)
	frame = append(frame, 0)
	frame = append(frame, body...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	conn, err := net.Dial("tcp", br.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	slots := make(chan struct{}, inFlight)
	done := make(chan error, 1)
	n := b.N + 1
	go func() {
		rd := bufio.NewReaderSize(conn, 64<<10)
		var size [4]byte
		for i := 0; i < n; i++ {
			if _, err := io.ReadFull(rd, size[:]); err != nil {
				done <- err
				return
			}
			if _, err := rd.Discard(int(binary.BigEndian.Uint32(size[:]))); err != nil {
				done <- err
				return
			}
			<-slots
		}
		done <- nil
	}()
	send := func() {
		slots <- struct{}{}
		if _, err := conn.Write(frame); err != nil {
			b.Fatal(err)
		}
	}
	send() // connection set-up and the first append of each partition
	b.SetBytes(int64(len(frame)))
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		send()
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*partitions*records), "cpu-ns/record")
}

// BenchmarkPageCacheWrite is the kernel's floor under the produce path: the pwrite(2) of one
// batch into the page cache, as segment.Append does it, straight from a test, into 1 or 64
// files written round-robin (a 64-partition request appends to 64 files). It shows the cost
// per call (170 B: one small record) and per KiB for batch sizes that end on a 4 KiB
// boundary and for sizes that do not (a batch never does: its header is 61 bytes): on ext4 a
// write that ends inside a new block zeroes the rest of the block and the next write's start
// falls mid-folio, which costs about twice as much per KiB as block-aligned writes.
func BenchmarkPageCacheWrite(b *testing.B) {
	for _, files := range []int{1, 64} {
		for _, size := range []int{170, 16384, 16445} {
			b.Run(fmt.Sprintf("files=%d/size=%d", files, size), func(b *testing.B) {
				dir := b.TempDir()
				fs := make([]*os.File, files)
				for i := range fs {
					f, err := os.Create(fmt.Sprintf("%s/%d.log", dir, i))
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					fs[i] = f
				}
				buf := make([]byte, size)
				pos := make([]int64, files)
				b.SetBytes(int64(size))
				b.ResetTimer()
				cpu0 := processCPU()
				for n := range b.N {
					i := n % files
					if _, err := fs[i].WriteAt(buf, pos[i]); err != nil {
						b.Fatal(err)
					}
					pos[i] += int64(size)
				}
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/write")
			})
		}
	}
}
