package sharegroups

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// TestShareGroupOffsetsAdmin: AlterShareGroupOffsets creates an empty group's share-partition
// state, DescribeShareGroupOffsets reads it (named partitions and every partition), a group with
// members refuses both changes, DeleteShareGroupOffsets removes it.
func TestShareGroupOffsetsAdmin(t *testing.T) {
	b := inproc.Start(t, nil)
	cl, adm := sgClient(t, b.Addr())
	idO := sgCreateTopic(t, adm, "sg-off", 2)

	alter := func(group string, offset int64) *kmsg.AlterShareGroupOffsetsResponse {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		rt.Topic = "sg-off"
		for p := int32(0); p < 2; p++ {
			rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
			rp.Partition, rp.StartOffset = p, offset+int64(p)
			rt.Partitions = append(rt.Partitions, rp)
		}
		nt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
		nt.Topic = "no-such-topic"
		np := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
		nt.Partitions = append(nt.Partitions, np)
		req.Topics = append(req.Topics, rt, nt)
		resp, err := req.RequestWith(sgCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	describe := func(group string, all bool) *kmsg.DescribeShareGroupOffsetsResponseGroup {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = group
		if !all {
			rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
			rt.Topic, rt.Partitions = "sg-off", []int32{0, 1}
			rg.Topics = append(rg.Topics, rt)
		}
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(sgCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return &resp.Groups[0]
	}
	starts := func(g *kmsg.DescribeShareGroupOffsetsResponseGroup) map[int32]int64 {
		out := map[int32]int64{}
		for _, rt := range g.Topics {
			if rt.Topic != "sg-off" || rt.TopicID != idO {
				t.Fatalf("topic %+v", rt)
			}
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Fatalf("partition error %v", kerr.ErrorForCode(rp.ErrorCode))
				}
				out[rp.Partition] = rp.StartOffset
			}
		}
		return out
	}

	if g := describe("sg-admin", true); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe of a group that does not exist: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	resp := alter("sg-admin", 8)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("alter: %+v", resp)
	}
	for _, all := range []bool{false, true} {
		if got := starts(describe("sg-admin", all)); got[0] != 8 || got[1] != 9 {
			t.Fatalf("describe (all %v): %v", all, got)
		}
	}
	// With a member, the group refuses changes.
	if r := sgHeartbeat(t, cl, "sg-admin", "m", 0, "sg-off"); r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	if resp := alter("sg-admin", 3); resp.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("alter of a non-empty group: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	del := func() *kmsg.DeleteShareGroupOffsetsResponse {
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = "sg-admin"
		rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
		rt.Topic = "sg-off"
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(sgCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := del(); resp.ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete of a non-empty group: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	sgHeartbeat(t, cl, "sg-admin", "m", -1)
	if resp := del(); resp.ErrorCode != 0 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %+v", resp)
	}
	if got := starts(describe("sg-admin", false)); got[0] != -1 || got[1] != -1 {
		t.Fatalf("after delete: %v", got)
	}
	if g := describe("sg-admin", true); len(g.Topics) != 0 {
		t.Fatalf("every partition after delete: %+v", g.Topics)
	}
}
