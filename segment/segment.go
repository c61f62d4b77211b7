package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edsrzf/mmap-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/index"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/vfs"
)

// File name suffixes, as Kafka names them.
const (
	LogSuffix       = ".log"
	IndexSuffix     = ".index"
	TimeIndexSuffix = ".timeindex"
	DeletedSuffix   = ".deleted"
	CleanedSuffix   = ".cleaned"
	SwapSuffix      = ".swap"
)

// Config is the per-segment part of a log's configuration.
type Config struct {
	// IndexIntervalBytes is log.index.interval.bytes (default 4096).
	IndexIntervalBytes int
	// MaxIndexBytes is log.index.size.max.bytes (default 10485760).
	MaxIndexBytes int
	// ActiveMapBytes, when > 0, maps the active segment read-only at this length (segment.bytes)
	// so header reads (offset translation) need no syscall; 0 reads it with pread. Measured in
	// BenchmarkTranslateActive: mapped scans are 10-15x faster than pread per header.
	ActiveMapBytes int64
	// PreallocateBytes, when > 0, is preallocate / log.preallocate: a new segment's .log is made
	// this long (segment.bytes) at creation and trimmed to its logical size when it rolls and
	// when it closes (preallocate.go).
	PreallocateBytes int64
}

// DefaultConfig is Kafka's default.
var DefaultConfig = Config{IndexIntervalBytes: 4096, MaxIndexBytes: 10 << 20}

// ErrClosed is returned by operations on a segment whose files were closed.
var ErrClosed = errors.New("segment: closed")

// FileName returns the name of a segment file: the base offset in 20 digits and the suffix.
func FileName(baseOffset int64, suffix string) string {
	return fmt.Sprintf("%020d%s", baseOffset, suffix)
}

