package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/record"
)

// vmRSS is the process's resident set size (/proc/self/status VmRSS), 0 if unknown.
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// memPeak samples the heap in use and the RSS until stop is called, and returns the peaks.
type memPeak struct {
	heap, rss, held atomic.Int64
	stop            chan struct{}
	done            chan struct{}
}

func sampleMemory(b *Broker) *memPeak {
	m := &memPeak{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		var ms runtime.MemStats
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			m.heap.Store(max(m.heap.Load(), int64(ms.HeapInuse)))
			m.rss.Store(max(m.rss.Load(), vmRSS()))
			m.held.Store(max(m.held.Load(), b.server.Stats().HeldBytes))
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *memPeak) end() { close(m.stop); <-m.done }

// setCorr rewrites the correlation id of an encoded request frame (size, key, version, corr).
func setCorr(frame []byte, corr int32) { binary.BigEndian.PutUint32(frame[8:], uint32(corr)) }

// TestMemoryBoundUnderPipelinedAttack: connections each pipeline large produces and large
// requests behind a fetch parked on an empty partition (the attack that pinned GiBs: every
// request read is held until the fetch answers). The broker's heap and RSS stay within
// queued.max.request.bytes plus a margin while it lasts, the bytes held never pass the bound,
// another client is served meanwhile, and afterwards every request is answered correctly.
func TestMemoryBoundUnderPipelinedAttack(t *testing.T) {
	const (
		conns       = 8
		produces    = 16
		batchBytes  = 4 << 20
		bigRequests = 2        // ApiVersions with a 3 MiB client software name: held until written
		bigBytes    = 3 << 20  //
		budget      = 24 << 20 // queued.max.request.bytes
		park        = 4 * time.Second
	)
	b := startBroker(t, map[string]string{
		"socket.request.max.bytes":  strconv.Itoa(5 << 20),
		"message.max.bytes":         strconv.Itoa(5 << 20),
		"queued.max.request.bytes":  strconv.Itoa(budget),
		"auto.create.topics.enable": "false",
	})
	wireCreateTopics(t, b, 7, wireTopic("attack", conns), wireTopic("empty", 1), wireTopic("other", 1))

	batch := record.Build(nil, record.BuildOptions{ProducerID: -1}, []record.Record{{Value: bytes.Repeat([]byte("x"), batchBytes-200)}})
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("attacker"))
	// The frames are encoded once and shared (read-only) by the attackers: each write sends
	// its own copy of the 12-byte head (size, key, version, correlation id) and the shared tail,
	// so the test's own memory does not hide the broker's.
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(11)
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes, fetch.SessionEpoch = -1, int32(park/time.Millisecond), 1<<20, 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "empty"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LogStartOffset = 1<<20, -1, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	produce := wireProduce(wirePart{topic: "attack", records: batch})
	produce.Acks = 1
	produce.SetVersion(9)
	big := kmsg.NewPtrApiVersionsRequest()
	big.SetVersion(3)
	big.ClientSoftwareName = strings.Repeat("a", bigBytes)
	big.ClientSoftwareVersion = "1"
	fetchFrame, produceFrame, bigFrame := formatter.AppendRequest(nil, fetch, 0), formatter.AppendRequest(nil, produce, 0), formatter.AppendRequest(nil, big, 0)
	var ws []*wireConn
	for i := 0; i < conns; i++ {
		ws = append(ws, dialWire(t, b.Addr()))
	}
	bystander := newKgo(t, b.Addr(), kgo.DefaultProduceTopic("other"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := bystander.ProduceSync(context.Background(), kgo.StringRecord("warm-up")).FirstErr(); err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseHeap, baseRSS := int64(ms.HeapInuse), vmRSS()
	peak := sampleMemory(b)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2*conns)
	for i, w := range ws {
		wg.Add(2)
		go func() { // the attacker: everything pipelined, nothing waits for an answer
			defer wg.Done()
			corr := int32(0)
			var head [12]byte
			send := func(frame []byte) error {
				corr++
				copy(head[:], frame)
				setCorr(head[:], corr)
				_ = w.conn.SetWriteDeadline(time.Now().Add(15 * time.Second))
				bufs := net.Buffers{head[:], frame[12:]}
				_, err := bufs.WriteTo(w.conn)
				return err
			}
			err := send(fetchFrame)
			for j := 0; j < produces && err == nil; j++ {
				err = send(produceFrame)
			}
			for j := 0; j < bigRequests && err == nil; j++ {
				err = send(bigFrame)
			}
			if err != nil {
				errs <- fmt.Errorf("attacker %d: write: %w", i, err)
			}
		}()
		go func() { // its answers, in order
			defer wg.Done()
			check := func(corr int32, resp kmsg.Response) error {
				frame, err := w.readFrame(15 * time.Second)
				if err != nil {
					return fmt.Errorf("response %d: %w", corr, err)
				}
				if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
					return fmt.Errorf("correlation id %d, want %d", got, corr)
				}
				body := frame[4:]
				if resp.IsFlexible() && resp.Key() != 18 {
					body = body[1:]
				}
				return resp.ReadFrom(body)
			}
			corr := int32(1)
			fr := kmsg.NewPtrFetchResponse()
			fr.SetVersion(11)
			if err := check(corr, fr); err != nil || fr.ErrorCode != 0 || len(fr.Topics) != 1 || fr.Topics[0].Partitions[0].ErrorCode != 0 {
				errs <- fmt.Errorf("attacker %d: fetch: %v %+v", i, err, fr)
				return
			}
			if waited := time.Since(start); waited < park-time.Second {
				errs <- fmt.Errorf("attacker %d: the fetch was answered after %v, before its max wait", i, waited)
				return
			}
			last := int64(-1)
			for j := 0; j < produces; j++ {
				corr++
				pr := kmsg.NewPtrProduceResponse()
				pr.SetVersion(9)
				if err := check(corr, pr); err != nil || pr.Topics[0].Partitions[0].ErrorCode != 0 || pr.Topics[0].Partitions[0].BaseOffset <= last {
					errs <- fmt.Errorf("attacker %d: produce %d: %v %+v", i, j, err, pr)
					return
				}
				last = pr.Topics[0].Partitions[0].BaseOffset
			}
			for j := 0; j < bigRequests; j++ {
				corr++
				av := kmsg.NewPtrApiVersionsResponse()
				av.SetVersion(3)
				if err := check(corr, av); err != nil || av.ErrorCode != 0 || len(av.ApiKeys) == 0 {
					errs <- fmt.Errorf("attacker %d: ApiVersions %d: %v", i, j, err)
					return
				}
			}
		}()
	}
	// Meanwhile another client is served: its produce is acknowledged (durably) while every
	// attacker waits behind its parked fetch.
	time.Sleep(park / 4)
	ctx, cancel := context.WithTimeout(context.Background(), park/2)
	t0 := time.Now()
	err := bystander.ProduceSync(ctx, kgo.StringRecord("served meanwhile")).FirstErr()
	cancel()
	if err != nil {
		t.Fatalf("another client was not served during the attack: %v", err)
	}
	served := time.Since(t0)
	st := b.server.Stats()
	wg.Wait()
	took := time.Since(start)
	peak.end()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	heap, rss := peak.heap.Load()-baseHeap, peak.rss.Load()-baseRSS
	t.Logf("heap in use before the attack: %.1f MiB", float64(baseHeap)/(1<<20))
	t.Logf("%d connections x (%d produces of %d MiB + %d requests of %d MiB) behind a %v parked fetch, queued.max.request.bytes %d MiB: peak held %.1f MiB, heap in use +%.1f MiB, RSS +%.1f MiB; during the attack %d connections muted, another client's produce took %v; all answered in %v",
		conns, produces, batchBytes>>20, bigRequests, bigBytes>>20, park, budget>>20,
		float64(peak.held.Load())/(1<<20), float64(heap)/(1<<20), float64(rss)/(1<<20), st.Muted, served.Round(time.Millisecond), took.Round(time.Millisecond))
	if held := peak.held.Load(); held > budget+budget/16 {
		t.Errorf("held %d bytes, over queued.max.request.bytes %d", held, budget)
	}
	// The frames live are the bytes held, bounded by the budget (and its small-frame reserve),
	// plus the idle large frames pooled (at most a quarter of the budget). The garbage
	// collector lets the heap grow to twice what was live at its last cycle (GOGC=100): that
	// much again, plus the live heap of the test process before the attack; and a margin for
	// the clients' own buffers.
	if raceEnabled {
		rss = 0 // the race detector's shadow memory is in the RSS
	}
	if limit := 2*int64(budget+budget/16+budget/4) + baseHeap + 16<<20; heap > limit || rss > limit {
		t.Errorf("heap in use grew by %d bytes and RSS by %d during the attack; bound %d", heap, rss, limit)
	}
	// A reply's frame is released just after the reply is written: wait for the last ones.
	end := b.server.Stats()
	for deadline := time.Now().Add(2 * time.Second); (end.HeldBytes != 0 || end.Muted != 0) && time.Now().Before(deadline); end = b.server.Stats() {
		time.Sleep(5 * time.Millisecond)
	}
	if end.MutedTotal == 0 || end.HeldBytes != 0 || end.Muted != 0 {
		t.Errorf("no connection was muted during the attack, or bytes are still held after it: %+v", end)
	}
}

