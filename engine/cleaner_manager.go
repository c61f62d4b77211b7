package engine

// The Manager's log cleaner (Kafka's LogCleaner threads and LogCleanerManager): CleanerThreads
// goroutines, each with its own Cleaner (the dedupe buffer is split among them) and one shared
// I/O throttle. A thread picks, among the compacted logs not being cleaned that are cleanable (dirty
// ratio above min.cleanable.dirty.ratio, or a dirty record older than max.compaction.lag.ms:
// KIP-354), the one with the highest dirty ratio, cleans it, writes the log dir's
// cleaner-offset-checkpoint and looks again at once; with nothing to clean it sleeps
// CleanerBackoff. Logs whose policy is compact,delete also get their retention applied there.
// A cleaning that fails on the log's data (a corrupt batch) leaves the log alone for
// uncleanableBackoffFactor backoffs; a storage failure has taken the log dir offline.

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"
)

// CleanerCheckpointFile is Kafka's per-log-dir cleaner checkpoint (same text format as the
// other checkpoints): per compacted partition, the first offset not yet cleaned.
const CleanerCheckpointFile = "cleaner-offset-checkpoint"

const uncleanableBackoffFactor = 20

// cleanerPool is the Manager's cleaner state.
type cleanerPool struct {
	mu         sync.Mutex
	inProgress map[*Log]bool
	throttle   *ioThrottle
	// manual is the cleaner used by RunCleaner, made on first use.
	manual   *Cleaner
	manualMu sync.Mutex
}

func (m *Manager) cleanerConfig(threads int) CleanerConfig {
	return CleanerConfig{
		DedupeBufferSize: max(m.cfg.CleanerDedupeBufferSize/int64(max(threads, 1)), offsetMapMinSlots*offsetMapSlotBytes),
		IOBufferSize:     m.cfg.CleanerIOBufferSize,
		Stop:             m.stop,
	}
}

// startCleaners starts the cleaner threads (none when CleanerThreads < 0).
func (m *Manager) startCleaners() {
	m.cleaner.inProgress = map[*Log]bool{}
	m.cleaner.throttle = newIOThrottle(m.cfg.CleanerIOMaxBytesPerSecond)
	for range max(m.cfg.CleanerThreads, 0) {
		c := NewCleaner(m.cleanerConfig(m.cfg.CleanerThreads))
		c.throttle = m.cleaner.throttle
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			for {
				cleaned, err := m.cleanDirtiest(c)
				if err != nil {
					slog.Error("log cleaner", "err", err)
				}
				if !cleaned {
					t := time.NewTimer(m.cfg.CleanerBackoff)
					select {
					case <-m.stop:
						t.Stop()
						return
					case <-t.C:
					}
				}
				select {
				case <-m.stop:
					return
				default:
				}
			}
		}()
	}
}

// RunCleaner cleans, one after the other, every cleanable compacted log (dirty ratio above its
// min.cleanable.dirty.ratio, or past max.compaction.lag.ms) until none is (or the Manager closes), with a cleaner of its own. It
// returns the number of cleanings done.
func (m *Manager) RunCleaner() (int, error) {
	m.cleaner.manualMu.Lock()
	defer m.cleaner.manualMu.Unlock()
	if m.cleaner.manual == nil {
		m.cleaner.manual = NewCleaner(m.cleanerConfig(1))
		m.cleaner.manual.throttle = m.cleaner.throttle
	}
	var errs []error
	n := 0
	for range 10000 {
		cleaned, err := m.cleanDirtiest(m.cleaner.manual)
		if err != nil {
			errs = append(errs, err)
		}
		if !cleaned {
			break
		}
		n++
	}
	return n, errors.Join(errs...)
}

