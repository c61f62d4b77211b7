package engine

// Log compaction (cleanup.policy=compact), after Kafka's LogCleaner.
//
// A log's sealed segments fall in two sections: the clean section below the cleaner checkpoint
// (cleanedTo, Kafka's cleaner-offset-checkpoint entry) and the dirty section from there to the
// first uncleanable offset: the smallest of the active segment's base offset, the high watermark,
// the recovery point (only fdatasync'd, sealed segments are rewritten) and the first dirty segment
// whose newest record is younger than min.compaction.lag.ms. Only whole segments below that
// offset are cleanable; the active segment never is.
//
// One cleaning (Cleaner.Clean):
//  1. Builds the offset map over the dirty section: key -> offset of its latest record, in offset
//     order. The map has a fixed memory bound (cleaner_offsetmap.go); when it fills, the cleaning
//     ends at the record that did not fit (end), and the next cleaning starts there.
//  2. Rewrites every segment overlapping [log's first segment, end), grouped so that a group's
//     input fits segment.bytes, its offsets fit int32 relative offsets and its index entries fit
//     segment.index.bytes. A record survives unless it has no key (Kafka drops those), a later
//     record with its key is in the map, or it is a tombstone (null value) whose batch's delete
//     horizon has passed. Offsets never change: a rewritten batch keeps its base offset, its last
//     offset delta (so its producer's sequence range survives), producer fields and leader epoch,
//     and each kept record keeps its offset delta; only the record count, the timestamps and the
//     CRC change. The records are re-encoded with the batch's own codec (kgo's compressors) so a
//     compressed topic stays compressed. Batches nothing was removed from are copied byte for
//     byte. A batch left empty is dropped, except the last batch of a producer the producer
//     table still knows, which is kept as a bare header (as Kafka does: a restart that replays
//     batch headers still finds the producer's last sequence). Control batches and
//     transactions: see below and cleaner_txn.go. A batch whose records cannot be read (bad
//     compressed payload, or past the decompression bound) is copied unchanged and adds nothing
//     to the map: never lost, never compacted. A batch failing its CRC stops the cleaning of
//     that log (as Kafka marks it uncleanable).
//  3. Tombstones, KIP-534: the first cleaning that keeps a tombstone rewrites its batch with the
//     delete-horizon attribute (bit 6) and baseTimestamp = now + delete.retention.ms (record
//     timestamp deltas re-based so every record keeps its timestamp); a later cleaning after the
//     horizon drops the tombstones of that batch. A consumer that reads from the start within
//     delete.retention.ms of the cleaning therefore sees every delete.
//  4. Swaps each group in crash-safely (cleaner_swap.go) and, after the last group, advances the
//     checkpoint to end.
//
// Transactions (cleaner_txn.go), as Kafka: the cleanable section ends at the last stable offset
// at the latest; aborted transactions' batches are dropped and map nothing; committed
// transactional records are compacted like others; markers stay while their transaction has a
// batch left, then once more with a delete horizon, then go; the cleaned segment's .txnindex holds
// the aborted transactions whose marker stays.
//
// The invariant that makes every intermediate state safe: a record is dropped only when a record
// with its key and a higher offset is kept (or it is an expired tombstone). A crash between two
// groups leaves some groups cleaned and others not: nothing is lost.
//
// Memory is bounded by the offset map, one read buffer and one write buffer (grown to the
// largest batch, itself bounded by max.message.bytes) and one batch's decompressed records
// (decompressLimit). I/O is bounded by IOMaxBytesPerSecond (bytes read plus written).

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

// Defaults of the cleaner's configuration (Kafka's).
const (
	DefaultCleanerDedupeBufferSize = 128 << 20 // log.cleaner.dedupe.buffer.size
	DefaultCleanerIOBufferSize     = 512 << 10 // log.cleaner.io.buffer.size
	DefaultCleanerBackoff          = 15 * time.Second
)

// CleanerConfig configures one Cleaner.
type CleanerConfig struct {
	// DedupeBufferSize bounds the offset map's memory in bytes (24 bytes per key; 0 = 128 MiB).
	DedupeBufferSize int64
	// IOBufferSize is the size of the read buffer and of the write buffer (0 = 512 KiB). Both
	// grow to the largest batch met.
	IOBufferSize int
	// IOMaxBytesPerSecond bounds the bytes read plus written per second (0 = unbounded).
	IOMaxBytesPerSecond float64
	// Stop, when closed, makes a cleaning in progress give up at its next batch.
	Stop <-chan struct{}
}

