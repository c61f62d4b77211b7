package controller

// Placement (raft leader only): topic name checks, the round-robin replica placement of new
// topics and partitions (rack-aware when brokers have racks: racks.go), and the checks of
// explicit assignments.

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return kerrf(kerr.InvalidTopicException, "invalid topic name %q", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return kerrf(kerr.InvalidTopicException, "invalid character %q in topic name %q", r, name)
		}
	}
	return nil
}

// place returns the replicas of partitions first..first+count-1: partition i's replica j is on
// brokers[(start + i + j) mod n].
func place(brokers []int32, start, first, count, rf int) [][]int32 {
	n := len(brokers)
	out := make([][]int32, count)
	for k := range count {
		i := first + k
		reps := make([]int32, rf)
		for j := range rf {
			reps[j] = brokers[(start+i+j)%n]
		}
		out[k] = reps
	}
	return out
}

func validateAssignment(img *Image, a [][]int32) error {
	for i, reps := range a {
		if len(reps) == 0 {
			return kerrf(kerr.InvalidReplicaAssignment, "partition %d has no replicas", i)
		}
		seen := map[int32]bool{}
		for _, r := range reps {
			if seen[r] {
				return kerrf(kerr.InvalidReplicaAssignment, "partition %d lists broker %d twice", i, r)
			}
			seen[r] = true
			if _, ok := img.Brokers[r]; !ok {
				return kerrf(kerr.InvalidReplicaAssignment, "partition %d: broker %d is not registered", i, r)
			}
		}
	}
	return nil
}

func newPartitions(img *Image, a [][]int32) []PartitionInfo {
	out := make([]PartitionInfo, len(a))
	for i, reps := range a {
		p := PartitionInfo{Replicas: slices.Clone(reps), ISR: slices.Clone(reps), Leader: -1}
		for _, r := range reps {
			if img.alive(r) {
				p.Leader = r
				break
			}
		}
		out[i] = p
	}
	return out
}

func (c *Controller) planTopic(img *Image, r *CreateTopicRequest) (*TopicInfo, error) {
	if err := validTopicName(r.Name); err != nil {
		return nil, err
	}
	if _, ok := img.Topics[r.Name]; ok {
		return nil, kerrf(kerr.TopicAlreadyExists, "topic %q", r.Name)
	}
	var assignment [][]int32
	if len(r.Assignment) > 0 {
		if r.Partitions > 0 && int(r.Partitions) != len(r.Assignment) {
			return nil, kerrf(kerr.InvalidReplicaAssignment, "%d partitions but %d assignments", r.Partitions, len(r.Assignment))
		}
		if len(r.Assignment) > maxPartitionsPerRequest {
			return nil, kerrf(kerr.InvalidPartitions, "%d partitions, at most %d", len(r.Assignment), maxPartitionsPerRequest)
		}
		if err := validateAssignment(img, r.Assignment); err != nil {
			return nil, err
		}
		assignment = r.Assignment
	} else {
		if r.Partitions < 1 || r.Partitions > maxPartitionsPerRequest {
			return nil, kerrf(kerr.InvalidPartitions, "%d partitions", r.Partitions)
		}
		brokers := img.UnfencedBrokers()
		if r.ReplicationFactor < 1 || int(r.ReplicationFactor) > len(brokers) {
			return nil, kerrf(kerr.InvalidReplicationFactor, "replication factor %d with %d available brokers", r.ReplicationFactor, len(brokers))
		}
		assignment = placeNew(img, brokers, nil, mrand.IntN(len(brokers)), 0, int(r.Partitions), int(r.ReplicationFactor))
	}
	id := r.ID
	if id == ([16]byte{}) {
		for id == ([16]byte{}) || img.TopicsByID[id] != nil {
			_, _ = rand.Read(id[:])
		}
	} else if img.TopicsByID[id] != nil {
		return nil, kerrf(kerr.TopicAlreadyExists, "topic id of %q already in use", r.Name)
	}
	return &TopicInfo{
		Name:       r.Name,
		ID:         id,
		Configs:    cloneConfigs(r.Configs),
		Internal:   r.Internal,
		Partitions: newPartitions(img, assignment),
	}, nil
}

func planPartitions(img *Image, name string, total int32, assignment [][]int32) (*command, error) {
	t := img.Topics[name]
	if t == nil {
		return nil, kerrf(kerr.UnknownTopicOrPartition, "topic %q", name)
	}
	cur := int32(len(t.Partitions))
	if total <= cur || total-cur > maxPartitionsPerRequest {
		return nil, kerrf(kerr.InvalidPartitions, "topic %q has %d partitions; cannot grow to %d", name, cur, total)
	}
	if len(assignment) > 0 {
		if int32(len(assignment)) != total-cur {
			return nil, kerrf(kerr.InvalidReplicaAssignment, "%d assignments for %d new partitions", len(assignment), total-cur)
		}
		if err := validateAssignment(img, assignment); err != nil {
			return nil, err
		}
	} else {
		rf := 1
		if cur > 0 {
			rf = len(t.Partitions[0].Replicas)
		}
		brokers := img.UnfencedBrokers()
		if rf < 1 || rf > len(brokers) {
			return nil, kerrf(kerr.InvalidReplicationFactor, "replication factor %d with %d available brokers", rf, len(brokers))
		}
		start := -1
		if cur > 0 && len(t.Partitions[0].Replicas) > 0 {
			start = slices.Index(brokers, t.Partitions[0].Replicas[0])
		}
		if start < 0 {
			start = mrand.IntN(len(brokers))
		}
		assignment = placeNew(img, brokers, t.Partitions, start, int(cur), int(total-cur), rf)
	}
	return &command{Op: opCreatePartitions, Name: name, Base: cur, Partitions: newPartitions(img, assignment)}, nil
}