// cleanDirtiest cleans the dirtiest cleanable log, if any; cleaned reports whether it did.
func (m *Manager) cleanDirtiest(c *Cleaner) (cleaned bool, err error) {
	l, tp := m.pickDirtiest()
	if l == nil {
		return false, nil
	}
	defer func() {
		m.cleaner.mu.Lock()
		delete(m.cleaner.inProgress, l)
		m.cleaner.mu.Unlock()
	}()
	st, err := c.Clean(l)
	switch {
	case errors.Is(err, errCleanAborted):
		return false, nil
	case err != nil && l.logDir.Err() == nil:
		cfg := l.config()
		backoff := uncleanableBackoffFactor * m.cfg.CleanerBackoff
		until := cfg.now().Add(backoff)
		l.clean.uncleanableUntil.Store(cfg.nanotime() + int64(backoff))
		return false, fmt.Errorf("clean %s (skipped until %s): %w", tp, until.Format(time.RFC3339), err)
	case err != nil:
		return false, fmt.Errorf("clean %s: %w", tp, err)
	}
	slog.Info("log cleaned", "partition", tp.String(), "first_dirty", st.FirstDirtyOffset, "end", st.EndOffset,
		"segments", st.Segments, "read_bytes", st.BytesRead, "written_bytes", st.BytesWritten,
		"records_read", st.RecordsRead, "records_kept", st.RecordsKept, "keys", st.MapKeys, "took", st.Duration)
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	return true, m.writeCleanerCheckpointsLocked()
}

// pickDirtiest marks and returns the cleanable compacted log with the highest dirty ratio, applying retention first to compact,delete logs.
func (m *Manager) pickDirtiest() (*Log, TopicPartition) {
	var best *Log
	var bestTP TopicPartition
	bestRatio := -1.0
	for tp, l := range m.Logs() {
		cfg := l.config()
		now := cfg.now()
		if !cfg.PolicyCompact() || l.logDir.Err() != nil || l.clean.uncleanableUntil.Load() > cfg.nanotime() {
			continue
		}
		m.cleaner.mu.Lock()
		busy := m.cleaner.inProgress[l]
		m.cleaner.mu.Unlock()
		if busy {
			continue
		}
		if cfg.PolicyDelete() {
			if _, err := l.DeleteExpiredSegments(); err != nil {
				slog.Error("retention of a compacted log", "partition", tp.String(), "err", err)
			}
		}
		r := l.cleanableRange(now.UnixMilli())
		if ratio := r.dirtyRatio(); r.cleanable(cfg) && ratio > bestRatio {
			best, bestTP, bestRatio = l, tp, ratio
		}
	}
	if best == nil {
		return nil, bestTP
	}
	m.cleaner.mu.Lock()
	defer m.cleaner.mu.Unlock()
	if m.cleaner.inProgress[best] {
		return nil, bestTP // another thread took it meanwhile
	}
	m.cleaner.inProgress[best] = true
	return best, bestTP
}

// writeCleanerCheckpointsLocked writes every online log dir's cleaner-offset-checkpoint: the
// compacted logs' cleaner checkpoints. Requires m.ckptMu.
func (m *Manager) writeCleanerCheckpointsLocked() error {
	m.mu.RLock()
	points := map[*dirState]map[TopicPartition]int64{}
	for tp, l := range m.logs {
		if !l.config().PolicyCompact() && l.clean.cleanedTo.Load() == 0 {
			continue
		}
		d := m.dirOf[tp]
		if points[d] == nil {
			points[d] = map[TopicPartition]int64{}
		}
		points[d][tp] = l.clean.cleanedTo.Load()
	}
	m.mu.RUnlock()
	var errs []error
	for _, d := range m.dirs {
		if d.Err() != nil || (points[d] == nil && !d.cleanerFile) {
			continue
		}
		d.cleanerFile = true
		if err := WriteCheckpoint(m.fsys, filepath.Join(d.Path, CleanerCheckpointFile), points[d]); err != nil {
			errs = append(errs, d.Fail(err))
		}
	}
	return errors.Join(errs...)
}
