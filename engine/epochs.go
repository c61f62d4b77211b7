package engine

// The leader epoch cache (Kafka's LeaderEpochFileCache) and its leader-epoch-checkpoint file.
//
// Each partition keeps the start offset of every leader epoch its log holds: (epoch, startOffset)
// entries strictly increasing in both. Appends add an entry when a batch carries a newer epoch
// (Append stamps the leader's epoch; AppendStored copies the leader's), BecomeLeader adds one at
// the log end, truncation from the end drops entries at or after the new log end, and the log start
// moving up rewrites the first kept entry's start (truncateFromStart). EndOffsetForEpoch answers
// OffsetForLeaderEpoch.
//
// The file is Kafka's text format, rewritten atomically whenever the cache changes:
//
//	0
//	<entries>
//	<epoch> <startOffset>
//
// Mutations happen under the log's append lock; the file is written after that lock is released
// (epoch changes are rare), by whichever caller changed the cache, serialized by fileMu and
// skipped when a later write already covered the change. At open the file is read, truncated to
// the recovered log (from the end, then from the start, as Kafka's LogLoader does) and rebuilt
// from the batch headers when it is missing, unreadable or misses the epoch of the last batch.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
)

// LeaderEpochCheckpointFile is the per-partition leader epoch file name.
const LeaderEpochCheckpointFile = "leader-epoch-checkpoint"

// UndefinedEpoch and UndefinedEpochOffset are OffsetForLeaderEpoch's "unknown" answers
// (Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET).
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

// EpochEntry is one leader epoch and the first offset written in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// epochCache is the in-memory cache. Mutations require the owner's append lock (Log.mu or
// MemLog.mu) and take mu; readers that do not hold the append lock take mu shared.
type epochCache struct {
	// latest is the latest epoch, -1 when empty: the hot-path compare. Guarded by the owner's
	// append lock (written under mu too).
	latest int32

	mu      sync.RWMutex
	entries []EpochEntry
	gen     uint64 // bumped by every change

	// File state (disk Log only): fileMu serializes writers; written is the generation on disk;
	// closed stops writes once the log is closed (its directory may be renamed or removed).
	fileMu  sync.Mutex
	written uint64
	closed  bool
}

func (c *epochCache) reset() {
	c.mu.Lock()
	c.entries = nil
	c.latest = -1
	c.gen++
	c.mu.Unlock()
}

// setLoaded installs entries read from the file (already checked), as the on-disk state.
func (c *epochCache) setLoaded(entries []EpochEntry) {
	c.mu.Lock()
	c.entries = entries
	c.latest = -1
	if n := len(entries); n > 0 {
		c.latest = entries[n-1].Epoch
	}
	c.mu.Unlock()
}

// assignLocked records that epoch starts at startOffset, as Kafka's assign: nothing when it is
// the latest epoch already (at or before startOffset); otherwise entries that would break
// monotonicity (epoch or start offset >= the new one) are removed first. It reports a change.
func (c *epochCache) assignLocked(epoch int32, startOffset int64) bool {
	if epoch < 0 || startOffset < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if last.Epoch == epoch && last.StartOffset <= startOffset {
			return false
		}
	}
	i := len(c.entries)
	for i > 0 && (c.entries[i-1].Epoch >= epoch || c.entries[i-1].StartOffset >= startOffset) {
		i--
	}
	c.entries = append(c.entries[:i], EpochEntry{Epoch: epoch, StartOffset: startOffset})
	c.latest = epoch
	c.gen++
	return true
}

// truncateFromEndLocked removes the entries starting at or after endOffset.
func (c *epochCache) truncateFromEndLocked(endOffset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := len(c.entries)
	for i > 0 && c.entries[i-1].StartOffset >= endOffset {
		i--
	}
	if i == len(c.entries) {
		return false
	}
	c.entries = c.entries[:i]
	c.latest = -1
	if i > 0 {
		c.latest = c.entries[i-1].Epoch
	}
	c.gen++
	return true
}

// truncateFromStartLocked removes the entries starting at or before startOffset but the last of
// them, whose start moves up to startOffset (Kafka's truncateFromStart).
func (c *epochCache) truncateFromStartLocked(startOffset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for n < len(c.entries) && c.entries[n].StartOffset <= startOffset {
		n++
	}
	if n == 0 || (n == 1 && c.entries[0].StartOffset == startOffset) {
		return false
	}
	kept := EpochEntry{Epoch: c.entries[n-1].Epoch, StartOffset: startOffset}
	c.entries = append([]EpochEntry{kept}, c.entries[n:]...)
	c.gen++
	return true
}

func (c *epochCache) latestEpoch() (int32, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if n := len(c.entries); n > 0 {
		return c.entries[n-1].Epoch, true
	}
	return UndefinedEpoch, false
}

func (c *epochCache) snapshot() ([]EpochEntry, uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]EpochEntry(nil), c.entries...), c.gen
}

