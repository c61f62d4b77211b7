package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

// ManagerConfig configures the Manager.
type ManagerConfig struct {
	// Dirs are log.dirs.
	Dirs []string
	// FS is the filesystem seam; nil = vfs.OS.
	FS vfs.FS
	// Default is the configuration of every log; ConfigFor, when set, overrides it per topic.
	Default   Config
	ConfigFor func(topic string) Config
	// RecoveryThreadsPerDir is num.recovery.threads.per.data.dir (0 = GOMAXPROCS).
	RecoveryThreadsPerDir int
	// RetentionCheckInterval is log.retention.check.interval.ms (0 = 5 minutes; <0 disables).
	RetentionCheckInterval time.Duration
	// CheckpointInterval is log.flush.offset.checkpoint.interval.ms (0 = 1 minute; <0 disables).
	CheckpointInterval time.Duration
	// ProducerIDExpirationCheckInterval is how often idempotent producers past each log's
	// producer.id.expiration.ms are forgotten (Kafka's internal
	// producer.id.expiration.check.interval.ms, 10 minutes; 0 = that; <0 disables).
	ProducerIDExpirationCheckInterval time.Duration

	// Budget, when set, bounds the descriptors and mappings of the process's segments: creating
	// a log or rolling a segment past it is refused (ErrResourceExhausted, budget.go).
	Budget *Budget

	// Compaction (cleaner_manager.go).
	// CleanerThreads is log.cleaner.threads (0 = 1; < 0 disables the cleaner, as
	// log.cleaner.enable=false does; RunCleaner still works).
	CleanerThreads int
	// CleanerBackoff is log.cleaner.backoff.ms (0 = 15 s): the sleep when nothing is dirty enough.
	CleanerBackoff time.Duration
	// CleanerDedupeBufferSize is log.cleaner.dedupe.buffer.size (0 = 128 MiB): the offset maps'
	// memory, split among the threads.
	CleanerDedupeBufferSize int64
	// CleanerIOBufferSize is log.cleaner.io.buffer.size (0 = 512 KiB) per thread, for reads and
	// for writes.
	CleanerIOBufferSize int
	// CleanerIOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second (0 = unbounded), shared.
	CleanerIOMaxBytesPerSecond float64
}

type dirState struct {
	*LogDir
	recoveryPoints map[TopicPartition]int64
	logStarts      map[TopicPartition]int64
	clean          bool
	// highWatermarks is the replication-offset-checkpoint read at open (hwcheckpoint.go); hwFile
	// says whether the file existed.
	highWatermarks map[TopicPartition]int64
	hwFile         bool

	// Compaction: the cleaner checkpoints read at open; cleanerFile is set once the dir has a
	// cleaner-offset-checkpoint to keep up to date (guarded by the Manager's ckptMu).
	cleanerPoints map[TopicPartition]int64
	cleanerFile   bool
}

// Manager owns every partition log of the log dirs: it opens them concurrently at start, keeps
// the recovery-point and log-start checkpoints, runs retention, and writes the clean-shutdown
// marker on Close. After a clean shutdown nothing is rescanned; after a crash only segments above
// each log's recovery point are.
type Manager struct {
	cfg  ManagerConfig
	fsys vfs.FS
	dirs []*dirState

	mu     sync.RWMutex
	logs   map[TopicPartition]*Log
	dirOf  map[TopicPartition]*dirState
	ids    map[TopicPartition][16]byte
	closed bool

	// settleBuf is the settle loop's list of logs, reused each run (owned by that goroutine).
	settleBuf []*Log
	// written lists the logs appended to since the pressure loop last looked (settleUnderPressure).
	written writtenLogs

	// ckptMu serializes checkpoint writers.
	ckptMu sync.Mutex
	stop   chan struct{}
	wg     sync.WaitGroup

	// cleaner is the compaction state (cleaner_manager.go).
	cleaner cleanerPool

	// pendingMu guards pending: partition directories whose removal failed, by path, retried by
	// the retention loop (deletedir.go).
	pendingMu sync.Mutex
	pending   map[string]*pendingDelete

	// futures are the logs being copied to another log dir, by partition (move.go). Guarded by mu.
	futures map[TopicPartition]*Future
}

