package engine

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
)

// LogDir is one of log.dirs. Its first write or fsync failure is sticky: the directory goes
// offline (read-only), every later write to any of its logs fails with KAFKA_STORAGE_ERROR, and
// nothing is retried (after a failed fsync the page cache state is unknown). What was stored
// before stays readable; a restart recovers it.
type LogDir struct {
	Path string
	err  atomic.Pointer[error]
}

// NewLogDir returns a healthy log dir.
func NewLogDir(path string) *LogDir { return &LogDir{Path: path} }

// Err returns the sticky error, or nil while the directory is online.
func (d *LogDir) Err() error {
	if p := d.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Fail takes the directory offline with cause (only the first cause is kept) and returns the
// storage error to report.
func (d *LogDir) Fail(cause error) error {
	wrapped := fmt.Errorf("log dir %s offline after %v: %w", d.Path, cause, kerr.KafkaStorageError)
	if d.err.CompareAndSwap(nil, &wrapped) {
		slog.Error("log dir offline", "dir", d.Path, "err", cause)
	}
	return d.Err()
}
