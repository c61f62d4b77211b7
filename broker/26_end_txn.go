package broker

// EndTxn (key 26), v0-v5: the transaction coordinator writes PrepareCommit or PrepareAbort
// (answered once durable and replicated), then the markers and the completion in the background
// (txncoord.EndTxn). v5 is transaction version 2 (KIP-890 part 2: the epoch is bumped at every
// end and the response carries the producer id and the new epoch); v0-v4 are version 0, as
// Kafka decides from the request version. ACL: WRITE on the transactional id. PRODUCER_FENCED
// becomes INVALID_PRODUCER_EPOCH below v2 (KIP-588).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/txncoord"
)

func init() {
	register(apiDef{key: 26, min: 0, max: 5, handle: handleEndTxn})
}

func handleEndTxn(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.SetVersion(r.Version)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if e := b.authorize(r, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID); e != nil { // ACL: WRITE on the transactional id
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	tv := int16(0)
	if r.Version >= 5 {
		tv = 2
	}
	return netio.Reply{Deferred: func() netio.Reply {
		res := b.txns.coord.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, tv)
		if res.Err != nil {
			resp.ErrorCode = txncoord.ResponseError(res.Err, 26, r.Version).Code
		}
		if r.Version >= 5 {
			resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.Epoch
		}
		return netio.Reply{Response: resp}
	}}
}
