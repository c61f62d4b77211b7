package broker

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
)

// TestListOffsetsBehindEpochStart: a new leader whose high watermark is below the start offset
// of its leader epoch (its log has records the old leader may have exposed as committed) answers
// a consumer's ListOffsets LATEST, and a timestamp lookup past its high watermark, with
// OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5) rather than an offset below what the old
// leader answered, as Kafka's Partition.fetchOffsetForTimestamp does; EARLIEST and a follower's
// request are answered. Once a follower's fetch moves the high watermark to the epoch start,
// LATEST is answered again.
func TestListOffsetsBehindEpochStart(t *testing.T) {
	cfg, err := NewConfig(map[string]string{"log.dirs": t.TempDir(), "node.id": "1"})
	if err != nil {
		t.Fatal(err)
	}
	b := &Broker{cfg: cfg, nodeID: 1}
	lc := engine.DefaultConfig()
	lc.FlushIntervalMessages = 1 << 40 // page-cache appends: the leader's own end is its log end
	l, err := engine.OpenLog(engine.OpenOptions{Dir: filepath.Join(t.TempDir(), "t-0"), Topic: "t", Config: lc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	// Ten records from the old leader's epoch; this replica's high watermark is still 0.
	for i := range 10 {
		batch := record.Build(nil, record.BuildOptions{BaseTimestamp: int64(1_700_000_000_000 + i), ProducerID: -1},
			[]record.Record{{Value: []byte("v")}})
		if _, err := l.Append(batch); err != nil {
			t.Fatal(err)
		}
	}
	if hw := l.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before the leadership, want 0", hw)
	}
	r := &replica{rm: &replicaManager{b: b}, tp: engine.TopicPartition{Topic: "t"}, log: l, epoch: -1}
	r.apply(controller.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 3})
	t.Cleanup(func() { r.mu.Lock(); r.resignLocked(); r.mu.Unlock() })

	type ask struct {
		ts        int64
		replicaID int32
		version   int16
	}
	answer := func(a ask) (int64, error) {
		off, _, err := leaderListOffset(r, a.ts, a.replicaID, false, a.version)
		return off, err
	}
	for _, a := range []ask{{-1, -1, 10}, {-1, -1, 5}, {1_700_000_000_005, -1, 10}, {-3, -1, 10}} {
		if off, err := answer(a); !errors.Is(err, kerr.OffsetNotAvailable) {
			t.Errorf("%+v with the high watermark 0 below the epoch start 10: offset %d, err %v; want OFFSET_NOT_AVAILABLE", a, off, err)
		}
	}
	if off, err := answer(ask{-1, -1, 4}); !errors.Is(err, kerr.LeaderNotAvailable) {
		t.Errorf("LATEST v4 behind the epoch start: offset %d, err %v; want LEADER_NOT_AVAILABLE", off, err)
	}
	if off, err := answer(ask{-2, -1, 10}); err != nil || off != 0 {
		t.Errorf("EARLIEST behind the epoch start: offset %d, err %v; want 0", off, err)
	}
	if off, err := answer(ask{-1, 2, 10}); err != nil || off != 10 {
		t.Errorf("a follower's LATEST: offset %d, err %v; want the log end 10", off, err)
	}

	if err := r.followerFetched(2, 10, 3); err != nil {
		t.Fatal(err)
	}
	if hw := l.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d after the follower fetched at 10, want 10", hw)
	}
	if off, err := answer(ask{-1, -1, 10}); err != nil || off != 10 {
		t.Errorf("LATEST once the high watermark reached the epoch start: offset %d, err %v; want 10", off, err)
	}
	if off, err := answer(ask{1_700_000_000_005, -1, 10}); err != nil || off != 5 {
		t.Errorf("timestamp lookup once caught up: offset %d, err %v; want 5", off, err)
	}
}

// TestAcksAllISRShrankAfterAppend: an acks=all append waiting for the high watermark whose ISR
// shrinks below the effective min.insync.replicas meanwhile (the controller accepted a shrink to
// the leader alone, which moves the high watermark past the batch) is answered
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka's checkEnoughReplicasReachOffset.
func TestAcksAllISRShrankAfterAppend(t *testing.T) {
	cfg, err := NewConfig(map[string]string{"log.dirs": t.TempDir(), "node.id": "1"})
	if err != nil {
		t.Fatal(err)
	}
	lc := engine.DefaultConfig()
	lc.FlushIntervalMessages = 1 << 40
	l, err := engine.OpenLog(engine.OpenOptions{Dir: filepath.Join(t.TempDir(), "t-0"), Topic: "t", Config: lc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r := &replica{rm: &replicaManager{b: &Broker{cfg: cfg, nodeID: 1}}, tp: engine.TopicPartition{Topic: "t"}, log: l, epoch: -1}
	r.apply(controller.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1})
	t.Cleanup(func() { r.mu.Lock(); r.resignLocked(); r.mu.Unlock() })
	info, epoch, err := r.appendAsLeader(record.Build(nil, record.BuildOptions{ProducerID: -1}, []record.Record{{Value: []byte("v")}}))
	if err != nil {
		t.Fatal(err)
	}
	minISR := r.effectiveMinISR(2)
	done := make(chan error, 1)
	deadline := make(chan time.Time)
	go func() { done <- r.waitCommitted(info.LastOffset+1, epoch, minISR, deadline, nil) }()
	r.mu.Lock()
	r.state.ApplyPartition([]int32{1}, 1, 2) // the controller's answer to a shrink
	r.publishHWLocked()
	r.mu.Unlock()
	select {
	case err := <-done:
		if !errors.Is(err, kerr.NotEnoughReplicasAfterAppend) {
			t.Fatalf("ISR shrank to 1 below min.insync.replicas 2 after the append: %v, want NOT_ENOUGH_REPLICAS_AFTER_APPEND", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end once the high watermark covered the batch")
	}
}