// CleanStats describes one cleaning.
type CleanStats struct {
	// FirstDirtyOffset is where the dirty section began; EndOffset is the new cleaner checkpoint:
	// every record below it was compacted against every later record below it.
	FirstDirtyOffset, EndOffset int64
	// Segments is the number of segments rewritten, Groups the number of segments written.
	Segments, Groups int
	BytesRead        int64
	BytesWritten     int64
	RecordsRead      int64
	RecordsKept      int64
	// MapKeys is the number of distinct keys in the offset map.
	MapKeys  int
	Duration time.Duration
}

var (
	// errCleanAborted reports a cleaning given up because the log changed under it (truncated,
	// segments deleted by retention, closed) or the cleaner was stopped. Nothing was changed.
	errCleanAborted = errors.New("cleaning abandoned: the log changed or the cleaner stopped")
	// errCleanerCorrupt reports a stored batch failing its checks.
	errCleanerCorrupt = errors.New("corrupt batch in a segment being cleaned")
)

// cleanState is a Log's compaction state.
type cleanState struct {
	// cleanedTo is the cleaner checkpoint: the first dirty offset. Written under the log's
	// structMu (by the cleaner, by TruncateTo) or at open.
	cleanedTo atomic.Int64
	// truncations counts TruncateTo calls: a cleaning that started under another count gives up.
	truncations atomic.Int64
	// uncleanableUntil (Config.Nanotime, monotonic ns): after a cleaning error other than a storage error the
	// Manager's cleaner leaves the log alone until then.
	uncleanableUntil atomic.Int64
}

// truncated is TruncateTo's hook, called under structMu before anything changes.
func (c *cleanState) truncated(offset int64) {
	c.truncations.Add(1)
	if c.cleanedTo.Load() > offset {
		c.cleanedTo.Store(offset)
	}
}

// CleanerCheckpoint is the log's cleaner checkpoint (the first offset not yet cleaned).
func (l *Log) CleanerCheckpoint() int64 { return l.clean.cleanedTo.Load() }

// Cleaner compacts logs, one at a time. It owns the offset map and the I/O buffers; it is not
// safe for concurrent use (run one per cleaner thread).
type Cleaner struct {
	cfg      CleanerConfig
	offsets  *offsetMap
	throttle *ioThrottle
	codec    batchCodec
	rd       record.Reader // the records of one batch, streamed and bounded
	reader   segmentReader
	out      []byte
	recs     []byte
	retimed  []byte
	changed  bool // a batch of the group being written was not copied whole
	// index adds an aborted transaction to the .txnindex of the segment being written.
	index func(AbortedTxn) error
	// testHook, when set, is called at each step of a swap; an error stops the cleaning there.
	testHook func(step string) error
}

// NewCleaner returns a cleaner. The offset map is allocated on first use.
func NewCleaner(cfg CleanerConfig) *Cleaner {
	if cfg.DedupeBufferSize <= 0 {
		cfg.DedupeBufferSize = DefaultCleanerDedupeBufferSize
	}
	if cfg.IOBufferSize <= 0 {
		cfg.IOBufferSize = DefaultCleanerIOBufferSize
	}
	return &Cleaner{cfg: cfg, offsets: newOffsetMap(cfg.DedupeBufferSize), throttle: newIOThrottle(cfg.IOMaxBytesPerSecond)}
}

// MapCapacity is the number of distinct keys one cleaning can map.
func (c *Cleaner) MapCapacity() int { return c.offsets.capacity() }

// cleanRange is a log's cleanable section, as seen at one moment.
type cleanRange struct {
	// segs are the log's segments from the first through the last cleanable one; nextBases[i]
	// is the base offset of the segment after segs[i].
	segs      []*segment.Segment
	nextBases []int64
	// firstDirty is the cleaner checkpoint, clamped to [log start, log end].
	firstDirty int64
	// end is the first uncleanable offset (the next base of the last cleanable segment).
	end                    int64
	cleanBytes, dirtyBytes int64
	truncations            int64
	// compactionDelayMs is how far past max.compaction.lag.ms the oldest dirty record is (Kafka's
	// LogCleanerManager.maxCompactionDelay), 0 when none is: a positive delay makes the log
	// cleanable whatever its dirty ratio (KIP-354).
	compactionDelayMs int64
}

