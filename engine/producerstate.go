package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/crc32"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/vfs"
)

// Idempotent and transactional producer state, as Kafka's ProducerStateManager keeps it: per
// producer id, the epoch and the last few appended batches, so a retried batch is recognised and
// answered with its original offset, a gap in sequence numbers is refused, and a fenced epoch is
// refused; and for transactions the first offset of the producer's ongoing transaction
// (currentTxnFirstOffset) and the coordinator epoch of its last marker. The unstable
// transactions (ongoing, or completed by a marker the high watermark has not passed) are kept in
// first-offset order: the first one is the first unstable offset, and the last stable offset is
// min(it, high watermark). A non-transactional batch from a producer with a transaction ongoing
// is INVALID_TXN_STATE; a producer with a transaction ongoing never expires.
//
// Rules (non-transactional idempotence, Kafka 3.x semantics):
//   - an unknown producer id is accepted at any sequence (its state may have expired);
//   - an epoch lower than the known one: INVALID_PRODUCER_EPOCH;
//   - a higher epoch must start at sequence 0: else OUT_OF_ORDER_SEQUENCE_NUMBER;
//   - same epoch: a batch equal (first and last sequence) to one of the last
//     producerBatchesKept batches is a duplicate: not stored again, answered with its original
//     offsets; otherwise its first sequence must follow the last one (wrapping at MaxInt32).
//
// The state is persisted in Kafka's <offset>.snapshot files (version 1, CRC32C): written at each
// roll for the new segment's base offset and at clean shutdown for the log end. On open, the
// newest snapshot at or below the log end is loaded and the batches after it are replayed from
// their headers.
//
// Expiration (producer.id.expiration.ms): a producer whose last batch's max timestamp is that old
// on the wall clock (Config.Now), and that this process has not seen write for that long on the
// monotonic clock (Config.Nanotime; entries from a snapshot or a replay have no such reading),
// is forgotten, by Log.RemoveExpiredProducers (the Manager calls it every
// ProducerIDExpirationCheckInterval, Kafka's producer.id.expiration.check.interval.ms) and at
// open after the snapshot and replay, as Kafka's loadFromSnapshot skips expired entries. Snapshots
// are not rewritten when producers expire: every later snapshot is taken from the expired state,
// and an older one loaded at open is expired again, so what a snapshot holds never brings an
// expired producer back.

const producerBatchesKept = 5

// producerBatch is one remembered batch of a producer.
type producerBatch struct {
	firstSeq, lastSeq int32
	firstOffset       int64
	lastOffset        int64
	timestamp         int64
}

type producerEntry struct {
	epoch int16
	// batches holds the most recent batches, oldest first (at most producerBatchesKept).
	batches []producerBatch
	// coordinatorEpoch is the coordinator epoch of the producer's last transaction marker (-1
	// none); txnFirstOffset the first offset of its ongoing transaction (-1 none), Kafka's
	// currentTxnFirstOffset; lastTimestamp the timestamp of its last batch or marker.
	coordinatorEpoch int32
	txnFirstOffset   int64
	lastTimestamp    int64
	// lastAppendNanos is the monotonic clock (Config.Nanotime) at the producer's last batch or
	// marker appended by this process; appendSeen is false for an entry known only from a
	// snapshot or a replay at open. Not persisted.
	lastAppendNanos int64
	appendSeen      bool
}

// txnState is one transaction that keeps the last stable offset down: ongoing (lastOffset -1),
// or completed by its marker at lastOffset while the high watermark has not passed the marker
// (Kafka's ongoingTxns and unreplicatedTxns).
type txnState struct {
	producerID  int64
	firstOffset int64
	lastOffset  int64
}

func (e *producerEntry) last() *producerBatch {
	if len(e.batches) == 0 {
		return nil
	}
	return &e.batches[len(e.batches)-1]
}

