package segment

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"

	"github.com/edsrzf/mmap-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/index"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/vfs"
)

// Sync fdatasyncs the .log (and the .txnindex when it changed): every byte appended before the
// call is durable when it returns.
func (s *Segment) Sync() error {
	seq := s.appendSeq.Load()
	if err := s.withLog(func(f vfs.File) error { return f.Sync() }); err != nil {
		return fmt.Errorf("sync segment %s: %w", s.name, err)
	}
	if err := s.syncTxn(); err != nil {
		return err
	}
	if seq > s.syncedSeq.Load() { // syncs of one segment do not overlap (the flusher's)
		s.syncedSeq.Store(seq)
	}
	return nil
}

// Settle settles a segment whose bytes are all durable, with no appender running (the log being
// opened): its descriptor and index mappings go to the caches (fdcache.go) until an append, roll or
// truncation takes them back.
func (s *Segment) Settle() {
	s.idleSeq.Store(s.appendSeq.Load())
	s.syncedSeq.Store(s.appendSeq.Load())
	s.settle()
}

// SettleIfIdle settles the active segment when nothing was appended to it since the previous call
// and everything appended before is durable (synced): an idle partition's .log descriptor and
// index mappings then count against the caches like an inactive segment's (fdcache.go), so a
// process may hold more partitions than descriptors. The next Append, roll or truncation takes
// them back. The caller excludes the appender (the engine holds the log's append lock) and calls
// it periodically from one goroutine; it reports whether it settled.
func (s *Segment) SettleIfIdle() bool {
	if s.sealed.Load() {
		return false
	}
	if s.settled.Load() {
		// Settled under descriptor pressure (SettleIfSynced) with its indexes kept out of their
		// cache: idle now, they go there too.
		if s.idxHeld.Swap(false) {
			s.settleKinds(false, true)
		}
		return false
	}
	seq := s.appendSeq.Load()
	if prev := s.idleSeq.Swap(seq); prev != seq || s.syncedSeq.Load() != seq || s.refs.Load() <= 0 {
		return false
	}
	s.settle()
	if s.appendSeq.Load() != seq { // an append raced: it may not have seen settled
		s.unsettle()
		return false
	}
	return true
}

// SettleIfSynced settles the active segment when everything appended to it is durable (synced),
// however recently it was written: the engine calls it under descriptor or mapping pressure
// (Pressure), so that a burst of writes to more partitions than the ceilings allow does not hold a
// descriptor and two index mappings for each of them until they go idle (SettleIfIdle). The next
// Append takes them back (opening the .log and mapping the indexes again when the caches evicted
// them). As SettleIfIdle, the caller excludes the appender; it reports whether it settled.
//
// Only the kinds under pressure go to their caches (both when neither is): under descriptor
// pressure the index pair stays mapped outside its cache, since evicting a writable pair trims
// both index files (two ftruncates, on the produce path of a burst) for no mapping it needed
// back; SettleIfIdle hands it to its cache once the segment is idle.
func (s *Segment) SettleIfSynced() bool {
	if s.settled.Load() || s.sealed.Load() {
		return false
	}
	seq := s.appendSeq.Load()
	if s.syncedSeq.Load() != seq || s.refs.Load() <= 0 {
		return false
	}
	fds, maps := pressureKinds()
	if !fds && !maps {
		fds, maps = true, true
	}
	s.idxHeld.Store(!maps)
	s.settleKinds(fds, maps)
	if s.appendSeq.Load() != seq {
		s.unsettle()
		return false
	}
	return true
}

// IsSettled reports whether the segment is settled (its descriptor and index mappings are the
// caches' to evict).
func (s *Segment) IsSettled() bool { return s.settled.Load() }

// MarkInactive is called by the log's appender when the segment stops being the active one: the
// time index gets its final entry (max timestamp so far) and a preallocated .log is trimmed to its
// logical size, as Kafka's onBecomeInactiveSegment does.
// Reads switch to the read-only mapping.
func (s *Segment) MarkInactive() error {
	s.unsettle() // an idle active segment rolled by time
	if err := s.AppendFinalTimeIndexEntry(); err != nil {
		return err
	}
	if err := s.trimPreallocated(); err != nil { // as Kafka's onBecomeInactiveSegment trims
		return err
	}
	s.retireMapping()
	s.sealed.Store(true)
	return nil
}

