package broker

// The group coordinator's APIs on the wire, version by version, and its answers to bad input:
// unknown members, stale generations, fenced static members, bad session timeouts, inconsistent
// protocols, huge metadata, a 1 MB group id, thousands of joins from one connection.

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/engine"
)

func TestGroupApiVersions(t *testing.T) {
	b := startGroupBroker(t, nil)
	w := dialWire(t, b.Addr())
	resp := wireRoundTrip[*kmsg.ApiVersionsResponse](w, kmsg.NewPtrApiVersionsRequest(), 3)
	want := map[int16][2]int16{8: {2, 9}, 9: {1, 9}, 10: {0, 6}, 11: {0, 9}, 12: {0, 4}, 13: {0, 5}, 14: {0, 5},
		15: {0, 6}, 16: {0, 5}, 42: {0, 3}, 47: {0, 0},
		68: {0, 1}, 69: {0, 1}, 76: {1, 1}, 77: {0, 1}, 78: {1, 2}, 79: {1, 2}, 90: {0, 1}, 91: {0, 0}, 92: {0, 0}}
	for _, k := range resp.ApiKeys {
		if v, ok := want[k.ApiKey]; ok {
			if k.MinVersion != v[0] || k.MaxVersion != v[1] {
				t.Errorf("%s: %d-%d, want %d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, v[0], v[1])
			}
			delete(want, k.ApiKey)
		}
	}
	for k := range want {
		t.Errorf("%s not advertised", kmsg.NameForKey(k))
	}
}

// wireJoin builds a JoinGroup with one protocol.
func wireJoin(group, member string, instance *string, protocolType, protocol string, meta []byte) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Group, r.MemberID, r.InstanceID, r.ProtocolType = group, member, instance, protocolType
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 6000, 5000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = protocol, meta
	r.Protocols = append(r.Protocols, p)
	return r
}