// cleanable reports whether the cleaner should clean the log now (Kafka's grabFilthiestCompactedLog
// filter): its dirty ratio is above min.cleanable.dirty.ratio, or a dirty record is older than
// max.compaction.lag.ms and there is something cleanable.
func (r *cleanRange) cleanable(cfg *Config) bool {
	if r.dirtyBytes == 0 {
		return false
	}
	return r.compactionDelayMs > 0 || r.dirtyRatio() > cfg.MinCleanableDirtyRatio
}

// dirtyRatio is dirty bytes / cleanable bytes.
func (r *cleanRange) dirtyRatio() float64 {
	if r.dirtyBytes == 0 {
		return 0
	}
	return float64(r.dirtyBytes) / float64(r.cleanBytes+r.dirtyBytes)
}

// cleanableRange computes the log's cleanable section without locks (the segment list and
// offsets are published atomically; the swap re-checks everything under the structure lock).
func (l *Log) cleanableRange(nowMs int64) cleanRange {
	r := cleanRange{truncations: l.clean.truncations.Load()}
	cfg := l.config()
	segs := l.Segments()
	start := l.LogStartOffset()
	r.firstDirty = max(l.clean.cleanedTo.Load(), start)
	if r.firstDirty > l.LogEndOffset() {
		r.firstDirty = start // a checkpoint from before a truncation or a recreated topic
	}
	r.end = r.firstDirty
	r.compactionDelayMs = maxCompactionDelay(cfg, segs, r.firstDirty, nowMs)
	// Kafka's firstUncleanableOffset: also the last stable offset, so that every transaction
	// with data in the section is decided.
	bound := min(l.HighWatermark(), l.RecoveryPoint(), l.LastStableOffset())
	for i := 0; i < len(segs)-1; i++ {
		s, next := segs[i], segs[i+1].BaseOffset()
		if next > bound {
			break
		}
		dirty := next > r.firstDirty
		if dirty && cfg.MinCompactionLagMs > 0 && s.MaxTimestamp() > nowMs-cfg.MinCompactionLagMs {
			break
		}
		r.segs = append(r.segs, s)
		r.nextBases = append(r.nextBases, next)
		r.end = max(r.end, next)
		if dirty {
			r.dirtyBytes += s.Size()
		} else {
			r.cleanBytes += s.Size()
		}
	}
	return r
}

// maxCompactionDelay is Kafka's LogCleanerManager.maxCompactionDelay: with max.compaction.lag.ms
// set, how long ago the oldest dirty sealed segment's first batch (its max timestamp, Kafka's
// getFirstBatchTimestamp; unknown or non-positive ones are skipped) passed the lag, or 0.
func maxCompactionDelay(cfg *Config, segs []*segment.Segment, firstDirty, nowMs int64) int64 {
	if cfg.MaxCompactionLagMs <= 0 || cfg.MaxCompactionLagMs == math.MaxInt64 {
		return 0 // no bound: nothing to read
	}
	cleanUntil := nowMs - cfg.MaxCompactionLagMs
	earliest := int64(math.MaxInt64)
	for i := 0; i < len(segs)-1; i++ { // sealed segments only, as Kafka's nonActiveLogSegmentsFrom
		if segs[i+1].BaseOffset() <= firstDirty {
			continue // wholly clean
		}
		if ts := segs[i].FirstBatchMaxTimestamp(); ts > 0 && ts < earliest {
			earliest = ts
		}
	}
	if earliest < cleanUntil {
		return cleanUntil - earliest
	}
	return 0
}

// cleanContext is what the filtering of one cleaning needs.
type cleanContext struct {
	nowMs       int64
	horizonMs   int64 // delete horizon given to batches whose tombstones are kept for the first time
	producers   map[int64]int64
	limit       int // decompression bound
	maxBatch    int // largest stored batch read
	truncations int64
	// txns follows the transactions of the section being rewritten (cleaner_txn.go).
	txns *cleanedTxns
}

