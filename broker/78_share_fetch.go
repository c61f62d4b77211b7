package broker

// ShareFetch (key 78), v1-v2 (Kafka 4.1 removed the early-access v0). A share consumer's
// fetch from the share partitions this broker leads (KIP-932; sharefetch.go, package
// sharepart): it acknowledges the records named in AcknowledgementBatches first (piggybacked
// acknowledgements, answered in AcknowledgeErrorCode), then acquires records of the session's
// partitions for the member and returns them with their AcquiredRecords (offset ranges and
// delivery counts). Share sessions: epoch 0 opens one (no acknowledgements allowed), later
// epochs add partitions (Topics) and remove them (ForgottenTopicsData), -1 acknowledges and
// closes it without fetching, releasing what the member still holds. MaxRecords bounds the
// records acquired (whole batches; ShareAcquireMode 1, KIP-1206, exactly), MaxBytes the bytes
// (the first partition with records gets at least one batch), and a fetch that acquires
// nothing parks until a partition's high watermark moves or records are released or expire,
// up to MaxWaitMs. The group config share.isolation.level read_committed reads up to the last
// stable offset and archives the records of aborted transactions. IsRenewAck (v2, KIP-1222):
// acknowledgements only (RENEW extends locks), no fetch. READ on the group (top-level GROUP_AUTHORIZATION_FAILED) and on each topic
// (TOPIC_AUTHORIZATION_FAILED), as KafkaApis checks them.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/sharepart"
)

func init() {
	register(apiDef{key: 78, min: 1, max: 2, handle: handleShareFetch})
}

// shareOpTimeout bounds a request's persister calls.
const shareOpTimeout = 30 * time.Second

func handleShareFetch(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ShareFetchRequest)
	v := r.Version
	group, member := derefString(req.GroupID), derefString(req.MemberID)
	if group == "" || member == "" {
		return shareFetchError(v, kerr.InvalidRequest)
	}
	if e := b.authorize(r, acl.OpRead, acl.ResourceGroup, group); e != nil { // ACL: READ on the group
		return shareFetchError(v, e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareOpTimeout)
	defer cancel()
	s := b.shares()
	b.sweepShareSessions(ctx)

	hasAcks := false
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			if len(req.Topics[i].Partitions[j].AcknowledgementBatches) > 0 {
				hasAcks = true
			}
		}
	}
	epoch := req.ShareSessionEpoch
	if epoch == sharepart.InitialEpoch && hasAcks {
		return shareFetchError(v, kerr.InvalidRequest)
	}
	renew := v >= 2 && req.IsRenewAck
	key := sharepart.SessionKey{Group: group, Member: member}
	upd := sharepart.SessionUpdate{Key: key, Epoch: epoch}
	if r.Conn != nil {
		upd.Conn = r.Conn.ID
		closing := r.Conn.Closing
		upd.Closed = func() bool { return isClosed(closing) }
	}
	if epoch != sharepart.FinalEpoch {
		for i := range req.Topics {
			rt := &req.Topics[i]
			for j := range rt.Partitions {
				upd.Add = append(upd.Add, sharepart.TopicPartition{TopicID: rt.TopicID, Partition: rt.Partitions[j].Partition})
			}
		}
		for i := range req.ForgottenTopicsData {
			ft := &req.ForgottenTopicsData[i]
			for _, p := range ft.Partitions {
				upd.Forget = append(upd.Forget, sharepart.TopicPartition{TopicID: ft.TopicID, Partition: p})
			}
		}
	}
	res, err := s.sessions.Update(upd, nil)
	for _, ev := range res.Evicted {
		b.releaseShareSession(ctx, ev.Key, ev.Parts)
	}
	if err != nil {
		var ke *kerr.Error
		if !errors.As(err, &ke) {
			ke = kerr.UnknownServerError
		}
		return shareFetchError(v, ke)
	}

	f := &shareFetchRun{b: b, r: r, req: req, version: v, group: group, member: member,
		denied: b.topicDenied(r, acl.OpRead), lockMs: int32(b.shareConfig(group).LockDuration.Milliseconds())}
	if r.Conn != nil {
		f.listener = r.Conn.Listener
	}
	// Results: the session's partitions (fetched), then those only acknowledged.
	for _, tp := range res.Parts {
		f.results = append(f.results, sharePartResult{tp: tp, partition: tp.Partition, leaderID: -1, leaderEpoch: -1})
	}
	f.nSession = len(f.results)
	if hasAcks {
		f.acknowledge(ctx, renew)
	}
	if epoch == sharepart.FinalEpoch {
		// Closing: release what the member still holds on the session's partitions.
		b.releaseShareSession(ctx, key, res.Replaced)
		return netio.Reply{Body: f.answer(res.Full)}
	}
	if renew {
		return netio.Reply{Body: f.answer(res.Full)}
	}
	wait := min(time.Duration(req.MaxWaitMillis)*time.Millisecond, maxFetchWait)
	var w *engine.Waiter
	if wait > 0 {
		w = waiterPool.Get().(*engine.Waiter)
	}
	avail := s.availChan()
	acquired, failed := f.fetch(ctx, w)
	if w == nil || acquired >= max(int64(req.MinBytes), 1) || failed {
		if w != nil {
			w.Stop()
			waiterPool.Put(w)
		}
		return netio.Reply{Body: f.answer(res.Full)}
	}
	deadline := time.Now().Add(wait)
	var closing <-chan struct{}
	if r.Conn != nil {
		closing = r.Conn.Closing
	}
	return netio.Reply{Deferred: func() netio.Reply {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		defer waiterPool.Put(w)
		ctx, cancel := context.WithTimeout(context.Background(), shareOpTimeout)
		defer cancel()
		for {
			timedOut := false
			select {
			case <-w.C:
			case <-avail:
			case <-closing:
				timedOut = true
			case <-timer.C:
				timedOut = true
			}
			w.Stop()
			if timedOut {
				return netio.Reply{Body: f.answer(res.Full)}
			}
			avail = s.availChan()
			got, failed := f.fetch(ctx, w)
			if got >= max(int64(req.MinBytes), 1) || failed || time.Now().After(deadline) {
				w.Stop()
				return netio.Reply{Body: f.answer(res.Full)}
			}
		}
	}}
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// shareFetchError is a response with only a top-level error.
func shareFetchError(version int16, e *kerr.Error) netio.Reply {
	resp := kmsg.NewPtrShareFetchResponse()
	resp.SetVersion(version)
	resp.ErrorCode = e.Code
	return netio.Reply{Response: resp}
}

