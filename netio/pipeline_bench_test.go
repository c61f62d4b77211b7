package netio

import (
	"encoding/binary"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkPipelinedProduce: one connection pipelining produce requests of 1 MiB (the fake
// handler answers at once, holding each frame until its reply is written), as a producer with
// acks=1 does; the per-request cost of the transport's bookkeeping, without a disk. The
// "16KiB" cases send requests of one Java-producer batch (batch.size 16384), where the per-request
// costs (reads, wake-ups, the reply's write) weigh most.
func BenchmarkPipelinedProduce(b *testing.B) {
	for _, bc := range []struct {
		name, topic string
		size        int
	}{{"t", "t", 1 << 20}, {"noalias", "noalias", 1 << 20}, {"t/16KiB", "t", 16 << 10}, {"noalias/16KiB", "noalias", 16 << 10}} {
		topic := bc.topic
		b.Run(bc.name, func(b *testing.B) {
			ts := startServer(b, Config{})
			c := dial(b, ts.addr)
			req := kmsg.NewPtrProduceRequest()
			req.Acks = 1
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = make([]byte, bc.size)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			frame, _ := c.frame(req, 9)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			b.ResetTimer()
			done := make(chan error, 1)
			go func() {
				var size [4]byte
				buf := make([]byte, 4096)
				for i := 0; i < b.N; i++ {
					if _, err := io.ReadFull(c.conn, size[:]); err != nil {
						done <- err
						return
					}
					n := int(binary.BigEndian.Uint32(size[:]))
					for n > 0 {
						m, err := c.conn.Read(buf[:min(n, len(buf))])
						if err != nil {
							done <- err
							return
						}
						n -= m
					}
				}
				done <- nil
			}()
			for i := 0; i < b.N; i++ {
				if _, err := c.conn.Write(frame); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
