package engine

// Moving a partition's log to another log dir of the same broker (Kafka's AlterReplicaLogDirs),
// while the partition keeps serving:
//
//  1. CreateFuture opens an empty "future" log in the target dir, in a directory named
//     "<topic>-<partition>.<32 hex>-future" (Kafka's name), holding the topic id in its
//     partition.metadata; its first segment starts where the source log's does.
//  2. Future.CatchUp copies the source's batches into it as they are stored (AppendStored: the
//     offsets, leader epochs and producer state come with them), from the source's log start,
//     until the lag is small. The source keeps taking appends.
//  3. CompleteFuture freezes the source (it takes no write from then on: appends get
//     NOT_LEADER_OR_FOLLOWER, which clients retry), copies the rest, makes the future durable
//     and closes it, then swaps: the source directory is renamed "-delete" and its log dir synced
//     (the decision), the future directory renamed "<topic>-<partition>" and its log dir synced,
//     the log opened again from there, and the source's files removed.
//
// A crash leaves either log whole. At start (recoverFutures), a "-future" directory whose
// partition has a log in some log dir is an unfinished copy and is removed (the move is
// abandoned: the operator sends AlterReplicaLogDirs again); a "-future" directory whose
// partition has no log anywhere is a completed copy whose swap was decided (the source was
// already renamed "-delete") and is renamed into place and opened.

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
)

// FutureDirSuffix ends the name of a partition directory being copied into another log dir.
const FutureDirSuffix = "-future"

// copyChunk is how many bytes a copy step reads from the source at a time (a batch larger than
// this is read whole).
const copyChunk = 1 << 20

// Future is the copy of a partition's log being made in another log dir.
type Future struct {
	m   *Manager
	tp  TopicPartition
	d   *dirState
	log *Log
	id  [16]byte
	buf []byte // the copy buffer (owned by the one goroutine that copies)
	// copied is the bytes copied so far (owned by the one goroutine that copies: CatchUp).
	copied int64
	// truncations is the source's truncation count the copy so far matches (owned by the
	// goroutine that copies).
	truncations uint64
}

// Log returns the future log (sizes, offsets: DescribeLogDirs).
func (f *Future) Log() *Log { return f.log }

// Dir returns the path of the log dir the future log is in.
func (f *Future) Dir() string { return f.d.Path }

// DirErr returns the sticky error of the log's log dir, nil while it is online.
func (l *Log) DirErr() error { return l.logDir.Err() }

// LogDir returns the log dir l is in.
func (l *Log) LogDir() *LogDir { return l.logDir }

// LogDirOf returns the path of the log dir holding tp's log.
func (m *Manager) LogDirOf(tp TopicPartition) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	d, ok := m.dirOf[tp]
	if !ok {
		return "", false
	}
	return d.Path, true
}

// FindDir returns the log dir whose path is path (cleaned), or nil.
func (m *Manager) FindDir(path string) *LogDir {
	if d := m.findDir(path); d != nil {
		return d.LogDir
	}
	return nil
}

func (m *Manager) findDir(path string) *dirState {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return filepath.Clean(p)
	}
	want := abs(path)
	for _, d := range m.dirs {
		if abs(d.Path) == want {
			return d
		}
	}
	return nil
}

// Futures returns the future logs being copied, by partition.
func (m *Manager) Futures() map[TopicPartition]*Future {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[TopicPartition]*Future, len(m.futures))
	for tp, f := range m.futures {
		out[tp] = f
	}
	return out
}

// AnyDirOffline reports whether some log dir is offline.
func (m *Manager) AnyDirOffline() bool {
	for _, d := range m.dirs {
		if d.Err() != nil {
			return true
		}
	}
	return false
}

