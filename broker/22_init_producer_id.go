package broker

// InitProducerId (key 22), v0-v5, for idempotent producers: every call without a transactional
// id gets a fresh producer id (never reused, across restarts too) with epoch 0. Transactions
// are not supported: a transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
// which clients report as fatal with that name rather than retrying forever.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio"
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
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return netio.Reply{Response: resp}
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
