package broker

// DescribeTransactions (key 65), v0: the state of each transactional id this broker
// coordinates (txncoord.Describe; NOT_COORDINATOR for the others, TRANSACTIONAL_ID_NOT_FOUND
// for an unknown id). ACL as Kafka: DESCRIBE on each transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and the topics of a transaction the principal may
// not DESCRIBE are left out of its partitions.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 65, min: 0, max: 0, handle: handleDescribeTransactions})
}

// maxDescribeTransactionIDs bounds the ids of one DescribeTransactions (INVALID_REQUEST each
// beyond it).
const maxDescribeTransactionIDs = 10000

func handleDescribeTransactions(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	resp.SetVersion(r.Version)
	denied := b.topicDenied(r, acl.OpDescribe)
	resp.TransactionStates = make([]kmsg.DescribeTransactionsResponseTransactionState, len(req.TransactionalIDs))
	for i, id := range req.TransactionalIDs {
		st := &resp.TransactionStates[i]
		*st = kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		st.ProducerID, st.ProducerEpoch = -1, -1
		if i >= maxDescribeTransactionIDs {
			st.ErrorCode = kerr.InvalidRequest.Code
			continue
		}
		if e := b.authorize(r, acl.OpDescribe, acl.ResourceTransactionalID, id); e != nil { // ACL: DESCRIBE on the transactional id
			st.ErrorCode = e.Code
			continue
		}
		d := b.txns.coord.Describe(id)
		if d.Err != nil {
			st.ErrorCode = d.Err.Code
			continue
		}
		st.State = d.State.String()
		st.TimeoutMillis, st.StartTimestamp = d.TimeoutMs, d.StartMs
		st.ProducerID, st.ProducerEpoch = d.ProducerID, d.Epoch
		at := map[string]int{}
		for _, tp := range d.Partitions {
			if denied != nil && denied(tp.Topic) {
				continue // ACL: DESCRIBE on the topic, else left out
			}
			j, ok := at[tp.Topic]
			if !ok {
				j = len(st.Topics)
				at[tp.Topic] = j
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic = tp.Topic
				st.Topics = append(st.Topics, t)
			}
			st.Topics[j].Partitions = append(st.Topics[j].Partitions, tp.Partition)
		}
	}
	return netio.Reply{Response: resp}
}
