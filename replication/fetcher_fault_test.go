package replication

// A follower whose fdatasync fails, under the durable policy: the leader's high watermark must
// not count the bytes whose sync failed, and the follower's partitions in the failed log dir
// must stop fetching at once (before any report of the offline dir reaches the controller).
// The follower is a disk engine.Log over vfs.FaultFS driven by the fetcher's own round steps
// (snapshot, settle, fetchRequest, applyFetchResponse); the leader is an engine.MemLog with a
// LeaderState (the deterministic core the broker runs) counting each Fetch's offset.

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"math"
	"math/rand"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/vfs"
)

// faultLeader is a fake leader of one partition whose high watermark is LeaderState's, fed
// with the offset of every Fetch from follower 2.
type faultLeader struct {
	fakeLeader
	state *LeaderState
	// fetched, when set, sees each Fetch's partition and offset before the leader counts it.
	fetched func(p *followed, offset int64)
}

func newFaultLeader(t *testing.T, cfg engine.Config) *faultLeader {
	t.Helper()
	ll, err := engine.NewMemLog(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ll.Close() })
	if err := ll.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	st := NewLeaderState(LeaderConfig{LocalID: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, LeaderEpoch: 1, LagTimeMax: time.Minute}, 0, 0, 0, time.Now())
	return &faultLeader{fakeLeader: fakeLeader{log: ll, epoch: 1}, state: st}
}

func (l *faultLeader) append(t *testing.T, o *fetcherOracle, n int) {
	t.Helper()
	for range n {
		if _, err := l.log.Append(o.batch()); err != nil {
			t.Fatal(err)
		}
	}
	l.state.UpdateLocal(l.log.LogEndOffset())
}

