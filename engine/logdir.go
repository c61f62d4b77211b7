package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/vfs"
)

// ErrResourceExhausted marks an operation refused because the process ran out of a rationed
// resource (descriptors, memory mappings, memory; see vfs.IsResourceExhausted) or because a
// partition budget (budget.go) would be exceeded. The log dir stays online; the operation may be
// retried. Errors carrying it also carry KAFKA_STORAGE_ERROR, which Kafka clients retry after a
// metadata refresh (the partition is still led here, so the retry comes back to this broker).
var ErrResourceExhausted = errors.New("resource exhausted")

// LogDir is one of log.dirs. Its first write or fsync failure is sticky: the directory goes
// offline (read-only), every later write to any of its logs fails with KAFKA_STORAGE_ERROR, and
// nothing is retried (after a failed fsync the page cache state is unknown). What was stored
// before stays readable; a restart recovers it.
//
// Running out of a resource is not a disk failure. Kafka takes a log dir offline on any
// IOException of a roll or checkpoint, "Too many open files" included, so any client allowed to
// create topics could take every partition of a broker offline; weir does not. Fail refuses only
// the operation whose cause
// vfs.IsResourceExhausted recognises (a create, a roll, a checkpoint write) and leaves the
// directory online; the operation is retried (the next append rolls again, the next interval
// writes the checkpoint again).
type LogDir struct {
	Path string
	err  atomic.Pointer[error]

	// refusals counts operations refused for lack of a resource; lastRefusalLog (unix nanos)
	// rate-limits their log lines to one a second.
	refusals       atomic.Int64
	lastRefusalLog atomic.Int64

	// flusher runs the flush cycles of the dir's logs (flush.go).
	flusher dirFlusher
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

// Fail reports a failed operation on the directory and returns the error to answer with. When
// cause is resource exhaustion the operation is refused (a retriable error wrapping cause,
// ErrResourceExhausted and KAFKA_STORAGE_ERROR) and the directory stays online; otherwise the
// directory goes offline with cause (only the first cause is kept).
func (d *LogDir) Fail(cause error) error {
	if vfs.IsResourceExhausted(cause) || errors.Is(cause, ErrResourceExhausted) {
		return d.Refuse(cause)
	}
	return d.failHard(cause)
}

// Refuse counts and returns the refusal of one operation for lack of a resource; the directory
// stays online.
func (d *LogDir) Refuse(cause error) error {
	d.refusals.Add(1)
	now := clock.Nanotime()
	if last := d.lastRefusalLog.Load(); now-last > int64(time.Second) && d.lastRefusalLog.CompareAndSwap(last, now) {
		slog.Warn("operation refused for lack of a resource; the log dir stays online", "dir", d.Path, "err", cause, "refusals", d.refusals.Load())
	}
	if errors.Is(cause, ErrResourceExhausted) {
		return fmt.Errorf("log dir %s: %w: %w", d.Path, cause, kerr.KafkaStorageError)
	}
	return fmt.Errorf("log dir %s: %w: %w: %w", d.Path, cause, ErrResourceExhausted, kerr.KafkaStorageError)
}

// Refusals is the number of operations refused for lack of a resource.
func (d *LogDir) Refusals() int64 { return d.refusals.Load() }

// failHard takes the directory offline whatever the cause: for the few steps that cannot be
// abandoned halfway (a cleaner swap once decided; the next open finishes it).
func (d *LogDir) failHard(cause error) error {
	wrapped := fmt.Errorf("log dir %s offline after %v: %w", d.Path, cause, kerr.KafkaStorageError)
	if d.err.CompareAndSwap(nil, &wrapped) {
		slog.Error("log dir offline", "dir", d.Path, "err", cause)
	}
	return d.Err()
}
