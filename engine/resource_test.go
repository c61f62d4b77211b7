package engine

// Resource exhaustion is not a disk failure: a create, a roll or a checkpoint write that runs out
// of descriptors (EMFILE) or mappings (ENOMEM from mmap) is refused with a retriable error, the
// log dir stays online, nothing half-made is left, other partitions keep serving, and the
// operation succeeds when retried. The partition budget refuses the same operations before the
// kernel would.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

func openResourceManager(t *testing.T, fsys vfs.FS, budget *Budget) (*Manager, string) {
	t.Helper()
	dir := t.TempDir()
	m, err := OpenManager(ManagerConfig{Dirs: []string{dir}, FS: fsys, Default: faultConfig(),
		RetentionCheckInterval: -1, CheckpointInterval: -1, CleanerThreads: -1, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, dir
}

// checkRefused checks that err is a retriable refusal and the log dir is still online.
func checkRefused(t *testing.T, m *Manager, err error, cause error) {
	t.Helper()
	if err == nil {
		t.Fatal("operation succeeded; want a refusal")
	}
	if !errors.Is(err, ErrResourceExhausted) || !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("error %v: want ErrResourceExhausted and KAFKA_STORAGE_ERROR", err)
	}
	if cause != nil && !errors.Is(err, cause) {
		t.Fatalf("error %v does not carry its cause %v", err, cause)
	}
	for _, d := range m.Dirs() {
		if d.Err() != nil {
			t.Fatalf("log dir %s went offline: %v", d.Path, d.Err())
		}
	}
}

// checkServes appends one batch to l and reads it back.
func checkServes(t *testing.T, l *Log) {
	t.Helper()
	base := l.LogEndOffset()
	info, err := l.Append(offsetBatch(base, 3, time.Now().UnixMilli()))
	if err != nil {
		t.Fatalf("append to %s: %v", l.Dir(), err)
	}
	if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
		t.Fatalf("await durable on %s: %v", l.Dir(), err)
	}
	sl, err := l.Read(base, 1<<20, ReadUpToLogEnd)
	if err != nil || sl.Length == 0 {
		t.Fatalf("read %s at %d: %v (%d bytes)", l.Dir(), base, err, sl.Length)
	}
	sl.Release()
}

func TestCreateLogOutOfDescriptorsOrMappings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*vfs.FaultFS)
		cause error
	}{
		{"EMFILE on the .log", func(f *vfs.FaultFS) {
			f.FailNextOpen(syscall.EMFILE, func(n string) bool { return strings.HasSuffix(n, ".log") })
		}, syscall.EMFILE},
		{"ENFILE on the index", func(f *vfs.FaultFS) {
			f.FailNextOpen(syscall.ENFILE, func(n string) bool { return strings.HasSuffix(n, ".timeindex") })
		}, syscall.ENFILE},
		{"ENOMEM from mmap", func(f *vfs.FaultFS) { f.FailNextMap(syscall.ENOMEM) }, syscall.ENOMEM},
		{"EMFILE on partition.metadata", func(f *vfs.FaultFS) {
			f.FailNextOpen(syscall.EMFILE, func(n string) bool { return strings.Contains(n, PartitionMetadataFile) })
		}, syscall.EMFILE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewFaultFS(vfs.OS)
			m, dir := openResourceManager(t, fsys, nil)
			old, err := m.CreateLog(TopicPartition{"old", 0}, [16]byte{1})
			if err != nil {
				t.Fatal(err)
			}
			checkServes(t, old)
			tp := TopicPartition{"new", 0}
			tc.fault(fsys)
			_, err = m.CreateLog(tp, [16]byte{2})
			checkRefused(t, m, err, tc.cause)
			if _, ok := m.Log(tp); ok {
				t.Fatal("refused log is registered")
			}
			if _, err := os.Stat(filepath.Join(dir, tp.String())); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("refused log left its directory: %v", err)
			}
			checkServes(t, old)
			l, err := m.CreateLog(tp, [16]byte{2})
			if err != nil {
				t.Fatalf("retried create: %v", err)
			}
			checkServes(t, l)
		})
	}
}

func TestRollOutOfMappingsIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*vfs.FaultFS)
	}{
		{"ENOMEM from the index mmap", func(f *vfs.FaultFS) { f.FailNextMap(syscall.ENOMEM) }},
		{"EAGAIN from the index mmap", func(f *vfs.FaultFS) { f.FailNextMap(syscall.EAGAIN) }},
		{"EMFILE on the new .log", func(f *vfs.FaultFS) {
			f.FailNextOpen(syscall.EMFILE, func(n string) bool { return strings.HasSuffix(n, ".log") })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewFaultFS(vfs.OS)
			m, _ := openResourceManager(t, fsys, nil)
			other, err := m.CreateLog(TopicPartition{"other", 0}, [16]byte{1})
			if err != nil {
				t.Fatal(err)
			}
			l, err := m.CreateLog(TopicPartition{"t", 0}, [16]byte{2})
			if err != nil {
				t.Fatal(err)
			}
			acked := map[int64]int64{}
			// Fill the active segment (8 KiB) until a 40-record batch must roll.
			for l.active.Size() < faultConfig().SegmentBytes-512 {
				appendAcked(t, l, 1, acked)
			}
			segs := len(l.Segments())
			base := l.LogEndOffset()
			tc.fault(fsys)
			big := offsetBatch(base, 40, time.Now().UnixMilli())
			_, err = l.Append(big)
			checkRefused(t, m, err, nil)
			if got := len(l.Segments()); got != segs {
				t.Fatalf("refused roll changed the segment count %d -> %d", segs, got)
			}
			if l.LogEndOffset() != base {
				t.Fatalf("refused append moved the log end %d -> %d", base, l.LogEndOffset())
			}
			if _, err := os.Stat(filepath.Join(l.Dir(), segment.FileName(base, segment.LogSuffix))); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("refused roll left a half-made segment: %v", err)
			}
			checkServes(t, other)
			// The retried append rolls.
			info, err := l.Append(offsetBatch(base, 40, time.Now().UnixMilli()))
			if err != nil {
				t.Fatalf("retried append: %v", err)
			}
			if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
				t.Fatal(err)
			}
			acked[info.BaseOffset] = info.LastOffset
			if got := len(l.Segments()); got != segs+1 {
				t.Fatalf("retried append: %d segments, want %d", got, segs+1)
			}
			checkOffsetLog(t, l, acked, 0)
		})
	}
}

