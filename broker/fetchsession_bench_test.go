package broker

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio"
)

// processCPU is the process's user + system CPU time in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkFetchIdle measures the broker's cost of one idle consumer fetch (nothing new in any
// partition) over 1 to 10,000 partitions: the request's decode, as netio does it, and the
// handler. "sessionless" sends every partition in every request (epoch -1), as librdkafka,
// sarama and kafka-go do; "session" behaves as the Java client and franz-go do: a full fetch
// (epoch 0), then, as long as the broker answered a session id, incremental fetches that name
// no partition. "nowait" fetches have max_wait_ms 0 (answered at once); "longpoll" ones
// min_bytes 1 and max_wait_ms 1, as an idle consumer's: read, park on every partition, expire,
// read again and answer (the wait itself costs no CPU; cpu-ns/op counts the process's CPU).
// Run with -benchmem: an incremental fetch that changes nothing allocates nothing per partition.
func BenchmarkFetchIdle(b *testing.B) {
	br := startBroker(b, nil)
	for _, n := range []int32{1, 16, 1000, 10000} {
		topic := fmt.Sprintf("idle%d", n)
		t, err := br.createTopic(topic, n, 1, nil, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, wait := range []string{"nowait", "longpoll"} {
			for _, mode := range []string{"sessionless", "session"} {
				b.Run(fmt.Sprintf("partitions=%d/%s/%s", n, wait, mode), func(b *testing.B) {
					benchFetchIdle(b, br, t.ID, n, mode == "session", wait == "longpoll")
				})
			}
		}
	}
}

func benchFetchIdle(b *testing.B, br *Broker, id [16]byte, n int32, session, longPoll bool) {
	const version = 13
	full := kmsg.NewPtrFetchRequest()
	full.Version = version
	full.MaxBytes = 1 << 20
	if longPoll {
		full.MinBytes, full.MaxWaitMillis = 1, 1
	}
	if session {
		full.SessionEpoch = 0
	}
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = id
	for p := range n {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = p
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
	}
	full.Topics = append(full.Topics, ft)
	fullBytes := full.AppendTo(nil)
	// The session epoch is a fixed int32 after replica id, max wait, min bytes, max bytes,
	// isolation level and session id (v13).
	const sessionIDAt, epochAt = 17, 21
	var incBytes []byte
	var sessionID, epoch int32
	fetch := func(buf []byte) int32 {
		req := kmsg.NewPtrFetchRequest()
		req.Version = version
		if err := req.ReadFrom(buf); err != nil {
			b.Fatal(err)
		}
		rep := handleFetch(br, &netio.Request{Key: 1, Version: version, Body: req})
		if rep.Deferred != nil {
			rep = rep.Deferred()
		}
		if rep.Body == nil {
			b.Fatal("no body")
		}
		id := int32(0)
		if bs := rep.Body.Bytes(); len(bs) >= 10 {
			if ec := int16(binary.BigEndian.Uint16(bs[4:])); ec != 0 {
				b.Fatalf("error code %d", ec)
			}
			id = int32(binary.BigEndian.Uint32(bs[6:]))
		}
		rep.Body.Release()
		return id
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	defer func() {
		// The process's CPU time (user + system, every goroutine) per fetch: on a shared
		// machine wall time per op also counts waiting for a CPU.
		b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	}()
	for range b.N {
		if sessionID == 0 {
			sessionID = fetch(fullBytes)
			if sessionID != 0 {
				inc := kmsg.NewPtrFetchRequest()
				inc.Version = version
				inc.MaxBytes = 1 << 20
				inc.SessionID = sessionID
				inc.SessionEpoch = 1
				inc.MinBytes, inc.MaxWaitMillis = full.MinBytes, full.MaxWaitMillis
				incBytes = inc.AppendTo(nil)
				epoch = 1
			}
			continue
		}
		binary.BigEndian.PutUint32(incBytes[sessionIDAt:], uint32(sessionID))
		binary.BigEndian.PutUint32(incBytes[epochAt:], uint32(epoch))
		if fetch(incBytes) != sessionID {
			b.Fatal("session lost")
		}
		epoch++
	}
}
