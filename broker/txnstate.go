package broker

// Wiring of the transaction coordinator (package txncoord): its configuration from the
// broker's keys, its store (__transaction_state over the broker's partition logs), its producer
// ids (the idempotent producers' blocks, producerids.go) and its marker writer.
//
// __transaction_state is created on first use (FindCoordinator for a transactional id) with
// transaction.state.log.num.partitions partitions, cleanup.policy=compact, no time retention,
// transaction.state.log.segment.bytes and min.insync.replicas = transaction.state.log.min.isr
// (capped at the replication factor). Its replication factor is
// transaction.state.log.replication.factor (3), capped at the unfenced brokers registered when
// it is created, with a warning (internalrf.go; Kafka 4 would answer COORDINATOR_NOT_AVAILABLE
// until that many brokers are alive). A single broker (no controller.quorum.voters) creates it
// with replication factor 1.
//
// The coordinator leads the partitions of __transaction_state this broker leads: the replica
// manager's reconcile calls txnImageChanged after applying the leadership of an image, exactly
// where the group coordinator is elected (groupsImageChanged). The partition's leader epoch is
// the coordinator epoch written in markers.
//
// Markers (txnMarkers): a partition this broker leads gets its marker through the
// WriteTxnMarkers handler's own code path (appendTxnMarker, then the wait for the ISR); other
// partitions are grouped per leader and queued on that leader's marker queue (txnmarkers.go),
// whose sender puts the markers of many transactions in one WriteTxnMarkers request (v2 when
// one needs transaction version 2, else v1) over the inter-broker listener with its security
// (replication.PeerConn, one connection per peer, one request at a time on it). Errors are
// handed back per partition; txncoord retries.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/internal/clock"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/replication"
	"github.com/weir-mq/weir/txncoord"
)

// txnStateTopic is Kafka's internal topic of transaction state.
const txnStateTopic = "__transaction_state"

// txnState is the broker's transaction coordinator (embedded in Broker as txns).
type txnState struct {
	coord *txncoord.Coordinator
	// version is the transaction.version feature level finalized in ApiVersions: the level
	// UpdateFeatures stored in the metadata log (features.go), else
	// internal.transaction.version.
	version atomic.Int32
	// createMu serializes the creation of __transaction_state; ready is set once it exists.
	createMu sync.Mutex
	ready    atomic.Bool
	// peersMu guards peers: the connections to other brokers that markers and verifications
	// are sent on (one per peer and purpose, so a verification for a produce never waits behind
	// a marker waiting for its ISR).
	peersMu sync.Mutex
	peers   map[peerKey]*markerPeer
	// verifiedMu guards verified: the (partition, producer) pairs whose current transaction the
	// coordinator confirmed includes the partition, with the producer epoch (txnverify.go).
	verifiedMu sync.Mutex
	verified   map[txnVerifyKey]verifiedTxn
	// queuesMu guards queues: the marker queue of each destination broker (txnmarkers.go);
	// nil once closed. senders counts their sender goroutines; markerRequests the
	// WriteTxnMarkers requests sent and markersSent the markers in them. ctx is cancelled by
	// closeTxns.
	queuesMu       sync.Mutex
	queues         map[int32]*markerQueue
	senders        sync.WaitGroup
	markerRequests atomic.Int64
	markersSent    atomic.Int64
	ctx            context.Context
	cancel         context.CancelFunc
	// seqMu serializes the group coordinator's transactional appends (offsetsLog.AppendTxn):
	// the sequence a batch gets is read from the partition's producer state and must still be
	// the last one when the batch is appended.
	seqMu sync.Mutex
}

// peerKey is a peer broker and the purpose of the connection.
type peerKey struct {
	id      int32
	purpose peerPurpose
}

// peerPurpose separates the connections to one peer.
type peerPurpose int8

const (
	peerMarkers peerPurpose = iota // WriteTxnMarkers
	peerVerify                     // AddPartitionsToTxn verify_only
)