// ParseFileName returns the base offset of a segment file name ending in suffix.
func ParseFileName(name, suffix string) (int64, bool) {
	if !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	digits := strings.TrimSuffix(name, suffix)
	if len(digits) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// Process-wide resource use of open segments, for the engine's descriptor and mapping budget
// (engine/budget.go): an open segment holds at most DescriptorsPerSegment descriptors (the .log;
// the indexes close theirs once mapped, as Kafka's do, and the .txnindex is opened per use) and
// IndexMappingsPerSegment mappings (the two indexes), plus at most one read-only mapping of the
// .log made on first read (more only briefly, while a reader still holds a replaced one). A
// settled segment's descriptor and index mappings are held only while cached (fdcache.go).
const (
	DescriptorsPerSegment   = 1
	IndexMappingsPerSegment = 2
)

var (
	liveSegments atomic.Int64
	liveMappings atomic.Int64
	// readMappingLimit: a read mapping is only made while fewer than this many mappings are live
	// (0 = no limit); reads fall back to pread beyond it, keeping the mapping budget for indexes.
	readMappingLimit atomic.Int64
)

// Usage returns the descriptors and memory mappings held by the open segments of this process.
func Usage() (descriptors, mappings int64) {
	return liveDescriptors.Load(), liveMappings.Load()
}

// Reclaimable returns the part of Usage the caches of settled segments evict when the room is
// needed (fdcache.go): what new segments can take without the process holding more. Only a
// bounded cache under a ceiling (SetCeilings) gives room back.
func Reclaimable() (descriptors, mappings int64) {
	c := Caches()
	if descriptorCeiling.Load() > 0 && logCache.limit.Load() > 0 {
		descriptors = int64(c.Descriptors)
	}
	if mappingCeiling.Load() > 0 && idxCache.limit.Load() > 0 {
		mappings = IndexMappingsPerSegment * int64(c.IndexPairs)
	}
	return descriptors, mappings
}

// Segments returns the number of open segments.
func Segments() int64 { return liveSegments.Load() }

// SetReadMappingLimit makes reads use pread instead of making a new read-only mapping once n
// mappings are live (0 = no limit).
func SetReadMappingLimit(n int64) { readMappingLimit.Store(n) }

// Segment is one segment of a partition log. See the package doc for the concurrency contract.
type Segment struct {
	fsys       vfs.FS
	dir        string
	baseOffset int64
	cfg        Config
	// suffix follows every file name: "" for a segment of the log, CleanedSuffix or SwapSuffix
	// for one a cleaner is writing or swapping in (see swap.go). Changed only by RenameFiles,
	// under the owning log's structure lock, as Delete reads it.
	suffix string

	// name is the .log's path when it was opened (for messages; LogPath).
	name string
	// logRef is the open .log descriptor, nil while evicted (fdcache.go): readers pin it.
	// logMu serialises opening it again and closing it; logClosed (the last reference went:
	// never open it again) is guarded by it.
	logRef    atomic.Pointer[fileRef]
	logMu     sync.Mutex
	logClosed bool
	// settled: inactive and durable, so the descriptor and index mappings may be evicted
	// (fdcache.go). used: the CLOCK bits of the two caches. slot: the position in each cache's
	// list (-1: not listed), guarded by that cache's mu.
	settled atomic.Bool
	// idxHeld: settled by SettleIfSynced under descriptor pressure only, the index pair kept
	// out of its cache until SettleIfIdle.
	idxHeld atomic.Bool
	used    [2]atomic.Bool
	slot    [2]int
	// appendSeq counts appends; syncedSeq is appendSeq when the last Sync began (everything
	// appended before is durable); idleSeq is appendSeq at the previous SettleIfIdle. An active
	// segment with the three equal is idle and clean, and may be settled (SettleIfIdle).
	appendSeq, syncedSeq, idleSeq atomic.Int64
	// idx holds the offset and time indexes, nil until first use for a segment opened with
	// OpenSealed (lazyindex.go) or after an eviction. idxMu serialises mapping and replacing
	// them, and guards idxGone (the files were removed or closed: never map them again).
	idx     atomic.Pointer[indexPair]
	idxMu   sync.Mutex
	idxGone bool
	// txn is the aborted transaction index (.txnindex, txnindex.go), its file made lazily.
	txn txnIndex

	// size is the number of valid bytes in .log, published after each append.
	size atomic.Int64
	// nextOffset is the offset after the last batch (baseOffset when empty), published after size.
	nextOffset atomic.Int64
	// maxTimestamp is the largest batch max timestamp in the segment (record.NoTimestamp if none).
	maxTimestamp atomic.Int64

	// Append state, owned by the appender.
	bytesSinceLastIndexEntry int
	residentCheckedAt        int64 // size at the last dropResident
	offsetOfMaxTimestamp     int64
	firstBatchTimestamp      int64 // max timestamp of the first batch, for time-based roll
	created                  time.Time

	// firstBatchMaxTs caches FirstBatchMaxTimestamp (firstTsUnknown until read; reset by
	// TruncateTo and Recover).
	firstBatchMaxTs atomic.Int64

	// preallocated is set while the .log is longer than its logical size (created preallocated,
	// not trimmed yet).
	preallocated atomic.Bool

	// scanDroppedAt is the position of the reader scan that last released a sealed segment's
	// mapped pages (dropScanned).
	scanDroppedAt atomic.Int64

	sealed  atomic.Bool
	mapOnce sync.Mutex
	mapping atomic.Pointer[mmap.MMap]
	retired []mmap.MMap // mappings replaced while readers may hold them; unmapped on close

	// refs counts holders: the owning Log plus readers. At zero the files are closed.
	refs atomic.Int32
}

// Create makes a new empty segment with base offset baseOffset in dir.
func Create(fsys vfs.FS, dir string, baseOffset int64, cfg Config, now time.Time) (*Segment, error) {
	relieve(kindLog) // room for its descriptor and indexes (fdcache.go)
	relieve(kindIndex)
	s, err := open(fsys, dir, baseOffset, cfg, os.O_CREATE|os.O_EXCL|os.O_RDWR, "")
	if err != nil {
		return nil, err
	}
	if cfg.PreallocateBytes > 0 {
		if err := preallocate(s.ownFile(), cfg.PreallocateBytes); err != nil {
			_ = s.Delete()
			return nil, err
		}
		s.preallocated.Store(true)
	}
	s.created = now
	return s, nil
}

// Open opens the existing segment files with base offset baseOffset. It does not scan the log:
// the size comes from the file, the next offset and max timestamp from the indexes and a short
// scan of the bytes after the last index entry (LoadTail), or from Recover.
func Open(fsys vfs.FS, dir string, baseOffset int64, cfg Config) (*Segment, error) {
	s, err := open(fsys, dir, baseOffset, cfg, os.O_RDWR, "")
	if err != nil {
		return nil, err
	}
	st, err := s.ownFile().Stat()
	if err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("stat segment %s: %w", s.name, err)
	}
	s.created = st.ModTime()
	s.size.Store(st.Size())
	return s, nil
}

