// Package history is the record of a fault run: every operation a workload client invoked and how
// it completed, one JSON object per line, after Jepsen's Kafka workload. The checker
// (internal/faults/checker) reads it; the runner (internal/faults) writes it.
//
// An operation is written twice: once as it is invoked (Type "invoke") and once when it
// completes: "ok" (it happened), "fail" (it certainly did not happen), or "info" (unknown: a
// timeout or a connection lost after the request was sent; it may or may not have happened).
// Both lines carry the same Process and the completion follows its invocation. A process runs
// one operation at a time.
//
// Values are unique per run: a producer never sends the same value twice (with idempotence, a
// value found at two offsets is a duplicate). Offsets are Kafka offsets. Times are nanoseconds
// since the run started (monotonic clock of the writing process).
//
// A Writer is safe for concurrent use; Read is not streaming-safe against a live writer.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Type is an operation line's kind.
type Type string

// The kinds of lines.
const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
)

// Function names (Op.F).
const (
	// FSend produces: Mops are sends (one per record; on ok each has its Offset).
	FSend = "send"
	// FPoll consumes once: on ok, Mops are the polled records in the order the client returned
	// them. Isolation says read_committed or read_uncommitted.
	FPoll = "poll"
	// FTxn is a transaction of a transactional producer: sends (and, for consume-transform-
	// produce, the offsets it commits). ok = committed, fail = aborted, info = unknown.
	FTxn = "txn"
	// FAssign is a consumer's new assignment or position reset: Mops list the partitions and
	// the offset it will read from next (Offset -1: unknown). Poll monotonicity is checked
	// between assignments.
	FAssign = "assign"
	// FCommit is a group offset commit: Mops are (topic, partition, offset); Group, Member and
	// Generation say who committed. fail with Error = the Kafka error (e.g. FENCED_MEMBER_EPOCH).
	FCommit = "commit"
	// FFetchOffsets reads a group's committed offsets (OffsetFetch): Mops on ok.
	FFetchOffsets = "fetch-offsets"
	// FShareAck is a share consumer's acknowledgement of delivered records: Mops are the records
	// (topic, partition, offset) with Ack "accept", "release" or "reject".
	FShareAck = "share-ack"
	// FShareDeliver is a share consumer's receipt of records: Mops carry DeliveryCount.
	FShareDeliver = "share-deliver"
	// FNemesis is a fault starting ("invoke") or ending ("ok"/"info"); Value names it.
	FNemesis = "nemesis"
	// FFinalRead marks the start ("invoke") and end ("ok") of the final read after healing.
	FFinalRead = "final-read"
)

// Mop is one micro-operation of an Op: a record sent or read, an offset committed.
type Mop struct {
	Topic     string `json:"t,omitempty"`
	Partition int32  `json:"p"`
	// Offset is the record's offset (send on ok, poll) or the committed offset (commit); -1 when
	// unknown.
	Offset int64 `json:"o"`
	// Value is the unique value sent or read (0 for commits).
	Value int64 `json:"v,omitempty"`
	// DeliveryCount is a share record's delivery count (share-deliver).
	DeliveryCount int16 `json:"dc,omitempty"`
	// Ack is a share acknowledgement: "accept", "release", "reject".
	Ack string `json:"ack,omitempty"`
}

// Op is one line of a history.
type Op struct {
	Index   int64  `json:"index"`
	Time    int64  `json:"time"`
	Process int    `json:"process"`
	Type    Type   `json:"type"`
	F       string `json:"f"`
	Mops    []Mop  `json:"mops,omitempty"`
	// Isolation of a poll: "read_committed" or "read_uncommitted" (default).
	Isolation string `json:"isolation,omitempty"`
	// Group, Member and Generation (member epoch) of a commit, fetch-offsets, or share op.
	Group      string `json:"group,omitempty"`
	Member     string `json:"member,omitempty"`
	Generation int32  `json:"generation,omitempty"`
	// Node is the broker a nemesis op or a client op targeted, when one did.
	Node int32 `json:"node,omitempty"`
	// Value describes a nemesis op ("partition leader p0 from 2,3", "pause 1 12s", ...).
	Value string `json:"value,omitempty"`
	// Error is why an op failed or is uncertain (a Kafka error name or a Go error).
	Error string `json:"error,omitempty"`
}

// Writer appends ops to a history file as JSON lines, numbering them.
type Writer struct {
	start time.Time

	mu   sync.Mutex // guards w, next and err
	f    *os.File
	w    *bufio.Writer
	next int64
	err  error
}

// Create creates (truncating) the history file at path; its clock starts now.
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Writer{start: time.Now(), f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// Now is the time since the run started, in nanoseconds.
func (w *Writer) Now() int64 { return int64(time.Since(w.start)) }

// Append stamps op with the next index (and the time, when op.Time is 0) and writes it. It
// returns the stamped op. The first write error is kept and returned by every later call and by
// Close.
func (w *Writer) Append(op Op) (Op, error) {
	if op.Time == 0 {
		op.Time = w.Now()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return op, w.err
	}
	op.Index = w.next
	b, err := json.Marshal(op)
	if err != nil {
		return op, fmt.Errorf("history: %w", err)
	}
	w.next++
	if _, err := w.w.Write(append(b, '\n')); err != nil {
		w.err = fmt.Errorf("history: %w", err)
	}
	return op, w.err
}

// Flush writes buffered lines to the file.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("history: %w", err)
		}
	}
	return w.err
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("history: %w", cerr)
	}
	return err
}

// Read parses a history (JSON lines) from r. A line up to 16 MiB long is accepted.
func Read(r io.Reader) ([]Op, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ops []Op
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("history line %d: %w", line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return ops, nil
}

// ReadFile is Read of the file at path.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	return Read(f)
}