// Clean compacts the cleanable section of l once: one offset map's worth of the dirty section,
// and the whole clean section below it. It does nothing for a log whose policy lacks compact.
// With no dirty section it still rewrites the clean section (dropping expired tombstones).
// Errors: errCleanAborted when the log changed under it (nothing lost; try again later), a
// KAFKA_STORAGE_ERROR after an I/O failure (the log dir is offline), otherwise a problem of the
// log's data (a corrupt batch).
func (c *Cleaner) Clean(l *Log) (CleanStats, error) {
	started := time.Now()
	var st CleanStats
	cfg := l.config()
	if !cfg.PolicyCompact() {
		return st, nil
	}
	if err := l.logDir.Err(); err != nil {
		return st, err
	}
	nowMs := cfg.now().UnixMilli()
	r := l.cleanableRange(nowMs)
	st.FirstDirtyOffset, st.EndOffset = r.firstDirty, r.firstDirty
	if len(r.segs) == 0 {
		return st, nil
	}
	held := make([]*segment.Segment, 0, len(r.segs))
	defer func() {
		for _, s := range held {
			s.Release()
		}
	}()
	for _, s := range r.segs {
		if !s.Acquire() {
			return st, errCleanAborted // deleted since the list was read
		}
		held = append(held, s)
	}
	ctx := &cleanContext{
		nowMs:       nowMs,
		horizonMs:   nowMs + cfg.DeleteRetentionMs,
		limit:       decompressLimit(cfg),
		maxBatch:    max(cfg.MaxMessageBytes, c.cfg.IOBufferSize),
		truncations: r.truncations,
	}
	end, err := c.buildOffsetMap(l, &r, ctx, &st)
	if err != nil {
		return st, err
	}
	st.EndOffset = end
	st.MapKeys = c.offsets.entries
	ctx.producers = l.producerLastOffsets()
	var cleanable []*segment.Segment
	var nextBases []int64
	for i, s := range r.segs {
		if s.BaseOffset() < end {
			cleanable = append(cleanable, s)
			nextBases = append(nextBases, r.nextBases[i])
		}
	}
	if len(cleanable) > 0 {
		aborted, err := l.cleanerAborted(cleanable[0].BaseOffset(), nextBases[len(nextBases)-1])
		if err != nil {
			return st, c.readFailed(l, ctx, err)
		}
		ctx.txns = newCleanedTxns(aborted)
	}
	for _, g := range groupForCleaning(cleanable, nextBases, cfg) {
		if err := c.cleanGroup(l, g, ctx, &st); err != nil {
			return st, err
		}
	}
	l.structMu.Lock()
	if l.clean.truncations.Load() == r.truncations && end > l.clean.cleanedTo.Load() {
		l.clean.cleanedTo.Store(end)
	}
	l.structMu.Unlock()
	st.Duration = time.Since(started)
	return st, nil
}

// groupForCleaning splits consecutive segments into groups rewritten as one segment each: a
// group's input bytes fit segment.bytes, its offsets fit int32 relative offsets, and the index
// entries its bytes can produce fit segment.index.bytes (time index entries are the larger).
// A segment that alone breaks a bound forms its own group (it held those bytes already).
func groupForCleaning(segs []*segment.Segment, nextBases []int64, cfg *Config) [][]*segment.Segment {
	var groups [][]*segment.Segment
	maxEntries := int64(cfg.MaxIndexBytes / 12)
	for i := 0; i < len(segs); {
		base := segs[i].BaseOffset()
		size := segs[i].Size()
		j := i + 1
		for ; j < len(segs); j++ {
			n := size + segs[j].Size()
			if n > cfg.SegmentBytes || nextBases[j]-1-base > math.MaxInt32 ||
				n/int64(cfg.IndexIntervalBytes)+2 > maxEntries {
				break
			}
			size = n
		}
		groups = append(groups, segs[i:j:j])
		i = j
	}
	return groups
}

// aborted reports whether the cleaning of l must stop: the cleaner is stopping or the log was
// truncated. Checked at every batch, so it takes no lock.
func (c *Cleaner) aborted(l *Log, ctx *cleanContext) bool {
	select {
	case <-c.cfg.Stop:
		return true
	default:
	}
	return l.clean.truncations.Load() != ctx.truncations
}

