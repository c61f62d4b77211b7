package broker

// Test-only crash points in the transaction paths.
//
// The crash tests (txn_crash_test.go, scripts/txn-crash.sh) SIGKILL a broker at an exact point of
// a transaction's commit or abort, which timing alone hits only by luck: before or after the
// PrepareCommit/PrepareAbort record, between the markers sent to different leaders, before the
// CompleteCommit/CompleteAbort record, and on a partition leader just before or after it appends
// a marker. The hook is inert unless the environment variable WEIR_TEST_FAULT_DIR is set when
// the broker starts (read once, in New): with it unset every point is one comparison of an
// empty string, and no file is ever read.
//
// With WEIR_TEST_FAULT_DIR=DIR, reaching a point reads the file DIR/node-<node.id>. When the
// file's content (surrounding white space ignored) is the point's name, the broker removes the
// file (so the point fires once, and a restarted broker does not die again) and sends itself
// SIGKILL: no deferred code, no flush, no clean shutdown, exactly as `kill -9` from outside.
// Any other content, or no file, and the point does nothing. The test arms a point by writing
// the file just before the operation and removes it afterwards if the point was not reached.
//
// Points (faultPoint constants below):
//
//	txn-prepare-before        coordinator, before appending PrepareCommit/PrepareAbort to __transaction_state
//	txn-prepare-appended      coordinator, after that append, before it is durable and replicated
//	txn-markers-before        coordinator, PrepareX durable: before the first marker is sent
//	txn-markers-between       coordinator, after the markers to one leader, before those to the next
//	txn-complete-before       coordinator, every marker written: before appending CompleteCommit/CompleteAbort
//	txn-marker-append-before  partition leader, before appending a COMMIT/ABORT marker
//	txn-marker-append-after   partition leader, marker appended, before it is replicated and answered

import (
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/weir-mq/weir/record"
)

// faultDirEnv names the directory of the crash-point files; unset, the points are inert.
const faultDirEnv = "WEIR_TEST_FAULT_DIR"

// faultPoint is a named crash point.
type faultPoint string

const (
	faultPrepareBefore      faultPoint = "txn-prepare-before"
	faultPrepareAppended    faultPoint = "txn-prepare-appended"
	faultMarkersBefore      faultPoint = "txn-markers-before"
	faultMarkersBetween     faultPoint = "txn-markers-between"
	faultCompleteBefore     faultPoint = "txn-complete-before"
	faultMarkerAppendBefore faultPoint = "txn-marker-append-before"
	faultMarkerAppendAfter  faultPoint = "txn-marker-append-after"
)

// fault SIGKILLs this process if point p is armed for this broker (see the file comment).
func (b *Broker) fault(p faultPoint) {
	if b.faultDir == "" {
		return
	}
	path := filepath.Join(b.faultDir, "node-"+strconv.Itoa(int(b.nodeID)))
	data, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(data)) != string(p) {
		return
	}
	_ = os.Remove(path)
	slog.Warn("test crash point reached: killing this process ("+faultDirEnv+" is set)", "point", string(p))
	proc, err := os.FindProcess(os.Getpid())
	if err == nil {
		_ = proc.Kill() // SIGKILL
	}
	select {} // the signal is on its way; nothing after the point may run
}

// faultTxnLog is a __transaction_state partition log with the coordinator's crash points; the
// broker uses it only when WEIR_TEST_FAULT_DIR is set.
type faultTxnLog struct {
	offsetsLog
}

// Transaction states as TransactionLogValue stores them (Kafka's TransactionState ids).
const (
	txnValuePrepareCommit  = 2
	txnValuePrepareAbort   = 3
	txnValueCompleteCommit = 4
	txnValueCompleteAbort  = 5
)

func (l faultTxnLog) Append(batch []byte) (int64, error) {
	st := txnBatchState(batch)
	prepare := st == txnValuePrepareCommit || st == txnValuePrepareAbort
	if prepare {
		l.b.fault(faultPrepareBefore)
	}
	if st == txnValueCompleteCommit || st == txnValueCompleteAbort {
		l.b.fault(faultCompleteBefore)
	}
	next, err := l.offsetsLog.Append(batch)
	if prepare && err == nil {
		l.b.fault(faultPrepareAppended)
	}
	return next, err
}

// txnBatchState is the state byte of the first record's TransactionLogValue in a batch the
// coordinator writes (one uncompressed record per batch), or -1 when there is none (a
// tombstone, or bytes that do not parse). Value layout, v0 and v1 alike: int16 version, int64
// producer id, int16 producer epoch, int32 timeout, int8 state.
func txnBatchState(batch []byte) int {
	if len(batch) <= record.HeaderSize {
		return -1
	}
	b := batch[record.HeaderSize:]
	varint := func() (int64, bool) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	if _, ok := varint(); !ok { // record length
		return -1
	}
	if len(b) < 1 {
		return -1
	}
	b = b[1:]     // attributes
	for range 2 { // timestamp delta, offset delta
		if _, ok := varint(); !ok {
			return -1
		}
	}
	kl, ok := varint()
	if !ok || kl < 0 || kl > int64(len(b)) {
		return -1
	}
	b = b[kl:]
	vl, ok := varint()
	if !ok || vl < 17 || vl > int64(len(b)) {
		return -1
	}
	return int(int8(b[16]))
}