// OpenManager opens every <topic>-<partition> directory of every log dir.
func OpenManager(cfg ManagerConfig) (*Manager, error) {
	if len(cfg.Dirs) == 0 {
		return nil, errors.New("open log manager: no log dirs")
	}
	if cfg.FS == nil {
		cfg.FS = vfs.OS
	}
	if cfg.RecoveryThreadsPerDir <= 0 {
		cfg.RecoveryThreadsPerDir = runtime.GOMAXPROCS(0)
	}
	if cfg.RetentionCheckInterval == 0 {
		cfg.RetentionCheckInterval = 5 * time.Minute
	}
	if cfg.CheckpointInterval == 0 {
		cfg.CheckpointInterval = time.Minute
	}
	if cfg.ProducerIDExpirationCheckInterval == 0 {
		cfg.ProducerIDExpirationCheckInterval = DefaultProducerIDExpirationCheckInterval
	}
	if cfg.CleanerThreads == 0 { // compaction
		cfg.CleanerThreads = 1
	}
	if cfg.CleanerBackoff <= 0 {
		cfg.CleanerBackoff = DefaultCleanerBackoff
	}
	if cfg.CleanerDedupeBufferSize <= 0 {
		cfg.CleanerDedupeBufferSize = DefaultCleanerDedupeBufferSize
	}
	m := &Manager{
		cfg: cfg, fsys: cfg.FS,
		logs: map[TopicPartition]*Log{}, dirOf: map[TopicPartition]*dirState{}, ids: map[TopicPartition][16]byte{},
		stop: make(chan struct{}),
	}
	var wg sync.WaitGroup
	errs := make([]error, len(cfg.Dirs))
	for i, path := range cfg.Dirs {
		d, err := m.prepareDir(path)
		if err != nil {
			// A log dir that cannot be opened is offline; the others serve (Kafka's rule).
			d = &dirState{LogDir: NewLogDir(path)}
			_ = d.failHard(err)
			m.dirs = append(m.dirs, d)
			continue
		}
		m.dirs = append(m.dirs, d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.loadDir(d)
		}()
	}
	wg.Wait()
	online := 0
	for i, d := range m.dirs {
		if d.Err() != nil {
			errs[i] = nil // offline: its logs are not served
			continue
		}
		online++
	}
	if online == 0 {
		errs = append(errs, fmt.Errorf("open log manager: every log dir is offline: %w", m.dirs[0].Err()))
	}
	if err := errors.Join(errs...); err != nil {
		m.closeLogs()
		return nil, err
	}
	if err := m.recoverFutures(); err != nil { // move.go
		slog.Error("recovering moves between log dirs", "err", err)
	}
	m.startLoops()
	return m, nil
}

// prepareDir reads a log dir's checkpoints and consumes its clean-shutdown marker: it is removed
// (durably) before any log is served, so a crash from now on is seen as unclean.
func (m *Manager) prepareDir(path string) (*dirState, error) {
	if err := m.fsys.MkdirAll(path, vfs.DirMode); err != nil {
		return nil, fmt.Errorf("log dir %s: %w", path, err)
	}
	d := &dirState{LogDir: NewLogDir(path)}
	var err error
	if d.recoveryPoints, err = ReadCheckpoint(filepath.Join(path, RecoveryPointCheckpointFile)); err != nil {
		slog.Warn("ignoring unreadable checkpoint; recovering every segment", "err", err)
		d.recoveryPoints = map[TopicPartition]int64{}
	}
	if d.logStarts, err = ReadCheckpoint(filepath.Join(path, LogStartOffsetCheckpointFile)); err != nil {
		slog.Warn("ignoring unreadable checkpoint", "err", err)
		d.logStarts = map[TopicPartition]int64{}
	}
	if d.cleanerPoints, err = ReadCheckpoint(filepath.Join(path, CleanerCheckpointFile)); err != nil {
		slog.Warn("ignoring unreadable cleaner checkpoint; compacted logs are cleaned from their start", "err", err)
		d.cleanerPoints = map[TopicPartition]int64{}
	}
	d.cleanerFile = len(d.cleanerPoints) > 0
	d.highWatermarks, d.hwFile = readHighWatermarks(m.fsys, path)
	marker := filepath.Join(path, CleanShutdownFile)
	if _, err := m.fsys.Stat(marker); err == nil {
		d.clean = true
		if err := m.fsys.Remove(marker); err != nil {
			return nil, fmt.Errorf("log dir %s: remove clean shutdown marker: %w", path, err)
		}
		if err := m.fsys.SyncDir(path); err != nil {
			return nil, fmt.Errorf("log dir %s: %w", path, err)
		}
	}
	return d, nil
}