// abortedOrClosed adds the check that the log was not closed (or deleted) meanwhile.
func (c *Cleaner) abortedOrClosed(l *Log, ctx *cleanContext) bool {
	if c.aborted(l, ctx) {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// ioFailed classifies an I/O error of a cleaning: expected when the log changed under it (the
// cleaning is abandoned), otherwise a storage failure that takes the log dir offline.
func (c *Cleaner) ioFailed(l *Log, ctx *cleanContext, err error) error {
	if c.abortedOrClosed(l, ctx) {
		return errCleanAborted
	}
	return l.logDir.Fail(err)
}

// buildOffsetMap maps the dirty section and returns the end of the cleaning: the offset of the
// first record that did not fit, or the end of the cleanable section.
func (c *Cleaner) buildOffsetMap(l *Log, r *cleanRange, ctx *cleanContext, st *CleanStats) (int64, error) {
	if r.firstDirty >= r.end {
		c.offsets.reset(0)
		return r.firstDirty, nil // nothing dirty: only the clean section is rewritten
	}
	c.offsets.reset(c.dirtyKeyBound(r))
	aborted, err := l.cleanerAborted(r.firstDirty, r.end)
	if err != nil {
		return 0, c.readFailed(l, ctx, err)
	}
	txns := newCleanedTxns(aborted)
	for i, s := range r.segs {
		if r.nextBases[i] <= r.firstDirty {
			continue
		}
		if c.abortedOrClosed(l, ctx) {
			return 0, errCleanAborted
		}
		c.reader.reset(s, c.cfg.IOBufferSize, ctx.maxBatch)
		for {
			batch, h, err := c.reader.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, c.readFailed(l, ctx, err)
			}
			c.throttle.add(int64(len(batch)), c.cfg.Stop)
			if c.aborted(l, ctx) {
				return 0, errCleanAborted
			}
			if h.LastOffset() < r.firstDirty {
				continue
			}
			if h.IsControl() {
				_, _ = txns.onControl(&h, batch, nil)
				continue
			}
			if txns.onBatch(&h) {
				continue // an aborted transaction's batch maps nothing (cleaner_txn.go)
			}
			if err := c.rd.Reset(batch, ctx.limit); err != nil {
				continue // unreadable records: the batch is copied whole and maps nothing
			}
			for {
				rec, err := c.rd.Next()
				if err != nil || rec.OffsetDelta > int64(h.LastOffsetDelta) || rec.OffsetDelta < 0 {
					break
				}
				offset := h.BaseOffset + rec.OffsetDelta
				if offset < r.firstDirty || !rec.HasKey {
					continue
				}
				ok, err := c.offsets.put(rec.Key, offset)
				if err != nil {
					return 0, err
				}
				if !ok {
					return offset, nil // the map is full: the cleaning ends before this record
				}
			}
		}
	}
	return r.end, nil
}

// dirtyKeyBound bounds the number of keys of the dirty section by its record count, read from
// the batch headers (through the sealed segments' mappings: no data is copied), so the offset
// map's table is no larger than the cleaning needs. It stops counting past the map's capacity.
func (c *Cleaner) dirtyKeyBound(r *cleanRange) int64 {
	var n int64
	for i, s := range r.segs {
		if r.nextBases[i] <= r.firstDirty {
			continue
		}
		for pos := int64(0); ; {
			h, err := s.ReadHeaderAt(pos)
			if err == io.EOF {
				break
			}
			if err != nil {
				return math.MaxInt64 // the cleaning will report it; size the map for anything
			}
			if h.LastOffset() >= r.firstDirty && !h.IsControl() {
				n += int64(h.RecordCount)
			}
			if n > int64(c.offsets.capacity()) {
				return n
			}
			pos += h.Size()
		}
	}
	return n
}

// readFailed classifies a read error: a corrupt batch is a problem of the log's data, anything
// else an I/O failure.
func (c *Cleaner) readFailed(l *Log, ctx *cleanContext, err error) error {
	if c.abortedOrClosed(l, ctx) {
		return errCleanAborted
	}
	if errors.Is(err, errCleanerCorrupt) {
		return err
	}
	return l.logDir.Fail(err)
}

// cleanGroup rewrites a group of segments into one cleaned segment and swaps it in. A single
// segment the cleaning would copy byte for byte is left as it is.
func (c *Cleaner) cleanGroup(l *Log, group []*segment.Segment, ctx *cleanContext, st *CleanStats) error {
	cfg := l.config()
	base := group[0].BaseOffset()
	ns, err := segment.CreateCleaned(l.fsys, l.dir, base, cfg.segmentConfig(), group[0].Created())
	if err != nil {
		return c.ioFailed(l, ctx, err)
	}
	unchanged, err := c.writeCleaned(l, ns, group, ctx, st)
	if err == nil && !unchanged {
		err = c.hook("cleaned")
	}
	if err != nil || unchanged {
		_ = ns.Delete() // still .cleaned: nothing was decided
		return err
	}
	st.Segments += len(group)
	st.Groups++
	st.BytesWritten += ns.Size()
	return l.swapCleaned(ns, group, ctx.truncations, c.hook)
}

// writeCleaned filters every batch of group into ns and makes ns durable (.log fdatasync'd,
// indexes trimmed and flushed). unchanged reports a group of one segment whose every batch was
// copied whole: ns is then left unsynced, to be discarded.
func (c *Cleaner) writeCleaned(l *Log, ns *segment.Segment, group []*segment.Segment, ctx *cleanContext, st *CleanStats) (unchanged bool, err error) {
	c.out = c.out[:0]
	c.changed = false
	// The aborted transactions whose ABORT marker stays go into the cleaned segment's .txnindex.
	c.index = func(a AbortedTxn) error {
		if err := ns.AppendAbortedTxn(a); err != nil {
			return fmt.Errorf("%w: %w", errTxnIndex, err)
		}
		return nil
	}
	defer func() { c.index = nil }()
	flush := func() error {
		if len(c.out) == 0 {
			return nil
		}
		if err := ns.AppendCleaned(c.out); err != nil {
			if errors.Is(err, segment.ErrSegmentFull) {
				return err
			}
			return c.ioFailed(l, ctx, err)
		}
		c.throttle.add(int64(len(c.out)), c.cfg.Stop)
		c.out = c.out[:0]
		return nil
	}
	for _, s := range group {
		if c.abortedOrClosed(l, ctx) {
			return false, errCleanAborted
		}
		c.reader.reset(s, c.cfg.IOBufferSize, ctx.maxBatch)
		for {
			batch, h, err := c.reader.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return false, c.readFailed(l, ctx, err)
			}
			st.BytesRead += int64(len(batch))
			c.throttle.add(int64(len(batch)), c.cfg.Stop)
			if c.aborted(l, ctx) {
				return false, errCleanAborted
			}
			if c.out, err = c.filterBatch(c.out, batch, &h, ctx, st); err != nil {
				if errors.Is(err, errTxnIndex) {
					return false, c.ioFailed(l, ctx, err)
				}
				return false, err
			}
			if len(c.out) >= c.cfg.IOBufferSize {
				if err := flush(); err != nil {
					return false, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return false, err
	}
	if !c.changed && len(group) == 1 {
		return true, nil
	}

	if err := ns.MarkInactive(); err != nil {
		return false, c.ioFailed(l, ctx, err)
	}
	if err := ns.Seal(); err != nil {
		return false, c.ioFailed(l, ctx, err)
	}
	return false, nil
}

// filterBatch appends to dst what the cleaning keeps of one stored batch (see the file comment).
func (c *Cleaner) filterBatch(dst, batch []byte, h *record.Header, ctx *cleanContext, st *CleanStats) ([]byte, error) {
	st.RecordsRead += int64(h.RecordCount)
	whole := func() ([]byte, error) {
		st.RecordsKept += int64(h.RecordCount)
		return append(dst, batch...), nil
	}
	if h.IsControl() {
		return c.filterControl(dst, batch, h, ctx, st)
	}
	if ctx.txns != nil && ctx.txns.onBatch(h) {
		// An aborted transaction's batch goes (the last batch of a producer the table still
		// knows stays as a bare header, as any emptied batch).
		c.changed = true
		if last, ok := ctx.producers[h.ProducerID]; ok && h.ProducerID >= 0 && last == h.LastOffset() {
			attrs := h.Attributes &^ (compressionMask | deleteHorizonFlag)
			return c.codec.appendBatch(dst, batch, 0, nil, attrs, h.MaxTimestamp, h.MaxTimestamp)
		}
		return dst, nil
	}
	// One pass over the records, streamed: the kept ones are copied to c.recs as they come (a
	// streamed record's bytes are valid only until the next one), the timestamps they will
	// need collected; re-encoding with a delete horizon, when needed, is a second pass over
	// the copies.
	if err := c.rd.Reset(batch, ctx.limit); err != nil {
		return whole()
	}
	hasHorizon := h.Attributes&deleteHorizonFlag != 0
	tombstonesExpired := hasHorizon && ctx.nowMs >= h.BaseTimestamp
	c.recs = c.recs[:0]
	kept, total, keptTombstone := 0, 0, false
	maxTimestamp := h.MaxTimestamp
	if !h.LogAppendTime() {
		maxTimestamp = record.NoTimestamp
	}
	for {
		rec, err := c.rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil || rec.OffsetDelta > int64(h.LastOffsetDelta) || rec.OffsetDelta < 0 {
			return whole()
		}
		total++
		offset := h.BaseOffset + rec.OffsetDelta
		if !rec.HasKey {
			continue
		}
		if latest := c.offsets.get(rec.Key); latest > offset {
			continue
		}
		if !rec.HasValue {
			if tombstonesExpired {
				continue
			}
			keptTombstone = true
		}
		if ts := h.BaseTimestamp + rec.TimestampDelta; !h.LogAppendTime() && ts > maxTimestamp {
			maxTimestamp = ts
		}
		kept++
		c.recs = append(c.recs, rec.Encoded...)
	}
	if total != int(h.RecordCount) {
		return whole()
	}
	needHorizon := keptTombstone && !hasHorizon
	if kept == total && !needHorizon {
		return whole()
	}
	c.changed = true
	st.RecordsKept += int64(kept)
	if kept == 0 {
		if last, ok := ctx.producers[h.ProducerID]; ok && h.ProducerID >= 0 && last == h.LastOffset() {
			attrs := h.Attributes &^ (compressionMask | deleteHorizonFlag)
			return c.codec.appendBatch(dst, batch, 0, nil, attrs, h.MaxTimestamp, h.MaxTimestamp)
		}
		return dst, nil
	}
	baseTimestamp, attrs := h.BaseTimestamp, h.Attributes
	if needHorizon {
		baseTimestamp, attrs = ctx.horizonMs, attrs|deleteHorizonFlag
		c.retimed = c.retimed[:0]
		for recs := c.recs; len(recs) > 0; {
			rec, n, err := nextRecord(recs)
			if err != nil {
				return whole()
			}
			recs = recs[n:]
			ts := h.BaseTimestamp + rec.timestampDelta
			c.retimed = appendRetimed(c.retimed, &rec, ts-baseTimestamp)
		}
		c.recs, c.retimed = c.retimed, c.recs
	}
	return c.codec.appendBatch(dst, batch, kept, c.recs, attrs, baseTimestamp, maxTimestamp)
}

func (c *Cleaner) hook(step string) error {
	if c.testHook != nil {
		return c.testHook(step)
	}
	return nil
}

// producerLastOffsets returns, per producer id the producer table knows, its last batch's last
// offset.
func (l *Log) producerLastOffsets() map[int64]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int64]int64, len(l.producers.producers))
	for id, e := range l.producers.producers {
		if b := e.last(); b != nil {
			out[id] = b.lastOffset
		}
	}
	return out
}