func open(fsys vfs.FS, dir string, baseOffset int64, cfg Config, flag int, suffix string) (*Segment, error) {
	s, err := openLog(fsys, dir, baseOffset, cfg, flag, suffix)
	if err != nil {
		return nil, err
	}
	indexPath, timeIndexPath := s.indexPaths()
	p, err := openIndexPair(fsys, indexPath, timeIndexPath, baseOffset, s.cfg.MaxIndexBytes, false)
	if err != nil {
		// A segment being created that cannot be completed (no descriptor or mapping left for
		// an index) leaves no file behind: the roll or log creation that asked for it is
		// retried later and must find nothing in its way (O_EXCL).
		logPath := s.name
		s.closeFiles()
		if flag&os.O_EXCL != 0 {
			for _, p := range []string{logPath, indexPath, timeIndexPath} {
				_ = fsys.Remove(p)
			}
		}
		return nil, fmt.Errorf("open segment %s: %w", logPath, err)
	}
	s.idx.Store(p)
	idxCache.trim() // two more mappings outside the cache: keep the total under the ceiling
	return s, nil
}

// openLog opens the segment's .log and returns the segment holding one reference, with no index
// mapped.
func openLog(fsys vfs.FS, dir string, baseOffset int64, cfg Config, flag int, suffix string) (*Segment, error) {
	if cfg.IndexIntervalBytes <= 0 {
		cfg.IndexIntervalBytes = DefaultConfig.IndexIntervalBytes
	}
	if cfg.MaxIndexBytes < index.TimeEntrySize {
		cfg.MaxIndexBytes = DefaultConfig.MaxIndexBytes
	}
	s := &Segment{fsys: fsys, dir: dir, baseOffset: baseOffset, cfg: cfg, suffix: suffix, offsetOfMaxTimestamp: baseOffset, firstBatchTimestamp: record.NoTimestamp, slot: [2]int{-1, -1}}
	s.nextOffset.Store(baseOffset)
	s.maxTimestamp.Store(record.NoTimestamp)
	s.firstBatchMaxTs.Store(firstTsUnknown)
	logPath := filepath.Join(dir, FileName(baseOffset, LogSuffix)+suffix)
	f, err := fsys.OpenFile(logPath, flag, vfs.FileMode)
	if err != nil {
		return nil, fmt.Errorf("open segment %s: %w", logPath, err)
	}
	s.name = logPath
	s.logRef.Store(newFileRef(f, 1))
	liveSegments.Add(1)
	s.refs.Store(1)
	logCache.trim() // one more descriptor outside the cache: keep the total under the ceiling
	return s, nil
}

// BaseOffset is the offset of the segment's first batch (or the offset it will have).
func (s *Segment) BaseOffset() int64 { return s.baseOffset }

// Size is the number of bytes in the .log.
func (s *Segment) Size() int64 { return s.size.Load() }

// NextOffset is the offset after the segment's last batch.
func (s *Segment) NextOffset() int64 { return s.nextOffset.Load() }

// MaxTimestamp is the largest max timestamp of the segment's batches, or -1.
func (s *Segment) MaxTimestamp() int64 { return s.maxTimestamp.Load() }

// Created is when the segment was created (or the .log's mtime for an opened one).
func (s *Segment) Created() time.Time { return s.created }

// FirstBatchTimestamp is the max timestamp of the first batch, or -1 when unknown.
func (s *Segment) FirstBatchTimestamp() int64 { return s.firstBatchTimestamp }

// firstTsUnknown marks firstBatchMaxTs as not read yet.
const firstTsUnknown = math.MinInt64

// FirstBatchMaxTimestamp is the max timestamp of the segment's first batch (Kafka's
// LogSegment.getFirstBatchTimestamp), read from the file once and cached; math.MaxInt64 when the
// segment is empty or closed, as Kafka answers Long.MAX_VALUE. Safe to call from any goroutine
// (the cleaner's); the first call reads one batch header.
func (s *Segment) FirstBatchMaxTimestamp() int64 {
	if ts := s.firstBatchMaxTs.Load(); ts != firstTsUnknown {
		return ts
	}
	if !s.Acquire() {
		return math.MaxInt64
	}
	defer s.Release()
	h, err := s.ReadHeaderAt(0)
	if err != nil {
		return math.MaxInt64 // empty (io.EOF) or unreadable: not cached, asked again later
	}
	s.firstBatchMaxTs.CompareAndSwap(firstTsUnknown, h.MaxTimestamp)
	return h.MaxTimestamp
}