func wantCode(t testing.TB, what string, got int16, want *kerr.Error) {
	t.Helper()
	var wc int16
	if want != nil {
		wc = want.Code
	}
	if got != wc {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// joinAlone joins group as its only member at version v (handling MEMBER_ID_REQUIRED) and syncs
// an assignment; it returns the member id and generation.
func joinAlone(t testing.TB, w *wireConn, group string, v int16, instance *string) (string, int32) {
	t.Helper()
	jr := wireRoundTrip[*kmsg.JoinGroupResponse](w, wireJoin(group, "", instance, "consumer", "range", []byte("sub")), v)
	if jr.ErrorCode == kerr.MemberIDRequired.Code {
		if v < 4 || instance != nil {
			t.Fatalf("MEMBER_ID_REQUIRED at v%d (static %v)", v, instance != nil)
		}
		jr = wireRoundTrip[*kmsg.JoinGroupResponse](w, wireJoin(group, jr.MemberID, nil, "consumer", "range", []byte("sub")), v)
	}
	wantCode(t, "join", jr.ErrorCode, nil)
	if jr.LeaderID != jr.MemberID || len(jr.Members) != 1 || !bytes.Equal(jr.Members[0].ProtocolMetadata, []byte("sub")) {
		t.Fatalf("lone member join: leader %q member %q members %+v", jr.LeaderID, jr.MemberID, jr.Members)
	}
	sr := kmsg.NewPtrSyncGroupRequest()
	sr.Group, sr.Generation, sr.MemberID, sr.InstanceID = group, jr.Generation, jr.MemberID, instance
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = jr.MemberID, []byte("all")
	sr.GroupAssignment = append(sr.GroupAssignment, a)
	sv := min(v, 5)
	sresp := wireRoundTrip[*kmsg.SyncGroupResponse](w, sr, sv)
	wantCode(t, "sync", sresp.ErrorCode, nil)
	if string(sresp.MemberAssignment) != "all" {
		t.Fatalf("assignment %q", sresp.MemberAssignment)
	}
	return jr.MemberID, jr.Generation
}

// TestGroupProtocolVersions runs two members through join, sync, heartbeat, commit, fetch and
// leave at each JoinGroup version: the leader alone gets the member list, the follower's sync
// waits for the leader's, an empty assignment comes back zero-length.
func TestGroupProtocolVersions(t *testing.T) {
	b := startGroupBroker(t, nil)
	addr := b.Addr()
	createTopic(t, addr, "proto", 2, nil)
	for _, v := range []int16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9} {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			group := fmt.Sprintf("proto-v%d", v)
			wa, wb := dialWire(t, addr), dialWire(t, addr)
			hv, lv, sv := min(v, 4), min(v, 5), min(v, 5)
			a, gen := joinAlone(t, wa, group, v, nil)

			// b joins: its JoinGroup parks until a rejoins.
			bj := wireJoin(group, "", nil, "consumer", "range", []byte("sub-b"))
			if v >= 4 {
				first := wireRoundTrip[*kmsg.JoinGroupResponse](wb, bj, v)
				wantCode(t, "new member join", first.ErrorCode, kerr.MemberIDRequired)
				bj = wireJoin(group, first.MemberID, nil, "consumer", "range", []byte("sub-b"))
			}
			corr := wb.send(bj, v)
			jb := kmsg.NewPtrJoinGroupResponse()
			jb.SetVersion(v)
			hb := kmsg.NewPtrHeartbeatRequest()
			hb.Group, hb.Generation, hb.MemberID = group, gen, a
			deadline := time.Now().Add(10 * time.Second)
			for {
				hr := wireRoundTrip[*kmsg.HeartbeatResponse](wa, hb, hv)
				if hr.ErrorCode == kerr.RebalanceInProgress.Code {
					break
				}
				wantCode(t, "heartbeat before rebalance", hr.ErrorCode, nil)
				if time.Now().After(deadline) {
					t.Fatal("no rebalance")
				}
				time.Sleep(20 * time.Millisecond)
			}
			ja := wireRoundTrip[*kmsg.JoinGroupResponse](wa, wireJoin(group, a, nil, "consumer", "range", []byte("sub")), v)
			wantCode(t, "leader rejoin", ja.ErrorCode, nil)
			wb.recv(corr, jb)
			wantCode(t, "follower join", jb.ErrorCode, nil)
			if ja.LeaderID != a || len(ja.Members) != 2 || len(jb.Members) != 0 || jb.LeaderID != a || ja.Generation != gen+1 || jb.Generation != ja.Generation {
				t.Fatalf("join results: leader %+v follower %+v", ja, jb)
			}
			if ja.Protocol == nil || *ja.Protocol != "range" || (v >= 7 && (ja.ProtocolType == nil || *ja.ProtocolType != "consumer")) {
				t.Fatalf("protocol %v type %v", ja.Protocol, ja.ProtocolType)
			}
			// The follower's sync waits for the leader's; the leader assigns it nothing.
			fs := kmsg.NewPtrSyncGroupRequest()
			fs.Group, fs.Generation, fs.MemberID = group, jb.Generation, jb.MemberID
			fcorr := wb.send(fs, sv)
			time.Sleep(50 * time.Millisecond)
			ls := kmsg.NewPtrSyncGroupRequest()
			ls.Group, ls.Generation, ls.MemberID = group, ja.Generation, a
			as := kmsg.NewSyncGroupRequestGroupAssignment()
			as.MemberID, as.MemberAssignment = a, []byte("everything")
			ls.GroupAssignment = append(ls.GroupAssignment, as)
			lr := wireRoundTrip[*kmsg.SyncGroupResponse](wa, ls, sv)
			wantCode(t, "leader sync", lr.ErrorCode, nil)
			fr := kmsg.NewPtrSyncGroupResponse()
			fr.SetVersion(sv)
			wb.recv(fcorr, fr)
			wantCode(t, "follower sync", fr.ErrorCode, nil)
			if string(lr.MemberAssignment) != "everything" || fr.MemberAssignment == nil || len(fr.MemberAssignment) != 0 {
				t.Fatalf("assignments: leader %q follower %q (nil %v)", lr.MemberAssignment, fr.MemberAssignment, fr.MemberAssignment == nil)
			}
			hb.Generation, hb.MemberID = jb.Generation, jb.MemberID
			wantCode(t, "follower heartbeat", wireRoundTrip[*kmsg.HeartbeatResponse](wb, hb, hv).ErrorCode, nil)

			// Commit as a member, fetch back, with metadata.
			cv := max(min(v, 9), 2)
			oc := kmsg.NewPtrOffsetCommitRequest()
			oc.Group, oc.Generation, oc.MemberID = group, ja.Generation, a
			ot := kmsg.NewOffsetCommitRequestTopic()
			ot.Topic = "proto"
			op := kmsg.NewOffsetCommitRequestTopicPartition()
			md := "meta-" + group
			op.Partition, op.Offset, op.Metadata, op.LeaderEpoch = 1, 42, &md, 7
			ot.Partitions = append(ot.Partitions, op)
			oc.Topics = append(oc.Topics, ot)
			ocr := wireRoundTrip[*kmsg.OffsetCommitResponse](wa, oc, cv)
			wantCode(t, "commit", ocr.Topics[0].Partitions[0].ErrorCode, nil)
			fv := max(min(v, 7), 1)
			of := kmsg.NewPtrOffsetFetchRequest()
			of.Group = group
			ft := kmsg.NewOffsetFetchRequestTopic()
			ft.Topic, ft.Partitions = "proto", []int32{0, 1}
			of.Topics = append(of.Topics, ft)
			ofr := wireRoundTrip[*kmsg.OffsetFetchResponse](wa, of, fv)
			ps := ofr.Topics[0].Partitions
			if ps[0].Offset != -1 || ps[1].Offset != 42 || *ps[1].Metadata != md || (fv >= 5 && cv >= 6 && ps[1].LeaderEpoch != 7) {
				t.Fatalf("fetched %+v", ps)
			}

			// Both leave; the group is empty.
			lg := kmsg.NewPtrLeaveGroupRequest()
			lg.Group = group
			if lv < 3 {
				lg.MemberID = jb.MemberID
				wantCode(t, "leave", wireRoundTrip[*kmsg.LeaveGroupResponse](wb, lg, lv).ErrorCode, nil)
				lg.MemberID = a
				wantCode(t, "leave", wireRoundTrip[*kmsg.LeaveGroupResponse](wa, lg, lv).ErrorCode, nil)
			} else {
				for _, id := range []string{a, jb.MemberID, "nobody"} {
					m := kmsg.NewLeaveGroupRequestMember()
					m.MemberID = id
					lg.Members = append(lg.Members, m)
				}
				lr := wireRoundTrip[*kmsg.LeaveGroupResponse](wa, lg, lv)
				wantCode(t, "leave", lr.ErrorCode, nil)
				wantCode(t, "leave a", lr.Members[0].ErrorCode, nil)
				wantCode(t, "leave b", lr.Members[1].ErrorCode, nil)
				wantCode(t, "leave nobody", lr.Members[2].ErrorCode, kerr.UnknownMemberID)
			}
			if d := b.Coordinator().Describe(group); d.State != "Empty" {
				t.Fatalf("after leaving: %s", d.State)
			}
		})
	}
}

