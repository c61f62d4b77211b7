package broker

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestScanProduce: the scan counts the entries of Produce requests at every served version,
// as kmsg encodes them, and refuses truncated or lying frames without reading past them.
func TestScanProduce(t *testing.T) {
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("scan"))
	for v := int16(3); v <= 13; v++ {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		txn := "txn"
		req.TransactionID = &txn
		req.Acks, req.TimeoutMillis = -1, 1000
		for i := 0; i < 3; i++ {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = fmt.Sprintf("topic-%d", i)
			rt.TopicID[0] = byte(i + 1)
			for p := 0; p <= i; p++ {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = int32(p)
				if p%2 == 0 {
					rp.Records = make([]byte, 100*(p+1))
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		frame := formatter.AppendRequest(nil, req, 7)[4:] // without the size prefix
		topics, partitions, ok := scanProduce(v, frame)
		if !ok || topics != 3 || partitions != 6 {
			t.Fatalf("v%d: scan = %d topics, %d partitions, ok %v; want 3, 6, true", v, topics, partitions, ok)
		}
		for cut := 0; cut < len(frame); cut += 7 {
			if _, _, ok := scanProduce(v, frame[:cut]); ok && cut < len(frame)-1 {
				// A prefix may scan only if what is cut is trailing tagged fields.
				if cut < len(frame)-2 {
					t.Fatalf("v%d: a frame cut at %d of %d scanned", v, cut, len(frame))
				}
			}
		}
		if got := requestDecodeCost(0, v, frame); got != 3*produceTopicCost+6*producePartitionCost {
			t.Fatalf("v%d: cost %d", v, got)
		}
	}
	// A partition count far past the bytes left is refused at once.
	lying := []byte{0, 0, 0, 3, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 'x', 0x7f, 0xff, 0xff, 0xff}
	if _, _, ok := scanProduce(3, lying); ok {
		t.Fatal("a lying partition count scanned")
	}
	if got := requestDecodeCost(3, 4, make([]byte, 1000)); got != decodeAmplification*1000 {
		t.Fatalf("metadata cost %d", got)
	}
}

// TestMemoryBoundDecodeAmplification: Produce requests naming hundreds of thousands of
// partitions without records (a frame of a few bytes per partition that decodes, with its
// response, into some 300 bytes each) from several connections at once are charged for what
// they decode into: one at a time past queued.max.request.bytes, so the memory they take does not
// grow with the number of attackers; each is answered, and the broker keeps serving.
func TestMemoryBoundDecodeAmplification(t *testing.T) {
	const (
		conns      = 6
		partitions = 150_000
		budget     = 8 << 20
	)
	b := startBroker(t, map[string]string{
		"socket.request.max.bytes":  strconv.Itoa(4 << 20),
		"queued.max.request.bytes":  strconv.Itoa(budget),
		"auto.create.topics.enable": "false",
	})
	wireCreateTopics(t, b, 7, wireTopic("amp", 1))
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "amp"
	for p := 0; p < partitions; p++ {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(p + 1) // unknown partitions: each answered with an error
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("amp")).AppendRequest(nil, req, 1)
	charge := requestDecodeCost(0, 9, frame[4:])
	if charge <= budget {
		t.Fatalf("charge %d does not pass the budget %d: the test would not test anything", charge, budget)
	}
	req = nil
	rt = kmsg.ProduceRequestTopic{}
	var ws []*wireConn
	for i := 0; i < conns; i++ {
		ws = append(ws, dialWire(t, b.Addr()))
	}
	var decodePeak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			decodePeak.Store(max(decodePeak.Load(), b.server.Stats().DecodeBytes))
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	runtime.GC()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = w.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := (&net.Buffers{frame}).WriteTo(w.conn); err != nil {
				errs <- fmt.Errorf("attacker %d: %w", i, err)
				return
			}
			resp, err := w.readFrame(60 * time.Second)
			if err != nil {
				errs <- fmt.Errorf("attacker %d: %w", i, err)
				return
			}
			if corr := int32(binary.BigEndian.Uint32(resp)); corr != 1 {
				errs <- fmt.Errorf("attacker %d: correlation id %d", i, corr)
				return
			}
			pr := kmsg.NewPtrProduceResponse()
			pr.SetVersion(9)
			if err := pr.ReadFrom(resp[5:]); err != nil || len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != partitions {
				errs <- fmt.Errorf("attacker %d: response: %v", i, err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Past the budget, one charge at a time: never two of these requests decoded at once.
	if p := decodePeak.Load(); p < charge {
		t.Fatalf("decode charges peaked at %d bytes: the requests were not charged (%d each)", p, charge)
	} else if p > charge+budget {
		t.Fatalf("decode charges peaked at %d bytes, more than one request's %d (+ the budget %d)", p, charge, budget)
	}
	t.Logf("%d connections x %d partitions (%d-byte frames, charged %d bytes each): decode charges peaked at %d bytes",
		conns, partitions, len(frame), charge, decodePeak.Load())
	if st := b.server.Stats(); st.DecodeBytes != 0 || st.HeldBytes != 0 {
		t.Fatalf("charges left after every reply: %+v", st)
	}
	// The broker still serves.
	w := dialWire(t, b.Addr())
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(9)
	if _, err := w.conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, md, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.readFrame(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// FuzzScanProduce: the scan never panics nor reads past the frame, and on every frame kmsg
// decodes as a Produce request it counts the topics and partitions kmsg found.
func FuzzScanProduce(f *testing.F) {
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	for _, v := range []int16{3, 8, 9, 12, 13} {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		for p := 0; p < 3; p++ {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = int32(p)
			rp.Records = []byte{1, 2, 3}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		f.Add(v, formatter.AppendRequest(nil, req, 1)[4:])
	}
	f.Fuzz(func(t *testing.T, version int16, frame []byte) {
		topics, partitions, ok := scanProduce(version, frame)
		if !ok || version < 3 || version > 13 {
			return
		}
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(version)
		body, err := skipRequestHeader(version >= 9, frame)
		if err != nil || req.ReadFrom(body) != nil {
			return // the scan is looser than the decoder (it skips what it need not read)
		}
		n := int64(0)
		for _, rt := range req.Topics {
			n += int64(len(rt.Partitions))
		}
		if int64(len(req.Topics)) != topics || n != partitions {
			t.Fatalf("v%d: scan counted %d topics, %d partitions; kmsg decoded %d, %d", version, topics, partitions, len(req.Topics), n)
		}
	})
}

// skipRequestHeader returns the body of a request frame (header v1, or v2 when flexible).
func skipRequestHeader(flexible bool, frame []byte) ([]byte, error) {
	w := wire{b: frame}
	w.skip(8)
	w.string(false)
	if flexible {
		w.tags()
	}
	if w.bad {
		return nil, fmt.Errorf("short header")
	}
	return w.b, nil
}
