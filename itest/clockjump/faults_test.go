//go:build faults

package clockjump

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/internal/clock/clockctl"
	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// TestFaultsClockEndpoint: a -tags faults broker serves /faults/clock on its admin listener, and
// a step made there moves the broker's LogAppendTime.
func TestFaultsClockEndpoint(t *testing.T) {
	t.Cleanup(clockctl.Reset)
	b := inproc.Start(t, nil)
	endpoint := "http://" + b.MetricsAddr() + "/faults/clock"
	call := func(form url.Values) clockctl.State {
		t.Helper()
		var resp *http.Response
		var err error
		if form == nil {
			resp, err = http.Get(endpoint)
		} else {
			resp, err = http.PostForm(endpoint, form)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st clockctl.State
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %v: status %d", endpoint, form, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := call(nil); st.OffsetNanos != 0 {
		t.Fatalf("GET before any step: %+v", st)
	}
	if st := call(url.Values{"step": {"24h"}}); st.OffsetNanos != int64(24*time.Hour) {
		t.Fatalf("after step=24h: %+v", st)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"message.timestamp.type": kadm.StringPtr("LogAppendTime")}, "t")
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	segs := logOf(t, b, "t").Segments()
	if ts := time.UnixMilli(segs[len(segs)-1].MaxTimestamp()); ts.Sub(before) < 23*time.Hour {
		t.Fatalf("LogAppendTime %v after a +24h step at %v", ts, before)
	}
	if st := call(url.Values{"reset": {"1"}}); st.OffsetNanos != 0 {
		t.Fatalf("after reset: %+v", st)
	}
}
