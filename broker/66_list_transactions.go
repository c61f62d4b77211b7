package broker

// ListTransactions (key 66), v0-v2: the transactions this broker coordinates
// (txncoord.List), filtered by state, producer id, v1's minimum duration (KIP-994) and v2's
// transactional id pattern (KIP-1152: a regular expression, RE2 syntax here where Kafka uses
// Java's; one that does not compile, or longer than 32767 bytes, answers INVALID_REQUEST).
// Unknown state names are returned in unknown_state_filters. ACL as Kafka: only the ids the
// principal may DESCRIBE are listed (no error for the others).

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/txncoord"
)

func init() {
	register(apiDef{key: 66, min: 0, max: 2, handle: handleListTransactions})
}

func handleListTransactions(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	resp.SetVersion(r.Version)
	f := txncoord.ListFilter{States: req.StateFilters, ProducerIDs: req.ProducerIDFilters, MinDurationMs: -1}
	if r.Version >= 1 {
		f.MinDurationMs = req.DurationFilterMillis
	}
	if r.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		if len(*req.TransactionalIDPattern) > 32767 {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return netio.Reply{Response: resp}
		}
		re, err := regexp.Compile(*req.TransactionalIDPattern)
		if err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			return netio.Reply{Response: resp}
		}
		f.IDPattern = re
	}
	list, unknown, e := b.txns.coord.List(f)
	resp.UnknownStateFilters = unknown
	if e != nil {
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	for _, l := range list {
		if !b.authorized(r, acl.OpDescribe, acl.ResourceTransactionalID, l.TransactionalID) { // ACL: DESCRIBE on each transactional id
			continue
		}
		ts := kmsg.NewListTransactionsResponseTransactionState()
		ts.TransactionalID, ts.ProducerID, ts.TransactionState = l.TransactionalID, l.ProducerID, l.State.String()
		resp.TransactionStates = append(resp.TransactionStates, ts)
	}
	return netio.Reply{Response: resp}
}