// AppendFinalTimeIndexEntry appends (max timestamp so far, offset of it) to the time index when it
// differs from the last entry, as Kafka's LogSegment does at roll (onBecomeInactiveSegment) and
// at close: TimeIndex.maybeAppend with skipFullCheck, so a full index still takes the entry when
// it only repeats the last one. Without it the last entry of a segment may lag its largest
// timestamp (entries are added only every index.interval.bytes), and a reader of the files
// (Kafka opening the dir, time retention after a restart) would see an older largest timestamp.
// Called by the appender (or with no appender left, at close).
func (s *Segment) AppendFinalTimeIndexEntry() error {
	ts := s.maxTimestamp.Load()
	if ts == record.NoTimestamp {
		return nil
	}
	if s.sealed.Load() {
		return nil // an inactive segment got its final entry when it rolled
	}
	// The active segment's indexes may have been evicted, or mapped read-only by a reader since
	// (fdcache.go): the entry goes into writable ones.
	p, err := s.writableIndexes()
	if err != nil {
		return fmt.Errorf("final time index entry of %s: %w", s.name, err)
	}
	if err := p.time.MaybeAppend(ts, s.offsetOfMaxTimestamp, true); err != nil && !errors.Is(err, index.ErrIndexFull) {
		return fmt.Errorf("final time index entry of %s: %w", s.name, err)
	}
	return nil
}

// Seal makes an inactive segment durable: fdatasync of the .log, indexes trimmed to their
// written size and synced. The directory sync is the caller's (one per roll batch).
func (s *Segment) Seal() error {
	// A preallocated active segment sealed at close is trimmed before the sync makes its size
	// durable (a rolled one was trimmed by MarkInactive).
	if err := s.trimPreallocated(); err != nil {
		return err
	}
	if err := s.Sync(); err != nil {
		return err
	}
	p := s.pinMappedIndexes()
	if p == nil {
		s.settleIfSealed()
		return nil // never mapped since it was opened sealed: nothing changed
	}
	defer p.unpin()
	if err := p.offset.TrimToValidSize(); err != nil {
		return fmt.Errorf("seal segment %s: %w", s.name, err)
	}
	if err := p.time.TrimToValidSize(); err != nil {
		return fmt.Errorf("seal segment %s: %w", s.name, err)
	}
	if err := p.offset.Flush(); err != nil {
		return fmt.Errorf("seal segment %s: %w", s.name, err)
	}
	if err := p.time.Flush(); err != nil {
		return fmt.Errorf("seal segment %s: %w", s.name, err)
	}
	s.settleIfSealed()
	return nil
}

// settleIfSealed settles an inactive segment once Seal made it durable: from then on its
// descriptor and index mappings may be evicted (fdcache.go). The active segment sealed at close
// stays unsettled.
func (s *Segment) settleIfSealed() {
	if s.sealed.Load() {
		s.settle()
	}
}

// retireMapping stops reads from using the current mapping (it stays mapped until the files close,
// since a reader may still be inside it).
func (s *Segment) retireMapping() {
	s.mapOnce.Lock()
	defer s.mapOnce.Unlock()
	if m := s.mapping.Swap(nil); m != nil {
		// Its pages leave the process's RSS now (a reader still inside faults back what it reads).
		_ = unix.Madvise(*m, unix.MADV_DONTNEED)
		s.retired = append(s.retired, *m)
	}
}

