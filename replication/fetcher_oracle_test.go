package replication

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

// The fetcher oracle: random leader histories (appends in leader epochs, the high watermark
// moving, DeleteRecords past a follower's end, failovers) are replayed against two followers,
// one over the disk engine.Log and one over the in-memory engine.MemLog, through the fetcher's
// own request building and response handling (truncateDivergentWith, settle,
// fetchRequest/applyFetchResponse). The leader is an engine.MemLog answering
// OffsetForLeaderEpoch and Fetch as a Kafka leader does. The partition's other replicas are
// kept too (sides): former leaders with their uncommitted tails, and replicas that copied a
// leader's prefix; a failover elects one of them that holds every committed batch, or a replica
// with a prefix of the old leader's log. So leaders change back and forth, and the followers hold
// divergent suffixes across several epochs: their divergence check takes several rounds of
// OffsetForLeaderEpoch (KIP-279). After every step both followers must have sent the same
// requests and hold the same logs (offsets, leader epoch cache, bytes, fetcher state), and a
// follower whose check is done holds no batch at an offset where the leader holds another (no
// two values at one offset); after a catch-up both must hold exactly the leader's log. That
// covers divergence truncation (KIP-101/279), the restart at the leader's log start (Kafka's
// truncateFullyAndStartAt), cut batches and epochs.

// fakeLeader is the partition's leader: its log and leader epoch.
type fakeLeader struct {
	log   *engine.MemLog
	epoch int32
}

const (
	orcTopic     = "fo"
	orcPartition = 0
	orcLeaderID  = 1
)

// answerEpochs answers OffsetForLeaderEpoch as Kafka's leader does (for the current epoch).
func (l *fakeLeader) answerEpochs(t *testing.T, req *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	t.Helper()
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	for _, rt := range req.Topics {
		tt := kmsg.NewOffsetForLeaderEpochResponseTopic()
		tt.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case rp.CurrentLeaderEpoch < l.epoch:
				p.ErrorCode = kerr.FencedLeaderEpoch.Code
			case rp.CurrentLeaderEpoch > l.epoch:
				p.ErrorCode = kerr.UnknownLeaderEpoch.Code
			default:
				p.EndOffset, p.LeaderEpoch = l.log.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			tt.Partitions = append(tt.Partitions, p)
		}
		resp.Topics = append(resp.Topics, tt)
	}
	return resp
}

// answerFetch answers a follower's Fetch: up to the log end, at most PartitionMaxBytes (the last
// batch may be cut there), OFFSET_OUT_OF_RANGE outside [log start, log end].
func (l *fakeLeader) answerFetch(t *testing.T, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	t.Helper()
	resp := kmsg.NewPtrFetchResponse()
	for _, rt := range req.Topics {
		tt := kmsg.NewFetchResponseTopic()
		tt.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.HighWatermark = l.log.HighWatermark()
			p.LogStartOffset = l.log.LogStartOffset()
			switch {
			case rp.CurrentLeaderEpoch < l.epoch:
				p.ErrorCode = kerr.FencedLeaderEpoch.Code
			case rp.FetchOffset < l.log.LogStartOffset() || rp.FetchOffset > l.log.LogEndOffset():
				p.ErrorCode = kerr.OffsetOutOfRange.Code
			default:
				sl, err := l.log.Read(rp.FetchOffset, int64(rp.PartitionMaxBytes), engine.ReadUpToLogEnd)
				if err != nil {
					t.Fatalf("leader read at %d: %v", rp.FetchOffset, err)
				}
				p.RecordBatches = sliceBytes(t, sl)
			}
			tt.Partitions = append(tt.Partitions, p)
		}
		resp.Topics = append(resp.Topics, tt)
	}
	return resp
}

// sliceBytes reads a log's file slice and releases it.
func sliceBytes(t *testing.T, s segment.Slice) []byte {
	t.Helper()
	defer s.Release()
	if s.Length == 0 {
		return nil
	}
	buf := make([]byte, s.Length)
	if n, err := s.File.ReadAt(buf, s.Position); n != len(buf) {
		t.Fatalf("read slice: %d of %d bytes: %v", n, len(buf), err)
	}
	return buf
}