// endOffsetFor is Kafka's LeaderEpochFileCache.endOffsetFor. logEnd is read under the cache's
// lock so the answer for the latest epoch matches the entries it was judged on.
func (c *epochCache) endOffsetFor(requested int32, logEnd func() int64) (int64, int32) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	switch {
	case requested == UndefinedEpoch || n == 0:
		return UndefinedEpochOffset, UndefinedEpoch
	case c.entries[n-1].Epoch == requested:
		return logEnd(), requested
	}
	// The first entry with a larger epoch.
	i := 0
	for i < n && c.entries[i].Epoch <= requested {
		i++
	}
	if i == n {
		// Larger than every cached epoch (cannot happen for a leader: its epoch is the latest).
		return UndefinedEpochOffset, UndefinedEpoch
	}
	if i == 0 {
		// Older than every cached epoch: Kafka answers the requested epoch itself with the start
		// of the first known one (the data before it is gone; the follower truncates there).
		return c.entries[0].StartOffset, requested
	}
	return c.entries[i].StartOffset, c.entries[i-1].Epoch
}

// encodeEpochCheckpoint is the file's content.
func encodeEpochCheckpoint(entries []EpochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// parseEpochCheckpoint parses the file, refusing entries that are not strictly increasing. An
// empty file (Kafka creates one with the log) has no entries.
func parseEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	lines := strings.Split(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return nil, nil
	}
	if v := strings.TrimSpace(lines[0]); v != "0" {
		return nil, fmt.Errorf("unsupported version %q", v)
	}
	if len(lines) < 2 {
		return nil, errors.New("no entry count")
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, fmt.Errorf("entry count %q for %d lines", lines[1], len(lines)-2)
	}
	out := make([]EpochEntry, 0, n)
	for i, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("malformed entry %d: %q", i, line)
		}
		e, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || e < 0 || o < 0 {
			return nil, fmt.Errorf("malformed entry %d: %q", i, line)
		}
		if k := len(out); k > 0 && (int32(e) <= out[k-1].Epoch || o <= out[k-1].StartOffset) {
			return nil, fmt.Errorf("entry %d (%d %d) does not follow (%d %d)", i, e, o, out[k-1].Epoch, out[k-1].StartOffset)
		}
		out = append(out, EpochEntry{Epoch: int32(e), StartOffset: o})
	}
	return out, nil
}

// LatestEpoch returns the latest cached leader epoch; ok is false when the cache is empty.
func (l *Log) LatestEpoch() (epoch int32, ok bool) { return l.epochs.latestEpoch() }

// EndOffsetForEpoch answers OffsetForLeaderEpoch as Kafka does: for the latest epoch, the log end
// offset; for an older one, the start offset of the first larger cached epoch, with foundEpoch the
// largest cached epoch <= epoch (or epoch itself when it is older than every cached epoch); for an
// unknown newer epoch, an empty cache or UndefinedEpoch, (UndefinedEpochOffset, UndefinedEpoch).
func (l *Log) EndOffsetForEpoch(epoch int32) (endOffset int64, foundEpoch int32) {
	return l.epochs.endOffsetFor(epoch, l.LogEndOffset)
}

// EpochEntries returns a copy of the leader epoch cache.
func (l *Log) EpochEntries() []EpochEntry {
	e, _ := l.epochs.snapshot()
	return e
}

// BecomeLeader makes this broker the partition's leader in epoch: later appends are stamped with
// it, and when it is newer than the latest cached epoch, (epoch, log end offset) is recorded (and
// the checkpoint file written) before it returns. An epoch older than the latest cached one is
// refused with FENCED_LEADER_EPOCH and changes nothing.
func (l *Log) BecomeLeader(epoch int32) error {
	if epoch < 0 {
		return fmt.Errorf("become leader of %s: invalid epoch %d: %w", l.dir, epoch, kerr.InvalidRequest)
	}
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	if epoch < l.epochs.latest {
		latest := l.epochs.latest
		l.mu.Unlock()
		return fmt.Errorf("become leader of %s in epoch %d: epoch %d is cached: %w", l.dir, epoch, latest, kerr.FencedLeaderEpoch)
	}
	l.leaderEpoch = epoch
	changed := epoch > l.epochs.latest && l.epochs.assignLocked(epoch, l.nextOffset)
	l.mu.Unlock()
	if changed {
		return l.persistEpochs()
	}
	return nil
}

// persistEpochs writes the checkpoint file if the cache changed since the last write. Callers
// do not hold l.mu: the file write happens outside the append lock.
func (l *Log) persistEpochs() error {
	l.epochs.fileMu.Lock()
	defer l.epochs.fileMu.Unlock()
	return l.persistEpochsLocked()
}

// persistEpochsLocked requires epochs.fileMu.
func (l *Log) persistEpochsLocked() error {
	c := &l.epochs
	if c.closed {
		return nil
	}
	entries, gen := c.snapshot()
	if gen == c.written {
		return nil
	}
	if err := l.logDir.Err(); err != nil {
		return err
	}
	if err := writeFileAtomic(l.fsys, filepath.Join(l.dir, LeaderEpochCheckpointFile), encodeEpochCheckpoint(entries)); err != nil {
		return l.logDir.Fail(err)
	}
	c.written = gen
	return nil
}

