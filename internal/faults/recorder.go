package faults

import (
	"sync"
	"sync/atomic"

	"github.com/weir-mq/weir/internal/faults/history"
)

// recorder writes a run's history and hands out process numbers. It is safe for concurrent use.
type recorder struct {
	w        *history.Writer
	nextProc atomic.Int64 // the next unused process number

	mu     sync.Mutex // guards counts and err
	counts map[history.Type]int
	err    error // the first write error
}

func newRecorder(w *history.Writer) *recorder {
	r := &recorder{w: w, counts: map[history.Type]int{}}
	r.nextProc.Store(1) // process 0 is the nemesis
	return r
}

// nemesisProcess is the process number of nemesis ops.
const nemesisProcess = 0

// process is a new process number. A client takes a new one after an op whose outcome is
// unknown (info): that op may still take effect while the client runs the next one, and a
// process runs one op at a time.
func (r *recorder) process() int { return int(r.nextProc.Add(1) - 1) }

// append writes op and returns it stamped (index, time).
func (r *recorder) append(op history.Op) history.Op {
	op, err := r.w.Append(op)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil && r.err == nil {
		r.err = err
	}
	if op.F != history.FNemesis && op.F != history.FFinalRead {
		r.counts[op.Type]++
	}
	return op
}

// invoke writes op as invoked and returns it; complete writes its completion.
func (r *recorder) invoke(op history.Op) history.Op {
	op.Type = history.Invoke
	op.Time = 0
	return r.append(op)
}

// complete writes op's completion of type typ (op.Time reset to now).
func (r *recorder) complete(op history.Op, typ history.Type) history.Op {
	op.Type = typ
	op.Time = 0
	return r.append(op)
}

// count is the number of lines of type typ written for client ops (not nemesis, not final-read markers).
func (r *recorder) count(typ history.Type) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[typ]
}

// firstErr is the first history write error.
func (r *recorder) firstErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
