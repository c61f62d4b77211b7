package engine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"

	"github.com/weir-mq/weir/index"
	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// OpenOptions says how to open one partition log.
type OpenOptions struct {
	FS        vfs.FS // nil = vfs.OS
	LogDir    *LogDir
	Dir       string // the partition directory, <log dir>/<topic>-<partition>
	Topic     string
	Partition int32
	Config    Config
	// CleanShutdown is true when the log dir's clean-shutdown marker was present: nothing is
	// scanned. Otherwise segments from the one holding RecoveryPoint on are recovered.
	CleanShutdown bool
	// RecoveryPoint and LogStartOffset come from the log dir's checkpoint files (0 when absent).
	RecoveryPoint  int64
	LogStartOffset int64
	// Budget, when set, refuses rolls that would take the process's segments past it.
	Budget *Budget
	// CleanerCheckpoint comes from the log dir's cleaner-offset-checkpoint (0 when absent): the
	// first offset compaction has not reached.
	CleanerCheckpoint int64
}

// OpenLog opens the partition log in o.Dir, creating the directory and a first segment if needed,
// and recovers it as OpenOptions says.
func OpenLog(o OpenOptions) (*Log, error) {
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.LogDir == nil {
		o.LogDir = NewLogDir(filepath.Dir(o.Dir))
	}
	o.Config.fillDefaults()
	l := &Log{dir: o.Dir, topic: o.Topic, partition: o.Partition, fsys: o.FS, logDir: o.LogDir, budget: o.Budget, rebuildTxnFrom: -1}
	l.cfg.Store(&o.Config)
	l.clean.cleanedTo.Store(max(o.CleanerCheckpoint, 0))
	if err := o.FS.MkdirAll(o.Dir, vfs.DirMode); err != nil {
		return nil, fmt.Errorf("open log %s: %w", o.Dir, err)
	}
	segs, loaded, err := l.openSegments(o)
	if err != nil {
		return nil, err
	}
	if len(segs) == 0 {
		start := max(o.LogStartOffset, 0)
		s, err := segment.Create(o.FS, o.Dir, start, o.Config.segmentConfig(), o.Config.now())
		if err != nil {
			return nil, fmt.Errorf("open log %s: %w", o.Dir, err)
		}
		if err := o.FS.SyncDir(o.Dir); err != nil {
			s.Close()
			return nil, fmt.Errorf("open log %s: %w", o.Dir, err)
		}
		segs = append(segs, s)
	} else if segs, err = l.loadSegments(segs, loaded, o); err != nil {
		for _, s := range segs {
			s.Close()
		}
		return nil, err
	}
	last := segs[len(segs)-1]
	l.active = last
	l.rollJitterMs = o.Config.randomSegmentJitter()
	l.nextOffset = last.NextOffset()
	l.segments.Store(&segs)
	l.end.store(l.nextOffset, last.BaseOffset(), last.Size())
	l.hw.store(l.nextOffset, last.BaseOffset(), last.Size())
	start := max(o.LogStartOffset, segs[0].BaseOffset())
	start = min(start, l.nextOffset)
	l.logStartOffset.Store(start)
	if err := l.checkTxnIndexes(); err != nil {
		for _, s := range segs {
			s.Close()
		}
		return nil, err
	}
	if err := l.loadProducerState(nil); err != nil {
		for _, s := range segs {
			s.Close()
		}
		return nil, err
	}
	for _, s := range segs { // .txnindex entries the replay wrote again are made durable
		if err := s.SyncTxnIndex(); err != nil {
			for _, s := range segs {
				s.Close()
			}
			return nil, fmt.Errorf("open log %s: %w", l.dir, err)
		}
	}
	if err := l.loadEpochs(); err != nil {
		for _, s := range segs {
			s.Close()
		}
		return nil, err
	}
	l.flush.init(l, l.nextOffset)
	// Everything loaded is durable (a clean shutdown, a recovery, or a new empty segment): the
	// active segment's descriptor and indexes may go to the caches at once (segment/fdcache.go),
	// so opening more partitions than descriptors works; the first append takes them back.
	last.Settle()
	return l, nil
}

