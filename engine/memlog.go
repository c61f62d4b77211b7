package engine

import (
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

// MemLog is the in-memory reference implementation of PartitionLog: a plain slice of batches
// and three offsets, with none of the disk Log's machinery (no segments, indexes, recovery,
// flusher or atomically published positions). Behaviour tests run the same operations on both
// and compare every answer (see PartitionLog for the semantics).
//
// So that Read can return a segment.Slice like the disk Log, the batches are also kept, back to
// back in offset order, in one anonymous in-memory file (memfd): batch i is at pos[i] and
// pos[i]+size[i] == pos[i+1]. Appends write at the end; a truncation shrinks the file; the log
// start moving up drops batches from the slice but leaves the file alone, so a slice handed out
// earlier stays readable until Close, as a disk segment kept alive by a reader does.
//
// Only MaxMessageBytes and SegmentBytes of the Config are used. Durability is not modelled:
// AwaitDurable returns at once. MemLog is safe for concurrent use (one mutex).
type MemLog struct {
	cfg Config

	mu sync.Mutex
	// batches are the stored batches in offset order; offsets strictly increase between them.
	// Invariant: every batch's last offset is >= logStart - its first batch may hold offsets below.
	batches []memBatch
	// Invariant: logStart <= hw <= leo.
	logStart, hw, leo int64
	leaderEpoch       int32
	epochs            epochCache // the leader epoch cache, without its file
	file              *os.File
	fileEnd           int64 // the position after the last batch
	closed            bool
}

type memBatch struct {
	h    record.Header
	data []byte // the batch exactly as stored
	pos  int64  // its position in file
}

// NewMemLog returns an empty MemLog whose first offset is startOffset.
func NewMemLog(cfg Config, startOffset int64) (*MemLog, error) {
	cfg.fillDefaults()
	fd, err := unix.MemfdCreate("weir-memlog", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memlog: memfd_create: %w", err)
	}
	startOffset = max(startOffset, 0)
	m := &MemLog{
		cfg: cfg, file: os.NewFile(uintptr(fd), "weir-memlog"),
		logStart: startOffset, hw: startOffset, leo: startOffset,
	}
	m.epochs.latest = -1
	return m, nil
}

// BecomeLeader stamps epoch into later appends and records (epoch, log end) when it is newer than
// the latest cached epoch; an older epoch is refused with FENCED_LEADER_EPOCH (see Log.BecomeLeader).
func (m *MemLog) BecomeLeader(epoch int32) error {
	if epoch < 0 {
		return fmt.Errorf("memlog: become leader: invalid epoch %d: %w", epoch, kerr.InvalidRequest)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.writableLocked(); err != nil {
		return err
	}
	if epoch < m.epochs.latest {
		return fmt.Errorf("memlog: become leader in epoch %d: epoch %d is cached: %w", epoch, m.epochs.latest, kerr.FencedLeaderEpoch)
	}
	m.leaderEpoch = epoch
	if epoch > m.epochs.latest {
		m.epochs.assignLocked(epoch, m.leo)
	}
	return nil
}

// LatestEpoch returns the latest cached leader epoch.
func (m *MemLog) LatestEpoch() (int32, bool) { return m.epochs.latestEpoch() }

// EndOffsetForEpoch answers OffsetForLeaderEpoch (see Log.EndOffsetForEpoch).
func (m *MemLog) EndOffsetForEpoch(epoch int32) (int64, int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epochs.endOffsetFor(epoch, func() int64 { return m.leo })
}

// EpochEntries returns a copy of the leader epoch cache.
func (m *MemLog) EpochEntries() []EpochEntry {
	e, _ := m.epochs.snapshot()
	return e
}

// SetLeaderEpoch sets the partition leader epoch stamped into appended batches.
func (m *MemLog) SetLeaderEpoch(epoch int32) {
	m.mu.Lock()
	m.leaderEpoch = epoch
	m.mu.Unlock()
}

func (m *MemLog) LogStartOffset() int64 { m.mu.Lock(); defer m.mu.Unlock(); return m.logStart }
func (m *MemLog) LogEndOffset() int64   { m.mu.Lock(); defer m.mu.Unlock(); return m.leo }
func (m *MemLog) HighWatermark() int64  { m.mu.Lock(); defer m.mu.Unlock(); return m.hw }

// AwaitDurable returns at once (nothing in memory is durable, and nothing is waited for), with
// the disk Log's error for offsets a truncation removed.
func (m *MemLog) AwaitDurable(upTo int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if upTo > m.leo {
		return fmt.Errorf("memlog truncated to %d before offset %d was flushed: %w", m.leo, upTo, kerr.NotLeaderForPartition)
	}
	return nil
}

func (m *MemLog) writableLocked() error {
	if m.closed {
		return fmt.Errorf("memlog is closed: %w", kerr.NotLeaderForPartition)
	}
	return nil
}

// Append validates batch, assigns its offsets in place and stores a copy.
func (m *MemLog) Append(batch []byte) (AppendInfo, error) {
	policy := m.cfg.producePolicy()
	h, err := record.ValidateProduce(batch, &policy)
	if err != nil {
		return AppendInfo{}, err
	}
	if int64(len(batch)) > m.cfg.SegmentBytes {
		return AppendInfo{}, fmt.Errorf("batch of %d bytes exceeds segment.bytes %d: %w", len(batch), m.cfg.SegmentBytes, kerr.RecordListTooLarge)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.writableLocked(); err != nil {
		return AppendInfo{}, err
	}
	h.BaseOffset = m.leo
	h.PartitionLeaderEpoch = m.leaderEpoch
	record.SetBaseOffset(batch, h.BaseOffset)
	record.SetPartitionLeaderEpoch(batch, h.PartitionLeaderEpoch)
	info, err := m.appendLocked(batch, h)
	if policy.LogAppendTime {
		info.LogAppendTime = policy.Now
	}
	if err == nil && h.PartitionLeaderEpoch > m.epochs.latest {
		m.epochs.assignLocked(h.PartitionLeaderEpoch, h.BaseOffset)
	}
	return info, err
}

// AppendStored appends batches whose offsets are already assigned; each must start at or after
// the log end. Batches before a refused one stay appended.
func (m *MemLog) AppendStored(batches []byte) (AppendInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var info AppendInfo
	if err := m.writableLocked(); err != nil {
		return info, err
	}
	records := int32(0)
	for len(batches) > 0 {
		h, err := record.CheckStored(batches)
		if err != nil {
			return info, err
		}
		if h.BaseOffset < m.leo {
			return info, fmt.Errorf("stored batch at offset %d below log end %d: %w", h.BaseOffset, m.leo, kerr.InvalidRecord)
		}
		in, err := m.appendLocked(batches[:h.Size()], h)
		if err != nil {
			return info, err
		}
		batches = batches[h.Size():]
		if h.PartitionLeaderEpoch > m.epochs.latest {
			m.epochs.assignLocked(h.PartitionLeaderEpoch, h.BaseOffset)
		}
		records += h.RecordCount
		info = in
		info.Records = records
	}
	return info, nil
}

func (m *MemLog) appendLocked(batch []byte, h record.Header) (AppendInfo, error) {
	data := append([]byte(nil), batch...)
	if _, err := m.file.WriteAt(data, m.fileEnd); err != nil {
		return AppendInfo{}, fmt.Errorf("memlog: %w: %w", err, kerr.KafkaStorageError)
	}
	m.batches = append(m.batches, memBatch{h: h, data: data, pos: m.fileEnd})
	m.fileEnd += int64(len(data))
	m.leo = h.NextOffset()
	return AppendInfo{
		BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), MaxTimestamp: h.MaxTimestamp, LogAppendTime: -1,
		Position: m.fileEnd - int64(len(data)), Records: h.RecordCount,
	}, nil
}

// firstReachingLocked is the index of the first batch whose last offset is >= offset.
func (m *MemLog) firstReachingLocked(offset int64) int {
	return sort.Search(len(m.batches), func(i int) bool { return m.batches[i].h.LastOffset() >= offset })
}

// Read returns whole batches from the one reaching offset, stopping before any batch that
// reaches the bound, at most maxBytes but at least the first batch (see PartitionLog).
func (m *MemLog) Read(offset int64, maxBytes int64, iso Isolation) (segment.Slice, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return segment.Slice{}, fmt.Errorf("memlog is closed: %w", kerr.NotLeaderForPartition)
	}
	bound := m.hw
	if iso == ReadUpToLogEnd {
		bound = m.leo
	}
	if offset < m.logStart || offset > bound {
		return segment.Slice{}, fmt.Errorf("offset %d outside [%d, %d]: %w", offset, m.logStart, bound, kerr.OffsetOutOfRange)
	}
	i := m.firstReachingLocked(offset)
	var total int64
	for j := i; j < len(m.batches) && m.batches[j].h.LastOffset() < bound; j++ {
		total += int64(len(m.batches[j].data))
	}
	if total == 0 {
		return segment.Slice{}, nil
	}
	length := min(max(maxBytes, int64(len(m.batches[i].data))), total)
	return segment.Slice{File: m.file, Position: m.batches[i].pos, Length: length}, nil
}

// SetHighWatermark clamps offset to [log start, log end] and moves it down to the base of the
// batch it falls inside (not below the log start).
func (m *MemLog) SetHighWatermark(offset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.setHighWatermarkLocked(offset)
}

// AdvanceHighWatermark is SetHighWatermark for an offset above the current high watermark; a
// lower one is ignored (Log.AdvanceHighWatermark, which the follower fetchers use).
func (m *MemLog) AdvanceHighWatermark(offset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if offset <= m.hw {
		return nil
	}
	return m.setHighWatermarkLocked(offset)
}

// setHighWatermarkLocked is SetHighWatermark with m.mu held.
func (m *MemLog) setHighWatermarkLocked(offset int64) error {
	if offset >= m.leo {
		m.hw = m.leo
		return nil
	}
	offset = max(offset, m.logStart)
	if i := m.firstReachingLocked(offset); i < len(m.batches) && m.batches[i].h.BaseOffset < offset {
		offset = max(m.batches[i].h.BaseOffset, m.logStart)
	}
	m.hw = offset
	return nil
}

// TruncateTo removes every batch whose last offset is >= offset (offset raised to the log start).
func (m *MemLog) TruncateTo(offset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.writableLocked(); err != nil {
		return err
	}
	if offset >= m.leo {
		return nil
	}
	offset = max(offset, m.logStart)
	i := m.firstReachingLocked(offset)
	if i == len(m.batches) {
		return nil
	}
	m.leo = m.batches[i].h.BaseOffset
	if i > 0 {
		// Offsets may have a gap before the removed batch (AppendStored): the log end is the
		// offset after the last kept batch.
		m.leo = m.batches[i-1].h.NextOffset()
	}
	m.fileEnd = m.batches[i].pos
	if err := m.file.Truncate(m.fileEnd); err != nil {
		return fmt.Errorf("memlog: %w: %w", err, kerr.KafkaStorageError)
	}
	m.batches = m.batches[:i:i]
	m.logStart = min(m.logStart, m.leo)
	m.hw = min(m.hw, m.leo)
	m.epochs.truncateFromEndLocked(m.leo)
	return nil
}

// DeleteRecordsBefore advances the log start to offset, refusing an offset past the high watermark.
func (m *MemLog) DeleteRecordsBefore(offset int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if offset > m.hw {
		return m.logStart, fmt.Errorf("delete records before %d past high watermark %d: %w", offset, m.hw, kerr.OffsetOutOfRange)
	}
	m.advanceLogStartLocked(offset)
	return m.logStart, nil
}

// advanceLogStartLocked raises the log start to offset and drops the batches wholly below it.
func (m *MemLog) advanceLogStartLocked(offset int64) {
	if offset <= m.logStart {
		return
	}
	m.logStart = offset
	m.hw = max(m.hw, offset)
	m.leo = max(m.leo, offset)
	i := m.firstReachingLocked(offset)
	m.batches = append([]memBatch(nil), m.batches[i:]...)
	m.epochs.truncateFromStartLocked(m.logStart)
}

// OffsetForTimestamp returns the first batch reaching the log start whose max timestamp is >= ts.
func (m *MemLog) OffsetForTimestamp(ts int64) (int64, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.batches[m.firstReachingLocked(m.logStart):] {
		if b.h.MaxTimestamp >= ts {
			return max(b.h.BaseOffset, m.logStart), b.h.MaxTimestamp, nil
		}
	}
	return -1, -1, nil
}

// Close releases the in-memory file; slices handed out stop being readable.
func (m *MemLog) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return m.file.Close()
}
