package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
)

// Moving a log between log dirs (move.go): spread, copy under appends, swap, errors, and the
// recovery of a crash before and after the swap's decision.

// logBytes concatenates a partition directory's .log files in offset order.
func logBytes(t *testing.T, dir string) []byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var out []byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

func TestManagerSpreadsAcrossDirs(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")}
	m := mgrOpen(t, mgrConfig(dirs...))
	defer m.Close()
	for p := range 30 {
		if _, err := m.CreateLog(TopicPartition{Topic: "spread", Partition: int32(p)}, [16]byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	count := map[string]int{}
	for tp := range m.Logs() {
		d, _ := m.LogDirOf(tp)
		count[d]++
	}
	for _, d := range dirs {
		if count[d] != 10 {
			t.Fatalf("partitions per dir %v, want 10 in each", count)
		}
	}
}

func TestMoveLogUnderAppends(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	cfg := mgrConfig(a, b)
	cfg.Default.SegmentBytes = 4096
	m := mgrOpen(t, cfg)
	tp := TopicPartition{Topic: "mv", Partition: 0}
	l, err := m.CreateLog(tp, [16]byte{7})
	if err != nil {
		t.Fatal(err)
	}
	from, _ := m.LogDirOf(tp)
	to := a
	if from == a {
		to = b
	}
	mgrAppend(t, l, 5, 50)
	if _, err := m.CreateFuture(tp, filepath.Join(root, "nope")); !errors.Is(err, kerr.LogDirNotFound) {
		t.Fatalf("unknown dir: %v", err)
	}
	if _, err := m.CreateFuture(TopicPartition{Topic: "x", Partition: 1}, to); !errors.Is(err, kerr.ReplicaNotAvailable) {
		t.Fatalf("unknown partition: %v", err)
	}
	f, err := m.CreateFuture(tp, to)
	if err != nil || f == nil {
		t.Fatalf("create future: %v", err)
	}
	if ents, _ := filepath.Glob(filepath.Join(to, "mv-0.*-future")); len(ents) != 1 {
		t.Fatalf("future dir: %v", ents)
	}
	// Appends go on while the copy runs.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.Append(buildBatch(3)); err != nil {
				return
			}
		}
	}()
	for range 100 {
		if _, err := f.CatchUp(64 << 10); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	want := logBytes(t, l.Dir())
	end := l.LogEndOffset()
	nl, err := m.CompleteFuture(f)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m.LogDirOf(tp); got != to {
		t.Fatalf("log in %s, want %s", got, to)
	}
	if nl.LogEndOffset() != end {
		t.Fatalf("moved log ends at %d, want %d", nl.LogEndOffset(), end)
	}
	if got := logBytes(t, nl.Dir()); !bytes.Equal(got, want) {
		t.Fatalf("moved log differs: %d bytes, want %d", len(got), len(want))
	}
	if _, err := os.Stat(filepath.Join(from, tp.String())); !os.IsNotExist(err) {
		t.Fatalf("source dir still there: %v", err)
	}
	if _, err := nl.Append(buildBatch(2)); err != nil {
		t.Fatalf("append after the move: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = mgrOpen(t, cfg)
	defer m.Close()
	if got, _ := m.LogDirOf(tp); got != to {
		t.Fatalf("after reopen: log in %s, want %s", got, to)
	}
	if got := mgrLog(t, m, tp).LogEndOffset(); got != end+2 {
		t.Fatalf("after reopen: end %d, want %d", got, end+2)
	}
}

func buildBatch(n int) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte("k"), Value: []byte(strings.Repeat("v", 40))}
	}
	return record.Build(nil, record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}, recs)
}

