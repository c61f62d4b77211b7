// Package segment owns one log segment: <baseOffset %020d>.log with its .index and .timeindex,
// byte-compatible with Apache Kafka.
//
// The .log holds RecordBatch v2 batches exactly as received, offsets already assigned (see package
// record). Appends write at the end with pwrite; an append returns once the bytes are in the page
// cache. A Sync returns once every earlier append is fdatasync'd. An index entry is added when more
// than IndexIntervalBytes were appended since the last one: it points at the start of the appended
// batch and names the batch's last offset; the time index gets (max timestamp so far, offset of that
// timestamp) at the same moments, and once more when the segment rolls and when it is closed (AppendFinalTimeIndexEntry), as Kafka does.
//
// Reads never copy record bytes: Slice returns {file, position, length} for sendfile. Offset
// translation is an index lookup followed by a short forward scan of batch headers. Header reads
// go through a read-only mapping of the .log (mmap-go, MADV_RANDOM) made on first use (for the
// active segment, the first offset translation; single header reads use pread until then): a sealed
// segment is mapped at its size, the active one at Config.ActiveMapBytes (the engine passes
// segment.bytes, so the mapping covers every later append; reads stop at the published size and
// never touch pages past the end of the file). A truncation or the segment becoming inactive
// retires the mapping and the next read maps again. Reads use pread instead when ActiveMapBytes
// is 0 (active segment), past the end of the mapping, when the read-mapping limit is reached, or
// when mapping fails. Reads through a mapping are fault-protected (a truncation racing a read
// yields an error, never a SIGBUS crash). The mapping's pages are kept out of the process's RSS
// unless a read needs them: every MiB appended, the appender releases (MADV_DONTNEED) the pages of
// the active mapping below the last 256 KiB, and a retired mapping's pages are released at once.
//
// Recover walks every batch from position 0, checks length, magic, CRC32C and offset order,
// truncates the file at the first bad or torn batch and rebuilds both indexes; RecoverTail also
// says whether what it cut was only zeros. RecoverTailFrom(recovery point) checks only the headers
// of the batches wholly below the recovery point (flushed before it was checkpointed) and the CRC
// of the rest.
//
// Preallocation (preallocate.go, Config.PreallocateBytes): a new .log is made segment.bytes long
// (fallocate, else ftruncate) and trimmed to its logical size at roll (MarkInactive) and close;
// Size is always the logical size. After a crash the zeros after the last batch are cut by
// recovery like a torn tail, reported as a zero tail.
//
// Lifetime: a Segment is reference counted. Its Log holds one reference; a reader Acquires one
// before using the segment (a returned Slice holds one, and a pin on the .log's descriptor, until
// Release). Close, Delete and
// RenameDeleted drop the Log's reference; files are unmapped and closed when the last reference
// goes. Delete unlinks at once; RenameDeleted renames the files <name>.deleted for the caller to
// remove later (file.delete.delay.ms); either way open descriptors stay valid.
//
// Resources: an open segment holds at most DescriptorsPerSegment (1, the .log: index descriptors
// are closed once mapped, as Kafka's) descriptors and IndexMappingsPerSegment (2) mappings, plus
// its read mapping once made; a segment opened with OpenSealed maps its indexes only at a reader's
// first lookup (lazyindex.go, Kafka's LazyIndex). A settled segment (inactive and durable: opened
// sealed, or rolled and sealed; or an active one that is durable and idle: Settle when its log is
// opened, SettleIfIdle called by the engine each second; the next Append, roll or truncation
// takes it back) holds its .log descriptor and its index mappings only while two
// process-wide CLOCK caches keep them (fdcache.go: SetLogDescriptorCacheSize,
// SetIndexMappingCacheSize, SetCeilings, EvictIdle). Under pressure (the segments being written
// hold more than three quarters of a ceiling: Pressure signals) an active segment settles as
// soon as it is synced (SettleIfSynced, called by the engine), and opening a descriptor or
// mapping indexes past a ceiling first evicts from the caches, so bursts of writes to more
// partitions than descriptors stay within the ceilings. Readers pin what they use (a Slice pins the
// descriptor until Release, a lookup pins the indexes), and an evicted descriptor or mapping goes
// with its last pin. Usage reports what the process's segments hold and Reclaimable what the caches
// could give back (the engine's budget checks both), and SetReadMappingLimit makes reads use
// pread rather than map past a limit. A segment being created that cannot be completed (no
// descriptor or mapping left) is closed and its files removed, so the create can be retried. Files
// are created with vfs.FileMode (0600).
//
// Aborted transactions (txnindex.go): <base>.txnindex in Kafka's format (34-byte entries:
// version, producer id, first offset, last offset = the ABORT marker's, last stable offset),
// created at the segment's first aborted transaction, held in memory once read, written by
// AppendAbortedTxn, made durable by Sync, cut by TruncateTo and recovery, renamed and deleted with
// the segment's other files; it holds no descriptor between uses. CollectAbortedTxns answers a
// read_committed fetch.
//
// Compaction (swap.go): a cleaner builds a segment under <name>.cleaned (CreateCleaned,
// AppendCleaned), renames its files to .swap and then to the plain names (RenameFiles, the .log
// last); OpenSwap reopens a .swap left by a crash. Delete removes the files under the names they
// have at the time.
//
// Concurrency: Append, Seal, TruncateTo and Recover are called by one goroutine at a time (the
// Log's append lock); readers (TranslateOffset, Slice, ReadHeaderAt, Size, NextOffset) run
// concurrently with them and see the size published after each append.
package segment
