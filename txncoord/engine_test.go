package txncoord

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
)

// engineStore is __transaction_state over real engine logs in a directory (one per partition).
type engineStore struct {
	t     *testing.T
	dir   string
	parts int32
	mu    sync.Mutex
	logs  map[int32]*engine.Log
}

func (s *engineStore) Partitions() int32 { return s.parts }

func (s *engineStore) Log(p int32) (Log, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.logs[p]; l != nil {
		return engineLog{l}, nil
	}
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 2048 // several segments: the replay crosses rolls
	l, err := engine.OpenLog(engine.OpenOptions{
		Dir: filepath.Join(s.dir, fmt.Sprintf("__transaction_state-%d", p)), Topic: "__transaction_state", Partition: p, Config: cfg,
	})
	if err != nil {
		return nil, err
	}
	s.logs[p] = l
	return engineLog{l}, nil
}

func (s *engineStore) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, l := range s.logs {
		if err := l.Close(); err != nil {
			s.t.Error(err)
		}
		delete(s.logs, p)
	}
}

type engineLog struct{ l *engine.Log }

func (e engineLog) Append(batch []byte) (int64, error) {
	info, err := e.l.Append(batch)
	if err != nil {
		return 0, err
	}
	return info.LastOffset + 1, nil
}

func (e engineLog) AwaitDurable(upTo int64) error {
	if err := e.l.AwaitDurable(upTo); err != nil {
		return err
	}
	return e.l.AdvanceHighWatermark(upTo)
}

// ReadBatches reads the log as the broker's loader does: a chunk at a time, whole batches.
func (e engineLog) ReadBatches(fn func([]byte) error) error {
	offset, end := e.l.LogStartOffset(), e.l.LogEndOffset()
	for offset < end {
		sl, err := e.l.Read(offset, 1<<20, engine.ReadUpToLogEnd)
		if err != nil {
			return err
		}
		if sl.Length == 0 {
			sl.Release()
			return nil
		}
		buf := make([]byte, sl.Length)
		_, err = sl.File.ReadAt(buf, sl.Position)
		sl.Release()
		if err != nil {
			return err
		}
		next := offset
		for p := buf; len(p) >= record.HeaderSize; {
			h, err := record.ParseHeader(p)
			if err != nil {
				return err
			}
			if int64(len(p)) < h.Size() {
				break
			}
			if err := fn(p[:h.Size()]); err != nil {
				return err
			}
			next = h.NextOffset()
			p = p[h.Size():]
		}
		if next == offset {
			return fmt.Errorf("no whole batch at %d", offset)
		}
		offset = next
	}
	return nil
}

// TestReplayOverEngineLog runs transactions over real partition logs, stops the coordinator in
// the middle of a commit, reopens the logs (crash recovery: no clean-shutdown marker) and checks
// that a new coordinator rebuilds every id's state and completes the commit.
func TestReplayOverEngineLog(t *testing.T) {
	store := &engineStore{t: t, dir: t.TempDir(), parts: 3, logs: map[int32]*engine.Log{}}
	e := &env{t: t, clock: newFakeClock(), ids: &fakeIDs{}, markers: &fakeMarkers{}}
	newC := func(epoch int32) *Coordinator {
		c, err := New(Config{Store: store, IDs: e.ids, Markers: e.markers, Clock: e.clock, Logger: quietLogger(),
			AbortTimedOutInterval: -1, RemoveExpiredInterval: -1, MarkerRetryBackoff: time.Millisecond, IDExpiration: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		for p := int32(0); p < 3; p++ {
			c.Elect(p, epoch)
		}
		e.waitLoaded(c)
		return c
	}
	c := newC(1)
	e.c = c
	want := map[string]Description{}
	// Many committed and aborted transactions (the logs roll several times).
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("txn-%d", i)
		r := e.init(id)
		for round := 0; round < 3; round++ {
			e.add(id, r, 2, tps("out", int32(round), int32(i%5))...)
			got := c.EndTxn(id, r.ProducerID, r.Epoch, (i+round)%2 == 0, 2)
			if got.Err != nil {
				t.Fatal(got.Err)
			}
			r.Epoch = got.Epoch
			e.waitState(c, id, map[bool]State{true: CompleteCommit, false: CompleteAbort}[(i+round)%2 == 0])
		}
		want[id] = c.Describe(id)
	}
	// One expired id (tombstoned), one open transaction, one stopped in PrepareCommit.
	e.init("expiring")
	e.clock.Advance(2 * time.Hour)
	for id := range want {
		r := c.InitProducerID(id, 60000, nil) // keep the others alive
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		want[id] = c.Describe(id)
	}
	c.ExpireTransactionalIDs()
	ro := e.init("open")
	e.add("open", ro, 2, tps("out", 7)...)
	want["open"] = c.Describe("open")
	e.markers.mu.Lock()
	e.markers.gate = make(chan struct{})
	e.markers.mu.Unlock()
	rc := e.init("committing")
	e.add("committing", rc, 2, tps("out", 1, 2)...)
	if got := c.EndTxn("committing", rc.ProducerID, rc.Epoch, true, 2); got.Err != nil {
		t.Fatal(got.Err)
	}
	c.Close()
	store.mu.Lock()
	for _, l := range store.logs {
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	store.mu.Unlock()
	store.closeAll()
	if segs, _ := filepath.Glob(filepath.Join(store.dir, "*", "*.log")); len(segs) < 6 {
		t.Fatalf("only %d segments: the replay does not cross rolls", len(segs))
	}

	e.markers.mu.Lock()
	e.markers.gate = nil
	e.markers.mu.Unlock()
	c2 := newC(2)
	for id, w := range want {
		got := c2.Describe(id)
		if got.Err != nil || got.State != w.State || got.ProducerID != w.ProducerID || got.Epoch != w.Epoch ||
			got.TimeoutMs != w.TimeoutMs || got.StartMs != w.StartMs || len(got.Partitions) != len(w.Partitions) {
			t.Fatalf("%s after reload: %+v, want %+v", id, got, w)
		}
	}
	if d := c2.Describe("expiring"); d.Err != kerr.TransactionalIDNotFound {
		t.Fatalf("expired id came back: %+v", d)
	}
	d := e.waitState(c2, "committing", CompleteCommit)
	if d.Epoch != rc.Epoch+1 {
		t.Fatalf("committing: %+v", d)
	}
	// The reloaded open transaction goes on, and is aborted once past its timeout.
	e.clock.Advance(61 * time.Second)
	c2.AbortTimedOut()
	e.waitState(c2, "open", CompleteAbort)
}
