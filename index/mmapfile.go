package index

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"

	"github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/vfs"
)

// Errors returned by the indexes; callers match them with errors.Is (they are wrapped with the
// file and the refused values).
var (
	// ErrIndexFull: no slot is left; the segment rolls.
	ErrIndexFull = errors.New("index: full")
	// ErrNotMonotonic: the entry does not come after the last one.
	ErrNotMonotonic = errors.New("index: entry not increasing")
	// ErrOffsetOverflow: offset-base (or a position) does not fit a non-negative int32; the segment rolls.
	ErrOffsetOverflow = errors.New("index: offset does not fit int32 relative to base")
	// ErrCorruptIndex: SanityCheck found entries or a file length the index cannot have written;
	// the segment rebuilds the index from the log.
	ErrCorruptIndex = errors.New("index: corrupt")
	// ErrClosed: the index was used after Close.
	ErrClosed = errors.New("index: closed")
)

// mappedFile is what both index kinds share: a file of fixed-width entries, preallocated to its
// maximum size and mapped read-write once at open, and the atomically published entry count.
// It owns opening, growing, trimming, syncing, renaming and closing; the entry layouts and the
// ordering rules live in offset.go and time.go.
//
// It holds no file descriptor: the descriptor is closed as soon as the file is mapped (a mapping
// outlives its descriptor), as Kafka's AbstractIndex does, so an index costs one mapping and no
// descriptor. The rare operations that need one (growing or trimming the file, fdatasync) open the
// file by its current path for the call and check that it is still the file that was mapped (same
// device and inode); a file that was unlinked meanwhile is not touched (see withFile).
type mappedFile struct {
	kind       string // "offset index" or "time index", for messages
	entrySize  int
	baseOffset int64
	maxEntries int

	// mapping covers the first maxEntries*entrySize bytes of the file. It is mapped at open and
	// unmapped by Close, never remapped in between, so a reader holding it never sees it move.
	// Invariant: len(mapping) == maxEntries*entrySize.
	mapping mmap.MMap

	// entries is the number of valid entries. It is stored after the bytes of a new entry are
	// written, so a reader that loads n may read entries [0, n) without a lock.
	// Invariant: 0 <= entries <= maxEntries.
	entries atomic.Int64

	// life is held shared by Flush and exclusively by Close: a flush never sees the mapping or the
	// descriptor go away under it, and it does not block appends (they take only mu).
	life sync.RWMutex

	// mu serialises everything that changes entries or the file: appends, truncation, trimming,
	// renaming and closing. The segment already allows one appender at a time; mu makes the
	// appender safe against a concurrent roll (trim) or rename too.
	mu   sync.Mutex
	fsys vfs.FS
	path string // guarded by mu
	// dev and ino identify the mapped file; withFile refuses a file at path that is another one.
	dev, ino uint64
	// gone is set by Unlinked: the file was removed, so nothing is done to whatever has its name
	// now. Guarded by mu.
	gone bool
	// fileBytes is the file's current length. It equals len(mapping) after open (unless the file
	// was already longer) and after any append, and entries*entrySize after a trim.
	// Invariant: fileBytes >= entries*entrySize. Guarded by mu.
	fileBytes int64
	// openedBytes is the file's length when it was opened, and misaligned records that it was not
	// a multiple of entrySize. SanityCheck reports a misaligned index until it is emptied.
	// Guarded by mu.
	openedBytes int64
	misaligned  bool
	// closed is set by Close with both life and mu held; read it holding either.
	closed bool
}