// readAll reads every batch of pl from its log start to its log end.
func readAll(t *testing.T, pl engine.PartitionLog) []byte {
	t.Helper()
	var out []byte
	offset := pl.LogStartOffset()
	for range 100000 {
		sl, err := pl.Read(offset, 64<<10, engine.ReadUpToLogEnd)
		if err != nil {
			t.Fatalf("read all at %d: %v", offset, err)
		}
		b := wholeBatches(sliceBytes(t, sl))
		if len(b) == 0 {
			return out
		}
		out = append(out, b...)
		for len(b) > 0 {
			h, _ := record.ParseHeader(b)
			offset = h.NextOffset()
			b = b[h.Size():]
		}
	}
	t.Fatal("read all: too many reads")
	return nil
}

// orcFollower is one follower replica: its log, its fetcher state and its source fetcher.
type orcFollower struct {
	name string
	log  engine.PartitionLog
	p    *followed
	s    *sourceFetcher
}

type fetcherOracle struct {
	t      *testing.T
	rng    *rand.Rand
	cfg    engine.Config
	leader *fakeLeader
	fs     []*orcFollower // [0] over engine.Log, [1] over engine.MemLog
	// sides are the partition's other replicas, leader candidates: former leaders (with any
	// uncommitted tail of their own) and copies of a leader's log.
	sides []*engine.MemLog
	// committed holds every batch that was ever below the leader's high watermark, by base
	// offset: what an elected replica must hold.
	committed map[int64][]byte
	ts        int64
	trace     []string
}

func (o *fetcherOracle) fatalf(format string, args ...any) {
	o.t.Helper()
	start := max(0, len(o.trace)-30)
	var states []string
	for _, f := range o.fs {
		states = append(states, fmt.Sprintf("%s: log [%d, %d) hw %d epochs %v truncated %v fetchFrom %d", f.name,
			f.log.LogStartOffset(), f.log.LogEndOffset(), f.log.HighWatermark(), f.log.EpochEntries(), f.p.truncated, f.p.fetchFrom))
	}
	l := o.leader.log
	states = append(states, fmt.Sprintf("leader: log [%d, %d) hw %d epoch %d epochs %v", l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), o.leader.epoch, l.EpochEntries()))
	o.t.Fatalf("%s\nlast steps:\n  %s\nnow:\n  %s", fmt.Sprintf(format, args...), joinLines(o.trace[start:]), joinLines(states))
}

func joinLines(s []string) string {
	var b bytes.Buffer
	for i, l := range s {
		if i > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString(l)
	}
	return b.String()
}

func (o *fetcherOracle) step(format string, args ...any) {
	o.trace = append(o.trace, fmt.Sprintf(format, args...))
}

// follow gives every follower fresh fetcher state for the leader's epoch, as Fetchers.Set does
// for a new leader epoch: the divergence check runs again.
func (o *fetcherOracle) follow() {
	for _, f := range o.fs {
		f.p = &followed{Follow: Follow{Topic: orcTopic, Partition: orcPartition, Leader: orcLeaderID, LeaderEpoch: o.leader.epoch, Log: f.log.(FollowerLog)}, active: true}
	}
}

