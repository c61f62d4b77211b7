package segment_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/benchmarks"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// The segment suites:
//
//	BenchmarkRecover/1KiB/batch<n>                     recovery scan of a 64 MiB segment (MB/s)
//	BenchmarkReadHeaderAt/<size>/batch1/{pread,mmap,mmap-unguarded}
//	BenchmarkTranslateOffset/<size>/batch1/{pread,pread-chunk,mmap}
//
// pread is what an active (unsealed) segment does: one pread(2) per batch header; mmap is the
// read-only mapping of a sealed segment, reads guarded against SIGBUS (debug.SetPanicOnFault);
// mmap-unguarded reads the same mapping with no guard, to show what the guard costs. pread-chunk
// is a candidate for the active segment, written here in the benchmark: one 8 KiB pread from the
// index entry's position and the headers parsed from that buffer. Files are in benchmarks.Dir
// (WEIR_BENCH_DIR).

// fillSegment creates a segment with base offset 0 in dir and appends copies of batch, offsets
// assigned, until it holds at least bytes bytes.
func fillSegment(b *testing.B, dir string, batch []byte, bytes int64) *segment.Segment {
	b.Helper()
	seg, err := segment.Create(vfs.OS, dir, 0, segment.DefaultConfig, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	batch = append([]byte(nil), batch...)
	h, err := record.ParseHeader(batch)
	if err != nil {
		b.Fatal(err)
	}
	next := int64(0)
	for seg.Size() < bytes {
		h.BaseOffset = next
		record.SetBaseOffset(batch, next)
		if _, err := seg.Append(batch, &h); err != nil {
			b.Fatal(err)
		}
		next = h.NextOffset()
	}
	return seg
}

// BenchmarkRecover is the crash-recovery scan: segment.Recover on a full 64 MiB segment of 1 KiB
// records (CRC32C of every batch, offset checks, both indexes rebuilt). The segment is in the page
// cache: this is the CPU cost of the scan, not a cold-disk read.
func BenchmarkRecover(b *testing.B) {
	const segmentBytes = 64 << 20
	for _, records := range []int{1, 100} {
		seg := fillSegment(b, benchmarks.Dir(b), benchmarks.Batch(records, 1<<10), segmentBytes)
		size, next := seg.Size(), seg.NextOffset()
		b.Run(fmt.Sprintf("1KiB/batch%d", records), func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				truncated, err := seg.Recover()
				if err != nil || truncated != 0 {
					b.Fatalf("recover: truncated %d, %v", truncated, err)
				}
			}
			if seg.Size() != size || seg.NextOffset() != next {
				b.Fatalf("recovered %d bytes up to %d, want %d up to %d", seg.Size(), seg.NextOffset(), size, next)
			}
		})
		if err := seg.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// translateFixture is two identical segments of single-record batches: one left active (pread
// reads), one marked inactive (mmap reads), with their batch positions and random offsets to look up.
type translateFixture struct {
	active, sealed *segment.Segment
	positions      []int64 // batch start positions
	offsets        []int64 // 1024 random offsets
	mapping        mmap.MMap
}

const translateSegmentBytes = 16 << 20

func newTranslateFixture(b *testing.B, valueBytes int) *translateFixture {
	batch := benchmarks.Batch(1, valueBytes)
	fx := &translateFixture{
		active: fillSegment(b, benchmarks.Dir(b), batch, translateSegmentBytes),
		sealed: fillSegment(b, benchmarks.Dir(b), batch, translateSegmentBytes),
	}
	if err := fx.sealed.MarkInactive(); err != nil {
		b.Fatal(err)
	}
	for pos := int64(0); pos < fx.active.Size(); pos += int64(len(batch)) {
		fx.positions = append(fx.positions, pos)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	fx.offsets = make([]int64, 1024)
	for i := range fx.offsets {
		fx.offsets[i] = rng.Int64N(fx.active.NextOffset())
	}
	sl, _ := fx.sealed.Slice(0, fx.sealed.Size())
	m, err := mmap.MapRegion(sl.File, int(fx.sealed.Size()), mmap.RDONLY, 0, 0)
	sl.Release()
	if err != nil {
		b.Fatal(err)
	}
	fx.mapping = m
	return fx
}

func (fx *translateFixture) close(b *testing.B) {
	if err := fx.mapping.Unmap(); err != nil {
		b.Error(err)
	}
	for _, s := range []*segment.Segment{fx.active, fx.sealed} {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	}
}

var translateSizes = []benchmarks.Size{{Name: "100B", Bytes: 100}, {Name: "1KiB", Bytes: 1 << 10}}

// BenchmarkReadHeaderAt reads one batch header at a random batch position: pread (active segment)
// against the sealed segment's mapping, guarded and unguarded.
func BenchmarkReadHeaderAt(b *testing.B) {
	for _, size := range translateSizes {
		fx := newTranslateFixture(b, size.Bytes)
		rng := rand.New(rand.NewPCG(4, 4))
		positions := make([]int64, 1024)
		for i := range positions {
			positions[i] = fx.positions[rng.IntN(len(fx.positions))]
		}
		for _, v := range []struct {
			name string
			seg  *segment.Segment
		}{{"pread", fx.active}, {"mmap", fx.sealed}} {
			b.Run(size.Name+"/batch1/"+v.name, func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					h, err := v.seg.ReadHeaderAt(positions[i&1023])
					if err != nil || h.Magic != record.CurrentMagic {
						b.Fatalf("read header: %v", err)
					}
					i++
				}
			})
		}
		b.Run(size.Name+"/batch1/mmap-unguarded", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				pos := positions[i&1023]
				if pos+record.HeaderSize > int64(len(fx.mapping)) {
					b.Fatal(io.ErrUnexpectedEOF)
				}
				h, err := record.ParseHeader(fx.mapping[pos : pos+record.HeaderSize])
				if err != nil || h.Magic != record.CurrentMagic {
					b.Fatalf("read header: %v", err)
				}
				i++
			}
		})
		fx.close(b)
	}
}

