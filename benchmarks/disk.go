package benchmarks

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/engine"
)

// DiskLimits bound each storage measurement: it stops at whichever comes first.
type DiskLimits struct {
	Duration time.Duration // per measurement
	MaxOps   int64         // per measurement (fdatasyncs, appends)
	MaxBytes int64         // bytes appended by the throughput measurement
}

// FdatasyncLatency appends 1 KiB to a plain file in dir and fdatasyncs it, again and again,
// recording each write+fdatasync in microseconds: the raw device's durable-write latency.
func FdatasyncLatency(dir string, lim DiskLimits) (*hdrhistogram.Histogram, error) {
	f, err := os.CreateTemp(dir, "fdatasync-*.bench")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1024)
	for i := range buf {
		buf[i] = byte(i)
	}
	fd := int(f.Fd())
	h := NewMicrosHistogram()
	end := time.Now().Add(lim.Duration)
	var off int64
	for n := int64(0); n < lim.MaxOps; n++ {
		t0 := time.Now()
		if !t0.Before(end) {
			break
		}
		if _, err := unix.Pwrite(fd, buf, off); err != nil {
			return nil, err
		}
		if err := fdatasync(fd); err != nil {
			return nil, err
		}
		RecordMicros(h, time.Since(t0))
		off += int64(len(buf))
		if off >= 64<<20 {
			off = 0 // overwrite: keep the file small
		}
	}
	return h, nil
}

// DurableAppendLatency runs appenders goroutines appending batch (a RecordBatch, copied per
// goroutine since Append rewrites it) to one engine.Log with durable acks (flush.messages=1, group
// commit) in a fresh subdirectory of dir, each waiting for its append to be fdatasync'd
// (AwaitDurable) before the next. It records Append+AwaitDurable in microseconds.
func DurableAppendLatency(dir string, appenders int, batch []byte, lim DiskLimits) (*hdrhistogram.Histogram, error) {
	sub, err := os.MkdirTemp(dir, "weir-bench-durable-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(sub)
	cfg := engine.DefaultConfig()
	cfg.FlushIntervalMessages = 1
	cfg.MaxMessageBytes = max(cfg.MaxMessageBytes, len(batch)+1024)
	l, err := engine.OpenLog(engine.OpenOptions{Dir: filepath.Join(sub, "bench-0"), Topic: "bench", Config: cfg})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	end := time.Now().Add(lim.Duration)
	hs := make([]*hdrhistogram.Histogram, appenders)
	errs := make([]error, appenders)
	perAppender := max(lim.MaxOps/int64(appenders), 1)
	var wg sync.WaitGroup
	for g := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := append([]byte(nil), batch...)
			h := NewMicrosHistogram()
			hs[g] = h
			for n := int64(0); n < perAppender; n++ {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				info, err := l.Append(b)
				if err == nil {
					err = l.AwaitDurable(info.LastOffset + 1)
				}
				if err != nil {
					errs[g] = err
					return
				}
				RecordMicros(h, time.Since(t0))
			}
		}()
	}
	wg.Wait()
	h := NewMicrosHistogram()
	for _, x := range hs {
		h.Merge(x)
	}
	return h, errors.Join(errs...)
}

// AppendThroughput appends batch to an engine.Log with page-cache acks in a fresh subdirectory of
// dir until lim.MaxBytes or lim.Duration, and returns MB/s (10^6 bytes) and the partition
// directory, whose segment files the read measurements use; the caller removes it.
func AppendThroughput(dir string, batch []byte, lim DiskLimits) (mbps float64, logDir string, err error) {
	sub, err := os.MkdirTemp(dir, "weir-bench-append-*")
	if err != nil {
		return 0, "", err
	}
	cfg := engine.DefaultConfig()
	cfg.FlushIntervalMessages = math.MaxInt64
	cfg.SegmentBytes = 256 << 20
	cfg.RetentionMs = -1
	cfg.MaxMessageBytes = max(cfg.MaxMessageBytes, len(batch)+1024)
	logDir = filepath.Join(sub, "bench-0")
	l, err := engine.OpenLog(engine.OpenOptions{Dir: logDir, Topic: "bench", Config: cfg})
	if err != nil {
		os.RemoveAll(sub)
		return 0, "", err
	}
	start := time.Now()
	end := start.Add(lim.Duration)
	var written int64
	for written < lim.MaxBytes && time.Now().Before(end) {
		if _, err := l.Append(batch); err != nil {
			l.Close()
			os.RemoveAll(sub)
			return 0, "", err
		}
		written += int64(len(batch))
	}
	secs := time.Since(start).Seconds()
	if err := l.Close(); err != nil {
		os.RemoveAll(sub)
		return 0, "", err
	}
	return float64(written) / secs / 1e6, logDir, nil
}

// ReadThroughput reads every .log segment file in logDir sequentially with 1 MiB reads and
// returns MB/s. With cold, each file is first fdatasync'd and dropped from the page cache
// (posix_fadvise DONTNEED), so the bytes come from the device.
func ReadThroughput(logDir string, cold bool) (float64, int64, error) {
	files, err := filepath.Glob(filepath.Join(logDir, "*.log"))
	if err != nil {
		return 0, 0, err
	}
	sort.Strings(files)
	if len(files) == 0 {
		return 0, 0, fmt.Errorf("no segment files in %s", logDir)
	}
	if cold {
		for _, name := range files {
			if err := dropCache(name); err != nil {
				return 0, 0, err
			}
		}
	}
	buf := make([]byte, 1<<20)
	var total int64
	start := time.Now()
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return 0, 0, err
		}
		for {
			n, err := f.Read(buf)
			total += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return 0, 0, err
			}
		}
		f.Close()
	}
	return float64(total) / time.Since(start).Seconds() / 1e6, total, nil
}

func dropCache(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := fdatasync(int(f.Fd())); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// DiskLabel makes a file-name-safe label of a directory path.
func DiskLabel(dir string) string {
	clean := strings.Trim(filepath.Clean(dir), "/")
	if clean == "" || clean == "." {
		return "root"
	}
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == ':' {
			return '_'
		}
		return r
	}, clean)
}