// markerPeer is one connection to another broker for WriteTxnMarkers.
type markerPeer struct {
	// mu guards conn and is held for one request at a time (the connection is not pipelined).
	mu   sync.Mutex
	conn *replication.PeerConn
	addr string
}

// openTxns creates the transaction coordinator; startTxns starts its background scans.
func (b *Broker) openTxns() error {
	tv := int16(keyTxnVersion.Get(b.cfg))
	c, err := txncoord.New(txncoord.Config{
		Store:                 &txnStore{b: b},
		Clock:                 wallClock{}, // transaction timeouts and id expiry: wall time, as Kafka
		IDs:                   txnProducerIDs{b: b},
		Markers:               &txnMarkers{b: b},
		Logger:                slog.Default().With("component", "txncoord"),
		MaxTimeout:            keyTxnMaxTimeout.Get(b.cfg),
		IDExpiration:          keyTxnIDExpiration.Get(b.cfg),
		AbortTimedOutInterval: keyTxnAbortTimedOutInterval.Get(b.cfg),
		RemoveExpiredInterval: keyTxnRemoveExpiredInterval.Get(b.cfg),
		// The transaction.version level ApiVersions finalizes (internal.transaction.version,
		// 2 by default as on a new Kafka 4 cluster): the records written follow it as Kafka's
		// (value v1 at level 2). Txncoord reads 0 as "default", -1 as level 0.
		TransactionVersion: coordTxnVersion(tv),
		OffsetsPartitions:  (&offsetsStore{b: b}).Partitions(),
	})
	if err != nil {
		return err
	}
	b.txns.coord = c
	b.txns.version.Store(int32(tv))
	b.txns.peers = map[peerKey]*markerPeer{}
	b.txns.queues = map[int32]*markerQueue{}
	b.txns.ctx, b.txns.cancel = context.WithCancel(context.Background())
	b.txns.verified = map[txnVerifyKey]verifiedTxn{}
	return nil
}

// coordTxnVersion is txncoord.Config.TransactionVersion for a feature level.
func coordTxnVersion(level int16) int16 {
	if level == 0 {
		return -1
	}
	return level
}

func (b *Broker) startTxns() { b.txns.coord.Start() }

func (b *Broker) closeTxns() {
	if b.txns.coord != nil {
		b.txns.coord.Close()
	}
	if b.txns.cancel != nil {
		b.txns.cancel() // a request in flight fails at once; the senders empty their queues
	}
	b.txns.queuesMu.Lock()
	b.txns.queues = nil
	b.txns.queuesMu.Unlock()
	b.txns.senders.Wait()
	b.txns.peersMu.Lock()
	for id, p := range b.txns.peers {
		p.mu.Lock()
		if p.conn != nil {
			_ = p.conn.Close()
			p.conn = nil
		}
		p.mu.Unlock()
		delete(b.txns.peers, id)
	}
	b.txns.peersMu.Unlock()
}

// TxnCoordinator exposes the transaction coordinator (tests, tools).
func (b *Broker) TxnCoordinator() *txncoord.Coordinator { return b.txns.coord }

// txnImageChanged gives the transaction coordinator the __transaction_state partitions this
// broker leads (at their leader epoch) and takes away the others.
func (b *Broker) txnImageChanged(img *controller.Image) {
	c := b.txns.coord
	if c == nil {
		return
	}
	t, ok := img.Topics[txnStateTopic]
	for p := int32(0); p < c.Partitions(); p++ {
		if ok && p < int32(len(t.Partitions)) && t.Partitions[p].Leader == b.nodeID {
			if _, hosted := b.logs.Log(engine.TopicPartition{Topic: txnStateTopic, Partition: p}); hosted {
				c.Elect(p, t.Partitions[p].LeaderEpoch)
				continue
			}
		}
		c.Resign(p)
	}
}

