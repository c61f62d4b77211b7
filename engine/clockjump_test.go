package engine

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-mq/weir/record"
)

// TestProducerNotExpiredByAWallClockStep: the wall clock steps a day ahead (producer.id.expiration.ms
// is a day) right after an idempotent producer wrote. Kafka's wall-clock rule alone would forget
// the producer, and a retry of its last batch would be appended a second time; the monotonic
// clock says it wrote a moment ago, so it is kept and the retry is recognised. Once it has been
// idle for the expiration on the monotonic clock too, it expires; after a reopen (no monotonic
// reading: the state comes from a snapshot) the wall-clock rule alone applies, as in Kafka.
func TestProducerNotExpiredByAWallClockStep(t *testing.T) {
	const expiration = int64(24 * time.Hour / time.Millisecond)
	var mono atomic.Int64
	mono.Store(int64(time.Hour))
	dir := t.TempDir() + "/t-0"
	wall := &retClock{}
	wall.ms.Store(retNow)
	cfg := DefaultConfig()
	cfg.Now, cfg.Nanotime = wall.now, mono.Load
	cfg.ProducerIDExpirationMs = expiration
	cfg.MessageTimestampType = "LogAppendTime"
	open := func() *Log {
		l, err := OpenLog(OpenOptions{Dir: dir, Topic: "t", Config: cfg, CleanShutdown: true})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	batch := record.Build(nil, record.BuildOptions{BaseTimestamp: retNow, ProducerID: 7, BaseSequence: 0},
		[]record.Record{{Value: []byte("a")}, {Value: []byte("b")}})
	l := open()
	first := retAppend(t, l, append([]byte(nil), batch...))

	wall.ms.Add(expiration) // the wall clock steps a day ahead; the monotonic clock does not
	mono.Add(int64(time.Second))
	if n := l.RemoveExpiredProducers(); n != 0 {
		t.Fatalf("a wall-clock step expired %d producers that wrote a second ago", n)
	}
	retry := retAppend(t, l, append([]byte(nil), batch...))
	if !retry.Duplicate || retry.BaseOffset != first.BaseOffset || l.LogEndOffset() != 2 {
		t.Fatalf("retry after the step: %+v (first %+v), log end %d: want the original offsets, nothing appended",
			retry, first, l.LogEndOffset())
	}

	mono.Add(expiration * int64(time.Millisecond)) // idle a day on both clocks
	wall.ms.Add(expiration)
	if n := l.RemoveExpiredProducers(); n != 1 {
		t.Fatalf("expired %d producers idle a day on both clocks, want 1", n)
	}

	// A producer known from a snapshot only: Kafka's rule on the wall clock.
	wall.ms.Store(retNow + 10*expiration)
	retAppend(t, l, record.Build(nil, record.BuildOptions{ProducerID: 8, BaseSequence: 0}, []record.Record{{Value: []byte("c")}}))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wall.ms.Add(expiration) // reopened a day later by the wall clock, a moment later by the monotonic one
	l = open()
	defer l.Close()
	if n := l.RemoveExpiredProducers(); n != 0 {
		t.Fatalf("%d producers left after open, want none (expired at open)", n)
	}
	l.mu.Lock()
	left := len(l.producers.producers)
	l.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d producers survived an open a wall-clock day after their last write", left)
	}
}

// TestProducerNotExpiredByATruncationUnderAStep: a follower's truncation rebuilds the producer
// state from a snapshot and a replay; a producer this process saw write a moment ago must keep
// its monotonic reading through that rebuild, or a wall clock stepped past
// producer.id.expiration.ms forgets it and a retry of its last batch, once this replica leads,
// is stored twice.
func TestProducerNotExpiredByATruncationUnderAStep(t *testing.T) {
	const expiration = int64(24 * time.Hour / time.Millisecond)
	var mono atomic.Int64
	mono.Store(int64(time.Hour))
	wall := &retClock{}
	wall.ms.Store(retNow)
	cfg := DefaultConfig()
	cfg.Now, cfg.Nanotime = wall.now, mono.Load
	cfg.ProducerIDExpirationMs = expiration
	cfg.MessageTimestampType = "LogAppendTime"
	l, err := OpenLog(OpenOptions{Dir: t.TempDir() + "/t-0", Topic: "t", Config: cfg, CleanShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	batch := record.Build(nil, record.BuildOptions{BaseTimestamp: retNow, ProducerID: 7, BaseSequence: 0},
		[]record.Record{{Value: []byte("a")}, {Value: []byte("b")}})
	first := retAppend(t, l, append([]byte(nil), batch...))
	// A divergent tail of another producer, then the step, then the truncation of that tail.
	retAppend(t, l, record.Build(nil, record.BuildOptions{BaseTimestamp: retNow, ProducerID: 9, BaseSequence: 0},
		[]record.Record{{Value: []byte("x")}}))
	wall.ms.Add(expiration)
	mono.Add(int64(time.Second))
	if err := l.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	retry := retAppend(t, l, append([]byte(nil), batch...))
	if !retry.Duplicate || retry.BaseOffset != first.BaseOffset || l.LogEndOffset() != 2 {
		t.Fatalf("retry after a truncation under a wall-clock step: %+v (first %+v), log end %d: want the original offsets, nothing appended",
			retry, first, l.LogEndOffset())
	}
}
