package engine

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

// lastTimeIndexEntry reads the last 12-byte entry of a .timeindex file (absolute offset).
func lastTimeIndexEntry(t *testing.T, path string, base int64) (ts, offset int64, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%12 != 0 {
		t.Fatalf("%s: %d bytes is not whole entries (not trimmed?)", path, len(b))
	}
	n = len(b) / 12
	if n == 0 {
		return -1, base, 0
	}
	e := b[len(b)-12:]
	return int64(binary.BigEndian.Uint64(e)), base + int64(int32(binary.BigEndian.Uint32(e[8:]))), n
}

// TestCloseAppendsFinalTimeIndexEntry: after a clean close, the active segment's .timeindex ends
// with (max timestamp, offset of it), as Kafka's LogSegment.close leaves it, for a delete and a
// compacted (__consumer_offsets-like) log; a reopened log keeps appending after it, and Kafka's
// DumpLogSegments (when its jars are given) finds the indexes consistent.
func TestCloseAppendsFinalTimeIndexEntry(t *testing.T) {
	for _, policy := range []string{"delete", "compact"} {
		t.Run(policy, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t-0")
			cfg := DefaultConfig()
			cfg.CleanupPolicy = policy
			cfg.IndexIntervalBytes = 1 << 20 // no entry while appending: only the final one
			open := func() *Log {
				l, err := OpenLog(OpenOptions{Dir: dir, Topic: "t", Config: cfg, CleanShutdown: true})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			l := open()
			const ts0 = int64(1_700_000_000_000)
			var maxTs, maxOff int64 = -1, -1
			for i := 0; i < 20; i++ {
				// Timestamps rise, except the last batch, which is older: the max stays at batch 18.
				ts := ts0 + int64(i)*10
				if i == 19 {
					ts = ts0
				}
				recs := []record.Record{{Key: []byte("k"), Value: []byte("v")}, {Key: []byte("k2"), Value: []byte("v"), TimestampDelta: 1}}
				info, err := l.Append(record.Build(nil, record.BuildOptions{BaseTimestamp: ts, ProducerID: -1, BaseSequence: -1}, recs))
				if err != nil {
					t.Fatal(err)
				}
				if info.MaxTimestamp > maxTs {
					maxTs, maxOff = info.MaxTimestamp, info.LastOffset
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			tiPath := filepath.Join(dir, segment.FileName(0, segment.TimeIndexSuffix))
			ts, off, n := lastTimeIndexEntry(t, tiPath, 0)
			if n != 1 || ts != maxTs || off != maxOff {
				t.Fatalf("after close: %d entries, last (%d, %d); want 1 entry (%d, %d)", n, ts, off, maxTs, maxOff)
			}
			// A second close of the reopened log adds nothing (the entry equals the last one),
			// and appends after a reopen continue the index.
			l = open()
			if got := l.Segments()[0].MaxTimestamp(); got != maxTs {
				t.Fatalf("reopened max timestamp %d, want %d", got, maxTs)
			}
			info, err := l.Append(record.Build(nil, record.BuildOptions{BaseTimestamp: maxTs + 100, ProducerID: -1, BaseSequence: -1}, []record.Record{{Key: []byte("k"), Value: []byte("v")}}))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			ts, off, n = lastTimeIndexEntry(t, tiPath, 0)
			if n != 2 || ts != maxTs+100 || off != info.LastOffset {
				t.Fatalf("after second close: %d entries, last (%d, %d); want 2 entries, last (%d, %d)", n, ts, off, maxTs+100, info.LastOffset)
			}
			l = open()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, n2 := lastTimeIndexEntry(t, tiPath, 0); n2 != 2 {
				t.Fatalf("a close with nothing appended changed the entries: %d", n2)
			}
			libs := os.Getenv("WEIR_KAFKA_LIBS")
			if libs == "" {
				return
			}
			out, err := exec.Command("java", "-cp", libs+"/*", "org.apache.kafka.tools.DumpLogSegments",
				"--files", tiPath).CombinedOutput()
			if err != nil {
				t.Fatalf("DumpLogSegments: %v\n%s", err, out)
			}
			want := "timestamp: " + strconv.FormatInt(maxTs+100, 10) + " offset: " + strconv.FormatInt(info.LastOffset, 10)
			if !strings.Contains(string(out), want) || strings.Contains(string(out), "Exception") {
				t.Fatalf("DumpLogSegments does not show %q:\n%s", want, out)
			}
		})
	}
}
