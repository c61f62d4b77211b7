package engine_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-mq/weir/benchmarks"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/segment"
)

// The engine suites measure the partition log against the raw device in the same run: each grid
// measures the same I/O to a plain file in the same directory (see benchmarks.Dir and
// WEIR_BENCH_DIR), interleaved or as a sibling, so the ratio of the two is what a result means.
//
//	BenchmarkAppend/<record size>/batch<n>/pagecache         (raw pwrite interleaved: raw-MB/s, vs-raw-%)
//	BenchmarkDurableAppend/1KiB/batch1/{raw-fdatasync,partitions=P/appenders=A}
//	BenchmarkOpenLog/segments=1000/clean

// Rolling and retention for the long-running append benchmarks: disk use stays below
// benchRetainFiles*benchSegmentBytes, and the raw baseline rotates its files the same way.
const (
	benchSegmentBytes = 128 << 20
	benchRetainFiles  = 4
)

// pageCacheConfig acknowledges from the page cache (Kafka's default flush policy): the flusher
// syncs only on roll. Batches up to 4 MiB are accepted (16 KiB x 100 exceeds Kafka's default
// message.max.bytes).
func pageCacheConfig() engine.Config {
	cfg := engine.DefaultConfig()
	cfg.FlushIntervalMessages = math.MaxInt64
	cfg.SegmentBytes = benchSegmentBytes
	cfg.RetentionBytes = benchRetainFiles * benchSegmentBytes
	cfg.RetentionMs = -1
	cfg.MaxMessageBytes = 4 << 20
	return cfg
}

func openBenchLog(b *testing.B, dir string, partition int, cfg engine.Config) *engine.Log {
	return openBenchLogIn(b, nil, dir, partition, cfg)
}

// openBenchLogIn opens a bench log in log dir ld (nil: a log dir of its own); the partitions of a
// broker's log dir share one (engine.Manager).
func openBenchLogIn(b *testing.B, ld *engine.LogDir, dir string, partition int, cfg engine.Config) *engine.Log {
	b.Helper()
	l, err := engine.OpenLog(engine.OpenOptions{
		LogDir:    ld,
		Dir:       filepath.Join(dir, fmt.Sprintf("bench-%d", partition)),
		Topic:     "bench",
		Partition: int32(partition),
		Config:    cfg,
	})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkAppend is page-cache append throughput through engine.Log, paired with the raw device:
// the loop alternates chunks of about 4 MiB appended to the log (timed: ns/op, MB/s, allocs/op)
// with the same bytes pwritten to plain files in the same directory (raw-MB/s), so both see the
// same machine load and writeback state, and vs-raw-% is their ratio (log MB/s over raw MB/s). The batch is built once and
// appended again and again (Append rewrites its baseOffset in place). The append path must not
// allocate: -benchmem shows 0 allocs/op (a roll every 128 MiB allocates a little, which rounds to
// 0 per op).
func BenchmarkAppend(b *testing.B) {
	for _, size := range benchmarks.RecordSizes {
		for _, records := range []int{1, 100} {
			batch := benchmarks.Batch(records, size.Bytes)
			name := fmt.Sprintf("%s/batch%d/pagecache", size.Name, records)
			b.Run(name, func(b *testing.B) { benchPageCacheAppend(b, batch) })
		}
	}
}

func benchPageCacheAppend(b *testing.B, batch []byte) {
	dir := benchmarks.Dir(b)
	l := openBenchLog(b, dir, 0, pageCacheConfig())
	defer l.Close()
	rawDir := filepath.Join(dir, "raw")
	if err := os.Mkdir(rawDir, 0o755); err != nil {
		b.Fatal(err)
	}
	// The strict baseline: pwrite only, rotated and deleted as the log's retention keeps segments
	// (active + 3 full), no fdatasync. The log's own roll-time seal (a background fdatasync of the
	// rolled segment) is counted against the log.
	raw, err := benchmarks.NewSequentialWriter(rawDir, benchSegmentBytes, benchRetainFiles, false)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	batch = append([]byte(nil), batch...)
	chunk := max(1, (4<<20)/len(batch))
	var appendTime, rawTime time.Duration
	segmentBase := int64(-1)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(chunk, b.N-done)
		t0 := time.Now()
		for range n {
			info, err := l.Append(batch)
			if err != nil {
				b.Fatal(err)
			}
			if info.SegmentBase != segmentBase {
				// A roll: apply retention, as the manager's retention loop would, to bound disk use.
				segmentBase = info.SegmentBase
				if _, err := l.DeleteExpiredSegments(); err != nil {
					b.Fatal(err)
				}
			}
		}
		appendTime += time.Since(t0)
		b.StopTimer()
		t1 := time.Now()
		for range n {
			if err := raw.Write(batch); err != nil {
				b.Fatal(err)
			}
		}
		rawTime += time.Since(t1)
		b.StartTimer()
		done += n
	}
	b.StopTimer()
	mb := float64(b.N) * float64(len(batch)) / 1e6
	b.ReportMetric(mb/rawTime.Seconds(), "raw-MB/s")
	b.ReportMetric(100*rawTime.Seconds()/appendTime.Seconds(), "vs-raw-%")
}