// LogPath is the path of the .log file (when it was opened).
func (s *Segment) LogPath() string { return s.name }

// OffsetIndex and TimeIndex expose the indexes (tests, tools), mapping them first if they are not
// (lazyindex.go); nil when they cannot be mapped. The index is not pinned: a settled segment's
// may be evicted (unmapped) under the caller, which then sees an empty index.
func (s *Segment) OffsetIndex() *index.OffsetIndex {
	if p := s.pinIndexes(); p != nil {
		defer p.unpin()
		return p.offset
	}
	return nil
}

func (s *Segment) TimeIndex() *index.TimeIndex {
	if p := s.pinIndexes(); p != nil {
		defer p.unpin()
		return p.time
	}
	return nil
}

// LastIndexedPosition returns the position of the batch the offset index's last entry points at
// (0 if it has none, or if the index cannot be mapped): a scan for the segment's last batch can
// start there.
func (s *Segment) LastIndexedPosition() int64 {
	if p := s.pinIndexes(); p != nil {
		_, pos := p.offset.Lookup(math.MaxInt64)
		p.unpin()
		return pos
	}
	return 0
}

// IsSealed reports whether the segment was sealed (no more appends).
func (s *Segment) IsSealed() bool { return s.sealed.Load() }

// CanHold reports whether a batch with last offset lastOffset fits this segment's indexes:
// relative offsets must fit int32 and neither index may be full. A false answer means roll.
func (s *Segment) CanHold(lastOffset int64) bool {
	rel := lastOffset - s.baseOffset
	p := s.idx.Load()
	if (p == nil || p.sealed) && !s.sealed.Load() {
		// An idle active segment whose indexes were evicted, or mapped read-only by a reader
		// since: the appender maps them writable again.
		p, _ = s.writableIndexes()
	}
	return rel >= 0 && rel <= math.MaxInt32 && p != nil && !p.sealed && !p.offset.IsFull() && !p.time.IsFull()
}

// Append writes batch, whose offsets are already assigned and whose header is h, at the end of
// the log and maintains the indexes. It returns the batch's position.
func (s *Segment) Append(batch []byte, h *record.Header) (int64, error) {
	// An idle active segment may have been settled (SettleIfIdle): the append takes it back
	// before writing (appendSeq first, so SettleIfIdle sees the append or this sees settled).
	s.appendSeq.Add(1)
	if s.settled.Load() {
		s.unsettle()
	}
	pos := s.size.Load()
	if pos+int64(len(batch)) > math.MaxInt32 {
		return 0, fmt.Errorf("append to segment %s: position %d overflows int32", s.name, pos)
	}
	r, err := s.pinLog()
	if err != nil {
		return 0, fmt.Errorf("append to segment %s: %w", s.name, err)
	}
	_, err = r.f.WriteAt(batch, pos)
	r.unpin()
	if err != nil {
		return 0, fmt.Errorf("append to segment %s at %d: %w", s.name, pos, err)
	}
	if err := s.indexBatch(h, pos); err != nil {
		return 0, err
	}
	s.size.Store(pos + int64(len(batch)))
	s.nextOffset.Store(h.NextOffset())
	if end := pos + int64(len(batch)); end >= s.residentCheckedAt+residentDropBytes {
		s.dropResident(end)
	}
	return pos, nil
}

// Keeping the read mapping's pages out of the process's RSS. Reads through the active segment's
// mapping (offset translation for fetches and for the high watermark) fault in the page of each
// header they read, and the kernel maps the cached pages around it too (fault-around, 64 KiB), so
// without this the whole active segment ends up counted in the process's RSS as it is written,
// although no read needs it after the tail moved on. Each time residentDropBytes more were
// appended, the appender releases the mapping's pages below the last residentKeepBytes
// (MADV_DONTNEED: for a shared file mapping it only removes the page table entries; the pages stay
// in the page cache and a later read faults them back in, so readers running alongside are not
// affected). One madvise call per MiB appended.
const (
	residentDropBytes = 1 << 20
	residentKeepBytes = 256 << 10
)

