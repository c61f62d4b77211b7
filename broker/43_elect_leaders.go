package broker

// ElectLeaders (key 43), v0-v2 (v0 elects preferred leaders only; v1 adds election_type and
// the top-level error code; v2 is flexible), as a Kafka 4.4 broker serves it by forwarding to
// its controller: the election runs on the active controller (controller.ElectLeaders, which
// routes to it) and each partition gets Kafka's result:
//   - PREFERRED (0): the preferred replica (the first of the replica list) becomes leader if it
//     is alive and in the ISR; ELECTION_NOT_NEEDED when it already leads,
//     PREFERRED_LEADER_NOT_AVAILABLE when it is not alive or not in the ISR.
//   - UNCLEAN (1): a leaderless partition gets a leader from its ISR, or else any live replica
//     (whatever unclean.leader.election.enable says: the operator asked); ELECTION_NOT_NEEDED
//     when it has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is alive.
//   - An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; another election type
//     INVALID_REQUEST for every partition.
//
// A null topic list elects every partition of every topic and leaves the partitions whose
// election was not needed out of the answer, as Kafka does. The answer comes once the new
// leaders are committed to the metadata log and applied on this broker. Authorization: ALTER on
// the CLUSTER; without it the top-level error and every partition's is
// CLUSTER_AUTHORIZATION_FAILED, as Kafka answers. At most maxElectPartitions partitions per
// request (more: POLICY_VIOLATION at the top level).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 43, min: 0, max: 2, handle: handleElectLeaders})
}

// maxElectPartitions bounds the partitions one ElectLeaders request may name.
const maxElectPartitions = 100000

func handleElectLeaders(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	resp.SetVersion(r.Version)
	typ := controller.ElectPreferred
	if r.Version >= 1 {
		typ = controller.ElectionType(req.ElectionType)
	}
	// failAll answers every named partition (and, from v1, the top level) with e.
	failAll := func(e *kerr.Error, msg string) netio.Reply {
		resp.ErrorCode = e.Code
		for _, rt := range req.Topics {
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewElectLeadersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, e.Code
				m := msg
				sp.ErrorMessage = &m
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return netio.Reply{Response: resp}
	}
	if e := b.authorizeCluster(r, acl.OpAlter); e != nil { // ACL: ALTER on the CLUSTER
		return failAll(e, "cluster authorization failed")
	}
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	if n > maxElectPartitions {
		resp.ErrorCode = kerr.PolicyViolation.Code
		return netio.Reply{Response: resp}
	}
	if typ != controller.ElectPreferred && typ != controller.ElectUnclean {
		return failAll(kerr.InvalidRequest, fmt.Sprintf("unknown election type %d", req.ElectionType))
	}
	er := controller.ElectLeadersRequest{Type: typ, All: req.Topics == nil}
	if !er.All {
		er.Partitions = make([]controller.TopicPartition, 0, n)
		for _, rt := range req.Topics {
			for _, p := range rt.Partitions {
				er.Partitions = append(er.Partitions, controller.TopicPartition{Topic: rt.Topic, Partition: p})
			}
		}
	}
	timeout := keyRequestTimeout.Get(b.cfg)
	if t := time.Duration(req.TimeoutMillis) * time.Millisecond; t > 0 && t < timeout {
		timeout = t
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	results, err := b.ctl.ElectLeaders(ctx, er)
	if err != nil {
		var ke *kerr.Error
		if !errors.As(err, &ke) {
			ke = kerr.UnknownServerError
		}
		return failAll(ke, err.Error())
	}
	byTopic := map[string]int{}
	for _, res := range results {
		i, ok := byTopic[res.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[res.Topic] = i
			st := kmsg.NewElectLeadersResponseTopic()
			st.Topic = res.Topic
			resp.Topics = append(resp.Topics, st)
		}
		sp := kmsg.NewElectLeadersResponseTopicPartition()
		sp.Partition, sp.ErrorCode = res.Partition, res.Code
		if res.Code != 0 && res.Msg != "" {
			m := res.Msg
			sp.ErrorMessage = &m
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
	}
	return netio.Reply{Response: resp}
}
