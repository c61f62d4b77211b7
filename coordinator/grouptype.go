package coordinator

import (
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

// GroupType is a group's protocol family, with the names ListGroups v5+ and DescribeGroups
// report (Kafka's Group.GroupType).
type GroupType int8

const (
	// TypeClassic is a group of the JoinGroup/SyncGroup protocol (and a group that only
	// stores offsets).
	TypeClassic GroupType = iota
	// TypeConsumer is a KIP-848 consumer group (ConsumerGroupHeartbeat).
	TypeConsumer
	// TypeShare is a KIP-932 share group (ShareGroupHeartbeat).
	TypeShare
)

func (t GroupType) String() string {
	switch t {
	case TypeConsumer:
		return "consumer"
	case TypeShare:
		return "share"
	default:
		return "classic"
	}
}

// Record key versions (Kafka's CoordinatorRecordType) of __consumer_offsets beyond the classic
// ones (0, 1: offset commits; 2: classic group metadata).
const (
	recConsumerGroupMetadata                 int16 = 3
	recConsumerGroupPartitionMetadata        int16 = 4
	recConsumerGroupMemberMetadata           int16 = 5
	recConsumerGroupTargetAssignmentMetadata int16 = 6
	recConsumerGroupTargetAssignmentMember   int16 = 7
	recConsumerGroupCurrentMemberAssignment  int16 = 8
	recShareGroupPartitionMetadata           int16 = 9
	recShareGroupMemberMetadata              int16 = 10
	recShareGroupMetadata                    int16 = 11
	recShareGroupTargetAssignmentMetadata    int16 = 12
	recShareGroupTargetAssignmentMember      int16 = 13
	recShareGroupCurrentMemberAssignment     int16 = 14
	recShareGroupStatePartitionMetadata      int16 = 15
	recConsumerGroupRegularExpression        int16 = 16
)

// keyVersion is a __consumer_offsets key's version (record type), ok false when too short.
func keyVersion(key []byte) (int16, bool) {
	r := kbin.Reader{Src: key}
	v := r.Int16()
	return v, r.Ok()
}

// replayGroupRecord replays one record of a KIP-848 consumer group or a KIP-932 share group
// during a partition's load (get returns the group's loadedGroup, creating it). It reports
// whether the record was understood; a record it does not understand is counted as skipped.
func (c *Coordinator) replayGroupRecord(get func(id string) *loadedGroup, key, value []byte) bool {
	v, ok := keyVersion(key)
	if !ok {
		return false
	}
	switch v {
	case recConsumerGroupMetadata, recConsumerGroupPartitionMetadata, recConsumerGroupMemberMetadata,
		recConsumerGroupTargetAssignmentMetadata, recConsumerGroupTargetAssignmentMember,
		recConsumerGroupCurrentMemberAssignment, recConsumerGroupRegularExpression:
		return c.replayConsumerRecord(get, v, key, value)
	case recShareGroupPartitionMetadata, recShareGroupMemberMetadata, recShareGroupMetadata,
		recShareGroupTargetAssignmentMetadata, recShareGroupTargetAssignmentMember,
		recShareGroupCurrentMemberAssignment, recShareGroupStatePartitionMetadata:
		return c.replayShareRecord(get, v, key, value)
	}
	return false
}

// installGroupRecords gives a group being installed from a load its consumer-group or
// share-group state (called with c.mu held, before the group's goroutine starts).
func (c *Coordinator) installGroupRecords(g *group, lg *loadedGroup, now time.Time) {
	switch {
	case lg.cg != nil:
		c.installConsumerGroup(g, lg.cg, now)
	case lg.sg != nil:
		c.installShareGroup(g, lg.sg, now)
	}
}