// segmentReader reads a sealed segment's batches in order through a buffer, checking each.
type segmentReader struct {
	seg      *segment.Segment // read through a pinned descriptor (segment.ReadAt)
	name     string
	size     int64
	filePos  int64 // file position of buf[0]
	buf      []byte
	lo, hi   int // valid bytes are buf[lo:hi]
	maxBatch int
}

func (r *segmentReader) reset(s *segment.Segment, bufSize, maxBatch int) {
	r.seg, r.name, r.size = s, s.LogPath(), s.Size()
	r.filePos, r.lo, r.hi, r.maxBatch = 0, 0, 0, maxBatch
	if len(r.buf) < bufSize {
		r.buf = make([]byte, bufSize)
	}
}

// fill makes at least need bytes available from buf[lo] (need <= what the file holds).
func (r *segmentReader) fill(need int) error {
	if r.hi-r.lo >= need {
		return nil
	}
	copy(r.buf, r.buf[r.lo:r.hi])
	r.filePos += int64(r.lo)
	r.hi -= r.lo
	r.lo = 0
	if need > len(r.buf) {
		r.buf = append(r.buf, make([]byte, need-len(r.buf))...)
	}
	want := min(int64(len(r.buf)), r.size-r.filePos)
	for int64(r.hi) < want {
		n, err := r.seg.ReadAt(r.buf[r.hi:want], r.filePos+int64(r.hi))
		r.hi += n
		if err != nil && !(err == io.EOF && int64(r.hi) >= want) {
			if err == io.EOF {
				return fmt.Errorf("read segment %s: %d bytes short: %w", r.name, want-int64(r.hi), errCleanerCorrupt)
			}
			return fmt.Errorf("read segment %s: %w", r.name, err)
		}
	}
	if r.hi-r.lo < need {
		return fmt.Errorf("segment %s: torn batch at %d: %w", r.name, r.filePos, errCleanerCorrupt)
	}
	return nil
}

