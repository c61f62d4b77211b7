package sharegroups

// ShareFetch and ShareAcknowledge (KIP-932) driven with raw kmsg requests against an
// in-process broker: share sessions on one partition, acknowledgement of each type, lock
// timeouts and the delivery count limit.

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// sfBroker starts a broker with a short acquisition lock (2s) and a delivery count limit of 3, and
// creates topic (one partition); it returns the broker's address and the topic's id.
func sfBroker(t *testing.T, topic string) (string, [16]byte) {
	t.Helper()
	b := inproc.Start(t, map[string]string{
		"group.share.record.lock.duration.ms": "2000",
		"group.share.delivery.count.limit":    "3",
	})
	cl := sfClient(t, b.Addr())
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("list topics: %v %v", err, td[topic].Err)
	}
	return b.Addr(), [16]byte(td[topic].ID)
}

func sfClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// sfProduce writes values as records of partition 0, in batches of up to per records.
func sfProduce(t *testing.T, cl *kgo.Client, topic string, values []string, per int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < len(values); i += per {
		var rs []*kgo.Record
		for _, v := range values[i:min(i+per, len(values))] {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// sfSession is one share consumer's session with the broker (its own connection).
type sfSession struct {
	t      *testing.T
	cl     *kgo.Client
	group  string
	member string
	topic  [16]byte
	epoch  int32
}

func sfOpen(t *testing.T, addr, group, member string, topic [16]byte) *sfSession {
	s := &sfSession{t: t, cl: sfClient(t, addr), group: group, member: member, topic: topic}
	resp := s.mustFetch(nil, 0)
	if resp.ErrorCode != 0 {
		t.Fatalf("open session %s: %v", member, kerr.ErrorForCode(resp.ErrorCode))
	}
	// Until the new topic's partition has its leader, the fetch answers a partition error;
	// the share partition is initialized (at the latest offset) by the first fetch without.
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, _, err := sfDeliveries(resp)
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("open session %s: %v", member, err)
		}
		time.Sleep(50 * time.Millisecond)
		resp = s.mustFetch(nil, 0)
	}
}

// request sends req to the broker (no t.Fatal: goroutines use it).
func (s *sfSession) request(req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.cl.Broker(1).Request(ctx, req)
}

func (s *sfSession) mustRequest(req kmsg.Request) kmsg.Response {
	s.t.Helper()
	resp, err := s.request(req)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

func (s *sfSession) mustFetch(acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, maxWaitMs int32) *kmsg.ShareFetchResponse {
	s.t.Helper()
	resp, err := s.fetch(acks, maxWaitMs)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

// fetch sends a ShareFetch at the session's epoch with acks piggybacked and advances the
// epoch on success.
func (s *sfSession) fetch(acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, maxWaitMs int32) (*kmsg.ShareFetchResponse, error) {
	req := kmsg.NewPtrShareFetchRequest()
	req.Version = 2
	req.GroupID, req.MemberID = &s.group, &s.member
	req.ShareSessionEpoch = s.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWaitMs, 1, 1<<20
	req.MaxRecords, req.BatchSize = 50, 50
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = s.topic
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.Partition = 0
	rp.AcknowledgementBatches = acks
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := s.request(req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.ShareFetchResponse)
	if resp.ErrorCode == 0 {
		s.epoch++
	}
	return resp, nil
}

// sfDelivery is one record delivered to a session.
type sfDelivery struct {
	offset int64
	count  int16
	value  string
}

// sfDeliveries returns the acquired records of a ShareFetch response and its partition's
// acknowledgement error.
func sfDeliveries(resp *kmsg.ShareFetchResponse) ([]sfDelivery, int16, error) {
	var out []sfDelivery
	var ackErr int16
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				return nil, 0, fmt.Errorf("partition error %w", kerr.ErrorForCode(rp.ErrorCode))
			}
			ackErr = rp.AcknowledgeErrorCode
			values, err := sfDecode(rp.Records)
			if err != nil {
				return nil, 0, err
			}
			for _, a := range rp.AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					v, ok := values[o]
					if !ok {
						return nil, 0, fmt.Errorf("acquired offset %d not in the records returned", o)
					}
					out = append(out, sfDelivery{offset: o, count: a.DeliveryCount, value: v})
				}
			}
		}
	}
	return out, ackErr, nil
}