// checkTxnIndexes checks the .txnindex files found at open (Kafka's sanity check). From the first
// corrupt one, or the first segment recovery rebuilt, on, the indexes are emptied, and the
// producer snapshots after that segment's base offset removed: the replay of loadProducerState
// then starts at or before it and writes the entries again from the markers.
func (l *Log) checkTxnIndexes() error {
	rebuildFrom := l.rebuildTxnFrom
	for _, s := range l.Segments() {
		if rebuildFrom >= 0 && s.BaseOffset() >= rebuildFrom {
			break // rebuilt anyway
		}
		if !l.txnIndexed[s.BaseOffset()] {
			continue
		}
		if err := s.CheckTxnIndex(); err != nil {
			slog.Warn("aborted transaction index unreadable; rebuilding it from the markers", "segment", s.LogPath(), "err", err)
			if err := s.ResetTxnIndex(); err != nil {
				return fmt.Errorf("open log %s: %w", l.dir, err)
			}
			rebuildFrom = s.BaseOffset()
			break // the later ones are rebuilt too
		}
	}
	l.txnIndexed = nil
	if rebuildFrom < 0 {
		return nil
	}
	for _, s := range l.Segments() {
		if s.BaseOffset() >= rebuildFrom {
			if err := s.ResetTxnIndex(); err != nil {
				return fmt.Errorf("open log %s: %w", l.dir, err)
			}
		}
	}
	if err := l.snaps.removeAbove(l.fsys, l.dir, rebuildFrom); err != nil {
		return fmt.Errorf("open log %s: %w", l.dir, err)
	}
	return nil
}

// loadProducerState loads the newest producer snapshot at or below the log end and replays the
// batch headers after it (and the markers' records). Called at open (prev nil) and, with the
// append lock held, by TruncateTo with the state it replaces: a producer this process saw write
// keeps its monotonic reading through the rebuild, so a wall clock stepped past
// producer.id.expiration.ms does not forget a producer that is writing (see expire).
func (l *Log) loadProducerState(prev *producerState) error {
	ps, from, err := l.snaps.loadLatest(l.fsys, l.dir, l.nextOffset)
	if err != nil {
		return fmt.Errorf("load producer state of %s: %w", l.dir, err)
	}
	l.producers = ps
	// Producers whose last write is older than producer.id.expiration.ms are not brought back
	// (Kafka's loadFromSnapshot skips them; those replayed below go too).
	l.replaying = true
	defer func() {
		l.replaying = false
		if prev != nil {
			for id, e := range ps.producers {
				if old, ok := prev.producers[id]; ok && old.appendSeen && !e.appendSeen {
					e.lastAppendNanos, e.appendSeen = old.lastAppendNanos, true
				}
			}
		}
		cfg := l.config()
		ps.expire(cfg.now().UnixMilli(), cfg.nanotime(), cfg.ProducerIDExpirationMs)
		l.publishTxnViewLocked()
	}()
	if from >= l.nextOffset {
		return nil
	}
	for _, s := range l.Segments() {
		if s.NextOffset() <= from && s != l.active {
			continue
		}
		pos := int64(0)
		if from > s.BaseOffset() {
			p, _, found, err := s.LookupBatch(from)
			if err != nil {
				return fmt.Errorf("replay producer state of %s: %w", l.dir, err)
			}
			if !found {
				continue
			}
			pos = p
		}
		for {
			h, err := s.ReadHeaderAt(pos)
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("replay producer state of %s: %w", l.dir, err)
			}
			if h.LastOffset() >= from {
				// Data batches through the producer table; markers complete transactions
				// and put back any .txnindex entry a crash lost (recovery cut the
				// entries of markers that did not survive).
				var b []byte
				if h.IsControl() {
					if b, err = s.ReadBatchAt(pos, &h); err != nil {
						return fmt.Errorf("replay producer state of %s: %w", l.dir, err)
					}
				}
				if err := l.applyBatchToSegment(s, b, &h); err != nil {
					return fmt.Errorf("replay producer state of %s: %w", l.dir, err)
				}
			}
			pos += h.Size()
		}
	}
	return nil
}

