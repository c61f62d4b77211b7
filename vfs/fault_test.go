package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func mustOpen(t *testing.T, fsys FS, name string) File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func size(t *testing.T, name string) int64 {
	t.Helper()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestFaultFSFailSyncsStandingAndMatched(t *testing.T) {
	dir := t.TempDir()
	fsys := NewFaultFS(OS)
	a := mustOpen(t, fsys, filepath.Join(dir, "a-0.log"))
	b := mustOpen(t, fsys, filepath.Join(dir, "b-0.log"))
	fsys.FailSyncs(syscall.EIO, "a-0")
	for i := range 3 { // standing: every sync, not only the next
		if err := a.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("sync %d of a matching file: %v, want EIO", i, err)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("sync of a file the fault does not match: %v", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatalf("SyncDir of a dir the fault does not match: %v", err)
	}
	fsys.FailSyncs(syscall.EIO, "")
	if err := fsys.SyncDir(dir); !errors.Is(err, syscall.EIO) {
		t.Fatalf("SyncDir with an unlimited sync fault: %v, want EIO", err)
	}
	if got := fsys.Active(); !errors.Is(got.SyncErr, syscall.EIO) || got.SyncMatch != "" {
		t.Fatalf("Active = %+v", got)
	}
	fsys.ClearFaults()
	if err := a.Sync(); err != nil {
		t.Fatalf("sync after ClearFaults: %v", err)
	}
	// The next-sync fault still fires once, before a standing one.
	fsys.FailNextSync(syscall.EROFS)
	if err := b.Sync(); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("FailNextSync: %v", err)
	}
	if err := b.Sync(); err != nil {
		t.Fatalf("second sync after FailNextSync: %v", err)
	}
}

func TestFaultFSFailWritesENOSPC(t *testing.T) {
	dir := t.TempDir()
	fsys := NewFaultFS(OS)
	a := mustOpen(t, fsys, filepath.Join(dir, "a.log"))
	b := mustOpen(t, fsys, filepath.Join(dir, "b.log"))
	fsys.FailWrites(syscall.ENOSPC, "a.log")
	for i := range 2 {
		if n, err := a.WriteAt([]byte("x"), int64(i)); !errors.Is(err, syscall.ENOSPC) || n != 0 {
			t.Fatalf("write %d to a matching file: %d, %v; want 0, ENOSPC", i, n, err)
		}
	}
	if size(t, a.Name()) != 0 {
		t.Fatal("a failed write wrote bytes")
	}
	if _, err := b.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("write to a file the fault does not match: %v", err)
	}
	fsys.ClearFaults()
	if _, err := a.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("write after ClearFaults: %v", err)
	}
}

func TestFaultFSFailCreates(t *testing.T) {
	dir := t.TempDir()
	fsys := NewFaultFS(OS)
	old := mustOpen(t, fsys, filepath.Join(dir, "00.log"))
	if _, err := old.WriteAt([]byte("abc"), 0); err != nil {
		t.Fatal(err)
	}
	fsys.FailCreates(syscall.ENOSPC, dir)
	next := filepath.Join(dir, "10.log")
	if _, err := fsys.OpenFile(next, os.O_CREATE|os.O_EXCL|os.O_RDWR, FileMode); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("create of a new segment: %v, want ENOSPC", err)
	}
	if _, err := os.Stat(next); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused file exists: %v", err)
	}
	if _, err := OpenRaw(fsys, filepath.Join(dir, "10.index"), os.O_CREATE|os.O_RDWR, FileMode); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("raw create of a new index: %v, want ENOSPC", err)
	}
	again, err := fsys.OpenFile(old.Name(), os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		t.Fatalf("open of an existing file: %v", err)
	}
	defer again.Close()
	if err := old.Truncate(1 << 20); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("growing truncate: %v, want ENOSPC", err)
	}
	if err := old.Truncate(1); err != nil {
		t.Fatalf("shrinking truncate: %v", err)
	}
	fsys.ClearFaults()
	f, err := fsys.OpenFile(next, os.O_CREATE|os.O_EXCL|os.O_RDWR, FileMode)
	if err != nil {
		t.Fatalf("create after ClearFaults: %v", err)
	}
	f.Close()
}

func TestFaultFSStall(t *testing.T) {
	dir := t.TempDir()
	fsys := NewFaultFS(OS)
	a := mustOpen(t, fsys, filepath.Join(dir, "a.log"))
	b := mustOpen(t, fsys, filepath.Join(dir, "b.log"))
	const d = 300 * time.Millisecond
	fsys.Stall(d, "a.log", true, false)
	start := time.Now()
	if _, err := b.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err != nil { // syncs are not stalled
		t.Fatal(err)
	}
	if el := time.Since(start); el >= d {
		t.Fatalf("operations outside the stall took %v", el)
	}
	if _, err := a.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("stalled write: %v", err)
	}
	if el := time.Since(start); el < d {
		t.Fatalf("a stalled write returned after %v, want at least %v", el, d)
	}
	if got := fsys.Active(); !got.StallUntil.IsZero() {
		t.Fatalf("a stall past its time is still active: %+v", got)
	}
	if _, err := a.WriteAt([]byte("y"), 1); err != nil { // the stall is over
		t.Fatal(err)
	}

	// ClearFaults releases a stalled sync at once.
	fsys.Stall(time.Hour, "", false, true)
	done := make(chan error, 1)
	go func() { done <- a.Sync() }()
	fsys.ClearFaults()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ClearFaults did not release a stalled sync")
	}
}

