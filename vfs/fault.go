package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
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
	// standing are the faults that last until ClearFaults (FailSyncs, FailWrites, FailCreates,
	// Stall).
	standing Faults
	// stallDone is closed by ClearFaults and by a new Stall: operations waiting out a stall
	// go on at once.
	stallDone chan struct{}
	// poweredOff is set by PowerOff: every later operation that changes files fails.
	poweredOff bool
}

// Faults are the standing faults of a FaultFS (Active). Each applies to the paths that contain
// its Match ("" = every path) and lasts until ClearFaults; a stall also ends at StallUntil.
type Faults struct {
	// SyncErr fails every Sync and SyncDir (FailSyncs).
	SyncErr   error
	SyncMatch string
	// WriteErr fails every WriteAt (FailWrites).
	WriteErr   error
	WriteMatch string
	// CreateErr fails every creation of a file that does not exist yet (OpenFile or OpenRaw with
	// O_CREATE) and every Truncate that grows a file (FailCreates).
	CreateErr   error
	CreateMatch string
	// StallUntil holds every WriteAt (StallWrites) and every Sync and SyncDir (StallSyncs)
	// started before it until then (Stall).
	StallUntil              time.Time
	StallMatch              string
	StallWrites, StallSyncs bool
	// PoweredOff is set once PowerOff ran.
	PoweredOff bool
}

// matches says whether a fault limited to match applies to path.
func matches(match, path string) bool { return match == "" || strings.Contains(path, match) }

// NewFaultFS wraps base.
func NewFaultFS(base FS) *FaultFS {
	return &FaultFS{base: base, synced: map[string]int64{}, undurable: map[string]bool{}}
}

// FailNextWrite makes the next WriteAt of any file fail with err (without writing).
func (f *FaultFS) FailNextWrite(err error) { f.mu.Lock(); f.failWrite = err; f.mu.Unlock() }

// FailNextSync makes the next Sync of any file fail with err (without syncing).
func (f *FaultFS) FailNextSync(err error) { f.mu.Lock(); f.failSync = err; f.mu.Unlock() }

// FailSyncs makes every Sync and SyncDir of a path containing match ("" = any) fail with err,
// typically syscall.EIO, from now until ClearFaults (without syncing).
func (f *FaultFS) FailSyncs(err error, match string) {
	f.mu.Lock()
	f.standing.SyncErr, f.standing.SyncMatch = err, match
	f.mu.Unlock()
}

// FailWrites makes every WriteAt to a path containing match ("" = any) fail with err, typically
// syscall.ENOSPC, from now until ClearFaults (without writing).
func (f *FaultFS) FailWrites(err error, match string) {
	f.mu.Lock()
	f.standing.WriteErr, f.standing.WriteMatch = err, match
	f.mu.Unlock()
}

// FailCreates makes every creation of a new file whose path contains match ("" = any), through
// OpenFile or OpenRaw with O_CREATE, and every Truncate that grows such a file, fail with err,
// typically syscall.ENOSPC (a segment roll on a full disk), from now until ClearFaults. Files
// that exist already open as before.
func (f *FaultFS) FailCreates(err error, match string) {
	f.mu.Lock()
	f.standing.CreateErr, f.standing.CreateMatch = err, match
	f.mu.Unlock()
}

// Stall holds every WriteAt (writes) and every Sync and SyncDir (syncs) of a path containing
// match ("" = any) that starts within d from now until d has passed (or ClearFaults), as a
// disk that stops answering for d. The operations then proceed normally. A new Stall replaces the
// previous one.
func (f *FaultFS) Stall(d time.Duration, match string, writes, syncs bool) {
	f.mu.Lock()
	if f.stallDone != nil {
		close(f.stallDone)
	}
	f.stallDone = make(chan struct{})
	f.standing.StallUntil, f.standing.StallMatch = time.Now().Add(d), match
	f.standing.StallWrites, f.standing.StallSyncs = writes, syncs
	f.mu.Unlock()
}

