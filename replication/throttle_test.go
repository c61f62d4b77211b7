package replication

import (
	"testing"
	"time"
)

func TestQuotaRate(t *testing.T) {
	rate := int64(1000)
	q := NewQuota(func() int64 { return rate })
	now := time.Unix(0, 0)
	if q.Exceeded(now) {
		t.Fatal("exceeded before any traffic")
	}
	// 10,000 bytes over 10 s of simulated time, read as soon as the bucket allows.
	sent := int64(0)
	for sent < 10000 {
		if w := q.Wait(now); w > 0 {
			now = now.Add(w)
			continue
		}
		q.Record(500, now)
		sent += 500
	}
	if el := now.Sub(time.Unix(0, 0)); el < 9*time.Second || el > 10*time.Second {
		t.Fatalf("10,000 bytes at 1,000 B/s took %v", el)
	}
	rate = 0 // unlimited
	if q.Exceeded(now) || q.Wait(now) != 0 {
		t.Fatal("an unlimited quota throttles")
	}
}

func TestParseThrottledReplicas(t *testing.T) {
	tr, err := ParseThrottledReplicas("0:1, 0:2,3:4")
	if err != nil || !tr.Contains(0, 1) || !tr.Contains(0, 2) || !tr.Contains(3, 4) || tr.Contains(1, 1) {
		t.Fatalf("%+v %v", tr, err)
	}
	if tr, _ := ParseThrottledReplicas("*"); !tr.Contains(7, 9) {
		t.Fatal("* does not throttle everything")
	}
	if tr, _ := ParseThrottledReplicas(""); tr.Contains(0, 0) {
		t.Fatal("empty throttles")
	}
	for _, bad := range []string{"1", "a:b", "1:-1", "1:2,"} {
		if _, err := ParseThrottledReplicas(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
