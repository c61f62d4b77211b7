package engine

// Transactions on the partition (Kafka's transactional log behaviour): transactional batches and
// their producers' ongoing transactions (producerstate.go), transaction markers written as the
// leader (AppendMarker) or copied from it (AppendStored), the last stable offset, the aborted
// transaction index (segment's .txnindex) and what a read_committed fetch needs
// (AbortedTransactions).
//
// The last stable offset moves only when the high watermark does: a marker completes its
// transaction for readers once the high watermark passes the marker (Kafka keeps it among the
// unreplicated transactions until then), so read_committed long polls watch the high watermark
// (Waiter.WatchHighWatermark). A truncation may lower it, as it lowers the high watermark.

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

// AbortedTxn is one aborted transaction of the .txnindex.
type AbortedTxn = segment.AbortedTxn

// maxAbortedPerRead bounds the aborted transactions one read_committed read returns.
const maxAbortedPerRead = 1 << 16

// publishTxnsLocked publishes the unstable transactions for readers, dropping the completed ones
// the high watermark has passed. Requires l.mu.
func (l *Log) publishTxnsLocked() {
	if l.replaying {
		return // loadProducerState publishes once done
	}
	l.producers.pruneTxns(l.HighWatermark())
	l.publishTxnViewLocked()
}

// publishTxnViewLocked publishes the unstable transactions as they are: at open and after a
// truncation the high watermark is not known yet (it is restored or set after), and the
// transactions the replay completed stay unstable until it passes their markers, as Kafka's
// replay leaves them among the unreplicated ones. Requires l.mu.
func (l *Log) publishTxnViewLocked() {
	if len(l.producers.txns) == 0 {
		l.txnView.Store(nil)
		return
	}
	v := append([]txnState(nil), l.producers.txns...)
	l.txnView.Store(&v)
}

// LastStableOffset is min(first unstable offset, high watermark): read_committed consumers read
// below it. Without transactions it is the high watermark (one atomic load more).
func (l *Log) LastStableOffset() int64 {
	hw := l.HighWatermark()
	if o, ok := l.firstUnstable(hw); ok {
		return o
	}
	return hw
}

// firstUnstable returns the first offset of the first transaction not stable at hw when it is
// below hw.
func (l *Log) firstUnstable(hw int64) (int64, bool) {
	v := l.txnView.Load()
	if v == nil {
		return 0, false
	}
	for _, t := range *v {
		if t.lastOffset >= 0 && t.lastOffset < hw {
			continue // completed, and its marker is below the high watermark
		}
		if t.firstOffset < hw {
			return max(t.firstOffset, l.LogStartOffset()), true
		}
		return 0, false
	}
	return 0, false
}

// lastStablePosition is the last stable offset and its place (segment base, byte position).
func (l *Log) lastStablePosition() (offset, base, pos int64, err error) {
	hwOff, hwBase, hwPos := l.hw.load()
	lso, ok := l.firstUnstable(hwOff)
	if !ok {
		return hwOff, hwBase, hwPos, nil
	}
	seg, found := l.acquireSegmentFor(lso)
	if !found {
		return 0, 0, 0, fmt.Errorf("last stable offset %d of %s: no segment: %w", lso, l.dir, kerr.OffsetOutOfRange)
	}
	defer seg.Release()
	p, h, ok2, err := seg.TranslateOffset(lso)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("last stable offset %d of %s: %w", lso, l.dir, err)
	}
	if !ok2 {
		p = seg.Size()
	} else if h.BaseOffset < lso {
		lso = h.BaseOffset // a transaction starts at a batch's base offset: not reached
	}
	return lso, seg.BaseOffset(), p, nil
}

// AbortedTransactions returns the aborted transactions a read_committed read from offset up to
// upperBound (exclusive; the last stable offset) must tell the consumer about: those whose
// marker is at or after offset and whose first offset is below upperBound, from the .txnindex of
// the segment holding offset and the later ones, stopping at the first entry whose last stable
// offset reaches upperBound (Kafka's UnifiedLog.collectAbortedTransactions). Ongoing
// transactions start at or after the last stable offset and are never part of it. At most
// maxAbortedPerRead entries are returned. dst is appended to.
func (l *Log) AbortedTransactions(dst []AbortedTxn, offset, upperBound int64) ([]AbortedTxn, error) {
	return l.collectAborted(dst, offset, upperBound, maxAbortedPerRead)
}

func (l *Log) collectAborted(dst []AbortedTxn, offset, upperBound int64, limit int) ([]AbortedTxn, error) {
	segs := l.Segments()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].BaseOffset() > offset }) - 1
	i = max(i, 0)
	// As Kafka's collectAbortedTransactions, every later segment may hold the marker of a
	// transaction that began before upperBound: the walk stops only at an entry whose last
	// stable offset reaches upperBound (segments without a .txnindex cost a lock each).
	for ; i < len(segs); i++ {
		s := segs[i]
		if !s.Acquire() {
			continue
		}
		var complete bool
		var err error
		dst, complete, err = s.CollectAbortedTxns(dst, offset, upperBound)
		s.Release()
		if err != nil {
			return dst, fmt.Errorf("aborted transactions of %s: %w", l.dir, err)
		}
		if complete || len(dst) >= limit {
			break
		}
	}
	return dst, nil
}

// applyBatchLocked updates the producer state with a batch appended with its offsets (a stored
// batch, a replayed one, or a follower's copy): data batches as Append does, control batches
// complete their producer's transaction (an ABORT adds the .txnindex entry to seg, the segment
// holding the marker). The leader's fencing checks are not applied (Kafka's replication
// origin). Requires l.mu.
// appendNanosLocked is the monotonic reading that stamps a producer's write: noNanos while the
// log replays at open. Requires l.mu.
func (l *Log) appendNanosLocked() int64 {
	if l.replaying {
		return noNanos
	}
	return l.config().nanotime()
}

