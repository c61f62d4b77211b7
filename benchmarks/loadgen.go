package benchmarks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Workload is one load-generator run, modelled on the OpenMessaging Benchmark's workload files.
type Workload struct {
	Name          string        `json:"name,omitempty"`
	Topic         string        `json:"topic"`
	Topics        []string      `json:"topics,omitempty"` // with more than one: the topics produced to (and consumed from), round-robin
	Partitions    int           `json:"partitions"`       // per topic
	MessageSize   int           `json:"message_size"`
	Producers     int           `json:"producers"`
	Rate          float64       `json:"rate"` // messages/s over all producers; 0 = as fast as possible
	Duration      time.Duration `json:"duration_ns"`
	Warmup        time.Duration `json:"warmup_ns"`
	MaxMessages   int64         `json:"max_messages"` // cap on messages sent (warm-up included); 0 = none
	Acks          string        `json:"acks"`
	Compression   string        `json:"compression"`
	BatchMaxBytes int32         `json:"batch_max_bytes"`
	Linger        time.Duration `json:"linger_ns"`
	MaxBuffered   int           `json:"max_buffered_records"` // per producer: the in-flight window at max rate
	E2E           bool          `json:"e2e"`                  // also consume and measure end-to-end latency
	NullSink      bool          `json:"null_sink,omitempty"`  // no broker: records go to a sink that acknowledges at once
}

// TopicNames are the topics the workload produces to: Topics, or Topic alone.
func (w *Workload) TopicNames() []string {
	if len(w.Topics) > 0 {
		return w.Topics
	}
	return []string{w.Topic}
}

// MultiTopicNames names n topics after base: base itself when n <= 1, else base-0 .. base-(n-1)
// (as the OpenMessaging Benchmark's multi-topic workloads do).
func MultiTopicNames(base string, n int) []string {
	if n <= 1 {
		return []string{base}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", base, i)
	}
	return names
}

// producer is what the generator hands records to: a *kgo.Client, or a nullSink.
type producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	Flush(ctx context.Context) error
	Close()
}

// nullSink acknowledges every record at once, on the caller's goroutine, without a broker: with
// it the generator's own pipeline (rate pacing, record building, histogram recording) is all that
// runs, which measures the generator's ceiling.
type nullSink struct{}

func (nullSink) Produce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	promise(r, nil)
}
func (nullSink) Flush(context.Context) error { return nil }
func (nullSink) Close()                      {}

// ProducerOpts are the franz-go options of one load-generator producer.
func (w *Workload) ProducerOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(w.Topic),
		kgo.ProducerLinger(w.Linger),
		kgo.MaxBufferedRecords(max(w.MaxBuffered, 1)),
	}
	if w.BatchMaxBytes > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(w.BatchMaxBytes))
	}
	switch w.Acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, fmt.Errorf("acks must be all, 1 or 0, not %q", w.Acks)
	}
	var codec kgo.CompressionCodec
	switch w.Compression {
	case "", "none":
		codec = kgo.NoCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	default:
		return nil, fmt.Errorf("compression must be none, gzip, snappy, lz4 or zstd, not %q", w.Compression)
	}
	return append(opts, kgo.ProducerBatchCompression(codec)), nil
}

// LoadResult is what one run measured, over the measurement window (after the warm-up).
type LoadResult struct {
	Sent, Acked, Failed int64 // every message, warm-up included
	Messages            int64 // acknowledged messages intended after the warm-up
	Bytes               int64 // their value bytes
	Measured            time.Duration
	Publish             *hdrhistogram.Histogram // µs, from intended send time to acknowledgement
	E2E                 *hdrhistogram.Histogram // µs, from intended send time to consumption; nil unless Workload.E2E
	Consumed            int64                   // messages consumed (warm-up included), when E2E
	FirstError          error
}

// lockedHist is a histogram shared by promise callbacks and the progress reporter.
type lockedHist struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
	n  int64 // values since the last snapshot, for the progress line
}

func (l *lockedHist) record(d time.Duration) {
	l.mu.Lock()
	RecordMicros(l.h, d)
	l.n++
	l.mu.Unlock()
}