// ensureTxnStateTopic returns __transaction_state, creating it on first use.
func (b *Broker) ensureTxnStateTopic() (Topic, error) {
	if b.txns.ready.Load() {
		if t, ok := b.topics.get(txnStateTopic); ok {
			return t, nil
		}
		b.txns.ready.Store(false)
	}
	rf := b.internalTopicRF(txnStateTopic, "transaction.state.log.replication.factor", keyTxnStateReplicationFactor.Get(b.cfg)) // internalrf.go
	if err := b.internalTopicAwaitsBrokers(txnStateTopic, "transaction.state.log.replication.factor", rf); err != nil {
		return Topic{}, err
	}
	b.txns.createMu.Lock()
	defer b.txns.createMu.Unlock()
	if t, ok := b.topics.get(txnStateTopic); ok {
		b.rm.reconcile()
		b.txns.ready.Store(true)
		return t, nil
	}
	minISR := min(keyTxnStateMinISR.Get(b.cfg), rf)
	t, err := b.createTopic(txnStateTopic, int32(keyTxnStateNumPartitions.Get(b.cfg)), int16(rf), nil, map[string]string{
		"cleanup.policy":      "compact",
		"retention.ms":        "-1",
		"segment.bytes":       strconv.Itoa(keyTxnStateSegmentBytes.Get(b.cfg)),
		"min.insync.replicas": strconv.Itoa(minISR),
	}, nil)
	if errors.Is(err, kerr.TopicAlreadyExists) {
		if t, ok := b.topics.get(txnStateTopic); ok {
			return t, nil
		}
	}
	if err != nil {
		return t, b.internalTopicUnavailable(txnStateTopic, "transaction.state.log.replication.factor", rf, err)
	}
	b.txns.ready.Store(true)
	return t, nil
}

// txnStore is txncoord.Store over the broker's logs. It never creates the topic: the
// coordinator is elected only for partitions that exist and are led here.
type txnStore struct{ b *Broker }

func (s *txnStore) Partitions() int32 {
	if t, ok := s.b.topics.get(txnStateTopic); ok {
		return t.Partitions
	}
	return int32(keyTxnStateNumPartitions.Get(s.b.cfg))
}

func (s *txnStore) Log(p int32) (txncoord.Log, error) {
	t, ok := s.b.topics.get(txnStateTopic)
	if !ok || p < 0 || p >= t.Partitions {
		return nil, fmt.Errorf("%s-%d does not exist: %w", txnStateTopic, p, kerr.UnknownTopicOrPartition)
	}
	l, ok := s.b.logs.Log(engine.TopicPartition{Topic: txnStateTopic, Partition: p})
	if !ok {
		return nil, fmt.Errorf("%s-%d has no log: %w", txnStateTopic, p, kerr.UnknownTopicOrPartition)
	}
	// Kafka appends to __transaction_state with acks=-1: min.insync.replicas applies.
	ol := offsetsLog{l: l, b: s.b, minISR: keyMinInsyncReplicas.Topic(s.b.cfg, t.Configs)}
	if s.b.faultDir != "" {
		return faultTxnLog{ol}, nil // test crash points (faultpoints.go)
	}
	return ol, nil
}

// txnProducerIDs is txncoord.ProducerIDSource over the broker's producer id blocks.
type txnProducerIDs struct{ b *Broker }

func (s txnProducerIDs) NextProducerID() (int64, error) {
	id, err := s.b.producers.allocate()
	if err != nil {
		if s.b.clustered() {
			// A block from the controller could not be had now: the client retries.
			return -1, fmt.Errorf("allocating a producer id: %v: %w", err, kerr.CoordinatorLoadInProgress)
		}
		return -1, fmt.Errorf("allocating a producer id: %w", err)
	}
	return id, nil
}