// fsyncCounter is the engine.Observer of the durable benchmarks.
type fsyncCounter struct {
	cycles    atomic.Int64
	appends   atomic.Int64
	syncNanos atomic.Int64
}

func (c *fsyncCounter) ObserveFsync(d time.Duration, appends int) {
	c.cycles.Add(1)
	c.appends.Add(int64(appends))
	c.syncNanos.Add(int64(d))
}

func (c *fsyncCounter) reset() {
	c.cycles.Store(0)
	c.appends.Store(0)
	c.syncNanos.Store(0)
}

// BenchmarkDurableAppend is acks-after-fdatasync appends with group commit (weir's default
// durable config): A appenders per partition, each doing Append then AwaitDurable, b.N appends in
// all split among them. Metrics: appends/s, fsyncs/s (flush cycles, counted by an engine.Observer),
// appends/fsync (the group-commit batch), syncs-in-flight (sum of sync time over wall time: above
// 1 means partitions' flushers synced in parallel) and append-to-durable latency p50/p99/p99.9
// (HdrHistogram). The raw-fdatasync sibling is one writer doing a write of the same size and an
// fdatasync of a plain file; its latency metrics time the fdatasync alone. Each durable run also
// takes a short raw fdatasync sample right after its timed section (raw-p99-us) and reports its
// p99 over that one (p99-vs-raw-x).
func BenchmarkDurableAppend(b *testing.B) {
	batch := benchmarks.Batch(1, 1<<10)
	b.Run("1KiB/batch1/raw-fdatasync", func(b *testing.B) { benchRawFdatasync(b, batch) })
	for _, shape := range []struct{ partitions, appenders int }{
		{1, 1}, {1, 4}, {1, 16}, {1, 64}, {1, 256}, {16, 4},
	} {
		name := fmt.Sprintf("1KiB/batch1/partitions=%d/appenders=%d", shape.partitions, shape.appenders)
		b.Run(name, func(b *testing.B) { benchDurable(b, batch, shape.partitions, shape.appenders, false) })
	}
	// preallocate: the .log is fallocated to segment.bytes, so appends never change its size and
	// an fdatasync has no size to commit.
	b.Run("1KiB/batch1/partitions=1/appenders=1/preallocate", func(b *testing.B) { benchDurable(b, batch, 1, 1, true) })
	b.Run("1KiB/batch1/partitions=1/appenders=16/preallocate", func(b *testing.B) { benchDurable(b, batch, 1, 16, true) })
}

// BenchmarkDurableRequests is the durable path as a produce request sees it: C clients, each
// appending one 1 KiB batch to every one of P partitions of one log dir (as a request over P
// partitions does, under an engine.FlushHold as the broker's produce handler takes) and then
// waiting until all are durable, in a loop; b.N requests in all. Metrics: requests/s, fsyncs/s
// (flush cycles of a partition, counted by the engine.Observer), fsyncs/request and the request's
// append-to-durable latency (p50/p99/p99.9).
func BenchmarkDurableRequests(b *testing.B) {
	batch := benchmarks.Batch(1, 1<<10)
	for _, shape := range []struct{ partitions, clients int }{{6, 1}, {6, 4}, {16, 4}, {64, 1}} {
		b.Run(fmt.Sprintf("1KiB/partitions=%d/clients=%d", shape.partitions, shape.clients), func(b *testing.B) {
			benchDurableRequests(b, batch, shape.partitions, shape.clients)
		})
	}
}