// LoadTail restores the append state of a segment opened after a clean shutdown without scanning
// it whole: the max timestamp comes from the time index's last entry, then the batches after the
// last offset index entry are walked to find the next offset.
func (s *Segment) LoadTail() error {
	p, err := s.writableIndexes()
	if err != nil {
		return fmt.Errorf("load tail: %w", err)
	}
	if ts, off := p.time.LastEntry(); ts != record.NoTimestamp {
		s.maxTimestamp.Store(ts)
		s.offsetOfMaxTimestamp = off
	}
	_, pos := p.offset.Lookup(p.offset.LastOffset())
	next := s.baseOffset
	if p.offset.Entries() > 0 {
		next = p.offset.LastOffset() + 1
	}
	if h, err := s.ReadHeaderAt(0); err == nil {
		s.firstBatchTimestamp = h.MaxTimestamp
	}
	for {
		h, err := s.ReadHeaderAt(pos)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("load tail of %s: %w", s.name, err)
		}
		if h.MaxTimestamp > s.maxTimestamp.Load() {
			s.maxTimestamp.Store(h.MaxTimestamp)
			s.offsetOfMaxTimestamp = h.LastOffset()
		}
		next = h.NextOffset()
		pos += h.Size()
	}
	if pos != s.size.Load() {
		return fmt.Errorf("load tail of %s: batches end at %d, file at %d: %w", s.name, pos, s.size.Load(), kerr.CorruptMessage)
	}
	s.nextOffset.Store(next)
	return nil
}

// Recover rebuilds the segment from its .log: every batch is checked (length, magic, CRC32C,
// offsets increasing from the base); the file is truncated at the first bad or torn batch and
// both indexes are rebuilt. It returns the number of bytes truncated.
func (s *Segment) Recover() (truncated int64, err error) {
	r, err := s.RecoverTail()
	return r.Truncated, err
}

// RecoverResult is what a recovery cut from the end of a .log.
type RecoverResult struct {
	// Truncated is the number of bytes cut after the last valid batch.
	Truncated int64
	// ZeroTail reports that every byte cut was zero: the unused end of a preallocated segment
	// (preallocate) that a crash left untrimmed, not a torn or corrupt batch.
	ZeroTail bool
	// Checked is the number of bytes kept whose CRC was checked: the batches at or past the
	// recovery point (RecoverTailFrom). Zero with nothing truncated means the segment holds only
	// flushed bytes, already durable.
	Checked int64
}

// checkStored is record.CheckStored for a batch whose last offset is at or past flushed; below it
// only the header is checked (the batch was durable before the recovery point was written).
func checkStored(b []byte, flushed int64) (record.Header, error) {
	h, err := record.ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.LastOffset() >= flushed {
		return record.CheckStored(b)
	}
	if h.Magic != record.CurrentMagic || h.LastOffsetDelta < 0 ||
		h.BatchLength < record.HeaderSize-record.LogOverhead || int64(h.BatchLength)+record.LogOverhead > int64(len(b)) {
		return record.CheckStored(b) // the full check names what is wrong
	}
	return h, nil
}

// RecoverTail is Recover, also saying whether the bytes cut were only zeros.
func (s *Segment) RecoverTail() (res RecoverResult, err error) {
	return s.RecoverTailFrom(s.baseOffset)
}

