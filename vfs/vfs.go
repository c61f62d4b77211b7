package vfs

import (
	"fmt"
	"io"
	"os"
)

// File is an open file of the engine.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Sync makes every byte written so far durable (fdatasync).
	Sync() error
	Truncate(size int64) error
	Stat() (os.FileInfo, error)
	Close() error
	Name() string
	// OS returns the underlying *os.File, for mmap and sendfile.
	OS() *os.File
}

// FS is the set of filesystem operations the engine uses.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	MkdirAll(path string, perm os.FileMode) error
	ReadDir(name string) ([]os.DirEntry, error)
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory's entries (creations, renames, removals) durable.
	SyncDir(dir string) error
}

// OS is the real filesystem.
var OS FS = osFS{}

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) OS() *os.File { return f.File }

// Sync is fdatasync: the data and the metadata needed to read it back (size), not timestamps.
func (f osFile) Sync() error {
	if err := fdatasync(int(f.File.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.File.Name(), Err: err}
	}
	return nil
}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// BatchSyncer syncs several files at once (SyncFiles). It keeps its buffers between calls, so a
// goroutine that syncs a batch per round (the engine's flusher) allocates nothing per round. A
// BatchSyncer is used by one goroutine at a time.
type BatchSyncer struct {
	aio aioBatch // platform state (aio_linux.go)
}

// Close releases what the syncer holds (an AIO context on Linux). It may be used again after.
func (s *BatchSyncer) Close() { s.aio.close() }

// SyncFiles makes every byte written so far to each file durable, as files[i].Sync() would, and
// stores each result in errs[i] (len(errs) >= len(files)). On Linux the fdatasyncs of real files
// run at once: one io_submit for all but one, which this goroutine syncs meanwhile, then one
// io_getevents for the rest (aio_linux.go), with no goroutine hand-off.
func (s *BatchSyncer) SyncFiles(files []File, errs []error) {
	switch len(files) {
	case 0:
	case 1:
		errs[0] = files[0].Sync()
	default:
		s.syncBatch(files, errs)
	}
}
