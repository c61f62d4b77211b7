package broker

// Marker batching per destination broker (Kafka's TransactionMarkerChannelManager): markers for
// partitions led by another broker are not sent one WriteTxnMarkers request per transaction but
// queued per destination broker; one sender goroutine per destination (started when its queue
// gets work, gone when it is empty) drains the queue into requests of many markers (several
// transactions), bounded by maxMarkersPerRequest markers and maxMarkerRequestBytes estimated
// bytes, one request in flight per destination (the peer connection is not pipelined). While
// a request is in flight the markers of other transactions accumulate, so under load one
// request carries what arrived meanwhile. Each transaction's goroutine in txncoord waits for
// its own answers, one error per partition, and retries (NOT_LEADER_OR_FOLLOWER, a network
// error, ...) exactly as before; a waiter whose coordinator partition is resigned stops waiting
// and its queued marker is dropped before it is sent.
//
// Goroutines: the senders, tracked by txnState.senders and stopped by closeTxns (their context
// is cancelled, which closes the peer connection of a request in flight).

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/txncoord"
)

const (
	// maxMarkersPerRequest bounds the markers (transactions) of one WriteTxnMarkers request.
	maxMarkersPerRequest = 500
	// maxMarkerRequestBytes bounds the estimated size of one request; a single marker larger
	// than this (a transaction with very many partitions on one broker) is sent alone.
	maxMarkerRequestBytes = 1 << 20
)

// markerQueue is one destination broker's queue.
type markerQueue struct {
	// mu guards pending and running.
	mu      sync.Mutex
	pending []*queuedMarker
	// running is true while a sender goroutine drains the queue.
	running bool
}

// queuedMarker is one transaction's marker for the partitions one broker leads.
type queuedMarker struct {
	ctx   context.Context
	m     kmsg.WriteTxnMarkersRequestMarker
	parts []txncoord.TopicPartition // every partition of m, in any order
	size  int
	// done receives one error per parts entry (buffered: the sender never blocks).
	done chan []error
}

// markerSize estimates m's encoded size.
func markerSize(m *kmsg.WriteTxnMarkersRequestMarker) int {
	n := 8 + 2 + 1 + 4 + 1 + 4
	for _, t := range m.Topics {
		n += 2 + len(t.Topic) + 4 + 4*len(t.Partitions)
	}
	return n
}

// queueMarker queues qm for broker leader and starts the queue's sender if none runs.
func (b *Broker) queueMarker(leader int32, qm *queuedMarker) error {
	s := &b.txns
	s.queuesMu.Lock()
	if s.queues == nil {
		s.queuesMu.Unlock()
		return fmt.Errorf("the transaction coordinator is closed: %w", kerr.NotCoordinator)
	}
	q := s.queues[leader]
	if q == nil {
		q = &markerQueue{}
		s.queues[leader] = q
	}
	q.mu.Lock()
	q.pending = append(q.pending, qm)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		s.senders.Add(1)
	}
	s.queuesMu.Unlock()
	if start {
		go b.sendMarkers(leader, q)
	}
	return nil
}

// takeMarkers removes the next request's markers from q (nil, and the sender stops, when empty).
func (q *markerQueue) take() []*queuedMarker {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, size := 0, 0
	for n < len(q.pending) && n < maxMarkersPerRequest {
		if n > 0 && size+q.pending[n].size > maxMarkerRequestBytes {
			break
		}
		size += q.pending[n].size
		n++
	}
	if n == 0 {
		q.running = false
		return nil
	}
	batch := make([]*queuedMarker, n)
	copy(batch, q.pending)
	rest := copy(q.pending, q.pending[n:])
	clear(q.pending[rest:])
	q.pending = q.pending[:rest]
	return batch
}

// sendMarkers is the sender of broker leader's queue: it sends the queue's markers until the
// queue is empty.
func (b *Broker) sendMarkers(leader int32, q *markerQueue) {
	defer b.txns.senders.Done()
	for {
		batch := q.take()
		if batch == nil {
			return
		}
		b.sendMarkerBatch(leader, batch)
	}
}

// sendMarkerBatch sends one WriteTxnMarkers request with batch's markers to leader and hands
// each waiter its errors.
func (b *Broker) sendMarkerBatch(leader int32, batch []*queuedMarker) {
	live := batch[:0]
	for _, qm := range batch {
		if qm.ctx.Err() == nil { // a resigned coordinator's marker is not sent
			live = append(live, qm)
		}
	}
	if len(live) == 0 {
		return
	}
	failAll := func(err error) {
		for _, qm := range live {
			errs := make([]error, len(qm.parts))
			for i := range errs {
				errs[i] = err
			}
			qm.done <- errs
		}
	}
	e, ok := b.brokerAddr(b.ctl.Image(), leader, b.interBrokerName)
	if !ok {
		failAll(fmt.Errorf("broker %d is not registered: %w", leader, kerr.BrokerNotAvailable))
		return
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	for _, qm := range live {
		if qm.m.TransactionVersion >= 2 {
			req.Version = 2
		}
		req.Markers = append(req.Markers, qm.m)
	}
	addr := fmt.Sprintf("%s:%d", e.Host, e.Port)
	b.txns.markerRequests.Add(1)
	b.txns.markersSent.Add(int64(len(live)))
	resp, err := (&txnMarkers{b: b}).send(b.txns.ctx, leader, addr, req)
	if err != nil {
		failAll(fmt.Errorf("WriteTxnMarkers to broker %d (%s): %v: %w", leader, addr, err, kerr.NetworkException))
		return
	}
	used := make([]bool, len(resp.Markers))
	for i, qm := range live {
		// The answer of marker i is the i-th (weir and Kafka answer in request order), else the
		// first unused one of the same producer id.
		j := -1
		if i < len(resp.Markers) && resp.Markers[i].ProducerID == qm.m.ProducerID && !used[i] {
			j = i
		} else {
			for k := range resp.Markers {
				if !used[k] && resp.Markers[k].ProducerID == qm.m.ProducerID {
					j = k
					break
				}
			}
		}
		got := map[txncoord.TopicPartition]int16{}
		if j >= 0 {
			used[j] = true
			for _, st := range resp.Markers[j].Topics {
				for _, sp := range st.Partitions {
					got[txncoord.TopicPartition{Topic: st.Topic, Partition: sp.Partition}] = sp.ErrorCode
				}
			}
		}
		errs := make([]error, len(qm.parts))
		for k, tp := range qm.parts {
			code, ok := got[tp]
			switch {
			case !ok:
				errs[k] = fmt.Errorf("broker %d did not answer for %s-%d: %w", leader, tp.Topic, tp.Partition, kerr.UnknownServerError)
			case code != 0:
				errs[k] = kerrFor(code)
			}
		}
		qm.done <- errs
	}
}