// producerState is a partition's producer table. Guarded by the log's append lock.
type producerState struct {
	producers map[int64]*producerEntry
	// txns are the unstable transactions in first-offset order (appends come in offset order).
	txns []txnState
	// guards are the verification guards of producers whose transaction verification is under
	// way or done but whose transaction has not begun on the partition (Kafka's
	// VerificationStateEntry), at most maxVerificationGuards; lastGuard the last one handed out.
	// Not persisted: a restarted leader verifies again.
	guards    map[int64]guardEntry
	lastGuard VerificationGuard
}

// guardEntry is a producer's verification guard and the producer epoch it verifies.
type guardEntry struct {
	guard VerificationGuard
	epoch int16
}

// VerificationGuard closes the window between a transaction verification (KIP-890 part 1:
// the coordinator confirmed the partition is in the producer's transaction) and the append of
// the batch that begins the transaction on the partition, as Kafka's VerificationGuard does:
// StartTxnVerification hands out a guard, a marker of the producer that ends the transaction
// being verified (withdrawGuard) or its first transactional batch (its transaction began)
// withdraws it, and AppendVerified of
// a batch that would begin a transaction with any other guard is INVALID_TXN_STATE. So an
// abort or commit written while the verification was in flight cannot be followed by a batch
// of the finished transaction opening a new one that no marker would end.
type VerificationGuard uint64

const (
	// NoVerificationGuard skips the guard check (Append: verification off, or not a
	// transactional producer).
	NoVerificationGuard VerificationGuard = 0
	// TxnOngoingGuard is StartTxnVerification's answer when the producer's transaction has
	// already begun on the partition at that epoch: nothing to verify (Kafka's SENTINEL); a
	// batch appended with it must still find the transaction ongoing.
	TxnOngoingGuard VerificationGuard = math.MaxUint64
	// maxVerificationGuards bounds guards per partition; past it all are withdrawn (their
	// appends answer INVALID_TXN_STATE and the clients abort and retry).
	maxVerificationGuards = 1 << 16
)

// withdrawGuard withdraws producerID's guard when its marker at epoch may end the transaction
// being verified: with transaction version 2 the coordinator bumps the epoch before writing
// the marker, so a marker at epoch e ends a transaction of an epoch below e, and a guard taken
// for a batch at epoch e is for the producer's next transaction (its Produce v12 raced the
// previous transaction's markers) and stays; with version 0/1 (or unknown) a marker ends the
// transaction of its own epoch, so a guard at that epoch or below is withdrawn.
func (ps *producerState) withdrawGuard(producerID int64, epoch, txnVersion int16) {
	g, ok := ps.guards[producerID]
	if !ok {
		return
	}
	if g.epoch < epoch || (txnVersion < 2 && g.epoch == epoch) {
		delete(ps.guards, producerID)
	}
}

// StartTxnVerification returns the guard to append producerID's next transactional batch at
// epoch with (AppendVerified) once its verification succeeds: TxnOngoingGuard when its
// transaction is already ongoing on the partition at that epoch (no verification needed), else
// a new guard that replaces any earlier one of the producer.
func (l *Log) StartTxnVerification(producerID int64, epoch int16) VerificationGuard {
	l.mu.Lock()
	defer l.mu.Unlock()
	ps := l.producers
	if e, ok := ps.producers[producerID]; ok && e.txnFirstOffset >= 0 && e.epoch == epoch {
		return TxnOngoingGuard
	}
	if ps.guards == nil || len(ps.guards) >= maxVerificationGuards {
		ps.guards = map[int64]guardEntry{}
	}
	ps.lastGuard++
	if ps.lastGuard == NoVerificationGuard || ps.lastGuard == TxnOngoingGuard {
		ps.lastGuard = 1
	}
	ps.guards[producerID] = guardEntry{guard: ps.lastGuard, epoch: epoch}
	return ps.lastGuard
}

