package clock

import (
	"time"

	"github.com/weir-mq/weir/internal/clock/internal/offset"
)

// start is the monotonic origin of Nanotime: a reading taken at package initialisation.
var start = time.Now()

// Now is the process's wall clock: the system's wall time plus the offset the fault control
// set (zero unless a -tags faults build or a test moved it). The result carries no monotonic
// reading (it is rounded with Round(0)), so Sub, Before and After between two results compare
// wall readings, as Kafka's Time.milliseconds() values do: a step of the clock shows in them.
func Now() time.Time {
	return time.Now().Round(0).Add(time.Duration(offset.Nanos.Load()))
}

// NowMs is Now in unix milliseconds (Kafka's Time.milliseconds()).
func NowMs() int64 { return Now().UnixMilli() }

// Nanotime is the process's monotonic clock in nanoseconds, never moved by a wall-clock step
// nor by the fault control (Kafka's Time.nanoseconds()). For elapsed-time measurements kept as
// integers (rate limits, intervals, idle times, deadlines). Its origin is arbitrary but far
// from zero (NanotimeOrigin at package initialisation), so a zero field can mean "never" and
// "now - 0" exceeds any interval, as it did with wall-clock Unix readings.
func Nanotime() int64 { return NanotimeOrigin + int64(time.Since(start)) }

// NanotimeOrigin is Nanotime's reading at package initialisation (about 13 days).
const NanotimeOrigin = int64(1) << 50

// Offset is the wall clock's current offset from the system's wall clock.
func Offset() time.Duration { return time.Duration(offset.Nanos.Load()) }
