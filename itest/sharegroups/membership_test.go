// Package sharegroups holds integration tests of KIP-932 share groups against in-process weir
// brokers driven by franz-go: membership and assignment (ShareGroupHeartbeat,
// ShareGroupDescribe), the group APIs that see share groups (ListGroups, DescribeGroups,
// DeleteGroups), group configs, and restarts.
package sharegroups

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// sgClient returns a franz-go client and an admin client of addr.
func sgClient(t *testing.T, addr string, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

func sgCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// sgHeartbeat sends one ShareGroupHeartbeat (topics nil: unchanged).
func sgHeartbeat(t *testing.T, cl *kgo.Client, group, member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
	t.Helper()
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = group, member, epoch
	if topics != nil {
		req.SubscribedTopicNames = topics
	}
	// Retry while the coordinator loads or moves (a new __consumer_offsets).
	for range 100 {
		resp, err := req.RequestWith(sgCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if e := kerr.ErrorForCode(resp.ErrorCode); e == kerr.CoordinatorLoadInProgress || e == kerr.NotCoordinator || e == kerr.CoordinatorNotAvailable {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		return resp
	}
	t.Fatal("coordinator not ready")
	return nil
}

func sgCreateTopic(t *testing.T, adm *kadm.Client, name string, parts int32) [16]byte {
	t.Helper()
	resp, err := adm.CreateTopic(sgCtx(t), parts, 1, nil, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", name, err, resp.Err)
	}
	return [16]byte(resp.ID)
}

func sgCount(a *kmsg.ShareGroupHeartbeatResponseAssignment) map[[16]byte]int {
	out := map[[16]byte]int{}
	if a == nil {
		return out
	}
	for _, tp := range a.TopicPartitions {
		out[tp.TopicID] += len(tp.Partitions)
	}
	return out
}

// TestShareGroupMembership: two members join a share group, split the partitions, are
// described, one leaves and the other takes every partition; the group is listed with its type,
// DescribeGroups sees it as no classic group, DeleteGroups refuses it while it has members and
// removes it once empty.
func TestShareGroupMembership(t *testing.T) {
	b := inproc.Start(t, map[string]string{"num.partitions": "1"})
	cl, adm := sgClient(t, b.Addr())
	idA := sgCreateTopic(t, adm, "sg-a", 4)
	idB := sgCreateTopic(t, adm, "sg-b", 2)

	r1 := sgHeartbeat(t, cl, "sg", "member-1", 0, "sg-a")
	if r1.ErrorCode != 0 || r1.MemberEpoch != 1 || r1.HeartbeatIntervalMillis != 5000 || sgCount(r1.Assignment)[idA] != 4 {
		t.Fatalf("member-1 join: %+v", r1)
	}
	r2 := sgHeartbeat(t, cl, "sg", "member-2", 0, "sg-a", "sg-b")
	if r2.ErrorCode != 0 || r2.MemberEpoch != 2 || r2.Assignment == nil {
		t.Fatalf("member-2 join: %+v", r2)
	}
	r1 = sgHeartbeat(t, cl, "sg", "member-1", 1)
	if r1.ErrorCode != 0 || r1.MemberEpoch != 2 || r1.Assignment == nil {
		t.Fatalf("member-1 catching up: %+v", r1)
	}
	c1, c2 := sgCount(r1.Assignment), sgCount(r2.Assignment)
	if c1[idA]+c2[idA] != 4 || c2[idB] != 2 || c1[idB] != 0 {
		t.Fatalf("assignments %v %v", c1, c2)
	}

	described, err := adm.DescribeShareGroups(sgCtx(t), "sg")
	if err != nil {
		t.Fatal(err)
	}
	d := described["sg"]
	if d.Err != nil || d.GroupState != "Stable" || d.GroupEpoch != 2 || d.AssignmentEpoch != 2 || len(d.Members) != 2 || d.Assignor != "simple" {
		t.Fatalf("describe: %+v", d)
	}
	listed, err := adm.ListGroups(sgCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := listed["sg"]; !ok || l.ProtocolType != "share" || l.State != "Stable" || l.GroupType != "share" {
		t.Fatalf("list: %+v", listed)
	}
	dg, err := adm.DescribeGroups(sgCtx(t), "sg")
	if err != nil {
		t.Fatal(err)
	}
	if g := dg["sg"]; g.State != "Dead" || g.Err != kerr.GroupIDNotFound || g.ErrMessage != "Group sg is not a classic group." {
		t.Fatalf("DescribeGroups of a share group: %+v", g)
	}
	// A classic join of the share group's id is refused.
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Group, jreq.ProtocolType, jreq.SessionTimeoutMillis, jreq.RebalanceTimeoutMillis = "sg", "consumer", 10000, 10000
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name, jp.Metadata = "range", []byte{0}
	jreq.Protocols = append(jreq.Protocols, jp)
	jresp, err := jreq.RequestWith(sgCtx(t), cl)
	if err != nil || jresp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join of a share group: %v %+v", err, jresp)
	}

	del, _ := adm.DeleteGroup(sgCtx(t), "sg")
	if !errors.Is(del.Err, kerr.NonEmptyGroup) {
		t.Fatalf("delete of a non-empty share group: %v %v", err, del.Err)
	}
	if r := sgHeartbeat(t, cl, "sg", "member-1", -1); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	r2 = sgHeartbeat(t, cl, "sg", "member-2", 2)
	if r2.ErrorCode != 0 || sgCount(r2.Assignment)[idA] != 4 {
		t.Fatalf("member-2 after member-1 left: %+v", r2)
	}
	if r := sgHeartbeat(t, cl, "sg", "member-1", 2); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat of a member that left: %+v", r)
	}
	sgHeartbeat(t, cl, "sg", "member-2", -1)
	del, err = adm.DeleteGroup(sgCtx(t), "sg")
	if err != nil || del.Err != nil {
		t.Fatalf("delete of the empty share group: %v %v", err, del.Err)
	}
	described, err = adm.DescribeShareGroups(sgCtx(t), "sg")
	if err == nil && described["sg"].Err == nil {
		t.Fatalf("describe after delete: %+v", described["sg"])
	}
}

// TestShareGroupErrors: Kafka's answers to bad or misplaced heartbeats.
func TestShareGroupErrors(t *testing.T) {
	b := inproc.Start(t, nil)
	cl, adm := sgClient(t, b.Addr())
	sgCreateTopic(t, adm, "sg-e", 1)
	for _, c := range []struct {
		name   string
		member string
		epoch  int32
		topics []string
		want   *kerr.Error
	}{
		{"no member id", "", 0, []string{"sg-e"}, kerr.InvalidRequest},
		{"member id over 36 characters", "0123456789012345678901234567890123456", 0, []string{"sg-e"}, kerr.InvalidRequest},
		{"join without topics", "m", 0, nil, kerr.InvalidRequest},
		{"unknown group", "m", 5, nil, kerr.GroupIDNotFound},
		{"bad epoch", "m", -7, nil, kerr.InvalidRequest},
	} {
		if r := sgHeartbeat(t, cl, "sg-errors", c.member, c.epoch, c.topics...); r.ErrorCode != c.want.Code {
			t.Errorf("%s: %v, want %v", c.name, kerr.ErrorForCode(r.ErrorCode), c.want)
		}
	}
	// A classic group's id is no share group's.
	if _, err := adm.CommitOffsets(sgCtx(t), "classic-g", kadm.OffsetsFromRecords(kgo.Record{Topic: "sg-e", Partition: 0, Offset: 1})); err != nil {
		t.Fatal(err)
	}
	if r := sgHeartbeat(t, cl, "classic-g", "m", 0, "sg-e"); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("share join of a classic group: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	// A member ahead of its epoch is fenced; it rejoins with epoch 0.
	r := sgHeartbeat(t, cl, "sg-f", "m", 0, "sg-e")
	if r.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(r.ErrorCode))
	}
	if r := sgHeartbeat(t, cl, "sg-f", "m", r.MemberEpoch+3); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("epoch ahead: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := sgHeartbeat(t, cl, "sg-f", "m", 0, "sg-e"); r.ErrorCode != 0 || r.Assignment == nil {
		t.Fatalf("rejoin: %+v", r)
	}
}

// TestShareGroupSurvivesRestart: a share group's members, epochs and assignments are loaded
// back from __consumer_offsets after a restart, and its members keep heartbeating at their
// epochs.
func TestShareGroupSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b, stop := inproc.StartStoppable(t, map[string]string{"log.dirs": dir})
	cl, adm := sgClient(t, b.Addr())
	idR := sgCreateTopic(t, adm, "sg-r", 3)
	r := sgHeartbeat(t, cl, "sg-restart", "m1", 0, "sg-r")
	if r.ErrorCode != 0 || sgCount(r.Assignment)[idR] != 3 {
		t.Fatalf("join: %+v", r)
	}
	epoch := r.MemberEpoch
	cl.Close()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b2, _ := inproc.StartStoppable(t, map[string]string{"log.dirs": dir})
	cl2, adm2 := sgClient(t, b2.Addr())
	r = sgHeartbeat(t, cl2, "sg-restart", "m1", epoch)
	if r.ErrorCode != 0 || r.MemberEpoch != epoch {
		t.Fatalf("heartbeat after restart: %+v", r)
	}
	d, err := adm2.DescribeShareGroups(sgCtx(t), "sg-restart")
	if err != nil {
		t.Fatal(err)
	}
	g := d["sg-restart"]
	if g.Err != nil || g.GroupState != "Stable" || len(g.Members) != 1 || g.Members[0].MemberID != "m1" {
		t.Fatalf("describe after restart: %+v", g)
	}
}