func TestGroupBadInput(t *testing.T) {
	b := startGroupBroker(t, map[string]string{"group.max.size": "20"})
	addr := b.Addr()
	w := dialWire(t, addr)
	group := "bad"
	member, gen := joinAlone(t, w, group, 9, nil)
	static := "static-1"
	staticMember, sgen := joinAlone(t, dialWire(t, addr), "bad-static", 9, &static)

	hb := func(g, m string, gen int32, inst *string) int16 {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.MemberID, r.Generation, r.InstanceID = g, m, gen, inst
		return wireRoundTrip[*kmsg.HeartbeatResponse](w, r, 4).ErrorCode
	}
	sync := func(g, m string, gen int32) int16 {
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.MemberID, r.Generation = g, m, gen
		return wireRoundTrip[*kmsg.SyncGroupResponse](w, r, 5).ErrorCode
	}
	wantCode(t, "heartbeat", hb(group, member, gen, nil), nil)
	wantCode(t, "heartbeat unknown group", hb("no-such-group", member, gen, nil), kerr.UnknownMemberID)
	wantCode(t, "heartbeat unknown member", hb(group, "stranger", gen, nil), kerr.UnknownMemberID)
	wantCode(t, "heartbeat stale generation", hb(group, member, gen-1, nil), kerr.IllegalGeneration)
	wantCode(t, "heartbeat empty group id", hb("", member, gen, nil), kerr.InvalidGroupID)
	wantCode(t, "sync unknown group", sync("no-such-group", member, gen), kerr.UnknownMemberID)
	wantCode(t, "sync unknown member", sync(group, "stranger", gen), kerr.UnknownMemberID)
	wantCode(t, "sync stale generation", sync(group, member, gen+5), kerr.IllegalGeneration)
	wantCode(t, "static heartbeat", hb("bad-static", staticMember, sgen, &static), nil)
	wantCode(t, "fenced static heartbeat", hb("bad-static", "impostor", sgen, &static), kerr.FencedInstanceID)
	other := "other"
	wantCode(t, "unknown instance", hb("bad-static", staticMember, sgen, &other), kerr.UnknownMemberID)

	join := func(r *kmsg.JoinGroupRequest, v int16) *kmsg.JoinGroupResponse {
		return wireRoundTrip[*kmsg.JoinGroupResponse](w, r, v)
	}
	short := wireJoin(group, "", nil, "consumer", "range", nil)
	short.SessionTimeoutMillis = 500
	wantCode(t, "session timeout below min", join(short, 5).ErrorCode, kerr.InvalidSessionTimeout)
	long := wireJoin(group, "", nil, "consumer", "range", nil)
	long.SessionTimeoutMillis = 1800001
	wantCode(t, "session timeout above max", join(long, 5).ErrorCode, kerr.InvalidSessionTimeout)
	wantCode(t, "other protocol type", join(wireJoin(group, "", nil, "connect", "range", nil), 3).ErrorCode, kerr.InconsistentGroupProtocol)
	wantCode(t, "no common protocol", join(wireJoin(group, "", nil, "consumer", "sticky", nil), 3).ErrorCode, kerr.InconsistentGroupProtocol)
	wantCode(t, "join unknown member", join(wireJoin(group, "stranger", nil, "consumer", "range", nil), 5).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "join no group id", join(wireJoin("", "", nil, "consumer", "range", nil), 5).ErrorCode, kerr.InvalidGroupID)

	// Huge member metadata is refused, not stored; the group is unaffected.
	huge := wireJoin(group, "", nil, "consumer", "range", bytes.Repeat([]byte{'m'}, 2<<20))
	wantCode(t, "2 MiB metadata", join(huge, 5).ErrorCode, kerr.InvalidRequest)

	// A 1 MB group id (flexible versions carry it) is INVALID_GROUP_ID everywhere.
	bigID := strings.Repeat("g", 1<<20)
	wantCode(t, "join 1 MB group id", join(wireJoin(bigID, "", nil, "consumer", "range", nil), 9).ErrorCode, kerr.InvalidGroupID)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = bigID
	wantCode(t, "find 1 MB group id", wireRoundTrip[*kmsg.FindCoordinatorResponse](w, fc, 3).ErrorCode, kerr.InvalidGroupID)
	wantCode(t, "heartbeat 1 MB group id", hb(bigID, member, gen, nil), kerr.InvalidGroupID)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = bigID, -1
	ot := kmsg.NewOffsetCommitRequestTopic()
	createTopic(t, addr, "bad-topic", 1, nil)
	ot.Topic = "bad-topic"
	ot.Partitions = append(ot.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
	oc.Topics = append(oc.Topics, ot)
	wantCode(t, "commit 1 MB group id", wireRoundTrip[*kmsg.OffsetCommitResponse](w, oc, 8).Topics[0].Partitions[0].ErrorCode, kerr.InvalidGroupID)

	// Thousands of joins from one connection, pipelined: each new member gets an id to rejoin
	// with until group.max.size of them are pending, then GROUP_MAX_SIZE_REACHED.
	const joins, window = 3000, 100
	counts := map[int16]int{}
	for sent := 0; sent < joins; sent += window {
		var corrs []int32
		for range window {
			corrs = append(corrs, w.send(wireJoin("crowd", "", nil, "consumer", "range", []byte("x")), 6))
		}
		for _, c := range corrs {
			r := kmsg.NewPtrJoinGroupResponse()
			r.SetVersion(6)
			w.recv(c, r)
			counts[r.ErrorCode]++
		}
	}
	if counts[kerr.MemberIDRequired.Code] != 20 || counts[kerr.GroupMaxSizeReached.Code] != joins-20 {
		t.Fatalf("join answers %v: want 20 MEMBER_ID_REQUIRED and the rest GROUP_MAX_SIZE_REACHED", counts)
	}

	// Other groups were never disturbed.
	wantCode(t, "heartbeat after the storm", hb(group, member, gen, nil), nil)
	wantCode(t, "static heartbeat after the storm", hb("bad-static", staticMember, sgen, &static), nil)
	createTopic(t, addr, "after-storm", 2, nil)
	m := startMember(t, addr, "after-storm-group", "after-storm", "late")
	waitClientsCover(t, []*groupMember{m}, 2, 15*time.Second)
}

func TestGroupAdmin(t *testing.T) {
	b := startGroupBroker(t, nil)
	addr := b.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := newKgo(t, addr)
	adm := kadm.NewClient(cl)
	createTopic(t, addr, "adm", 3, nil)

	// FindCoordinator, single and batched: this broker; it creates __consumer_offsets.
	w := dialWire(t, addr)
	for _, v := range []int16{0, 1, 2, 3} {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKey = "my-group"
		resp := wireRoundTrip[*kmsg.FindCoordinatorResponse](w, r, v)
		if resp.ErrorCode != 0 || resp.NodeID != b.nodeID || resp.Port == 0 {
			t.Fatalf("FindCoordinator v%d: %+v", v, resp)
		}
	}
	for _, v := range []int16{4, 5, 6} {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKeys = []string{"a", "b", "c"}
		resp := wireRoundTrip[*kmsg.FindCoordinatorResponse](w, r, v)
		if len(resp.Coordinators) != 3 || resp.Coordinators[1].Key != "b" || resp.Coordinators[1].NodeID != b.nodeID {
			t.Fatalf("FindCoordinator v%d: %+v", v, resp.Coordinators)
		}
	}
	txn := kmsg.NewPtrFindCoordinatorRequest()
	txn.CoordinatorType, txn.CoordinatorKey = 1, "txn"
	if resp := wireRoundTrip[*kmsg.FindCoordinatorResponse](w, txn, 3); resp.ErrorCode != 0 || resp.NodeID != b.nodeID {
		t.Fatalf("transaction coordinator: %+v", resp)
	}
	txn.CoordinatorKey = ""
	wantCode(t, "empty transactional id", wireRoundTrip[*kmsg.FindCoordinatorResponse](w, txn, 3).ErrorCode, kerr.InvalidRequest)
	topics, err := adm.ListTopics(ctx, offsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if d := topics[offsetsTopic]; !d.IsInternal || len(d.Partitions) != 50 {
		t.Fatalf("%s: internal %v, %d partitions", offsetsTopic, d.IsInternal, len(d.Partitions))
	}

	// Unknown group, unknown partition: -1, no error.
	fetched, err := adm.FetchOffsetsForTopics(ctx, "nobody", "adm")
	if err != nil {
		t.Fatal(err)
	}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil || o.At != -1 {
			t.Fatalf("unknown group: %+v", o)
		}
	})
	// Commit with metadata (generation -1: an empty group), fetch it back.
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "adm", Partition: 0, At: 10, LeaderEpoch: 3, Metadata: "héllo, wörld"})
	offs.Add(kadm.Offset{Topic: "adm", Partition: 2, At: 20, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "no-such-topic", Partition: 0, At: 1, LeaderEpoch: -1})
	committed, err := adm.CommitOffsets(ctx, "my-group", offs)
	if err != nil {
		t.Fatal(err)
	}
	if e := committed["no-such-topic"][0].Err; e != kerr.UnknownTopicOrPartition {
		t.Fatalf("commit to an unknown topic: %v", e)
	}
	fetched, err = adm.FetchOffsetsForTopics(ctx, "my-group", "adm")
	if err != nil {
		t.Fatal(err)
	}
	if o := fetched["adm"][0]; o.At != 10 || o.LeaderEpoch != 3 || o.Metadata != "héllo, wörld" {
		t.Fatalf("fetched %+v", o)
	}
	if o := fetched["adm"][1]; o.At != -1 {
		t.Fatalf("uncommitted partition: %+v", o)
	}
	tooBig := kadm.Offsets{}
	tooBig.Add(kadm.Offset{Topic: "adm", Partition: 1, At: 5, LeaderEpoch: -1, Metadata: strings.Repeat("m", 4097)})
	if r, _ := adm.CommitOffsets(ctx, "my-group", tooBig); r["adm"][1].Err != kerr.OffsetMetadataTooLarge {
		t.Fatalf("4097-byte metadata: %v", r["adm"][1].Err)
	}
	// The records went to the partition Kafka's formula names: abs(hash("my-group")) % 50 = 12.
	if p := b.Coordinator().PartitionFor("my-group"); p != 12 {
		t.Fatalf("my-group on partition %d, want 12", p)
	}
	if l, ok := b.logs.Log(engine.TopicPartition{Topic: offsetsTopic, Partition: 12}); !ok || l.LogEndOffset() == 0 {
		t.Fatalf("nothing written to %s-12", offsetsTopic)
	}

	// Multi-group OffsetFetch (v8): a known and an unknown group.
	mf := kmsg.NewPtrOffsetFetchRequest()
	for _, g := range []string{"my-group", "nobody"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = "adm", []int32{0}
		rg.Topics = append(rg.Topics, rt)
		mf.Groups = append(mf.Groups, rg)
	}
	mr := wireRoundTrip[*kmsg.OffsetFetchResponse](w, mf, 9)
	if len(mr.Groups) != 2 || mr.Groups[0].Topics[0].Partitions[0].Offset != 10 || mr.Groups[1].Topics[0].Partitions[0].Offset != -1 || mr.Groups[1].ErrorCode != 0 {
		t.Fatalf("multi-group fetch: %+v", mr.Groups)
	}

	// List, describe, delete offsets, delete groups with a live member.
	m := startMember(t, addr, "live", "adm", "live-1")
	waitClientsCover(t, []*groupMember{m}, 3, 15*time.Second)
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if listed["live"].State != "Stable" || listed["my-group"].State != "Empty" {
		t.Fatalf("listed %+v", listed)
	}
	if only, _ := adm.ListGroups(ctx, "Empty"); len(only) != 1 || only["my-group"].Group == "" {
		t.Fatalf("states filter: %+v", only)
	}
	desc, err := adm.DescribeGroups(ctx, "live", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if d := desc["live"]; d.State != "Stable" || d.Protocol == "" || len(d.Members) != 1 || d.Members[0].ClientHost != "/127.0.0.1" || d.Members[0].ClientID != "live-1" {
		t.Fatalf("describe: %+v", d)
	}
	if d := desc["nobody"]; d.State != "Dead" || d.Err != kerr.GroupIDNotFound || d.ErrMessage != "Group nobody not found." {
		t.Fatalf("describe unknown (v6): %+v", d)
	}
	dg, err := adm.DeleteGroups(ctx, "live", "nobody", "my-group")
	if err != nil {
		t.Fatal(err)
	}
	if dg["live"].Err != kerr.NonEmptyGroup || dg["nobody"].Err != kerr.GroupIDNotFound || dg["my-group"].Err != nil {
		t.Fatalf("delete groups: %+v", dg)
	}
	if f, _ := adm.FetchOffsetsForTopics(ctx, "my-group", "adm"); f["adm"][0].At != -1 {
		t.Fatalf("deleted group still has offsets: %+v", f["adm"][0])
	}
	// The live member commits; its subscribed topic's offsets cannot be deleted.
	if err := m.cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	do, err := adm.DeleteOffsets(ctx, "live", kadm.TopicsSet{"adm": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := do["adm"][0]; e != kerr.GroupSubscribedToTopic {
		t.Fatalf("offset delete of a subscribed topic: %v", e)
	}
	_ = kgo.Client{}
}

// BenchmarkGroupCommitDurable measures offset commits through the coordinator and the real
// __consumer_offsets logs: every commit is acknowledged only after the fdatasync that covers it
// (group commit shares one among concurrent commits).
//
//	go test -run '^$' -bench GroupCommitDurable ./broker/
func BenchmarkGroupCommitDurable(b *testing.B) {
	for _, c := range []struct{ groups, partitions int }{{1, 50}, {1000, 50}, {1000, 1}} {
		groups := c.groups
		b.Run(fmt.Sprintf("groups=%d/partitions=%d", c.groups, c.partitions), func(b *testing.B) {
			br := startBroker(b, map[string]string{"offsets.topic.num.partitions": fmt.Sprint(c.partitions)})
			c := br.Coordinator()
			if _, err := br.ensureOffsetsTopic(); err != nil {
				b.Fatal(err)
			}
			names := make([]string, groups)
			for i := range names {
				names[i] = fmt.Sprintf("bench-group-%d", i)
			}
			var next atomic.Int64
			b.SetParallelism(256) // 512 concurrent committers on 2 CPUs
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					r := c.Commit(coordinator.CommitRequest{Group: names[i%int64(groups)], Generation: -1, RetentionMs: -1,
						Partitions: []coordinator.CommitPartition{{TopicPartition: coordinator.TopicPartition{Topic: "t", Partition: int32(i % 8)}, Offset: i, LeaderEpoch: -1}}})()
					if r.Errors[0] != nil {
						b.Error(r.Errors[0])
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
		})
	}
}