// AppendVerified is Append for a batch of a transactional producer whose partition was
// verified with guard (StartTxnVerification): a transactional batch that would begin the
// producer's transaction on the partition is refused with INVALID_TXN_STATE unless guard is the
// producer's current one, i.e. no marker was written since the verification started.
func (l *Log) AppendVerified(batch []byte, guard VerificationGuard) (AppendInfo, error) {
	return l.append(batch, guard)
}

// checkGuard is the guard check of check. A guard is needed by a transactional batch that
// begins its producer's transaction (none ongoing).
func (ps *producerState) checkGuard(h *record.Header, e *producerEntry, guard VerificationGuard) error {
	if guard == NoVerificationGuard || !h.IsTransactional() || (e != nil && e.txnFirstOffset >= 0) {
		return nil
	}
	if cur, ok := ps.guards[h.ProducerID]; !ok || cur.guard != guard {
		return fmt.Errorf("producer %d: the transaction ended on the partition after it was verified (verification guard withdrawn): %w", h.ProducerID, kerr.InvalidTxnState)
	}
	return nil
}

func newProducerState() *producerState { return &producerState{producers: map[int64]*producerEntry{}} }

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, coordinatorEpoch: noCoordinatorEpoch, txnFirstOffset: noTxnFirstOffset}
}

// checkMarker validates a transaction marker written as the leader (Kafka's
// ProducerAppendInfo.appendEndTxnMarker for the coordinator origin): an epoch older than the
// producer's is INVALID_PRODUCER_EPOCH (with transaction version 2, where the coordinator bumps
// the epoch before the marker, also an equal one, unless no transaction is ongoing: a retried
// marker); a coordinator epoch older than the last marker's TRANSACTION_COORDINATOR_FENCED.
func (ps *producerState) checkMarker(producerID int64, epoch int16, coordinatorEpoch int32, txnVersion int16) error {
	e, ok := ps.producers[producerID]
	if !ok {
		return nil
	}
	invalid := epoch < e.epoch
	if txnVersion >= 2 {
		invalid = epoch <= e.epoch && !(epoch == e.epoch && e.txnFirstOffset < 0)
	}
	if invalid {
		return fmt.Errorf("marker of producer %d has epoch %d, last seen %d: %w", producerID, epoch, e.epoch, kerr.InvalidProducerEpoch)
	}
	if e.coordinatorEpoch > coordinatorEpoch {
		return fmt.Errorf("marker of producer %d has coordinator epoch %d, last seen %d: %w", producerID, coordinatorEpoch, e.coordinatorEpoch, kerr.TransactionCoordinatorFenced)
	}
	return nil
}

// completeTxn applies a marker at offset: the producer's ongoing transaction (if any) ends. It
// returns the transaction's first offset, or -1 when none was ongoing (a marker without data:
// nothing to index, the last stable offset does not move), and the last stable offset right
// after it completes (Kafka's ProducerStateManager.lastStableOffset: the first offset of the
// next ongoing transaction of another producer, else the marker's offset + 1).
func (ps *producerState) completeTxn(producerID int64, epoch int16, coordinatorEpoch int32, offset, ts, nowNanos int64) (firstOffset, lso int64) {
	e, ok := ps.producers[producerID]
	if !ok {
		e = newProducerEntry(epoch)
		ps.producers[producerID] = e
	}
	firstOffset = e.txnFirstOffset
	if epoch != e.epoch {
		e.epoch = epoch
		e.batches = e.batches[:0]
	}
	e.coordinatorEpoch = coordinatorEpoch
	e.txnFirstOffset = noTxnFirstOffset
	e.lastTimestamp = ts
	e.touch(nowNanos)
	if firstOffset < 0 {
		return -1, -1
	}
	lso = offset + 1
	for i := range ps.txns {
		t := &ps.txns[i]
		if t.producerID == producerID && t.firstOffset == firstOffset && t.lastOffset < 0 {
			t.lastOffset = offset
		} else if t.lastOffset < 0 && t.producerID != producerID && lso == offset+1 {
			lso = t.firstOffset
		}
	}
	return firstOffset, lso
}