// ClearFaults ends every standing fault (FailSyncs, FailWrites, FailCreates, Stall: stalled
// operations proceed at once) and the pending next-operation faults. It does not undo a crash
// or PowerOff.
func (f *FaultFS) ClearFaults() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stallDone != nil {
		close(f.stallDone)
		f.stallDone = nil
	}
	f.standing = Faults{PoweredOff: f.poweredOff}
	f.failWrite, f.failSync, f.failOpen, f.failOpenMatch, f.failMap = nil, nil, nil, nil, nil
}

// Active returns the standing faults (a stall whose time has passed is left out).
func (f *FaultFS) Active() Faults {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.standing
	if !a.StallUntil.IsZero() && !time.Now().Before(a.StallUntil) {
		a.StallUntil, a.StallMatch, a.StallWrites, a.StallSyncs = time.Time{}, "", false, false
	}
	a.PoweredOff = f.poweredOff
	return a
}

// stall waits out a Stall that applies to an operation on path (sync: a Sync or SyncDir, else
// a WriteAt). It is called before any lock is taken, so a stalled write never holds up a crash.
func (f *FaultFS) stall(path string, sync bool) {
	f.mu.Lock()
	s := f.standing
	done := f.stallDone
	f.mu.Unlock()
	if s.StallUntil.IsZero() || !matches(s.StallMatch, path) || (sync && !s.StallSyncs) || (!sync && !s.StallWrites) {
		return
	}
	d := time.Until(s.StallUntil)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}

// createFaultLocked is the standing create fault for a new file at path, or nil. f.mu is held.
func (f *FaultFS) createFaultLocked(path string) error {
	if f.standing.CreateErr != nil && matches(f.standing.CreateMatch, path) {
		return f.standing.CreateErr
	}
	return nil
}

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

// takeOpenFault is the fault of an open of name with flag: ErrCrashed after PowerOff, the
// standing create fault for a new file, else the next-open fault (taken).
func (f *FaultFS) takeOpenFault(name string, flag int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.poweredOff {
		return ErrCrashed
	}
	if flag&os.O_CREATE != 0 && f.standing.CreateErr != nil && matches(f.standing.CreateMatch, name) {
		if _, err := f.base.Stat(name); err != nil {
			return f.standing.CreateErr
		}
	}
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
// Files opened after it work again (the machine came back): in-process tests reopen the logs on
// the same FaultFS.
func (f *FaultFS) Crash() error {
	f.crashMu.Lock()
	defer f.crashMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.crashLocked()
	return err
}

// CrashStats says what a simulated power loss took away.
type CrashStats struct {
	// FilesRemoved are files created since their directory's last sync; FilesCut are files
	// truncated back to their last synced size, losing BytesDropped bytes in all (not counting
	// the removed files' bytes, RemovedBytes).
	FilesRemoved, FilesCut     int
	BytesDropped, RemovedBytes int64
}

// PowerOff is Crash for a process that is about to be killed (the fault control of a live
// broker): it crashes and, in the same step, makes every later operation that changes files
// (OpenFile, OpenRaw, Remove, Rename, SyncDir, and every handle's writes, syncs and truncations)
// fail with ErrCrashed, so nothing the process does between the crash and its SIGKILL reaches
// the disk through this FS. The process must then be killed; it cannot recover in place.
func (f *FaultFS) PowerOff() (CrashStats, error) {
	f.crashMu.Lock()
	defer f.crashMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.poweredOff = true
	return f.crashLocked()
}

// crashLocked is Crash with crashMu held exclusively and mu held.
func (f *FaultFS) crashLocked() (CrashStats, error) {
	var cs CrashStats
	f.generation++
	for name := range f.undurable {
		if st, err := os.Stat(name); err == nil {
			cs.RemovedBytes += st.Size()
		}
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return cs, err
		}
		cs.FilesRemoved++
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
				return cs, err
			}
			cs.FilesCut++
			cs.BytesDropped += st.Size() - size
		}
	}
	return cs, nil
}

