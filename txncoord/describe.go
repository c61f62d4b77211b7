package txncoord

import (
	"regexp"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Description is DescribeTransactions' answer for one transactional id.
type Description struct {
	TransactionalID string
	Err             *kerr.Error
	State           State
	ProducerID      int64
	Epoch           int16
	TimeoutMs       int32
	StartMs         int64
	Partitions      []TopicPartition
}

// Describe is DescribeTransactions for one id: TRANSACTIONAL_ID_NOT_FOUND when it has no state
// (or is expiring), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as for every request.
func (c *Coordinator) Describe(txnID string) Description {
	d := Description{TransactionalID: txnID, ProducerID: -1, Epoch: -1}
	if txnID == "" {
		d.Err = kerr.InvalidRequest
		return d
	}
	_, m, e := c.lookup(txnID)
	if e != nil {
		d.Err = e
		return d
	}
	if m == nil {
		d.Err = kerr.TransactionalIDNotFound
		return d
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead || m.state == Dead {
		d.Err = kerr.TransactionalIDNotFound
		return d
	}
	d.State, d.ProducerID, d.Epoch = m.state, m.producerID, m.producerEpoch
	d.TimeoutMs, d.StartMs = m.timeoutMs, m.startMs
	d.Partitions = sortedPartitions(m.partitions)
	return d
}

// ListFilter is ListTransactions' filters (empty: no filter).
type ListFilter struct {
	States      []string
	ProducerIDs []int64
	// MinDurationMs (v1+, KIP-994): only transactions started at least this long ago; <0: any.
	MinDurationMs int64
	// IDPattern (v2+, KIP-1152): only ids the regular expression matches (nil: any). The
	// broker compiles the request's pattern (RE2 syntax; Kafka uses Java's, which agrees on
	// the common constructs) and answers INVALID_REQUEST when it does not compile.
	IDPattern *regexp.Regexp
}

// Listing is one transaction in ListTransactions.
type Listing struct {
	TransactionalID string
	ProducerID      int64
	State           State
}

// List is ListTransactions over the partitions this coordinator leads. Unknown state names
// are returned (the response's unknown_state_filters) and match nothing;
// COORDINATOR_LOAD_IN_PROGRESS while any partition loads, as Kafka answers.
func (c *Coordinator) List(f ListFilter) ([]Listing, []string, *kerr.Error) {
	var unknown []string
	states := map[State]bool{}
	for _, n := range f.States {
		if s, ok := StateFromName(n); ok {
			states[s] = true
		} else {
			unknown = append(unknown, n)
		}
	}
	if len(f.States) > 0 && len(states) == 0 {
		return nil, unknown, nil
	}
	pids := map[int64]bool{}
	for _, p := range f.ProducerIDs {
		pids[p] = true
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, unknown, kerr.CoordinatorNotAvailable
	}
	for _, op := range c.owned {
		if op.loading {
			c.mu.Unlock()
			return nil, unknown, kerr.CoordinatorLoadInProgress
		}
	}
	c.mu.Unlock()
	now := c.nowMs()
	var out []Listing
	for _, op := range c.loadedParts() {
		for _, m := range c.txnsOf(op) {
			m.mu.Lock()
			keep := !m.dead && m.state != Dead &&
				(len(states) == 0 || states[m.state]) &&
				(len(pids) == 0 || pids[m.producerID]) &&
				(f.MinDurationMs < 0 || now-m.startMs >= f.MinDurationMs) &&
				(f.IDPattern == nil || f.IDPattern.MatchString(m.id))
			l := Listing{TransactionalID: m.id, ProducerID: m.producerID, State: m.state}
			m.mu.Unlock()
			if keep {
				out = append(out, l)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out, unknown, nil
}
