package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

func TestParseShareResetFlags(t *testing.T) {
	for _, tc := range []struct {
		name      string
		names     []string
		topics    []string
		all       bool
		earliest  bool
		latest    bool
		offset    int64
		datetime  string
		execute   bool
		dryRun    bool
		wantError string
	}{
		{name: "earliest", names: []string{"g"}, topics: []string{"t"}, earliest: true, offset: -1},
		{name: "offset", names: []string{"g"}, topics: []string{"t:0,1"}, offset: 5},
		{name: "datetime", names: []string{"g"}, all: true, offset: -1, datetime: "2026-01-02T03:04:05.678"},
		{name: "no group", topics: []string{"t"}, earliest: true, offset: -1, wantError: "exactly one group"},
		{name: "two groups", names: []string{"a", "b"}, topics: []string{"t"}, earliest: true, offset: -1, wantError: "exactly one group"},
		{name: "no topic", names: []string{"g"}, earliest: true, offset: -1, wantError: "--topic or --all-topics"},
		{name: "both topic and all", names: []string{"g"}, topics: []string{"t"}, all: true, earliest: true, offset: -1, wantError: "--topic or --all-topics"},
		{name: "no target", names: []string{"g"}, topics: []string{"t"}, offset: -1, wantError: "exactly one of"},
		{name: "two targets", names: []string{"g"}, topics: []string{"t"}, earliest: true, latest: true, offset: -1, wantError: "exactly one of"},
		{name: "bad partition", names: []string{"g"}, topics: []string{"t:x"}, earliest: true, offset: -1, wantError: "bad partition"},
		{name: "bad datetime", names: []string{"g"}, topics: []string{"t"}, offset: -1, datetime: "yesterday", wantError: "--to-datetime"},
		{name: "execute and dry run", names: []string{"g"}, topics: []string{"t"}, earliest: true, offset: -1, execute: true, dryRun: true, wantError: "exclude"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseShareResetFlags(tc.names, tc.topics, tc.all, tc.earliest, tc.latest, tc.offset, tc.datetime, tc.execute, tc.dryRun)
			if tc.wantError == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantError != "" && (err == nil || !strings.Contains(err.Error(), tc.wantError)) {
				t.Fatalf("got %v, want an error with %q", err, tc.wantError)
			}
		})
	}
}