// loadDir opens the partition logs of one dir with RecoveryThreadsPerDir workers.
func (m *Manager) loadDir(d *dirState) error {
	entries, err := m.fsys.ReadDir(d.Path)
	if err != nil {
		return d.failHard(fmt.Errorf("list log dir %s: %w", d.Path, err))
	}
	work := make(chan TopicPartition)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var errs []error
	for range m.cfg.RecoveryThreadsPerDir {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tp := range work {
				if err := m.openLog(d, tp); err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
				}
			}
		}()
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if tp, ok := ParsePartitionDir(e.Name()); ok {
			work <- tp
		} else if isDeleteDir(e.Name()) {
			_ = os.RemoveAll(filepath.Join(d.Path, e.Name()))
		}
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

func (m *Manager) configFor(topic string) Config {
	if m.cfg.ConfigFor != nil {
		return m.cfg.ConfigFor(topic)
	}
	return m.cfg.Default
}

func (m *Manager) openLog(d *dirState, tp TopicPartition) error {
	dir := filepath.Join(d.Path, tp.String())
	l, err := OpenLog(OpenOptions{
		FS: m.fsys, LogDir: d.LogDir, Dir: dir, Topic: tp.Topic, Partition: tp.Partition,
		Config: m.configFor(tp.Topic), CleanShutdown: d.clean, Budget: m.cfg.Budget,
		RecoveryPoint: d.recoveryPoints[tp], LogStartOffset: d.logStarts[tp],
		CleanerCheckpoint: d.cleanerPoints[tp],
	})
	if err != nil {
		return err
	}
	restoreHighWatermark(l, d, tp)
	id, hasID, err := ReadPartitionMetadata(dir)
	if err != nil {
		slog.Warn("unreadable partition.metadata", "dir", dir, "err", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.logs[tp] = l
	l.written.Store(&m.written)
	l.ckptRecovery.Store(d.recoveryPoints[tp])
	m.dirOf[tp] = d
	if hasID {
		m.ids[tp] = id
	}
	return nil
}

// Log returns the log of tp.
func (m *Manager) Log(tp TopicPartition) (*Log, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l, ok := m.logs[tp]
	return l, ok
}

// TopicID returns the topic id kept in tp's partition.metadata.
func (m *Manager) TopicID(tp TopicPartition) ([16]byte, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	id, ok := m.ids[tp]
	return id, ok
}

// Logs returns every log, sorted by topic and partition.
func (m *Manager) Logs() map[TopicPartition]*Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[TopicPartition]*Log, len(m.logs))
	for tp, l := range m.logs {
		out[tp] = l
	}
	return out
}