// AppendTxn is coordinator.TxnAppender: a transactional offset commit appended as Kafka's
// coordinator-origin append. The engine checks sequences on every producer batch; the group
// coordinator writes each of its batches at sequence 0, so the batch is given the sequence
// after the producer's last one on this partition (same epoch), its CRC recomputed, and
// appended under txnState.seqMu so no other such batch comes between. The producer epoch is
// checked by the engine as for any batch (INVALID_PRODUCER_EPOCH for an older one), and the
// batch opens the producer's transaction on the partition (the LSO stays below it).
func (o offsetsLog) AppendTxn(batch []byte) (int64, error) {
	h, err := record.ParseHeader(batch)
	if err != nil {
		return 0, fmt.Errorf("transactional offset batch: %v: %w", err, kerr.CorruptMessage)
	}
	o.b.txns.seqMu.Lock()
	defer o.b.txns.seqMu.Unlock()
	seq := int32(0)
	for _, p := range o.l.Producers() {
		if p.ProducerID == h.ProducerID && p.Epoch == h.ProducerEpoch && p.LastSequence >= 0 {
			seq = nextSequence(p.LastSequence)
			break
		}
	}
	if seq != h.BaseSequence {
		binary.BigEndian.PutUint32(batch[record.BaseSequenceOffset:], uint32(seq))
		record.SetChecksum(batch)
	}
	return o.Append(batch)
}

// nextSequence is the sequence after last, wrapping after MaxInt32 to 0 as Kafka does.
func nextSequence(last int32) int32 {
	if last == math.MaxInt32 {
		return 0
	}
	return last + 1
}

// txnMarkers is txncoord.MarkerWriter.
type txnMarkers struct{ b *Broker }

// markerRequestTimeout bounds one WriteTxnMarkers round trip to a peer.
const markerRequestTimeout = 35 * time.Second

func (w *txnMarkers) WriteMarkers(ctx context.Context, m txncoord.Marker) []error {
	b := w.b
	errs := make([]error, len(m.Partitions))
	img := b.ctl.Image()
	byLeader := map[int32][]int{}
	for i, tp := range m.Partitions {
		t, ok := img.Topics[tp.Topic]
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			errs[i] = txncoord.ErrPartitionGone
			continue
		}
		leader := t.Partitions[tp.Partition].Leader
		if leader < 0 {
			errs[i] = fmt.Errorf("%s-%d has no leader: %w", tp.Topic, tp.Partition, kerr.NotLeaderForPartition)
			continue
		}
		byLeader[leader] = append(byLeader[leader], i)
	}
	// Per leader in turn (the crash tests' fault points sit between them); the remote markers go
	// through their broker's queue, where they are batched with other transactions' markers.
	if len(byLeader) > 0 {
		b.fault(faultMarkersBefore)
	}
	sent := 0
	for leader, idx := range byLeader {
		if sent++; sent > 1 {
			b.fault(faultMarkersBetween)
		}
		if leader == b.nodeID {
			w.writeLocal(ctx, m, idx, errs)
		} else {
			w.writeRemote(ctx, leader, m, idx, errs)
		}
	}
	return errs
}

// writeLocal appends the marker on the partitions of idx this broker leads, then waits for
// each to be replicated (or durable on a single broker), as the WriteTxnMarkers handler does.
func (w *txnMarkers) writeLocal(ctx context.Context, m txncoord.Marker, idx []int, errs []error) {
	type waiting struct {
		i  int
		pm pendingMarker
	}
	var pend []waiting
	// One flush round covers every marker (engine.FlushHold, as Produce does).
	var hold engine.FlushHold
	defer hold.Release()
	for _, i := range idx {
		tp := m.Partitions[i]
		t, ok := w.b.topics.get(tp.Topic)
		if !ok || tp.Partition >= t.Partitions {
			errs[i] = txncoord.ErrPartitionGone
			continue
		}
		if rep := w.b.rm.get(engine.TopicPartition{Topic: t.Name, Partition: tp.Partition}); rep != nil && rep.log != nil {
			hold.Add(rep.log)
		}
		pm, err := w.b.appendTxnMarker(t, tp.Partition, m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit, m.TransactionVersion)
		if err != nil {
			errs[i] = err
			continue
		}
		pend = append(pend, waiting{i, pm})
	}
	hold.Release()
	if len(pend) == 0 {
		return
	}
	timer := time.NewTimer(txnMarkerWait)
	defer timer.Stop()
	for _, p := range pend {
		errs[p.i] = p.pm.wait(timer.C, ctx.Done())
	}
}

