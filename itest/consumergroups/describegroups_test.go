package consumergroups

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/weir-mq/weir/internal/testcluster/inproc"
)

// clientAt is a client whose requests of key go no higher than version max.
func clientAt(t *testing.T, addr string, key, max int16) *kgo.Client {
	t.Helper()
	v := kversion.Stable()
	v.SetMaxKeyVersion(key, max)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(v))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func describeGroupsAt(t *testing.T, addr string, version int16, groups ...string) map[string]kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	cl := clientAt(t, addr, 15, version)
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups, req.IncludeAuthorizedOperations = groups, true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version != version {
		t.Fatalf("DescribeGroups answered at v%d, want v%d", resp.Version, version)
	}
	out := map[string]kmsg.DescribeGroupsResponseGroup{}
	for _, g := range resp.Groups {
		out[g.Group] = g
	}
	return out
}

func listGroupsTyped(t *testing.T, cl *kgo.Client, types ...string) map[string]kmsg.ListGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrListGroupsRequest()
	req.TypesFilter = types
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("ListGroups: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	out := map[string]kmsg.ListGroupsResponseGroup{}
	for _, g := range resp.Groups {
		out[g.Group] = g
	}
	return out
}

func deleteGroupsV3(t *testing.T, cl *kgo.Client, groups ...string) map[string]kmsg.DeleteGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = groups
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version != 3 {
		t.Fatalf("DeleteGroups answered at v%d, want v3", resp.Version)
	}
	out := map[string]kmsg.DeleteGroupsResponseGroup{}
	for _, g := range resp.Groups {
		if g.ErrorMessage != nil {
			t.Errorf("DeleteGroups %s: error message %q, Kafka sends none", g.Group, *g.ErrorMessage)
		}
		out[g.Group] = g
	}
	return out
}

func code(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

// TestGroupAPIsAcrossTypes: DescribeGroups, ListGroups and DeleteGroups on a classic, a KIP-848
// consumer and a share group and on a missing one, as Kafka 4.4 answers them. DescribeGroups
// v6 (KIP-1043) answers GROUP_ID_NOT_FOUND with Kafka's message for a missing group and for a
// group of another type (no authorized operations then); v5 describes them as Dead without
// error. ListGroups v5 filters by type, case-insensitively. DeleteGroups v3 refuses groups with
// members (NON_EMPTY_GROUP) and missing ones (GROUP_ID_NOT_FOUND) with no error message.
func TestGroupAPIsAcrossTypes(t *testing.T) {
	b := inproc.Start(t, props(nil))
	addr := b.Addr()
	createTopic(t, addr, "gt", 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A classic group holding only offsets, a consumer group with one member, a share group
	// with one member.
	if _, err := adm.CommitOffsets(ctx, "classic-g", kadm.OffsetsFromRecords(kgo.Record{Topic: "gt", Partition: 0, Offset: 1})); err != nil {
		t.Fatal(err)
	}
	own := &ownership{}
	got := &consumed{seen: map[string]bool{}}
	m := startMember(t, addr, "consumer-g", "gt", "m1", own, got)
	waitUntil(t, 10*time.Second, "the consumer group to be stable", func() bool {
		d := describe(t, addr, "consumer-g")
		return d.ErrorCode == 0 && d.State == "Stable" && len(d.Members) == 1
	})
	shb := func(epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatResponse {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = "share-g", "share-member-000000000", epoch, topics
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := shb(0, "gt"); r.ErrorCode != 0 {
		t.Fatalf("share join: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	all := []string{"classic-g", "consumer-g", "share-g", "missing-g"}
	v6 := describeGroupsAt(t, addr, 6, all...)
	if g := v6["classic-g"]; g.ErrorCode != 0 || g.State != "Empty" || g.ErrorMessage != nil || g.AuthorizedOperations == math.MinInt32 {
		t.Errorf("v6 classic-g: %+v", g)
	}
	for name, msg := range map[string]string{
		"consumer-g": "Group consumer-g is not a classic group.",
		"share-g":    "Group share-g is not a classic group.",
		"missing-g":  "Group missing-g not found.",
	} {
		g := v6[name]
		if g.ErrorCode != kerr.GroupIDNotFound.Code || g.ErrorMessage == nil || *g.ErrorMessage != msg || g.State != "Dead" ||
			g.AuthorizedOperations != math.MinInt32 || len(g.Members) != 0 {
			t.Errorf("v6 %s: %+v, want GROUP_ID_NOT_FOUND %q", name, g, msg)
		}
	}
	v5 := describeGroupsAt(t, addr, 5, all...)
	for _, name := range all[1:] {
		if g := v5[name]; g.ErrorCode != 0 || g.State != "Dead" || g.ProtocolType != "" || len(g.Members) != 0 {
			t.Errorf("v5 %s: %+v, want Dead without error", name, g)
		}
	}

	// ListGroups by type.
	for _, c := range []struct {
		filter []string
		want   []string
	}{
		{nil, []string{"classic-g", "consumer-g", "share-g"}},
		{[]string{"classic"}, []string{"classic-g"}},
		{[]string{"Consumer"}, []string{"consumer-g"}},
		{[]string{"SHARE", "classic"}, []string{"classic-g", "share-g"}},
		{[]string{"streams"}, nil},
	} {
		l := listGroupsTyped(t, cl, c.filter...)
		var names []string
		for n := range l {
			names = append(names, n)
		}
		slices.Sort(names)
		if !slices.Equal(names, c.want) {
			t.Errorf("ListGroups types %v: %v, want %v", c.filter, names, c.want)
		}
	}
	l := listGroupsTyped(t, cl)
	for name, want := range map[string][3]string{
		"classic-g":  {"classic", "", "Empty"},
		"consumer-g": {"consumer", "consumer", "Stable"},
		"share-g":    {"share", "share", "Stable"},
	} {
		if g := l[name]; g.GroupType != want[0] || g.ProtocolType != want[1] || g.GroupState != want[2] {
			t.Errorf("ListGroups %s: type %q protocol %q state %q, want %v", name, g.GroupType, g.ProtocolType, g.GroupState, want)
		}
	}

	// DeleteGroups v3.
	d := deleteGroupsV3(t, cl, all...)
	for name, want := range map[string]*kerr.Error{
		"classic-g": nil, "consumer-g": kerr.NonEmptyGroup, "share-g": kerr.NonEmptyGroup, "missing-g": kerr.GroupIDNotFound,
	} {
		if d[name].ErrorCode != code(want) {
			t.Errorf("DeleteGroups %s: %v, want %v", name, kerr.ErrorForCode(d[name].ErrorCode), want)
		}
	}
	m.stop()
	if r := shb(-1); r.ErrorCode != 0 {
		t.Fatalf("share leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	d = deleteGroupsV3(t, cl, "consumer-g", "share-g", "classic-g")
	for name, want := range map[string]*kerr.Error{"consumer-g": nil, "share-g": nil, "classic-g": kerr.GroupIDNotFound} {
		if d[name].ErrorCode != code(want) {
			t.Errorf("DeleteGroups of the emptied %s: %v, want %v", name, kerr.ErrorForCode(d[name].ErrorCode), want)
		}
	}
	if l := listGroupsTyped(t, cl); len(l) != 0 {
		t.Errorf("groups left after deletion: %v", l)
	}
	v6 = describeGroupsAt(t, addr, 6, "consumer-g")
	if g := v6["consumer-g"]; g.ErrorCode != kerr.GroupIDNotFound.Code || g.ErrorMessage == nil || *g.ErrorMessage != "Group consumer-g not found." {
		t.Errorf("v6 of the deleted consumer-g: %+v", g)
	}
}
