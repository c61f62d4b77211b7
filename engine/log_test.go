package engine

import (
	"fmt"
	"io"
	"testing"

	"github.com/weir-mq/weir/record"
)

// testBatch builds an uncompressed batch of n records of valueSize bytes.
func testBatch(n, valueSize int, ts int64) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = byte(i + j)
		}
		recs[i] = record.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: v}
	}
	return record.Build(nil, record.BuildOptions{BaseTimestamp: ts, ProducerID: -1, BaseSequence: -1}, recs)
}

func readAll(t *testing.T, l *Log, from int64, iso Isolation) []record.Header {
	t.Helper()
	var out []record.Header
	for {
		sl, err := l.Read(from, 1<<20, iso)
		if err != nil {
			t.Fatalf("read at %d: %v", from, err)
		}
		if sl.Length == 0 {
			return out
		}
		buf := make([]byte, sl.Length)
		if _, err := sl.File.ReadAt(buf, sl.Position); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		sl.Release()
		for len(buf) >= record.HeaderSize {
			h, err := record.CheckStored(buf)
			if err != nil {
				break // a partial batch at the end of the slice
			}
			out = append(out, h)
			from = h.NextOffset()
			buf = buf[h.Size():]
		}
	}
}

func TestAppendReadRollReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 << 10
	cfg.IndexIntervalBytes = 512
	l, err := OpenLog(OpenOptions{Dir: dir + "/t-0", Topic: "t", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for i := 0; i < 200; i++ {
		info, err := l.Append(testBatch(1+i%5, 100, 1000+int64(i)))
		if err != nil {
			t.Fatal(err)
		}
		if info.BaseOffset != want {
			t.Fatalf("batch %d base %d want %d", i, info.BaseOffset, want)
		}
		want = info.LastOffset + 1
		if err := l.AwaitDurable(want); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(l.Segments()); got < 5 {
		t.Fatalf("expected rolls, have %d segments", got)
	}
	hs := readAll(t, l, 0, ReadUpToLogEnd)
	if len(hs) != 200 || hs[199].NextOffset() != want {
		t.Fatalf("read %d batches", len(hs))
	}
	// A read from the middle of a batch returns that batch.
	mid := hs[50].BaseOffset + 1
	if hs[50].RecordCount > 1 {
		got := readAll(t, l, mid, ReadUpToLogEnd)
		if got[0].BaseOffset != hs[50].BaseOffset {
			t.Fatalf("read at %d started at %d", mid, got[0].BaseOffset)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	batches := 200
	for _, clean := range []bool{true, false} {
		l, err = OpenLog(OpenOptions{Dir: dir + "/t-0", Topic: "t", Config: cfg, CleanShutdown: clean})
		if err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() != want {
			t.Fatalf("clean=%v: reopened LEO %d want %d", clean, l.LogEndOffset(), want)
		}
		hs2 := readAll(t, l, 0, ReadUpToHighWatermark)
		if len(hs2) != batches {
			t.Fatalf("clean=%v: reopened read %d batches", clean, len(hs2))
		}
		if _, err := l.Append(testBatch(2, 10, 5000)); err != nil {
			t.Fatal(err)
		}
		want += 2
		batches++
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
