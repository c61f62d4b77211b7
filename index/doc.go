// Package index owns the sparse indexes of one log segment, byte-compatible with Apache Kafka's.
//
// Offset index (<base>.index): 8-byte entries, big-endian
//
//	int32 relativeOffset (offset - segment base) | int32 position (byte offset of a batch in the .log)
//
// Time index (<base>.timeindex): 12-byte entries, big-endian
//
//	int64 timestamp (max timestamp seen so far in the segment) | int32 relativeOffset
//
// Files are preallocated to log.index.size.max.bytes (rounded down to a whole entry, at least one)
// and mmap'd read-write (MADV_RANDOM: no read-around on a fault) with github.com/edsrzf/mmap-go, opened (0600) and mapped through vfs.OpenRaw
// and vfs.Map so tests can inject EMFILE or ENOMEM. The descriptor is closed once the file is
// mapped (as Kafka's indexes do): an open index holds one mapping and no descriptor. Growing,
// trimming and fdatasync open the file by its current path for the call, and act only on the file
// that was mapped (same device and inode; a removed file is left alone). TrimToValidSize truncates the file to the
// written entries; it is called on roll and close, so a cleanly shut down index re-opens with
// entries = size / entrySize and is never rebuilt. An index that was not trimmed (a crash) re-opens
// without its trailing all-zero entries, the unwritten preallocation: no index writes an all-zero
// entry after its first. A file longer than the configured maximum (the maximum was lowered) is
// mapped whole and is full. Indexes carry no checksum: after a crash the segment rebuilds them from
// the log, and SanityCheck (a cheap look at the last entries and the file length, as in Kafka) tells
// it when a cleanly closed index must be rebuilt too.
//
// Invariants: entries are strictly increasing (offset index: relative offset and position; time
// index: timestamp strictly increasing, relative offset non-decreasing); a non-monotonic append
// (ErrNotMonotonic), an offset that does not fit a non-negative int32 relative to the base
// (ErrOffsetOverflow), or a full index (ErrIndexFull) is refused with a typed, wrapped error (the
// segment rolls). The time index keeps its last slot for the final entry of a segment (Kafka's
// TimeIndex.isFull: full one entry early; MaybeAppend with skipFullCheck may use it). The time index ignores, without error, a timestamp not above the last one (Kafka's
// maybeAppend). The entry count is published atomically after the entry bytes are written: readers
// search [0, n) without a lock. The mapping is never remapped while the index is open;
// TrimToValidSize shrinks the file but keeps the mapping, the next append grows the file back to the
// mapped size first, and readers never touch entries beyond n.
//
// Lookups return the last entry <= the target (the time index's LookupBefore: < the target), or the
// base (offset index: position 0; time index: timestamp -1) if there is none. They search the last
// 8 KiB of entries first, as Kafka does, so that lookups near the head stay on resident pages; they
// do not allocate.
//
// Concurrency: one appender at a time (the segment's append lock); Append, TruncateTo, Reset,
// TrimToValidSize and Rename are also serialised by the index's own mutex. Any number of concurrent
// Lookup, Entry, Entries and LastOffset/LastEntry calls. Flush may run alongside appends (it does not
// block them). A lookup that began before a TruncateTo may still return a dropped entry; a trim must
// not shrink the file under such a lookup, so the segment does not trim right after truncating a
// segment that is being read. Close must only be called once no reader can use the index; after
// Close, appends and flushes fail with ErrClosed.
package index