// closeEpochs writes any change not yet written (when write is true) and stops later writes.
func (l *Log) closeEpochs(write bool) error {
	l.epochs.fileMu.Lock()
	defer l.epochs.fileMu.Unlock()
	var err error
	if write {
		err = l.persistEpochsLocked()
	}
	l.epochs.closed = true
	return err
}

// loadEpochs restores the cache at open, after the segments were loaded (and recovered) and the
// log end and start set. See the file comment.
func (l *Log) loadEpochs() error {
	c := &l.epochs
	c.latest = -1
	path := filepath.Join(l.dir, LeaderEpochCheckpointFile)
	rebuild, missing := false, false
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		rebuild, missing = true, true
	} else if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	} else if entries, err := parseEpochCheckpoint(data); err != nil {
		slog.Warn("unreadable leader epoch checkpoint; rebuilding it from the log", "file", path, "err", err)
		rebuild = true
	} else {
		c.setLoaded(entries)
		c.truncateFromEndLocked(l.nextOffset)
		c.truncateFromStartLocked(l.logStartOffset.Load())
		last, ok, err := l.lastBatchEpoch()
		if err != nil {
			return fmt.Errorf("load leader epochs of %s: %w", l.dir, err)
		}
		if ok && last > c.latest {
			slog.Warn("leader epoch checkpoint misses the last batch's epoch; rebuilding it from the log", "file", path, "epoch", last, "cached", c.latest)
			rebuild = true
		} else if mismatch, err := l.latestEntryMismatch(); err != nil {
			return fmt.Errorf("load leader epochs of %s: %w", l.dir, err)
		} else if mismatch {
			// The checkpoint names an epoch start the log's batches do not carry (its
			// batches were lost in a crash after the checkpoint was written, and the log
			// holds older-epoch batches there).
			slog.Warn("leader epoch checkpoint disagrees with the log; rebuilding it from the log", "file", path, "cached", c.latest)
			rebuild = true
		}
	}
	if rebuild {
		c.reset()
		if err := l.scanEpochs(); err != nil {
			return fmt.Errorf("rebuild leader epochs of %s: %w", l.dir, err)
		}
		c.truncateFromStartLocked(l.logStartOffset.Load())
		if missing && len(c.entries) == 0 && l.nextOffset == l.Segments()[0].BaseOffset() {
			c.written = c.gen // an empty log without a file: nothing to write yet
		}
	}
	return l.persistEpochs()
}

// latestEntryMismatch reports whether the cache's latest entry starts inside the log somewhere
// no batch of its epoch starts.
func (l *Log) latestEntryMismatch() (bool, error) {
	c := &l.epochs
	c.mu.RLock()
	var e EpochEntry
	n := len(c.entries)
	if n > 0 {
		e = c.entries[n-1]
	}
	c.mu.RUnlock()
	if n == 0 || e.StartOffset >= l.nextOffset || e.StartOffset < l.logStartOffset.Load() {
		return false, nil
	}
	seg, ok := l.acquireSegmentFor(e.StartOffset)
	if !ok {
		return false, nil
	}
	defer seg.Release()
	_, h, found, err := seg.LookupBatch(e.StartOffset)
	if err != nil {
		return false, err
	}
	// No batch starts there (the entry's batches were lost in a crash, leaving a gap before a
	// later segment), or the batch there carries another epoch: the file is stale.
	return !found || h.BaseOffset != e.StartOffset || h.PartitionLeaderEpoch >= 0 && h.PartitionLeaderEpoch != e.Epoch, nil
}

// scanEpochs assigns the epoch of every batch header of the log (unset epochs ignored).
func (l *Log) scanEpochs() error {
	for _, s := range l.Segments() {
		for pos := int64(0); ; {
			h, err := s.ReadHeaderAt(pos)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if h.PartitionLeaderEpoch > l.epochs.latest {
				l.epochs.assignLocked(h.PartitionLeaderEpoch, h.BaseOffset)
			}
			pos += h.Size()
		}
	}
	return nil
}

// lastBatchEpoch reads the leader epoch of the log's last batch (from the last offset index entry
// of the last non-empty segment on); ok is false for an empty log or an unset epoch.
func (l *Log) lastBatchEpoch() (int32, bool, error) {
	segs := l.Segments()
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		if s.Size() == 0 {
			continue
		}
		start := s.LastIndexedPosition()
		var last record.Header
		found := false
		for pos := start; ; {
			h, err := s.ReadHeaderAt(pos)
			if err == io.EOF {
				if !found && pos > 0 && start > 0 {
					// The index points past the data (its tail was not rebuilt yet after a
					// crash): scan the whole segment instead.
					pos, start = 0, 0
					continue
				}
				break
			}
			if err != nil {
				if start > 0 {
					pos, start, found = 0, 0, false
					continue
				}
				return 0, false, err
			}
			last, found = h, true
			pos += h.Size()
		}
		if !found {
			continue
		}
		return last.PartitionLeaderEpoch, last.PartitionLeaderEpoch >= 0, nil
	}
	return 0, false, nil
}