func TestCheckpointOutOfDescriptorsIsRetried(t *testing.T) {
	fsys := vfs.NewFaultFS(vfs.OS)
	m, dir := openResourceManager(t, fsys, nil)
	l, err := m.CreateLog(TopicPartition{"t", 0}, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	checkServes(t, l)
	fsys.FailNextOpen(syscall.EMFILE, func(n string) bool { return strings.Contains(n, RecoveryPointCheckpointFile) })
	checkRefused(t, m, m.Checkpoint(), syscall.EMFILE)
	checkServes(t, l)
	if err := m.Checkpoint(); err != nil {
		t.Fatalf("next checkpoint: %v", err)
	}
	rps, err := ReadCheckpoint(filepath.Join(dir, RecoveryPointCheckpointFile))
	if err != nil || rps[TopicPartition{"t", 0}] != l.LogEndOffset() {
		t.Fatalf("checkpoint after retry: %v, %v (log end %d)", rps, err, l.LogEndOffset())
	}
}

func TestFlushOutOfDescriptorsIsRetried(t *testing.T) {
	fsys := vfs.NewFaultFS(vfs.OS)
	m, _ := openResourceManager(t, fsys, nil)
	l, err := m.CreateLog(TopicPartition{"t", 0}, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[int64]int64{}
	for len(l.Segments()) == 1 {
		appendAcked(t, l, 1, acked)
	}
	// The next roll's producer snapshot cannot be written by the flusher.
	fsys.FailNextOpen(syscall.EMFILE, func(n string) bool { return strings.HasSuffix(n, ".snapshot.tmp") })
	deadline := time.Now().Add(10 * time.Second)
	for len(l.Segments()) == 2 && time.Now().Before(deadline) {
		info, err := l.Append(offsetBatch(l.LogEndOffset(), 5, time.Now().UnixMilli()))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
			if !errors.Is(err, ErrResourceExhausted) {
				t.Fatalf("await durable: %v", err)
			}
		}
		acked[info.BaseOffset] = info.LastOffset
	}
	for _, d := range m.Dirs() {
		if d.Err() != nil {
			t.Fatalf("log dir offline: %v", d.Err())
		}
	}
	if d := m.Dirs()[0]; d.Refusals() == 0 {
		t.Fatal("no refusal counted")
	}
	// The flusher retries on its own shortly: the refused snapshot is written, waiters succeed.
	for err := l.Flush(); err != nil; err = l.Flush() {
		if !errors.Is(err, ErrResourceExhausted) || time.Now().After(deadline) {
			t.Fatalf("flush after the refusal: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkServes(t, l)
	if offs, err := snapshotOffsets(fsys, l.Dir()); err != nil || len(offs) == 0 {
		t.Fatalf("producer snapshot of the roll not written after the retry: %v %v", offs, err)
	}
	checkOffsetLog(t, l, acked, 0)
}

func TestBudgetRefusesCreateAndRoll(t *testing.T) {
	skipWithBoundedCaches(t)
	fsys := vfs.NewFaultFS(vfs.OS)
	files, _ := segment.Usage()
	// Room for exactly three more segments in this process.
	budget := &Budget{MaxDescriptors: files + 3*segment.DescriptorsPerSegment, DescriptorLimit: 1000}
	m, _ := openResourceManager(t, fsys, budget)
	var logs []*Log
	for i := range 3 {
		l, err := m.CreateLog(TopicPartition{"t", int32(i)}, [16]byte{1})
		if err != nil {
			t.Fatalf("create %d within the budget: %v", i, err)
		}
		logs = append(logs, l)
	}
	_, err := m.CreateLog(TopicPartition{"t", 3}, [16]byte{1})
	checkRefused(t, m, err, nil)
	if !IsBudgetError(err) || !strings.Contains(err.Error(), "RLIMIT_NOFILE=1000") {
		t.Fatalf("refusal %v: want a budget error naming RLIMIT_NOFILE", err)
	}
	// A roll needs a segment too: refused cleanly, the partition keeps its data.
	l := logs[0]
	acked := map[int64]int64{}
	for l.active.Size() < faultConfig().SegmentBytes-512 {
		appendAcked(t, l, 1, acked)
	}
	_, err = l.Append(offsetBatch(l.LogEndOffset(), 40, time.Now().UnixMilli()))
	checkRefused(t, m, err, nil)
	for _, l := range logs[1:] {
		checkServes(t, l)
	}
	checkOffsetLog(t, l, acked, 0)
}

// A follower copying its leader rolls too: a roll refused for lack of a mapping fails that
// AppendStored (the fetcher retries it) without taking the follower's log dir offline.
func TestFollowerRollOutOfMappingsIsRetried(t *testing.T) {
	fsys := vfs.NewFaultFS(vfs.OS)
	m, _ := openResourceManager(t, fsys, nil)
	l, err := m.CreateLog(TopicPartition{"f", 0}, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	acked := map[int64]int64{}
	for l.active.Size() < faultConfig().SegmentBytes-512 {
		base := l.LogEndOffset()
		info, err := l.AppendStored(offsetBatch(base, 3, time.Now().UnixMilli()))
		if err != nil {
			t.Fatal(err)
		}
		acked[base] = info.LastOffset
	}
	segs, base := len(l.Segments()), l.LogEndOffset()
	fsys.FailNextMap(syscall.ENOMEM)
	_, err = l.AppendStored(offsetBatch(base, 40, time.Now().UnixMilli()))
	checkRefused(t, m, err, syscall.ENOMEM)
	if len(l.Segments()) != segs || l.LogEndOffset() != base {
		t.Fatalf("refused roll changed the log: %d segments, end %d", len(l.Segments()), l.LogEndOffset())
	}
	info, err := l.AppendStored(offsetBatch(base, 40, time.Now().UnixMilli()))
	if err != nil {
		t.Fatalf("retried follower append: %v", err)
	}
	acked[base] = info.LastOffset
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	checkOffsetLog(t, l, acked, 0)
}

// A roll that is only due by time (segment.ms) and is refused for lack of a resource does not fail
// the append: the batch still fits the active segment and goes there; a later append rolls.
func TestTimeRollRefusedAppendsToActive(t *testing.T) {
	fsys := vfs.NewFaultFS(vfs.OS)
	m, _ := openResourceManager(t, fsys, nil)
	l, err := m.CreateLog(TopicPartition{"time", 0}, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := l.Config()
	cfg.SegmentMs = 1000
	l.SetConfig(cfg)
	ts := time.Now().UnixMilli()
	acked := map[int64]int64{}
	for i, at := range []int64{ts, ts + 5000, ts + 10000} {
		if i == 1 {
			fsys.FailNextMap(syscall.ENOMEM)
		}
		base := l.LogEndOffset()
		info, err := l.Append(offsetBatch(base, 2, at))
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		acked[base] = info.LastOffset
		if want := []int{1, 1, 2}[i]; len(l.Segments()) != want {
			t.Fatalf("after append %d: %d segments, want %d", i, len(l.Segments()), want)
		}
	}
	if m.Dirs()[0].Refusals() != 1 || m.Dirs()[0].Err() != nil {
		t.Fatalf("refusals %d, dir error %v", m.Dirs()[0].Refusals(), m.Dirs()[0].Err())
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	checkOffsetLog(t, l, acked, 0)
}

func TestMappingBudgetRefusesCreate(t *testing.T) {
	fsys := vfs.NewFaultFS(vfs.OS)
	_, maps := segment.Usage()
	// Room for two more segments (two index mappings and room for a read mapping each).
	budget := &Budget{MaxMappings: maps + 2*(segment.IndexMappingsPerSegment+1), MappingLimit: 65530}
	m, _ := openResourceManager(t, fsys, budget)
	for i := range 2 {
		if _, err := m.CreateLog(TopicPartition{"m", int32(i)}, [16]byte{1}); err != nil {
			t.Fatalf("create %d within the budget: %v", i, err)
		}
	}
	_, err := m.CreateLog(TopicPartition{"m", 2}, [16]byte{1})
	checkRefused(t, m, err, nil)
	if !IsBudgetError(err) || !strings.Contains(err.Error(), "vm.max_map_count=65530") {
		t.Fatalf("refusal %v: want a budget error naming vm.max_map_count", err)
	}
}