// batch builds a batch of 1-10 records of 10-400 bytes.
func (o *fetcherOracle) batch() []byte {
	recs := make([]record.Record, 1+o.rng.Intn(10))
	for i := range recs {
		v := make([]byte, 10+o.rng.Intn(390))
		o.rng.Read(v)
		recs[i] = record.Record{Value: v, TimestampDelta: int64(i)}
	}
	o.ts += 1000
	return record.Build(nil, record.BuildOptions{BaseTimestamp: o.ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
}

func (o *fetcherOracle) leaderAppend() {
	n := 1 + o.rng.Intn(4)
	for range n {
		if _, err := o.leader.log.Append(o.batch()); err != nil {
			o.fatalf("leader append: %v", err)
		}
	}
	o.step("leader appends %d batches in epoch %d (log end %d)", n, o.leader.epoch, o.leader.log.LogEndOffset())
}

func (o *fetcherOracle) leaderHW() {
	l := o.leader.log
	hw := l.HighWatermark() + o.rng.Int63n(l.LogEndOffset()-l.HighWatermark()+1)
	if err := l.SetHighWatermark(hw); err != nil {
		o.fatalf("leader high watermark: %v", err)
	}
	o.commit()
	o.step("leader high watermark %d (asked %d)", l.HighWatermark(), hw)
}

// leaderDelete moves the leader's log start up, often to its high watermark: past a follower
// that lags, which must then start over at the leader's log start.
func (o *fetcherOracle) leaderDelete() {
	l := o.leader.log
	to := l.HighWatermark()
	if o.rng.Intn(3) == 0 {
		to = l.LogStartOffset() + o.rng.Int63n(l.HighWatermark()-l.LogStartOffset()+1)
	}
	if _, err := l.DeleteRecordsBefore(to); err != nil {
		o.fatalf("leader delete records before %d: %v", to, err)
	}
	o.step("leader deletes records before %d (log start %d)", to, l.LogStartOffset())
}

// failover elects a new leader in a newer epoch: one of the other replicas (sides) that holds
// the leader's log up to its high watermark (an ISR member), with whatever tail of its own it
// has (a former leader's uncommitted batches, in older epochs); or, when none does or at random,
// a replica with the old leader's log up to a batch boundary at or above the high watermark. The
// old leader joins the other replicas with its whole log. The followers' tails past the new
// leader's agreement diverge, over as many epochs as the leaders changed.
func (o *fetcherOracle) failover() {
	if cands := o.eligibleSides(); len(cands) > 0 && o.rng.Intn(3) > 0 {
		o.promoteSide(cands[o.rng.Intn(len(cands))])
		return
	}
	o.failoverKeeping(func(base int64) bool { return base < o.leader.log.HighWatermark() || o.rng.Intn(2) == 1 })
}

// failoverKeeping is failover with the new leader holding the old leader's batches up to the
// first whose base offset keep refuses.
func (o *fetcherOracle) failoverKeeping(keepBatch func(base int64) bool) {
	o.promote(o.prefixOf(o.leader.log, keepBatch), "a prefix of the old leader")
}

// prefixOf returns a new replica holding src's batches up to the first whose base offset keep
// refuses, from src's log start.
func (o *fetcherOracle) prefixOf(src *engine.MemLog, keepBatch func(base int64) bool) *engine.MemLog {
	all := readAll(o.t, src)
	var keep []byte
	for b := all; len(b) > 0; {
		h, _ := record.ParseHeader(b)
		if !keepBatch(h.BaseOffset) {
			break
		}
		keep = append(keep, b[:h.Size()]...)
		b = b[h.Size():]
	}
	start := src.LogStartOffset()
	if len(keep) > 0 {
		h, _ := record.ParseHeader(keep)
		start = h.BaseOffset
	}
	nl, err := engine.NewMemLog(o.cfg, start)
	if err != nil {
		o.fatalf("new replica: %v", err)
	}
	if len(keep) > 0 {
		if _, err := nl.AppendStored(keep); err != nil {
			o.fatalf("new replica copy: %v", err)
		}
	}
	return nl
}

// promoteSide makes the other replica i the leader (promote).
func (o *fetcherOracle) promoteSide(i int) {
	nl := o.sides[i]
	o.sides = slices.Delete(o.sides, i, i+1)
	o.promote(nl, fmt.Sprintf("replica %d of %d", i, len(o.sides)+1))
}

// promote makes nl the leader in a newer epoch, with the old leader's high watermark and log
// start; the old leader joins the other replicas.
func (o *fetcherOracle) promote(nl *engine.MemLog, what string) {
	old := o.leader.log
	if err := nl.SetHighWatermark(old.HighWatermark()); err != nil {
		o.fatalf("new leader high watermark: %v", err)
	}
	if _, err := nl.DeleteRecordsBefore(old.LogStartOffset()); err != nil {
		o.fatalf("new leader log start: %v", err)
	}
	epoch := o.leader.epoch + 1 + int32(o.rng.Intn(2))
	if err := nl.BecomeLeader(epoch); err != nil {
		o.fatalf("new leader epoch: %v", err)
	}
	o.addSide(old)
	o.leader = &fakeLeader{log: nl, epoch: epoch}
	o.commit()
	o.follow()
	o.step("failover to %s: new leader in epoch %d with log end %d (old end %d), log start %d, epochs %v", what, epoch,
		nl.LogEndOffset(), old.LogEndOffset(), nl.LogStartOffset(), nl.EpochEntries())
}

// maxSides bounds the other replicas kept as leader candidates.
const maxSides = 3

// addSide keeps r as another replica, forgetting one at random past maxSides.
func (o *fetcherOracle) addSide(r *engine.MemLog) {
	o.sides = append(o.sides, r)
	if len(o.sides) > maxSides {
		i := o.rng.Intn(len(o.sides))
		o.sides[i].Close()
		o.sides = slices.Delete(o.sides, i, i+1)
	}
}

// eligibleSides returns the indexes of the other replicas that could be elected from the ISR:
// below the leader's high watermark they hold exactly the committed batches, and they reach it.
func (o *fetcherOracle) eligibleSides() []int {
	hw := o.leader.log.HighWatermark()
	var out []int
	for i, r := range o.sides {
		if r.LogStartOffset() > o.leader.log.LogStartOffset() || r.LogEndOffset() < hw {
			continue
		}
		ok := true
		for b := readAll(o.t, r); len(b) > 0 && ok; {
			h, _ := record.ParseHeader(b)
			if h.BaseOffset >= hw {
				break
			}
			ok = bytes.Equal(o.committed[h.BaseOffset], b[:h.Size()])
			b = b[h.Size():]
		}
		if ok {
			out = append(out, i)
		}
	}
	return out
}

// commit records the leader's batches below its high watermark as committed; a committed batch
// is never replaced by another at its offset (no two values at one offset).
func (o *fetcherOracle) commit() {
	l := o.leader.log
	hw := l.HighWatermark()
	for b := readAll(o.t, l); len(b) > 0; {
		h, _ := record.ParseHeader(b)
		if h.NextOffset() > hw {
			break
		}
		batch := b[:h.Size()]
		if prev, ok := o.committed[h.BaseOffset]; ok && !bytes.Equal(prev, batch) {
			o.fatalf("the leader in epoch %d holds another batch at committed offset %d", o.leader.epoch, h.BaseOffset)
		}
		o.committed[h.BaseOffset] = batch
		b = b[h.Size():]
	}
}

// sideSync has another replica copy the leader: it ends up with the leader's log up to a random
// batch boundary (what a correct follower holds after truncating its divergent tail and fetching
// that far).
func (o *fetcherOracle) sideSync() {
	if len(o.sides) == 0 {
		o.step("no other replica to sync")
		return
	}
	i := o.rng.Intn(len(o.sides))
	n := 0
	for b := readAll(o.t, o.leader.log); len(b) > 0; n++ {
		h, _ := record.ParseHeader(b)
		b = b[h.Size():]
	}
	k := n
	if o.rng.Intn(2) == 0 {
		k = o.rng.Intn(n + 1)
	}
	seen := 0
	r := o.prefixOf(o.leader.log, func(int64) bool { seen++; return seen <= k })
	if err := r.SetHighWatermark(min(o.leader.log.HighWatermark(), r.LogEndOffset())); err != nil {
		o.fatalf("replica high watermark: %v", err)
	}
	o.sides[i].Close()
	o.sides[i] = r
	o.step("replica %d copies the leader's first %d of %d batches (log [%d, %d), epochs %v)", i, k, n, r.LogStartOffset(), r.LogEndOffset(), r.EpochEntries())
}

// round runs one fetcher round on every follower: the divergence check if due, then one Fetch.
// Both followers must ask the same; each gets the leader's answer to that request.
func (o *fetcherOracle) round() {
	pmb := int32(200 + o.rng.Intn(8<<10)) // small: batches are cut, several rounds per catch-up
	for _, f := range o.fs {
		f.s.f.cfg.PartitionMaxBytes = pmb
	}
	var epochReqs, fetchReqs []string
	for _, f := range o.fs {
		p := f.p
		parts := []*followed{p}
		if !p.truncated {
			// The whole divergence check, one OffsetForLeaderEpoch per round of KIP-279.
			var asks []string
			err := f.s.truncateDivergentWith(parts, func(req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
				rp := req.Topics[0].Partitions[0]
				asks = append(asks, fmt.Sprintf("epoch %d current %d", rp.LeaderEpoch, rp.CurrentLeaderEpoch))
				return o.leader.answerEpochs(o.t, req), nil
			})
			if err != nil {
				o.fatalf("%s: divergence check: %v", f.name, err)
			}
			if len(asks) == 0 {
				asks = append(asks, "none")
			}
			epochReqs = append(epochReqs, strings.Join(asks, ", then "))
		}
		if p.truncated && f.s.settle(p) {
			req, byTP := f.s.fetchRequest(parts)
			rp := req.Topics[0].Partitions[0]
			fetchReqs = append(fetchReqs, fmt.Sprintf("fetch %d log start %d epoch %d", rp.FetchOffset, rp.LogStartOffset, rp.CurrentLeaderEpoch))
			if _, err := f.s.applyFetchResponse(byTP, o.leader.answerFetch(o.t, req)); err != nil {
				o.fatalf("%s: apply fetch response: %v", f.name, err)
			}
		}
	}
	if len(epochReqs) > 0 && (len(epochReqs) != 2 || epochReqs[0] != epochReqs[1]) {
		o.fatalf("the followers checked their divergence differently: %q", epochReqs)
	}
	if len(fetchReqs) > 0 && (len(fetchReqs) != 2 || fetchReqs[0] != fetchReqs[1]) {
		o.fatalf("the followers fetched differently: %q", fetchReqs)
	}
	o.step("round (partition max bytes %d): %q %q", pmb, epochReqs, fetchReqs)
}

// check compares the two followers.
func (o *fetcherOracle) check(what string) {
	o.t.Helper()
	d, m := o.fs[0], o.fs[1]
	type state struct {
		Start, End, HW int64
		Epochs         []engine.EpochEntry
		Truncated      bool
		FetchFrom      int64
		LatestEpoch    int32
		LatestOK       bool
	}
	get := func(f *orcFollower) state {
		le, ok := f.log.LatestEpoch()
		return state{Start: f.log.LogStartOffset(), End: f.log.LogEndOffset(), HW: f.log.HighWatermark(),
			Epochs: f.log.EpochEntries(), Truncated: f.p.truncated, FetchFrom: f.p.fetchFrom, LatestEpoch: le, LatestOK: ok}
	}
	sd, sm := get(d), get(m)
	if len(sd.Epochs) == 0 {
		sd.Epochs = nil
	}
	if len(sm.Epochs) == 0 {
		sm.Epochs = nil
	}
	if !reflect.DeepEqual(sd, sm) {
		o.fatalf("%s: follower state differs:\n  disk %+v\n  mem  %+v", what, sd, sm)
	}
	if !(sd.Start <= sd.HW && sd.HW <= sd.End) {
		o.fatalf("%s: follower offsets out of order: %+v", what, sd)
	}
	if !bytes.Equal(readAll(o.t, d.log), readAll(o.t, m.log)) {
		o.fatalf("%s: follower logs differ (disk %d bytes, mem %d bytes)", what, len(readAll(o.t, d.log)), len(readAll(o.t, m.log)))
	}
	if sd.Truncated {
		o.agree(what)
	}
}

// agree checks that a follower whose divergence check is done holds, at each offset, the
// leader's batch or none (no two values at one offset): every batch it holds that the leader
// still covers (from the leader's log start) is the leader's batch at that offset.
func (o *fetcherOracle) agree(what string) {
	o.t.Helper()
	l := o.leader.log
	have := map[int64][]byte{}
	for b := readAll(o.t, l); len(b) > 0; {
		h, _ := record.ParseHeader(b)
		have[h.BaseOffset] = b[:h.Size()]
		b = b[h.Size():]
	}
	for _, f := range o.fs {
		for b := readAll(o.t, f.log); len(b) > 0; {
			h, _ := record.ParseHeader(b)
			if h.NextOffset() > l.LogStartOffset() && !bytes.Equal(have[h.BaseOffset], b[:h.Size()]) {
				o.fatalf("%s: %s holds a batch at offset %d (epoch %d) that is not the leader's (no two values at one offset)",
					what, f.name, h.BaseOffset, h.PartitionLeaderEpoch)
			}
			b = b[h.Size():]
		}
	}
}

// catchUp runs rounds until the followers fetch at the leader's log end and a round changes
// nothing, then checks that each holds exactly the leader's batches, and the leader's offsets
// unless the leader's log is empty: a follower that started over at the leader's log start
// (restartAt) keeps its emptied log's offsets until the leader has a batch to copy.
func (o *fetcherOracle) catchUp() {
	l := o.leader.log
	f := o.fs[0]
	state := func() [5]int64 {
		return [5]int64{f.log.LogStartOffset(), f.log.LogEndOffset(), f.log.HighWatermark(), f.p.fetchFrom, int64(len(f.log.EpochEntries()))}
	}
	for i := 0; ; i++ {
		if i == 500 {
			o.fatalf("the followers did not catch up in %d rounds", i)
		}
		before := state()
		o.round()
		o.check("catch-up round")
		if f.p.truncated && max(f.log.LogEndOffset(), f.p.fetchFrom) == l.LogEndOffset() && state() == before {
			break
		}
	}
	want := readAll(o.t, l)
	for _, f := range o.fs {
		if got := readAll(o.t, f.log); !bytes.Equal(got, want) {
			o.fatalf("%s: after catching up, the follower's log (%d bytes, [%d, %d)) is not the leader's (%d bytes, [%d, %d))",
				f.name, len(got), f.log.LogStartOffset(), f.log.LogEndOffset(), len(want), l.LogStartOffset(), l.LogEndOffset())
		}
		if l.LogEndOffset() == l.LogStartOffset() {
			continue
		}
		if f.log.LogStartOffset() != l.LogStartOffset() || f.log.LogEndOffset() != l.LogEndOffset() || f.log.HighWatermark() != l.HighWatermark() {
			o.fatalf("%s: after catching up, the follower's offsets [%d, %d) hw %d are not the leader's [%d, %d) hw %d", f.name,
				f.log.LogStartOffset(), f.log.LogEndOffset(), f.log.HighWatermark(), l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark())
		}
	}
	o.step("caught up at %d", l.LogEndOffset())
}

// newFetcherOracle sets up a leader in epoch 1 and the two followers, all empty.
func newFetcherOracle(t *testing.T, seed int64, durable bool) *fetcherOracle {
	rng := rand.New(rand.NewSource(seed))
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 8 << 10 // many segments: truncation and log start cross segment files
	cfg.MaxMessageBytes = 64 << 10
	cfg.RetentionMs = -1
	cfg.RetentionBytes = -1
	now := time.UnixMilli(1_700_000_000_000)
	cfg.Now = func() time.Time { return now }
	if !durable {
		cfg.FlushIntervalMessages = 1 << 40
	}
	o := &fetcherOracle{t: t, rng: rng, cfg: cfg, ts: now.UnixMilli(), committed: map[int64][]byte{}}
	ll, err := engine.NewMemLog(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ll.BecomeLeader(1); err != nil {
		t.Fatal(err)
	}
	o.leader = &fakeLeader{log: ll, epoch: 1}
	disk, err := engine.OpenLog(engine.OpenOptions{Dir: filepath.Join(t.TempDir(), orcTopic+"-0"), Topic: orcTopic, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := engine.NewMemLog(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		disk.Close()
		mem.Close()
		o.leader.log.Close()
		for _, r := range o.sides {
			r.Close()
		}
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i, l := range []engine.PartitionLog{disk, mem} {
		fs := NewFetchers(FetcherConfig{NodeID: 2, Logger: quiet})
		o.fs = append(o.fs, &orcFollower{name: []string{"disk", "mem"}[i], log: l, s: newSourceFetcher(fs, orcLeaderID)})
	}
	o.follow()
	return o
}

func runFetcherOracle(t *testing.T, seed int64, ops int, durable bool) {
	o := newFetcherOracle(t, seed, durable)
	rng := o.rng
	for range ops {
		switch k := rng.Intn(20); {
		case k < 6:
			o.leaderAppend()
		case k < 9:
			o.leaderHW()
		case k < 15:
			o.round()
		case k < 16:
			o.leaderDelete()
		case k < 17:
			o.sideSync()
		case k < 19:
			o.failover()
		default:
			o.catchUp()
		}
		o.check(o.trace[len(o.trace)-1])
	}
	o.catchUp()
}

// TestFetcherOracle runs the fetcher oracle over seeded random leader histories; a failure names
// its seed and prints the last steps.
func TestFetcherOracle(t *testing.T) {
	seqs, ops := 12, 200
	if testing.Short() {
		seqs = 4
	}
	for seed := int64(1); seed <= int64(seqs); seed++ {
		t.Run(fmt.Sprintf("pagecache/seed=%d", seed), func(t *testing.T) { runFetcherOracle(t, seed, ops, false) })
	}
	// The durable policy: every append is fsynced before the follower moves on (AwaitDurable).
	t.Run("durable/seed=1", func(t *testing.T) { runFetcherOracle(t, 1, 120, true) })
}

// TestFetcherRestartThenDivergence: a follower that started over at its leader's log start
// (restartAt: its emptied log's next batch lands in a segment based lower) and then finds its
// whole log divergent after a failover truncates to its log start and keeps its offsets there,
// on the disk log as on MemLog (the disk log used to fall back to the segment's base offset).
func TestFetcherRestartThenDivergence(t *testing.T) {
	o := newFetcherOracle(t, 1, false)
	for range 6 {
		o.leaderAppend()
	}
	l := o.leader.log
	if err := l.SetHighWatermark(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	o.commit()
	o.leaderDelete() // to the high watermark (or below; the leader's log start moves up)
	if _, err := l.DeleteRecordsBefore(l.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	start := l.LogStartOffset()
	o.leaderAppend()
	o.catchUp() // the first fetch is out of range: restartAt, then the leader's batches
	for _, f := range o.fs {
		if f.log.LogStartOffset() != start || f.p.fetchFrom != start {
			o.fatalf("%s: did not start over at the leader's log start %d", f.name, start)
		}
	}
	// The new leader has nothing past the log start, in a newer epoch: the followers' whole log
	// diverges.
	o.failoverKeeping(func(base int64) bool { return base < start })
	o.round()
	o.check("after the divergence check")
	for _, f := range o.fs {
		if f.log.LogStartOffset() != start || f.log.LogEndOffset() != start {
			o.fatalf("%s: log [%d, %d) after truncating everything, want [%d, %d)", f.name, f.log.LogStartOffset(), f.log.LogEndOffset(), start, start)
		}
	}
	o.leaderAppend()
	o.catchUp()
}

// TestFetcherTruncationAcrossLeaderChanges: the history KIP-279 is about. Leader A (epoch 1)
// writes two batches, only the first committed; B, holding the committed one, leads (epoch 2)
// and writes one batch; A leads again without having truncated (epoch e3), writes one, and the
// followers copy A, its uncommitted epoch-1 batch included; then B leads again (epoch e4). The
// followers' latest epoch e3 is not on B, whose answer (epoch 2, where it ends) names an epoch
// the followers do not hold either: one round of OffsetForLeaderEpoch would keep A's epoch-1
// batch where B holds its epoch-2 one (two values at one offset). The second round (asking
// about epoch 1) truncates to the committed batch, and the followers end with B's log.
func TestFetcherTruncationAcrossLeaderChanges(t *testing.T) {
	o := newFetcherOracle(t, 7, false)
	a := o.leader.log
	if _, err := a.Append(o.batch()); err != nil {
		t.Fatal(err)
	}
	committed := a.LogEndOffset()
	if err := a.SetHighWatermark(committed); err != nil {
		t.Fatal(err)
	}
	o.commit()
	if _, err := a.Append(o.batch()); err != nil { // uncommitted, epoch 1
		t.Fatal(err)
	}
	b := o.prefixOf(a, func(base int64) bool { return base < committed })
	o.promote(b, "B") // epoch 2; A joins the other replicas
	if _, err := b.Append(o.batch()); err != nil {
		t.Fatal(err)
	}
	o.promoteSide(0) // A again: it kept its epoch-1 tail; B joins the other replicas
	o.leaderAppend()
	o.catchUp()
	if got := len(o.fs[0].log.EpochEntries()); got != 2 {
		o.fatalf("the followers hold %d epochs, want 2 (A's epoch 1 and its latest)", got)
	}
	o.promoteSide(0) // B again
	o.leaderAppend()
	o.round()
	o.agree("after the divergence check")
	if r := o.trace[len(o.trace)-1]; !strings.Contains(r, ", then ") {
		o.fatalf("the divergence check took one round of OffsetForLeaderEpoch, want two: %s", r)
	}
	for _, f := range o.fs {
		if f.log.LogEndOffset() < committed {
			o.fatalf("%s: truncated to %d, below the committed offset %d", f.name, f.log.LogEndOffset(), committed)
		}
	}
	o.catchUp() // each follower's log is B's
}
