// Package offset holds the one cell the fault control writes and internal/clock reads: the
// wall clock's offset from the system's, in nanoseconds. It is internal to internal/clock, so
// only internal/clock (which reads it) and internal/clock/clockctl (which writes it) can import
// it.
package offset

import "sync/atomic"

// Nanos is the offset of clock.Now from the system's wall clock, in nanoseconds.
var Nanos atomic.Int64