// writeRemote queues m's marker for the partitions of idx, which broker leader leads, on that
// broker's marker queue (txnmarkers.go: one request carries the markers of many transactions)
// and waits for their answers or ctx.
func (w *txnMarkers) writeRemote(ctx context.Context, leader int32, m txncoord.Marker, idx []int, errs []error) {
	rm := kmsg.NewWriteTxnMarkersRequestMarker()
	rm.ProducerID, rm.ProducerEpoch, rm.Committed = m.ProducerID, m.ProducerEpoch, m.Commit
	rm.CoordinatorEpoch = m.CoordinatorEpoch
	rm.TransactionVersion = int8(m.TransactionVersion)
	topicAt := map[string]int{}
	parts := make([]txncoord.TopicPartition, len(idx))
	for k, i := range idx {
		tp := m.Partitions[i]
		parts[k] = tp
		j, ok := topicAt[tp.Topic]
		if !ok {
			j = len(rm.Topics)
			topicAt[tp.Topic] = j
			rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			rt.Topic = tp.Topic
			rm.Topics = append(rm.Topics, rt)
		}
		rm.Topics[j].Partitions = append(rm.Topics[j].Partitions, tp.Partition)
	}
	qm := &queuedMarker{ctx: ctx, m: rm, parts: parts, size: markerSize(&rm), done: make(chan []error, 1)}
	fail := func(err error) {
		for _, i := range idx {
			errs[i] = err
		}
	}
	if err := w.b.queueMarker(leader, qm); err != nil {
		fail(err)
		return
	}
	select {
	case res := <-qm.done:
		for k, i := range idx {
			errs[i] = res[k]
		}
	case <-ctx.Done():
		fail(fmt.Errorf("marker to broker %d abandoned: %v: %w", leader, ctx.Err(), kerr.NotCoordinator))
	}
}

// send sends a WriteTxnMarkers request to broker id at addr on the inter-broker listener.
func (w *txnMarkers) send(ctx context.Context, id int32, addr string, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	resp, err := w.b.sendPeer(ctx, peerKey{id, peerMarkers}, addr, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.WriteTxnMarkersResponse), nil
}

// sendPeer sends req to the peer broker of key at addr on the inter-broker listener, dialing
// when needed (one connection per peer and purpose, one request at a time on it).
func (b *Broker) sendPeer(ctx context.Context, key peerKey, addr string, req kmsg.Request) (kmsg.Response, error) {
	b.txns.peersMu.Lock()
	p := b.txns.peers[key]
	if p == nil {
		p = &markerPeer{}
		b.txns.peers[key] = p
	}
	b.txns.peersMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil && (p.addr != addr || p.conn.Expired()) {
		_ = p.conn.Close()
		p.conn = nil
	}
	if p.conn == nil {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := replication.DialPeer(dctx, addr, "weir-txn-"+strconv.Itoa(int(b.nodeID)), b.interBroker)
		cancel()
		if err != nil {
			return nil, err
		}
		p.conn, p.addr = c, addr
	}
	deadline := time.Now().Add(markerRequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn := p.conn
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() }) // a resigned coordinator or a shutdown does not wait for the answer
	resp, err := conn.Request(req, deadline)
	stop()
	if err != nil {
		_ = p.conn.Close()
		p.conn = nil
		return nil, err
	}
	return resp, nil
}

