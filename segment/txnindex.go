package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/weir-mq/weir/vfs"
)

// The aborted transaction index, <base>.txnindex, in Kafka's format (TransactionIndex): one
// 34-byte entry per aborted transaction whose ABORT marker lies in the segment, in marker order:
//
//	version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64
//
// lastOffset is the marker's offset; lastStableOffset the partition's last stable offset right
// after the marker completed the transaction. As in Kafka the file is created lazily, at the
// first aborted transaction of the segment, so most segments have none. A read_committed fetch
// collects the entries overlapping the range it returns (CollectAbortedTxns).
//
// The entries are kept in memory once read (34 bytes each; loaded at the first use); the file is
// written with the appender's lock held (a small pwrite, as the .log's write) and made durable
// by Sync, with the .log, so the recovery point covers it. A torn last entry (a crash in the
// middle of a write) is ignored at load and overwritten by the next append; recovery rebuilds the
// entries past the recovery point from the .log's markers.

// TxnIndexSuffix is the aborted transaction index's file suffix.
const TxnIndexSuffix = ".txnindex"

// TxnEntrySize is the size of one .txnindex entry.
const TxnEntrySize = 34

// maxTxnIndexBytes bounds what is read of a .txnindex (2 million aborted transactions in one
// segment); anything past it is ignored.
const maxTxnIndexBytes = TxnEntrySize << 21

// AbortedTxn is one entry of the aborted transaction index.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// txnIndex is a segment's aborted transaction index. mu guards every field; file I/O happens
// under it (rare: one small write per ABORT marker, a sync only when something was written).
type txnIndex struct {
	mu      sync.Mutex
	loaded  bool
	entries []AbortedTxn
	// written is the number of entries in the file (entries past it are still to be written
	// after a failed write); dirty says the file changed since the last sync, created that the
	// directory entry is new.
	written        int
	dirty, created bool
}

func (s *Segment) txnIndexPath() string {
	return filepath.Join(s.dir, FileName(s.baseOffset, TxnIndexSuffix)+s.suffix)
}

// loadTxnLocked reads the .txnindex the first time it is needed. Requires s.txn.mu.
func (s *Segment) loadTxnLocked() error {
	t := &s.txn
	if t.loaded {
		return nil
	}
	f, err := s.fsys.OpenFile(s.txnIndexPath(), os.O_RDONLY, vfs.FileMode)
	if errors.Is(err, fs.ErrNotExist) {
		t.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", s.txnIndexPath(), err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", s.txnIndexPath(), err)
	}
	size := min(st.Size(), maxTxnIndexBytes)
	size -= size % TxnEntrySize // a torn last entry is ignored
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && size > 0 {
		return fmt.Errorf("read %s: %w", s.txnIndexPath(), err)
	}
	t.entries = make([]AbortedTxn, 0, size/TxnEntrySize)
	be := binary.BigEndian
	for p := buf; len(p) >= TxnEntrySize; p = p[TxnEntrySize:] {
		if v := be.Uint16(p); v != 0 {
			return fmt.Errorf("%s: entry version %d", s.txnIndexPath(), v)
		}
		t.entries = append(t.entries, AbortedTxn{
			ProducerID:       int64(be.Uint64(p[2:])),
			FirstOffset:      int64(be.Uint64(p[10:])),
			LastOffset:       int64(be.Uint64(p[18:])),
			LastStableOffset: int64(be.Uint64(p[26:])),
		})
	}
	t.written = len(t.entries)
	t.loaded = true
	return nil
}

func encodeTxnEntry(b []byte, e AbortedTxn) []byte {
	be := binary.BigEndian
	b = be.AppendUint16(b, 0)
	b = be.AppendUint64(b, uint64(e.ProducerID))
	b = be.AppendUint64(b, uint64(e.FirstOffset))
	b = be.AppendUint64(b, uint64(e.LastOffset))
	return be.AppendUint64(b, uint64(e.LastStableOffset))
}

// AppendAbortedTxn adds an entry (its marker in this segment) to the .txnindex, creating the
// file at the first one. An entry whose marker offset is not after the last entry's is already
// there (a recovery replaying markers the index holds) and is skipped. Called by the log's
// appender.
func (s *Segment) AppendAbortedTxn(e AbortedTxn) error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := s.loadTxnLocked(); err != nil {
		return err
	}
	if n := len(t.entries); n > 0 && t.entries[n-1].LastOffset >= e.LastOffset {
		return nil
	}
	t.entries = append(t.entries, e)
	return s.writeTxnLocked()
}

