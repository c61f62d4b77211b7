package clock_test

import (
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/clock/clockctl"
)

// within checks that got is want give or take slack.
func within(t *testing.T, what string, got, want, slack time.Duration) {
	t.Helper()
	if got < want-slack || got > want+slack {
		t.Fatalf("%s = %v, want %v ± %v", what, got, want, slack)
	}
}

func TestNowFollowsTheOffsetAndNanotimeDoesNot(t *testing.T) {
	t.Cleanup(clockctl.Reset)
	clockctl.Reset()
	if o := clock.Offset(); o != 0 {
		t.Fatalf("offset after Reset = %v", o)
	}
	within(t, "Now - time.Now", clock.Now().Sub(time.Now().Round(0)), 0, time.Second)

	mono0, wall0 := clock.Nanotime(), clock.Now()
	if got := clockctl.Step(24 * time.Hour); got != 24*time.Hour {
		t.Fatalf("Step(24h) = %v", got)
	}
	within(t, "Now after +24h", clock.Now().Sub(wall0), 24*time.Hour, time.Second)
	within(t, "Nanotime after +24h", time.Duration(clock.Nanotime()-mono0), 0, time.Second)
	within(t, "NowMs after +24h", time.Duration(clock.NowMs()-wall0.UnixMilli())*time.Millisecond, 24*time.Hour, time.Second)

	clockctl.Step(-48 * time.Hour) // -1 day from the start
	within(t, "Now after -48h", clock.Now().Sub(wall0), -24*time.Hour, time.Second)
	if clock.Now().After(wall0) {
		t.Fatal("a backward step must show in Now's comparisons (no monotonic reading)")
	}
	if d := clock.Nanotime() - mono0; d < 0 {
		t.Fatalf("Nanotime went back by %v across a backward step", time.Duration(-d))
	}
	if prev := clockctl.Set(time.Minute); prev != -24*time.Hour {
		t.Fatalf("Set returned %v, want the previous -24h", prev)
	}
	if clock.Offset() != time.Minute || clockctl.Offset() != time.Minute {
		t.Fatalf("offset = %v / %v, want 1m", clock.Offset(), clockctl.Offset())
	}
	if _, ok := readMono(clock.Now()); ok {
		t.Fatal("Now carries a monotonic reading")
	}
}

// readMono reports whether t carries a monotonic clock reading (its String shows "m=").
func readMono(t time.Time) (string, bool) {
	s := t.String()
	for i := 0; i+2 < len(s); i++ {
		if s[i:i+3] == "m=+" || s[i:i+3] == "m=-" {
			return s[i:], true
		}
	}
	return "", false
}

func TestNanotimeIsMonotonic(t *testing.T) {
	prev := clock.Nanotime()
	for range 1000 {
		n := clock.Nanotime()
		if n < prev {
			t.Fatalf("Nanotime went back: %d < %d", n, prev)
		}
		prev = n
	}
}
