package benchmarks

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: 1 ns to 1 minute at 3 significant digits (about 200 KB of counters).
const (
	histLowestNanos  = 1
	histHighestNanos = int64(time.Minute)
	histSigFigs      = 3
)

// NewHistogram returns an empty latency histogram in nanoseconds (1 ns .. 1 min, 3 significant
// digits). Values above the range are clamped to it, never dropped. Not safe for concurrent use:
// concurrent recorders use Latencies.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histLowestNanos, histHighestNanos, histSigFigs)
}

// RecordDuration adds d to h, clamped to the histogram's range.
func RecordDuration(h *hdrhistogram.Histogram, d time.Duration) {
	v := min(max(int64(d), histLowestNanos), histHighestNanos)
	_ = h.RecordValue(v) // cannot fail: v is within range
}

// Latencies collects durations from many goroutines without sharing anything while they run: each
// goroutine owns one shard (a preallocated slice) and appends to it, so recording costs no lock,
// no atomic and, within the capacity hint, no allocation. Histogram merges the shards afterwards,
// outside the timed section. Record on one shard must not run concurrently with itself.
type Latencies struct {
	shards []latencyShard
}

type latencyShard struct {
	nanos []int64
	_     [40]byte // keep neighbouring shards' slice headers off one cache line
}

// NewLatencies makes shards shards, each with room for perShard values before it grows.
func NewLatencies(shards, perShard int) *Latencies {
	l := &Latencies{shards: make([]latencyShard, shards)}
	for i := range l.shards {
		l.shards[i].nanos = make([]int64, 0, perShard)
	}
	return l
}

// Record appends d to shard. Only the goroutine that owns shard may call it.
func (l *Latencies) Record(shard int, d time.Duration) {
	s := &l.shards[shard]
	s.nanos = append(s.nanos, int64(d))
}

// Histogram merges every shard into one histogram.
func (l *Latencies) Histogram() *hdrhistogram.Histogram {
	h := NewHistogram()
	for i := range l.shards {
		for _, v := range l.shards[i].nanos {
			RecordDuration(h, time.Duration(v))
		}
	}
	return h
}

// Percentiles are the latency quantiles the benchmarks report.
type Percentiles struct {
	P50, P99, P999, Max time.Duration
	Count               int64
}

// PercentilesOf reads p50, p99, p99.9 and the maximum from h.
func PercentilesOf(h *hdrhistogram.Histogram) Percentiles {
	return Percentiles{
		P50:   time.Duration(h.ValueAtQuantile(50)),
		P99:   time.Duration(h.ValueAtQuantile(99)),
		P999:  time.Duration(h.ValueAtQuantile(99.9)),
		Max:   time.Duration(h.Max()),
		Count: h.TotalCount(),
	}
}

// MetricReporter is the part of *testing.B that ReportLatency uses (an interface here so that
// this package does not link the testing package).
type MetricReporter interface {
	ReportMetric(n float64, unit string)
}

// ReportLatency reports h's p50, p99 and p99.9 in microseconds as benchmark metrics named
// "<prefix>p50-us", "<prefix>p99-us" and "<prefix>p99.9-us". Nothing is reported for an empty
// histogram.
func ReportLatency(b MetricReporter, h *hdrhistogram.Histogram, prefix string) Percentiles {
	p := PercentilesOf(h)
	if p.Count == 0 {
		return p
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(p.P50), prefix+"p50-us")
	b.ReportMetric(us(p.P99), prefix+"p99-us")
	b.ReportMetric(us(p.P999), prefix+"p99.9-us")
	return p
}
