package broker

// KIP-890 part 1 on the partition leader: before the first transactional batch of a producer's
// transaction is appended to a partition, the leader asks the transaction coordinator
// (AddPartitionsToTxn verify_only: locally when this broker coordinates the id, else over the
// inter-broker listener) whether the partition is in the transaction. A batch for a partition
// the client never added (a buggy client, or a late retry after the transaction ended) would
// otherwise open a transaction that no marker ends, holding read_committed consumers at the
// last stable offset.
//
// Verified (partition, producer id) pairs are remembered with the producer epoch until the
// producer's next marker on the partition (appendTxnMarker forgets them), so each partition is
// verified once per transaction, as Kafka does. The memory is bounded (maxVerifiedTxnParts:
// past it everything is forgotten and verified again).
//
// The window between a verification and the append is closed as Kafka's VerificationGuard
// does it: before asking the coordinator the leader takes a guard from the partition's producer
// state (engine.Log.StartTxnVerification), and appends the batch with it (AppendVerified); a
// marker of the producer written in between withdraws the guard, so a batch that would begin a
// transaction that has already ended is refused with INVALID_TXN_STATE instead of opening one no
// marker ends. A producer whose transaction is already ongoing on the partition at that epoch
// needs no verification (Kafka's SENTINEL guard), but its append still requires the transaction
// to be ongoing.
//
// Transaction version 2 (KIP-890 part 2): a Produce v12+ is from a client that sends no
// AddPartitionsToTxn, so instead of verify_only the leader has the coordinator add the
// partition (AddPartitionsToTxn v5), under the same guard and memory.
//
// Errors as Kafka's ReplicaManager maps them for Produce: not in the transaction
// INVALID_TXN_STATE; a fenced epoch INVALID_PRODUCER_EPOCH; INVALID_PRODUCER_ID_MAPPING as it
// is; the coordinator moving or unreachable NOT_ENOUGH_REPLICAS (retriable).

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/txncoord"
)

// maxVerifiedTxnParts bounds the remembered verifications.
const maxVerifiedTxnParts = 1 << 20

// txnVerifiedHook, when set (tests only), runs after the coordinator confirmed a partition and
// before the batch is appended: the window the verification guard protects.
var txnVerifiedHook func(tp engine.TopicPartition, pid int64)

// txnVerifyKey is one producer on one partition.
type txnVerifyKey struct {
	tp  engine.TopicPartition
	pid int64
}

// verifiedTxn is a remembered verification: the producer epoch it was for and the
// partition's verification guard to append with (engine.VerificationGuard).
type verifiedTxn struct {
	epoch int16
	guard engine.VerificationGuard
}

// txnAppend is how a producer's batch is appended after verifyTxnProduce: with guard
// (engine.NoVerificationGuard: a plain append) by producer pid.
type txnAppend struct {
	guard engine.VerificationGuard
	pid   int64
}

