package clock_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// wallRead matches a read of the system's wall clock that bypasses this package: a wall
// reading taken from time.Now (Unix*, UTC, Format, Round, or after an Add), or time.Now passed
// as a clock. time.Now() itself, time.Since, time.Until and Sub are fine: they use Go's
// monotonic reading.
var wallRead = regexp.MustCompile(`time\.Now\(\)(\.Add\([^)]*\))?\.(Unix|UnixMilli|UnixMicro|UnixNano|UTC|Format|Round|Truncate)\(|[=:,(]\s*time\.Now\s*($|[,)}])`)

// wallReadAllowed are the directories (module-relative, with their subdirectories) and files
// that are not the broker: client tools, load generators, test harnesses, test certificates,
// and record's test encoder, which stamps CreateTime as a client would (and sits in layer 0 with
// this package, so it cannot import it).
var wallReadAllowed = []string{
	"cmd/", "scripts/", "benchmarks/", "internal/testcluster/", "internal/faults/", "netio/testcert/",
	"record/build.go", "internal/clock/clock.go",
}

// TestBrokerReadsTheWallClockOnlyThroughThisPackage: every wall-clock reading of the broker comes
// from clock.Now, so that the fault control's steps reach all of them, and every elapsed-time
// rule uses a monotonic reading (time.Since, Sub of time.Now values, clock.Nanotime), so that a
// real wall-clock step (which moves time.Now's wall reading) cannot stretch or shrink it.
func TestBrokerReadsTheWallClockOnlyThroughThisPackage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		for _, a := range wallReadAllowed {
			if strings.HasPrefix(rel, a) {
				return nil
			}
		}
		files++
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if c := strings.Index(line, "//"); c >= 0 {
				line = line[:c]
			}
			if wallRead.MatchString(line) {
				t.Errorf("%s:%d: %s: a wall-clock read outside internal/clock (use clock.Now for a timestamp, time.Since/Sub or clock.Nanotime for elapsed time)", rel, n, strings.TrimSpace(line))
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d files checked: is the module root %s?", files, root)
	}
}