// BenchmarkTranslateOffset is the fetch path's offset translation on a segment: an offset index
// lookup, then a forward scan of batch headers (about index.interval.bytes / batch size headers),
// by pread on the active segment and through the mapping on the sealed one.
func BenchmarkTranslateOffset(b *testing.B) {
	for _, size := range translateSizes {
		fx := newTranslateFixture(b, size.Bytes)
		for _, v := range []struct {
			name string
			seg  *segment.Segment
		}{{"pread", fx.active}, {"mmap", fx.sealed}} {
			b.Run(size.Name+"/batch1/"+v.name, func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					offset := fx.offsets[i&1023]
					_, h, found, err := v.seg.TranslateOffset(offset)
					if err != nil || !found || h.BaseOffset > offset || h.LastOffset() < offset {
						b.Fatalf("translate %d: found %v at %d, %v", offset, found, h.BaseOffset, err)
					}
					i++
				}
			})
		}
		b.Run(size.Name+"/batch1/pread-chunk", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				offset := fx.offsets[i&1023]
				h, found, err := translateChunked(fx.active, offset)
				if err != nil || !found || h.BaseOffset > offset || h.LastOffset() < offset {
					b.Fatalf("translate %d: found %v at %d, %v", offset, found, h.BaseOffset, err)
				}
				i++
			}
		})
		fx.close(b)
	}
}

// translateChunked is the candidate active-segment translation: the offset index lookup, then
// pread 8 KiB at a time (an index interval's worth of batches and more) and parse the headers from
// the buffer, instead of one pread per header.
func translateChunked(seg *segment.Segment, offset int64) (record.Header, bool, error) {
	var buf [8 << 10]byte
	_, pos := seg.OffsetIndex().Lookup(offset)
	sl, _ := seg.Slice(0, seg.Size())
	defer sl.Release()
	fd := int(sl.File.Fd())
	size := seg.Size()
	for pos+record.HeaderSize <= size {
		n, err := unix.Pread(fd, buf[:min(int64(len(buf)), size-pos)], pos)
		if err != nil {
			return record.Header{}, false, err
		}
		p := 0
		for p+record.HeaderSize <= n {
			h, err := record.ParseHeader(buf[p:n])
			if err != nil {
				return h, false, err
			}
			if h.Size() < record.HeaderSize {
				return h, false, io.ErrUnexpectedEOF
			}
			if h.LastOffset() >= offset {
				return h, true, nil
			}
			p += int(h.Size())
		}
		if p == 0 {
			return record.Header{}, false, io.ErrUnexpectedEOF
		}
		pos += int64(p)
	}
	return record.Header{}, false, nil
}
