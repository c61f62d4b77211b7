// Package clockctl moves the wall clock of internal/clock: the test-only control behind
// /faults/clock. Only test files and files built with -tags faults may import it; the layering
// test (internal/layering) refuses it in the imports of any other file, so nothing in a release
// binary can move the clock.
//
// Step adds to the offset of clock.Now (a wall-clock step: clock.Now jumps, clock.Nanotime and
// Go's monotonic readings do not); Set and Reset set it. Strobe alternates the offset between
// its value at the start and that plus delta every period (Jepsen's clock strobe) on a goroutine
// of its own, for a bounded time, and ends where it began. Handler is the HTTP control.
//
// Goroutines: one per running strobe (at most one at a time), ended by its deadline or by
// Reset. Everything here is safe for concurrent use.
package clockctl

import (
	"errors"
	"sync"
	"time"

	"github.com/weir-mq/weir/internal/clock/internal/offset"
)

// MaxStrobe bounds a strobe's duration, so a forgotten one ends.
const MaxStrobe = 10 * time.Minute

// ErrStrobing refuses a strobe while another one runs.
var ErrStrobing = errors.New("a clock strobe is already running")

// strobeMu guards stop, the running strobe's stop function (nil when none runs).
var (
	strobeMu sync.Mutex
	stop     func()
)

// Step adds d to the offset and returns the new offset.
func Step(d time.Duration) time.Duration { return time.Duration(offset.Nanos.Add(int64(d))) }

// Set sets the offset to d and returns the previous one.
func Set(d time.Duration) time.Duration { return time.Duration(offset.Nanos.Swap(int64(d))) }

// Offset is the current offset.
func Offset() time.Duration { return time.Duration(offset.Nanos.Load()) }

// Reset stops a running strobe and sets the offset to zero.
func Reset() {
	strobeMu.Lock()
	s := stop
	strobeMu.Unlock()
	if s != nil {
		s()
	}
	Set(0)
}

// Strobing says whether a strobe runs.
func Strobing() bool {
	strobeMu.Lock()
	defer strobeMu.Unlock()
	return stop != nil
}

// Strobe starts a strobe: the offset is stepped by +delta, then by -delta a period later, and so
// on, for dur (at most MaxStrobe), and is back at its starting value (plus any Step made
// meanwhile) when the strobe ends. It returns at once; done is closed when the strobe has
// ended. A strobe while another runs is ErrStrobing.
func Strobe(delta, period, dur time.Duration) (done <-chan struct{}, err error) {
	if period <= 0 || dur <= 0 || dur > MaxStrobe {
		return nil, errors.New("strobe needs period > 0 and 0 < for <= 10m")
	}
	strobeMu.Lock()
	defer strobeMu.Unlock()
	if stop != nil {
		return nil, ErrStrobing
	}
	quit := make(chan struct{})
	ended := make(chan struct{})
	var once sync.Once
	stop = func() { once.Do(func() { close(quit) }); <-ended }
	go func() {
		defer func() {
			strobeMu.Lock()
			stop = nil
			strobeMu.Unlock()
			close(ended)
		}()
		t := time.NewTicker(period)
		defer t.Stop()
		deadline := time.NewTimer(dur)
		defer deadline.Stop()
		up := false
		flip := func() {
			if up {
				Step(-delta)
			} else {
				Step(delta)
			}
			up = !up
		}
		flip()
		for {
			select {
			case <-t.C:
				flip()
				continue
			case <-deadline.C:
			case <-quit:
			}
			if up {
				flip()
			}
			return
		}
	}()
	return ended, nil
}
