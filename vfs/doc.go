// Package vfs is the filesystem seam of the storage engine: the few file operations the segment
// and engine packages perform, behind an interface, so tests can inject faults.
//
// OS is the real implementation (Sync = fdatasync(2), SyncDir = fsync of the directory). On
// Linux a Sync that overlaps another runs as an AIO fdatasync (IOCB_CMD_FDSYNC) so the waiting
// goroutine does not hold a Go P for the duration of the disk flush (aio_linux.go). A
// BatchSyncer syncs several files at once (the engine's flusher of a log dir, one round): on Linux
// one io_submit on an AIO context of its own, one file synced by the caller meanwhile, one
// io_getevents for the rest, with no goroutine hand-off.
// FaultFS wraps another FS and can fail the next write, sync, open (FailNextOpen) or memory mapping
// (FailNextMap) with a chosen error, and simulate a
// crash: Crash() makes every handle opened before it fail, truncates each file back to the size it
// had at its last Sync (every unsynced byte is lost), and removes files created since their
// directory was last synced. A file renamed over one that existed durably (WriteFileAtomic) keeps
// its name through a crash, with the renamed file's synced bytes: the rename reached the disk, one
// of the two outcomes a real power loss allows. PowerOff is Crash for a process that is killed
// next: every later change through the FS fails with ErrCrashed.
//
// Standing faults, for a live process (internal/faultctl) as for tests, last until ClearFaults and
// apply to the paths containing a match string ("" = all): FailSyncs (every fdatasync and directory
// fsync fails, e.g. EIO), FailWrites (every write fails, e.g. ENOSPC), FailCreates (creating a file
// or growing one with Truncate fails, e.g. ENOSPC: a segment roll on a full disk), and Stall (every
// write and/or sync started within a duration waits until it has passed, then proceeds). Active
// reports them. Not covered: fallocate of a preallocated segment (segment/preallocate.go calls it
// on the descriptor) and the bytes of mmap'd indexes, which reach the disk outside this seam.
// FaultFS is safe for concurrent use; a stalled operation holds no lock of it.
//
// Index files are not opened through this seam's crash simulation: they are mmap'd, carry no
// checksum and are rebuilt from the log after an unclean shutdown, so a crash cannot make them lie.
// They are opened with OpenRaw and mapped with Map, which only consult the FS for injected faults.
//
// resource.go holds the one classification of errors the engine relies on: IsResourceExhausted
// (EMFILE, ENFILE, ENOMEM, EAGAIN) separates running out of descriptors, mappings or memory, which
// refuses one operation, from disk failures, which take a log dir offline. It also fixes the modes
// of what the broker creates (FileMode 0600, DirMode 0700).
package vfs
