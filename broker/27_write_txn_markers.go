package broker

// WriteTxnMarkers (key 27), v1-v2 (Kafka 4 removed v0): the transaction coordinator asks the
// leaders of a transaction's partitions to write its COMMIT or ABORT marker. It is an
// inter-broker API: CLUSTER_ACTION on the cluster is required (else every partition answers
// CLUSTER_AUTHORIZATION_FAILED, as Kafka). Each marker is appended by the partition's leader
// (engine.Log.AppendMarker: the producer's epoch and the coordinator epoch are checked,
// INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED; v2's transaction_version 2 also
// refuses the same epoch while a transaction is ongoing) and answered once replicated to the ISR
// (acks=all, bounded by min.insync.replicas like a produce) or durable on a single broker.
// A partition this broker does not lead answers NOT_LEADER_OR_FOLLOWER, an unknown one
// UNKNOWN_TOPIC_OR_PARTITION. Markers are accepted on internal topics (the coordinator writes
// them to __consumer_offsets), and a marker there is handed to the group coordinator
// (CompleteTxn: pending transactional offsets committed or dropped) before the answer.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 27, min: 1, max: 2, handle: handleWriteTxnMarkers})
}

// txnMarkerWait bounds how long a marker waits for the ISR (Kafka's request.timeout.ms for
// the markers' append).
const txnMarkerWait = 30 * time.Second

type pendingMarker struct {
	part   *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
	rep    *replica
	upTo   int64
	epoch  int32
	minISR int
}

func handleWriteTxnMarkers(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	resp.SetVersion(r.Version)
	authErr := b.authorizeCluster(r, acl.OpClusterAction) // ACL: CLUSTER_ACTION on the cluster
	var pending []pendingMarker
	// One flush round covers every marker of the request (engine.FlushHold, as Produce does).
	var hold engine.FlushHold
	defer hold.Release()
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	for i := range req.Markers {
		m := &req.Markers[i]
		sm := &resp.Markers[i]
		*sm = kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = m.ProducerID
		sm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for j := range m.Topics {
			rt := &m.Topics[j]
			st := &sm.Topics[j]
			*st = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			st.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(rt.Partitions))
			t, found := b.topics.get(rt.Topic)
			for k, p := range rt.Partitions {
				sp := &st.Partitions[k]
				*sp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = p
				if authErr != nil {
					sp.ErrorCode = authErr.Code
					continue
				}
				if !found || p < 0 || p >= t.Partitions {
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
					continue
				}
				if rep := b.rm.get(engine.TopicPartition{Topic: t.Name, Partition: p}); rep != nil && rep.log != nil {
					hold.Add(rep.log)
				}
				pm, err := b.appendTxnMarker(t, p, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Committed, int16(m.TransactionVersion))
				if err != nil {
					sp.ErrorCode = errorCode(err)
					continue
				}
				pm.part = sp
				pending = append(pending, pm)
			}
		}
	}
	hold.Release()
	if len(pending) == 0 {
		return netio.Reply{Response: resp, NoAlias: true}
	}
	var closing <-chan struct{}
	if r.Conn != nil {
		closing = r.Conn.Closing
	}
	return netio.Reply{NoAlias: true, Deferred: func() netio.Reply {
		t := time.NewTimer(txnMarkerWait)
		defer t.Stop()
		for _, p := range pending {
			if err := p.wait(t.C, closing); err != nil {
				p.part.ErrorCode = errorCode(err)
			}
		}
		return netio.Reply{Response: resp}
	}}
}

// appendTxnMarker appends one transaction marker on partition p of t, which this broker must
// lead (NOT_LEADER_OR_FOLLOWER otherwise; NOT_ENOUGH_REPLICAS when the ISR is below
// min.insync.replicas), and returns what to wait for. A marker on __consumer_offsets is handed
// to the group coordinator (CompleteTxn) right after the append, before anyone is answered, so
// the transaction's pending offsets are committed or dropped before the producer can start its
// next transaction. Both the WriteTxnMarkers handler and the local transaction coordinator
// (txnstate.go) write markers through here.
func (b *Broker) appendTxnMarker(t Topic, p int32, producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool, txnVersion int16) (pendingMarker, error) {
	rep := b.rm.get(engine.TopicPartition{Topic: t.Name, Partition: p})
	if rep == nil {
		return pendingMarker{}, fmt.Errorf("%s-%d is not hosted here: %w", t.Name, p, kerr.NotLeaderForPartition)
	}
	minISR := 1
	if !rep.local.Load() {
		minISR = rep.effectiveMinISR(keyMinInsyncReplicas.Topic(b.cfg, t.Configs))
		if rep.isrSize() < minISR {
			return pendingMarker{}, fmt.Errorf("%s-%d has fewer in-sync replicas than %d: %w", t.Name, p, minISR, kerr.NotEnoughReplicas)
		}
	}
	b.fault(faultMarkerAppendBefore)
	info, epoch, err := rep.appendMarkerAsLeader(producerID, producerEpoch, coordinatorEpoch, commit, txnVersion)
	if err != nil {
		return pendingMarker{}, err
	}
	b.fault(faultMarkerAppendAfter)
	b.forgetTxnVerification(engine.TopicPartition{Topic: t.Name, Partition: p}, producerID)
	if t.Name == offsetsTopic && b.groups.coord != nil {
		b.groups.coord.CompleteTxn(p, producerID, commit, info.LastOffset)
	}
	return pendingMarker{rep: rep, upTo: info.LastOffset + 1, epoch: epoch, minISR: minISR}, nil
}

// wait blocks until the marker is replicated to the ISR (a single broker: durable), the timer
// fires or closing is closed.
func (p pendingMarker) wait(timer <-chan time.Time, closing <-chan struct{}) error {
	if p.rep.local.Load() {
		return p.rep.log.AwaitDurable(p.upTo)
	}
	return p.rep.waitCommitted(p.upTo, p.epoch, p.minISR, timer, closing)
}

// appendMarkerAsLeader appends a transaction marker if this broker leads the partition, holding
// the role for the duration of the append. It returns the leader epoch appended under.
func (r *replica) appendMarkerAsLeader(producerID int64, producerEpoch int16, coordinatorEpoch int32, commit bool, txnVersion int16) (engine.AppendInfo, int32, error) {
	r.roleMu.RLock()
	defer r.roleMu.RUnlock()
	r.mu.Lock()
	leading, epoch := r.leading, r.epoch
	r.mu.Unlock()
	if !leading {
		return engine.AppendInfo{}, -1, fmt.Errorf("this broker does not lead %s-%d: %w", r.tp.Topic, r.tp.Partition, kerr.NotLeaderForPartition)
	}
	info, err := r.log.AppendMarker(producerID, producerEpoch, coordinatorEpoch, commit, txnVersion)
	return info, epoch, err
}