// dropResident releases the read mapping's pages below end-residentKeepBytes. Called by the
// appender.
func (s *Segment) dropResident(end int64) {
	s.residentCheckedAt = end
	m := s.mapping.Load()
	if m == nil {
		return
	}
	to := (end - residentKeepBytes) &^ int64(os.Getpagesize()-1)
	if to <= 0 || to > int64(len(*m)) {
		return
	}
	_ = unix.Madvise((*m)[:to], unix.MADV_DONTNEED)
}

// dropScanned keeps a sealed segment's scanned pages out of the process's RSS, as dropResident
// does for the active one: a fetch's offset translation reads batch headers through the mapping
// and faults in each page it touches, so a consumer reading a segment through would leave a
// page in four (16 KiB batches) mapped until the mapping goes. Each time a reader's scan ends
// residentDropBytes away from the last release, the pages below that position less
// residentKeepBytes are released (MADV_DONTNEED on a shared file mapping: page table entries
// only; the pages stay cached and other readers fault them back in). One madvise per MiB that
// readers move through a segment.
func (s *Segment) dropScanned(m mmap.MMap, pos int64) {
	last := s.scanDroppedAt.Load()
	if d := pos - last; d < residentDropBytes && d > -residentDropBytes {
		return
	}
	if !s.scanDroppedAt.CompareAndSwap(last, pos) {
		return // another reader is releasing
	}
	to := (pos - residentKeepBytes) &^ int64(os.Getpagesize()-1)
	if to <= 0 || to > int64(len(m)) {
		return
	}
	_ = unix.Madvise(m[:to], unix.MADV_DONTNEED)
}

// indexBatch updates the timestamp state and the indexes for a batch at pos, as Kafka's
// LogSegment.append does: the entry names the batch's last offset and its start position.
func (s *Segment) indexBatch(h *record.Header, pos int64) error {
	if s.firstBatchTimestamp == record.NoTimestamp && pos == 0 {
		s.firstBatchTimestamp = h.MaxTimestamp
	}
	if h.MaxTimestamp > s.maxTimestamp.Load() {
		s.maxTimestamp.Store(h.MaxTimestamp)
		s.offsetOfMaxTimestamp = h.LastOffset()
	}
	if s.bytesSinceLastIndexEntry > s.cfg.IndexIntervalBytes {
		p := s.idx.Load()
		if p == nil || p.sealed {
			var err error
			if p, err = s.writableIndexes(); err != nil {
				return err
			}
		}
		if err := p.offset.Append(h.LastOffset(), pos); err != nil {
			return fmt.Errorf("index segment %s: %w", s.name, err)
		}
		if err := p.time.MaybeAppend(s.maxTimestamp.Load(), s.offsetOfMaxTimestamp, false); err != nil {
			return fmt.Errorf("time index segment %s: %w", s.name, err)
		}
		s.bytesSinceLastIndexEntry = 0
	}
	s.bytesSinceLastIndexEntry += int(h.Size())
	return nil
}

// ReadHeaderAt reads the batch header at pos. io.EOF means pos is at (or a header would cross)
// the end of the segment. A batchLength shorter than the header itself is refused
// (CORRUPT_MESSAGE): every walk over the headers advances by the batch size, and a size of zero
// or less would loop forever on a corrupt file.
func (s *Segment) ReadHeaderAt(pos int64) (record.Header, error) {
	if pos+record.HeaderSize > s.size.Load() {
		return record.Header{}, io.EOF
	}
	var buf [record.HeaderSize]byte
	if err := s.readAt(buf[:], pos); err != nil {
		return record.Header{}, err
	}
	h, err := record.ParseHeader(buf[:])
	if err == nil && h.BatchLength < record.HeaderSize-record.LogOverhead {
		return h, fmt.Errorf("segment %s: batch at %d has length %d: %w", s.name, pos, h.BatchLength, kerr.CorruptMessage)
	}
	return h, err
}

// readAt fills p from pos: through the read-only mapping when one covers the range, pread
// otherwise.
func (s *Segment) readAt(p []byte, pos int64) error {
	// The active segment is mapped by the first offset translation (a fetch), not by single
	// header reads (opening the log, producer-state replay): an idle partition then holds no
	// read mapping, only its two index mappings, as in Kafka.
	m := s.mapping.Load()
	if m == nil && s.sealed.Load() {
		m = s.readMapping()
	}
	if m != nil && pos+int64(len(p)) <= int64(len(*m)) {
		return copyFromMapping(p, *m, pos)
	}
	r, err := s.pinLog()
	if err != nil {
		return fmt.Errorf("read segment %s at %d: %w", s.name, pos, err)
	}
	defer r.unpin()
	for len(p) > 0 {
		n, err := unix.Pread(r.fd, p, pos)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("read segment %s at %d: %w", s.name, pos, err)
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		p = p[n:]
		pos += int64(n)
	}
	return nil
}