func TestParseResetDatetime(t *testing.T) {
	local := time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.Local)
	for in, want := range map[string]time.Time{
		"2026-01-02T03:04:05.678":       local,
		"2026-01-02T03:04:05":           local.Truncate(time.Second),
		"2026-01-02T03:04":              local.Truncate(time.Minute),
		"2026-01-02T03:04:05.678Z":      time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC),
		"2026-01-02T03:04:05.678+02:00": time.Date(2026, 1, 2, 1, 4, 5, 678e6, time.UTC),
		"2026-01-02T03:04:05+0200":      time.Date(2026, 1, 2, 1, 4, 5, 0, time.UTC),
	} {
		got, err := parseResetDatetime(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("%s: got %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "2026-01-02", "03:04:05", "2026-13-02T03:04:05"} {
		if _, err := parseResetDatetime(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestShareResetTarget(t *testing.T) {
	at := time.Unix(0, 0)
	for _, tc := range []struct {
		spec                     shareResetSpec
		start, end, atTime, want int64
	}{
		{shareResetSpec{earliest: true, offset: -1}, 5, 20, -1, 5},
		{shareResetSpec{latest: true, offset: -1}, 5, 20, -1, 20},
		{shareResetSpec{offset: 10}, 5, 20, -1, 10},
		{shareResetSpec{offset: 1}, 5, 20, -1, 5},
		{shareResetSpec{offset: 99}, 5, 20, -1, 20},
		{shareResetSpec{offset: -1, datetime: &at}, 5, 20, 12, 12},
		{shareResetSpec{offset: -1, datetime: &at}, 5, 20, -1, 20},
	} {
		if got := shareResetTarget(tc.spec, tc.start, tc.end, tc.atTime); got != tc.want {
			t.Errorf("%+v start %d end %d at %d: got %d want %d", tc.spec, tc.start, tc.end, tc.atTime, got, tc.want)
		}
	}
}

func TestParseTopicPartitions(t *testing.T) {
	if tp, ps, err := parseTopicPartitions("orders"); err != nil || tp != "orders" || ps != nil {
		t.Fatalf("%q %v %v", tp, ps, err)
	}
	if tp, ps, err := parseTopicPartitions("orders:2, 0"); err != nil || tp != "orders" || len(ps) != 2 || ps[0] != 2 || ps[1] != 0 {
		t.Fatalf("%q %v %v", tp, ps, err)
	}
	for _, bad := range []string{":1", "t:", "t:-1", "t:a", "t:99999999999"} {
		if _, _, err := parseTopicPartitions(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestShareGroupCmdArgs(t *testing.T) {
	ctx := context.Background()
	// Every one of these fails before any connection is made (no broker listens here).
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"describe"},
		{"delete"},
		{"delete-offsets", "g"},
		{"delete-offsets", "--topic", "t"},
		{"reset-offsets", "g", "--topic", "t"},
		{"reset-offsets", "g", "--to-earliest"},
		{"reset-offsets", "--topic", "t", "--to-latest"},
		{"reset-offsets", "g", "--topic", "t", "--to-datetime", "soon"},
	} {
		var out bytes.Buffer
		if err := shareGroupCmd(ctx, append(args, "--bootstrap", "127.0.0.1:1"), &out); err == nil {
			t.Errorf("share-group %v: no error", args)
		}
	}
	var out bytes.Buffer
	if err := shareGroupCmd(ctx, []string{"help"}, &out); err != nil || !strings.Contains(out.String(), "reset-offsets") {
		t.Fatalf("help: %v %q", err, out.String())
	}
	if err := groupCmd(ctx, []string{"list", "--type", "stream", "--bootstrap", "127.0.0.1:1"}, &out); err == nil || !strings.Contains(err.Error(), "not a group type") {
		t.Fatalf("bad --type: %v", err)
	}
}

func TestWriteGroupList(t *testing.T) {
	var out bytes.Buffer
	err := writeGroupList(&out, []kadm.ListedGroup{
		{Group: "a", GroupType: "classic", ProtocolType: "consumer", State: "Stable"},
		{Group: "b", GroupType: "consumer", ProtocolType: "consumer", State: "Assigning"},
		{Group: "c", GroupType: "share", ProtocolType: "share", State: "Empty"},
		{Group: "d", State: "Empty"},
	})
	want := "GROUP  TYPE      STATE      PROTOCOL-TYPE\n" +
		"a      classic   Stable     consumer\n" +
		"b      consumer  Assigning  consumer\n" +
		"c      share     Empty      share\n" +
		"d      classic   Empty      -\n"
	if err != nil || out.String() != want {
		t.Fatalf("got %v\n%s\nwant\n%s", err, out.String(), want)
	}
}

func topicsSet(kv ...any) kadm.TopicsSet {
	s := kadm.TopicsSet{}
	for i := 0; i < len(kv); i += 2 {
		s.Add(kv[i].(string), kv[i+1].([]int32)...)
	}
	return s
}

func TestWriteConsumerGroup(t *testing.T) {
	inst := "static-1"
	g := kadm.DescribedConsumerGroup{
		Group: "g1", State: "Reconciling", Epoch: 7, AssignmentEpoch: 6, AssignorName: "uniform",
		Coordinator: kadm.BrokerDetail{NodeID: 2, Host: "127.0.0.1", Port: 9093},
		Members: []kadm.ConsumerGroupMember{
			{MemberID: "m-a", InstanceID: &inst, ClientID: "c1", ClientHost: "/127.0.0.1", MemberEpoch: 6, MemberType: 0,
				SubscribedTopics: []string{"events"}, Assignment: topicsSet("events", []int32{1, 0}), TargetAssignment: topicsSet("events", []int32{0})},
			{MemberID: "m-b", ClientID: "c2", ClientHost: "/127.0.0.1", MemberEpoch: 7, MemberType: 1,
				SubscribedTopics: []string{"events"}, Assignment: topicsSet(), TargetAssignment: topicsSet("events", []int32{1})},
		},
	}
	commits := kadm.OffsetResponses{"events": {
		0: {Offset: kadm.Offset{Topic: "events", Partition: 0, At: 4}},
		2: {Offset: kadm.Offset{Topic: "events", Partition: 2, At: 1}},
	}}
	ends := kadm.ListedOffsets{"events": {
		0: {Topic: "events", Partition: 0, Offset: 10},
		1: {Topic: "events", Partition: 1, Offset: 3},
		2: {Topic: "events", Partition: 2, Offset: 1},
	}}
	rows := consumerLagRows(g, commits, ends)
	var out bytes.Buffer
	if err := writeConsumerGroup(&out, g, rows); err != nil {
		t.Fatal(err)
	}
	want := "group g1: type consumer, state Reconciling, group epoch 7, assignment epoch 6, assignor uniform, 2 members, coordinator 2 (127.0.0.1:9093)\n" +
		"MEMBER  INSTANCE  CLIENT  HOST        PROTOCOL  EPOCH  SUBSCRIBED  ASSIGNED    TARGET\n" +
		"m-a     static-1  c1      /127.0.0.1  classic   6      events      events:0,1  events:0\n" +
		"m-b     -         c2      /127.0.0.1  consumer  7      events      -           events:1\n" +
		"TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  MEMBER\n" +
		"events  0          4               10              6    m-a\n" +
		"events  1          -               3               -    m-a\n" +
		"events  2          1               1               0    -\n" +
		"total lag 6\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestWriteShareGroup(t *testing.T) {
	g := kadm.DescribedShareGroup{
		GroupID: "sg", GroupState: "Stable", GroupEpoch: 3, AssignmentEpoch: 3, Assignor: "simple",
		Coordinator: kadm.BrokerDetail{NodeID: 1, Host: "127.0.0.1", Port: 9092},
		Members: []kadm.ShareGroupMember{
			{MemberID: "x", ClientID: "c1", ClientHost: "/127.0.0.1", MemberEpoch: 3, SubscribedTopicNames: []string{"t"}, Assignment: topicsSet("t", []int32{0})},
			{MemberID: "y", ClientID: "c2", ClientHost: "/127.0.0.1", MemberEpoch: 3, SubscribedTopicNames: []string{"t"}, Assignment: topicsSet("t", []int32{0})},
		},
	}
	offsets := kadm.ShareOffsets{"t": {
		0: {Topic: "t", Partition: 0, StartOffset: 12, LeaderEpoch: 0, Lag: 3},
		1: {Topic: "t", Partition: 1, StartOffset: -1, LeaderEpoch: -1, Lag: -1},
	}}
	var out bytes.Buffer
	if err := writeShareGroup(&out, g, offsets); err != nil {
		t.Fatal(err)
	}
	want := "share group sg: state Stable, group epoch 3, assignment epoch 3, assignor simple, 2 members, coordinator 1 (127.0.0.1:9092)\n" +
		"MEMBER  CLIENT  HOST        EPOCH  SUBSCRIBED  ASSIGNED\n" +
		"x       c1      /127.0.0.1  3      t           t:0\n" +
		"y       c2      /127.0.0.1  3      t           t:0\n" +
		"TOPIC  PARTITION  START-OFFSET  LEADER-EPOCH  LAG\n" +
		"t      0          12            0             3\n" +
		"t      1          -             -             -\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}