// writeTxnLocked writes the entries not yet in the file. Requires s.txn.mu.
func (s *Segment) writeTxnLocked() error {
	t := &s.txn
	if t.written == len(t.entries) {
		return nil
	}
	p := s.txnIndexPath()
	_, statErr := s.fsys.Stat(p)
	f, err := s.fsys.OpenFile(p, os.O_WRONLY|os.O_CREATE, vfs.FileMode)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer f.Close()
	buf := make([]byte, 0, (len(t.entries)-t.written)*TxnEntrySize)
	for _, e := range t.entries[t.written:] {
		buf = encodeTxnEntry(buf, e)
	}
	if _, err := f.WriteAt(buf, int64(t.written)*TxnEntrySize); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := f.Truncate(int64(len(t.entries)) * TxnEntrySize); err != nil { // drop a torn tail
		return fmt.Errorf("truncate %s: %w", p, err)
	}
	t.written = len(t.entries)
	t.dirty = true
	t.created = t.created || statErr != nil
	return nil
}

// SyncTxnIndex makes the .txnindex durable when it changed since the last sync (a sealed
// segment whose entries a replay wrote again).
func (s *Segment) SyncTxnIndex() error { return s.syncTxn() }

// syncTxn makes the .txnindex durable when it changed (and its directory entry when new).
func (s *Segment) syncTxn() error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.dirty {
		return nil
	}
	p := s.txnIndexPath()
	f, err := s.fsys.OpenFile(p, os.O_RDWR, vfs.FileMode)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	if t.created {
		if err := s.fsys.SyncDir(s.dir); err != nil {
			return fmt.Errorf("sync dir of %s: %w", p, err)
		}
	}
	t.dirty, t.created = false, false
	return nil
}

// truncateTxn drops the entries whose marker is at or after offset (Kafka's
// TransactionIndex.truncateTo).
func (s *Segment) truncateTxn(offset int64) error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := s.loadTxnLocked(); err != nil {
		return err
	}
	n := len(t.entries)
	for n > 0 && t.entries[n-1].LastOffset >= offset {
		n--
	}
	if n == len(t.entries) {
		return nil
	}
	t.entries = t.entries[:n]
	t.written = min(t.written, n)
	p := s.txnIndexPath()
	f, err := s.fsys.OpenFile(p, os.O_WRONLY, vfs.FileMode)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer f.Close()
	if err := f.Truncate(int64(n) * TxnEntrySize); err != nil {
		return fmt.Errorf("truncate %s: %w", p, err)
	}
	t.dirty = true
	return nil
}

// AbortedTxns returns the segment's aborted transaction entries (a copy), for tests and tools.
func (s *Segment) AbortedTxns() ([]AbortedTxn, error) {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := s.loadTxnLocked(); err != nil {
		return nil, err
	}
	return append([]AbortedTxn(nil), t.entries...), nil
}

// CollectAbortedTxns appends to dst the entries overlapping [fetchOffset, upperBound): marker at
// or after fetchOffset and first offset before upperBound (Kafka's
// TransactionIndex.collectAbortedTxns). complete reports that an entry's last stable offset
// reaches upperBound: no later segment can hold an overlapping transaction, the caller stops.
func (s *Segment) CollectAbortedTxns(dst []AbortedTxn, fetchOffset, upperBound int64) (_ []AbortedTxn, complete bool, err error) {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := s.loadTxnLocked(); err != nil {
		return dst, false, err
	}
	for _, e := range t.entries {
		if e.LastOffset >= fetchOffset && e.FirstOffset < upperBound {
			dst = append(dst, e)
		}
		if e.LastStableOffset >= upperBound {
			return dst, true, nil
		}
	}
	return dst, false, nil
}

// renameTxn renames the .txnindex, when there is one, to the name it has with suffix.
func (s *Segment) renameTxn(suffix string) error {
	from := s.txnIndexPath()
	to := filepath.Join(s.dir, FileName(s.baseOffset, TxnIndexSuffix)+suffix)
	if err := s.fsys.Rename(from, to); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rename %s: %w", from, err)
	}
	return nil
}

// CheckTxnIndex reads the .txnindex (when there is one) and reports whether its entries are
// well formed (Kafka's TransactionIndex.sanityCheck).
func (s *Segment) CheckTxnIndex() error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	return s.loadTxnLocked()
}

// ResetTxnIndex removes the .txnindex and forgets its entries (a corrupt index, rebuilt by the
// log's replay of the markers).
func (s *Segment) ResetTxnIndex() error {
	t := &s.txn
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := s.fsys.Remove(s.txnIndexPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", s.txnIndexPath(), err)
	}
	t.entries, t.written, t.loaded, t.dirty, t.created = nil, 0, true, false, false
	return nil
}
