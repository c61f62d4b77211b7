package vfs

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data durably: a temporary file is written and fsynced,
// renamed over path, and the directory fsynced. A crash leaves either the old or the new file.
// The file is created with FileMode (0600).
func WriteFileAtomic(fsys FS, path string, data []byte) error {
	tmp := path + ".tmp"
	// A temporary file left by an earlier failure may carry an older, wider mode: start afresh.
	_ = fsys.Remove(tmp)
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, FileMode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err == nil {
		err = fsys.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
