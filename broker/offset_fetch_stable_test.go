package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/record"
)

// TestOffsetFetchRequireStable: a transactional offset commit on __consumer_offsets (written
// here as Kafka's coordinator writes it: a transactional batch of the producer, then its COMMIT
// marker) is pending for OffsetFetch: require_stable (v7+) answers UNSTABLE_OFFSET_COMMIT for its
// partitions, without it the last committed offset is returned; after the marker the
// transaction's offsets are the committed ones. The coordinator learns the pending offsets by
// loading the partition (as after a failover) and the marker through CompleteTxn.
func TestOffsetFetchRequireStable(t *testing.T) {
	b := startGroupBroker(t, nil)
	addr := b.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createTopic(t, addr, "st", 2, nil)
	adm := kadm.NewClient(newKgo(t, addr))
	const group = "stable-g"
	first := kadm.Offsets{}
	first.Add(kadm.Offset{Topic: "st", Partition: 0, At: 5, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, group, first); err != nil || r.Error() != nil {
		t.Fatal(err, r.Error())
	}

	const pid = 4242
	p := writePendingTxnOffsets(t, b, group, "st", pid, map[int32]int64{0: 9, 1: 11})

	w := dialWire(t, addr)
	fetch := func(version int16, stable bool) map[int32]kmsg.OffsetFetchResponseGroupTopicPartition {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.RequireStable = stable
			if version >= 8 {
				rg := kmsg.NewOffsetFetchRequestGroup()
				rg.Group = group
				rt := kmsg.NewOffsetFetchRequestGroupTopic()
				rt.Topic, rt.Partitions = "st", []int32{0, 1}
				rg.Topics = append(rg.Topics, rt)
				req.Groups = append(req.Groups, rg)
			} else {
				req.Group = group
				rt := kmsg.NewOffsetFetchRequestTopic()
				rt.Topic, rt.Partitions = "st", []int32{0, 1}
				req.Topics = append(req.Topics, rt)
			}
			resp := wireRoundTrip[*kmsg.OffsetFetchResponse](w, req, version)
			out := map[int32]kmsg.OffsetFetchResponseGroupTopicPartition{}
			code := resp.ErrorCode
			if version >= 8 {
				code = resp.Groups[0].ErrorCode
				for _, tp := range resp.Groups[0].Topics[0].Partitions {
					out[tp.Partition] = tp
				}
			} else {
				for _, tp := range resp.Topics[0].Partitions {
					out[tp.Partition] = kmsg.OffsetFetchResponseGroupTopicPartition{Partition: tp.Partition, Offset: tp.Offset, ErrorCode: tp.ErrorCode}
				}
			}
			if code == kerr.CoordinatorLoadInProgress.Code && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			wantCode(t, "group", code, nil)
			return out
		}
	}
	want := func(what string, got map[int32]kmsg.OffsetFetchResponseGroupTopicPartition, o0, o1 int64, e *kerr.Error) {
		t.Helper()
		if got[0].Offset != o0 || got[1].Offset != o1 {
			t.Fatalf("%s: offsets %d %d, want %d %d", what, got[0].Offset, got[1].Offset, o0, o1)
		}
		wantCode(t, what+" partition 0", got[0].ErrorCode, e)
		wantCode(t, what+" partition 1", got[1].ErrorCode, e)
	}
	for _, v := range []int16{7, 8, 9} {
		want("pending, require_stable", fetch(v, true), -1, -1, kerr.UnstableOffsetCommit)
		want("pending, not stable", fetch(v, false), 5, -1, nil)
	}
	want("pending, v6 (no require_stable)", fetch(6, true), 5, -1, nil)

	writeTxnMarker(t, b, p, pid, true)
	for _, v := range []int16{7, 8} {
		want("committed, require_stable", fetch(v, true), 9, 11, nil)
	}
}

// offsetsLogOf returns the log of the group's __consumer_offsets partition.
func offsetsLogOf(t *testing.T, b *Broker, group string) (int32, *engine.Log) {
	t.Helper()
	p := b.Coordinator().PartitionFor(group)
	l, ok := b.logs.Log(engine.TopicPartition{Topic: offsetsTopic, Partition: p})
	if !ok {
		t.Fatal("no __consumer_offsets log")
	}
	return p, l
}

