package coordinator

import "time"

// Clock is the coordinator's time source. Timers call f on a goroutine of their own; a group's
// timer callback only posts a closure to the group's goroutine, so a late or stale firing is
// harmless (the group re-checks its deadlines against Now).
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Stopper
}

// Stopper stops a timer; it reports whether the timer was stopped before firing.
type Stopper interface {
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Stopper { return time.AfterFunc(d, f) }