// open opens or creates path, grows it to the index's maximum size and maps it. Existing entries
// are counted from the file's length; trailing all-zero entries, the unwritten preallocation of a
// file that was never trimmed, are not counted (see writtenEntries).
//
// With sealed (the index of an inactive segment, opened on first use) the file must exist and is
// mapped at its length, rounded down to whole entries, without growing it: the index is full and
// takes no append. An empty file is not mapped at all.
func (m *mappedFile) open(fsys vfs.FS, kind, path string, baseOffset int64, maxIndexBytes, entrySize int, sealed bool) (err error) {
	if fsys == nil {
		fsys = vfs.OS
	}
	m.kind, m.path, m.baseOffset, m.entrySize = kind, path, baseOffset, entrySize
	fail := func(err error) error { return fmt.Errorf("open %s %s: %w", kind, path, err) }

	flag := os.O_RDWR | os.O_CREATE
	if sealed {
		flag = os.O_RDWR
	}
	f, err := vfs.OpenRaw(fsys, path, flag, vfs.FileMode)
	if err != nil {
		return fail(err)
	}
	mapped := false
	defer func() {
		if !mapped {
			f.Close()
		}
	}()
	info, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	lengthBytes := info.Size()
	size := int64(entrySize)

	// The mapping is the configured maximum rounded down to whole entries (at least one entry).
	// A file already longer than that (the maximum was lowered since it was written) is mapped
	// whole so none of its entries is lost; it is then full and the segment rolls.
	mapBytes := max(int64(maxIndexBytes)/size*size, size, lengthBytes/size*size)
	if sealed {
		mapBytes = lengthBytes / size * size
	}
	if lengthBytes < mapBytes {
		if err := f.Truncate(mapBytes); err != nil {
			return fail(err)
		}
		m.fileBytes = mapBytes
	} else {
		m.fileBytes = lengthBytes
	}
	var mapping mmap.MMap
	if mapBytes > 0 {
		if mapping, err = vfs.Map(fsys, f, int(mapBytes), true); err != nil {
			return fail(err)
		}
	}
	// Lookups are binary searches: random access. Without MADV_RANDOM each fault reads around it
	// (read_ahead_kb, 8 MiB on some disks), so the probes of writtenEntries over an untrimmed
	// 10 MiB index after a crash pulled the whole file into the page cache and the process's RSS
	// (40 ms and 1.3 MiB of RssFile per partition measured at restart).
	_ = unix.Madvise(mapping, unix.MADV_RANDOM)
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		_ = mapping.Unmap()
		return fail(err)
	}
	written := dataBytes(f, lengthBytes, size) / size
	// The mapping outlives the descriptor: close it now (see mappedFile).
	mapped = true
	if err := f.Close(); err != nil {
		_ = mapping.Unmap()
		return fail(err)
	}
	m.fsys, m.mapping, m.dev, m.ino = fsys, mapping, uint64(st.Dev), uint64(st.Ino)
	m.maxEntries = int(mapBytes / size)
	m.openedBytes, m.misaligned = lengthBytes, lengthBytes%size != 0
	m.entries.Store(int64(writtenEntries(mapping, int(written), entrySize)))
	return nil
}

// dataBytes returns how much of the first length bytes of f may hold written entries: up to the
// first hole (SEEK_HOLE), rounded up to a whole entry. An index preallocated by growing the file
// (ftruncate) and never trimmed (a crash) is a few written pages followed by a hole of megabytes:
// counting its entries then probes only the written pages instead of faulting in zero pages of
// the hole. Entries are written in order from the start, so none lies past the first hole. A
// filesystem without SEEK_HOLE reports the file's length.
func dataBytes(f *os.File, length, entrySize int64) int64 {
	hole, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_HOLE)
	if err != nil || hole >= length {
		return length
	}
	return min((hole+entrySize-1)/entrySize*entrySize, length)
}

// writtenEntries returns how many of the first n entries of buf were written: n minus the trailing
// all-zero entries. After a clean shutdown the file was trimmed and its last entry is not zero, so
// this costs one probe. A file that was never trimmed (a crash) holds its written entries followed by
// zeros, and the first zero entry is found by binary search. No index can write an all-zero entry
// after its first one: the offset index's relative offsets and positions, and the time index's
// timestamps, strictly increase from non-negative values. A first entry of zeros followed only by
// zeros is dropped as well: it would point a scan at the base offset, the start of the segment,
// which is where a lookup on an empty index points it anyway.
func writtenEntries(buf []byte, n, entrySize int) int {
	zero := func(i int) bool {
		for _, b := range buf[i*entrySize : (i+1)*entrySize] {
			if b != 0 {
				return false
			}
		}
		return true
	}
	if n == 0 || !zero(n-1) {
		return n
	}
	lo, hi := 1, n-1 // the first zero entry after entry 0 is in [lo, hi]; entry n-1 is zero
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if zero(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo == 1 && zero(0) {
		return 0
	}
	return lo
}

// Mapped reports whether the index holds a mapping (an index opened sealed on an empty file does
// not).
func (m *mappedFile) Mapped() bool { return len(m.mapping) > 0 }

// BaseOffset returns the offset of the segment the index belongs to; entries store offsets relative
// to it.
func (m *mappedFile) BaseOffset() int64 { return m.baseOffset }

// Entries returns the number of entries. It may be called concurrently with appends.
func (m *mappedFile) Entries() int { return int(m.entries.Load()) }

// MaxEntries returns the number of entries the index can hold.
func (m *mappedFile) MaxEntries() int { return m.maxEntries }

// IsFull reports whether no entry can be appended.
func (m *mappedFile) IsFull() bool { return m.Entries() >= m.maxEntries }

// Path returns the index file's current path.
func (m *mappedFile) Path() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.path
}

