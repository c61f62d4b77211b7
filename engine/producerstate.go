package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/klauspost/crc32"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/vfs"
)

// Idempotent producer state, as Kafka's ProducerStateManager keeps it: per producer id, the
// epoch and the last few appended batches, so a retried batch is recognised and answered with
// its original offset, a gap in sequence numbers is refused, and a fenced epoch is refused.
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
}

func newProducerState() *producerState { return &producerState{producers: map[int64]*producerEntry{}} }

// errDuplicate carries the original offsets of a retried batch.
type duplicateError struct{ first, last int64 }

func (d *duplicateError) Error() string {
	return fmt.Sprintf("duplicate batch, stored at offsets %d-%d", d.first, d.last)
}

// check validates an idempotent batch before it is appended. A duplicate returns a
// *duplicateError with the original offsets.
func (ps *producerState) check(h *record.Header) error {
	if h.ProducerID < 0 || h.IsControl() {
		return nil
	}
	e, ok := ps.producers[h.ProducerID]
	if !ok {
		return nil
	}
	firstSeq := h.BaseSequence
	lastSeq := seqAdd(firstSeq, h.LastOffsetDelta)
	switch {
	case h.ProducerEpoch < e.epoch:
		return fmt.Errorf("producer %d epoch %d is older than %d: %w", h.ProducerID, h.ProducerEpoch, e.epoch, kerr.InvalidProducerEpoch)
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
	}
	return nil
}

// update records an appended batch (offsets assigned).
func (ps *producerState) update(h *record.Header) {
	if h.ProducerID < 0 || h.IsControl() {
		return
	}
	e, ok := ps.producers[h.ProducerID]
	if !ok {
		e = &producerEntry{epoch: h.ProducerEpoch}
		ps.producers[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	b := producerBatch{firstSeq: h.BaseSequence, lastSeq: seqAdd(h.BaseSequence, h.LastOffsetDelta),
		firstOffset: h.BaseOffset, lastOffset: h.LastOffset(), timestamp: h.MaxTimestamp}
	if len(e.batches) == producerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesKept-1]
	}
	e.batches = append(e.batches, b)
}

// truncate forgets batches at or after offset (a log truncation); producers left without
// batches are removed.
func (ps *producerState) truncate(offset int64) {
	for id, e := range ps.producers {
		n := 0
		for _, b := range e.batches {
			if b.lastOffset < offset {
				e.batches[n] = b
				n++
			}
		}
		e.batches = e.batches[:n]
		if n == 0 {
			delete(ps.producers, id)
		}
	}
}

// expire removes the producers whose last write is expirationMs old or older at nowMs (Kafka's
// ProducerStateManager.isProducerExpired: now - lastTimestamp >= producer.id.expiration.ms, the
// last timestamp being the max timestamp of the producer's last batch) and returns how many.
func (ps *producerState) expire(nowMs, expirationMs int64) int {
	n := 0
	for id, e := range ps.producers {
		if last := e.last(); last == nil || nowMs-last.timestamp >= expirationMs {
			delete(ps.producers, id)
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
	for id, e := range ps.producers {
		if e.last() != nil {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	b := make([]byte, 0, snapshotHeaderSize+len(ids)*snapshotEntrySize)
	b = binary.BigEndian.AppendUint16(b, snapshotVersion)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		e := ps.producers[id]
		last := e.last()
		b = binary.BigEndian.AppendUint64(b, uint64(id))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(last.lastSeq))
		b = binary.BigEndian.AppendUint64(b, uint64(last.lastOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(last.lastOffset-last.firstOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(last.timestamp))
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)         // coordinator epoch: none
		b = binary.BigEndian.AppendUint64(b, 0xffffffffffffffff) // current transaction first offset: none
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
		firstSeq := int32((int64(lastSeq) - int64(delta) + math.MaxInt32 + 1) % (math.MaxInt32 + 1))
		ps.producers[id] = &producerEntry{epoch: epoch, batches: []producerBatch{{
			firstSeq: firstSeq, lastSeq: lastSeq, firstOffset: lastOffset - int64(delta), lastOffset: lastOffset, timestamp: ts,
		}}}
	}
	return ps, nil
}

// snapshotOffsets lists the offsets of the snapshot files in dir, ascending.
func snapshotOffsets(fsys vfs.FS, dir string) ([]int64, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
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
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func snapshotPath(dir string, offset int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", offset, SnapshotSuffix))
}

// loadLatestSnapshot loads the newest readable snapshot at or below maxOffset, removing those
// above it (they describe a log tail that is gone). It returns the state and its offset, or an
// empty state at offset -1.
func loadLatestSnapshot(fsys vfs.FS, dir string, maxOffset int64) (*producerState, int64, error) {
	offsets, err := snapshotOffsets(fsys, dir)
	if err != nil {
		return nil, 0, err
	}
	for i := len(offsets) - 1; i >= 0; i-- {
		o := offsets[i]
		p := snapshotPath(dir, o)
		if o > maxOffset {
			if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
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

// writeSnapshot writes data as the snapshot at offset (atomically) and deletes snapshots older
// than keepFrom.
func writeSnapshot(fsys vfs.FS, dir string, offset int64, data []byte, keepFrom int64) error {
	if err := vfs.WriteFileAtomic(fsys, snapshotPath(dir, offset), data); err != nil {
		return err
	}
	offsets, err := snapshotOffsets(fsys, dir)
	if err != nil {
		return err
	}
	for _, o := range offsets {
		if o < keepFrom {
			_ = fsys.Remove(snapshotPath(dir, o))
		}
	}
	return nil
}
