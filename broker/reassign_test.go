package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReassignAuthzAndErrors: on one broker with the authorizer on, AlterPartitionReassignments
// needs ALTER and ListPartitionReassignments DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED
// without); a super user gets Kafka's per-partition errors, and a single broker's partition
// reassigned onto itself completes at once (nothing listed).
func TestReassignAuthzAndErrors(t *testing.T) {
	b := startBroker(t, map[string]string{"authorizer.class.name": testAuthorizer, "super.users": "User:admin"})
	principalsByClientID(b)
	_, adm := userClient(t, b, "admin")
	admCreateTopic(t, adm, "moves", 1, nil)
	alice, _ := userClient(t, b, "alice")
	admin, _ := userClient(t, b, "admin")

	alter := func(topic string, partition int32, replicas []int32) *kmsg.AlterPartitionAssignmentsRequest {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = partition, replicas
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	resp := admRaw[*kmsg.AlterPartitionAssignmentsResponse](t, alice, alter("moves", 0, []int32{1}))
	admWantCode(t, "alice reassign", resp.ErrorCode, kerr.ClusterAuthorizationFailed)
	admWantCode(t, "alice reassign partition", resp.Topics[0].Partitions[0].ErrorCode, kerr.ClusterAuthorizationFailed)
	list := kmsg.NewPtrListPartitionReassignmentsRequest()
	admWantCode(t, "alice list", admRaw[*kmsg.ListPartitionReassignmentsResponse](t, alice, list).ErrorCode, kerr.ClusterAuthorizationFailed)

	for _, c := range []struct {
		what string
		req  *kmsg.AlterPartitionAssignmentsRequest
		want *kerr.Error
	}{
		{"cancel without a reassignment", alter("moves", 0, nil), kerr.NoReassignmentInProgress},
		{"unknown topic", alter("nope", 0, []int32{1}), kerr.UnknownTopicOrPartition},
		{"unknown partition", alter("moves", 5, []int32{1}), kerr.UnknownTopicOrPartition},
		{"empty target", alter("moves", 0, []int32{}), kerr.InvalidReplicaAssignment},
		{"broker twice", alter("moves", 0, []int32{1, 1}), kerr.InvalidReplicaAssignment},
		{"unregistered broker", alter("moves", 0, []int32{1, 9}), kerr.InvalidReplicaAssignment},
		{"onto itself", alter("moves", 0, []int32{1}), nil},
	} {
		r := admRaw[*kmsg.AlterPartitionAssignmentsResponse](t, admin, c.req)
		admWantCode(t, c.what, r.Topics[0].Partitions[0].ErrorCode, c.want)
	}
	v1 := alter("moves", 0, []int32{1, 2})
	v1.SetVersion(1)
	v1.AllowReplicationFactorChange = false
	r := admRaw[*kmsg.AlterPartitionAssignmentsResponse](t, admin, v1)
	admWantCode(t, "v1 replication factor change not allowed", r.Topics[0].Partitions[0].ErrorCode, kerr.InvalidReplicationFactor)
	lr := admRaw[*kmsg.ListPartitionReassignmentsResponse](t, admin, list)
	if lr.ErrorCode != 0 || len(lr.Topics) != 0 {
		t.Fatalf("listed %+v", lr)
	}
}