// appendStoredAtEnd appends a batch at the log end through the stored-batch path (the engine's
// producer path refuses control batches and checks sequences) and returns its last offset.
func appendStoredAtEnd(t *testing.T, l *engine.Log, batch []byte) int64 {
	t.Helper()
	record.SetBaseOffset(batch, l.LogEndOffset())
	info, err := l.AppendStored(batch)
	if err != nil {
		t.Fatal(err)
	}
	return info.LastOffset
}

// writePendingTxnOffsets writes producer pid's transactional offset commit for group as Kafka's
// coordinator writes it (OffsetCommitKey v1 / OffsetCommitValue v3 records in a transactional
// batch of the producer, base sequence 0) and reloads the group's partition, so the coordinator
// holds the offsets pending as after a failover. It returns the partition.
func writePendingTxnOffsets(t *testing.T, b *Broker, group, topic string, pid int64, offsets map[int32]int64) int32 {
	t.Helper()
	p, l := offsetsLogOf(t, b, group)
	var recs []record.Record
	for partition, offset := range offsets {
		key := kbin.AppendInt16(nil, 1)
		key = kbin.AppendString(key, group)
		key = kbin.AppendString(key, topic)
		key = kbin.AppendInt32(key, partition)
		val := kbin.AppendInt16(nil, 3)
		val = kbin.AppendInt64(val, offset)
		val = kbin.AppendInt32(val, -1)
		val = kbin.AppendString(val, "txn")
		val = kbin.AppendInt64(val, time.Now().UnixMilli())
		recs = append(recs, record.Record{Key: key, Value: val})
	}
	appendStoredAtEnd(t, l, record.Build(nil, record.BuildOptions{ProducerID: pid, ProducerEpoch: 0, BaseSequence: 0, Attributes: 0x10}, recs))
	b.Coordinator().Resign(p)
	b.Coordinator().Elect(p)
	return p
}

// writeTxnMarker appends producer pid's COMMIT (or ABORT) marker to __consumer_offsets
// partition p (control record key: version 0 + type; value: version 0 + coordinator epoch) and
// tells the coordinator, as WriteTxnMarkers does after writing a marker.
func writeTxnMarker(t *testing.T, b *Broker, p int32, pid int64, commit bool) {
	t.Helper()
	l, ok := b.logs.Log(engine.TopicPartition{Topic: offsetsTopic, Partition: p})
	if !ok {
		t.Fatal("no __consumer_offsets log")
	}
	at := appendStoredAtEnd(t, l, record.BuildEndTxnMarker(nil, 0, 0, pid, 0, record.EndTxnMarker{Commit: commit}))
	b.Coordinator().CompleteTxn(p, pid, commit, at)
}

// TestOffsetFetchRequireStableKgo: a franz-go group consumer with RequireStableFetchOffsets
// waits while a transaction holds a pending offset for its partition (it retries
// UNSTABLE_OFFSET_COMMIT) and starts from the transaction's offset once it commits.
func TestOffsetFetchRequireStableKgo(t *testing.T) {
	b := startGroupBroker(t, nil)
	addr := b.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createTopic(t, addr, "stk", 1, nil)
	produceN(t, addr, "stk", 0, 20)
	const group = "stable-k"
	adm := kadm.NewClient(newKgo(t, addr))
	first := kadm.Offsets{}
	first.Add(kadm.Offset{Topic: "stk", Partition: 0, At: 5, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, group, first); err != nil || r.Error() != nil {
		t.Fatal(err, r.Error())
	}
	const pid = 777
	p := writePendingTxnOffsets(t, b, group, "stk", pid, map[int32]int64{0: 12})

	cl := newKgo(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics("stk"), kgo.RequireStableFetchOffsets(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit())
	pollCtx, pollCancel := context.WithTimeout(ctx, 3*time.Second)
	fs := cl.PollFetches(pollCtx)
	pollCancel()
	if n := fs.NumRecords(); n != 0 {
		t.Fatalf("consumed %d records while the offset was unstable (first at %d)", n, fs.Records()[0].Offset)
	}
	writeTxnMarker(t, b, p, pid, true)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no records after the commit marker")
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch: %v", e.Err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			if recs[0].Offset != 12 {
				t.Fatalf("started at %d, want the transaction's offset 12", recs[0].Offset)
			}
			return
		}
	}
}
