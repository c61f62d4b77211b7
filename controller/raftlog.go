package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
)

// imageState pairs a published image with the channel closed when it is replaced.
type imageState struct {
	img     *Image
	changed chan struct{}
}

// fsm is the raft state machine: it applies metadata commands to copy-on-write images and
// publishes each new image atomically.
type fsm struct {
	cur atomic.Pointer[imageState]
	mu  sync.Mutex // serializes publish, the swap of cur (raft applies from one goroutine; Restore may race with it)
	log *slog.Logger
}

func newFSM(log *slog.Logger) *fsm {
	f := &fsm{log: log}
	f.cur.Store(&imageState{img: newImage(""), changed: make(chan struct{})})
	return f
}

func (f *fsm) image() *Image { return f.cur.Load().img }

func (f *fsm) changed() <-chan struct{} { return f.cur.Load().changed }

func (f *fsm) publish(img *Image) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.cur.Load()
	f.cur.Store(&imageState{img: img, changed: make(chan struct{})})
	close(old.changed)
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var cmd command
	if err := json.Unmarshal(l.Data, &cmd); err != nil {
		// Never fail the FSM on a bad entry: every node skips it the same way.
		f.log.Error("controller: undecodable metadata command", "index", l.Index, "err", err)
		return &applyResult{index: l.Index, err: kerrf(kerr.InvalidRequest, "undecodable command")}
	}
	img, res := apply(f.image(), l.Index, &cmd)
	if img != nil {
		f.publish(img)
	}
	return res
}

// Snapshot implements raft.FSM. The image is immutable, so the snapshot is just the pointer.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{img: f.image()}, nil
}

// Restore implements raft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 1<<30))
	if err != nil {
		return fmt.Errorf("read metadata snapshot: %w", err)
	}
	img, err := decodeImage(data)
	if err != nil {
		return err
	}
	f.publish(img)
	return nil
}

type fsmSnapshot struct{ img *Image }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	data, err := encodeImage(s.img)
	if err == nil {
		_, err = sink.Write(data)
	}
	if err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// slogWriter receives hclog's formatted lines and forwards them to slog. hclog itself filters out
// everything below warn, so this only ever sees warnings and errors. While a peer is down raft
// reports the same failure many times a second: each kind of message (its text before the first
// '=') is passed on at most once per logEvery.
type slogWriter struct {
	log  *slog.Logger
	mu   sync.Mutex // guards last (raft's goroutines log concurrently)
	last map[string]time.Time
}

const logEvery = 5 * time.Second

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte{'\n'}) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		key, _, _ := strings.Cut(s, "=")
		now := time.Now()
		w.mu.Lock()
		if t, ok := w.last[key]; ok && now.Sub(t) < logEvery {
			w.mu.Unlock()
			continue
		}
		if len(w.last) > 1000 {
			clear(w.last)
		}
		w.last[key] = now
		w.mu.Unlock()
		level := slog.LevelWarn
		if strings.Contains(s, "[ERROR]") {
			level = slog.LevelError
		}
		w.log.Log(context.Background(), level, s)
	}
	return len(p), nil
}

func newHCLogger(log *slog.Logger, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:            name,
		Level:           hclog.Warn,
		Output:          &slogWriter{log: log, last: map[string]time.Time{}},
		DisableTime:     true,
		IncludeLocation: false,
	})
}
