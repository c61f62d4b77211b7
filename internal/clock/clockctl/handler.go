package clockctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/weir-mq/weir/internal/clock"
)

// Handler is the HTTP control of the wall clock (mounted at /faults/clock by internal/faultctl
// in a -tags faults build). GET reports the state; POST takes one form of:
//
//	step=<duration>                               add to the offset (60s, -60s, 24h, -24h)
//	strobe=<duration>&period=<duration>&for=<duration>   Strobe(strobe, period, for)
//	reset=1                                       stop a strobe, offset 0
//
// Durations are Go's (time.ParseDuration). Every answer is the JSON State after the change;
// a bad request is 400, a strobe while one runs 409.
func Handler() http.Handler { return http.HandlerFunc(serve) }

// State is the control's JSON answer.
type State struct {
	OffsetNanos int64  `json:"offset_ns"`
	Offset      string `json:"offset"`
	Strobing    bool   `json:"strobing"`
	// Now is clock.Now's reading (RFC 3339, nanoseconds) at the answer.
	Now string `json:"now"`
}

func current() State {
	o := Offset()
	return State{OffsetNanos: int64(o), Offset: o.String(), Strobing: Strobing(),
		Now: clock.Now().Format(time.RFC3339Nano)}
}

func serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		if err := apply(r); err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, ErrStrobing) {
				code = http.StatusConflict
			}
			http.Error(w, err.Error(), code)
			return
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(current())
}

// apply performs the POST's one action.
func apply(r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return fmt.Errorf("clock control: %w", err)
	}
	dur := func(key string) (time.Duration, error) {
		d, err := time.ParseDuration(r.Form.Get(key))
		if err != nil {
			return 0, fmt.Errorf("clock control: %s: %w", key, err)
		}
		return d, nil
	}
	switch {
	case r.Form.Get("reset") != "":
		if r.Form.Get("reset") != "1" {
			return errors.New("clock control: reset takes 1")
		}
		Reset()
	case r.Form.Has("step"):
		d, err := dur("step")
		if err != nil {
			return err
		}
		Step(d)
	case r.Form.Has("strobe"):
		delta, err := dur("strobe")
		if err != nil {
			return err
		}
		period, err := dur("period")
		if err != nil {
			return err
		}
		length, err := dur("for")
		if err != nil {
			return err
		}
		if _, err := Strobe(delta, period, length); err != nil {
			return fmt.Errorf("clock control: %w", err)
		}
	default:
		return errors.New("clock control: POST one of step=, strobe=&period=&for=, reset=1")
	}
	return nil
}
