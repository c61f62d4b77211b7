package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/weir-mq/weir/vfs"
)

// TestSuffixedDirNameFits: "-delete" and "-stray" names fit in 255 bytes for the longest legal
// topic (249 characters) and any partition, keep the partition and suffix, and are recognised as
// deletion directories (never as partitions).
func TestSuffixedDirNameFits(t *testing.T) {
	long := strings.Repeat("t", 249)
	for _, tp := range []TopicPartition{{long, 0}, {long, 99999}, {long, 2147483647}, {"short", 3}} {
		for _, suffix := range []string{DeleteDirSuffix, StrayDirSuffix} {
			n := SuffixedDirName(tp, suffix)
			if len(n) > 255 || !strings.HasSuffix(n, suffix) || !strings.Contains(n, "-"+itoa(tp.Partition)+".") {
				t.Fatalf("%s-%d %s: %q (%d bytes)", tp.Topic[:5], tp.Partition, suffix, n, len(n))
			}
			if tp.Topic == "short" && !strings.HasPrefix(n, "short-3.") {
				t.Fatalf("short topic shortened: %q", n)
			}
			if _, ok := ParsePartitionDir(n); ok {
				t.Fatalf("%q parses as a partition directory", n)
			}
			if suffix == DeleteDirSuffix && !isDeleteDir(n) {
				t.Fatalf("%q not recognised as a deletion directory", n)
			}
		}
	}
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

// TestManagerDeleteLongTopic: a partition of a 249-character topic is deleted (its directory is
// gone, no "-delete" directory is left), and a log created again under the name starts at offset
// 0, also after a reopen.
func TestManagerDeleteLongTopic(t *testing.T) {
	d0 := filepath.Join(t.TempDir(), "d0")
	cfg := mgrConfig(d0)
	m := mgrOpen(t, cfg)
	tp := TopicPartition{strings.Repeat("x", 249), 5}
	l, err := m.CreateLog(tp, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	mgrAppend(t, l, 3, 2)
	if err := m.DeleteLog(tp); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := m.DeleteFailed(tp); err != nil {
		t.Fatalf("pending: %v", err)
	}
	entries, _ := os.ReadDir(d0)
	for _, e := range entries {
		if e.IsDir() {
			t.Fatalf("%s left behind", e.Name())
		}
	}
	l, err = m.CreateLog(tp, [16]byte{2})
	if err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("re-created log ends at %d", l.LogEndOffset())
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m = mgrOpen(t, cfg)
	defer m.Close()
	if l := mgrLog(t, m, tp); l.LogEndOffset() != 0 {
		t.Fatalf("after reopen: log end %d", l.LogEndOffset())
	}
}

// TestManagerCreateOverLeftover: a directory left where a log is created (a deleted log whose
// removal failed) is removed first: the new log is empty and carries the new topic id.
func TestManagerCreateOverLeftover(t *testing.T) {
	d0 := filepath.Join(t.TempDir(), "d0")
	cfg := mgrConfig(d0)
	m := mgrOpen(t, cfg)
	tp := TopicPartition{"left", 0}
	l, err := m.CreateLog(tp, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	mgrAppend(t, l, 3, 2)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Forget the log but leave its directory, as a failed removal does.
	m = mgrOpen(t, cfg)
	m.mu.Lock()
	old := m.logs[tp]
	delete(m.logs, tp)
	delete(m.dirOf, tp)
	delete(m.ids, tp)
	m.mu.Unlock()
	old.Close()
	l, err = m.CreateLog(tp, [16]byte{2})
	if err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("created over a leftover: log end %d", l.LogEndOffset())
	}
	if id, _ := m.TopicID(tp); id != ([16]byte{2}) {
		t.Fatalf("topic id %x", id)
	}
	m.Close()
}

// renameFailFS fails every rename to a "-delete" name.
type renameFailFS struct{ vfs.FS }

func (f renameFailFS) Rename(oldpath, newpath string) error {
	if strings.HasSuffix(newpath, DeleteDirSuffix) {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.ENAMETOOLONG}
	}
	return f.FS.Rename(oldpath, newpath)
}

// TestManagerDeleteLogRenameFails: when the rename to "-delete" fails, the directory is removed
// in place; a removal recorded as failed is retried by retryDeletes and then no longer reported.
func TestManagerDeleteLogRenameFails(t *testing.T) {
	d0 := filepath.Join(t.TempDir(), "d0")
	cfg := mgrConfig(d0)
	cfg.FS = renameFailFS{vfs.OS}
	m := mgrOpen(t, cfg)
	defer m.Close()
	tp := TopicPartition{"r", 0}
	l, err := m.CreateLog(tp, [16]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	mgrAppend(t, l, 3, 2)
	dir := l.Dir()
	if err := m.DeleteLog(tp); err != nil {
		t.Fatalf("delete with a failing rename: %v", err)
	}
	if mgrExists(dir) {
		t.Fatal("directory left after the in-place removal")
	}
	// A failed removal is reported, retried, then gone.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.notePendingDelete(m.dirs[0], tp, dir, errors.New("injected"))
	if m.DeleteFailed(tp) == nil {
		t.Fatal("pending removal not reported")
	}
	m.retryDeletes()
	if err := m.DeleteFailed(tp); err != nil || mgrExists(dir) {
		t.Fatalf("after the retry: %v, exists %v", err, mgrExists(dir))
	}
}