// copyFromMapping copies from a mapping; a fault (the file shrank under the mapping) becomes an error.
func copyFromMapping(p []byte, m mmap.MMap, pos int64) (err error) {
	if pos < 0 || pos+int64(len(p)) > int64(len(m)) {
		return io.ErrUnexpectedEOF
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("read mapped segment at %d: %v", pos, r)
		}
	}()
	copy(p, m[pos:])
	return nil
}

// readMapping returns the read-only mapping of the .log, made on first use: a sealed segment is
// mapped at its size, an active one at ActiveMapBytes (pages past the end of the file are never
// touched: reads stop at the published size). Nil when reads must use pread.
func (s *Segment) readMapping() *mmap.MMap {
	if m := s.mapping.Load(); m != nil {
		return m
	}
	sealed := s.sealed.Load()
	if !sealed && s.cfg.ActiveMapBytes <= 0 {
		return nil
	}
	s.mapOnce.Lock()
	defer s.mapOnce.Unlock()
	if m := s.mapping.Load(); m != nil {
		return m
	}
	size := int(s.size.Load())
	if !sealed {
		size = int(max(s.cfg.ActiveMapBytes, s.size.Load()))
	}
	if size == 0 || s.refs.Load() <= 0 {
		return nil
	}
	if lim := readMappingLimit.Load(); lim > 0 && liveMappings.Load() >= lim {
		return nil // the mapping budget is kept for indexes: pread
	}
	r, err := s.pinLog()
	if err != nil {
		return nil // fall back to pread (which reports the error)
	}
	m, err := mmap.MapRegion(r.f.OS(), size, mmap.RDONLY, 0, 0)
	r.unpin() // the mapping holds the file; the descriptor may go
	if err != nil {
		return nil // fall back to pread
	}
	liveMappings.Add(1)
	_ = unix.Madvise(m, unix.MADV_RANDOM)
	s.mapping.Store(&m)
	return &m
}

// TranslateOffset finds the first batch at or after startPos whose last offset is >= offset,
// starting from the offset index's entry for offset. It returns the batch's position and header;
// found is false when no batch of the segment reaches offset.
func (s *Segment) TranslateOffset(offset int64) (pos int64, h record.Header, found bool, err error) {
	return s.translate(offset, true)
}

// LookupBatch is TranslateOffset for a one-off lookup (opening a log: the producer-state replay,
// the leader epoch check): it uses the read mapping if there is one but does not make the active
// segment's, so an idle partition keeps only its index mappings after a restart.
func (s *Segment) LookupBatch(offset int64) (pos int64, h record.Header, found bool, err error) {
	return s.translate(offset, false)
}

func (s *Segment) translate(offset int64, mapActive bool) (pos int64, h record.Header, found bool, err error) {
	if p := s.pinIndexes(); p != nil {
		_, pos = p.offset.Lookup(offset)
		p.unpin()
	}
	m := s.mapping.Load()
	if m == nil && (mapActive || s.sealed.Load()) {
		m = s.readMapping()
	}
	if m != nil {
		var done bool
		pos, h, found, done, err = s.scanMapped(*m, pos, offset)
		if s.sealed.Load() {
			s.dropScanned(*m, pos)
		}
		if done || err != nil {
			return pos, h, found, err
		}
		// The rest lies beyond the mapping: continue with pread.
	}
	for {
		h, err = s.ReadHeaderAt(pos)
		if err == io.EOF {
			return pos, h, false, nil
		}
		if err != nil {
			return pos, h, false, err
		}
		if h.LastOffset() >= offset {
			return pos, h, true, nil
		}
		pos += h.Size()
	}
}

// FindTimestamp returns the first batch holding an offset >= startOffset (the log start) whose
// max timestamp is >= ts, starting from the time index's entry before ts, as Kafka's
// findOffsetByTimestamp does. found is false when no such batch is in the segment.
func (s *Segment) FindTimestamp(ts, startOffset int64) (pos int64, h record.Header, found bool, err error) {
	off := s.baseOffset
	if p := s.pinIndexes(); p != nil {
		_, off = p.time.LookupBefore(ts)
		p.unpin()
	}
	pos, _, found, err = s.TranslateOffset(max(off, startOffset))
	if err != nil || !found {
		return pos, h, found, err
	}
	for {
		h, err = s.ReadHeaderAt(pos)
		if err == io.EOF {
			return pos, h, false, nil
		}
		if err != nil {
			return pos, h, false, err
		}
		if h.MaxTimestamp >= ts {
			return pos, h, true, nil
		}
		pos += h.Size()
	}
}