func TestMoveRecoveryAtStart(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	cfg := mgrConfig(a, b)
	m := mgrOpen(t, cfg)
	tp := TopicPartition{Topic: "rec", Partition: 0}
	l, err := m.CreateLog(tp, [16]byte{9})
	if err != nil {
		t.Fatal(err)
	}
	from, _ := m.LogDirOf(tp)
	to := a
	if from == a {
		to = b
	}
	mgrAppend(t, l, 4, 20)
	end := l.LogEndOffset()
	f, err := m.CreateFuture(tp, to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CatchUp(1 << 30); err != nil {
		t.Fatal(err)
	}
	if err := f.log.Flush(); err != nil {
		t.Fatal(err)
	}
	futureDir := f.log.Dir()
	// A crash before the decision: the source is whole, the copy is removed at start.
	m.Close()
	m = mgrOpen(t, cfg)
	if got, _ := m.LogDirOf(tp); got != from {
		t.Fatalf("log in %s, want %s", got, from)
	}
	if _, err := os.Stat(futureDir); !os.IsNotExist(err) {
		t.Fatalf("unfinished copy left: %v", err)
	}
	// A crash after the decision: the source renamed -delete, the copy not yet in place.
	f, err = m.CreateFuture(tp, to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.CatchUp(1 << 30); err != nil {
		t.Fatal(err)
	}
	futureDir = f.log.Dir()
	m.Close()
	if err := os.Rename(filepath.Join(from, tp.String()), filepath.Join(from, SuffixedDirName(tp, DeleteDirSuffix))); err != nil {
		t.Fatal(err)
	}
	m = mgrOpen(t, cfg)
	defer m.Close()
	if got, _ := m.LogDirOf(tp); got != to {
		t.Fatalf("log in %s, want %s (the copy completed)", got, to)
	}
	if got := mgrLog(t, m, tp).LogEndOffset(); got != end {
		t.Fatalf("end %d, want %d", got, end)
	}
	if _, err := os.Stat(futureDir); !os.IsNotExist(err) {
		t.Fatalf("future dir left: %v", err)
	}
}

func TestOfflineDirAtOpen(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	if err := os.WriteFile(b, []byte("not a dir"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := mgrOpen(t, mgrConfig(a, b))
	defer m.Close()
	var offline int
	for _, d := range m.Dirs() {
		if d.Err() != nil {
			offline++
			if d.Path != b || !errors.Is(d.Err(), kerr.KafkaStorageError) {
				t.Fatalf("dir %s: %v", d.Path, d.Err())
			}
		}
	}
	if offline != 1 || !m.AnyDirOffline() {
		t.Fatalf("%d dirs offline, want 1", offline)
	}
	if _, err := m.CreateLog(TopicPartition{Topic: "t", Partition: 0}, [16]byte{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateFuture(TopicPartition{Topic: "t", Partition: 0}, b); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("move to an offline dir: %v", err)
	}
}

// BenchmarkMoveLog moves a 64 MiB log between two dirs of one filesystem: the copy (with its
// sync) rate, and the swap (frozen source, tail copy, sync, renames, reopen) that the partition
// does not take writes through.
func BenchmarkMoveLog(b *testing.B) {
	value := []byte(strings.Repeat("v", 1000))
	recs := make([]record.Record, 100)
	for i := range recs {
		recs[i] = record.Record{Value: value}
	}
	for range b.N {
		b.StopTimer()
		root := b.TempDir()
		cfg := mgrConfig(filepath.Join(root, "a"), filepath.Join(root, "b"))
		cfg.Default.FlushIntervalMessages = 1 << 30 // page-cache appends: the setup is not the measure
		m, err := OpenManager(cfg)
		if err != nil {
			b.Fatal(err)
		}
		tp := TopicPartition{Topic: "bench", Partition: 0}
		l, err := m.CreateLog(tp, [16]byte{1})
		if err != nil {
			b.Fatal(err)
		}
		for l.Size() < 64<<20 {
			if _, err := l.Append(record.Build(nil, record.BuildOptions{BaseTimestamp: 1_700_000_000_000, ProducerID: -1, BaseSequence: -1}, recs)); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			b.Fatal(err)
		}
		size := l.Size()
		from, _ := m.LogDirOf(tp)
		to := filepath.Join(root, "a")
		if from == to {
			to = filepath.Join(root, "b")
		}
		b.SetBytes(size)
		b.StartTimer()
		start := time.Now()
		f, err := m.CreateFuture(tp, to)
		if err != nil {
			b.Fatal(err)
		}
		for {
			lag, err := f.CatchUp(4 << 20)
			if err != nil {
				b.Fatal(err)
			}
			if lag == 0 {
				break
			}
		}
		if err := f.log.Flush(); err != nil { // as CompleteFuture does before it freezes the source
			b.Fatal(err)
		}
		copied := time.Since(start)
		swapStart := time.Now()
		if _, err := m.CompleteFuture(f); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(swapStart).Microseconds())/1000, "swap-ms")
		b.ReportMetric(float64(copied.Milliseconds()), "copy-ms")
		b.StopTimer()
		m.Close()
	}
}
