package benchmarks

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// DirEnv names the environment variable that says where benchmarks put their files. Unset, they use
// b.TempDir(). Point it at the filesystem being judged: the raw-device baselines and the engine
// measured against them must share one directory, or the ratios compare two disks.
const DirEnv = "WEIR_BENCH_DIR"

var unsafeNameChars = regexp.MustCompile(`[^A-Za-z0-9._=-]+`)

// TB is the part of testing.TB that Dir uses. It is an interface of this package, not testing.TB,
// so that the load-generator library (which the weir binary links for `weir bench`) does not link
// the testing package; every *testing.B and *testing.T satisfies it.
type TB interface {
	Helper()
	Name() string
	TempDir() string
	Cleanup(func())
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Dir returns a fresh, empty directory for one benchmark: under $WEIR_BENCH_DIR when set (removed
// when the benchmark ends), else b.TempDir(). The first call logs the filesystem type, so that a
// run on tmpfs (where fdatasync costs nothing) cannot pass for a disk measurement.
func Dir(tb TB) string {
	tb.Helper()
	root := os.Getenv(DirEnv)
	if root == "" {
		dir := tb.TempDir()
		logFilesystem(tb, dir)
		return dir
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		tb.Fatalf("bench dir: %v", err)
	}
	dir, err := os.MkdirTemp(root, unsafeNameChars.ReplaceAllString(tb.Name(), "_")+"-")
	if err != nil {
		tb.Fatalf("bench dir: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	logFilesystem(tb, dir)
	return dir
}

var loggedFilesystem sync.Map // directory's parent -> true

// logFilesystem logs the filesystem type of dir's parent once per parent.
func logFilesystem(tb TB, dir string) {
	parent := filepath.Dir(dir)
	if _, seen := loggedFilesystem.LoadOrStore(parent, true); seen {
		return
	}
	tb.Logf("bench dir %s is on %s", parent, FilesystemType(dir))
}

// FilesystemType names the filesystem holding path (statfs magic), e.g. "ext4", "xfs", "tmpfs".
func FilesystemType(path string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4 (or ext2/3)"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs (fdatasync is free: not a disk measurement)"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return "statfs type 0x" + strconv.FormatUint(uint64(st.Type), 16)
}