// CreateLog creates the log of tp (or returns the existing one) in the log dir holding the fewest
// partitions, and records the topic id in partition.metadata.
func (m *Manager) CreateLog(tp TopicPartition, topicID [16]byte) (*Log, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("log manager closed")
	}
	if l, ok := m.logs[tp]; ok {
		return l, nil
	}
	counts := map[*dirState]int{}
	for _, d := range m.dirOf {
		counts[d]++
	}
	var d *dirState
	for _, cand := range m.dirs {
		if cand.Err() != nil {
			continue
		}
		if d == nil || counts[cand] < counts[d] {
			d = cand
		}
	}
	if d == nil {
		return nil, fmt.Errorf("create log %s: every log dir is offline: %w", tp, m.dirs[0].Err())
	}
	if err := m.cfg.Budget.CheckSegments(1); err != nil {
		return nil, fmt.Errorf("create log %s: %w", tp, d.Refuse(err))
	}
	// A directory left there (a deleted log whose removal failed) holds another topic's records:
	// remove it first, and never open it as the new log.
	for _, cand := range m.dirs {
		old := filepath.Join(cand.Path, tp.String())
		if _, err := m.fsys.Stat(old); err == nil {
			if err := m.removeLogDir(cand, tp, old); err != nil {
				return nil, fmt.Errorf("create log %s: a directory of a deleted log is in the way: %w", tp, err)
			}
			m.pendingMu.Lock()
			delete(m.pending, old)
			m.pendingMu.Unlock()
		}
	}
	dir := filepath.Join(d.Path, tp.String())
	_, statErr := m.fsys.Stat(dir)
	fresh := errors.Is(statErr, fs.ErrNotExist)
	// A log that cannot be completed is removed (when this call made its directory), so a
	// refused creation leaves nothing half-made and can be retried.
	abandon := func(l *Log) {
		if l != nil && fresh {
			_ = l.deleteFiles()
		} else if l != nil {
			_ = l.Close()
		}
		if fresh {
			_ = os.RemoveAll(dir)
		}
	}
	l, err := OpenLog(OpenOptions{FS: m.fsys, LogDir: d.LogDir, Dir: dir, Topic: tp.Topic, Partition: tp.Partition, Config: m.configFor(tp.Topic), CleanShutdown: true, Budget: m.cfg.Budget})
	if err != nil {
		abandon(nil)
		if vfs.IsResourceExhausted(err) {
			return nil, fmt.Errorf("create log %s: %w", tp, d.Refuse(err))
		}
		return nil, fmt.Errorf("create log %s: %w", tp, err)
	}
	if err := WritePartitionMetadata(m.fsys, dir, topicID); err != nil {
		abandon(l)
		if vfs.IsResourceExhausted(err) {
			return nil, fmt.Errorf("create log %s: %w", tp, d.Refuse(err))
		}
		return nil, err
	}
	if err := m.fsys.SyncDir(d.Path); err != nil {
		abandon(l)
		return nil, d.Fail(err)
	}
	m.logs[tp] = l
	l.written.Store(&m.written)
	m.dirOf[tp] = d
	m.ids[tp] = topicID
	return l, nil
}

// detachLog takes tp's log out of the manager and closes it (what names it in the log line if
// closing fails); nil when there is none.
func (m *Manager) detachLog(tp TopicPartition, what string) (*Log, *dirState) {
	m.mu.Lock()
	l, ok := m.logs[tp]
	d := m.dirOf[tp]
	delete(m.logs, tp)
	delete(m.dirOf, tp)
	delete(m.ids, tp)
	m.mu.Unlock()
	if !ok {
		return nil, nil
	}
	l.written.Store(nil)
	if err := l.Close(); err != nil {
		slog.Warn("close "+what+" log", "partition", tp, "err", err)
	}
	m.written.remove(l) // after Close: no append is in flight
	return l, d
}

// DeleteLog closes tp's log and removes its directory: renamed to a "-delete" name first (so a
// crash midway never resurrects it; the name fits in 255 bytes whatever the topic's length),
// then removed (deletedir.go). A failed removal is returned, and retried until it succeeds
// (DeleteFailed reports it meanwhile).
func (m *Manager) DeleteLog(tp TopicPartition) error {
	m.AbandonFuture(tp) // move.go
	l, d := m.detachLog(tp, "deleted")
	if l == nil {
		return nil
	}
	if err := m.removeLogDir(d, tp, l.Dir()); err != nil {
		m.notePendingDelete(d, tp, l.Dir(), err)
		return err
	}
	return nil
}