// pruneTxns forgets completed transactions whose marker is below the high watermark (Kafka's
// onHighWatermarkUpdated).
func (ps *producerState) pruneTxns(hw int64) {
	n := 0
	for _, t := range ps.txns {
		if t.lastOffset < 0 || t.lastOffset >= hw {
			ps.txns[n] = t
			n++
		}
	}
	ps.txns = ps.txns[:n]
}

// errDuplicate carries the original offsets of a retried batch.
type duplicateError struct{ first, last int64 }

func (d *duplicateError) Error() string {
	return fmt.Sprintf("duplicate batch, stored at offsets %d-%d", d.first, d.last)
}

// check validates an idempotent batch before it is appended. A duplicate returns a
// *duplicateError with the original offsets.
func (ps *producerState) check(h *record.Header, guard VerificationGuard) error {
	if h.ProducerID < 0 || h.IsControl() {
		return nil
	}
	e, ok := ps.producers[h.ProducerID]
	if !ok {
		return ps.checkGuard(h, nil, guard)
	}
	if err := ps.checkGuard(h, e, guard); err != nil {
		return err
	}
	firstSeq := h.BaseSequence
	lastSeq := seqAdd(firstSeq, h.LastOffsetDelta)
	switch {
	case h.ProducerEpoch < e.epoch:
		return fmt.Errorf("producer %d epoch %d is older than %d: %w", h.ProducerID, h.ProducerEpoch, e.epoch, kerr.InvalidProducerEpoch)
	case e.txnFirstOffset >= 0 && !h.IsTransactional():
		// Kafka's appendDataBatch: a non-transactional write while a transaction is ongoing.
		return fmt.Errorf("producer %d has a transaction ongoing since offset %d, the batch is not transactional: %w", h.ProducerID, e.txnFirstOffset, kerr.InvalidTxnState)
	case h.ProducerEpoch > e.epoch:
		if firstSeq != 0 {
			return fmt.Errorf("producer %d new epoch %d starts at sequence %d, not 0: %w", h.ProducerID, h.ProducerEpoch, firstSeq, kerr.OutOfOrderSequenceNumber)
		}
		return nil
	}
	for i := range e.batches {
		b := &e.batches[i]
		if b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			return &duplicateError{first: b.firstOffset, last: b.lastOffset}
		}
	}
	if last := e.last(); last != nil && firstSeq != seqAdd(last.lastSeq, 1) {
		return fmt.Errorf("producer %d epoch %d: sequence %d does not follow %d: %w", h.ProducerID, h.ProducerEpoch, firstSeq, last.lastSeq, kerr.OutOfOrderSequenceNumber)
	} else if last == nil && firstSeq != 0 {
		// Known at this epoch with no batch: its epoch came from a marker (with transaction
		// version 2 the marker carries the bumped epoch the next transaction uses) or a
		// snapshot's empty entry. Kafka's checkSequence: the last sequence is none, so the
		// first batch must start at 0; a later batch of the same epoch arriving first (its
		// predecessor was refused or is being retried) is out of order.
		return fmt.Errorf("producer %d epoch %d: first batch at sequence %d, not 0: %w", h.ProducerID, h.ProducerEpoch, firstSeq, kerr.OutOfOrderSequenceNumber)
	}
	return nil
}

// touch records an append at nowNanos on the monotonic clock (noNanos: a replay at open, which
// says nothing about when the producer last wrote).
func (e *producerEntry) touch(nowNanos int64) {
	if nowNanos != noNanos {
		e.lastAppendNanos, e.appendSeen = nowNanos, true
	}
}

// noNanos is the nowNanos of a replay: no monotonic reading.
const noNanos = math.MinInt64