// openSegments opens every segment file of the directory, sorted by base offset, and removes
// leftovers: files marked .deleted or .cleaned, and indexes without a .log. A .swap left by a
// cleaner's interrupted swap is finished first (cleaner_swap.go).
//
// The segments that need no recovery and are not the last (after a clean shutdown, all but the
// last; after a crash, those wholly below the segment holding the recovery point) are opened
// sealed (segment.OpenSealed: the .log descriptor only, state from a look at the index files,
// indexes mapped on first use) and reported loaded; one whose indexes fail the sanity check is
// opened whole and left to loadSegments, which recovers it.
func (l *Log) openSegments(o OpenOptions) ([]*segment.Segment, []bool, error) {
	if err := l.completeSwaps(); err != nil {
		return nil, nil, err
	}
	entries, err := l.fsys.ReadDir(l.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("list log %s: %w", l.dir, err)
	}
	l.snaps.seed(entries)
	logs := map[int64]bool{}
	var bases []int64
	for _, e := range entries {
		if base, ok := segment.ParseFileName(e.Name(), segment.LogSuffix); ok {
			logs[base] = true
			bases = append(bases, base)
		}
	}
	l.txnIndexed = map[int64]bool{}
	for _, e := range entries {
		if base, ok := segment.ParseFileName(e.Name(), segment.TxnIndexSuffix); ok && logs[base] {
			l.txnIndexed[base] = true
		}
	}
	for _, e := range entries {
		name := e.Name()
		stray := strings.HasSuffix(name, segment.DeletedSuffix) || strings.HasSuffix(name, segment.CleanedSuffix)
		for _, suffix := range []string{segment.IndexSuffix, segment.TimeIndexSuffix, segment.TxnIndexSuffix} {
			if base, ok := segment.ParseFileName(name, suffix); ok && !logs[base] {
				stray = true
			}
		}
		if stray {
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("remove leftover %s: %w", name, err)
			}
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	sealedBelow := len(bases) - 1 // clean shutdown: every segment but the last
	if !o.CleanShutdown {
		sealedBelow = firstUnflushedSegment(bases, o.RecoveryPoint)
	}
	segs := make([]*segment.Segment, 0, len(bases))
	loaded := make([]bool, len(bases))
	fail := func(err error) ([]*segment.Segment, []bool, error) {
		for _, s := range segs {
			s.Close()
		}
		return nil, nil, err
	}
	cfg := l.config().segmentConfig()
	for i, b := range bases {
		if i < sealedBelow {
			s, err := segment.OpenSealed(l.fsys, l.dir, b, cfg, bases[i+1])
			if err == nil {
				segs = append(segs, s)
				loaded[i] = true
				continue
			}
			if !errors.Is(err, index.ErrCorruptIndex) {
				return fail(err)
			}
			slog.Warn("index failed sanity check; rebuilding", "dir", l.dir, "segment", b, "err", err)
		}
		s, err := segment.Open(l.fsys, l.dir, b, cfg)
		if err != nil {
			return fail(err)
		}
		segs = append(segs, s)
	}
	return segs, loaded, nil
}

// firstUnflushedSegment returns the index of the segment holding the recovery point (the last one whose
// base is at or below it), 0 if there is none: after a crash it and every later segment are
// recovered.
func firstUnflushedSegment(bases []int64, recoveryPoint int64) int {
	return max(sort.Search(len(bases), func(i int) bool { return bases[i] > recoveryPoint })-1, 0)
}

// loadSegments restores every segment's state: after a clean shutdown from the indexes (the last
// segment also reads the few batches after its last index entry); after a crash, segments from the
// one holding the recovery point on are recovered, and everything after a torn or corrupt batch is
// deleted. A segment whose index fails its sanity check is recovered in either case.
func (l *Log) loadSegments(segs []*segment.Segment, loaded []bool, o OpenOptions) ([]*segment.Segment, error) {
	firstUnflushed := len(segs)
	if !o.CleanShutdown {
		bases := make([]int64, len(segs))
		for i, s := range segs {
			bases[i] = s.BaseOffset()
		}
		firstUnflushed = firstUnflushedSegment(bases, o.RecoveryPoint)
	}
	for i, s := range segs {
		if loaded[i] {
			continue // opened sealed by openSegments
		}
		isLast := i == len(segs)-1
		needRecovery := i >= firstUnflushed
		if !needRecovery {
			if err := s.SanityCheck(); err != nil {
				slog.Warn("index failed sanity check; rebuilding", "segment", s.LogPath(), "err", err)
				needRecovery = true
			}
		}
		if !needRecovery {
			if isLast {
				if err := s.LoadTail(); err != nil {
					slog.Warn("segment tail unreadable; recovering", "segment", s.LogPath(), "err", err)
					needRecovery = true
				}
			} else {
				s.LoadSealed(segs[i+1].BaseOffset())
			}
		}
		if !needRecovery {
			continue
		}
		// Past a crash, the batches wholly below the recovery point were flushed: their CRC is
		// not checked again (RecoverTailFrom). A segment recovered because its index failed the
		// sanity check is checked whole.
		from := s.BaseOffset()
		if !o.CleanShutdown && i >= firstUnflushed {
			from = max(o.RecoveryPoint, from)
		}
		res, err := s.RecoverTailFrom(from)
		if err != nil {
			return segs, fmt.Errorf("recover %s: %w", s.LogPath(), err)
		}
		// As Kafka's recoverSegment, the aborted transaction index of a recovered segment is
		// rebuilt from its markers: loadProducerState replays from at or before it
		// (checkTxnIndexes drops the snapshots after it).
		if err := s.ResetTxnIndex(); err != nil {
			return segs, fmt.Errorf("recover %s: %w", s.LogPath(), err)
		}
		if l.rebuildTxnFrom < 0 {
			l.rebuildTxnFrom = s.BaseOffset()
		}
		// What recovery kept becomes durable before the recovery point passes it. A segment that
		// holds only flushed bytes and lost nothing has nothing to make durable: an idle log is
		// not synced again (one fdatasync per partition at every restart after a crash).
		if res.Checked > 0 || res.Truncated > 0 {
			if err := s.Sync(); err != nil {
				return segs, fmt.Errorf("recover %s: %w", s.LogPath(), err)
			}
		}
		truncated := res.Truncated
		if res.ZeroTail {
			// Only zeros after the last batch: the unused end of a preallocated segment
			// (preallocate) that a crash left untrimmed. Nothing was torn: the segment simply
			// ends there, as if the file did.
			slog.Info("trimmed the unused end of a preallocated segment", "segment", s.LogPath(), "bytes", truncated)
			truncated = 0
		} else if truncated > 0 {
			slog.Warn("truncated torn or corrupt tail", "segment", s.LogPath(), "bytes", truncated)
		}
		if truncated > 0 || (!isLast && segs[i+1].BaseOffset() < s.NextOffset()) {
			for _, later := range segs[i+1:] {
				slog.Warn("deleting segment after a truncated one", "segment", later.LogPath())
				if err := later.Delete(); err != nil {
					return segs[:i+1], err
				}
			}
			segs = segs[:i+1]
			if err := l.fsys.SyncDir(l.dir); err != nil {
				return segs, fmt.Errorf("recover %s: %w", l.dir, err)
			}
			break
		}
		if !isLast {
			if err := s.MarkInactive(); err != nil {
				return segs, err
			}
			if err := s.Seal(); err != nil {
				return segs, err
			}
		}
	}
	return segs, nil
}
