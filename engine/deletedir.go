package engine

// Removing partition directories. A deleted log's directory is renamed to
// "<topic>-<partition>.<32 hex>-delete" (the decision: a crash afterwards never brings it back,
// the next start removes every "-delete" directory), the log dir synced, then the directory
// removed; a log moved aside (MoveAsideLog) is renamed "<...>-stray" and kept, as Kafka does with
// stray logs. As in Kafka's LocalLog.logDirNameWithSuffixCappedLength the topic part of these
// names is shortened so that the whole name fits in 255 bytes: a topic may have 249 characters,
// and "-<partition>.<32 hex>-delete" adds up to 50 more.
//
// Other names derived from a partition directory stay within the limit: the directory itself is
// at most 249 + len("-99999") = 255 bytes (partition numbers stay below maxPartitions, 100000),
// and segment files (<20 digits>.log.cleaned, .swap, .deleted) and checkpoint temporaries are
// short names inside it.
//
// A removal that fails (the rename, or the removal in place that follows a failed rename) is
// remembered (DeleteFailed) and retried by the retention loop until it succeeds; meanwhile the
// log is closed and not served, and CreateLog removes the leftover before creating a log there.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	// DeleteDirSuffix ends the name of a partition directory being deleted.
	DeleteDirSuffix = "-delete"
	// StrayDirSuffix ends the name of a partition directory moved aside.
	StrayDirSuffix = "-stray"
	// maxFileNameBytes is the file name limit of Linux filesystems (NAME_MAX).
	maxFileNameBytes = 255
)

// SuffixedDirName returns "<topic>-<partition>.<32 hex>suffix", the topic shortened so that
// the name is at most 255 bytes (topic names are ASCII).
func SuffixedDirName(tp TopicPartition, suffix string) string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	tail := "-" + strconv.Itoa(int(tp.Partition)) + "." + hex.EncodeToString(id[:]) + suffix
	n := min(len(tp.Topic), max(0, maxFileNameBytes-len(tail)))
	return tp.Topic[:n] + tail
}

// isDeleteDir reports whether a directory name is a partition directory being deleted.
func isDeleteDir(name string) bool {
	return strings.HasSuffix(name, DeleteDirSuffix) && strings.Contains(name, ".")
}

// pendingDelete is a partition directory whose removal failed and is retried.
type pendingDelete struct {
	d   *dirState
	tp  TopicPartition
	dir string
	err error
}

// removeLogDir removes a closed log's directory: rename to a "-delete" name, sync the log dir,
// remove. When the rename fails the directory is removed in place, partition.metadata last (a
// crash midway leaves a directory without segments, never a log of the old topic with another
// id). The error is returned; the caller records it for a retry.
func (m *Manager) removeLogDir(d *dirState, tp TopicPartition, dir string) error {
	doomed := filepath.Join(d.Path, SuffixedDirName(tp, DeleteDirSuffix))
	if renameErr := m.fsys.Rename(dir, doomed); renameErr != nil {
		if errors.Is(renameErr, fs.ErrNotExist) {
			return nil
		}
		slog.Warn("cannot rename a deleted partition directory; removing it in place", "dir", dir, "err", renameErr)
		if err := removeInPlace(dir); err != nil {
			return fmt.Errorf("delete log %s: rename: %v; remove in place: %w", tp, renameErr, err)
		}
		return nil
	}
	if err := m.fsys.SyncDir(d.Path); err != nil {
		return d.Fail(err)
	}
	if err := os.RemoveAll(doomed); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete log %s: %w", tp, err)
	}
	return nil
}

// removeInPlace removes dir's files, partition.metadata last, then dir.
func removeInPlace(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == PartitionMetadataFile {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(dir, PartitionMetadataFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// notePendingDelete records a failed removal for retryDeletes.
func (m *Manager) notePendingDelete(d *dirState, tp TopicPartition, dir string, err error) {
	slog.Error("partition directory not removed; retrying", "partition", tp, "dir", dir, "err", err)
	m.pendingMu.Lock()
	defer m.pendingMu.Unlock()
	if m.pending == nil {
		m.pending = map[string]*pendingDelete{}
	}
	m.pending[dir] = &pendingDelete{d: d, tp: tp, dir: dir, err: err}
}

// DeleteFailed returns the error of tp's last failed directory removal, nil when none is
// pending.
func (m *Manager) DeleteFailed(tp TopicPartition) error {
	m.pendingMu.Lock()
	defer m.pendingMu.Unlock()
	for _, p := range m.pending {
		if p.tp == tp {
			return p.err
		}
	}
	return nil
}

// retryDeletes retries the failed removals once.
func (m *Manager) retryDeletes() {
	m.pendingMu.Lock()
	var todo []*pendingDelete
	for _, p := range m.pending {
		todo = append(todo, p)
	}
	m.pendingMu.Unlock()
	for _, p := range todo {
		err := m.removeLogDir(p.d, p.tp, p.dir)
		m.pendingMu.Lock()
		if err == nil {
			delete(m.pending, p.dir)
			slog.Info("removed the directory of a deleted partition", "partition", p.tp, "dir", p.dir)
		} else {
			p.err = err
		}
		m.pendingMu.Unlock()
	}
}

// MoveAsideLog closes tp's log and renames its directory "<...>-stray": it is no longer served
// nor loaded at the next start, and stays on disk for an operator (Kafka's stray logs).
func (m *Manager) MoveAsideLog(tp TopicPartition) error {
	l, d := m.detachLog(tp, "stray")
	if l == nil {
		return nil
	}
	aside := filepath.Join(d.Path, SuffixedDirName(tp, StrayDirSuffix))
	if err := m.fsys.Rename(l.Dir(), aside); err != nil {
		err = fmt.Errorf("move stray log %s aside: %w", tp, err)
		m.notePendingDelete(d, tp, l.Dir(), err) // cannot keep it aside: it must not be served
		return err
	}
	if err := m.fsys.SyncDir(d.Path); err != nil {
		return d.Fail(err)
	}
	slog.Warn("stray partition log moved aside", "partition", tp, "dir", aside)
	return nil
}
