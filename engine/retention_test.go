package engine

import (
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

// Retention and log-start tests with an injected clock: retention.ms judged on each segment's
// largest timestamp, retention.bytes, segment.ms rolls driven by batch timestamps, and
// DeleteRecordsBefore.

const (
	retHour = int64(3600 * 1000)
	retNow  = int64(1_700_000_000_000) // the injected clock's start, in ms
)

// retClock is an injectable Config.Now.
type retClock struct{ ms atomic.Int64 }

func (c *retClock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

// retOpen opens a log whose clock the test moves; segments roll only when the test says so
// (Roll), unless cfg says otherwise.
func retOpen(t *testing.T, mutate func(*Config)) (*Log, *retClock) {
	t.Helper()
	clock := &retClock{}
	clock.ms.Store(retNow)
	cfg := DefaultConfig()
	cfg.RetentionMs = -1
	cfg.RetentionBytes = -1
	cfg.Now = clock.now
	if mutate != nil {
		mutate(&cfg)
	}
	l, err := OpenLog(OpenOptions{Dir: filepath.Join(t.TempDir(), "ret-0"), Topic: "ret", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, clock
}

// retBatch builds a batch with one record per timestamp (the first is the base timestamp) and
// values of valueSize bytes: its max timestamp is the largest of them.
func retBatch(valueSize int, timestamps ...int64) []byte {
	recs := make([]record.Record, len(timestamps))
	for i, ts := range timestamps {
		recs[i] = record.Record{Value: make([]byte, valueSize), TimestampDelta: ts - timestamps[0]}
	}
	return record.Build(nil, record.BuildOptions{BaseTimestamp: timestamps[0], ProducerID: -1, BaseSequence: -1}, recs)
}

func retAppend(t *testing.T, l *Log, batch []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(batch)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return info
}

func retRoll(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
}

func retBases(l *Log) []int64 {
	var out []int64
	for _, s := range l.Segments() {
		out = append(out, s.BaseOffset())
	}
	return out
}

// retFileBases lists the base offsets of the .log files in the log's directory.
func retFileBases(t *testing.T, l *Log) []int64 {
	t.Helper()
	entries, err := os.ReadDir(l.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range entries {
		if b, ok := segment.ParseFileName(e.Name(), segment.LogSuffix); ok {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func retExpectBases(t *testing.T, l *Log, want ...int64) {
	t.Helper()
	got := retBases(l)
	if len(got) != len(want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("segments %v, want %v", got, want)
		}
	}
	files := retFileBases(t, l)
	if len(files) != len(want) {
		t.Fatalf("segment files %v, want %v", files, want)
	}
	for i := range files {
		if files[i] != want[i] {
			t.Fatalf("segment files %v, want %v", files, want)
		}
	}
}

func retExpectOOR(t *testing.T, l *Log, offset int64) {
	t.Helper()
	for _, iso := range []Isolation{ReadUpToHighWatermark, ReadUpToLogEnd} {
		sl, err := l.Read(offset, 1<<20, iso)
		sl.Release()
		if orcCode(err) != kerr.OffsetOutOfRange.Code {
			t.Fatalf("read at %d (isolation %d): %v, want OFFSET_OUT_OF_RANGE", offset, iso, err)
		}
	}
}

func retSetHW(t *testing.T, l *Log, offset int64) {
	t.Helper()
	if err := l.SetHighWatermark(offset); err != nil {
		t.Fatal(err)
	}
}

// TestRetentionMsByLargestTimestamp: a segment expires when its largest timestamp is older than
// retention.ms; whole segments go, oldest first, and deletion stops at the first segment that has
// not expired even if older ones follow it; the active segment never goes.
func TestRetentionMsByLargestTimestamp(t *testing.T) {
	l, clock := retOpen(t, func(c *Config) { c.RetentionMs = 3 * retHour })
	// segment 0: offsets 0-1, max timestamp now-10h
	retAppend(t, l, retBatch(10, retNow-12*retHour))
	retAppend(t, l, retBatch(10, retNow-11*retHour, retNow-10*retHour))
	retRoll(t, l)
	// segment 3: offsets 3-4, max now-5h
	retAppend(t, l, retBatch(10, retNow-6*retHour, retNow-5*retHour))
	retRoll(t, l)
	// segment 5: an old first batch, but its largest timestamp (now-1h) keeps it
	retAppend(t, l, retBatch(10, retNow-20*retHour))
	retAppend(t, l, retBatch(10, retNow-1*retHour))
	retRoll(t, l)
	// segment 7: expired (now-8h), but after a segment that is not
	retAppend(t, l, retBatch(10, retNow-8*retHour))
	retRoll(t, l)
	// segment 8, active: expired (now-30h) but active
	retAppend(t, l, retBatch(10, retNow-30*retHour))
	retExpectBases(t, l, 0, 3, 5, 7, 8)
	retSetHW(t, l, l.LogEndOffset())

	n, err := l.DeleteExpiredSegments()
	if err != nil || n != 2 {
		t.Fatalf("retention deleted %d segments (%v), want 2", n, err)
	}
	retExpectBases(t, l, 5, 7, 8)
	if got := l.LogStartOffset(); got != 5 {
		t.Fatalf("log start %d, want 5", got)
	}
	retExpectOOR(t, l, 4)
	if hs := orcBatches(orcReadAll(t, l, ReadUpToHighWatermark)); len(hs) != 4 || hs[0].BaseOffset != 5 {
		t.Fatalf("read from the new log start: %d batches", len(hs))
	}

	// An hour later segment 5's largest timestamp (now-1h) is 3h old: not yet (judged with >).
	clock.ms.Add(2 * retHour)
	if n, _ := l.DeleteExpiredSegments(); n != 0 {
		t.Fatalf("retention at exactly retention.ms deleted %d segments", n)
	}
	// One millisecond later 5 and 7 go; the active segment 8 stays though long expired.
	clock.ms.Add(1)
	if n, err := l.DeleteExpiredSegments(); n != 2 || err != nil {
		t.Fatalf("retention deleted %d segments (%v), want 2", n, err)
	}
	retExpectBases(t, l, 8)
	if l.LogStartOffset() != 8 || l.LogEndOffset() != 9 {
		t.Fatalf("log start %d, end %d", l.LogStartOffset(), l.LogEndOffset())
	}
	if n, _ := l.DeleteExpiredSegments(); n != 0 {
		t.Fatalf("retention deleted the active segment")
	}
}

// TestRetentionBytes: oldest segments go while what remains is still at least retention.bytes.
func TestRetentionBytes(t *testing.T) {
	for _, c := range []struct {
		name     string
		limit    int64 // in segments of equal size
		wantKeep int
	}{
		{"limit 2.5 segments", 5, 3}, // halves of a segment: 5 halves = 2.5 segments
		{"limit exactly 3 segments", 6, 3},
		{"limit above the size", 20, 5},
		{"limit 0", 0, 1}, // everything but the active segment
	} {
		t.Run(c.name, func(t *testing.T) {
			batch := retBatch(100, retNow)
			segSize := int64(2 * len(batch))
			limit := c.limit * segSize / 2
			l, _ := retOpen(t, func(cfg *Config) {
				cfg.RetentionBytes = limit
				if limit == 0 {
					cfg.RetentionBytes = 0 // fillDefaults turns 0 into -1: set after opening
				}
			})
			if limit == 0 {
				c := l.Config()
				c.RetentionBytes = 0
				l.SetConfig(c)
			}
			for i := 0; i < 5; i++ { // 5 segments of 2 batches (the last one active)
				retAppend(t, l, retBatch(100, retNow))
				retAppend(t, l, retBatch(100, retNow))
				if i < 4 {
					retRoll(t, l)
				}
			}
			if l.Size() != 5*segSize {
				t.Fatalf("log size %d, want %d", l.Size(), 5*segSize)
			}
			retSetHW(t, l, l.LogEndOffset())
			n, err := l.DeleteExpiredSegments()
			if err != nil || n != 5-c.wantKeep {
				t.Fatalf("deleted %d segments (%v), want %d", n, err, 5-c.wantKeep)
			}
			if n > 0 && limit > 0 && l.Size() < limit {
				t.Fatalf("size %d fell below retention.bytes %d", l.Size(), limit)
			}
			var want []int64
			for i := 5 - c.wantKeep; i < 5; i++ {
				want = append(want, int64(2*i))
			}
			retExpectBases(t, l, want...)
			if got := l.LogStartOffset(); got != want[0] {
				t.Fatalf("log start %d, want %d", got, want[0])
			}
			retExpectOOR(t, l, want[0]-1)
		})
	}
}

// TestRetentionBothAndHighWatermark: retention.ms applies first, then retention.bytes on what is
// left; neither deletes a segment holding offsets at or above the high watermark.
func TestRetentionBothAndHighWatermark(t *testing.T) {
	l, _ := retOpen(t, func(c *Config) {
		c.RetentionMs = 5 * retHour
	})
	batch := retBatch(100, retNow)
	segSize := int64(len(batch))
	// segments 0..5 hold one batch each; 0 and 1 are old, the rest new
	for i, age := range []int64{10, 9, 1, 1, 1, 1} {
		retAppend(t, l, retBatch(100, retNow-age*retHour))
		if i < 5 {
			retRoll(t, l)
		}
	}
	c := l.Config()
	c.RetentionBytes = 3 * segSize
	l.SetConfig(c)
	// A watermark at 1 protects everything from segment 1 on.
	retSetHW(t, l, 1)
	if n, err := l.DeleteExpiredSegments(); n != 1 || err != nil {
		t.Fatalf("deleted %d (%v), want 1: only segment 0 is below the high watermark", n, err)
	}
	retExpectBases(t, l, 1, 2, 3, 4, 5)
	if l.HighWatermark() != 1 || l.LogStartOffset() != 1 {
		t.Fatalf("log start %d, high watermark %d", l.LogStartOffset(), l.HighWatermark())
	}
	retSetHW(t, l, l.LogEndOffset())
	// retention.ms takes segment 1; retention.bytes then takes 2 (5 segments -> 3 remain).
	if n, err := l.DeleteExpiredSegments(); n != 2 || err != nil {
		t.Fatalf("deleted %d (%v), want 2", n, err)
	}
	retExpectBases(t, l, 3, 4, 5)
	if l.Size() != 3*segSize {
		t.Fatalf("size %d, want %d", l.Size(), 3*segSize)
	}
}

// TestSegmentMsRollByTimestamp: the active segment rolls when an incoming batch's max timestamp
// is more than segment.ms after the max timestamp of the segment's first batch (Kafka's
// timeWaitedForRoll), whatever the wall clock says, and also after a clean reopen.
func TestSegmentMsRollByTimestamp(t *testing.T) {
	l, clock := retOpen(t, func(c *Config) { c.SegmentMs = retHour })
	t0 := retNow - 100*retHour                              // timestamps far from the clock: only they matter
	retAppend(t, l, retBatch(10, t0-5, t0))                 // first batch: max t0
	retAppend(t, l, retBatch(10, t0+retHour))               // exactly segment.ms later: no roll
	retAppend(t, l, retBatch(10, t0-10*retHour))            // older: no roll
	clock.ms.Add(1000 * retHour)                            // the clock does not matter
	retAppend(t, l, retBatch(10, t0+retHour-5, t0+retHour)) // still not more than segment.ms
	retExpectBases(t, l, 0)
	info := retAppend(t, l, retBatch(10, t0, t0+retHour+1)) // max timestamp decides: roll
	if info.BaseOffset != 6 || info.SegmentBase != 6 {
		t.Fatalf("batch at %d in segment %d, want a roll to 6", info.BaseOffset, info.SegmentBase)
	}
	retExpectBases(t, l, 0, 6)
	// The new segment measures from its own first batch.
	retAppend(t, l, retBatch(10, t0+2*retHour+1))
	retExpectBases(t, l, 0, 6)

	// After a clean reopen the first batch's timestamp is read back from the segment.
	cfg := l.Config()
	dir := l.Dir()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := OpenLog(OpenOptions{Dir: dir, Topic: "ret", Config: cfg, CleanShutdown: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	retAppend(t, l2, retBatch(10, t0+2*retHour+1)) // exactly segment.ms after t0+retHour+1
	retExpectBases(t, l2, 0, 6)
	info = retAppend(t, l2, retBatch(10, t0+2*retHour+2))
	if info.SegmentBase != info.BaseOffset {
		t.Fatalf("after a clean reopen: batch %d went to segment %d, want a roll", info.BaseOffset, info.SegmentBase)
	}
}

// TestSegmentMsRollWithoutTimestamps: batches without timestamps (-1) fall back to the segment's
// creation time on the injected clock.
func TestSegmentMsRollWithoutTimestamps(t *testing.T) {
	l, clock := retOpen(t, func(c *Config) { c.SegmentMs = retHour })
	noTs := func() []byte {
		b := retBatch(10, retNow)
		hdr := b[record.BaseTimestampOffset:]
		for i := 0; i < 16; i++ { // base and max timestamp = -1
			hdr[i] = 0xff
		}
		record.SetChecksum(b)
		return b
	}
	retAppend(t, l, noTs())
	clock.ms.Add(retHour)
	retAppend(t, l, noTs())
	retExpectBases(t, l, 0)
	clock.ms.Add(1)
	info := retAppend(t, l, noTs())
	if info.SegmentBase != 2 {
		t.Fatalf("batch went to segment %d, want a roll to 2", info.SegmentBase)
	}
}

// TestDeleteRecordsBefore: the log start advances (never back), whole segments below it are
// deleted, an offset past the high watermark is refused, and reads below the new log start are
// OFFSET_OUT_OF_RANGE.
func TestDeleteRecordsBefore(t *testing.T) {
	l, _ := retOpen(t, nil)
	for i := 0; i < 4; i++ { // segments 0, 10, 20, 30 of two 5-record batches
		retAppend(t, l, retBatch(10, retNow, retNow, retNow, retNow, retNow))
		retAppend(t, l, retBatch(10, retNow, retNow, retNow, retNow, retNow))
		if i < 3 {
			retRoll(t, l)
		}
	}
	retSetHW(t, l, 25)
	if got := l.HighWatermark(); got != 25 {
		t.Fatalf("high watermark %d", got)
	}

	start, err := l.DeleteRecordsBefore(26)
	if orcCode(err) != kerr.OffsetOutOfRange.Code || start != 0 || l.LogStartOffset() != 0 {
		t.Fatalf("delete before 26 past the watermark: (%d, %v), log start %d", start, err, l.LogStartOffset())
	}
	retExpectBases(t, l, 0, 10, 20, 30)

	start, err = l.DeleteRecordsBefore(12) // inside segment 10, inside batch [10,14]
	if err != nil || start != 12 || l.LogStartOffset() != 12 {
		t.Fatalf("delete before 12: (%d, %v)", start, err)
	}
	retExpectBases(t, l, 10, 20, 30)
	retExpectOOR(t, l, 11)
	// A read at the new log start returns the batch holding it.
	sl, err := l.Read(12, 1, ReadUpToHighWatermark)
	if err != nil {
		t.Fatal(err)
	}
	if hs := orcBatches(orcSliceBytes(t, sl)); len(hs) != 1 || hs[0].BaseOffset != 10 {
		t.Fatalf("read at the log start: %+v", hs)
	}

	if start, err := l.DeleteRecordsBefore(5); err != nil || start != 12 {
		t.Fatalf("delete before 5 (below the log start): (%d, %v), want the log start 12 kept", start, err)
	}
	start, err = l.DeleteRecordsBefore(20) // exactly a segment boundary: segment 10 goes
	if err != nil || start != 20 {
		t.Fatalf("delete before 20: (%d, %v)", start, err)
	}
	retExpectBases(t, l, 20, 30)
	start, err = l.DeleteRecordsBefore(25) // up to the watermark is allowed
	if err != nil || start != 25 {
		t.Fatalf("delete before 25: (%d, %v)", start, err)
	}
	retExpectBases(t, l, 20, 30)
	retExpectOOR(t, l, 24)
	if l.HighWatermark() != 25 {
		t.Fatalf("high watermark %d", l.HighWatermark())
	}
	// The active segment is never deleted, even when the log start passes all of it.
	retSetHW(t, l, l.LogEndOffset())
	if start, err := l.DeleteRecordsBefore(40); err != nil || start != 40 {
		t.Fatalf("delete before the log end: (%d, %v)", start, err)
	}
	retExpectBases(t, l, 30)
	retExpectOOR(t, l, 39)
	if sl, err := l.Read(40, 1<<20, ReadUpToLogEnd); err != nil || sl.Length != 0 {
		t.Fatalf("read at the log end: %d bytes, %v", sl.Length, err)
	}
	info := retAppend(t, l, retBatch(10, retNow))
	if info.BaseOffset != 40 {
		t.Fatalf("next append at %d", info.BaseOffset)
	}
}

// TestRetentionFutureTimestamp: a segment whose largest timestamp lies in the future is kept by
// time retention, and every later segment with it (retention deletes the oldest segments first
// and stops at the first one it keeps). Kafka behaves the same way (UnifiedLog's
// deleteRetentionMsBreachedSegments: now - largestTimestamp > retention.ms, over a prefix of the
// segments); the defence is at the door: with the broker's timestamp bounds
// (message.timestamp.after.max.ms, one hour by default) Append refuses such a record, so only a
// segment written before the bound existed (here through AppendStored) can hold one, and
// retention.bytes still removes it.
func TestRetentionFutureTimestamp(t *testing.T) {
	l, clock := retOpen(t, func(c *Config) {
		c.RetentionMs = 7 * 24 * retHour
		c.CheckTimestamps = true
		c.MessageTimestampBeforeMaxMs = -1
		c.MessageTimestampAfterMaxMs = retHour
	})
	const year9999 = int64(253402300799000)
	// At the door: refused, nothing written.
	if _, err := l.Append(retBatch(10, retNow, year9999)); err == nil {
		t.Fatal("a year-9999 record was appended")
	}
	if _, err := l.Append(retBatch(10, retNow+retHour+1)); err == nil {
		t.Fatal("a record more than after.max.ms ahead was appended")
	}
	retAppend(t, l, retBatch(10, retNow+retHour)) // exactly the bound: accepted
	if l.LogEndOffset() != 1 {
		t.Fatalf("log end %d", l.LogEndOffset())
	}
	retRoll(t, l)
	// Written before the bound existed: a stored batch keeps its timestamps.
	stored := retBatch(10, retNow, year9999)
	record.SetBaseOffset(stored, l.LogEndOffset())
	if _, err := l.AppendStored(stored); err != nil {
		t.Fatal(err)
	}
	retRoll(t, l)
	retAppend(t, l, retBatch(10, retNow))
	retRoll(t, l)
	if err := l.AdvanceHighWatermark(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	clock.ms.Add(30 * 24 * retHour)
	if _, err := l.DeleteExpiredSegments(); err != nil {
		t.Fatal(err)
	}
	// The first segment expired; the future one stays, and holds the one after it.
	if got := retBases(l); len(got) != 3 || got[0] != 1 {
		t.Fatalf("segments %v after retention: want the future segment (base 1) and those after it", got)
	}
	// retention.bytes is not blocked by timestamps.
	cfg := l.Config()
	cfg.RetentionBytes = 0
	l.SetConfig(cfg)
	if _, err := l.DeleteExpiredSegments(); err != nil {
		t.Fatal(err)
	}
	if got := retBases(l); got[0] == 1 {
		t.Fatalf("segments %v: retention.bytes kept the future segment", got)
	}
}