func (l *lockedHist) p99() (float64, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(l.h.ValueAtQuantile(99)) / 1000, l.h.TotalCount()
}

// RunLoad produces w's messages through w.Producers franz-go clients made by newClient (which gets
// the producer options) and, with w.E2E, consumes them back through consumers (clients already
// assigned the topic's partitions, between them, from their current end offsets; none otherwise). At a fixed
// rate every message has an intended send time, start + i/rate, and its publish latency runs
// from that time to its acknowledgement, so a stalled broker is charged for every message it
// delayed (no coordinated omission). With several topics (w.Topics) each producer sends its
// messages to the topics in turn, and kgo's partitioner spreads them over each topic's
// partitions. With w.NullSink no client is made (newClient may be nil): records are acknowledged
// as soon as they are handed over. At max rate (rate 0) the intended time is the moment the
// generator gets to the message: sends block when MaxBuffered records are in flight. A progress
// line goes to progress every second (nil: none).
func RunLoad(ctx context.Context, w Workload, newClient func(...kgo.Opt) (*kgo.Client, error), consumers []*kgo.Client, progress io.Writer) (*LoadResult, error) {
	if w.Producers < 1 {
		return nil, errors.New("need at least one producer")
	}
	if w.Duration <= 0 {
		return nil, errors.New("duration must be positive")
	}
	if w.E2E && w.MessageSize < 8 {
		return nil, errors.New("e2e needs --message-size >= 8 (the send time travels in the value)")
	}
	if w.NullSink && w.E2E {
		return nil, errors.New("the null sink has no consumer: no e2e")
	}
	opts, err := w.ProducerOpts()
	if err != nil {
		return nil, err
	}
	topics := w.TopicNames()
	clients := make([]producer, w.Producers)
	for i := range clients {
		if w.NullSink {
			clients[i] = nullSink{}
			continue
		}
		if clients[i], err = newClient(opts...); err != nil {
			for _, c := range clients[:i] {
				c.Close()
			}
			return nil, err
		}
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()

	payload := make([]byte, w.MessageSize)
	rng := rand.New(rand.NewPCG(1, uint64(w.MessageSize)))
	for i := range payload {
		payload[i] = byte(rng.Uint32())
	}

	res := &LoadResult{}
	pub := &lockedHist{h: NewMicrosHistogram()}
	var e2e *lockedHist
	var sent, acked, failed, measured, measuredBytes, consumed atomic.Int64
	var errOnce sync.Once
	var firstErr error

	start := time.Now()
	warmEnd := start.Add(w.Warmup)
	end := warmEnd.Add(w.Duration)
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()

	// The consumer: end-to-end latency from the intended send time carried in the value.
	var consumerWG sync.WaitGroup
	stopConsume := make(chan struct{})
	if w.E2E && len(consumers) == 0 {
		return nil, errors.New("e2e needs a consumer")
	}
	if w.E2E {
		e2e = &lockedHist{h: NewMicrosHistogram()}
	} else {
		consumers = nil
	}
	for _, consumer := range consumers {
		consumerWG.Add(1)
		go func() {
			defer consumerWG.Done()
			for {
				select {
				case <-stopConsume:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				fs := consumer.PollFetches(pctx)
				pcancel()
				now := time.Now()
				fs.EachError(func(t string, p int32, err error) {
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						errOnce.Do(func() { firstErr = fmt.Errorf("consume %s[%d]: %w", t, p, err) })
					}
				})
				fs.EachRecord(func(r *kgo.Record) {
					consumed.Add(1)
					if len(r.Value) < 8 {
						return
					}
					intended := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
					if !intended.Before(warmEnd) {
						e2e.record(now.Sub(intended))
					}
				})
				if ctx.Err() != nil {
					return
				}
			}
		}()
	}

	// Progress: one line a second.
	progDone := make(chan struct{})
	stopProg := make(chan struct{})
	go func() {
		defer close(progDone)
		if progress == nil {
			<-stopProg
			return
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		lastAcked, lastT := int64(0), start
		for {
			select {
			case <-stopProg:
				return
			case now := <-t.C:
				a := acked.Load()
				rate := float64(a-lastAcked) / now.Sub(lastT).Seconds()
				phase := "warm-up"
				if !lastT.Before(warmEnd) {
					phase = "measure"
				}
				lastAcked, lastT = a, now
				p99, n := pub.p99()
				line := fmt.Sprintf("[%4.0fs %s] acked %8.0f msg/s %8.2f MB/s  publish p99 %8.3f ms (n=%d)",
					now.Sub(start).Seconds(), phase, rate, rate*float64(w.MessageSize)/1e6, p99, n)
				if e2e != nil {
					ep99, en := e2e.p99()
					line += fmt.Sprintf("  e2e p99 %8.3f ms (n=%d)", ep99, en)
				}
				fmt.Fprintln(progress, line)
			}
		}
	}()

	perRate := w.Rate / float64(w.Producers)
	var msgCap int64 = -1
	if w.MaxMessages > 0 {
		msgCap = w.MaxMessages
	}
	var budget atomic.Int64
	budget.Store(msgCap)
	take := func() bool {
		if msgCap < 0 {
			return true
		}
		return budget.Add(-1) >= 0
	}
	recPool := sync.Pool{New: func() any { return new(kgo.Record) }}
	var wg sync.WaitGroup
	for pi, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Stagger producers so their schedules interleave.
			offset := time.Duration(0)
			if perRate > 0 {
				offset = time.Duration(float64(time.Second) / w.Rate * float64(pi))
			}
			for i := int64(0); runCtx.Err() == nil; i++ {
				var intended time.Time
				if perRate > 0 {
					intended = start.Add(offset + time.Duration(float64(i)/perRate*float64(time.Second)))
					if !intended.Before(end) {
						return
					}
					if d := time.Until(intended); d > 0 {
						// Sleeping late is charged to the message: latency counts from intended.
						t := time.NewTimer(d)
						select {
						case <-t.C:
						case <-runCtx.Done():
							t.Stop()
							return
						}
					}
				} else {
					intended = time.Now()
				}
				if !take() {
					return
				}
				value := payload
				if w.E2E {
					value = make([]byte, len(payload))
					copy(value, payload)
					binary.BigEndian.PutUint64(value, uint64(intended.UnixNano()))
				}
				inWindow := !intended.Before(warmEnd)
				rec := recPool.Get().(*kgo.Record)
				rec.Value, rec.Timestamp = value, intended
				if len(topics) > 1 {
					rec.Topic = topics[(int(i)+pi)%len(topics)]
				}
				sent.Add(1)
				// ctx (not runCtx): a send blocked on a full buffer at the deadline still completes.
				cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
					n := len(r.Value)
					// kgo is done with the record once it calls the promise: reuse it, which
					// spares the generator an allocation (and GC work) per message.
					*r = kgo.Record{}
					recPool.Put(r)
					if err != nil {
						failed.Add(1)
						errOnce.Do(func() { firstErr = err })
						return
					}
					acked.Add(1)
					if inWindow {
						pub.record(time.Since(intended))
						measured.Add(1)
						measuredBytes.Add(int64(n))
					}
				})
			}
		}()
	}
	wg.Wait()
	sendEnd := time.Now()
	flushCtx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	for _, cl := range clients {
		if err := cl.Flush(flushCtx); err != nil {
			errOnce.Do(func() { firstErr = fmt.Errorf("flush: %w", err) })
		}
	}
	fcancel()
	if w.E2E {
		// Wait (bounded) until the consumer has seen every acknowledged message.
		deadline := time.Now().Add(10 * time.Second)
		for consumed.Load() < acked.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	close(stopConsume)
	consumerWG.Wait()
	close(stopProg)
	<-progDone

	res.Sent, res.Acked, res.Failed = sent.Load(), acked.Load(), failed.Load()
	res.Messages, res.Bytes = measured.Load(), measuredBytes.Load()
	res.Measured = sendEnd.Sub(warmEnd)
	if res.Measured <= 0 {
		res.Measured = sendEnd.Sub(start)
	}
	res.Publish = pub.h
	if e2e != nil {
		res.E2E = e2e.h
		res.Consumed = consumed.Load()
	}
	res.FirstError = firstErr
	return res, nil
}