func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f.crashMu.RLock()
	defer f.crashMu.RUnlock()
	if err := f.takeOpenFault(name, flag); err != nil {
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
	if f.poweredOff {
		f.mu.Unlock()
		return &os.PathError{Op: "remove", Path: name, Err: ErrCrashed}
	}
	delete(f.synced, name)
	delete(f.undurable, name)
	f.mu.Unlock()
	return f.base.Remove(name)
}

// Rename renames oldpath. A crash before newpath's directory is synced is simulated as the
// rename having reached the disk when newpath existed durably before (a file replaced by
// WriteFileAtomic keeps its name: the new content, as far as it was synced), and as newpath
// vanishing when it is new (renamed from a file created since its directory's last sync).
func (f *FaultFS) Rename(oldpath, newpath string) error {
	f.crashMu.RLock()
	defer f.crashMu.RUnlock()
	f.mu.Lock()
	off := f.poweredOff
	f.mu.Unlock()
	if off {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: ErrCrashed}
	}
	_, statErr := f.base.Stat(newpath)
	if err := f.base.Rename(oldpath, newpath); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	replacedDurable := statErr == nil && !f.undurable[newpath]
	delete(f.synced, newpath)
	delete(f.undurable, newpath)
	if s, ok := f.synced[oldpath]; ok {
		f.synced[newpath] = s
		delete(f.synced, oldpath)
	}
	if f.undurable[oldpath] {
		if !replacedDurable {
			f.undurable[newpath] = true
		}
		delete(f.undurable, oldpath)
	}
	return nil
}

func (f *FaultFS) MkdirAll(path string, perm os.FileMode) error {
	f.mu.Lock()
	off := f.poweredOff
	f.mu.Unlock()
	if off {
		return &os.PathError{Op: "mkdir", Path: path, Err: ErrCrashed}
	}
	return f.base.MkdirAll(path, perm)
}

func (f *FaultFS) ReadDir(name string) ([]os.DirEntry, error) { return f.base.ReadDir(name) }
func (f *FaultFS) Stat(name string) (os.FileInfo, error)      { return f.base.Stat(name) }

func (f *FaultFS) SyncDir(dir string) error {
	f.stall(dir, true)
	f.crashMu.RLock()
	defer f.crashMu.RUnlock()
	if err := f.takeSyncFault(dir); err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
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

// takeSyncFault is the fault of a sync of path: ErrCrashed after PowerOff, the next-sync fault
// (taken), else the standing sync fault.
func (f *FaultFS) takeSyncFault(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.poweredOff {
		return ErrCrashed
	}
	if err := f.failSync; err != nil {
		f.failSync = nil
		return err
	}
	if f.standing.SyncErr != nil && matches(f.standing.SyncMatch, path) {
		return f.standing.SyncErr
	}
	return nil
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
	ff.fs.stall(ff.name, false)
	ff.fs.crashMu.RLock()
	defer ff.fs.crashMu.RUnlock()
	ff.fs.mu.Lock()
	if ff.gen != ff.fs.generation {
		ff.fs.mu.Unlock()
		return 0, ErrCrashed
	}
	err := ff.fs.failWrite
	ff.fs.failWrite = nil
	if err == nil && ff.fs.standing.WriteErr != nil && matches(ff.fs.standing.WriteMatch, ff.name) {
		err = ff.fs.standing.WriteErr
	}
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
	ff.fs.stall(ff.name, true)
	ff.fs.crashMu.RLock()
	defer ff.fs.crashMu.RUnlock()
	if err := ff.live(); err != nil {
		return err
	}
	if err := ff.fs.takeSyncFault(ff.name); err != nil {
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
	ff.fs.mu.Lock()
	cerr := ff.fs.createFaultLocked(ff.name)
	ff.fs.mu.Unlock()
	if cerr != nil {
		if st, err := ff.File.Stat(); err == nil && size > st.Size() {
			return &os.PathError{Op: "truncate", Path: ff.name, Err: cerr}
		}
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
