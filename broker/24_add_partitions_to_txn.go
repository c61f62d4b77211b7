package broker

// AddPartitionsToTxn (key 24), v0-v5. v0-v3 (clients): one transaction; ACL WRITE on the
// transactional id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each
// topic; a partition refused (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION for a topic
// or partition that does not exist, or an internal topic) makes every other partition
// OPERATION_NOT_ATTEMPTED, as Kafka's KafkaApis does (internal topics are refused, except
// __consumer_offsets from a broker: it adds it for a transaction version 2 TxnOffsetCommit); then the transaction coordinator adds the
// partitions (txncoord.AddPartitions). v4+ is the inter-broker batch form (KIP-890): CLUSTER_ACTION
// on the cluster (else the top-level CLUSTER_AUTHORIZATION_FAILED) and, as in Kafka, no client
// ACL (the broker authorized the producer's request), one result per transaction; verify_only transactions only check that the partitions are
// in the transaction (TRANSACTION_ABORTABLE when not). PRODUCER_FENCED becomes
// INVALID_PRODUCER_EPOCH below v2 (KIP-588).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/txncoord"
)

func init() {
	register(apiDef{key: 24, min: 0, max: 5, handle: handleAddPartitionsToTxn})
}

// maxTxnRequestPartitions bounds the partitions one AddPartitionsToTxn names (INVALID_REQUEST
// beyond); the coordinator bounds a whole transaction the same way.
const maxTxnRequestPartitions = 100000

// txnTopicPartitions is one transaction's topics of an AddPartitionsToTxn request.
type txnTopicPartitions struct {
	topic string
	parts []int32
}

// addPartitionsToTxn answers one transaction: an error per partition, in request order.
// fromBroker (v4+, CLUSTER_ACTION already checked) skips the client ACLs, as Kafka does: a
// broker asks on behalf of a producer whose Produce it has authorized.
func (b *Broker) addPartitionsToTxn(r *netio.Request, txnID string, pid int64, epoch int16, topics []txnTopicPartitions, verifyOnly, fromBroker bool, tv int16) [][]*kerr.Error {
	out := make([][]*kerr.Error, len(topics))
	n := 0
	for i, t := range topics {
		out[i] = make([]*kerr.Error, len(t.parts))
		n += len(t.parts)
	}
	all := func(e *kerr.Error) [][]*kerr.Error {
		for i := range out {
			for j := range out[i] {
				out[i][j] = e
			}
		}
		return out
	}
	if n > maxTxnRequestPartitions {
		return all(kerr.InvalidRequest)
	}
	var denied func(string) bool
	if !fromBroker {
		if e := b.authorize(r, acl.OpWrite, acl.ResourceTransactionalID, txnID); e != nil { // ACL: WRITE on the transactional id
			return all(e)
		}
		denied = b.topicDenied(r, acl.OpWrite) // ACL: WRITE on each topic
	}
	refused := false
	var tps []txncoord.TopicPartition
	for i, t := range topics {
		info, found := b.topics.get(t.topic)
		for j, p := range t.parts {
			switch {
			case denied != nil && denied(t.topic):
				out[i][j] = kerr.TopicAuthorizationFailed
			case !found || p < 0 || p >= info.Partitions || (isInternalTopic(t.topic) && !(fromBroker && t.topic == offsetsTopic)):
				// A client may not add an internal topic; a broker may add __consumer_offsets
				// (the group coordinator's broker, for TxnOffsetCommit v5+, KIP-890 part 2).
				out[i][j] = kerr.UnknownTopicOrPartition
			default:
				tps = append(tps, txncoord.TopicPartition{Topic: t.topic, Partition: p})
				continue
			}
			refused = true
		}
	}
	if refused {
		for i := range out {
			for j := range out[i] {
				if out[i][j] == nil {
					out[i][j] = kerr.OperationNotAttempted
				}
			}
		}
		return out
	}
	res := b.txns.coord.AddPartitions(txnID, pid, epoch, tps, verifyOnly, tv)
	for i, t := range topics {
		for j, p := range t.parts {
			out[i][j] = res[txncoord.TopicPartition{Topic: t.topic, Partition: p}]
		}
	}
	return out
}

func handleAddPartitionsToTxn(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	resp.SetVersion(r.Version)
	if r.Version < 4 {
		topics := make([]txnTopicPartitions, len(req.Topics))
		for i, t := range req.Topics {
			topics[i] = txnTopicPartitions{topic: t.Topic, parts: t.Partitions}
		}
		return netio.Reply{Deferred: func() netio.Reply {
			errs := b.addPartitionsToTxn(r, req.TransactionalID, req.ProducerID, req.ProducerEpoch, topics, false, false, 0)
			resp.Topics = make([]kmsg.AddPartitionsToTxnResponseTopic, len(topics))
			for i, t := range topics {
				st := &resp.Topics[i]
				*st = kmsg.NewAddPartitionsToTxnResponseTopic()
				st.Topic = t.topic
				st.Partitions = make([]kmsg.AddPartitionsToTxnResponseTopicPartition, len(t.parts))
				for j, p := range t.parts {
					sp := &st.Partitions[j]
					*sp = kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					sp.Partition = p
					if e := errs[i][j]; e != nil {
						sp.ErrorCode = txncoord.ResponseError(e, 24, r.Version).Code
					}
				}
			}
			return netio.Reply{Response: resp}
		}}
	}
	if e := b.authorizeCluster(r, acl.OpClusterAction); e != nil { // ACL: CLUSTER_ACTION on the cluster (v4+: brokers only)
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	return netio.Reply{Deferred: func() netio.Reply {
		resp.Transactions = make([]kmsg.AddPartitionsToTxnResponseTransaction, len(req.Transactions))
		for k, tx := range req.Transactions {
			st := &resp.Transactions[k]
			*st = kmsg.NewAddPartitionsToTxnResponseTransaction()
			st.TransactionalID = tx.TransactionalID
			topics := make([]txnTopicPartitions, len(tx.Topics))
			for i, t := range tx.Topics {
				topics[i] = txnTopicPartitions{topic: t.Topic, parts: t.Partitions}
			}
			tv := int16(0)
			if r.Version >= 5 && !tx.VerifyOnly {
				tv = 2 // the partition leader adds a partition for a transaction-version-2 client
			}
			errs := b.addPartitionsToTxn(r, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, topics, tx.VerifyOnly, true, tv)
			st.Topics = make([]kmsg.AddPartitionsToTxnResponseTransactionTopic, len(topics))
			for i, t := range topics {
				tt := &st.Topics[i]
				*tt = kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				tt.Topic = t.topic
				tt.Partitions = make([]kmsg.AddPartitionsToTxnResponseTransactionTopicPartition, len(t.parts))
				for j, p := range t.parts {
					sp := &tt.Partitions[j]
					*sp = kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					sp.Partition = p
					if e := errs[i][j]; e != nil {
						sp.ErrorCode = e.Code
					}
				}
			}
		}
		return netio.Reply{Response: resp}
	}}
}
