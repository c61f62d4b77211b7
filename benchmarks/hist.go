package benchmarks

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histograms of the load generator and `weir bench disk` record microseconds, 1 µs .. 1 minute at
// 3 significant digits, and are written to .hgrm files in milliseconds (the unit HdrHistogram's
// HistogramLogProcessor and plotter use by default).
const (
	MicrosLowest  = 1
	MicrosHighest = int64(time.Minute / time.Microsecond)
	MicrosSigFigs = 3
	// HgrmTicksPerHalfDistance is the percentile resolution of written .hgrm files (the Java
	// HistogramLogProcessor default).
	HgrmTicksPerHalfDistance = 5
)

// NewMicrosHistogram returns an empty latency histogram in microseconds.
func NewMicrosHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(MicrosLowest, MicrosHighest, MicrosSigFigs)
}

// RecordMicros adds d to a histogram made by NewMicrosHistogram, clamped to its range.
func RecordMicros(h *hdrhistogram.Histogram, d time.Duration) {
	v := min(max(int64(d/time.Microsecond), MicrosLowest), MicrosHighest)
	_ = h.RecordValue(v)
}

// WriteHgrm writes h (values in microseconds) as an HdrHistogram percentile distribution in
// milliseconds: the "Value Percentile TotalCount 1/(1-Percentile)" table and the #[Mean ...]
// footer, exactly as hdrhistogram-go's PercentilesPrint and Java's HistogramLogProcessor do.
func WriteHgrm(w io.Writer, h *hdrhistogram.Histogram) error {
	_, err := h.PercentilesPrint(w, HgrmTicksPerHalfDistance, 1000.0)
	return err
}

// WriteHgrmFile writes h to path (see WriteHgrm).
func WriteHgrmFile(path string, h *hdrhistogram.Histogram) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if err := WriteHgrm(bw, h); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// HgrmPoint is one line of a percentile distribution.
type HgrmPoint struct {
	Value      float64 // in the file's unit (milliseconds for the files weir writes)
	Percentile float64 // 0..1
	TotalCount int64
}

// Hgrm is a parsed percentile distribution file.
type Hgrm struct {
	Points []HgrmPoint
	Mean   float64
	StdDev float64
	Max    float64
	Count  int64
}

// ValueAt returns the value at quantile q (0..1): that of the first line whose percentile reaches
// q, or the maximum when none does. The precision is that of the file's percentile ticks.
func (h *Hgrm) ValueAt(q float64) float64 {
	for _, p := range h.Points {
		if p.Percentile >= q-1e-12 {
			return p.Value
		}
	}
	return h.Max
}

// ParseHgrmFile reads a .hgrm file.
func ParseHgrmFile(path string) (*Hgrm, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := ParseHgrm(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// ParseHgrm reads an HdrHistogram percentile distribution in the text format of
// hdrhistogram-go's PercentilesPrint and Java's HistogramLogProcessor / Histogram.
// outputPercentileDistribution (comma-separated CSV output is accepted too).
func ParseHgrm(r io.Reader) (*Hgrm, error) {
	var h Hgrm
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sawMax, sawCount := false, false
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		if strings.HasPrefix(text, "#") {
			// #[Mean    =        0.123, StdDeviation   =        0.045]
			// #[Max     =        1.234, Total count    =         1000]
			body := strings.Trim(strings.TrimPrefix(text, "#"), "[] ")
			for _, kv := range strings.Split(body, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					continue
				}
				k, v = strings.TrimSpace(k), strings.TrimSpace(v)
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					continue
				}
				switch k {
				case "Mean":
					h.Mean = f
				case "StdDeviation":
					h.StdDev = f
				case "Max":
					h.Max, sawMax = f, true
				case "Total count":
					h.Count, sawCount = int64(f), true
				}
			}
			continue
		}
		fields := strings.FieldsFunc(text, func(r rune) bool { return r == ' ' || r == '\t' || r == ',' })
		if len(fields) < 3 {
			return nil, fmt.Errorf("line %d: want Value Percentile TotalCount, got %q", line, text)
		}
		if _, err := strconv.ParseFloat(fields[0], 64); err != nil {
			continue // the header line ("Value Percentile TotalCount 1/(1-Percentile)")
		}
		var p HgrmPoint
		var err error
		if p.Value, err = strconv.ParseFloat(fields[0], 64); err != nil {
			return nil, fmt.Errorf("line %d: value: %w", line, err)
		}
		if p.Percentile, err = strconv.ParseFloat(fields[1], 64); err != nil || p.Percentile < 0 || p.Percentile > 1 {
			return nil, fmt.Errorf("line %d: bad percentile %q", line, fields[1])
		}
		tc, err := strconv.ParseFloat(fields[2], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: total count: %w", line, err)
		}
		p.TotalCount = int64(tc)
		h.Points = append(h.Points, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(h.Points) == 0 && !sawCount {
		return nil, errors.New("no percentile lines")
	}
	if !sawMax && len(h.Points) > 0 {
		h.Max = h.Points[len(h.Points)-1].Value
	}
	if !sawCount && len(h.Points) > 0 {
		h.Count = h.Points[len(h.Points)-1].TotalCount
	}
	if math.IsNaN(h.Mean) {
		h.Mean = 0
	}
	return &h, nil
}