// RecoverTailFrom is RecoverTail for a log whose recovery point is flushed: the batches wholly
// below it were made durable (fdatasync) before the recovery point was checkpointed, so only
// their headers are checked (length, magic, offsets increasing: the walk and the rebuilt indexes
// need them), not their CRC; the batches from the one holding flushed on are checked whole.
// Kafka recovers the segment holding the recovery point whole; after a crash of a broker with
// large active segments this reads and checksums only what was written after the last flush.
func (s *Segment) RecoverTailFrom(flushed int64) (res RecoverResult, err error) {
	if err := s.holdLog(); err != nil {
		return res, fmt.Errorf("recover %s: %w", s.name, err)
	}
	st, err := s.ownFile().Stat()
	if err != nil {
		return res, fmt.Errorf("recover %s: %w", s.name, err)
	}
	fileSize := st.Size()
	p, err := s.writableIndexes()
	if err != nil {
		return res, fmt.Errorf("recover: %w", err)
	}
	s.retireMapping()
	p.offset.Reset()
	p.time.Reset()
	s.maxTimestamp.Store(record.NoTimestamp)
	s.offsetOfMaxTimestamp = s.baseOffset
	s.firstBatchTimestamp = record.NoTimestamp
	s.firstBatchMaxTs.Store(firstTsUnknown)
	s.bytesSinceLastIndexEntry = 0
	s.residentCheckedAt = 0

	var m mmap.MMap
	if fileSize > 0 {
		m, err = mmap.MapRegion(s.ownFile().OS(), int(fileSize), mmap.RDONLY, 0, 0)
		if err != nil {
			return res, fmt.Errorf("recover %s: map: %w", s.name, err)
		}
		defer m.Unmap()
	}
	pos, next := int64(0), s.baseOffset
	for pos < fileSize {
		h, err := checkStored(m[pos:], flushed)
		if err != nil || h.BaseOffset < next {
			break
		}
		if h.LastOffset() >= flushed {
			res.Checked += h.Size()
		}
		if h.LastOffset()-s.baseOffset > math.MaxInt32 {
			break // offsets this segment's indexes cannot name
		}
		// A full index does not end the valid data: the rebuilt entries need not fall where
		// they did when the batches were appended (the byte count restarts after a reopen or a
		// truncation), so a rebuild may fill the index before the end. Such batches get no entry.
		if err := s.indexBatch(&h, pos); err != nil && !errors.Is(err, index.ErrIndexFull) {
			break
		}
		pos += h.Size()
		next = h.NextOffset()
	}
	if pos < fileSize {
		res.ZeroTail = allZero(m[pos:fileSize])
		if err := s.ownFile().Truncate(pos); err != nil {
			return res, fmt.Errorf("recover %s: truncate to %d: %w", s.name, pos, err)
		}
	}
	s.preallocated.Store(false)
	s.size.Store(pos)
	s.nextOffset.Store(next)
	res.Truncated = fileSize - pos
	// Aborted transactions whose marker did not survive leave the .txnindex (the log replays
	// the markers past its recovery point and adds back any entry missing).
	if err := s.truncateTxn(next); err != nil {
		return res, fmt.Errorf("recover %s: %w", s.name, err)
	}
	return res, nil
}

// TruncateTo removes every batch whose last offset is >= offset (a batch holding offset goes
// whole). It returns the new next offset of the segment.
func (s *Segment) TruncateTo(offset int64) (int64, error) {
	if err := s.holdLog(); err != nil { // the segment may become the active one again
		return 0, fmt.Errorf("truncate %s to %d: %w", s.name, offset, err)
	}
	pos, h, found, err := s.TranslateOffset(offset)
	if err != nil {
		return 0, fmt.Errorf("truncate %s to %d: %w", s.name, offset, err)
	}
	// The segment becomes the active one again: reads go back to pread, appends follow.
	s.retireMapping()
	s.sealed.Store(false)
	if !found {
		return s.nextOffset.Load(), nil
	}
	s.size.Store(pos)
	s.residentCheckedAt = pos
	s.firstBatchMaxTs.Store(firstTsUnknown)
	s.preallocated.Store(false) // the truncation drops the preallocated end too
	if err := s.ownFile().Truncate(pos); err != nil {
		return 0, fmt.Errorf("truncate %s to %d: %w", s.name, pos, err)
	}
	p, err := s.writableIndexes()
	if err != nil {
		return 0, fmt.Errorf("truncate %s to %d: %w", s.name, offset, err)
	}
	p.offset.TruncateTo(h.BaseOffset)
	p.time.TruncateTo(h.BaseOffset)
	if err := s.truncateTxn(h.BaseOffset); err != nil {
		return 0, err
	}
	s.maxTimestamp.Store(record.NoTimestamp)
	s.offsetOfMaxTimestamp = s.baseOffset
	s.bytesSinceLastIndexEntry = 0
	if err := s.LoadTail(); err != nil {
		return 0, err
	}
	return s.nextOffset.Load(), nil
}