// CreateFuture starts moving tp's log to the log dir target: it returns the future log being
// copied there (the one already started when there is one for that dir). Errors:
// LOG_DIR_NOT_FOUND (target is not one of log.dirs), KAFKA_STORAGE_ERROR (target or the source's
// dir offline), REPLICA_NOT_AVAILABLE (no log of tp here). A future log in another dir is
// abandoned first. It returns nil, nil when the log is already in target.
func (m *Manager) CreateFuture(tp TopicPartition, target string) (*Future, error) {
	d := m.findDir(target)
	if d == nil {
		return nil, fmt.Errorf("move %s: %q is not one of log.dirs: %w", tp, target, kerr.LogDirNotFound)
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("move %s to %s: %w", tp, d.Path, err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("move %s: log manager closed: %w", tp, kerr.KafkaStorageError)
	}
	src, ok := m.logs[tp]
	srcDir := m.dirOf[tp]
	id := m.ids[tp]
	old := m.futures[tp]
	if ok && old != nil && old.d == d {
		m.mu.Unlock()
		return old, nil
	}
	if old != nil {
		delete(m.futures, tp)
	}
	m.mu.Unlock()
	if old != nil {
		m.dropFuture(old)
	}
	if !ok {
		return nil, fmt.Errorf("move %s: no replica of it on this broker: %w", tp, kerr.ReplicaNotAvailable)
	}
	if err := srcDir.Err(); err != nil {
		return nil, fmt.Errorf("move %s: %w", tp, err)
	}
	if srcDir == d {
		return nil, nil
	}
	dir := filepath.Join(d.Path, SuffixedDirName(tp, FutureDirSuffix))
	l, err := OpenLog(OpenOptions{FS: m.fsys, LogDir: d.LogDir, Dir: dir, Topic: tp.Topic, Partition: tp.Partition,
		Config: src.Config(), CleanShutdown: true, Budget: m.cfg.Budget, LogStartOffset: src.Segments()[0].BaseOffset()})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("move %s: create future log: %w", tp, d.Fail(err))
	}
	if err := WritePartitionMetadata(m.fsys, dir, id); err != nil {
		_ = l.deleteFiles()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("move %s: %w", tp, d.Fail(err))
	}
	f := &Future{m: m, tp: tp, d: d, log: l, id: id, truncations: src.truncations.Load()}
	m.mu.Lock()
	if m.futures == nil {
		m.futures = map[TopicPartition]*Future{}
	}
	if other := m.futures[tp]; other != nil || m.closed {
		// A concurrent CreateFuture won.
		m.mu.Unlock()
		m.dropFuture(f)
		if other == nil {
			return nil, fmt.Errorf("move %s: log manager closed: %w", tp, kerr.KafkaStorageError)
		}
		return other, nil
	}
	m.futures[tp] = f
	m.mu.Unlock()
	slog.Info("copying a partition log to another log dir", "partition", tp, "from", srcDir.Path, "to", d.Path)
	return f, nil
}

// dropFuture closes a future log and removes its directory.
func (m *Manager) dropFuture(f *Future) {
	_ = f.log.deleteFiles()
	if err := os.RemoveAll(f.log.Dir()); err != nil {
		slog.Warn("removing an abandoned future log", "dir", f.log.Dir(), "err", err)
	}
}

// AbandonFuture stops moving tp's log (the source log stays where it is).
func (m *Manager) AbandonFuture(tp TopicPartition) {
	m.mu.Lock()
	f := m.futures[tp]
	delete(m.futures, tp)
	m.mu.Unlock()
	if f != nil {
		m.dropFuture(f)
		slog.Info("abandoned moving a partition log", "partition", tp)
	}
}

// source returns the log f copies from, or an error when it is gone.
func (f *Future) source() (*Log, error) {
	f.m.mu.RLock()
	defer f.m.mu.RUnlock()
	if f.m.futures[f.tp] != f {
		return nil, fmt.Errorf("move %s: abandoned: %w", f.tp, kerr.ReplicaNotAvailable)
	}
	src, ok := f.m.logs[f.tp]
	if !ok {
		return nil, fmt.Errorf("move %s: the source log is gone: %w", f.tp, kerr.ReplicaNotAvailable)
	}
	return src, nil
}

// CatchUp copies what the source log holds beyond the future log's end, at most maxBytes (a
// bound per call, so callers interleave other work and can stop), and returns how many offsets
// the future log still lags.
func (f *Future) CatchUp(maxBytes int64) (lag int64, err error) {
	src, err := f.source()
	if err != nil {
		return 0, err
	}
	copied := int64(0)
	for copied < maxBytes {
		n, err := f.copyStep(src)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			break
		}
		copied += n
		f.copied += n
	}
	return max(src.LogEndOffset()-f.log.LogEndOffset(), 0), nil
}

// Copied returns the bytes CatchUp has copied so far (call it from the goroutine that calls
// CatchUp).
func (f *Future) Copied() int64 { return f.copied }

