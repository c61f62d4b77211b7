package sharecoord

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/sharestate"
)

var bg = context.Background()

func TestInitializeReadWrite(t *testing.T) {
	store := newMemStore(3)
	c := newTestCoord(t, store, Config{})
	if _, err := c.Read(bg, testKey, 0); !isErr(err, sharestate.ErrNotInitialized) || !isErr(err, kerr.InvalidRequest) {
		t.Fatalf("read before initialize: %v", err)
	}
	var ke *kerr.Error
	if _, err := c.Read(bg, testKey, 0); !errors.As(err, &ke) || ke != kerr.InvalidRequest {
		t.Fatalf("read before initialize maps to %v", ke)
	}
	if err := c.Write(bg, testKey, sharestate.State{StateEpoch: 1}); !isErr(err, sharestate.ErrNotInitialized) {
		t.Fatalf("write before initialize: %v", err)
	}
	if _, err := c.ReadSummary(bg, testKey, -1); !isErr(err, sharestate.ErrNotInitialized) {
		t.Fatalf("summary before initialize: %v", err)
	}
	if err := c.Initialize(bg, testKey, 1, 10); err != nil {
		t.Fatal(err)
	}
	st, err := c.Read(bg, testKey, 5)
	if err != nil || st.StateEpoch != 1 || st.LeaderEpoch != 5 || st.StartOffset != 10 || len(st.Batches) != 0 {
		t.Fatalf("read = %+v %v", st, err)
	}
	w := sharestate.State{StateEpoch: 1, LeaderEpoch: 5, StartOffset: 12, DeliveryCompleteCount: 3, Batches: []sharestate.Batch{
		{FirstOffset: 10, LastOffset: 14, DeliveryState: sharestate.Acknowledged, DeliveryCount: 1},
		{FirstOffset: 15, LastOffset: 19, DeliveryState: sharestate.Available, DeliveryCount: 1},
	}}
	if err := c.Write(bg, testKey, w); err != nil {
		t.Fatal(err)
	}
	w2 := sharestate.State{StateEpoch: 1, LeaderEpoch: 5, StartOffset: -1, DeliveryCompleteCount: 4, Batches: []sharestate.Batch{
		{FirstOffset: 15, LastOffset: 16, DeliveryState: sharestate.Acknowledged, DeliveryCount: 1},
	}}
	if err := c.Write(bg, testKey, w2); err != nil {
		t.Fatal(err)
	}
	want := []sharestate.Batch{
		{FirstOffset: 12, LastOffset: 16, DeliveryState: sharestate.Acknowledged, DeliveryCount: 1},
		{FirstOffset: 17, LastOffset: 19, DeliveryState: sharestate.Available, DeliveryCount: 1},
	}
	st, err = c.Read(bg, testKey, 5)
	if err != nil || st.StartOffset != 12 || st.DeliveryCompleteCount != 4 || !reflect.DeepEqual(st.Batches, want) {
		t.Fatalf("read = %+v %v", st, err)
	}
	sum, err := c.ReadSummary(bg, testKey, -1)
	if err != nil || sum != (sharestate.Summary{StateEpoch: 1, LeaderEpoch: 5, StartOffset: 12, DeliveryCompleteCount: 4}) {
		t.Fatalf("summary = %+v %v", sum, err)
	}

	// A new coordinator over the same log (a failover) replays the same state.
	c2 := newTestCoord(t, store, Config{})
	st2, err := c2.Read(bg, testKey, -1)
	if err != nil || !reflect.DeepEqual(st2, st) {
		t.Fatalf("after reload: %+v %v, want %+v", st2, err, st)
	}
}

