package broker

// ElectLeaders (43_elect_leaders.go) on one broker: every version's answer, Kafka's error codes,
// the null topic list, a bad election type, and ALTER on the CLUSTER.

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func electReq(v int16, typ int8, topics map[string][]int32) *kmsg.ElectLeadersRequest {
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType, req.TimeoutMillis = v, typ, 10000
	for name, ps := range topics {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = name, ps
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func electCodes(resp *kmsg.ElectLeadersResponse) map[string]int16 {
	out := map[string]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s-%d", t.Topic, p.Partition)] = p.ErrorCode
		}
	}
	return out
}

func TestElectLeadersSingleBroker(t *testing.T) {
	b := startBroker(t, nil)
	cl, adm := admClient(t, b)
	admCreateTopic(t, adm, "el", 2, nil)
	for v := int16(0); v <= 2; v++ {
		resp := admRaw[*kmsg.ElectLeadersResponse](t, cl, electReq(v, 0, map[string][]int32{"el": {0, 1, 5}, "nope": {0}}))
		got := electCodes(resp)
		want := map[string]int16{"el-0": kerr.ElectionNotNeeded.Code, "el-1": kerr.ElectionNotNeeded.Code,
			"el-5": kerr.UnknownTopicOrPartition.Code, "nope-0": kerr.UnknownTopicOrPartition.Code}
		if len(got) != len(want) || resp.ErrorCode != 0 {
			t.Fatalf("v%d: %v (top %d)", v, got, resp.ErrorCode)
		}
		for k, c := range want {
			if got[k] != c {
				t.Errorf("v%d %s: code %d, want %d", v, k, got[k], c)
			}
		}
	}
	// UNCLEAN on a led partition: not needed. A null list: nothing to do, nothing listed.
	resp := admRaw[*kmsg.ElectLeadersResponse](t, cl, electReq(2, 1, map[string][]int32{"el": {0}}))
	if c := electCodes(resp)["el-0"]; c != kerr.ElectionNotNeeded.Code {
		t.Errorf("unclean: %d", c)
	}
	all := electReq(2, 0, nil)
	resp = admRaw[*kmsg.ElectLeadersResponse](t, cl, all)
	if len(electCodes(resp)) != 0 || resp.ErrorCode != 0 {
		t.Errorf("all partitions: %+v", resp)
	}
	// An unknown election type: INVALID_REQUEST for every partition.
	resp = admRaw[*kmsg.ElectLeadersResponse](t, cl, electReq(2, 7, map[string][]int32{"el": {0}}))
	if c := electCodes(resp)["el-0"]; c != kerr.InvalidRequest.Code || resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("election type 7: %d (top %d)", c, resp.ErrorCode)
	}
	// kadm's view.
	res, err := adm.ElectLeaders(admCtx(t), kadm.ElectPreferredReplica, kadm.TopicsSet{"el": {1: {}}})
	if err != nil || res["el"][1].Err != kerr.ElectionNotNeeded {
		t.Errorf("kadm: %+v %v", res, err)
	}
}

// TestElectLeadersAuthz: without ALTER on the CLUSTER, the top level and every partition are
// CLUSTER_AUTHORIZATION_FAILED; with it, the election runs.
func TestElectLeadersAuthz(t *testing.T) {
	b := startBroker(t, map[string]string{"authorizer.class.name": testAuthorizer, "super.users": "User:admin"})
	principalsByClientID(b)
	_, adm := userClient(t, b, "admin")
	admCreateTopic(t, adm, "el", 1, nil)
	alice, aliceAdm := userClient(t, b, "alice")
	resp := admRaw[*kmsg.ElectLeadersResponse](t, alice, electReq(2, 0, map[string][]int32{"el": {0}}))
	if resp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || electCodes(resp)["el-0"] != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice without ALTER: %+v", resp)
	}
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpAlter))
	res, err := aliceAdm.ElectLeaders(admCtx(t), kadm.ElectPreferredReplica, kadm.TopicsSet{"el": {0: {}}})
	if err != nil || res["el"][0].Err != kerr.ElectionNotNeeded {
		t.Fatalf("alice with ALTER: %+v %v", res, err)
	}
}
