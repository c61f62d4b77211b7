package coordinator

import "github.com/twmb/franz-go/pkg/kerr"

// State is a classic group's state, with Kafka's names.
type State int8

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	default:
		return "Dead"
	}
}

// Protocol is one assignor a joining member supports, with its metadata (for consumers, the
// subscription).
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup request.
type JoinRequest struct {
	Group      string
	MemberID   string // "" for a new member
	InstanceID *string
	ClientID   string
	ClientHost string
	// SessionTimeoutMs and RebalanceTimeoutMs (v0: the session timeout) bound the member's
	// heartbeats and the join/sync phases.
	SessionTimeoutMs   int32
	RebalanceTimeoutMs int32
	ProtocolType       string
	Protocols          []Protocol
	// RequireKnownMemberID is JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED.
	RequireKnownMemberID bool
	// SupportsSkipAssignment is JoinGroup v9+ (KIP-814): a static leader rejoining a stable
	// group gets the member list with SkipAssignment instead of triggering nothing visible.
	SupportsSkipAssignment bool
	Reason                 string
}

// JoinMember is one member as the leader's JoinGroup response lists it.
type JoinMember struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte
}

// JoinResult is a JoinGroup response.
type JoinResult struct {
	Err          *kerr.Error
	Generation   int32
	ProtocolType *string
	Protocol     *string
	Leader       string
	MemberID     string
	// Members is set only in the leader's response.
	Members        []JoinMember
	SkipAssignment bool

	durable durableMark
}

// Assignment is one member's assignment in the leader's SyncGroup.
type Assignment struct {
	MemberID   string
	Assignment []byte
}

// SyncRequest is a SyncGroup request.
type SyncRequest struct {
	Group        string
	Generation   int32
	MemberID     string
	InstanceID   *string
	ProtocolType *string // v5+
	Protocol     *string // v5+
	Assignments  []Assignment
}

// SyncResult is a SyncGroup response: the member's own assignment (possibly zero-length).
type SyncResult struct {
	Err          *kerr.Error
	ProtocolType *string
	Protocol     *string
	Assignment   []byte

	durable durableMark
}

// HeartbeatRequest is a Heartbeat request.
type HeartbeatRequest struct {
	Group      string
	Generation int32
	MemberID   string
	InstanceID *string
}

// LeaveMember is one member leaving (v3+ batches them; InstanceID alone removes a static member).
type LeaveMember struct {
	MemberID   string
	InstanceID *string
	Reason     string
}

// LeaveResult is a LeaveGroup response: a group-level error, or one error per member.
type LeaveResult struct {
	Err     *kerr.Error
	Members []*kerr.Error
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// CommitPartition is one partition's committed offset.
type CommitPartition struct {
	TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
}

// CommitRequest is an OffsetCommit request (partitions of unknown topics already filtered out).
type CommitRequest struct {
	Group      string
	Generation int32 // -1: a commit from outside group management (admin, standalone consumer)
	MemberID   string
	InstanceID *string
	// RetentionMs (v2-v4) sets an expire time for these offsets; -1 uses the broker's policy.
	RetentionMs int64
	// Version is the OffsetCommit version (0: unknown); a consumer group's member must use v9+.
	Version    int16
	Partitions []CommitPartition
}

// TxnCommitRequest is a TxnOffsetCommit request (partitions of unknown topics already filtered
// out): offsets committed inside the transaction of ProducerID, visible only once its COMMIT
// marker is written to the group's __consumer_offsets partition.
type TxnCommitRequest struct {
	Group         string
	ProducerID    int64
	ProducerEpoch int16
	// Generation, MemberID and InstanceID are KIP-447's group metadata (v3+); v0-v2 send -1,
	// "" and nil, which Kafka accepts in any group state.
	Generation int32
	MemberID   string
	InstanceID *string
	Partitions []CommitPartition
}

// CommitResult is an OffsetCommit response: one error per requested partition, in order.
type CommitResult struct {
	Errors []*kerr.Error
}

// FetchTopic is one topic of an OffsetFetch.
type FetchTopic struct {
	Topic      string
	Partitions []int32
}

// FetchedOffset is one partition's committed offset (-1 when nothing is committed).
type FetchedOffset struct {
	TopicPartition
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	// Err is UNSTABLE_OFFSET_COMMIT for a partition with pending transactional offsets when
	// the fetch required stable offsets (then Offset is -1).
	Err *kerr.Error
}

// FetchResult is one group's OffsetFetch answer.
type FetchResult struct {
	Err     *kerr.Error
	Offsets []FetchedOffset
}

// MemberDescription is one member in DescribeGroups.
type MemberDescription struct {
	MemberID   string
	InstanceID *string
	ClientID   string
	ClientHost string
	Metadata   []byte // the selected protocol's metadata (Stable only)
	Assignment []byte // (Stable only)
}

// GroupDescription is one group in DescribeGroups.
type GroupDescription struct {
	Err *kerr.Error
	// NotFound is the message of Kafka's GroupIdNotFoundException when the group does not
	// exist (or is dead) or is not a classic group; "" when described. DescribeGroups v6+
	// answers GROUP_ID_NOT_FOUND with it, older versions describe the group as Dead.
	NotFound     string
	Group        string
	State        string
	ProtocolType string
	Protocol     string
	Members      []MemberDescription
}

// GroupListing is one group in ListGroups.
type GroupListing struct {
	Group        string
	ProtocolType string
	State        string
	Type         string // "classic", "consumer" (or "share")
}