func benchDurableRequests(b *testing.B, batch []byte, partitions, clients int) {
	dir := benchmarks.Dir(b)
	counter := &fsyncCounter{}
	cfg := engine.DefaultConfig()
	cfg.Observer = counter
	ld := engine.NewLogDir(dir)
	logs := make([]*engine.Log, partitions)
	for p := range logs {
		logs[p] = openBenchLogIn(b, ld, dir, p, cfg)
	}
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	lat := benchmarks.NewLatencies(clients, b.N/clients+1)
	b.SetBytes(int64(len(batch) * partitions))
	b.ReportAllocs()
	counter.reset()
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		n := b.N / clients
		if c < b.N%clients {
			n++
		}
		wg.Go(func() {
			batches := make([][]byte, partitions) // Append rewrites the header: one batch per partition
			for i := range batches {
				batches[i] = append([]byte(nil), batch...)
			}
			ends := make([]int64, partitions)
			for range n {
				t0 := time.Now()
				if !appendRequest(b, logs, batches, ends) {
					return
				}
				for p, l := range logs {
					if err := l.AwaitDurable(ends[p]); err != nil {
						b.Error(err)
						return
					}
				}
				lat.Record(c, time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cycles := counter.cycles.Load()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "requests/s")
	b.ReportMetric(float64(cycles)/elapsed.Seconds(), "fsyncs/s")
	b.ReportMetric(float64(cycles)/float64(b.N), "fsyncs/request")
	benchmarks.ReportLatency(b, lat.Histogram(), "")
}

// appendRequest appends one batch to every log, as one produce request does.
func appendRequest(b *testing.B, logs []*engine.Log, batches [][]byte, ends []int64) bool {
	var hold engine.FlushHold
	defer hold.Release()
	for p, l := range logs {
		hold.Add(l)
		info, err := l.Append(batches[p])
		if err != nil {
			b.Error(err)
			return false
		}
		ends[p] = info.LastOffset + 1
	}
	return true
}

func benchRawFdatasync(b *testing.B, batch []byte) {
	w, err := benchmarks.NewSequentialWriter(benchmarks.Dir(b), benchSegmentBytes, 2, false)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	hist := benchmarks.NewHistogram()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if err := w.Write(batch); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := w.Sync(); err != nil {
			b.Fatal(err)
		}
		benchmarks.RecordDuration(hist, time.Since(t0))
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "fsyncs/s")
	benchmarks.ReportLatency(b, hist, "")
}

func benchDurable(b *testing.B, batch []byte, partitions, appendersPerPartition int, preallocate bool) {
	dir := benchmarks.Dir(b)
	counter := &fsyncCounter{}
	cfg := engine.DefaultConfig()
	cfg.Observer = counter
	if preallocate {
		cfg.Preallocate = true
		cfg.SegmentBytes = benchSegmentBytes
	}
	ld := engine.NewLogDir(dir)
	logs := make([]*engine.Log, partitions)
	for p := range logs {
		logs[p] = openBenchLogIn(b, ld, dir, p, cfg)
	}
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	appenders := partitions * appendersPerPartition
	lat := benchmarks.NewLatencies(appenders, b.N/appenders+1)
	batches := make([][]byte, appenders) // Append rewrites the header: one batch per appender
	for i := range batches {
		batches[i] = append([]byte(nil), batch...)
	}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	counter.reset()
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range appenders {
		n := b.N / appenders
		if i < b.N%appenders {
			n++
		}
		l := logs[i%partitions]
		wg.Go(func() {
			for range n {
				t0 := time.Now()
				info, err := l.Append(batches[i])
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
					b.Error(err)
					return
				}
				lat.Record(i, time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()

	cycles := counter.cycles.Load()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(cycles)/elapsed.Seconds(), "fsyncs/s")
	if cycles > 0 {
		b.ReportMetric(float64(counter.appends.Load())/float64(cycles), "appends/fsync")
	}
	b.ReportMetric(float64(counter.syncNanos.Load())/float64(elapsed), "syncs-in-flight")
	p := benchmarks.ReportLatency(b, lat.Histogram(), "")

	// The raw fdatasync p99 right after, in the same directory, untimed: the ratio of the two p99s
	// is then judged on one machine state (the raw-fdatasync sibling is a separate, longer sample).
	raw, err := benchmarks.NewSequentialWriter(dir, benchSegmentBytes, 2, false)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	rawHist := benchmarks.NewHistogram()
	for range min(max(b.N/4, 50), 500) {
		if err := raw.Write(batch); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := raw.Sync(); err != nil {
			b.Fatal(err)
		}
		benchmarks.RecordDuration(rawHist, time.Since(t0))
	}
	rawP99 := benchmarks.PercentilesOf(rawHist).P99
	b.ReportMetric(float64(rawP99)/float64(time.Microsecond), "raw-p99-us")
	b.ReportMetric(float64(p.P99)/float64(rawP99), "p99-vs-raw-x")
}

// BenchmarkOpenLog opens a log of 1,000 and of 10,000 segments (segment.bytes 4 KiB, default
// index size) and closes it again: after a clean shutdown (clean) and after a crash whose recovery
// point is the log end (crash: the marker missing, so the segment holding the recovery point is
// recovered). The log is written once per size; each op is OpenLog then Close, and open-ms /
// close-ms split the op; maps and fds are the mappings and descriptors the open log's segments
// hold (segment.Usage). Target: open of 1,000 under 100 ms.
func BenchmarkOpenLog(b *testing.B) {
	for _, segments := range []int{1000, 10000} {
		dir := benchmarks.Dir(b)
		cfg := engine.DefaultConfig()
		cfg.FlushIntervalMessages = math.MaxInt64
		cfg.SegmentBytes = 4 << 10
		l := openBenchLog(b, dir, 0, cfg)
		batch := benchmarks.Batch(1, 1<<10)
		for len(l.Segments()) < segments {
			if _, err := l.Append(batch); err != nil {
				b.Fatal(err)
			}
		}
		// Fill the last segment too (but do not roll), so every segment is a full 4 KiB one.
		for l.Segments()[segments-1].Size()+int64(len(batch)) <= cfg.SegmentBytes {
			if _, err := l.Append(batch); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			b.Fatal(err)
		}
		leo := l.LogEndOffset()
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		for _, clean := range []bool{true, false} {
			opts := engine.OpenOptions{
				Dir:           filepath.Join(dir, "bench-0"),
				Topic:         "bench",
				Config:        cfg,
				CleanShutdown: clean,
				RecoveryPoint: leo,
			}
			kind := "clean"
			if !clean {
				kind = "crash"
			}
			b.Run(fmt.Sprintf("segments=%d/%s", segments, kind), func(b *testing.B) {
				b.ReportAllocs()
				var openTime, closeTime time.Duration
				var fds, maps int64
				for b.Loop() {
					fds0, maps0 := segment.Usage()
					t0 := time.Now()
					l, err := engine.OpenLog(opts)
					if err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					if got := len(l.Segments()); got != segments || l.LogEndOffset() != leo {
						b.Fatalf("reopened %d segments up to %d, want %d up to %d", got, l.LogEndOffset(), segments, leo)
					}
					fds1, maps1 := segment.Usage()
					fds, maps = fds1-fds0, maps1-maps0
					t2 := time.Now()
					if err := l.Close(); err != nil {
						b.Fatal(err)
					}
					openTime += t1.Sub(t0)
					closeTime += time.Since(t2)
				}
				b.ReportMetric(float64(openTime)/float64(b.N)/float64(time.Millisecond), "open-ms")
				b.ReportMetric(float64(closeTime)/float64(b.N)/float64(time.Millisecond), "close-ms")
				b.ReportMetric(float64(fds), "fds")
				b.ReportMetric(float64(maps), "maps")
			})
		}
	}
}