// TestConnectionLimits: max.connections.per.ip (127.0.0.1 is one address) closes a connection
// over the limit at once, max.connections.per.ip.overrides (a hostname, resolved at start)
// raises it for an address, and max.connections makes the listener stop accepting until a
// connection closes (Kafka's semantics); the refusals show in the metrics.
func TestConnectionLimits(t *testing.T) {
	apiVersions := func(w *wireConn) {
		t.Helper()
		if av := wireRoundTrip[*kmsg.ApiVersionsResponse](w, kmsg.NewPtrApiVersionsRequest(), 3); av.ErrorCode != 0 {
			t.Fatalf("ApiVersions: %+v", av)
		}
	}
	t.Run("per-ip", func(t *testing.T) {
		b := startBroker(t, map[string]string{"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "localhost:3", "metrics.listener": "127.0.0.1:0"})
		var open []*wireConn
		for i := 0; i < 3; i++ {
			w := dialWire(t, b.Addr())
			apiVersions(w)
			open = append(open, w)
		}
		over := dialWire(t, b.Addr())
		over.send(kmsg.NewPtrApiVersionsRequest(), 3)
		over.expectClosed()
		if v := scrape(t, b).must(t, "weir_connections_refused_total", "limit", "max.connections.per.ip"); v != 1 {
			t.Fatalf("weir_connections_refused_total{limit=max.connections.per.ip} = %v, want 1", v)
		}
		open[0].conn.Close()
		deadline := time.Now().Add(5 * time.Second)
		for b.server.ConnectionCount() > 2 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		apiVersions(dialWire(t, b.Addr()))
		apiVersions(open[1])
	})
	t.Run("per-ip zero", func(t *testing.T) { // 0: only the addresses in the overrides
		b := startBroker(t, map[string]string{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:1"})
		apiVersions(dialWire(t, b.Addr()))
		over := dialWire(t, b.Addr())
		over.send(kmsg.NewPtrApiVersionsRequest(), 3)
		over.expectClosed()
	})
	t.Run("max.connections", func(t *testing.T) {
		b := startBroker(t, map[string]string{"max.connections": "2"})
		first, second := dialWire(t, b.Addr()), dialWire(t, b.Addr())
		apiVersions(first)
		apiVersions(second)
		waiting := dialWire(t, b.Addr())
		corr := waiting.send(kmsg.NewPtrApiVersionsRequest(), 3)
		if _, err := waiting.readFrame(300 * time.Millisecond); err == nil {
			t.Fatal("a connection over max.connections was served")
		}
		first.conn.Close()
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(3)
		waiting.recv(corr, resp)
		apiVersions(second)
	})
	t.Run("creation rate", func(t *testing.T) {
		const rate, n = 10, 15
		b := startBroker(t, map[string]string{"max.connection.creation.rate": strconv.Itoa(rate), "metrics.listener": "127.0.0.1:0"})
		start := time.Now()
		for i := 0; i < n; i++ {
			w := dialWire(t, b.Addr())
			apiVersions(w)
			w.conn.Close()
		}
		if took := time.Since(start); took < (n-rate-1)*time.Second/rate {
			t.Fatalf("%d connections in %v at max.connection.creation.rate %d", n, took, rate)
		}
		if v := scrape(t, b).must(t, "weir_connection_accepts_throttled_total"); v == 0 {
			t.Fatal("no accept throttled")
		}
	})
	t.Run("bad values", func(t *testing.T) {
		cfg, err := NewConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir(), "queued.max.request.bytes": "1000"})
		if err == nil {
			_, err = New(cfg)
		}
		if err == nil || !strings.Contains(err.Error(), "queued.max.request.bytes") || !strings.Contains(err.Error(), "socket.request.max.bytes") {
			t.Errorf("queued.max.request.bytes below socket.request.max.bytes: %v", err)
		}
		for k, v := range map[string]string{"max.connections.per.ip.overrides": "127.0.0.1:x", "queued.max.requests": "0",
			"queued.max.request.bytes": "-2", "listener.name.plaintext.max.connections": "-1",
			"max.connection.creation.rate": "-1", "listener.name.plaintext.max.connection.creation.rate": "x",
			"max.connections.per.ip": "0"} {
			cfg, err := NewConfig(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir(), k: v})
			if err == nil {
				_, err = New(cfg)
			}
			if err == nil || !strings.Contains(err.Error(), k) {
				t.Errorf("%s=%s: %v, want an error naming the key", k, v, err)
			}
		}
	})
}