// round runs one fetcher round for the source fetcher's partitions against l, as
// sourceFetcher.round does once the divergence checks are done: the partitions still active,
// each settled (settle), then one Fetch each. It returns the fetch offsets the leader saw and the
// error the round ends with (the real fetcher then reconnects and tries again).
func (l *faultLeader) round(t *testing.T, s *sourceFetcher) (offsets []int64, err error) {
	t.Helper()
	for _, p := range s.snapshot() {
		if !p.truncated {
			p.truncated = true // an empty follower of epoch 1: nothing to check
		}
		if !s.settle(p) {
			continue
		}
		req, byTP := s.fetchRequest([]*followed{p})
		off := req.Topics[0].Partitions[0].FetchOffset
		offsets = append(offsets, off)
		if l.fetched != nil {
			l.fetched(p, off)
		}
		if changed, _ := l.state.UpdateFollower(2, off, time.Now()); changed {
			if err := l.log.SetHighWatermark(l.state.HighWatermark()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.applyFetchResponse(byTP, l.answerFetch(t, req)); err != nil {
			return offsets, err
		}
	}
	return offsets, nil
}

// TestFollowerSyncFailure: the follower's fdatasync fails after it appended the leader's new
// batches. The leader's high watermark stays at what the follower synced (an acks=all write
// of the unsynced batches is never acknowledged on the strength of this replica), and the
// follower sends no Fetch for the partition again, nor for another partition in the same log dir.
func TestFollowerSyncFailure(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	if !cfg.Durable() {
		t.Fatal("the default policy is not durable")
	}
	o := &fetcherOracle{t: t, rng: rand.New(rand.NewSource(1)), cfg: cfg, ts: time.Now().UnixMilli()}

	dir := t.TempDir()
	ffs := vfs.NewFaultFS(vfs.OS)
	ld := engine.NewLogDir(dir)
	open := func(topic string) *engine.Log {
		l, err := engine.OpenLog(engine.OpenOptions{FS: ffs, LogDir: ld, Dir: filepath.Join(dir, topic+"-0"), Topic: topic, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Two partitions in one log dir, each following its own leader on its own source fetcher.
	leaders := []*faultLeader{newFaultLeader(t, cfg), newFaultLeader(t, cfg)}
	logs := []*engine.Log{open("a"), open("b")}
	var srcs []*sourceFetcher
	var parts []*followed
	for i, l := range logs {
		s := newSourceFetcher(NewFetchers(FetcherConfig{NodeID: 2, Logger: quiet}), int32(10+i))
		p := &followed{Follow: Follow{Topic: l.Topic(), Partition: 0, Leader: int32(10 + i), LeaderEpoch: 1, Log: l}, active: true}
		s.setParts([]*followed{p})
		srcs, parts = append(srcs, s), append(parts, p)
	}

	// Both followers catch up; the leaders' high watermarks reach their log ends.
	for i, l := range leaders {
		l.append(t, o, 5)
		for range 3 {
			if _, err := l.round(t, srcs[i]); err != nil {
				t.Fatalf("catch-up: %v", err)
			}
		}
		if hw, end := l.log.HighWatermark(), l.log.LogEndOffset(); hw != end || logs[i].LogEndOffset() != end {
			t.Fatalf("leader %d: high watermark %d, log end %d, follower end %d: not caught up", i, hw, end, logs[i].LogEndOffset())
		}
	}
	synced := logs[0].RecoveryPoint()

	// The leader of a writes more; the follower appends it and its fdatasync fails.
	la := leaders[0]
	la.append(t, o, 4)
	ffs.FailNextSync(syscall.EIO)
	_, err := la.round(t, srcs[0])
	if logs[0].LogEndOffset() <= synced {
		t.Fatalf("the follower did not append the new batches (log end %d, synced %d; err %v)", logs[0].LogEndOffset(), synced, err)
	}
	if ld.Err() == nil {
		t.Fatalf("the failed fdatasync did not take the log dir offline (err %v)", err)
	}
	if rp := logs[0].RecoveryPoint(); rp != synced {
		t.Fatalf("recovery point %d after the failed sync, want %d", rp, synced)
	}
	if err != nil && !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("round after the failed sync: %v", err)
	}

	// The fetcher retries as it would (after an error it reconnects): the leader must never
	// see an offset past what the follower synced, and the partition is not fetched again.
	la.append(t, o, 2)
	for i := range 3 {
		offsets, err := la.round(t, srcs[0])
		for _, off := range offsets {
			if off > synced {
				t.Errorf("retry %d: the follower reported fetch offset %d, past its synced end %d (log end %d)", i, off, synced, logs[0].LogEndOffset())
			}
		}
		if len(offsets) > 0 {
			t.Errorf("retry %d: the follower still fetches a partition whose log dir failed (offsets %v, err %v)", i, offsets, err)
		}
	}
	if hw := la.log.HighWatermark(); hw > synced {
		t.Errorf("the leader's high watermark %d passed the follower's synced end %d", hw, synced)
	}
	if parts[0].active || !parts[0].failed {
		t.Errorf("partition a: active %v failed %v after its log dir failed, want it out of the fetchers", parts[0].active, parts[0].failed)
	}

	// Partition b shares the failed dir: it stops fetching at once too, before any append of
	// its own fails.
	leaders[1].append(t, o, 1)
	if offsets, err := leaders[1].round(t, srcs[1]); len(offsets) > 0 {
		t.Errorf("partition b in the failed log dir still fetches (offsets %v, err %v)", offsets, err)
	}
	if parts[1].active || !parts[1].failed {
		t.Errorf("partition b: active %v failed %v in a failed log dir, want it out of the fetchers", parts[1].active, parts[1].failed)
	}
}

// lagLog is a disk log whose fdatasyncs seem to lag: RecoveryPoint is at most ceiling, which
// AwaitDurable raises to what it waited for (except for the first stuck calls, as if another
// append were still in flight).
type lagLog struct {
	*engine.Log
	ceiling atomic.Int64
	stuck   atomic.Int32
}

func (l *lagLog) RecoveryPoint() int64 { return min(l.Log.RecoveryPoint(), l.ceiling.Load()) }

func (l *lagLog) AwaitDurable(upTo int64) error {
	if err := l.Log.AwaitDurable(upTo); err != nil {
		return err
	}
	if l.stuck.Add(-1) >= 0 {
		return nil
	}
	if upTo > l.ceiling.Load() {
		l.ceiling.Store(upTo)
	}
	return nil
}

// TestFollowerReportsDurableEnd: under the durable policy a follower reports (as its fetch
// offset) only what is durable: a log end whose last batches are not yet fdatasync'd (appends
// this broker made as leader, a flush refused for lack of a resource) is made durable before
// the Fetch, or, while it is not, the durable end is reported and the batches the follower holds
// already are skipped in the answer.
func TestFollowerReportsDurableEnd(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	o := &fetcherOracle{t: t, rng: rand.New(rand.NewSource(2)), cfg: cfg, ts: time.Now().UnixMilli()}
	dir := t.TempDir()
	dl, err := engine.OpenLog(engine.OpenOptions{Dir: filepath.Join(dir, "a-0"), Topic: "a", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dl.Close() })
	ll := &lagLog{Log: dl}
	ll.ceiling.Store(math.MaxInt64)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := newSourceFetcher(NewFetchers(FetcherConfig{NodeID: 2, Logger: quiet}), 10)
	p := &followed{Follow: Follow{Topic: "a", Partition: 0, Leader: 10, LeaderEpoch: 1, Log: ll}, active: true}
	s.setParts([]*followed{p})
	l := newFaultLeader(t, cfg)
	l.fetched = func(p *followed, off int64) {
		if rp := ll.RecoveryPoint(); off > rp {
			t.Errorf("the follower reported fetch offset %d past its durable end %d (log end %d)", off, rp, ll.LogEndOffset())
		}
	}
	catchUp := func(what string) {
		t.Helper()
		for range 4 {
			if _, err := l.round(t, s); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		if got, want := readAll(t, dl), readAll(t, l.log); !bytes.Equal(got, want) {
			t.Fatalf("%s: the follower's log (%d bytes, end %d) is not the leader's (%d bytes, end %d)", what, len(got), dl.LogEndOffset(), len(want), l.log.LogEndOffset())
		}
		if hw, end := l.log.HighWatermark(), l.log.LogEndOffset(); hw != end {
			t.Fatalf("%s: leader high watermark %d, want its log end %d", what, hw, end)
		}
	}
	l.append(t, o, 3)
	catchUp("first catch-up")

	// The last batches seem not durable: the fetcher makes them so before it reports them.
	l.append(t, o, 3)
	ll.ceiling.Store(dl.LogEndOffset() - 1)
	catchUp("with a tail not yet durable")

	// The flush seems not to cover the tail once: the durable end is reported, and the leader's
	// answer from there is appended past what the follower holds.
	ll.ceiling.Store(dl.LogEndOffset() - 1)
	ll.stuck.Store(1)
	l.append(t, o, 2)
	catchUp("with a durable end below the log end")
	if rp := ll.RecoveryPoint(); rp != dl.LogEndOffset() {
		t.Fatalf("durable end %d after catching up, want the log end %d", rp, dl.LogEndOffset())
	}
}
