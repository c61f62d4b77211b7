package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestIsResourceExhausted(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{syscall.EMFILE, true},
		{syscall.ENFILE, true},
		{syscall.ENOMEM, true},
		{syscall.EAGAIN, true},
		{&os.PathError{Op: "open", Path: "x", Err: syscall.EMFILE}, true},
		{fmt.Errorf("roll: %w", &os.PathError{Op: "mmap", Path: "x", Err: syscall.ENOMEM}), true},
		{syscall.ENOSPC, false}, // a full disk is a storage failure, as in Kafka
		{syscall.EIO, false},
		{syscall.EROFS, false},
		{errors.New("other"), false},
		{nil, false},
	} {
		if got := IsResourceExhausted(tc.err); got != tc.want {
			t.Errorf("IsResourceExhausted(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestFaultFSOpenAndMapFaults(t *testing.T) {
	dir := t.TempDir()
	f := NewFaultFS(OS)
	f.FailNextOpen(syscall.EMFILE, func(n string) bool { return strings.HasSuffix(n, ".b") })
	a, err := f.OpenFile(filepath.Join(dir, "x.a"), os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		t.Fatalf("open not matching the fault: %v", err)
	}
	a.Close()
	if _, err := OpenRaw(f, filepath.Join(dir, "x.b"), os.O_CREATE|os.O_RDWR, FileMode); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("faulted open: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.b")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a faulted open created the file")
	}
	raw, err := OpenRaw(f, filepath.Join(dir, "x.b"), os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		t.Fatalf("the fault is for one open only: %v", err)
	}
	defer raw.Close()
	if err := raw.Truncate(4096); err != nil {
		t.Fatal(err)
	}
	f.FailNextMap(syscall.ENOMEM)
	if _, err := Map(f, raw, 4096, true); !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("faulted map: %v", err)
	}
	m, err := Map(f, raw, 4096, true)
	if err != nil {
		t.Fatalf("the fault is for one mapping only: %v", err)
	}
	m.Unmap()
}

func TestCreatedFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	p := filepath.Join(dir, "ckpt")
	if err := os.WriteFile(p+".tmp", nil, 0o644); err != nil { // a leftover from a failed write
		t.Fatal(err)
	}
	if err := WriteFileAtomic(OS, p, []byte("x")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode() != FileMode {
		t.Fatalf("atomic write: mode %v (%v), want %v", st.Mode(), err, FileMode)
	}
}

func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	lk, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file: a second lock is refused even in this process.
	if _, err := LockDir(dir); err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second lock: %v", err)
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	lk2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	lk2.Unlock()
	if st, err := os.Stat(filepath.Join(dir, LockFileName)); err != nil || st.Mode() != FileMode {
		t.Fatalf(".lock: %v %v", st, err)
	}
}

// TestWriteFileAtomicCrash: whatever fails, and wherever the power goes, a file written with
// WriteFileAtomic (meta.properties, checkpoints) is either absent, its previous content, or its
// new content: never empty or truncated (a truncated meta.properties stops the next start).
func TestWriteFileAtomicCrash(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "meta.properties")
	read := func() string {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			return "<absent>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	fs := NewFaultFS(OS)
	// First write, failing at fsync, then a crash: no file, not an empty one.
	fs.FailNextSync(syscall.EIO)
	if err := WriteFileAtomic(fs, p, []byte("cluster.id=one\n")); err == nil {
		t.Fatal("write with a failing fsync succeeded")
	}
	if err := fs.Crash(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "<absent>" {
		t.Fatalf("after a failed first write and a crash: %q", got)
	}
	fs = NewFaultFS(OS)
	if err := WriteFileAtomic(fs, p, []byte("cluster.id=one\n")); err != nil {
		t.Fatal(err)
	}
	if err := fs.Crash(); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "cluster.id=one\n" {
		t.Fatalf("after a completed write and a crash: %q", got)
	}
	// A rewrite that fails (write or fsync) keeps the old content, crash or not.
	for _, fail := range []func(*FaultFS){
		func(f *FaultFS) { f.FailNextWrite(syscall.ENOSPC) },
		func(f *FaultFS) { f.FailNextSync(syscall.EIO) },
	} {
		fs = NewFaultFS(OS)
		fail(fs)
		if err := WriteFileAtomic(fs, p, []byte("cluster.id=two\n")); err == nil {
			t.Fatal("faulted rewrite succeeded")
		}
		if err := fs.Crash(); err != nil {
			t.Fatal(err)
		}
		if got := read(); got != "cluster.id=one\n" {
			t.Fatalf("after a failed rewrite and a crash: %q", got)
		}
	}
}
