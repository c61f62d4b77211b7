package vfs

import (
	"errors"
	"os"
	"syscall"

	"github.com/edsrzf/mmap-go"
)

// File modes of everything the broker writes under its data directories: files readable and
// writable by the broker's user only, directories searchable by it only. Segments, indexes,
// checkpoints, snapshots and meta.properties hold message data, offsets and (in the metadata
// store) SCRAM credentials, so nothing is group- or world-readable whatever the umask (the umask
// only removes bits, so creating with these modes is enough).
const (
	FileMode os.FileMode = 0o600
	DirMode  os.FileMode = 0o700
)

// IsResourceExhausted reports whether err is the process or the kernel running out of a rationed
// resource rather than a fault of the disk: descriptors (EMFILE: RLIMIT_NOFILE, ENFILE: the
// system's file table), memory or mappings (ENOMEM: vm.max_map_count or memory, EAGAIN: what
// mmap(2) and io_submit(2) answer when they cannot get the resources). Such an error refuses the
// operation that hit it and never takes a log dir offline; every other error of a write, fsync,
// create or rename is a storage failure. ENOSPC (a full disk) is a storage failure, as in Kafka.
// This is the one place that decides.
func IsResourceExhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EAGAIN)
}

// faulter is implemented by FaultFS: the faults OpenRaw and Map consult.
type faulter interface {
	takeOpenFault(name string, flag int) error
	takeMapFault() error
}

// OpenRaw opens name as a plain *os.File, outside crash simulation: for files the engine maps
// (indexes), which carry no checksum and are rebuilt after a crash. An FS that injects faults
// (FaultFS.FailNextOpen) may fail it.
func OpenRaw(fsys FS, name string, flag int, perm os.FileMode) (*os.File, error) {
	if f, ok := fsys.(faulter); ok {
		if err := f.takeOpenFault(name, flag); err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
	return os.OpenFile(name, flag, perm)
}

// Map maps the first length bytes of f, read-write when writable. An FS that injects faults
// (FaultFS.FailNextMap) may fail it, as mmap(2) does when vm.max_map_count is reached (ENOMEM).
func Map(fsys FS, f *os.File, length int, writable bool) (mmap.MMap, error) {
	if fi, ok := fsys.(faulter); ok {
		if err := fi.takeMapFault(); err != nil {
			return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
		}
	}
	prot := mmap.RDONLY
	if writable {
		prot = mmap.RDWR
	}
	return mmap.MapRegion(f, length, prot, 0, 0)
}
