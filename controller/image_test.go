package controller

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func mustApply(t *testing.T, img *Image, index uint64, cmd *command) *Image {
	t.Helper()
	next, res := apply(img, index, cmd)
	if res.err != nil {
		t.Fatalf("%s: %v", cmd.Op, res.err)
	}
	if next == nil {
		return img
	}
	return next
}

func testImage(t *testing.T) *Image {
	img := newImage("c")
	for i := int32(1); i <= 3; i++ {
		img = mustApply(t, img, uint64(i), &command{Op: opRegister, BrokerID: i})
	}
	topic := &TopicInfo{Name: "t", ID: [16]byte{1}, Partitions: []PartitionInfo{
		{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1},
		{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		{Replicas: []int32{2, 1}, ISR: []int32{2}, Leader: 2},
	}}
	return mustApply(t, img, 10, &command{Op: opCreateTopic, Topic: topic})
}

func TestApplyFenceUnfence(t *testing.T) {
	img := testImage(t)
	before, _ := encodeImage(img)
	fenced := mustApply(t, img, 11, &command{Op: opFence, BrokerID: 1})
	if after, _ := encodeImage(img); !bytes.Equal(before, after) {
		t.Fatal("apply modified the published image")
	}
	if !fenced.Brokers[1].Fenced || fenced.Index != 11 {
		t.Fatalf("%+v", fenced.Brokers[1])
	}
	p := fenced.Topics["t"].Partitions
	if p[0].Leader != 2 || !slices.Equal(p[0].ISR, []int32{2, 3}) || p[0].LeaderEpoch != 1 || p[0].PartitionEpoch != 1 {
		t.Fatalf("p0 %+v", p[0])
	}
	if p[1].Leader != -1 || !slices.Equal(p[1].ISR, []int32{1}) || p[1].LeaderEpoch != 1 {
		t.Fatalf("p1 %+v", p[1])
	}
	if p[2].Leader != 2 || p[2].PartitionEpoch != 0 {
		t.Fatalf("p2 %+v", p[2])
	}
	if fenced.TopicsByID[[16]byte{1}] != fenced.Topics["t"] {
		t.Fatal("TopicsByID not updated")
	}
	// Fence 2 too: p0 goes to 3; p2's only ISR member is 2, and 1 is fenced: no leader.
	f2 := mustApply(t, fenced, 12, &command{Op: opFence, BrokerID: 2})
	p = f2.Topics["t"].Partitions
	if p[0].Leader != 3 || !slices.Equal(p[0].ISR, []int32{3}) || p[2].Leader != -1 || !slices.Equal(p[2].ISR, []int32{2}) {
		t.Fatalf("after fencing 2: %+v", p)
	}
	// Unfencing 1 gives it p1 (in ISR) but not p2 (not in ISR, no unclean election).
	u1 := mustApply(t, f2, 13, &command{Op: opUnfence, BrokerID: 1})
	p = u1.Topics["t"].Partitions
	if p[1].Leader != 1 || p[1].LeaderEpoch != 2 || p[2].Leader != -1 {
		t.Fatalf("after unfencing 1: %+v", p)
	}
	// With unclean election for t, unfencing 1 also takes p2 with ISR [1].
	u1u := mustApply(t, f2, 13, &command{Op: opUnfence, BrokerID: 1, Unclean: []string{"t"}})
	if p := u1u.Topics["t"].Partitions[2]; p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("unclean: %+v", p)
	}
	// Unclean on fence: fencing 2 while 1 is alive but out of p2's ISR.
	fu := mustApply(t, img, 11, &command{Op: opFence, BrokerID: 2, Unclean: []string{"t"}})
	if p := fu.Topics["t"].Partitions[2]; p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("unclean fence: %+v", p)
	}
	// Snapshot round trip.
	data, _ := encodeImage(u1)
	back, err := decodeImage(data)
	if err != nil {
		t.Fatal(err)
	}
	data2, _ := encodeImage(back)
	if !bytes.Equal(data, data2) || back.TopicsByID[[16]byte{1}] != back.Topics["t"] {
		t.Fatal("snapshot round trip differs")
	}
}

