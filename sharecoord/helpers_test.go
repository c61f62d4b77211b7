package sharecoord

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weir-mq/weir/sharestate"
)

// memStore is a Store of in-memory logs.
type memStore struct {
	parts int32
	mu    sync.Mutex
	logs  map[int32]*memLog // guarded by mu
}

func newMemStore(parts int32) *memStore { return &memStore{parts: parts, logs: map[int32]*memLog{}} }

func (s *memStore) Partitions() int32 { return s.parts }

func (s *memStore) Log(p int32) (Log, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[p]
	if l == nil {
		l = &memLog{}
		s.logs[p] = l
	}
	return l, nil
}

// memLog keeps appended batches; failNext makes the next append fail.
type memLog struct {
	mu       sync.Mutex
	batches  [][]byte // guarded by mu
	failNext error    // guarded by mu
}

func (l *memLog) Append(batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.failNext; err != nil {
		l.failNext = nil
		return 0, err
	}
	l.batches = append(l.batches, append([]byte(nil), batch...))
	return int64(len(l.batches)), nil
}

func (l *memLog) AwaitDurable(int64) error { return nil }

func (l *memLog) ReadBatches(fn func([]byte) error) error {
	l.mu.Lock()
	bs := append([][]byte(nil), l.batches...)
	l.mu.Unlock()
	for _, b := range bs {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// records returns the (key version, value) of every record in l.
func (l *memLog) records(t *testing.T) (vers []int16, values [][]byte) {
	t.Helper()
	_ = l.ReadBatches(func(b []byte) error {
		return eachRecord(b, func(k, v []byte) error {
			ver, _, err := decodeKey(k)
			if err != nil {
				t.Fatalf("decodeKey: %v", err)
			}
			vers = append(vers, ver)
			values = append(values, append([]byte(nil), v...))
			return nil
		})
	})
	return vers, values
}

// newTestCoord returns a coordinator over store leading every partition, loaded.
func newTestCoord(t *testing.T, store *memStore, cfg Config) *Coordinator {
	t.Helper()
	cfg.Store = store
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for p := int32(0); p < store.parts; p++ {
		c.Elect(p, 1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for p := int32(0); p < store.parts; p++ {
		if err := c.WaitLoaded(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

var testKey = sharestate.Key{Group: "g", TopicID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Partition: 3}

func isErr(err, target error) bool { return errors.Is(err, target) }
