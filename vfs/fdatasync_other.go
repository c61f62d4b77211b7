//go:build !linux

package vfs

import "golang.org/x/sys/unix"

// fdatasync makes fd's data durable (blocking; AIO is Linux-only, see aio_linux.go).
func fdatasync(fd int) error {
	for {
		if err := unix.Fdatasync(fd); err != unix.EINTR {
			return err
		}
	}
}

// aioBatch holds nothing without Linux AIO.
type aioBatch struct{}

func (*aioBatch) close() {}

// syncBatch syncs the files in turn (AIO is Linux-only).
func (s *BatchSyncer) syncBatch(files []File, errs []error) {
	for i, f := range files {
		errs[i] = f.Sync()
	}
}
