//go:build linux

package vfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestConcurrentSyncs: overlapping syncs of many files (the case that goes through AIO) all
// succeed, and the data reads back.
func TestConcurrentSyncs(t *testing.T) {
	dir := t.TempDir()
	before := aioCompleted.Load()
	const files, rounds = 16, 40
	data := bytes.Repeat([]byte("weir"), 4096)
	var wg sync.WaitGroup
	errs := make(chan error, files)
	for i := range files {
		wg.Go(func() {
			f, err := OS.OpenFile(filepath.Join(dir, string(rune('a'+i))), os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for r := range rounds {
				if _, err := f.WriteAt(data, int64(r*len(data))); err != nil {
					errs <- err
					return
				}
				if err := f.Sync(); err != nil {
					errs <- err
					return
				}
			}
			got := make([]byte, len(data))
			if _, err := f.ReadAt(got, int64((rounds-1)*len(data))); err != nil || !bytes.Equal(got, data) {
				errs <- errors.New("data does not read back")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if aio != nil && aioCompleted.Load() == before {
		t.Log("no sync overlapped another: the AIO path was not exercised")
	}
}

// TestAIOSyncErrors: a sync through AIO reports the kernel's error, and a refused submit falls
// back to fdatasync(2), which reports its own.
func TestAIOSyncErrors(t *testing.T) {
	if aio == nil {
		t.Skip("AIO unavailable")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := aio.fdatasync(int(f.Fd())); err != nil {
		t.Fatalf("aio fdatasync: %v", err)
	}
	fd := int(f.Fd())
	f.Close()
	if err := aio.fdatasync(fd); err != errAIOUnavailable {
		t.Fatalf("aio fdatasync of a closed fd: %v, want the submit refused", err)
	}
	syncsInFlight.Add(1) // as if another sync were in flight: take the AIO path
	defer syncsInFlight.Add(-1)
	if err := fdatasync(fd); !errors.Is(err, unix.EBADF) {
		t.Fatalf("fdatasync of a closed fd: %v, want EBADF", err)
	}
}

// TestBatchSync: SyncFiles syncs every file of a batch through one submission and reports each
// file's own result: a closed descriptor in the middle fails alone, the files around it succeed,
// and FaultFS files in the same batch go through their own Sync.
func TestBatchSync(t *testing.T) {
	dir := t.TempDir()
	var files []File
	for i := range 6 {
		f, err := OS.OpenFile(filepath.Join(dir, string(rune('a'+i))), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte("weir"), 0); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	ffs := NewFaultFS(OS)
	ff, err := ffs.OpenFile(filepath.Join(dir, "fault"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer ff.Close()
	files = append(files, ff)
	var s BatchSyncer
	errs := make([]error, len(files))
	before := batchesSynced.Load()
	for range 3 { // reused buffers
		s.SyncFiles(files, errs)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("file %d: %v", i, err)
			}
		}
	}
	if aio != nil && batchesSynced.Load()-before != 3 {
		t.Fatalf("%d batches synced, want 3", batchesSynced.Load()-before)
	}
	ffs.FailNextSync(errors.New("injected"))
	files[3].Close()
	s.SyncFiles(files, errs)
	for i, err := range errs {
		switch i {
		case 3:
			if err == nil {
				t.Fatal("the closed file's sync succeeded")
			}
		case len(files) - 1:
			if err == nil {
				t.Fatal("the injected sync failure was not reported")
			}
		default:
			if err != nil {
				t.Fatalf("file %d: %v", i, err)
			}
		}
	}
}

// TestBatchSyncLarge: a batch larger than the syncer's AIO context is submitted as slots free up,
// and every file's sync is reported; Close releases the context and the syncer works after it.
func TestBatchSyncLarge(t *testing.T) {
	dir := t.TempDir()
	files := make([]File, 3*batchRing+5)
	for i := range files {
		f, err := OS.OpenFile(filepath.Join(dir, strconv.Itoa(i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte("weir"), 0); err != nil {
			t.Fatal(err)
		}
		files[i] = f
	}
	var s BatchSyncer
	defer s.Close()
	errs := make([]error, len(files))
	for round := range 3 {
		for i := range errs {
			errs[i] = errors.New("not synced")
		}
		s.SyncFiles(files, errs)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, file %d: %v", round, i, err)
			}
		}
		s.Close()
	}
}
