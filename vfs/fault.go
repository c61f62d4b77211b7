package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// ErrCrashed is returned by every handle opened before FaultFS.Crash.
var ErrCrashed = errors.New("vfs: file handle from before a simulated crash")

// FaultFS wraps an FS with fault injection and crash simulation. See the package doc.
type FaultFS struct {
	base FS

	// crashMu is held shared by every operation that changes files, for its whole duration, and
	// exclusively by Crash, so no operation straddles a crash: a write that passed its generation
	// check cannot land after the crash truncated the file, and a file created just before the
	// crash cannot escape its removal.
	crashMu sync.RWMutex

	mu         sync.Mutex
	generation int
	failWrite  error
	failSync   error
	// failOpen and failMap are the resource faults of the next open or mapping (FailNextOpen,
	// FailNextMap); failOpenMatch, when set, limits failOpen to names it accepts.
	failOpen      error
	failOpenMatch func(name string) bool
	failMap       error
	// synced is the durable size of each file: its size at its last successful Sync.
	synced map[string]int64
	// undurable holds files created since their directory was last synced.
	undurable map[string]bool
}

// NewFaultFS wraps base.
func NewFaultFS(base FS) *FaultFS {
	return &FaultFS{base: base, synced: map[string]int64{}, undurable: map[string]bool{}}
}

// FailNextWrite makes the next WriteAt of any file fail with err (without writing).
func (f *FaultFS) FailNextWrite(err error) { f.mu.Lock(); f.failWrite = err; f.mu.Unlock() }

// FailNextSync makes the next Sync of any file fail with err (without syncing).
func (f *FaultFS) FailNextSync(err error) { f.mu.Lock(); f.failSync = err; f.mu.Unlock() }

// FailNextOpen makes the next open of a file (OpenFile, or OpenRaw through this FS) whose name
// match accepts (nil: any) fail with err, typically syscall.EMFILE, without opening it.
func (f *FaultFS) FailNextOpen(err error, match func(name string) bool) {
	f.mu.Lock()
	f.failOpen, f.failOpenMatch = err, match
	f.mu.Unlock()
}

// FailNextMap makes the next memory mapping made through Map with this FS fail with err,
// typically syscall.ENOMEM (vm.max_map_count reached).
func (f *FaultFS) FailNextMap(err error) { f.mu.Lock(); f.failMap = err; f.mu.Unlock() }

func (f *FaultFS) takeOpenFault(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failOpen == nil || (f.failOpenMatch != nil && !f.failOpenMatch(name)) {
		return nil
	}
	err := f.failOpen
	f.failOpen, f.failOpenMatch = nil, nil
	return err
}

func (f *FaultFS) takeMapFault() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.failMap
	f.failMap = nil
	return err
}

// Crash simulates a power loss: handles opened before it fail with ErrCrashed, every file loses
// the bytes written after its last Sync, and files created since their directory's last sync vanish.
func (f *FaultFS) Crash() error {
	f.crashMu.Lock()
	defer f.crashMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.generation++
	for name := range f.undurable {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		delete(f.synced, name)
	}
	f.undurable = map[string]bool{}
	for name, size := range f.synced {
		st, err := os.Stat(name)
		if err != nil {
			continue
		}
		if st.Size() > size {
			if err := os.Truncate(name, size); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f.crashMu.RLock()
	defer f.crashMu.RUnlock()
	if err := f.takeOpenFault(name); err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	_, statErr := f.base.Stat(name)
	inner, err := f.base.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.synced[name]; !ok {
		if statErr != nil {
			f.undurable[name] = true
			f.synced[name] = 0
		} else if st, err := inner.Stat(); err == nil {
			f.synced[name] = st.Size()
		}
	}
	return &faultFile{File: inner, fs: f, gen: f.generation, name: name}, nil
}

func (f *FaultFS) Remove(name string) error {
	f.crashMu.RLock()
	defer f.crashMu.RUnlock()
	f.mu.Lock()
	delete(f.synced, name)
	delete(f.undurable, name)
	f.mu.Unlock()
	return f.base.Remove(name)
}

func (f *FaultFS) Rename(oldpath, newpath string) error {
	f.crashMu.RLock()
	defer f.crashMu.RUnlock()
	if err := f.base.Rename(oldpath, newpath); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.synced[oldpath]; ok {
		f.synced[newpath] = s
		delete(f.synced, oldpath)
	}
	if f.undurable[oldpath] {
		f.undurable[newpath] = true
		delete(f.undurable, oldpath)
	}
	return nil
}

func (f *FaultFS) MkdirAll(path string, perm os.FileMode) error { return f.base.MkdirAll(path, perm) }
func (f *FaultFS) ReadDir(name string) ([]os.DirEntry, error)   { return f.base.ReadDir(name) }
func (f *FaultFS) Stat(name string) (os.FileInfo, error)        { return f.base.Stat(name) }

func (f *FaultFS) SyncDir(dir string) error {
	f.crashMu.RLock()
	defer f.crashMu.RUnlock()
	if err := f.takeSyncFault(); err != nil {
		return err
	}
	if err := f.base.SyncDir(dir); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for name := range f.undurable {
		if filepath.Dir(name) == filepath.Clean(dir) {
			delete(f.undurable, name)
		}
	}
	return nil
}

func (f *FaultFS) takeSyncFault() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.failSync
	f.failSync = nil
	return err
}

type faultFile struct {
	File
	fs   *FaultFS
	gen  int
	name string
}

func (ff *faultFile) live() error {
	ff.fs.mu.Lock()
	defer ff.fs.mu.Unlock()
	if ff.gen != ff.fs.generation {
		return ErrCrashed
	}
	return nil
}

func (ff *faultFile) WriteAt(p []byte, off int64) (int, error) {
	ff.fs.crashMu.RLock()
	defer ff.fs.crashMu.RUnlock()
	ff.fs.mu.Lock()
	if ff.gen != ff.fs.generation {
		ff.fs.mu.Unlock()
		return 0, ErrCrashed
	}
	err := ff.fs.failWrite
	ff.fs.failWrite = nil
	ff.fs.mu.Unlock()
	if err != nil {
		return 0, &os.PathError{Op: "write", Path: ff.name, Err: err}
	}
	return ff.File.WriteAt(p, off)
}

func (ff *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := ff.live(); err != nil {
		return 0, err
	}
	return ff.File.ReadAt(p, off)
}

func (ff *faultFile) Sync() error {
	ff.fs.crashMu.RLock()
	defer ff.fs.crashMu.RUnlock()
	if err := ff.live(); err != nil {
		return err
	}
	if err := ff.fs.takeSyncFault(); err != nil {
		return &os.PathError{Op: "fdatasync", Path: ff.name, Err: err}
	}
	st, err := ff.File.Stat()
	if err != nil {
		return err
	}
	if err := ff.File.Sync(); err != nil {
		return err
	}
	ff.fs.mu.Lock()
	if ff.gen == ff.fs.generation {
		ff.fs.synced[ff.name] = st.Size()
	}
	ff.fs.mu.Unlock()
	return nil
}

func (ff *faultFile) Truncate(size int64) error {
	ff.fs.crashMu.RLock()
	defer ff.fs.crashMu.RUnlock()
	if err := ff.live(); err != nil {
		return err
	}
	if err := ff.File.Truncate(size); err != nil {
		return err
	}
	ff.fs.mu.Lock()
	if s, ok := ff.fs.synced[ff.name]; ok && s > size {
		ff.fs.synced[ff.name] = size
	}
	ff.fs.mu.Unlock()
	return nil
}