// TestShareGroupConsumerJoins: franz-go's share consumer joins a share group through
// ShareGroupHeartbeat and is described with its subscription and assignment; closing it leaves.
func TestShareGroupConsumerJoins(t *testing.T) {
	b := inproc.Start(t, nil)
	_, adm := sgClient(t, b.Addr())
	sgCreateTopic(t, adm, "sg-c", 2)
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ShareGroup("sg-consumer"), kgo.ConsumeTopics("sg-c"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := sgCtx(t)
	go func() {
		for ctx.Err() == nil {
			cons.PollFetches(ctx)
		}
	}()
	var g kadm.DescribedShareGroup
	for ctx.Err() == nil {
		d, err := adm.DescribeShareGroups(ctx, "sg-consumer")
		if err == nil {
			g = d["sg-consumer"]
			if g.Err == nil && len(g.Members) == 1 && len(g.Members[0].Assignment) > 0 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(g.Members) != 1 || !slices.Contains(g.Members[0].SubscribedTopicNames, "sg-c") {
		t.Fatalf("describe: %+v", g)
	}
	cons.Close()
	d, err := adm.DescribeShareGroups(sgCtx(t), "sg-consumer")
	if err != nil || d["sg-consumer"].GroupState != "Empty" {
		t.Fatalf("after close: %v %+v", err, d["sg-consumer"])
	}
}
