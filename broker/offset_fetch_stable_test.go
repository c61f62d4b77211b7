package broker

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
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

	coord := b.Coordinator()
	p := coord.PartitionFor(group)
	l, ok := b.logs.Log(engine.TopicPartition{Topic: offsetsTopic, Partition: p})
	if !ok {
		t.Fatal("no __consumer_offsets log")
	}
	appendStored := func(batch []byte) int64 {
		t.Helper()
		record.SetBaseOffset(batch, l.LogEndOffset())
		info, err := l.AppendStored(batch)
		if err != nil {
			t.Fatal(err)
		}
		return info.LastOffset
	}
	const pid = 4242
	offsetRecord := func(partition int32, offset int64) record.Record {
		key := kbin.AppendInt16(nil, 1)
		key = kbin.AppendString(key, group)
		key = kbin.AppendString(key, "st")
		key = kbin.AppendInt32(key, partition)
		val := kbin.AppendInt16(nil, 3)
		val = kbin.AppendInt64(val, offset)
		val = kbin.AppendInt32(val, -1)
		val = kbin.AppendString(val, "txn")
		val = kbin.AppendInt64(val, time.Now().UnixMilli())
		return record.Record{Key: key, Value: val}
	}
	appendStored(record.Build(nil, record.BuildOptions{ProducerID: pid, ProducerEpoch: 0, BaseSequence: 0, Attributes: 0x10},
		[]record.Record{offsetRecord(0, 9), offsetRecord(1, 11)}))
	// Reload the partition: the open transaction is pending after the load.
	coord.Resign(p)
	coord.Elect(p)

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

	// The COMMIT marker: key version 0 + type 1, value version 0 + coordinator epoch.
	key := binary.BigEndian.AppendUint16([]byte{0, 0}, 1)
	val := binary.BigEndian.AppendUint32([]byte{0, 0}, 0)
	at := appendStored(record.Build(nil, record.BuildOptions{ProducerID: pid, ProducerEpoch: 0, BaseSequence: -1, Attributes: 0x30},
		[]record.Record{{Key: key, Value: val}}))
	coord.CompleteTxn(p, pid, true, at)
	for _, v := range []int16{7, 8} {
		want("committed, require_stable", fetch(v, true), 9, 11, nil)
	}
}