// shareFetchRun is one ShareFetch being served.
type shareFetchRun struct {
	b        *Broker
	r        *netio.Request
	req      *kmsg.ShareFetchRequest
	version  int16
	group    string
	member   string
	listener string
	denied   func(string) bool
	lockMs   int32
	// results are the session's partitions (the first nSession, fetched), then those only
	// acknowledged.
	results  []sharePartResult
	nSession int
	index    map[sharepart.TopicPartition]int // results by partition, built by result
	// batches and pos are the batch walk's scratch (sharefetch.go), reused per partition.
	batches []sharepart.Range
	pos     []int64
	aborted []engine.AbortedTxn
	eps     []shareEndpoint
}

// result returns tp's result, adding one.
func (f *shareFetchRun) result(tp sharepart.TopicPartition) *sharePartResult {
	if f.index == nil {
		f.index = make(map[sharepart.TopicPartition]int, len(f.results))
		for i := range f.results {
			f.index[f.results[i].tp] = i
		}
	}
	if i, ok := f.index[tp]; ok {
		return &f.results[i]
	}
	f.index[tp] = len(f.results)
	f.results = append(f.results, sharePartResult{tp: tp, partition: tp.Partition, leaderID: -1, leaderEpoch: -1})
	return &f.results[len(f.results)-1]
}

// acknowledge applies the request's piggybacked acknowledgements.
func (f *shareFetchRun) acknowledge(ctx context.Context, renew bool) {
	var acks []sharepart.AckBatch
	for i := range f.req.Topics {
		rt := &f.req.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if len(rp.AcknowledgementBatches) == 0 {
				continue
			}
			acks = acks[:0]
			for _, ab := range rp.AcknowledgementBatches {
				acks = append(acks, sharepart.AckBatch{First: ab.FirstOffset, Last: ab.LastOffset, Types: ab.AcknowledgeTypes})
			}
			tp := sharepart.TopicPartition{TopicID: rt.TopicID, Partition: rp.Partition}
			res := f.result(tp)
			res.hasAck = true
			res.ackErrorCode = f.b.shareAcknowledge(ctx, f.group, f.member, tp, acks, renew, f.denied)
			if res.ackErrorCode == kerr.NotLeaderForPartition.Code {
				f.setLeader(res)
			}
		}
	}
}

// shareAcknowledge applies one partition's acknowledgements and returns its error code.
func (b *Broker) shareAcknowledge(ctx context.Context, group, member string, tp sharepart.TopicPartition, acks []sharepart.AckBatch, renew bool, denied func(string) bool) int16 {
	if t, ok := b.topics.getByID(tp.TopicID); ok && denied != nil && denied(t.Name) {
		return kerr.TopicAuthorizationFailed.Code
	}
	tg, err := b.sharePartition(ctx, group, tp.TopicID, tp.Partition)
	if err != nil {
		return errorCode(err)
	}
	if err := tg.sp.Acknowledge(ctx, member, acks, renew); err != nil {
		return errorCode(err)
	}
	return 0
}

// setLeader fills a NOT_LEADER_OR_FOLLOWER result's current leader and its endpoint.
func (f *shareFetchRun) setLeader(res *sharePartResult) {
	t, ok := f.b.topics.getByID(res.tp.TopicID)
	if !ok {
		return
	}
	leader, epoch, ep, found := f.b.shareLeaderOf(t.Name, res.tp.Partition, f.listener)
	res.leaderID, res.leaderEpoch = leader, epoch
	if found && !slices.ContainsFunc(f.eps, func(e shareEndpoint) bool { return e.id == ep.id }) {
		f.eps = append(f.eps, ep)
	}
}

