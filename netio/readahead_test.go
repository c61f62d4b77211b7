package netio

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFramesSplitAcrossReads: frames smaller and larger than the reader's read-ahead
// (readBufferSize), written in pieces that cut size prefixes, headers and bodies at every kind
// of boundary, with Deferred replies among replies the reader writes itself: every request is
// decoded whole and answered once, in order.
func TestFramesSplitAcrossReads(t *testing.T) {
	ts := startServer(t, Config{})
	c := dial(t, ts.addr)
	type sent struct {
		corr    int32
		records int    // a produce's record bytes (the fake handler answers BaseOffset = it)
		topic   string // a metadata request's echo
	}
	var all []sent
	var wire []byte
	sizes := []int{1, readBufferSize - 60, readBufferSize, readBufferSize + 1, 3 * readBufferSize, 70 << 10, 7, 2*readBufferSize - 3}
	for i, n := range sizes {
		if i%3 == 1 { // a Deferred reply: what follows waits for it in the writer
			topic := fmt.Sprintf("sleep:%d", 5)
			f, corr := c.frame(metadataReq(topic), 12)
			wire = append(wire, f...)
			all = append(all, sent{corr: corr, topic: topic})
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks = 1
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = make([]byte, n)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		f, corr := c.frame(req, 9)
		wire = append(wire, f...)
		all = append(all, sent{corr: corr, records: n})
	}
	// Pieces of 1, 2, 3, 5 bytes and of about the read-ahead's size, each a write of its own
	// with a pause, so the server's reads end at those cuts.
	cuts := []int{1, 2, 3, 5, readBufferSize - 1, readBufferSize + 3, 11, 2 * readBufferSize}
	for i, off := 0, 0; off < len(wire); i++ {
		n := min(cuts[i%len(cuts)], len(wire)-off)
		c.write(wire[off : off+n])
		off += n
		if i < 40 {
			time.Sleep(time.Millisecond)
		}
	}
	for _, s := range all {
		if s.topic != "" {
			m := kmsg.NewPtrMetadataResponse()
			m.SetVersion(12)
			c.recv(s.corr, m)
			if len(m.Topics) == 0 || *m.Topics[0].Topic != s.topic {
				t.Fatalf("reply to %d is %+v, want the echo of %s", s.corr, m, s.topic)
			}
			continue
		}
		p := kmsg.NewPtrProduceResponse()
		p.SetVersion(9)
		c.recv(s.corr, p)
		if got := p.Topics[0].Partitions[0].BaseOffset; got != int64(s.records) {
			t.Fatalf("reply to %d: the handler saw %d record bytes, sent %d", s.corr, got, s.records)
		}
	}
	c.roundTrip(4, "after")
}
