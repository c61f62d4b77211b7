package broker

// TxnOffsetCommit (key 28), v0-v6 (Kafka 4.4's range; v6 names topics by id, UNKNOWN_TOPIC_ID
// for an unknown one): offsets committed inside a transaction, pending until its
// COMMIT marker reaches the group's __consumer_offsets partition (coordinator.TxnCommitOffsets;
// the WriteTxnMarkers path calls CompleteTxn). ACL as Kafka: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (GROUP_AUTHORIZATION_FAILED), READ
// on each topic (TOPIC_AUTHORIZATION_FAILED); partitions of unknown topics answer
// UNKNOWN_TOPIC_OR_PARTITION and are not written. v0-v2 carry no group metadata: generation -1,
// no member (accepted in any group state); v3+ are fenced by generation, member and instance id
// (KIP-447). Before writing, the transaction coordinator is asked whether the group's partition
// is in the transaction (KIP-890 part 1, as Kafka 4: AddPartitionsToTxn verify_only):
// INVALID_TXN_STATE when it is not (the client did not send AddOffsetsToTxn), COORDINATOR_NOT_
// AVAILABLE while the transaction coordinator cannot answer (clients retry), PRODUCER_FENCED and
// INVALID_PRODUCER_ID_MAPPING as the coordinator says.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/txncoord"
)

func init() {
	register(apiDef{key: 28, min: 0, max: 6, handle: handleTxnOffsetCommit})
}

func handleTxnOffsetCommit(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	resp.SetVersion(r.Version)
	reqErr := b.authorize(r, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) // ACL: WRITE on the transactional id
	if reqErr == nil {
		reqErr = b.authorize(r, acl.OpRead, acl.ResourceGroup, req.Group) // ACL: READ on the group
	}
	denied := b.topicDenied(r, acl.OpRead) // ACL: READ on each topic
	cr := coordinator.TxnCommitRequest{Group: req.Group, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Generation: -1}
	if r.Version >= 3 {
		cr.Generation, cr.MemberID, cr.InstanceID = req.Generation, req.MemberID, req.InstanceID
	}
	type slot struct{ t, p int }
	var slots []slot
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		st := &resp.Topics[i]
		*st = kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t Topic
		var known bool
		missing := kerr.UnknownTopicOrPartition
		if r.Version >= 6 {
			t, known = b.topics.getByID(rt.TopicID)
			missing = kerr.UnknownTopicID
		} else {
			t, known = b.topics.get(rt.Topic)
		}
		name := rt.Topic
		if r.Version >= 6 {
			name = t.Name
		}
		st.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case reqErr != nil:
				sp.ErrorCode = reqErr.Code
			case r.Version >= 6 && !known:
				sp.ErrorCode = missing.Code
			case denied != nil && denied(name):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known || rp.Partition < 0 || rp.Partition >= t.Partitions:
				sp.ErrorCode = missing.Code
			default:
				epoch := int32(-1)
				if r.Version >= 2 {
					epoch = rp.LeaderEpoch
				}
				cr.Partitions = append(cr.Partitions, coordinator.CommitPartition{
					TopicPartition: coordinator.TopicPartition{Topic: name, Partition: rp.Partition},
					Offset:         rp.Offset, LeaderEpoch: epoch, Metadata: rp.Metadata,
				})
				slots = append(slots, slot{i, j})
			}
		}
	}
	if len(cr.Partitions) == 0 {
		return netio.Reply{Response: resp}
	}
	fail := func(e *kerr.Error) netio.Reply {
		for _, s := range slots {
			resp.Topics[s.t].Partitions[s.p].ErrorCode = e.Code
		}
		return netio.Reply{Response: resp}
	}
	return netio.Reply{Deferred: func() netio.Reply {
		ctx, cancel := context.WithTimeout(context.Background(), keyRequestTimeout.Get(b.cfg))
		defer cancel()
		tp := txncoord.TopicPartition{Topic: offsetsTopic, Partition: b.groups.coord.PartitionFor(req.Group)}
		switch e := b.verifyTxnPartition(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, tp, r.Version >= 5); e {
		case nil:
		case kerr.TransactionAbortable:
			return fail(kerr.InvalidTxnState)
		case kerr.ProducerFenced, kerr.InvalidProducerEpoch, kerr.InvalidProducerIDMapping, kerr.InvalidTxnState:
			return fail(e)
		default:
			return fail(kerr.CoordinatorNotAvailable)
		}
		res := b.groups.coord.TxnCommitOffsets(cr)()
		for k, s := range slots {
			if e := res.Errors[k]; e != nil {
				resp.Topics[s.t].Partitions[s.p].ErrorCode = e.Code
			}
		}
		return netio.Reply{Response: resp}
	}}
}