// fetch acquires records of the session's partitions that have none yet; it returns the
// record bytes acquired by this pass and whether a partition failed. With w set it first
// registers w on each partition's high watermark (before reading, so no append is missed).
func (f *shareFetchRun) fetch(ctx context.Context, w *engine.Waiter) (total int64, failed bool) {
	b := f.b
	maxBytes := int64(f.req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1 << 31
	}
	recordsLeft := int(f.req.MaxRecords)
	if f.version < 1 || recordsLeft <= 0 {
		recordsLeft = shareDefaultMaxRecords
	}
	strict := f.version >= 2 && f.req.ShareAcquireMode == 1
	iso := engine.ReadUpToHighWatermark
	if b.shareReadCommitted(f.group) {
		iso = engine.ReadCommitted
	}
	for i := 0; i < f.nSession; i++ {
		res := &f.results[i]
		if len(res.acquired) > 0 || res.errorCode != 0 {
			total += res.bytes
			continue
		}
		if t, ok := b.topics.getByID(res.tp.TopicID); ok && f.denied != nil && f.denied(t.Name) {
			res.errorCode = kerr.TopicAuthorizationFailed.Code
			failed = true
			continue
		}
		tg, err := b.sharePartition(ctx, f.group, res.tp.TopicID, res.tp.Partition)
		if err != nil {
			res.errorCode = errorCode(err)
			if res.errorCode == kerr.NotLeaderForPartition.Code {
				f.setLeader(res)
			}
			failed = true
			continue
		}
		l := tg.log
		if w != nil {
			w.WatchHighWatermark(l)
		}
		if recordsLeft <= 0 {
			continue
		}
		if err := tg.sp.SetLogStart(ctx, l.LogStartOffset()); err != nil {
			res.errorCode = errorCode(err)
			failed = true
			continue
		}
		off, ok := tg.sp.NextFetchOffset()
		if !ok {
			continue
		}
		partMax := maxBytes - total
		if partMax <= 0 {
			if total > 0 {
				continue
			}
			partMax = 1 // the first partition with records gets one whole batch
		}
		sl, err := b.readPartition(l, off, partMax, iso)
		if err != nil {
			sl.Release()
			res.errorCode = errorCode(err)
			failed = true
			continue
		}
		if sl.Length == 0 {
			sl.Release()
			continue
		}
		f.aborted = f.aborted[:0]
		if iso == engine.ReadCommitted {
			// The aborted transactions of what was read: their batches are archived.
			if f.aborted, err = l.AbortedTransactions(f.aborted, off, l.LastStableOffset()); err != nil {
				sl.Release()
				res.errorCode = errorCode(err)
				failed = true
				continue
			}
		}
		f.batches, f.pos = shareBatches(&sl, f.batches[:0], f.pos[:0], f.aborted)
		acq := tg.sp.Acquire(f.member, off, f.batches, recordsLeft, strict, nil)
		if len(acq) == 0 {
			sl.Release()
			continue
		}
		if !strict && sharepart.NeedsSplit(acq, int(f.req.BatchSize)) {
			// BatchSize (v1+): the acquired records in batches of about that many, as Kafka
			// cuts them (record-limit mode does not).
			acq = sharepart.SplitAtBatches(nil, acq, f.batches, int(f.req.BatchSize))
		}
		for _, a := range acq {
			recordsLeft -= int(a.Last - a.First + 1)
		}
		trimShareSlice(&sl, f.batches, f.pos, acq[0].First, acq[len(acq)-1].Last)
		res.slice, res.acquired, res.bytes = sl, acq, sl.Length
		total += sl.Length
	}
	return total, failed
}

// answer encodes the response: every partition of a full session (opened or closing), those
// with records, an error or an acknowledgement result otherwise. The body takes the slices.
func (f *shareFetchRun) answer(full bool) *netio.Body {
	keep := f.results[:0]
	for _, res := range f.results {
		if full || res.hasAck || res.errorCode != 0 || len(res.acquired) > 0 {
			keep = append(keep, res)
			continue
		}
		res.slice.Release()
	}
	f.results = keep
	slices.SortStableFunc(f.results, func(a, b sharePartResult) int {
		if c := compareID(a.tp.TopicID, b.tp.TopicID); c != 0 {
			return c
		}
		return int(a.tp.Partition) - int(b.tp.Partition)
	})
	topics := 0
	for i := range f.results {
		if i == 0 || f.results[i].tp.TopicID != f.results[i-1].tp.TopicID {
			topics++
		}
	}
	var enc shareEncoder
	enc.init(f.version)
	enc.begin(0, f.lockMs, topics)
	for i := 0; i < len(f.results); {
		j := i
		for j < len(f.results) && f.results[j].tp.TopicID == f.results[i].tp.TopicID {
			j++
		}
		enc.topic(f.results[i].tp.TopicID, j-i)
		for k := i; k < j; k++ {
			enc.partition(&f.results[k])
		}
		enc.endTopic()
		i = j
	}
	enc.end(f.eps)
	return enc.body
}

func compareID(a, b [16]byte) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}
