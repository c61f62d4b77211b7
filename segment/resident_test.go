package segment_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-mq/weir/segment"
)

// mappedRSS returns the resident KiB of the process's mappings of path (/proc/self/smaps).
func mappedRSS(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in, kb := false, 0
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && fields[5] == path
			continue
		}
		if in && len(fields) >= 2 && fields[0] == "Rss:" {
			v, _ := strconv.Atoi(fields[1])
			kb += v
		}
	}
	return kb
}

// Reads through the active segment's mapping (offset translation at the tail, as fetches and the
// high watermark do) do not leave the whole written segment in the process's RSS: the appender
// releases the pages behind the tail.
func TestActiveMappingPagesLeaveRSS(t *testing.T) {
	const total = 8 << 20
	s := segCreate(t, t.TempDir(), 0, segment.Config{IndexIntervalBytes: 4096, MaxIndexBytes: 1 << 20, ActiveMapBytes: 16 << 20})
	defer s.Close()
	next := int64(0)
	for s.Size() < total {
		b, h := segBatch(next, 4, 1000, 1_700_000_000_000)
		segAppend(t, s, b, h)
		if _, _, found, err := s.TranslateOffset(h.LastOffset()); err != nil || !found {
			t.Fatalf("translate %d: found %v, %v", h.LastOffset(), found, err)
		}
		next = h.NextOffset()
	}
	rss := mappedRSS(t, s.LogPath())
	t.Logf("resident %d KiB of the mapping after writing and reading %d MiB", rss, total>>20)
	if rss > 2<<10 {
		t.Fatalf("%d KiB of the active segment's mapping resident, want at most 2 MiB", rss)
	}
}

// A reader going through a sealed segment (offset translations from its start to its end, as a
// consumer catching up fetches) does not leave the pages of the headers it read in the process's
// RSS: they are released as the reader moves on.
func TestSealedMappingScannedPagesLeaveRSS(t *testing.T) {
	const total = 16 << 20
	s := segCreate(t, t.TempDir(), 0, segment.Config{IndexIntervalBytes: 4096, MaxIndexBytes: 1 << 20})
	defer s.Close()
	next := int64(0)
	var lasts []int64
	for s.Size() < total {
		b, h := segBatch(next, 4, 4000, 1_700_000_000_000) // about 16 KiB per batch
		segAppend(t, s, b, h)
		lasts = append(lasts, h.LastOffset())
		next = h.NextOffset()
	}
	if err := s.MarkInactive(); err != nil {
		t.Fatal(err)
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	for _, off := range lasts {
		if _, _, found, err := s.TranslateOffset(off); err != nil || !found {
			t.Fatalf("translate %d: found %v, %v", off, found, err)
		}
	}
	rss := mappedRSS(t, s.LogPath())
	t.Logf("resident %d KiB of the sealed segment's mapping after reading %d MiB of it through", rss, total>>20)
	if rss > 2<<10 {
		t.Fatalf("%d KiB of the sealed segment's mapping resident, want at most 2 MiB", rss)
	}
}