// next returns the next batch (valid until the following call) or io.EOF.
func (r *segmentReader) next() ([]byte, record.Header, error) {
	pos := r.filePos + int64(r.lo)
	if pos >= r.size {
		return nil, record.Header{}, io.EOF
	}
	if err := r.fill(min(record.HeaderSize, int(r.size-pos))); err != nil {
		return nil, record.Header{}, err
	}
	h, err := record.ParseHeader(r.buf[r.lo:r.hi])
	if err != nil {
		return nil, h, fmt.Errorf("segment %s at %d: %v: %w", r.name, pos, err, errCleanerCorrupt)
	}
	size := h.Size()
	if h.BatchLength < record.HeaderSize-record.LogOverhead || size > r.size-pos {
		return nil, h, fmt.Errorf("segment %s at %d: batch length %d: %w", r.name, pos, h.BatchLength, errCleanerCorrupt)
	}
	if size > int64(r.maxBatch) {
		return nil, h, fmt.Errorf("segment %s at %d: batch of %d bytes exceeds %d (max.message.bytes): %w", r.name, pos, size, r.maxBatch, errCleanerCorrupt)
	}
	if err := r.fill(int(size)); err != nil {
		return nil, h, err
	}
	batch := r.buf[r.lo : r.lo+int(size)]
	if _, err := record.CheckStored(batch); err != nil {
		return nil, h, fmt.Errorf("segment %s at %d: %v: %w", r.name, pos, err, errCleanerCorrupt)
	}
	r.lo += int(size)
	return batch, h, nil
}