// copyStep copies one chunk of whole batches from src; it returns the bytes copied (0: caught
// up).
func (f *Future) copyStep(src *Log) (int64, error) {
	dst := f.log
	if n := src.truncations.Load(); n != f.truncations {
		// The source was truncated (a follower's divergent tail) since the copy read it: what
		// was copied may differ from what the source now holds there. Start over.
		if err := dst.TruncateTo(dst.LogStartOffset()); err != nil {
			return 0, fmt.Errorf("move %s: truncate future log: %w", f.tp, err)
		}
		f.truncations = n
	}
	from := max(dst.LogEndOffset(), src.LogStartOffset())
	if from >= src.LogEndOffset() {
		if dst.LogEndOffset() > src.LogEndOffset() {
			// The source was truncated (a follower's divergent tail): so is the copy.
			if err := dst.TruncateTo(src.LogEndOffset()); err != nil {
				return 0, fmt.Errorf("move %s: truncate future log: %w", f.tp, err)
			}
		}
		return 0, nil
	}
	sl, err := src.Read(from, copyChunk, ReadUpToLogEnd)
	if err != nil {
		return 0, fmt.Errorf("move %s: read source at %d: %w", f.tp, from, err)
	}
	if sl.Length == 0 {
		sl.Release()
		return 0, nil
	}
	if int64(cap(f.buf)) < sl.Length {
		f.buf = make([]byte, sl.Length)
	}
	b := f.buf[:sl.Length]
	_, err = sl.File.ReadAt(b, sl.Position)
	sl.Release()
	if err != nil {
		return 0, fmt.Errorf("move %s: read source at %d: %w", f.tp, from, err)
	}
	b = wholeStoredBatches(b)
	if len(b) == 0 {
		return 0, fmt.Errorf("move %s: no whole batch at offset %d: %w", f.tp, from, kerr.CorruptMessage)
	}
	if _, err := dst.AppendStored(b); err != nil {
		return 0, fmt.Errorf("move %s: append to future log: %w", f.tp, err)
	}
	return int64(len(b)), nil
}

// wholeStoredBatches drops a trailing partial batch (a read cut inside one).
func wholeStoredBatches(b []byte) []byte {
	n := int64(0)
	for int64(len(b))-n >= record.HeaderSize {
		h, err := record.ParseHeader(b[n:])
		if err != nil || h.BatchLength < 0 || h.Size() > int64(len(b))-n {
			break
		}
		n += h.Size()
	}
	return b[:n]
}

