package broker

// InitProducerId (key 22), v0-v5. Without a transactional id (idempotent producers) every call
// gets a fresh producer id (never reused, across restarts too) with epoch 0; ACL IDEMPOTENT_WRITE
// on the cluster or WRITE on any topic. With one, the transaction coordinator (txncoord) answers
// (epoch bump, fencing, KIP-360 recovery with the v3+ expected producer id and epoch); ACL WRITE
// on the transactional id; PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH below v4 (KIP-588).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/txncoord"
)

func init() {
	register(apiDef{key: 22, min: 0, max: 5, handle: handleInitProducerID})
}

func handleInitProducerID(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.SetVersion(r.Version)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		id := *req.TransactionalID
		if e := b.authorize(r, acl.OpWrite, acl.ResourceTransactionalID, id); e != nil { // ACL: WRITE on the transactional id
			resp.ErrorCode = e.Code
			return netio.Reply{Response: resp}
		}
		var expected *txncoord.ProducerIDEpoch
		if r.Version >= 3 && req.ProducerID >= 0 && req.ProducerEpoch >= 0 {
			expected = &txncoord.ProducerIDEpoch{ProducerID: req.ProducerID, Epoch: req.ProducerEpoch}
		}
		timeout := req.TransactionTimeoutMillis
		return netio.Reply{Deferred: func() netio.Reply {
			res := b.txns.coord.InitProducerID(id, timeout, expected)
			if res.Err != nil {
				resp.ErrorCode = txncoord.ResponseError(res.Err, 22, r.Version).Code
				return netio.Reply{Response: resp}
			}
			resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.Epoch
			return netio.Reply{Response: resp}
		}}
	}
	if e := b.authorizeIdempotentProducer(r); e != nil { // ACL: IDEMPOTENT_WRITE on the cluster or WRITE on any topic
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	id, err := b.producers.allocate()
	if err != nil {
		resp.ErrorCode = kerr.KafkaStorageError.Code
		return netio.Reply{Response: resp}
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return netio.Reply{Response: resp}
}