// TestFaultFSCrashIsPowerLoss checks what a power loss does to each kind of file: unsynced bytes
// are lost, files created since their directory's last sync vanish, a file replaced atomically
// keeps its name.
func TestFaultFSCrashIsPowerLoss(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "t-0")
	if err := os.Mkdir(sub, DirMode); err != nil {
		t.Fatal(err)
	}
	pre := filepath.Join(sub, "pre.log")
	if err := os.WriteFile(pre, []byte("0123456789"), FileMode); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(dir, "checkpoint")
	if err := os.WriteFile(ckpt, []byte("old"), FileMode); err != nil {
		t.Fatal(err)
	}
	fsys := NewFaultFS(OS)

	// A file from before the FS was made counts as durable at its size; bytes appended and
	// not synced are lost, bytes synced stay.
	p := mustOpen(t, fsys, pre)
	if _, err := p.WriteAt([]byte("abc"), 10); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteAt([]byte("def"), 13); err != nil {
		t.Fatal(err)
	}
	// A new file synced, its directory synced: it survives with its synced bytes.
	kept := mustOpen(t, fsys, filepath.Join(sub, "kept.log"))
	if _, err := kept.WriteAt([]byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	if err := kept.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(sub); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.WriteAt([]byte("lost"), 4); err != nil {
		t.Fatal(err)
	}
	// A new file synced but its directory not: it vanishes.
	gone := mustOpen(t, fsys, filepath.Join(dir, "gone.log"))
	if _, err := gone.WriteAt([]byte("gone"), 0); err != nil {
		t.Fatal(err)
	}
	if err := gone.Sync(); err != nil {
		t.Fatal(err)
	}
	// A checkpoint replaced atomically, the directory sync not reached: the name stays.
	tmp := mustOpen(t, fsys, ckpt+".tmp")
	if _, err := tmp.WriteAt([]byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(ckpt+".tmp", ckpt); err != nil {
		t.Fatal(err)
	}

	if err := fsys.Crash(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(pre); string(got) != "0123456789abc" {
		t.Fatalf("pre-existing file after crash: %q", got)
	}
	if got, _ := os.ReadFile(kept.Name()); string(got) != "kept" {
		t.Fatalf("durable new file after crash: %q", got)
	}
	if _, err := os.Stat(gone.Name()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file created since its dir's last sync survived: %v", err)
	}
	if got, err := os.ReadFile(ckpt); err != nil || string(got) != "new" {
		t.Fatalf("atomically replaced file after crash: %q, %v", got, err)
	}
	if _, err := p.WriteAt([]byte("x"), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("write through a handle from before the crash: %v", err)
	}
	// After Crash the FS works again (in-process tests reopen on it).
	again := mustOpen(t, fsys, pre)
	if _, err := again.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
}

// TestFaultFSPowerOff checks that after PowerOff nothing changes files through the FS.
func TestFaultFSPowerOff(t *testing.T) {
	dir := t.TempDir()
	fsys := NewFaultFS(OS)
	a := mustOpen(t, fsys, filepath.Join(dir, "a.log"))
	if _, err := a.WriteAt([]byte("unsynced"), 0); err != nil {
		t.Fatal(err)
	}
	cs, err := fsys.PowerOff()
	if err != nil {
		t.Fatal(err)
	}
	if cs != (CrashStats{FilesRemoved: 1, RemovedBytes: 8}) {
		t.Fatalf("PowerOff = %+v", cs)
	}
	if _, err := os.Stat(a.Name()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file never made durable survived power-off: %v", err)
	}
	if _, err := a.WriteAt([]byte("x"), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("write after power-off: %v", err)
	}
	if err := a.Sync(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("sync after power-off: %v", err)
	}
	if _, err := fsys.OpenFile(filepath.Join(dir, "b.log"), os.O_CREATE|os.O_RDWR, FileMode); !errors.Is(err, ErrCrashed) {
		t.Fatalf("open after power-off: %v", err)
	}
	if _, err := OpenRaw(fsys, filepath.Join(dir, "b.index"), os.O_CREATE|os.O_RDWR, FileMode); !errors.Is(err, ErrCrashed) {
		t.Fatalf("raw open after power-off: %v", err)
	}
	if err := fsys.Rename(filepath.Join(dir, "x"), filepath.Join(dir, "y")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("rename after power-off: %v", err)
	}
	if err := fsys.Remove(filepath.Join(dir, "x")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("remove after power-off: %v", err)
	}
	if err := fsys.SyncDir(dir); !errors.Is(err, ErrCrashed) {
		t.Fatalf("SyncDir after power-off: %v", err)
	}
	if err := fsys.MkdirAll(filepath.Join(dir, "d"), DirMode); !errors.Is(err, ErrCrashed) {
		t.Fatalf("MkdirAll after power-off: %v", err)
	}
	if !fsys.Active().PoweredOff {
		t.Fatal("Active does not say powered off")
	}
}