// CompleteFuture swaps tp's log for its future copy (see the file comment) and returns the log
// now serving tp. The caller stops the partition's writers first (a write racing the swap fails
// with NOT_LEADER_OR_FOLLOWER). On an error before the decision the source log is thawed and
// keeps serving, and the future is abandoned.
func (m *Manager) CompleteFuture(f *Future) (*Log, error) {
	src, err := f.source()
	if err != nil {
		return nil, err
	}
	tp := f.tp
	// What is copied so far is made durable before the source stops taking writes: the sync
	// done while frozen covers only the tail.
	if err := f.log.Flush(); err != nil {
		m.AbandonFuture(tp)
		return nil, fmt.Errorf("move %s: %w", tp, err)
	}
	// Freeze the source and copy what is left.
	src.mu.Lock()
	src.frozen = true
	frozenAt := time.Now()
	for {
		n, err := f.copyStep(src)
		if err != nil {
			src.frozen = false
			src.mu.Unlock()
			m.AbandonFuture(tp)
			return nil, err
		}
		if n == 0 {
			break
		}
	}
	src.mu.Unlock()
	hw, start := src.HighWatermark(), src.LogStartOffset()
	dst := f.log
	fail := func(err error) (*Log, error) {
		src.mu.Lock()
		src.frozen = false
		src.mu.Unlock()
		m.AbandonFuture(tp)
		return nil, fmt.Errorf("move %s: %w", tp, err)
	}
	if dst.LogEndOffset() != src.LogEndOffset() {
		return fail(fmt.Errorf("future log ends at %d, the source at %d: %w", dst.LogEndOffset(), src.LogEndOffset(), kerr.KafkaStorageError))
	}
	if err := dst.Flush(); err != nil {
		return fail(err)
	}
	if err := dst.Close(); err != nil {
		return fail(f.d.Fail(err))
	}
	if err := m.fsys.SyncDir(dst.Dir()); err != nil {
		return fail(f.d.Fail(err))
	}
	// The decision: the source goes.
	src.moved.Store(true)
	m.mu.Lock()
	delete(m.futures, tp)
	m.mu.Unlock()
	_, srcDir := m.detachLog(tp, "moved")
	if srcDir == nil {
		_ = os.RemoveAll(dst.Dir())
		return nil, fmt.Errorf("move %s: the source log is gone: %w", tp, kerr.ReplicaNotAvailable)
	}
	doomed := filepath.Join(srcDir.Path, SuffixedDirName(tp, DeleteDirSuffix))
	if err := m.fsys.Rename(src.Dir(), doomed); err != nil {
		// Nothing decided: the source comes back where it was.
		_ = os.RemoveAll(dst.Dir())
		if oerr := m.openLog(srcDir, tp); oerr != nil {
			return nil, fmt.Errorf("move %s: %w; reopening the source: %w", tp, srcDir.Fail(err), oerr)
		}
		return nil, fmt.Errorf("move %s: %w", tp, srcDir.Fail(err))
	}
	if err := m.fsys.SyncDir(srcDir.Path); err != nil {
		_ = srcDir.Fail(err) // the rename may or may not survive a crash: both ends are whole
	}
	final := filepath.Join(f.d.Path, tp.String())
	if err := m.fsys.Rename(dst.Dir(), final); err != nil {
		return nil, fmt.Errorf("move %s: rename the future log into place: %w", tp, f.d.Fail(err))
	}
	if err := m.fsys.SyncDir(f.d.Path); err != nil {
		return nil, fmt.Errorf("move %s: %w", tp, f.d.Fail(err))
	}
	l, err := OpenLog(OpenOptions{FS: m.fsys, LogDir: f.d.LogDir, Dir: final, Topic: tp.Topic, Partition: tp.Partition,
		Config: src.Config(), CleanShutdown: true, Budget: m.cfg.Budget, RecoveryPoint: dst.LogEndOffset(), LogStartOffset: start})
	if err != nil {
		return nil, fmt.Errorf("move %s: open the moved log: %w", tp, err)
	}
	_ = l.SetHighWatermark(min(hw, l.LogEndOffset()))
	m.mu.Lock()
	m.logs[tp] = l
	l.written.Store(&m.written)
	l.ckptRecovery.Store(0)
	m.dirOf[tp] = f.d
	m.ids[tp] = f.id
	m.mu.Unlock()
	slog.Info("partition log moved to another log dir", "partition", tp, "from", srcDir.Path, "to", f.d.Path, "log_end", l.LogEndOffset(),
		"writes_refused_for", time.Since(frozenAt))
	// The checkpoints (the moved log's start and high watermark in its new dir) and the removal
	// of the old files follow off the partition's path; a crash before them only costs a
	// recovery of the moved log, and the next start removes the "-delete" directory.
	go func() {
		m.mu.RLock()
		closed := m.closed
		m.mu.RUnlock()
		if !closed {
			if err := m.Checkpoint(); err != nil {
				slog.Warn("checkpoint after moving a partition log", "partition", tp, "err", err)
			}
		}
		if err := os.RemoveAll(doomed); err != nil && !errors.Is(err, fs.ErrNotExist) {
			m.notePendingDelete(srcDir, tp, doomed, err)
		}
	}()
	return l, nil
}

// parseFutureDir returns the partition of a "-future" directory name.
func parseFutureDir(name string) (TopicPartition, bool) {
	base, ok := strings.CutSuffix(name, FutureDirSuffix)
	if !ok {
		return TopicPartition{}, false
	}
	i := strings.LastIndexByte(base, '.')
	if i < 0 || len(base)-i-1 != 32 {
		return TopicPartition{}, false
	}
	return ParsePartitionDir(base[:i])
}

// recoverFutures finishes or abandons the moves a crash interrupted (see the file comment):
// called at open, after every dir's logs are loaded.
func (m *Manager) recoverFutures() error {
	var errs []error
	for _, d := range m.dirs {
		if d.Err() != nil {
			continue
		}
		entries, err := m.fsys.ReadDir(d.Path)
		if err != nil {
			errs = append(errs, d.Fail(err))
			continue
		}
		for _, e := range entries {
			tp, ok := parseFutureDir(e.Name())
			if !e.IsDir() || !ok {
				continue
			}
			dir := filepath.Join(d.Path, e.Name())
			if _, have := m.Log(tp); have {
				slog.Info("removing the copy of an unfinished move between log dirs", "dir", dir)
				if err := os.RemoveAll(dir); err != nil {
					errs = append(errs, fmt.Errorf("remove future log %s: %w", dir, err))
				}
				continue
			}
			final := filepath.Join(d.Path, tp.String())
			slog.Info("completing a move between log dirs", "dir", dir, "to", final)
			if err := m.fsys.Rename(dir, final); err != nil {
				errs = append(errs, d.Fail(err))
				continue
			}
			if err := m.fsys.SyncDir(d.Path); err != nil {
				errs = append(errs, d.Fail(err))
				continue
			}
			if err := m.openLog(d, tp); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