func (l *Log) applyBatchLocked(b []byte, h *record.Header) error {
	return l.applyBatchToSegment(l.active, b, h)
}

func (l *Log) applyBatchToSegment(seg *segment.Segment, b []byte, h *record.Header) error {
	if !h.IsControl() {
		txns := len(l.producers.txns)
		l.producers.update(h, l.appendNanosLocked())
		if len(l.producers.txns) != txns {
			l.publishTxnsLocked()
		}
		return nil
	}
	if h.ProducerID < 0 {
		return nil
	}
	m, err := record.ParseEndTxnMarker(b)
	if errors.Is(err, record.ErrNotEndTxnMarker) {
		return nil // an empty control batch (cleaned) or another control type
	}
	if err != nil {
		// Only a log written elsewhere can hold one (AppendStored refuses them): it ends
		// nothing, as an unknown control type.
		slog.Warn("malformed transaction marker ignored", "dir", l.dir, "offset", h.BaseOffset, "err", err)
		return nil
	}
	l.producers.withdrawGuard(h.ProducerID, h.ProducerEpoch, 0) // its transaction version is unknown here
	return l.completeTxnLocked(seg, h.ProducerID, h.ProducerEpoch, m, h.BaseOffset, h.MaxTimestamp)
}

// completeTxnLocked ends a producer's transaction with its marker at offset in seg. Requires l.mu.
func (l *Log) completeTxnLocked(seg *segment.Segment, producerID int64, epoch int16, m record.EndTxnMarker, offset, ts int64) error {
	first, lso := l.producers.completeTxn(producerID, epoch, m.CoordinatorEpoch, offset, ts, l.appendNanosLocked())
	if first < 0 {
		return nil
	}
	l.publishTxnsLocked()
	if m.Commit {
		return nil
	}
	if err := seg.AppendAbortedTxn(AbortedTxn{ProducerID: producerID, FirstOffset: first, LastOffset: offset, LastStableOffset: lso}); err != nil {
		return l.logDir.Fail(err)
	}
	return nil
}

// AppendMarker appends, as the leader, the marker ending producerID's transaction (Kafka's
// WriteTxnMarkers on the partition: a control batch with one EndTransactionMarker record,
// attributes control + transactional, the producer's id and epoch, no sequence) with the
// current leader epoch. It refuses an older producer epoch (INVALID_PRODUCER_EPOCH; with
// txnVersion 2 also the same epoch while a transaction is ongoing) and an older coordinator
// epoch (TRANSACTION_COORDINATOR_FENCED). A marker of a producer with no transaction ongoing is
// written all the same, as in Kafka, and changes nothing else. An ABORT adds the
// transaction to the active segment's .txnindex. Durability and the high watermark follow as for
// Append (AwaitDurable).
func (l *Log) AppendMarker(producerID int64, epoch int16, coordinatorEpoch int32, commit bool, txnVersion int16) (AppendInfo, error) {
	if producerID < 0 {
		return AppendInfo{}, fmt.Errorf("marker without a producer id: %w", kerr.InvalidRecord)
	}
	cfg := l.config()
	m := record.EndTxnMarker{Commit: commit, CoordinatorEpoch: coordinatorEpoch}
	batch := record.BuildEndTxnMarker(nil, 0, cfg.now().UnixMilli(), producerID, epoch, m)
	h, err := record.ParseHeader(batch)
	if err != nil {
		return AppendInfo{}, err
	}
	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	if err := l.producers.checkMarker(producerID, epoch, coordinatorEpoch, txnVersion); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	h.BaseOffset = l.nextOffset
	h.PartitionLeaderEpoch = l.leaderEpoch
	record.SetBaseOffset(batch, h.BaseOffset)
	record.SetPartitionLeaderEpoch(batch, h.PartitionLeaderEpoch)
	info, err := l.appendLocked(batch, &h)
	newEpoch := false
	if err == nil {
		l.producers.withdrawGuard(producerID, epoch, txnVersion)
		err = l.completeTxnLocked(l.active, producerID, epoch, m, h.BaseOffset, h.MaxTimestamp)
		if h.PartitionLeaderEpoch > l.epochs.latest {
			newEpoch = l.epochs.assignLocked(h.PartitionLeaderEpoch, h.BaseOffset)
		}
	}
	due := err == nil && l.flush.appendedLocked(l, 1)
	l.mu.Unlock()
	if due {
		l.flush.wake()
	}
	if newEpoch {
		if perr := l.persistEpochs(); perr != nil {
			return info, perr
		}
	}
	if err == nil && cfg.LocalHighWatermark && !cfg.Durable() {
		_ = l.AdvanceHighWatermark(info.LastOffset + 1)
	}
	return info, err
}

// ProducerInfo describes one producer of the partition (DescribeProducers).
type ProducerInfo struct {
	ProducerID       int64
	Epoch            int16
	LastSequence     int32
	LastTimestamp    int64
	CoordinatorEpoch int32
	// TxnStartOffset is the first offset of the ongoing transaction, -1 when none.
	TxnStartOffset int64
}

// Producers lists the partition's producers, by id.
func (l *Log) Producers() []ProducerInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ProducerInfo, 0, len(l.producers.producers))
	for id, e := range l.producers.producers {
		seq := int32(-1)
		if last := e.last(); last != nil {
			seq = last.lastSeq
		}
		out = append(out, ProducerInfo{ProducerID: id, Epoch: e.epoch, LastSequence: seq, LastTimestamp: e.lastTimestamp,
			CoordinatorEpoch: e.coordinatorEpoch, TxnStartOffset: e.txnFirstOffset})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	return out
}
