package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	r := New()
	r.RequestDone(0, 9, time.Millisecond) // first use creates the API's histogram child
	r.Topic("orders")
	cases := map[string]func(){
		"RequestDone":  func() { r.RequestDone(0, 9, time.Millisecond) },
		"ObserveFsync": func() { r.ObserveFsync(200*time.Microsecond, 17) },
		"Topic":        func() { r.Topic("orders").AddProduced(1000, 10); r.Topic("orders").AddFetched(1000) },
		"Errors":       func() { r.ProduceError(6); r.FetchError(1); r.FetchError(-1) },
		"Replication":  func() { r.AddReplicationBytesOut(100) },
	}
	for name, f := range cases {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}

func TestServerEndpoints(t *testing.T) {
	r := New()
	r.RequestDone(0, 9, 3*time.Millisecond)
	r.RequestDone(1, 16, 500*time.Millisecond)
	r.Topic("orders").AddProduced(1234, 10)
	r.Topic("gone").AddProduced(1, 1)
	r.SetTopicAlive(func(topic string) bool { return topic != "gone" })
	r.ProduceError(6)
	r.FetchError(1)
	r.ObserveFsync(time.Millisecond, 3)
	r.ISRChanged([]int32{1, 2, 3}, []int32{1, 2})
	r.ISRChanged([]int32{1, 2}, []int32{1, 2, 3})
	notReady := errors.New("recovering log dirs")
	var ready error = notReady
	s, err := Listen(ServerConfig{Addr: "127.0.0.1:0", Ready: func() error { return ready }}, r)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	base := "http://" + s.Addr()

	code, body := get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`weir_requests_total{api="Produce",version="9"} 1`,
		`weir_requests_total{api="Fetch",version="16"} 1`,
		`weir_request_duration_seconds_count{api="Produce"} 1`,
		`weir_topic_bytes_in_total{topic="orders"} 1234`,
		`weir_topic_messages_in_total{topic="orders"} 10`,
		`weir_produce_errors_total{error="NOT_LEADER_FOR_PARTITION"} 1`,
		`weir_fetch_errors_total{error="OFFSET_OUT_OF_RANGE"} 1`,
		`weir_log_flush_duration_seconds_count 1`,
		`weir_log_flush_batch_appends_sum 3`,
		`weir_isr_shrinks_total 1`,
		`weir_isr_expands_total 1`,
		`go_goroutines `,
		`process_open_fds `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `topic="gone"`) {
		t.Errorf("the counters of a deleted topic are still exported")
	}

	if code, body := get(t, base+"/healthz"); code != 200 || !strings.Contains(body, "ok") {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "recovering log dirs") {
		t.Errorf("/readyz while not ready: %d %q", code, body)
	}
	ready = nil
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz when ready: %d", code)
	}
	if code, _ := get(t, base+"/debug/pprof/"); code != 404 {
		t.Errorf("pprof is served although disabled: %d", code)
	}
}

func TestServerPprof(t *testing.T) {
	s, err := Listen(ServerConfig{Addr: "127.0.0.1:0", Pprof: true}, New())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=1"} {
		if code, _ := get(t, "http://"+s.Addr()+p); code != 200 {
			t.Errorf("%s: %d", p, code)
		}
	}
	if code, _ := get(t, "http://"+s.Addr()+"/readyz"); code != 200 {
		t.Errorf("/readyz without a readiness check: %d", code)
	}
}