// Close appends the time index's final entry (AppendFinalTimeIndexEntry, as Kafka's
// LogSegment.close does; a failure is returned after the rest is done), trims a preallocated .log
// and the indexes and
// drops the owner's reference (files close with the last reader).
func (s *Segment) Close() error {
	finalErr := s.AppendFinalTimeIndexEntry()
	if err := s.trimPreallocated(); err != nil && finalErr == nil { // Kafka's FileRecords.close
		finalErr = err
	}
	var err error
	if p := s.pinMappedIndexes(); p != nil {
		err = p.offset.TrimToValidSize()
		if err2 := p.time.TrimToValidSize(); err == nil {
			err = err2
		}
		p.unpin()
	}
	s.Release()
	if err != nil {
		return fmt.Errorf("close segment %s: %w", s.name, err)
	}
	return finalErr
}

// Delete unlinks the segment's files and drops the owner's reference. Readers holding a
// reference keep reading from the open descriptors.
func (s *Segment) Delete() error {
	// Readers still holding the segment keep reading the unlinked file through its descriptor:
	// reopen it now if it was evicted, and keep it until the last reference goes.
	_ = s.holdLog()
	var firstErr error
	for _, suffix := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
		p := filepath.Join(s.dir, FileName(s.baseOffset, suffix)+s.suffix)
		if err := s.fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && firstErr == nil {
			firstErr = fmt.Errorf("delete segment file %s: %w", p, err)
		}
	}
	// The indexes hold no descriptor: nothing may be trimmed by name from now on (a new segment
	// may take the names), nor mapped again.
	s.idxMu.Lock()
	s.idxGone = true
	if p := s.idx.Load(); p != nil { // replaced and evicted pairs were marked when retired
		p.offset.Unlinked()
		p.time.Unlinked()
	}
	s.idxMu.Unlock()
	s.Release()
	return firstErr
}

// RenameDeleted is the first half of a delayed delete (Kafka's asynchronous segment deletion,
// file.delete.delay.ms): the segment's files are renamed with DeletedSuffix (the indexes first,
// the .log last) and the owner's reference is dropped, so the segment's descriptors and mappings
// go as soon as the last reader releases it (a reader holding a Slice keeps reading its open
// descriptor meanwhile). It returns the paths of the renamed files, for the caller to remove
// after the delay (a restart removes leftover .deleted files). On error the reference is kept
// (the caller may still Delete). It must run under the owning log's structure lock, as
// RenameFiles.
func (s *Segment) RenameDeleted() ([]string, error) {
	// As Delete: readers holding the segment keep a descriptor whatever happens to the names.
	_ = s.holdLog()
	if err := s.RenameFiles(DeletedSuffix); err != nil {
		return nil, err
	}
	paths := make([]string, 0, 4)
	for _, kind := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix, TxnIndexSuffix} {
		paths = append(paths, filepath.Join(s.dir, FileName(s.baseOffset, kind)+DeletedSuffix))
	}
	s.Release()
	return paths, nil
}

// LoadSealed restores a sealed segment opened after a clean shutdown: its max timestamp comes
// from the time index's last entry (written when it was sealed), its next offset is the base of
// the segment after it. Nothing is read from the .log.
func (s *Segment) LoadSealed(nextBase int64) {
	if p := s.pinIndexes(); p != nil {
		if ts, off := p.time.LastEntry(); ts != record.NoTimestamp {
			s.maxTimestamp.Store(ts)
			s.offsetOfMaxTimestamp = off
		}
		p.unpin()
	}
	s.nextOffset.Store(nextBase)
	s.sealed.Store(true)
	s.settle() // flushed before the shutdown or the recovery point
}

// SanityCheck checks both indexes' tails (cheap; no log read).
func (s *Segment) SanityCheck() error {
	p := s.pinIndexes()
	if p == nil {
		return fmt.Errorf("segment %s: indexes cannot be mapped: %w", s.name, index.ErrCorruptIndex)
	}
	defer p.unpin()
	if err := p.offset.SanityCheck(); err != nil {
		return err
	}
	return p.time.SanityCheck()
}
