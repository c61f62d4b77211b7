package broker

// DescribeQuorum (key 55), v0-v2 (v1 adds the last fetch and caught-up timestamps, v2 the
// replicas' directory ids, error messages and the voters' endpoints). The metadata log is
// partition 0 of Kafka's __cluster_metadata; any other partition asked for is
// UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers. The quorum is weir's hashicorp/raft group as
// the raft leader describes it (controller/quorum.go): leader id, leader epoch = raft term,
// high watermark = raft commit index, voters and observers (brokers that are not voters) with
// their log end (last raft index, reported with each broker heartbeat, so up to
// broker.heartbeat.interval.ms old) and the times of their last report and last caught-up
// report. Directory ids are zero (weir has no KIP-853 directory ids). A voter's endpoint is its
// raft address under the name in controller.listener.names (CONTROLLER when unset). Authorization: DESCRIBE on CLUSTER, else
// CLUSTER_AUTHORIZATION_FAILED (top level). A quorum without a leader answers
// the error the controller gives (NOT_CONTROLLER, REQUEST_TIMED_OUT) at the top level.

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 55, min: 0, max: 2, handle: handleDescribeQuorum})
}

const (
	clusterMetadataTopic = "__cluster_metadata"
	// defaultControllerListener names the voters' endpoint when controller.listener.names is
	// unset.
	defaultControllerListener = "CONTROLLER"
)

func handleDescribeQuorum(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	resp.SetVersion(r.Version)
	if e := b.authorizeCluster(r, acl.OpDescribe); e != nil { // ACL: DESCRIBE on CLUSTER
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	ctx, cancel := b.requestCtx()
	defer cancel()
	q, err := b.ctl.DescribeQuorum(ctx)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		msg := err.Error()
		resp.ErrorMessage = &msg
		return netio.Reply{Response: resp}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeQuorumResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDescribeQuorumResponseTopicPartition()
			sp.Partition = rp.Partition
			if rt.Topic != clusterMetadataTopic || rp.Partition != 0 {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				sp.LeaderID, sp.LeaderEpoch, sp.HighWatermark = -1, -1, -1
			} else {
				fillQuorumPartition(&sp, q)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if r.Version >= 2 {
		lname := defaultControllerListener
		if name, _, err := controllerListener(b.cfg); err == nil && name != "" {
			lname = name
		}
		for _, v := range q.Voters {
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = v.ID
			if host, port, err := net.SplitHostPort(v.Addr); err == nil {
				if p, err := strconv.ParseUint(port, 10, 16); err == nil {
					l := kmsg.NewDescribeQuorumResponseNodeListener()
					l.Name, l.Host, l.Port = lname, host, uint16(p)
					n.Listeners = append(n.Listeners, l)
				}
			}
			resp.Nodes = append(resp.Nodes, n)
		}
	}
	return netio.Reply{Response: resp}
}

func fillQuorumPartition(sp *kmsg.DescribeQuorumResponseTopicPartition, q *controller.QuorumInfo) {
	sp.LeaderID = q.LeaderID
	sp.LeaderEpoch = int32(min(q.LeaderEpoch, 1<<31-1))
	sp.HighWatermark = q.HighWatermark
	conv := func(in []controller.ReplicaState) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		out := make([]kmsg.DescribeQuorumResponseTopicPartitionReplicaState, 0, len(in))
		for _, s := range in {
			rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
			rs.ReplicaID, rs.LogEndOffset = s.ID, s.LogEndOffset
			rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = s.LastFetchMs, s.LastCaughtUpMs
			out = append(out, rs)
		}
		return out
	}
	sp.CurrentVoters = conv(q.Voters)
	sp.Observers = conv(q.Observers)
}