func sfMustDeliveries(t *testing.T, resp *kmsg.ShareFetchResponse) []sfDelivery {
	t.Helper()
	out, _, err := sfDeliveries(resp)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sfDecode decodes uncompressed record batches into offset -> value.
func sfDecode(b []byte) (map[int64]string, error) {
	out := map[int64]string{}
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			return nil, fmt.Errorf("record batch: %w", err)
		}
		recs := rb.Records
		for range rb.NumRecords {
			l, n := binary.Varint(recs)
			if n <= 0 || int(l)+n > len(recs) {
				return nil, fmt.Errorf("bad record length")
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
				return nil, err
			}
			out[rb.FirstOffset+int64(r.OffsetDelta)] = string(r.Value)
			recs = recs[n+int(l):]
		}
		if 12+int(rb.Length) > len(b) {
			return nil, fmt.Errorf("record batch length %d past the bytes", rb.Length)
		}
		b = b[12+int(rb.Length):]
	}
	return out, nil
}

func sfAck(first, last int64, typ int8) kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	a := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
	a.FirstOffset, a.LastOffset, a.AcknowledgeTypes = first, last, []int8{typ}
	return a
}

// TestShareFetchFourSessions: four share sessions of one group on one partition. Every record
// is delivered to some session; accepted and rejected ones are never delivered again; released
// ones are; a session that stops with records acquired has them delivered again (to another)
// after the lock timeout; a record every session releases is delivered exactly the delivery
// count limit (3) times.
func TestShareFetchFourSessions(t *testing.T) {
	const topic, group, n = "sf-four", "sf-group", 300
	addr, id := sfBroker(t, topic)
	sessions := make([]*sfSession, 4)
	for i := range sessions {
		// The share partition starts at the latest offset (share.auto.offset.reset), so the
		// sessions open before anything is produced.
		sessions[i] = sfOpen(t, addr, group, "member-"+strconv.Itoa(i), id)
	}
	values := make([]string, n)
	for i := range values {
		values[i] = strconv.Itoa(i)
	}
	values[7] = "poison"
	sfProduce(t, sessions[0].cl, topic, values, 10)

	var mu sync.Mutex
	done := map[int64]string{} // offset -> member that accepted or rejected it
	released := map[int64]bool{}
	stalled := map[int64]bool{} // held by the session that stopped
	redelivered := map[int64]bool{}
	var poisonCounts []int16
	var errs []string
	fail := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}

	// Session 3 acquires once and stops: its records come back after the lock (2s).
	got := sfMustDeliveries(t, sessions[3].mustFetch(nil, 2000))
	if len(got) == 0 {
		t.Fatal("the stopping session acquired nothing")
	}
	for _, d := range got {
		stalled[d.offset] = true
		if d.value == "poison" {
			poisonCounts = append(poisonCounts, d.count)
		}
	}

	deadline := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	for i := range 3 {
		s := sessions[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			var acks []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
			for time.Now().Before(deadline) {
				resp, err := s.fetch(acks, 200)
				if err == nil && resp.ErrorCode != 0 {
					err = kerr.ErrorForCode(resp.ErrorCode)
				}
				if err != nil {
					fail("%s: fetch: %v", s.member, err)
					return
				}
				got, ackErr, err := sfDeliveries(resp)
				if err != nil {
					fail("%s: %v", s.member, err)
					return
				}
				if ackErr != 0 {
					fail("%s: acknowledgement: %v", s.member, kerr.ErrorForCode(ackErr))
				}
				acks = acks[:0]
				mu.Lock()
				for _, d := range got {
					if by, ok := done[d.offset]; ok {
						errs = append(errs, fmt.Sprintf("offset %d delivered to %s after %s acknowledged it", d.offset, s.member, by))
					}
					if stalled[d.offset] {
						redelivered[d.offset] = true
						if d.count < 2 {
							errs = append(errs, fmt.Sprintf("offset %d redelivered with count %d", d.offset, d.count))
						}
					}
					typ := int8(1) // accept
					switch {
					case d.value == "poison":
						poisonCounts = append(poisonCounts, d.count)
						typ = 2 // release, always
					case d.offset%5 == 0 && !released[d.offset]:
						released[d.offset] = true
						typ = 2 // release once
					case d.offset%7 == 0:
						typ = 3 // reject
					}
					if typ != 2 {
						done[d.offset] = s.member
					}
					acks = append(acks, sfAck(d.offset, d.offset, typ))
				}
				finished := len(done) == n-1
				mu.Unlock()
				if finished && len(acks) == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d errors, first: %s", len(errs), errs[0])
	}
	if len(done) != n-1 {
		t.Fatalf("%d of %d records acknowledged", len(done), n-1)
	}
	for o := range stalled {
		if values[o] != "poison" && !redelivered[o] {
			t.Errorf("offset %d held by the stopped session never redelivered", o)
		}
	}
	for o := range released {
		if _, ok := done[o]; !ok {
			t.Errorf("released offset %d never delivered again", o)
		}
	}
	if len(poisonCounts) != 3 {
		t.Fatalf("poison record delivered %d times (counts %v), want 3", len(poisonCounts), poisonCounts)
	}
	for i, c := range poisonCounts {
		if c != int16(i+1) {
			t.Fatalf("poison delivery counts %v, want 1 2 3", poisonCounts)
		}
	}
	// Everything is done: nothing more to acquire.
	if got := sfMustDeliveries(t, sessions[0].mustFetch(nil, 0)); len(got) != 0 {
		t.Fatalf("records delivered after all were done: %+v", got)
	}
}

// TestShareFetchSessionsAndAcknowledge: session epochs, ShareAcknowledge, and closing a session
// releasing the records its member holds.
func TestShareFetchSessionsAndAcknowledge(t *testing.T) {
	const topic, group = "sf-sessions", "sf-group-2"
	addr, id := sfBroker(t, topic)
	s := sfOpen(t, addr, group, "m1", id)
	other := sfOpen(t, addr, group, "m2", id)
	sfProduce(t, s.cl, topic, []string{"a", "b", "c", "d"}, 4)
	got := sfMustDeliveries(t, s.mustFetch(nil, 2000))
	if len(got) != 4 || got[0].offset != 0 || got[0].count != 1 {
		t.Fatalf("acquired %+v", got)
	}

	ack := func(sess *sfSession, epoch int32, first, last int64, typ int8) *kmsg.ShareAcknowledgeResponse {
		req := kmsg.NewPtrShareAcknowledgeRequest()
		req.Version = 2
		req.GroupID, req.MemberID, req.ShareSessionEpoch = &sess.group, &sess.member, epoch
		rt := kmsg.NewShareAcknowledgeRequestTopic()
		rt.TopicID = id
		rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = first, last, []int8{typ}
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return sess.mustRequest(req).(*kmsg.ShareAcknowledgeResponse)
	}
	partErr := func(resp *kmsg.ShareAcknowledgeResponse) error {
		if resp.ErrorCode != 0 {
			return kerr.ErrorForCode(resp.ErrorCode)
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	// Epoch 0 cannot open a session with ShareAcknowledge; a wrong epoch is refused.
	if err := partErr(ack(s, 0, 0, 0, 1)); err != kerr.InvalidShareSessionEpoch {
		t.Fatalf("ack at epoch 0: %v", err)
	}
	if err := partErr(ack(s, s.epoch+5, 0, 0, 1)); err != kerr.InvalidShareSessionEpoch {
		t.Fatalf("ack at a wrong epoch: %v", err)
	}
	if err := partErr(ack(&sfSession{t: t, cl: s.cl, group: group, member: "nobody"}, 1, 0, 0, 1)); err != kerr.ShareSessionNotFound {
		t.Fatalf("ack without a session: %v", err)
	}
	// Another member cannot acknowledge m1's records.
	if err := partErr(ack(other, other.epoch, 0, 0, 1)); err != kerr.InvalidRecordState {
		t.Fatalf("ack of another member's record: %v", err)
	}
	other.epoch++
	// m1 accepts offset 0.
	if err := partErr(ack(s, s.epoch, 0, 0, 1)); err != nil {
		t.Fatalf("accept: %v", err)
	}
	s.epoch++
	// RENEW extends the locks of 1-3 (v2, IsRenewAck).
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version = 2
	req.GroupID, req.MemberID, req.ShareSessionEpoch, req.IsRenewAck = &s.group, &s.member, s.epoch, true
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = 1, 3, []int8{4}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if err := partErr(s.mustRequest(req).(*kmsg.ShareAcknowledgeResponse)); err != nil {
		t.Fatalf("renew: %v", err)
	}
	s.epoch++
	// Closing m1's session (epoch -1) releases 1-3 at once: m2 gets them with count 2.
	if err := partErr(ack(s, -1, 1, 1, 1)); err != nil {
		t.Fatalf("accept on close: %v", err)
	}
	got = sfMustDeliveries(t, other.mustFetch(nil, 2000))
	if len(got) != 2 || got[0].offset != 2 || got[0].count != 2 || got[1].offset != 3 {
		t.Fatalf("after close, m2 acquired %+v, want 2-3 with count 2", got)
	}
	// The closed session is gone.
	if resp := s.mustFetch(nil, 0); resp.ErrorCode != kerr.ShareSessionNotFound.Code {
		t.Fatalf("fetch on a closed session: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestShareFetchBatchSize: ShareFetch's BatchSize cuts the acquired records into batches of
// about that many at log batch boundaries (Kafka's SharePartition.createBatches); record-limit
// mode does not cut.
func TestShareFetchBatchSize(t *testing.T) {
	const topic, group = "sf-batchsize", "sf-group-bs"
	addr, id := sfBroker(t, topic)
	s := sfOpen(t, addr, group, "m1", id)
	values := make([]string, 100)
	for i := range values {
		values[i] = strconv.Itoa(i)
	}
	sfProduce(t, s.cl, topic, values, 10)
	var starts []int64 // the log batches' first offsets, from the last fetch's records
	fetch := func(batchSize int32, mode int8) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
		t.Helper()
		req := kmsg.NewPtrShareFetchRequest()
		req.Version = 2
		req.GroupID, req.MemberID = &s.group, &s.member
		req.ShareSessionEpoch = s.epoch
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 2000, 1, 1<<20
		req.MaxRecords, req.BatchSize, req.ShareAcquireMode = 100, batchSize, mode
		rt := kmsg.NewShareFetchRequestTopic()
		rt.TopicID = id
		rp := kmsg.NewShareFetchRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := s.mustRequest(req).(*kmsg.ShareFetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch: %+v", resp)
		}
		s.epoch++
		starts = starts[:0]
		for b := resp.Topics[0].Partitions[0].Records; len(b) > 0; {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b); err != nil || 12+int(rb.Length) > len(b) {
				t.Fatalf("record batch: %v", err)
			}
			starts = append(starts, rb.FirstOffset)
			b = b[12+int(rb.Length):]
		}
		return resp.Topics[0].Partitions[0].AcquiredRecords
	}
	got := fetch(25, 0)
	// Kafka's cut: a range ends before the first log batch starting 25 or more offsets past
	// its start.
	var want [][2]int64
	first := int64(0)
	for _, st := range starts {
		if st-first >= 25 {
			want = append(want, [2]int64{first, st - 1})
			first = st
		}
	}
	want = append(want, [2]int64{first, 99})
	if len(got) != len(want) || len(want) < 3 {
		t.Fatalf("acquired %+v, want ranges %v (log batches at %v)", got, want, starts)
	}
	for i, w := range want {
		if got[i].FirstOffset != w[0] || got[i].LastOffset != w[1] || got[i].DeliveryCount != 1 {
			t.Fatalf("acquired %+v, want ranges %v (log batches at %v)", got, want, starts)
		}
	}
	// Release them all: acquired again in record-limit mode, one range.
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.Version = 2
	req.GroupID, req.MemberID, req.ShareSessionEpoch = &s.group, &s.member, s.epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
	ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = 0, 99, []int8{2}
	rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if resp := s.mustRequest(req).(*kmsg.ShareAcknowledgeResponse); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("release: %+v", resp)
	}
	s.epoch++
	if got := fetch(25, 1); len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 99 || got[0].DeliveryCount != 2 {
		t.Fatalf("record-limit mode acquired %+v, want 0-99 at count 2", got)
	}
}
