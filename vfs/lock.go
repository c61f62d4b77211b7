package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// LockFileName is the lock file of a log dir, as Kafka names it.
const LockFileName = ".lock"

// DirLock is an exclusive lock on a directory, held for a broker's life: flock(LOCK_EX|LOCK_NB)
// on <dir>/.lock. The kernel drops it when the process dies, so a crash never leaves a dir locked.
// flock locks belong to the open file, so a second broker in the same process is refused too.
// (Kafka locks the same file with a POSIX record lock, FileChannel.tryLock; on Linux the two kinds
// do not see each other, so this guards weir against weir.)
type DirLock struct {
	dir string
	f   *os.File
}

// LockDir takes dir's lock or fails at once, naming the dir, when another broker holds it.
func LockDir(dir string) (*DirLock, error) {
	p := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, FileMode)
	if err != nil {
		return nil, fmt.Errorf("lock log dir %s: %w", dir, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("log dir %s is in use: %s is locked by another broker (another weir serve on the same log.dirs?)", dir, p)
		}
		return nil, fmt.Errorf("lock log dir %s: %w", dir, err)
	}
	return &DirLock{dir: dir, f: f}, nil
}

// Dir is the locked directory.
func (l *DirLock) Dir() string { return l.dir }

// Unlock releases the lock (closing the file releases it). A nil lock is a no-op.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
