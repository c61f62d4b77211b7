package replication

// Replication throttles (KIP-73), the data-plane side: a byte-rate Quota per direction and
// broker (leader.replication.throttled.rate for what a leader sends to throttled followers,
// follower.replication.throttled.rate for what a follower fetches for throttled replicas), and
// the parsed `*.replication.throttled.replicas` topic configs that say which replicas are
// throttled on which broker. As in Kafka, only replicas outside the ISR are throttled: a leader
// checks the fetching follower's ISR membership, a follower whether it has caught up with the
// leader's high watermark.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Quota is a replication byte rate: a token bucket that fills at the rate, holds at most one
// second's worth, and may go negative (a read is never cut short; the next ones wait until the
// debt is paid back). Its rate is read from Rate on each check, so a dynamic config change takes
// effect at once. Safe for concurrent use.
type Quota struct {
	// Rate returns the bound in bytes per second; <= 0 or math.MaxInt64 means unlimited.
	Rate func() int64

	// mu guards tokens and last, the bucket.
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewQuota returns a quota bounded by rate.
func NewQuota(rate func() int64) *Quota { return &Quota{Rate: rate} }

func (q *Quota) limit() (float64, bool) {
	if q == nil || q.Rate == nil {
		return 0, false
	}
	r := q.Rate()
	if r <= 0 || r == math.MaxInt64 {
		return 0, false
	}
	return float64(r), true
}

// refillLocked adds the tokens earned since the last call. Requires q.mu.
func (q *Quota) refillLocked(rate float64, now time.Time) {
	if q.last.IsZero() {
		q.last = now
		return
	}
	if d := now.Sub(q.last); d > 0 {
		q.tokens = min(q.tokens+rate*d.Seconds(), rate)
		q.last = now
	}
}

// Exceeded reports whether throttled traffic must wait (the bucket is in debt).
func (q *Quota) Exceeded(now time.Time) bool {
	rate, ok := q.limit()
	if !ok {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(rate, now)
	return q.tokens < 0
}

// Wait returns how long until the bucket is out of debt (0 when it is not, or unlimited).
func (q *Quota) Wait(now time.Time) time.Duration {
	rate, ok := q.limit()
	if !ok {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(rate, now)
	if q.tokens >= 0 {
		return 0
	}
	return time.Duration(-q.tokens / rate * float64(time.Second))
}

// Record takes n throttled bytes from the bucket.
func (q *Quota) Record(n int64, now time.Time) {
	rate, ok := q.limit()
	if !ok || n <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(rate, now)
	q.tokens -= float64(n)
}

// ThrottledReplicas is a parsed leader.replication.throttled.replicas or
// follower.replication.throttled.replicas value: "*" (every replica of the topic), or a
// comma-separated list of partition:broker pairs, or empty (none).
type ThrottledReplicas struct {
	all   bool
	pairs map[[2]int32]struct{}
}

// ParseThrottledReplicas parses a throttled-replicas config value.
func ParseThrottledReplicas(v string) (ThrottledReplicas, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return ThrottledReplicas{}, nil
	}
	if v == "*" {
		return ThrottledReplicas{all: true}, nil
	}
	t := ThrottledReplicas{pairs: map[[2]int32]struct{}{}}
	for _, item := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return ThrottledReplicas{}, fmt.Errorf("%q is not partition:broker", item)
		}
		pi, err1 := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if err1 != nil || err2 != nil || pi < 0 || bi < 0 {
			return ThrottledReplicas{}, fmt.Errorf("%q is not partition:broker (two non-negative integers)", item)
		}
		t.pairs[[2]int32{int32(pi), int32(bi)}] = struct{}{}
	}
	return t, nil
}

// Contains reports whether the replica of partition on broker is throttled.
func (t ThrottledReplicas) Contains(partition, broker int32) bool {
	if t.all {
		return true
	}
	_, ok := t.pairs[[2]int32{partition, broker}]
	return ok
}