// update records an appended batch (offsets assigned) at nowNanos on the monotonic clock
// (noNanos when replayed at open).
func (ps *producerState) update(h *record.Header, nowNanos int64) {
	if h.ProducerID < 0 || h.IsControl() {
		return
	}
	e, ok := ps.producers[h.ProducerID]
	if !ok {
		e = newProducerEntry(h.ProducerEpoch)
		ps.producers[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	e.lastTimestamp = h.MaxTimestamp
	e.touch(nowNanos)
	if h.IsTransactional() && e.txnFirstOffset < 0 {
		// The producer's transaction begins (Kafka's appendDataBatch); its verification
		// guard has served.
		e.txnFirstOffset = h.BaseOffset
		delete(ps.guards, h.ProducerID)
		ps.txns = append(ps.txns, txnState{producerID: h.ProducerID, firstOffset: h.BaseOffset, lastOffset: -1})
	}
	b := producerBatch{firstSeq: h.BaseSequence, lastSeq: seqAdd(h.BaseSequence, h.LastOffsetDelta),
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(), timestamp: h.MaxTimestamp}
	if len(e.batches) == producerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesKept-1]
	}
	e.batches = append(e.batches, b)
}

// expire removes the producers whose last write is expirationMs old or older at nowMs (Kafka's
// ProducerStateManager.isProducerExpired: now - lastTimestamp >= producer.id.expiration.ms, the
// last timestamp being the max timestamp of the producer's last batch) and returns how many.
// A producer that this process saw append less than expirationMs ago on the monotonic clock
// (nowNanos) is kept whatever the wall clock says: a forward step of the wall clock, or a
// producer's CreateTime clock behind the broker's, would otherwise forget a producer that is
// writing, and a retry of its last batch would then be appended twice. Entries known only from
// a snapshot or a replay follow Kafka's wall-clock rule alone.
func (ps *producerState) expire(nowMs, nowNanos, expirationMs int64) int {
	n := 0
	for id, e := range ps.producers {
		if e.txnFirstOffset >= 0 {
			continue // Kafka never expires a producer with a transaction ongoing
		}
		if e.appendSeen && nowNanos-e.lastAppendNanos < expirationMs*int64(time.Millisecond) {
			continue // it wrote recently: the wall clock stepped, or its timestamps lag
		}
		if nowMs-e.lastTimestamp >= expirationMs {
			delete(ps.producers, id)
			delete(ps.guards, id)
			n++
		}
	}
	return n
}

func seqAdd(seq, delta int32) int32 {
	s := int64(seq) + int64(delta)
	if s > math.MaxInt32 {
		s -= math.MaxInt32 + 1
	}
	return int32(s)
}

// Snapshot files.

const (
	SnapshotSuffix       = ".snapshot"
	snapshotVersion      = 1
	snapshotHeaderSize   = 2 + 4 + 4
	snapshotEntrySize    = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
	maxSnapshotProducers = 1 << 24
	noCoordinatorEpoch   = -1
	noTxnFirstOffset     = -1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeSnapshot serializes the state in Kafka's snapshot format v1: int16 version, uint32 CRC32C
// of the rest, int32 count, then per producer: id int64, epoch int16, last sequence int32, last
// offset int64, offset delta int32, timestamp int64, coordinator epoch int32, current transaction
// first offset int64.
func (ps *producerState) encodeSnapshot() []byte {
	ids := make([]int64, 0, len(ps.producers))
	for id := range ps.producers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	b := make([]byte, 0, snapshotHeaderSize+len(ids)*snapshotEntrySize)
	b = binary.BigEndian.AppendUint16(b, snapshotVersion)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		e := ps.producers[id]
		// A producer without a batch (only a marker since its epoch changed) is written as
		// Kafka writes an empty entry: last sequence and last offset -1.
		lastSeq, lastOffset, delta := int32(-1), int64(-1), int32(0)
		if last := e.last(); last != nil {
			lastSeq, lastOffset, delta = last.lastSeq, last.lastOffset, int32(last.lastOffset-last.firstOffset)
		}
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(lastSeq))
		b = binary.BigEndian.AppendUint64(b, uint64(lastOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(delta))
		b = binary.BigEndian.AppendUint64(b, uint64(e.lastTimestamp))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.txnFirstOffset))
	}
	binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoli))
	return b
}