// checkEntry panics unless i is the number of an entry among the n published.
func (m *mappedFile) checkEntry(i, n int) {
	if i < 0 || i >= n {
		panic(fmt.Sprintf("%s: entry %d out of range [0, %d)", m.kind, i, n))
	}
}

// errorfLocked wraps err with the index kind, path and what was being done. The caller holds mu.
func (m *mappedFile) errorfLocked(err error, format string, args ...any) error {
	return fmt.Errorf("%s %s: %s: %w", m.kind, m.path, fmt.Sprintf(format, args...), err)
}

// nextSlotLocked returns the number of the slot the next entry goes to, refusing a closed or full
// index. The caller validates the entry, calls coverSlotLocked, writes the slot and publishes it
// with setEntriesLocked. The caller holds mu.
func (m *mappedFile) nextSlotLocked() (int, error) {
	if m.closed {
		return 0, m.errorfLocked(ErrClosed, "append")
	}
	n := int(m.entries.Load())
	if n >= m.maxEntries {
		return 0, m.errorfLocked(ErrIndexFull, "append after %d entries", n)
	}
	return n, nil
}

// coverSlotLocked makes the file cover every slot of the mapping again after a trim: a write to a
// mapped page past the end of the file would be lost or fault. The caller holds mu.
func (m *mappedFile) coverSlotLocked() error {
	if m.fileBytes < int64(len(m.mapping)) {
		if err := m.withFileLocked(true, func(f *os.File) error { return f.Truncate(int64(len(m.mapping))) }); err != nil {
			return m.errorfLocked(err, "grow after trim")
		}
		m.fileBytes = int64(len(m.mapping))
	}
	return nil
}

// setEntriesLocked publishes n as the entry count. An index emptied this way has nothing left to
// distrust, so a misaligned length found at open is forgotten. The caller holds mu.
func (m *mappedFile) setEntriesLocked(n int) {
	m.entries.Store(int64(n))
	if n == 0 {
		m.misaligned = false
	}
}

// truncateLocked keeps the first keep entries (all of them if there are fewer). The caller holds mu.
func (m *mappedFile) truncateLocked(keep int) {
	if !m.closed {
		m.setEntriesLocked(min(keep, int(m.entries.Load())))
	}
}

// Reset removes every entry (before the segment rebuilds the index from its log). The file keeps
// its size; stale bytes past the entry count are overwritten by later appends.
func (m *mappedFile) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.truncateLocked(0)
}

// sanityCheckLengthLocked reports a file length that was not a whole number of entries when the
// index was opened. The caller holds mu.
func (m *mappedFile) sanityCheckLengthLocked() error {
	if m.misaligned {
		return m.errorfLocked(ErrCorruptIndex, "length %d at open is not a multiple of the entry size %d",
			m.openedBytes, m.entrySize)
	}
	return nil
}

// Flush writes the entries to disk: msync (MS_SYNC) of the written part of the mapping, then
// fdatasync of the file. Appends may continue while it runs; entries published before the call are
// durable when it returns.
func (m *mappedFile) Flush() error {
	m.life.RLock()
	defer m.life.RUnlock()
	if m.closed {
		return m.errorf(ErrClosed, "flush")
	}
	// msync needs a page-aligned start (the mapping's is) and rounds the length up itself.
	if used := int(m.entries.Load()) * m.entrySize; used > 0 {
		if err := unix.Msync(m.mapping[:used], unix.MS_SYNC); err != nil {
			return m.errorf(err, "msync")
		}
	}
	// The path is read under mu, the sync runs without it (appends are not blocked by the I/O).
	m.mu.Lock()
	path, gone := m.path, m.gone
	m.mu.Unlock()
	if err := m.withFile(path, gone, false, func(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }); err != nil {
		return m.errorf(err, "fdatasync")
	}
	return nil
}

