package clockctl_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/internal/clock/clockctl"
)

func TestStrobeAlternatesAndEndsWhereItBegan(t *testing.T) {
	t.Cleanup(clockctl.Reset)
	clockctl.Set(time.Hour)
	done, err := clockctl.Strobe(200*time.Millisecond, 5*time.Millisecond, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clockctl.Strobe(time.Second, time.Millisecond, time.Second); !errors.Is(err, clockctl.ErrStrobing) {
		t.Fatalf("second strobe: err = %v, want ErrStrobing", err)
	}
	seen := map[time.Duration]bool{}
	for !seen[time.Hour] || !seen[time.Hour+200*time.Millisecond] {
		o := clock.Offset()
		if o != time.Hour && o != time.Hour+200*time.Millisecond {
			t.Fatalf("offset %v during a strobe of +200ms from 1h", o)
		}
		seen[o] = true
		select {
		case <-done:
			t.Fatalf("strobe ended having shown only %v", seen)
		default:
		}
		time.Sleep(time.Millisecond) // sampling the strobe, not synchronising with it
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("strobe did not end")
	}
	if o := clock.Offset(); o != time.Hour {
		t.Fatalf("offset after the strobe = %v, want 1h", o)
	}
	if clockctl.Strobing() {
		t.Fatal("Strobing after the strobe ended")
	}
}

func TestResetStopsAStrobe(t *testing.T) {
	t.Cleanup(clockctl.Reset)
	done, err := clockctl.Strobe(-time.Second, time.Millisecond, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clockctl.Reset()
	select {
	case <-done:
	default:
		t.Fatal("Reset returned before the strobe ended")
	}
	if o := clock.Offset(); o != 0 || clockctl.Strobing() {
		t.Fatalf("after Reset: offset %v, strobing %v", o, clockctl.Strobing())
	}
	if _, err := clockctl.Strobe(time.Second, 0, time.Second); err == nil {
		t.Fatal("a strobe with period 0 was accepted")
	}
	if _, err := clockctl.Strobe(time.Second, time.Second, time.Hour); err == nil {
		t.Fatal("a strobe longer than MaxStrobe was accepted")
	}
}

func TestHandler(t *testing.T) {
	t.Cleanup(clockctl.Reset)
	clockctl.Reset()
	srv := httptest.NewServer(clockctl.Handler())
	defer srv.Close()
	post := func(form url.Values, wantCode int) clockctl.State {
		t.Helper()
		resp, err := http.PostForm(srv.URL, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != wantCode {
			t.Fatalf("POST %v: status %d, want %d", form, resp.StatusCode, wantCode)
		}
		var st clockctl.State
		if wantCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
		}
		return st
	}
	if st := post(url.Values{"step": {"24h"}}, 200); st.OffsetNanos != int64(24*time.Hour) || st.Offset != "24h0m0s" {
		t.Fatalf("after step=24h: %+v", st)
	}
	if st := post(url.Values{"step": {"-60s"}}, 200); st.OffsetNanos != int64(24*time.Hour-time.Minute) {
		t.Fatalf("after step=-60s: %+v", st)
	}
	now, err := time.Parse(time.RFC3339Nano, post(url.Values{"step": {"0s"}}, 200).Now)
	if err != nil || now.Sub(time.Now()) < 23*time.Hour {
		t.Fatalf("reported now %v (%v), want a day ahead", now, err)
	}
	post(url.Values{"step": {"a day"}}, http.StatusBadRequest)
	post(url.Values{"strobe": {"200ms"}, "period": {"10ms"}}, http.StatusBadRequest) // no for=
	post(url.Values{}, http.StatusBadRequest)
	if st := post(url.Values{"strobe": {"-200ms"}, "period": {"10ms"}, "for": {"1m"}}, 200); !st.Strobing {
		t.Fatalf("after strobe: %+v", st)
	}
	post(url.Values{"strobe": {"200ms"}, "period": {"10ms"}, "for": {"1s"}}, http.StatusConflict)
	if st := post(url.Values{"reset": {"1"}}, 200); st.OffsetNanos != 0 || st.Strobing {
		t.Fatalf("after reset: %+v", st)
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var st clockctl.State
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.OffsetNanos != 0 {
		t.Fatalf("GET: %+v, %v", st, err)
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL, strings.NewReader(""))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: status %d", resp.StatusCode)
	}
}