// decodeSnapshot parses a snapshot file's bytes.
func decodeSnapshot(b []byte) (*producerState, error) {
	if len(b) < snapshotHeaderSize {
		return nil, errors.New("snapshot too short")
	}
	if v := binary.BigEndian.Uint16(b); v != snapshotVersion {
		return nil, fmt.Errorf("snapshot version %d", v)
	}
	if crc := binary.BigEndian.Uint32(b[2:]); crc != crc32.Checksum(b[6:], castagnoli) {
		return nil, errors.New("snapshot CRC mismatch")
	}
	n := int64(binary.BigEndian.Uint32(b[6:]))
	if n < 0 || n > maxSnapshotProducers || int64(len(b)) != snapshotHeaderSize+n*snapshotEntrySize {
		return nil, fmt.Errorf("snapshot of %d bytes cannot hold %d producers", len(b), n)
	}
	ps := newProducerState()
	be := binary.BigEndian
	for p := b[snapshotHeaderSize:]; len(p) > 0; p = p[snapshotEntrySize:] {
		id := int64(be.Uint64(p))
		epoch := int16(be.Uint16(p[8:]))
		lastSeq := int32(be.Uint32(p[10:]))
		lastOffset := int64(be.Uint64(p[14:]))
		delta := int32(be.Uint32(p[22:]))
		ts := int64(be.Uint64(p[26:]))
		e := newProducerEntry(epoch)
		e.lastTimestamp = ts
		e.coordinatorEpoch = int32(be.Uint32(p[34:]))
		if txnFirst := int64(be.Uint64(p[38:])); txnFirst >= 0 {
			e.txnFirstOffset = txnFirst
			ps.txns = append(ps.txns, txnState{producerID: id, firstOffset: txnFirst, lastOffset: -1})
		}
		if lastOffset >= 0 && lastSeq >= 0 && delta >= 0 {
			firstSeq := int32((int64(lastSeq) - int64(delta) + math.MaxInt32 + 1) % (math.MaxInt32 + 1))
			e.batches = []producerBatch{{
				firstSeq: firstSeq, lastSeq: lastSeq, firstOffset: lastOffset - int64(delta), lastOffset: lastOffset, timestamp: ts,
			}}
		}
		ps.producers[id] = e
	}
	sort.Slice(ps.txns, func(i, j int) bool { return ps.txns[i].firstOffset < ps.txns[j].firstOffset })
	return ps, nil
}

// snapshotOffsets lists the offsets of the snapshot files in dir, ascending.
func snapshotOffsets(fsys vfs.FS, dir string) ([]int64, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	return parseSnapshotOffsets(entries), nil
}

// parseSnapshotOffsets returns the offsets of the snapshot files among entries, ascending.
func parseSnapshotOffsets(entries []fs.DirEntry) []int64 {
	var out []int64
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, SnapshotSuffix) {
			continue
		}
		o, err := strconv.ParseInt(strings.TrimSuffix(name, SnapshotSuffix), 10, 64)
		if err == nil && o >= 0 {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

func snapshotPath(dir string, offset int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", offset, SnapshotSuffix))
}

// snapshotFiles is the set of producer-state snapshot files of one log's directory, listed once
// (seeded by the open's listing of the directory) and then kept in memory: the flusher writes a
// snapshot at every roll and removes those below the log start, and listing the directory each
// time made a log of many small segments slow down quadratically (a directory of 100,000
// segments holds 400,000 names; os.ReadDir reads and sorts them all). Kafka's
// ProducerStateManager keeps its snapshot files in memory the same way. Files added or removed
// behind the log's back while it is open are not seen until the next open.
type snapshotFiles struct {
	// mu guards listed and offsets; the flusher, the appender (TruncateTo) and Close use them.
	mu      sync.Mutex
	listed  bool
	offsets []int64 // ascending
}

// seed sets the set from a listing of the directory.
func (sf *snapshotFiles) seed(entries []fs.DirEntry) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.offsets = parseSnapshotOffsets(entries)
	sf.listed = true
}

