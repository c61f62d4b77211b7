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
