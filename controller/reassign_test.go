package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// reassignImage is testImage with a fourth broker.
func reassignImage(t *testing.T) *Image {
	img := testImage(t)
	return mustApply(t, img, 11, &command{Op: opRegister, BrokerID: 4})
}

func reassignCmd(topic string, p int32, target ...int32) *command {
	return &command{Op: opReassign, Reassign: &ReassignRequest{Topic: topic, Partition: p, Target: target}}
}

func isrCmd(p PartitionInfo, isr ...int32) *command {
	return &command{Op: opAlterPartition, Alter: &AlterPartitionRequest{Topic: "t", Partition: 0, LeaderID: p.Leader,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: isr}}
}

// TestReassignLifecycle: {1,2,3} -> {2,3,4}: replicas become the union with 4 adding and 1
// removing; 4 joining the ISR completes it, moving the leadership off 1 with a new leader epoch.
func TestReassignLifecycle(t *testing.T) {
	img := reassignImage(t)
	img = mustApply(t, img, 12, reassignCmd("t", 0, 2, 3, 4))
	p := img.Topics["t"].Partitions[0]
	if !slices.Equal(p.Replicas, []int32{2, 3, 4, 1}) || !slices.Equal(p.AddingReplicas, []int32{4}) ||
		!slices.Equal(p.RemovingReplicas, []int32{1}) || p.Leader != 1 || p.LeaderEpoch != 0 || p.PartitionEpoch != 1 {
		t.Fatalf("started: %+v", p)
	}
	if !slices.Equal(p.TargetReplicas(), []int32{2, 3, 4}) || !slices.Equal(p.OriginalReplicas(), []int32{2, 3, 1}) {
		t.Fatalf("target %v original %v", p.TargetReplicas(), p.OriginalReplicas())
	}
	// The leader adds 4 to the ISR: every target replica is in, so it completes.
	img = mustApply(t, img, 13, isrCmd(p, 1, 2, 3, 4))
	p = img.Topics["t"].Partitions[0]
	if !slices.Equal(p.Replicas, []int32{2, 3, 4}) || !slices.Equal(p.ISR, []int32{2, 3, 4}) || p.Reassigning() ||
		p.Leader != 2 || p.LeaderEpoch != 1 || p.PartitionEpoch != 3 {
		t.Fatalf("completed: %+v", p)
	}
	// Snapshots carry the fields (and omit them when empty).
	img = mustApply(t, img, 14, reassignCmd("t", 0, 4, 1))
	data, err := encodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeImage(data)
	if err != nil {
		t.Fatal(err)
	}
	if q := back.Topics["t"].Partitions[0]; !slices.Equal(q.AddingReplicas, []int32{1}) || !slices.Equal(q.RemovingReplicas, []int32{2, 3}) {
		t.Fatalf("after snapshot: %+v", q)
	}
}

// TestReassignCancelAndReplace: a cancel reverts to the original replicas; a new target
// replaces one in progress (replicas being added and not in the new target become removing).
func TestReassignCancelAndReplace(t *testing.T) {
	img := reassignImage(t)
	img = mustApply(t, img, 12, reassignCmd("t", 0, 2, 3, 4))
	img = mustApply(t, img, 13, &command{Op: opReassign, Reassign: &ReassignRequest{Topic: "t", Partition: 0, Cancel: true}})
	p := img.Topics["t"].Partitions[0]
	if !slices.Equal(p.Replicas, []int32{2, 3, 1}) || p.Reassigning() || !slices.Equal(p.ISR, []int32{1, 2, 3}) || p.Leader != 1 {
		t.Fatalf("cancelled: %+v", p)
	}
	img = mustApply(t, img, 14, reassignCmd("t", 0, 4, 2, 3))
	img = mustApply(t, img, 15, reassignCmd("t", 0, 1, 2, 3))
	p = img.Topics["t"].Partitions[0]
	// Every target replica is in the ISR: the replacement completes at once, 4 is dropped.
	if !slices.Equal(p.Replicas, []int32{1, 2, 3}) || p.Reassigning() || p.Leader != 1 {
		t.Fatalf("replaced: %+v", p)
	}
}

// TestReassignReplaceDropsAdded: a replacement drops a replica that was being added (and had
// joined the ISR) from the replicas and the ISR; asking again for the same target changes
// nothing.
func TestReassignReplaceDropsAdded(t *testing.T) {
	img := reassignImage(t)
	img = mustApply(t, img, 12, &command{Op: opRegister, BrokerID: 5})
	img = mustApply(t, img, 13, reassignCmd("t", 0, 1, 4, 5))
	again := mustApply(t, img, 14, reassignCmd("t", 0, 1, 4, 5))
	if a, b := again.Topics["t"].Partitions[0], img.Topics["t"].Partitions[0]; !slices.Equal(a.Replicas, b.Replicas) ||
		!slices.Equal(a.AddingReplicas, b.AddingReplicas) || !slices.Equal(a.RemovingReplicas, b.RemovingReplicas) {
		t.Fatalf("the same target again: %+v, was %+v", a, b)
	}
	// 4 catches up and joins the ISR; 5 has not, so the reassignment goes on.
	img = mustApply(t, img, 15, isrCmd(img.Topics["t"].Partitions[0], 1, 2, 3, 4))
	if p := img.Topics["t"].Partitions[0]; !p.Reassigning() || !slices.Contains(p.ISR, 4) {
		t.Fatalf("after 4 joined: %+v", p)
	}
	img = mustApply(t, img, 16, reassignCmd("t", 0, 1, 2, 3))
	p := img.Topics["t"].Partitions[0]
	if !slices.Equal(p.Replicas, []int32{1, 2, 3}) || p.Reassigning() || !slices.Equal(p.ISR, []int32{1, 2, 3}) || p.Leader != 1 {
		t.Fatalf("4 and 5 not dropped: %+v", p)
	}
}

func TestReassignErrors(t *testing.T) {
	img := reassignImage(t)
	cases := []struct {
		cmd  *command
		want *kerr.Error
	}{
		{reassignCmd("nope", 0, 1), kerr.UnknownTopicOrPartition},
		{reassignCmd("t", 9, 1), kerr.UnknownTopicOrPartition},
		{reassignCmd("t", 0), kerr.InvalidReplicaAssignment},
		{reassignCmd("t", 0, 1, 1), kerr.InvalidReplicaAssignment},
		{reassignCmd("t", 0, 1, 7), kerr.InvalidReplicaAssignment},
		{&command{Op: opReassign, Reassign: &ReassignRequest{Topic: "t", Partition: 0, Cancel: true}}, kerr.NoReassignmentInProgress},
		{&command{Op: opReassign}, kerr.InvalidRequest},
	}
	for i, c := range cases {
		next, res := apply(img, 20, c.cmd)
		if next != nil || !errors.Is(res.err, c.want) {
			t.Errorf("case %d: %v, want %v", i, res.err, c.want)
		}
		if _, err := planReassign(img, c.cmd.Reassign); !errors.Is(err, c.want) {
			t.Errorf("case %d plan: %v, want %v", i, err, c.want)
		}
	}
}