// Checkpoint writes every online log dir's recovery-point, log-start and high watermark
// (replication-offset) checkpoints.
func (m *Manager) Checkpoint() error {
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	m.mu.RLock()
	rps := map[*dirState]map[TopicPartition]int64{}
	starts := map[*dirState]map[TopicPartition]int64{}
	hws := map[*dirState]map[TopicPartition]int64{}
	for _, d := range m.dirs {
		rps[d] = map[TopicPartition]int64{}
		starts[d] = map[TopicPartition]int64{}
		hws[d] = map[TopicPartition]int64{}
	}
	ckptLogs := make(map[TopicPartition]*Log, len(m.logs))
	for tp, l := range m.logs {
		d := m.dirOf[tp]
		rps[d][tp] = l.RecoveryPoint()
		ckptLogs[tp] = l
		starts[d][tp] = l.LogStartOffset()
		hws[d][tp] = l.HighWatermark()
	}
	m.mu.RUnlock()
	var errs []error
	for _, d := range m.dirs {
		if d.Err() != nil {
			continue
		}
		if err := m.writeRecoveryPoints(d, rps[d], ckptLogs); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := WriteCheckpoint(m.fsys, filepath.Join(d.Path, LogStartOffsetCheckpointFile), starts[d]); err != nil {
			errs = append(errs, d.Fail(err))
			continue
		}
		if err := WriteCheckpoint(m.fsys, filepath.Join(d.Path, ReplicationOffsetCheckpointFile), hws[d]); err != nil {
			errs = append(errs, d.Fail(err))
		}
	}
	if err := m.writeCleanerCheckpointsLocked(); err != nil { // compaction
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RunRetention applies retention to every log once; it returns the number of segments deleted.
func (m *Manager) RunRetention() (int, error) {
	var total int
	var errs []error
	for tp, l := range m.Logs() {
		n, err := l.DeleteExpiredSegments()
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("retention of %s: %w", tp, err))
		}
	}
	if total > 0 {
		if err := m.Checkpoint(); err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// settleInterval is how often idle active segments are settled (settleIdle): a partition that
// took no append for one to two intervals, with everything durable, lets its descriptor and index
// mappings be evicted like an inactive segment's.
const settleInterval = time.Second

// settleIdle settles the active segment of every log idle since the previous run
// (segment.SettleIfIdle), so that a broker holds more partitions than descriptors and mappings:
// an idle partition's are cached and evicted like an inactive segment's, and its next append opens
// them again.
func (m *Manager) settleIdle() {
	m.mu.RLock()
	buf := m.settleBuf[:0]
	for _, l := range m.logs {
		buf = append(buf, l)
	}
	m.mu.RUnlock()
	for _, l := range buf {
		l.settleIfIdle()
	}
	m.checkpointRolled(buf)
	clear(buf)
	m.settleBuf = buf[:0]
}

// checkpointRolled writes the recovery-point checkpoint (that file only) when the recovery point
// of one of logs has passed a whole segment since the file was last written: a segment rolled
// and was sealed (synced) by the flusher. Called by the settle loop each second, so that after a
// crash recovery rescans at most the segments rolled in the last second or so, and the active
// ones, instead of everything rolled since the last periodic checkpoint
// (log.flush.offset.checkpoint.interval.ms, a minute by default: at a thousand rolls a second,
// 60,000 segments to recover). Kafka writes the file only at that interval; the checkpoint
// content is the same (every offset below a log's recovery point is durable, its segments sealed
// and their directory synced), written more often while segments roll: one small file and its
// sync per log dir per second at most. Disabled with the periodic checkpoint (interval < 0).
func (m *Manager) checkpointRolled(logs []*Log) {
	if m.cfg.CheckpointInterval < 0 {
		return
	}
	need := false
	for _, l := range logs {
		done := l.ckptRecovery.Load()
		if l.RecoveryPoint() <= done {
			continue
		}
		if segs := l.Segments(); len(segs) > 0 && segs[len(segs)-1].BaseOffset() > done {
			need = true
			break
		}
	}
	if !need {
		return
	}
	if err := m.checkpointRecoveryPoints(); err != nil {
		slog.Warn("recovery-point checkpoint after a roll", "err", err)
	}
}

// checkpointRecoveryPoints writes the recovery-point checkpoint of every log dir.
func (m *Manager) checkpointRecoveryPoints() error {
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	m.mu.RLock()
	rps := map[*dirState]map[TopicPartition]int64{}
	for _, d := range m.dirs {
		rps[d] = map[TopicPartition]int64{}
	}
	logs := make(map[TopicPartition]*Log, len(m.logs))
	for tp, l := range m.logs {
		rps[m.dirOf[tp]][tp] = l.RecoveryPoint()
		logs[tp] = l
	}
	m.mu.RUnlock()
	var errs []error
	for _, d := range m.dirs {
		if d.Err() != nil {
			continue
		}
		if err := m.writeRecoveryPoints(d, rps[d], logs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeRecoveryPoints writes dir d's recovery-point checkpoint with rps and records, in each
// written log, the offset the file now holds for it (so an idle broker does not rewrite it). A
// failed write takes the dir offline; the error is d.Fail's. Called with ckptMu held.
func (m *Manager) writeRecoveryPoints(d *dirState, rps map[TopicPartition]int64, logs map[TopicPartition]*Log) error {
	if err := WriteCheckpoint(m.fsys, filepath.Join(d.Path, RecoveryPointCheckpointFile), rps); err != nil {
		return d.Fail(err)
	}
	for tp, rp := range rps {
		if l := logs[tp]; l != nil {
			l.ckptRecovery.Store(rp)
		}
	}
	return nil
}

// Pressure sweeps (settleUnderPressure) run at most every pressureMinGap, and pressureIdleGap
// after a sweep that settled nothing and left the pressure as it was (every segment being written
// not yet synced, or page-cache acknowledgement leaving them unsynced). A sweep visits only the
// logs appended to since the previous one (writtenLogs), so its cost follows the partitions
// written, not the partitions held.
const (
	pressureMinGap  = time.Millisecond
	pressureIdleGap = 100 * time.Millisecond
)

// writtenLogs lists the logs appended to since the pressure loop last took the list, each once
// (Log.listed): an append costs one atomic load while its log is listed.
type writtenLogs struct {
	// mu guards logs.
	mu   sync.Mutex
	logs []*Log
}

// note lists l unless it is listed.
func (w *writtenLogs) note(l *Log) {
	if l.listed.Swap(true) {
		return
	}
	w.mu.Lock()
	w.logs = append(w.logs, l)
	w.mu.Unlock()
}

// remove takes l off the list (a log leaving the Manager).
func (w *writtenLogs) remove(l *Log) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i := slices.Index(w.logs, l); i >= 0 {
		w.logs = slices.Delete(w.logs, i, i+1)
	}
}

// take moves the list into buf and empties it; the logs taken are no longer listed.
func (w *writtenLogs) take(buf []*Log) []*Log {
	w.mu.Lock()
	buf = append(buf[:0], w.logs...)
	clear(w.logs)
	w.logs = w.logs[:0]
	w.mu.Unlock()
	for _, l := range buf {
		l.listed.Store(false)
	}
	return buf
}

// settleUnderPressure settles the active segment of every log appended to since the previous
// sweep whose bytes are all durable, however recently written (segment.SettleIfSynced), when the
// segments being written hold more than three quarters of the descriptor or mapping ceiling
// (segment.Pressure): a burst of produces to more partitions than descriptors then stays within
// the ceiling, the caches evicting the least recently used. A log not settled now (its appender
// holds the lock, or its last append is not synced yet) is listed again for the next sweep. It
// returns buf for reuse and the number of segments settled.
func (m *Manager) settleUnderPressure(buf []*Log) ([]*Log, int) {
	buf = m.written.take(buf)
	n := 0
	for i, l := range buf {
		if settled, retry := l.settleIfSynced(); settled {
			n++
		} else if retry {
			m.written.note(l)
		}
		buf[i] = nil
	}
	segment.TrimCaches()
	return buf[:0], n
}

// pressureLoop runs settleUnderPressure on each segment.Pressure signal.
func (m *Manager) pressureLoop() {
	defer m.wg.Done()
	ch, unsubscribe := segment.Pressure()
	defer unsubscribe()
	var buf []*Log
	gap := time.NewTimer(pressureIdleGap)
	gap.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-ch:
		}
		var n int
		buf, n = m.settleUnderPressure(buf)
		wait := pressureMinGap
		if n == 0 && segment.UnderPressure() {
			wait = pressureIdleGap // futile: nothing to settle
		}
		gap.Reset(wait)
		select {
		case <-m.stop:
			return
		case <-gap.C:
		}
	}
}

func (m *Manager) startLoops() {
	loop := func(every time.Duration, f func()) {
		if every < 0 {
			return
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-m.stop:
					return
				case <-t.C:
					f()
				}
			}
		}()
	}
	loop(m.cfg.RetentionCheckInterval, func() {
		// Descriptors and index mappings of inactive segments nobody read since the last run
		// go (segment/fdcache.go); a later read opens them again.
		segment.EvictIdle()
		m.retryDeletes()
		if n, err := m.RunRetention(); err != nil {
			slog.Error("retention", "err", err)
		} else if n > 0 {
			slog.Info("retention deleted segments", "segments", n)
		}
	})
	loop(settleInterval, m.settleIdle)
	m.wg.Add(1)
	go m.pressureLoop()
	loop(m.cfg.CheckpointInterval, func() {
		if err := m.Checkpoint(); err != nil {
			slog.Error("checkpoint", "err", err)
		}
	})
	loop(m.cfg.ProducerIDExpirationCheckInterval, func() { m.RemoveExpiredProducers() })
	m.startCleaners() // compaction
}

