package benchmarks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SequentialWriter is the raw-device baseline for the log's write path: it appends with pwrite(2)
// to plain files in one directory and fdatasyncs on request, nothing else. Like a log it moves to
// a new file every fileBytes and deletes the oldest files beyond keepFiles, so a long run pays the
// same page-cache allocation, block allocation and unlink costs as a log rolling segments under a
// retention limit, and the disk space it uses stays bounded (keepFiles*fileBytes). With
// syncRotated, each finished file is fdatasync'd by a background goroutine, as the log's flusher
// seals a rolled segment off the append path: the data then reaches the device, rather than being
// discarded from the page cache by the unlink, and the baseline pays the same writeback.
//
// Not safe for concurrent use.
type SequentialWriter struct {
	dir       string
	fileBytes int64
	keepFiles int

	file  *os.File
	fd    int
	pos   int64    // next write position in file
	files []string // paths written, oldest first; the last is file
	seq   int

	// rotated carries finished files to the background syncer (nil without syncRotated);
	// syncErr is its first error, syncDone closed when it exits.
	rotated  chan *os.File
	syncErr  error
	syncDone chan struct{}
}

// NewSequentialWriter starts the first file in dir. fileBytes must hold at least one write.
// With syncRotated, finished files are fdatasync'd in the background before they are closed.
func NewSequentialWriter(dir string, fileBytes int64, keepFiles int, syncRotated bool) (*SequentialWriter, error) {
	if fileBytes <= 0 || keepFiles < 1 {
		return nil, fmt.Errorf("sequential writer: fileBytes %d and keepFiles %d must be positive", fileBytes, keepFiles)
	}
	w := &SequentialWriter{dir: dir, fileBytes: fileBytes, keepFiles: keepFiles}
	if syncRotated {
		w.rotated = make(chan *os.File, 64)
		w.syncDone = make(chan struct{})
		go w.syncLoop()
	}
	if err := w.next(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// syncLoop fdatasyncs and closes each rotated file.
func (w *SequentialWriter) syncLoop() {
	defer close(w.syncDone)
	for f := range w.rotated {
		err := fdatasync(int(f.Fd()))
		if err2 := f.Close(); err == nil {
			err = err2
		}
		if err != nil && w.syncErr == nil {
			w.syncErr = fmt.Errorf("sequential writer: background sync: %w", err)
		}
	}
}

func (w *SequentialWriter) next() error {
	if w.file != nil {
		if w.rotated != nil {
			w.rotated <- w.file
		} else if err := w.file.Close(); err != nil {
			return fmt.Errorf("sequential writer: close: %w", err)
		}
		w.file = nil
	}
	path := filepath.Join(w.dir, fmt.Sprintf("raw-%06d.dat", w.seq))
	w.seq++
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("sequential writer: %w", err)
	}
	w.file, w.fd, w.pos = f, int(f.Fd()), 0
	w.files = append(w.files, path)
	for len(w.files) > w.keepFiles {
		if err := os.Remove(w.files[0]); err != nil {
			return fmt.Errorf("sequential writer: %w", err)
		}
		w.files = w.files[1:]
	}
	return nil
}

// Write appends p with pwrite, first moving to a new file when p would cross fileBytes. It does
// not allocate except when it moves to a new file.
func (w *SequentialWriter) Write(p []byte) error {
	if w.pos > 0 && w.pos+int64(len(p)) > w.fileBytes {
		if err := w.next(); err != nil {
			return err
		}
	}
	for len(p) > 0 {
		n, err := unix.Pwrite(w.fd, p, w.pos)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("sequential writer: pwrite at %d: %w", w.pos, err)
		}
		p = p[n:]
		w.pos += int64(n)
	}
	return nil
}

// Sync fdatasyncs the current file.
func (w *SequentialWriter) Sync() error {
	if err := fdatasync(w.fd); err != nil {
		return fmt.Errorf("sequential writer: fdatasync: %w", err)
	}
	return nil
}

func fdatasync(fd int) error {
	for {
		err := unix.Fdatasync(fd)
		if err != unix.EINTR {
			return err
		}
	}
}

// Close closes the current file, waits for the background syncs, and removes every file the
// writer made. It reports the first background sync error.
func (w *SequentialWriter) Close() error {
	var errs []error
	if w.file != nil {
		errs = append(errs, w.file.Close())
		w.file = nil
	}
	if w.rotated != nil {
		close(w.rotated)
		<-w.syncDone
		w.rotated = nil
		errs = append(errs, w.syncErr)
	}
	for _, p := range w.files {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	w.files = nil
	return errors.Join(errs...)
}