func TestFencing(t *testing.T) {
	store := newMemStore(1)
	c := newTestCoord(t, store, Config{})
	if err := c.Initialize(bg, testKey, 2, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(bg, testKey, 1, 0); !isErr(err, kerr.FencedStateEpoch) {
		t.Fatalf("initialize at an older state epoch: %v", err)
	}
	if _, err := c.Read(bg, testKey, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(bg, testKey, 6); !isErr(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("read at an older leader epoch: %v", err)
	}
	if err := c.Write(bg, testKey, sharestate.State{StateEpoch: 2, LeaderEpoch: 6, StartOffset: -1}); !isErr(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("write at an older leader epoch: %v", err)
	}
	if err := c.Write(bg, testKey, sharestate.State{StateEpoch: 1, LeaderEpoch: 7, StartOffset: -1}); !isErr(err, kerr.FencedStateEpoch) {
		t.Fatalf("write at an older state epoch: %v", err)
	}
	// A summary is never fenced (DescribeShareGroupOffsets reads it at leader epoch 0).
	if sum, err := c.ReadSummary(bg, testKey, 6); err != nil || sum.LeaderEpoch != 7 {
		t.Fatalf("summary at an older leader epoch: %+v %v", sum, err)
	}
	// The leader epoch a read recorded survives a failover: the deposed leader stays fenced.
	c2 := newTestCoord(t, store, Config{})
	if err := c2.Write(bg, testKey, sharestate.State{StateEpoch: 2, LeaderEpoch: 6, StartOffset: -1}); !isErr(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("write at an older leader epoch after failover: %v", err)
	}
	// Re-initializing (same or newer state epoch) resets the state and the leader epoch.
	if err := c2.Initialize(bg, testKey, 3, 100); err != nil {
		t.Fatal(err)
	}
	if st, err := c2.Read(bg, testKey, -1); err != nil || st.StateEpoch != 3 || st.StartOffset != 100 || st.LeaderEpoch != -1 {
		t.Fatalf("after re-initialize: %+v %v", st, err)
	}
}

func TestSnapshotCadence(t *testing.T) {
	store := newMemStore(1)
	c := newTestCoord(t, store, Config{UpdatesPerSnapshot: 3})
	if err := c.Initialize(bg, testKey, 1, 0); err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 8; i++ {
		b := sharestate.Batch{FirstOffset: i, LastOffset: i, DeliveryState: sharestate.Acknowledged, DeliveryCount: 1}
		if err := c.Write(bg, testKey, sharestate.State{StateEpoch: 1, LeaderEpoch: 1, StartOffset: -1, DeliveryCompleteCount: -1, Batches: []sharestate.Batch{b}}); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := store.Log(0)
	vers, values := l.(*memLog).records(t)
	// initialize: snapshot; then 3 updates, a snapshot, 3 updates, a snapshot.
	wantVers := []int16{0, 1, 1, 1, 0, 1, 1, 1, 0}
	if !reflect.DeepEqual(vers, wantVers) {
		t.Fatalf("record key versions %v, want %v", vers, wantVers)
	}
	last, err := decodeSnapshot(values[len(values)-1])
	if err != nil {
		t.Fatal(err)
	}
	if last.SnapshotEpoch != 2 || last.StateEpoch != 1 || !reflect.DeepEqual(last.Batches, []sharestate.Batch{{FirstOffset: 0, LastOffset: 7, DeliveryState: sharestate.Acknowledged, DeliveryCount: 1}}) {
		t.Fatalf("last snapshot %+v", last)
	}
	up, err := decodeUpdate(values[1])
	if err != nil || up.SnapshotEpoch != 0 {
		t.Fatalf("first update %+v %v", up, err)
	}

	// 0 makes every write a snapshot.
	store0 := newMemStore(1)
	c0 := newTestCoord(t, store0, Config{UpdatesPerSnapshot: -1})
	_ = c0.Initialize(bg, testKey, 1, 0)
	_ = c0.Write(bg, testKey, sharestate.State{StateEpoch: 1, StartOffset: 5})
	l0, _ := store0.Log(0)
	if vers, _ := l0.(*memLog).records(t); !reflect.DeepEqual(vers, []int16{0, 0}) {
		t.Fatalf("per-write snapshots: %v", vers)
	}
}

func TestDeleteAndTombstones(t *testing.T) {
	store := newMemStore(1)
	c := newTestCoord(t, store, Config{})
	if err := c.Delete(bg, testKey); err != nil { // nothing to delete
		t.Fatal(err)
	}
	_ = c.Initialize(bg, testKey, 1, 0)
	_ = c.Write(bg, testKey, sharestate.State{StateEpoch: 1, StartOffset: 3})
	if err := c.Delete(bg, testKey); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(bg, testKey, -1); !isErr(err, sharestate.ErrNotInitialized) {
		t.Fatalf("read after delete: %v", err)
	}
	l, _ := store.Log(0)
	vers, values := l.(*memLog).records(t)
	if n := len(vers); n != 4 || values[n-1] != nil || values[n-2] != nil || vers[n-2] != keySnapshot || vers[n-1] != keyUpdate {
		t.Fatalf("records %v %v", vers, values)
	}
	c2 := newTestCoord(t, store, Config{})
	if _, err := c2.Read(bg, testKey, -1); !isErr(err, sharestate.ErrNotInitialized) {
		t.Fatalf("read after delete and reload: %v", err)
	}
}

func TestOwnershipAndFailedAppend(t *testing.T) {
	store := newMemStore(2)
	c, err := New(Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Initialize(bg, testKey, 1, 0); !isErr(err, kerr.NotCoordinator) {
		t.Fatalf("not led: %v", err)
	}
	p := c.PartitionFor(testKey)
	c.Elect(p, 3)
	_ = c.WaitLoaded(bg, p)
	if err := c.Initialize(bg, testKey, 1, 0); err != nil {
		t.Fatal(err)
	}
	l, _ := store.Log(p)
	l.(*memLog).failNext = kerr.NotEnoughReplicas
	err = c.Write(bg, testKey, sharestate.State{StateEpoch: 1, StartOffset: 9})
	if !isErr(err, kerr.CoordinatorNotAvailable) {
		t.Fatalf("failed append: %v", err)
	}
	if st, _ := c.Read(bg, testKey, -1); st.StartOffset != 0 {
		t.Fatalf("a failed append changed the state: %+v", st)
	}
	c.Resign(p)
	if _, err := c.Read(bg, testKey, -1); !isErr(err, kerr.NotCoordinator) {
		t.Fatalf("after resign: %v", err)
	}
}

func TestBounds(t *testing.T) {
	c := newTestCoord(t, newMemStore(1), Config{MaxBatches: 4})
	_ = c.Initialize(bg, testKey, 1, 0)
	many := make([]sharestate.Batch, 5)
	for i := range many {
		many[i] = sharestate.Batch{FirstOffset: int64(2 * i), LastOffset: int64(2 * i), DeliveryState: sharestate.Acknowledged, DeliveryCount: 1}
	}
	if err := c.Write(bg, testKey, sharestate.State{StateEpoch: 1, StartOffset: -1, Batches: many}); !isErr(err, kerr.InvalidRequest) {
		t.Fatalf("too many batches: %v", err)
	}
	if err := c.Write(bg, testKey, sharestate.State{StateEpoch: 1, StartOffset: -1, Batches: []sharestate.Batch{{FirstOffset: 5, LastOffset: 4}}}); !isErr(err, kerr.InvalidRequest) {
		t.Fatalf("inverted batch: %v", err)
	}
	for _, k := range []sharestate.Key{{TopicID: testKey.TopicID}, {Group: "g"}, {Group: "g", TopicID: testKey.TopicID, Partition: -1}} {
		if err := c.Initialize(bg, k, 1, 0); !isErr(err, kerr.InvalidRequest) {
			t.Fatalf("bad key %+v: %v", k, err)
		}
	}
}

// TestInitializeWithoutStartKeepsState: the group coordinator's initialization (no start
// offset) of a share partition a share-partition leader already initialized and wrote to
// changes nothing; one with a start offset (AlterShareGroupOffsets) replaces the state.
func TestInitializeWithoutStartKeepsState(t *testing.T) {
	c := newTestCoord(t, newMemStore(3), Config{})
	if err := c.Initialize(bg, testKey, 0, 10); err != nil {
		t.Fatal(err)
	}
	w := sharestate.State{StateEpoch: 0, LeaderEpoch: 1, StartOffset: 12, DeliveryCompleteCount: 1, Batches: []sharestate.Batch{
		{FirstOffset: 12, LastOffset: 12, DeliveryState: sharestate.Acknowledged, DeliveryCount: 1},
		{FirstOffset: 13, LastOffset: 14, DeliveryState: sharestate.Available, DeliveryCount: 2},
	}}
	if err := c.Write(bg, testKey, w); err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(bg, testKey, 3, -1); err != nil {
		t.Fatalf("initialize without a start offset: %v", err)
	}
	st, err := c.Read(bg, testKey, 1)
	if err != nil || st.StateEpoch != 0 || st.StartOffset != 12 || !reflect.DeepEqual(st.Batches, w.Batches) {
		t.Fatalf("after an initialize without a start offset: %+v %v", st, err)
	}
	// The leader keeps writing at its state epoch.
	if err := c.Write(bg, testKey, sharestate.State{StateEpoch: 0, LeaderEpoch: 1, StartOffset: 15}); err != nil {
		t.Fatal(err)
	}
	if err := c.Initialize(bg, testKey, 3, 20); err != nil {
		t.Fatal(err)
	}
	st, err = c.Read(bg, testKey, 1)
	if err != nil || st.StateEpoch != 3 || st.StartOffset != 20 || len(st.Batches) != 0 {
		t.Fatalf("after an initialize at 20: %+v %v", st, err)
	}
	if err := c.Write(bg, testKey, sharestate.State{StateEpoch: 0, LeaderEpoch: 1, StartOffset: 21}); !isErr(err, kerr.FencedStateEpoch) {
		t.Fatalf("write at the old state epoch: %v", err)
	}
}