// errFileReplaced: the index's path names another file than the one mapped.
var errFileReplaced = errors.New("file at the path is not the mapped one")

// withFileLocked opens the mapped file by its current path for one call of fn (growing, trimming
// or syncing it). When the file was removed (Unlinked, or not found), nothing is done: there is
// nothing left to grow, trim or make durable, unless must is set (an append needs the file to
// cover its slot), which fails. A file at the path that is not the mapped one (another index
// created under the same name) is never touched. The caller holds mu.
func (m *mappedFile) withFileLocked(must bool, fn func(*os.File) error) error {
	return m.withFile(m.path, m.gone, must, fn)
}

// withFile is withFileLocked for a path and gone flag read under mu.
func (m *mappedFile) withFile(path string, gone, must bool, fn func(*os.File) error) error {
	if gone {
		if must {
			return fs.ErrNotExist
		}
		return nil
	}
	f, err := vfs.OpenRaw(m.fsys, path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) && !must {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if uint64(st.Dev) != m.dev || uint64(st.Ino) != m.ino {
		if must {
			return errFileReplaced
		}
		return nil
	}
	if err := fn(f); err != nil {
		return err
	}
	return f.Close()
}

// Unlinked records that the index file was removed (the segment deleted its files): later trims
// and syncs do nothing, and nothing is ever done to a file created under the same name.
func (m *mappedFile) Unlinked() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gone = true
}

// errorf is errorfLocked for callers that do not hold mu.
func (m *mappedFile) errorf(err error, format string, args ...any) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.errorfLocked(err, format, args...)
}

// TrimToValidSize truncates the file to the written entries (on roll and close), so that it reopens
// with entries = size / entry size. The mapping is kept: readers only touch written entries, and the
// next append grows the file back first.
//
// A Lookup that loaded the entry count before a TruncateTo may still be reading dropped entries; a
// trim must not shrink the file under such a lookup, whose read would fault past the end of the
// file. The segment trims on roll and close, not right after truncating a segment that is being read.
func (m *mappedFile) TrimToValidSize() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return m.errorfLocked(ErrClosed, "trim")
	}
	return m.trimLocked()
}

// trimLocked truncates the file to entries*entrySize. The caller holds mu.
func (m *mappedFile) trimLocked() error {
	valid := m.entries.Load() * int64(m.entrySize)
	if m.fileBytes == valid {
		return nil
	}
	if err := m.withFileLocked(false, func(f *os.File) error { return f.Truncate(valid) }); err != nil {
		return m.errorfLocked(err, "trim to %d bytes", valid)
	}
	m.fileBytes = valid
	return nil
}

// Close trims the file to the written entries, unmaps it and closes it. It is idempotent. No Lookup
// may run during or after Close; one that does anyway sees an empty index.
func (m *mappedFile) Close() error {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	errTrim := m.trimLocked()
	m.entries.Store(0)
	var errUnmap error
	if len(m.mapping) > 0 {
		if err := m.mapping.Unmap(); err != nil {
			errUnmap = m.errorfLocked(err, "unmap")
		}
	}
	m.mapping = nil
	return errors.Join(errTrim, errUnmap)
}

// Delete closes the index and removes its file. A file that is already gone is not an error.
func (m *mappedFile) Delete() error {
	errClose := m.Close()
	m.Unlinked()
	path := m.Path()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errors.Join(errClose, fmt.Errorf("delete %s %s: %w", m.kind, path, err))
	}
	return errClose
}

// Rename moves the index file to newPath (when segments are swapped or marked for deletion). The
// mapping stays valid and later trims and syncs use the new path; it may be called on a closed index.
func (m *mappedFile) Rename(newPath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := os.Rename(m.path, newPath); err != nil {
		return fmt.Errorf("rename %s %s: %w", m.kind, m.path, err)
	}
	m.path = newPath
	return nil
}