// verifyTxnProduce reports whether batch (the request's records for tp, led here in l, sent
// with transactional id txnID in a Produce of version produceVersion) is refused by the
// verification, setting *errp then; otherwise *ta says how to append it. Produce v12+ is
// KIP-890 part 2 (transaction version 2 clients send no AddPartitionsToTxn): the partition is
// added to the transaction (AddPartitionsToTxn v5, not verify_only), whatever
// transaction.partition.verification.enable says, since without it nothing would end the
// transaction; older versions are verified (verify_only) when the key is on.
func (b *Broker) verifyTxnProduce(txnID string, tp engine.TopicPartition, l *engine.Log, batch []byte, produceVersion int16, ta *txnAppend, errp *error) bool {
	add := produceVersion >= 12
	if len(batch) < record.HeaderSize || (!add && !keyTxnPartitionVerification.Get(b.cfg)) {
		return false
	}
	h, err := record.ParseHeader(batch)
	if err != nil || !h.IsTransactional() || h.ProducerID < 0 {
		return false // the log's validation answers a bad batch
	}
	ta.pid = h.ProducerID
	key := txnVerifyKey{tp: tp, pid: h.ProducerID}
	b.txns.verifiedMu.Lock()
	v, ok := b.txns.verified[key]
	b.txns.verifiedMu.Unlock()
	if ok && v.epoch == h.ProducerEpoch {
		ta.guard = v.guard
		return false
	}
	// The guard is taken before asking, so a marker written while the answer is on its way
	// withdraws it and the append is refused (Kafka's VerificationGuard).
	ta.guard = l.StartTxnVerification(h.ProducerID, h.ProducerEpoch)
	if ta.guard == engine.TxnOngoingGuard {
		return false // the transaction has begun on the partition: verified before
	}
	ctx, cancel := context.WithTimeout(context.Background(), keyRequestTimeout.Get(b.cfg))
	defer cancel()
	e := b.verifyTxnPartition(ctx, txnID, h.ProducerID, h.ProducerEpoch, txncoord.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}, add)
	var refuse *kerr.Error
	switch e {
	case nil:
		if hook := txnVerifiedHook; hook != nil {
			hook(tp, h.ProducerID)
		}
		b.txns.verifiedMu.Lock()
		if len(b.txns.verified) >= maxVerifiedTxnParts {
			clear(b.txns.verified)
		}
		b.txns.verified[key] = verifiedTxn{epoch: h.ProducerEpoch, guard: ta.guard}
		b.txns.verifiedMu.Unlock()
		return false
	case kerr.TransactionAbortable, kerr.InvalidTxnState:
		refuse = kerr.InvalidTxnState
	case kerr.ProducerFenced, kerr.InvalidProducerEpoch:
		refuse = kerr.InvalidProducerEpoch
	case kerr.InvalidProducerIDMapping:
		refuse = kerr.InvalidProducerIDMapping
	default:
		// CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being
		// written), the coordinator moving or unreachable: retriable for every client, as
		// Kafka's ReplicaManager answers.
		refuse = kerr.NotEnoughReplicas
	}
	*errp = fmt.Errorf("transaction verification of %s-%d for producer %d epoch %d: coordinator answered %v: %w",
		tp.Topic, tp.Partition, h.ProducerID, h.ProducerEpoch, e, refuse)
	return true
}

// appendVerifiedAsLeader is replica.appendAsLeader with a verification guard (engine.Log.
// AppendVerified). A batch refused by the guard (its transaction ended while it was being
// verified) drops the remembered verification, so the producer's next transaction on the
// partition is verified afresh.
func (b *Broker) appendVerifiedAsLeader(r *replica, batch []byte, ta txnAppend) (engine.AppendInfo, int32, error) {
	info, epoch, err := r.appendVerifiedAsLeader(batch, ta.guard)
	if err != nil && ta.guard != engine.NoVerificationGuard && errors.Is(err, kerr.InvalidTxnState) {
		b.forgetTxnVerification(r.tp, ta.pid)
	}
	return info, epoch, err
}

// appendVerifiedAsLeader appends batch with guard if this broker leads the partition, holding
// the role for the duration of the append. It returns the leader epoch appended under.
func (r *replica) appendVerifiedAsLeader(batch []byte, guard engine.VerificationGuard) (engine.AppendInfo, int32, error) {
	r.roleMu.RLock()
	defer r.roleMu.RUnlock()
	r.mu.Lock()
	leading, epoch := r.leading, r.epoch
	r.mu.Unlock()
	if !leading {
		return engine.AppendInfo{}, -1, fmt.Errorf("this broker does not lead %s-%d: %w", r.tp.Topic, r.tp.Partition, kerr.NotLeaderForPartition)
	}
	info, err := r.log.AppendVerified(batch, guard)
	return info, epoch, err
}

// forgetTxnVerification drops pid's verification on tp (its transaction there ended).
func (b *Broker) forgetTxnVerification(tp engine.TopicPartition, pid int64) {
	b.txns.verifiedMu.Lock()
	delete(b.txns.verified, txnVerifyKey{tp: tp, pid: pid})
	b.txns.verifiedMu.Unlock()
}
