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
// past it everything is forgotten and verified again). Kafka also closes the window between a
// verification and the append (its VerificationGuard in the producer state): a marker written in
// between is not detected here, which only matters for a batch the client sends after its own
// EndTxn (no Kafka client does).
//
// Errors as Kafka's ReplicaManager maps them for Produce: not in the transaction
// INVALID_TXN_STATE; a fenced epoch INVALID_PRODUCER_EPOCH; INVALID_PRODUCER_ID_MAPPING as it
// is; the coordinator moving or unreachable NOT_ENOUGH_REPLICAS (retriable).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/txncoord"
)

// maxVerifiedTxnParts bounds the remembered verifications.
const maxVerifiedTxnParts = 1 << 20

// txnVerifyKey is one producer on one partition.
type txnVerifyKey struct {
	tp  engine.TopicPartition
	pid int64
}

// verifyTxnProduce reports whether batch (the request's records for tp, sent with
// transactional id txnID) is refused by the verification, setting *errp then.
func (b *Broker) verifyTxnProduce(txnID string, tp engine.TopicPartition, batch []byte, errp *error) bool {
	if len(batch) < record.HeaderSize || !keyTxnPartitionVerification.Get(b.cfg) {
		return false
	}
	h, err := record.ParseHeader(batch)
	if err != nil || !h.IsTransactional() || h.ProducerID < 0 {
		return false // the log's validation answers a bad batch
	}
	key := txnVerifyKey{tp: tp, pid: h.ProducerID}
	b.txns.verifiedMu.Lock()
	epoch, ok := b.txns.verified[key]
	b.txns.verifiedMu.Unlock()
	if ok && epoch == h.ProducerEpoch {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), keyRequestTimeout.Get(b.cfg))
	defer cancel()
	e := b.verifyTxnPartition(ctx, txnID, h.ProducerID, h.ProducerEpoch, txncoord.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	var refuse *kerr.Error
	switch e {
	case nil:
		b.txns.verifiedMu.Lock()
		if len(b.txns.verified) >= maxVerifiedTxnParts {
			clear(b.txns.verified)
		}
		b.txns.verified[key] = h.ProducerEpoch
		b.txns.verifiedMu.Unlock()
		return false
	case kerr.TransactionAbortable, kerr.InvalidTxnState:
		refuse = kerr.InvalidTxnState
	case kerr.ProducerFenced, kerr.InvalidProducerEpoch:
		refuse = kerr.InvalidProducerEpoch
	case kerr.InvalidProducerIDMapping:
		refuse = kerr.InvalidProducerIDMapping
	default:
		refuse = kerr.NotEnoughReplicas
	}
	*errp = fmt.Errorf("transaction verification of %s-%d for producer %d epoch %d: coordinator answered %v: %w",
		tp.Topic, tp.Partition, h.ProducerID, h.ProducerEpoch, e, refuse)
	return true
}

// forgetTxnVerification drops pid's verification on tp (its transaction there ended).
func (b *Broker) forgetTxnVerification(tp engine.TopicPartition, pid int64) {
	b.txns.verifiedMu.Lock()
	delete(b.txns.verified, txnVerifyKey{tp: tp, pid: pid})
	b.txns.verifiedMu.Unlock()
}