// DefaultProducerIDExpirationCheckInterval is Kafka's producer.id.expiration.check.interval.ms.
const DefaultProducerIDExpirationCheckInterval = 10 * time.Minute

// RemoveExpiredProducers forgets, in every log, the idempotent producers past its
// producer.id.expiration.ms (Kafka's LogManager task) and returns how many it forgot.
func (m *Manager) RemoveExpiredProducers() int {
	n := 0
	for _, l := range m.Logs() {
		n += l.RemoveExpiredProducers()
	}
	return n
}

// closeConcurrency bounds the logs closed at once (closeLogs).
const closeConcurrency = 64

func (m *Manager) closeLogs() error {
	var errs []error
	m.mu.Lock()
	logs := m.logs
	m.mu.Unlock()
	var wg sync.WaitGroup
	var errMu sync.Mutex
	// Bounded: each close may open an idle partition's evicted descriptor and indexes again
	// (the final time index entry, the sync), so all at once could run out of descriptors.
	sem := make(chan struct{}, closeConcurrency)
	for _, l := range logs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := l.Close(); err != nil {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close stops the background loops, flushes and closes every log, writes the checkpoints and,
// in each log dir that stayed online, the clean-shutdown marker.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
	m.mu.Lock()
	futures := m.futures
	m.futures = nil
	m.mu.Unlock()
	for _, f := range futures { // move.go: removed at the next start
		_ = f.log.Close()
	}
	errs := []error{m.closeLogs()}
	if err := m.Checkpoint(); err != nil {
		errs = append(errs, err)
	}
	for _, d := range m.dirs {
		if d.Err() != nil {
			continue
		}
		if err := writeFileAtomic(m.fsys, filepath.Join(d.Path, CleanShutdownFile), []byte(`{"version":0,"brokerEpoch":-1}`)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Dirs returns the log dirs and their state (online or the sticky error).
func (m *Manager) Dirs() []*LogDir {
	out := make([]*LogDir, len(m.dirs))
	for i, d := range m.dirs {
		out[i] = d.LogDir
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
