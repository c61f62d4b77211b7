package broker

// Racks (issue 14): this broker's broker.rack as Metadata and DescribeCluster report it, and
// fetching from the closest replica (KIP-392).
//
// With replica.selector.class = org.apache.kafka.common.replica.RackAwareReplicaSelector, a
// leader answering a consumer's Fetch (v11+, whose rack_id is client.rack) picks the replica the
// consumer should read from, as Kafka's ReplicaManager.findPreferredReadReplica with that
// selector: the candidates are the leader and the followers of the partition's ISR (as the image
// has it) whose end (their last fetch offset) is at or past the fetch offset, on an unfenced
// broker with an address; of those in the client's rack, the leader if it is one of them, else the
// most caught-up follower (the largest end; the lower id on a tie). A follower so chosen is
// answered as preferred_read_replica with no records, the leader's high watermark, last stable
// and log start offsets, and no error, at once (no long poll). Without a client rack, with no
// candidate in it, or with the leader in it, the leader reads as usual.
//
// A follower serves consumers' Fetch v11+ (Kafka's fetchOnlyFromLeader false once a client
// sends its metadata): the leader epoch check is against the epoch this broker knows, the
// records up to the high watermark it learnt from its leader's fetch responses (between it and
// the log end: empty; past the log end or before the log start: OFFSET_OUT_OF_RANGE, on which
// clients drop the preferred replica and go back to the leader). A consumer below v11, or a
// broker that holds no replica, answers NOT_LEADER_OR_FOLLOWER. ListOffsets stays on the leader.
// Fetch sessions work the same on a follower; a session partition answered with a preferred
// read replica is always included in an incremental response.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/controller"
)

// rackAwareSelectorClass is the replica.selector.class value that turns KIP-392 on.
const rackAwareSelectorClass = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// rackPtr is a rack as Metadata and DescribeCluster carry it: null when the broker has none.
func rackPtr(rack string) *string {
	if rack == "" {
		return nil
	}
	return &rack
}

// fetchClientRack is the consumer's rack when this fetch may be sent to a preferred read
// replica (a consumer's Fetch v11+ with a rack, the rack-aware selector on), else "".
func (b *Broker) fetchClientRack(version int16, req *kmsg.FetchRequest, replica bool) string {
	if replica || version < 11 || req.Rack == "" {
		return ""
	}
	if keyReplicaSelectorClass.Get(b.cfg) != rackAwareSelectorClass {
		return ""
	}
	return req.Rack
}

// checkRead validates a consumer's read of this replica for the request's current leader epoch:
// as its leader, or, with followerOK (Fetch v11+), as a follower. leading reports which.
func (r *replica) checkRead(currentEpoch int32, followerOK bool) (leading bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leading || !followerOK {
		return r.leading, r.checkLeaderLocked(currentEpoch)
	}
	switch {
	case currentEpoch < 0:
	case currentEpoch < r.epoch:
		return false, fmt.Errorf("leader epoch %d is older than %d: %w", currentEpoch, r.epoch, kerr.FencedLeaderEpoch)
	case currentEpoch > r.epoch:
		return false, fmt.Errorf("leader epoch %d is newer than %d: %w", currentEpoch, r.epoch, kerr.UnknownLeaderEpoch)
	}
	return false, nil
}

// preferredReadReplica returns the follower a consumer in clientRack should read this partition
// from at fetchOffset, or -1 to read from this broker (not the leader of a replicated partition,
// the leader itself in the client's rack, or no follower there that qualifies). selfRack is this
// broker's rack, listener the one the request came in on. No allocation.
func (r *replica) preferredReadReplica(img *controller.Image, selfRack, clientRack string, fetchOffset int64, listener string) int32 {
	if selfRack == clientRack {
		return -1
	}
	b := r.rm.b
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leading || r.state == nil {
		return -1
	}
	best, bestEnd := int32(-1), int64(-1)
	for _, id := range r.info.ISR {
		if id == b.nodeID {
			continue
		}
		bi, ok := img.Brokers[id]
		if !ok || bi.Fenced || bi.Rack != clientRack {
			continue
		}
		end, ok := r.state.FollowerEnd(id)
		if !ok || end < fetchOffset {
			continue
		}
		if _, ok := b.brokerAddr(img, id, listener); !ok {
			continue
		}
		if end > bestEnd || end == bestEnd && id < best {
			best, bestEnd = id, end
		}
	}
	return best
}