// list returns the snapshot offsets, ascending (a copy), listing the directory on first use.
func (sf *snapshotFiles) list(fsys vfs.FS, dir string) ([]int64, error) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if err := sf.listLocked(fsys, dir); err != nil {
		return nil, err
	}
	return append([]int64(nil), sf.offsets...), nil
}

// listLocked lists the directory unless the set is known. The caller holds mu.
func (sf *snapshotFiles) listLocked(fsys vfs.FS, dir string) error {
	if sf.listed {
		return nil
	}
	offs, err := snapshotOffsets(fsys, dir)
	if err != nil {
		return err
	}
	sf.offsets, sf.listed = offs, true
	return nil
}

// remove deletes the snapshot file at offset and forgets it (a file already gone is not an
// error).
func (sf *snapshotFiles) remove(fsys vfs.FS, dir string, offset int64) error {
	err := fsys.Remove(snapshotPath(dir, offset))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if i, ok := slices.BinarySearch(sf.offsets, offset); ok {
		sf.offsets = slices.Delete(sf.offsets, i, i+1)
	}
	return nil
}

// removeAbove deletes the snapshots past offset (a truncated tail's).
func (sf *snapshotFiles) removeAbove(fsys vfs.FS, dir string, offset int64) error {
	offs, err := sf.list(fsys, dir)
	if err != nil {
		return err
	}
	for i := len(offs) - 1; i >= 0 && offs[i] > offset; i-- {
		if err := sf.remove(fsys, dir, offs[i]); err != nil {
			return err
		}
	}
	return nil
}

// loadLatestSnapshot loads the newest readable snapshot at or below maxOffset, removing those
// above it (they describe a log tail that is gone). It returns the state and its offset, or an
// empty state at offset -1.
func (sf *snapshotFiles) loadLatest(fsys vfs.FS, dir string, maxOffset int64) (*producerState, int64, error) {
	offsets, err := sf.list(fsys, dir)
	if err != nil {
		return nil, 0, err
	}
	for i := len(offsets) - 1; i >= 0; i-- {
		o := offsets[i]
		p := snapshotPath(dir, o)
		if o > maxOffset {
			if err := sf.remove(fsys, dir, o); err != nil {
				return nil, 0, err
			}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		ps, err := decodeSnapshot(data)
		if err != nil {
			continue // a torn or corrupt snapshot: try an older one, then replay
		}
		return ps, o, nil
	}
	return newProducerState(), -1, nil
}

// write writes data as the snapshot at offset (atomically) and deletes snapshots older than
// keepFrom, without listing the directory (after the first use) or copying the set: O(log n) plus
// the snapshots deleted.
func (sf *snapshotFiles) write(fsys vfs.FS, dir string, offset int64, data []byte, keepFrom int64) error {
	sf.mu.Lock()
	err := sf.listLocked(fsys, dir) // first use: learn what is there
	sf.mu.Unlock()
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(fsys, snapshotPath(dir, offset), data); err != nil {
		return err
	}
	sf.mu.Lock()
	i, ok := slices.BinarySearch(sf.offsets, offset)
	if !ok {
		sf.offsets = slices.Insert(sf.offsets, i, offset)
	}
	n, _ := slices.BinarySearch(sf.offsets, keepFrom)
	old := append([]int64(nil), sf.offsets[:n]...)
	sf.mu.Unlock()
	for _, o := range old {
		_ = sf.remove(fsys, dir, o)
	}
	return nil
}