// ioThrottle bounds the cleaners' I/O rate (Kafka's Throttler): it is told of every byte read or
// written and sleeps when the rate over the current period runs ahead. Shared by a Manager's
// cleaners.
type ioThrottle struct {
	rate        float64 // bytes per second; <= 0 = unbounded
	mu          sync.Mutex
	periodStart time.Time
	bytes       int64
}

const throttleCheckPeriod = 100 * time.Millisecond

func newIOThrottle(rate float64) *ioThrottle { return &ioThrottle{rate: rate, periodStart: time.Now()} }

func (t *ioThrottle) add(n int64, stop <-chan struct{}) {
	if t.rate <= 0 {
		return
	}
	t.mu.Lock()
	t.bytes += n
	elapsed := time.Since(t.periodStart)
	if elapsed < throttleCheckPeriod && float64(t.bytes) < t.rate*throttleCheckPeriod.Seconds() {
		t.mu.Unlock()
		return
	}
	want := time.Duration(float64(t.bytes) / t.rate * float64(time.Second))
	sleep := want - elapsed
	t.bytes = 0
	t.periodStart = time.Now().Add(max(sleep, 0))
	t.mu.Unlock()
	if sleep > 0 {
		timer := time.NewTimer(sleep)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-stop:
		}
	}
}
