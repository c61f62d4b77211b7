package engine

// Compaction under crashes and injected faults: a simulated power loss (vfs.FaultFS) at every
// step of a segment swap, and a failed write or fsync at every step, each reopened to exactly the
// pre-clean or the post-clean log (with several groups: something in between that lost nothing).

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/vfs"
)

// A crash at each step of a swap (the FaultFS loses every unsynced byte and every directory entry
// not yet synced) and a reopen give the pre-clean or the post-clean log, never a mix that loses a
// record; a cleaning after the reopen reaches the post-clean log.
func TestCleanerCrashAtEverySwapStep(t *testing.T) {
	for _, multi := range []bool{false, true} {
		t.Run(fmt.Sprintf("groups=%v", map[bool]string{false: "one", true: "several"}[multi]), func(t *testing.T) {
			for crashAt := 1; ; crashAt++ {
				if multi && crashAt > 10 && crashAt%13 != 0 {
					continue // every step of the first groups, then a sample of the others
				}
				if !crashRun(t, multi, crashAt) {
					if crashAt < 8 {
						t.Fatalf("only %d swap steps", crashAt-1)
					}
					return
				}
			}
		})
	}
}

// swapFixture is a log ready for cleaning on a FaultFS, with its records before and after.
type swapFixture struct {
	dir       string
	cfg       Config
	fault     *vfs.FaultFS
	halt      *haltFS
	l         *Log
	pre, post []oracleRec
}

func newSwapFixture(t *testing.T, multi bool) *swapFixture {
	clock := newTestClock()
	f := &swapFixture{dir: filepath.Join(t.TempDir(), "compacted-0"), cfg: compactConfig(clock)}
	f.fault = vfs.NewFaultFS(vfs.OS)
	f.halt = newHaltFS(f.fault)
	if !multi {
		f.cfg.SegmentBytes = 1 << 20 // every sealed segment fits one group
	} else {
		f.cfg.SegmentBytes = 6 << 10
	}
	f.l = openCompacted(t, f.halt, f.dir, f.cfg, true, 0)
	w := newWriter(t, f.l, clock, 11, 60)
	for range 4 {
		w.batches(map[bool]int{false: 40, true: 15}[multi])
		if err := f.l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	sealAll(t, f.l)
	f.pre = w.all
	f.post = expect(w.all, f.l.LogEndOffset(), -1)
	return f
}

// reopen opens the log again on the same FaultFS (after a crash or not), without the
// clean-shutdown marker, recovering from recovery point rp.
func (f *swapFixture) reopen(t *testing.T, rp int64) *Log {
	f.halt = newHaltFS(f.fault)
	return openCompacted(t, f.halt, f.dir, f.cfg, false, rp)
}

// checkPreOrPost checks that l holds f.pre or f.post; with several groups, anything between
// (every post-clean record present, nothing that was not there before).
func (f *swapFixture) checkPreOrPost(t *testing.T, l *Log, multi bool, what string) {
	t.Helper()
	got, _ := storedRecords(t, l)
	if diffRecords(got, f.pre) == nil || diffRecords(got, f.post) == nil {
		t.Logf("%s: the %s log", what, map[bool]string{true: "pre-clean", false: "post-clean"}[diffRecords(got, f.pre) == nil])
		return
	}
	t.Logf("%s: a partly cleaned log", what)
	if !multi {
		t.Fatalf("%s: the log is neither the pre-clean nor the post-clean log: %v / %v", what, diffRecords(got, f.pre), diffRecords(got, f.post))
	}
	pre := map[int64]oracleRec{}
	for _, r := range f.pre {
		pre[r.offset] = r
	}
	have := map[int64]bool{}
	for _, r := range got {
		if err := diffRecords([]oracleRec{r}, []oracleRec{pre[r.offset]}); err != nil {
			t.Fatalf("%s: record not in the pre-clean log: %v", what, err)
		}
		have[r.offset] = true
	}
	for _, r := range f.post {
		if !have[r.offset] {
			t.Fatalf("%s: record %v lost", what, r)
		}
	}
}

// crashRun cleans with a crash at the crashAt-th swap step and checks the reopened log. It
// returns false when the cleaning had fewer steps.
func crashRun(t *testing.T, multi bool, crashAt int) bool {
	f := newSwapFixture(t, multi)
	c := NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20})
	calls, step := 0, ""
	c.testHook = func(s string) error {
		if calls++; calls == crashAt {
			step = s
			if err := f.halt.halt(f.fault.Crash); err != nil {
				t.Fatalf("crash: %v", err)
			}
			return errHalted
		}
		return nil
	}
	_, err := c.Clean(f.l)
	f.l.Close()
	if calls < crashAt {
		if err != nil {
			t.Fatalf("clean without crash: %v", err)
		}
		return false
	}
	what := fmt.Sprintf("crash at step %d (%s)", crashAt, step)
	rp := int64(0)
	if crashAt%2 == 0 {
		rp = f.pre[len(f.pre)-1].offset + 1 // also the path that trusts the indexes
	}
	l := f.reopen(t, rp)
	defer l.Close()
	f.checkPreOrPost(t, l, multi, what)
	noLeftovers(t, f.dir)
	if _, err := c.Clean(l); err != nil {
		t.Fatalf("%s: clean after reopen: %v", what, err)
	}
	got, _ := storedRecords(t, l)
	sameRecords(t, what+", cleaned again", got, f.post)
	return true
}

// An injected fsync or write failure at each step of a cleaning takes the log dir offline
// (KAFKA_STORAGE_ERROR, as every storage failure does) and loses nothing: reopened after a
// restart or a power loss, the log is the pre-clean or the post-clean log.
func TestCleanerFaultAtEveryStep(t *testing.T) {
	for _, crash := range []bool{false, true} {
		for _, kind := range []string{"write", "sync"} {
			for armAt := 0; ; armAt++ {
				if !faultRun(t, kind, armAt, crash) {
					break
				}
			}
		}
	}
}

func faultRun(t *testing.T, kind string, armAt int, crash bool) bool {
	f := newSwapFixture(t, false)
	errInjected := errors.New("injected")
	arm := func() {
		if kind == "write" {
			f.fault.FailNextWrite(errInjected)
		} else {
			f.fault.FailNextSync(errInjected)
		}
	}
	c := NewCleaner(CleanerConfig{DedupeBufferSize: 1 << 20})
	calls := 0
	c.testHook = func(string) error {
		if calls++; calls == armAt {
			arm()
		}
		return nil
	}
	if armAt == 0 {
		arm()
	}
	_, err := c.Clean(f.l)
	what := fmt.Sprintf("%s failure armed at step %d (crash %v)", kind, armAt, crash)
	if err == nil {
		// The fault found nothing to fail: the clean finished.
		f.fault.FailNextWrite(nil)
		f.fault.FailNextSync(nil)
		got, _ := storedRecords(t, f.l)
		sameRecords(t, what, got, f.post)
		f.l.Close()
		return armAt <= calls && kind == "sync"
	}
	wantStorageError(t, what, err)
	if _, err := f.l.Append(record.Build(nil, record.BuildOptions{ProducerID: -1}, []record.Record{{Key: []byte("k")}})); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("%s: append after the failure: %v", what, err)
	}
	f.l.Close()
	if crash {
		if err := f.fault.Crash(); err != nil {
			t.Fatal(err)
		}
	}
	l := f.reopen(t, 0)
	defer l.Close()
	f.checkPreOrPost(t, l, false, what)
	noLeftovers(t, f.dir)
	return true
}