func TestApplyErrors(t *testing.T) {
	img := testImage(t)
	cases := []struct {
		cmd  command
		want *kerr.Error
	}{
		{command{Op: opCreateTopic, Topic: &TopicInfo{Name: "t", ID: [16]byte{2}}}, kerr.TopicAlreadyExists},
		{command{Op: opCreateTopic, Topic: &TopicInfo{Name: "u", ID: [16]byte{1}}}, kerr.TopicAlreadyExists},
		{command{Op: opDeleteTopic, Name: "u"}, kerr.UnknownTopicOrPartition},
		{command{Op: opCreatePartitions, Name: "t", Base: 2}, kerr.InvalidPartitions},
		{command{Op: opAlterConfigs, Name: "u"}, kerr.UnknownTopicOrPartition},
		{command{Op: opAllocPIDs, N: 0}, kerr.InvalidRequest},
		{command{Op: "bogus"}, kerr.InvalidRequest},
		{command{Op: opAlterPartition, Alter: &AlterPartitionRequest{Topic: "t", Partition: 3}}, kerr.UnknownTopicOrPartition},
		{command{Op: opAlterPartition, Alter: &AlterPartitionRequest{Topic: "t", Partition: 0, LeaderID: 1, LeaderEpoch: 1}}, kerr.FencedLeaderEpoch},
		{command{Op: opAlterPartition, Alter: &AlterPartitionRequest{Topic: "t", Partition: 0, LeaderID: 1, PartitionEpoch: 1}}, kerr.InvalidUpdateVersion},
		{command{Op: opAlterPartition, Alter: &AlterPartitionRequest{Topic: "t", Partition: 0, LeaderID: 1, ISR: []int32{1, 1}}}, kerr.InvalidRequest},
		{command{Op: opAlterPartition, Alter: &AlterPartitionRequest{Topic: "t", Partition: 0, LeaderID: 1, ISR: []int32{1, 4}}}, kerr.InvalidRequest},
	}
	for _, tc := range cases {
		next, res := apply(img, 20, &tc.cmd)
		if next != nil || !errors.Is(res.err, tc.want) {
			t.Errorf("%+v: %v (image %v), want %s", tc.cmd, res.err, next != nil, tc.want.Message)
		}
	}
	// An ISR may not grow with a fenced replica.
	f3 := mustApply(t, img, 21, &command{Op: opFence, BrokerID: 3})
	p := f3.Topics["t"].Partitions[0]
	_, res := apply(f3, 22, &command{Op: opAlterPartition, Alter: &AlterPartitionRequest{
		Topic: "t", Partition: 0, LeaderID: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{1, 2, 3}}})
	if !errors.Is(res.err, kerr.IneligibleReplica) {
		t.Fatalf("fenced replica added to ISR: %v", res.err)
	}
	// Producer ids advance.
	next, res := apply(img, 23, &command{Op: opAllocPIDs, N: 5})
	if res.first != firstProducerID || next.NextProducerID != firstProducerID+5 {
		t.Fatalf("pids %d %d", res.first, next.NextProducerID)
	}
}

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	if err := writeFrame(&buf, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	got, err := readFrame(&buf)
	if err != nil || string(got) != "hello" {
		t.Fatal(got, err)
	}
	for _, n := range []uint32{0, maxFrame + 1, 1<<32 - 1} {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], n)
		if _, err := readFrame(bytes.NewReader(hdr[:])); err == nil {
			t.Errorf("length %d accepted", n)
		}
	}
	if _, err := readFrame(bytes.NewReader([]byte{0, 0, 0, 9, 'x'})); err == nil {
		t.Error("short frame accepted")
	}
}

func TestPlace(t *testing.T) {
	got := place([]int32{1, 2, 3}, 1, 0, 4, 2)
	want := [][]int32{{2, 3}, {3, 1}, {1, 2}, {2, 3}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("place: %v, want %v", got, want)
		}
	}
	// CreatePartitions continues the round robin.
	more := place([]int32{1, 2, 3}, 1, 4, 2, 2)
	if !slices.Equal(more[0], []int32{3, 1}) || !slices.Equal(more[1], []int32{1, 2}) {
		t.Fatalf("continued: %v", more)
	}
}

// TestRecordsIndex: each kind's records carry the raft index of their last change; other
// commands and other kinds leave it alone; a snapshot gives every kind it holds its index.
func TestRecordsIndex(t *testing.T) {
	img := testImage(t)
	if v := img.RecordsIndex[RecordKindACL]; v != 0 {
		t.Fatalf("acl records never written: version %d, want 0", v)
	}
	img = mustApply(t, img, 20, &command{Op: opPutRecords, Kind: RecordKindACL, Puts: map[string]string{"a": "1"}})
	img = mustApply(t, img, 21, &command{Op: opPutRecords, Kind: RecordKindSCRAM, Puts: map[string]string{"u": "x"}})
	before := img
	img = mustApply(t, img, 22, &command{Op: opFence, BrokerID: 2})
	if img.RecordsIndex[RecordKindACL] != 20 || img.RecordsIndex[RecordKindSCRAM] != 21 {
		t.Fatalf("versions %v, want acl 20, scram 21", img.RecordsIndex)
	}
	img = mustApply(t, img, 23, &command{Op: opPutRecords, Kind: RecordKindACL, Deletes: []string{"a"}})
	if img.RecordsIndex[RecordKindACL] != 23 || before.RecordsIndex[RecordKindACL] != 20 {
		t.Fatalf("after a change: %v (the earlier image: %v)", img.RecordsIndex, before.RecordsIndex)
	}
	data, _ := encodeImage(img)
	back, err := decodeImage(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.RecordsIndex[RecordKindACL] != img.Index || back.RecordsIndex[RecordKindSCRAM] != img.Index {
		t.Fatalf("restored versions %v, want the snapshot's index %d", back.RecordsIndex, img.Index)
	}
}