// Acquire takes a reader reference. It fails once the segment's files are closed.
func (s *Segment) Acquire() bool {
	return addIfLive(&s.refs)
}

// addIfLive adds one to a reference count unless it has already dropped to zero (the thing it
// counts is closed, and a count never comes back from zero). Used by segment references, index
// pins and descriptor pins.
func addIfLive(c *atomic.Int32) bool {
	for {
		n := c.Load()
		if n <= 0 {
			return false
		}
		if c.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release drops a reference; the last one closes the files.
func (s *Segment) Release() {
	if s.refs.Add(-1) == 0 {
		s.closeFiles()
	}
}

func (s *Segment) closeFiles() {
	if m := s.mapping.Swap(nil); m != nil {
		_ = m.Unmap()
		liveMappings.Add(-1)
	}
	for _, m := range s.retired {
		_ = m.Unmap()
		liveMappings.Add(-1)
	}
	s.retired = nil
	liveSegments.Add(-1)
	s.closeIndexes()
	s.closeLog()
}

// Slice is a byte range of a segment's .log, sent with sendfile. It holds a reference on the
// segment and a pin on the .log's descriptor until Release: File stays open (even if the segment's
// descriptor is evicted from the cache, or its file renamed or unlinked) until then, however long
// after the request handler the response writer sends it.
type Slice struct {
	seg      *Segment
	ref      *fileRef
	File     *os.File
	Position int64
	Length   int64
}

// Release returns the slice's descriptor pin and segment reference. A zero Slice is a no-op.
func (sl *Slice) Release() {
	if sl.ref != nil {
		sl.ref.unpin()
		sl.ref = nil
	}
	if sl.seg != nil {
		sl.seg.Release()
		sl.seg = nil
	}
}

// Slice returns the bytes [pos, pos+length) as a file slice holding a new reference and a pin on
// the descriptor (reopened if it was evicted), or false if the segment is already closed or its
// .log cannot be opened again (no descriptor left; the reader treats it like a closed segment).
func (s *Segment) Slice(pos, length int64) (Slice, bool) {
	if !s.Acquire() {
		return Slice{}, false
	}
	r, err := s.pinLog()
	if err != nil {
		s.Release()
		return Slice{}, false
	}
	return Slice{seg: s, ref: r, File: r.f.OS(), Position: pos, Length: length}, true
}

// scanMapped walks batch headers in a mapping from pos until one whose last offset is >= offset,
// with one fault guard for the whole walk (a truncation racing the scan becomes an error). done
// is false when the walk reached the end of the mapping before the end of the segment.
func (s *Segment) scanMapped(m mmap.MMap, pos, offset int64) (_ int64, h record.Header, found, done bool, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("read mapped segment %s at %d: %v", s.name, pos, r)
		}
	}()
	size := s.size.Load()
	limit := min(size, int64(len(m)))
	for {
		if pos+record.HeaderSize > limit {
			return pos, h, false, pos+record.HeaderSize > size, nil
		}
		h, err = record.ParseHeader(m[pos : pos+record.HeaderSize])
		if err != nil {
			return pos, h, false, true, err
		}
		if h.BatchLength < record.HeaderSize-record.LogOverhead {
			return pos, h, false, true, fmt.Errorf("segment %s: batch at %d has length %d: %w", s.name, pos, h.BatchLength, kerr.CorruptMessage)
		}
		if h.LastOffset() >= offset {
			return pos, h, true, true, nil
		}
		pos += h.Size()
	}
}

// ReadBatchAt reads the whole batch whose header is h at pos (a small control batch, for the
// log's producer-state replay). It allocates.
func (s *Segment) ReadBatchAt(pos int64, h *record.Header) ([]byte, error) {
	if h.Size() > 1<<20 {
		return nil, fmt.Errorf("read batch of %d bytes at %d of %s: too large", h.Size(), pos, s.name)
	}
	b := make([]byte, h.Size())
	if err := s.readAt(b, pos); err != nil {
		return nil, err
	}
	return b, nil
}
