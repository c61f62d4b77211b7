package broker

// AddOffsetsToTxn (key 25), v0-v4: the transaction coordinator adds the group's
// __consumer_offsets partition to the transaction (txncoord.AddOffsets). ACL: WRITE on the
// transactional id, then READ on the group (GROUP_AUTHORIZATION_FAILED), as Kafka.
// PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH below v2 (KIP-588).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/txncoord"
)

func init() {
	register(apiDef{key: 25, min: 0, max: 4, handle: handleAddOffsetsToTxn})
}

func handleAddOffsetsToTxn(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.SetVersion(r.Version)
	if e := b.authorize(r, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID); e != nil { // ACL: WRITE on the transactional id
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	if e := b.authorize(r, acl.OpRead, acl.ResourceGroup, req.Group); e != nil { // ACL: READ on the group
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	return netio.Reply{Deferred: func() netio.Reply {
		if e := b.txns.coord.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, 0); e != nil {
			resp.ErrorCode = txncoord.ResponseError(e, 25, r.Version).Code
		}
		return netio.Reply{Response: resp}
	}}
}