// verifyTxnPartition asks the transaction coordinator of txnID whether tp is in the producer's
// ongoing transaction (KIP-890 part 1: AddPartitionsToTxn verify_only), or with add to add it
// (KIP-890 part 2, for a transaction version 2 client: Produce v12+, TxnOffsetCommit v5+): the
// coordinator here when this broker leads the id's __transaction_state partition, else the
// leader over the inter-broker listener (AddPartitionsToTxn v4, v5 with add). nil when it is
// (or was added); the coordinator's error
// otherwise (TRANSACTION_ABORTABLE: not in the transaction; NOT_COORDINATOR and the like while
// the coordinator moves; NETWORK_EXCEPTION when the leader cannot be reached).
func (b *Broker) verifyTxnPartition(ctx context.Context, txnID string, pid int64, epoch int16, tp txncoord.TopicPartition, add bool) *kerr.Error {
	if !add {
		return b.askTxnCoordinator(ctx, txnID, pid, epoch, tp, false)
	}
	// An add racing the previous transaction's markers (CONCURRENT_TRANSACTIONS) is retried
	// here for a short while, as Kafka does since KAFKA-18654, so the client's first produce of
	// its next transaction is not sent back to wait out its own retry backoff.
	backoff := keyAddPartitionsRetryBackoff.Get(b.cfg)
	deadline := time.Now().Add(keyAddPartitionsRetryBackoffMax.Get(b.cfg))
	for {
		e := b.askTxnCoordinator(ctx, txnID, pid, epoch, tp, true)
		if e != kerr.ConcurrentTransactions || time.Now().Add(backoff).After(deadline) {
			return e
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return e
		case <-t.C:
		}
	}
}

// askTxnCoordinator is one verify_only check or add of verifyTxnPartition.
func (b *Broker) askTxnCoordinator(ctx context.Context, txnID string, pid int64, epoch int16, tp txncoord.TopicPartition, add bool) *kerr.Error {
	t, ok := b.topics.get(txnStateTopic)
	if !ok {
		return kerr.CoordinatorNotAvailable
	}
	p := b.txns.coord.PartitionFor(txnID)
	if p >= int32(len(t.Assign)) {
		return kerr.CoordinatorNotAvailable
	}
	leader := t.Assign[p].Leader
	switch {
	case leader < 0:
		return kerr.CoordinatorNotAvailable
	case leader == b.nodeID:
		tv := int16(0)
		if add {
			tv = 2
		}
		return b.txns.coord.AddPartitions(txnID, pid, epoch, []txncoord.TopicPartition{tp}, !add, tv)[tp]
	}
	img := b.ctl.Image()
	e, ok := b.brokerAddr(img, leader, b.interBrokerName)
	if !ok {
		return kerr.CoordinatorNotAvailable
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	if add {
		req.Version = 5 // the coordinator adds for a transaction-version-2 client
	}
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = txnID, pid, epoch, !add
	rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
	tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{rt}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
	r, err := b.sendPeer(ctx, peerKey{leader, peerVerify}, fmt.Sprintf("%s:%d", e.Host, e.Port), req)
	if err != nil {
		return kerr.NetworkException
	}
	resp := r.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return kerrFor(resp.ErrorCode)
	}
	for _, st := range resp.Transactions {
		for _, tt := range st.Topics {
			for _, sp := range tt.Partitions {
				if tt.Topic == tp.Topic && sp.Partition == tp.Partition {
					if sp.ErrorCode == 0 {
						return nil
					}
					return kerrFor(sp.ErrorCode)
				}
			}
		}
	}
	return kerr.UnknownServerError
}

// kerrFor is the *kerr.Error of a non-zero error code (UNKNOWN_SERVER_ERROR for a code kerr
// does not know).
func kerrFor(code int16) *kerr.Error {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke
	}
	return kerr.UnknownServerError
}

// wallClock is txncoord's clock: the broker's wall clock (internal/clock). Transaction timeouts
// and transactional-id expiry compare it with timestamps stored in __transaction_state, as
// Kafka's TransactionStateManager uses Time.milliseconds().
type wallClock struct{}

func (wallClock) Now() time.Time { return clock.Now() }
