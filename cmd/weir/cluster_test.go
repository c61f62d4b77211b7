package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestPrintPartition(t *testing.T) {
	for _, tc := range []struct {
		p    kadm.PartitionDetail
		want string
	}{
		{kadm.PartitionDetail{Partition: 0, Leader: 2, LeaderEpoch: 4, Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3, 1}},
			"\tTopic: t\tPartition: 0\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3,1\tLeaderEpoch: 4\tOffline: \n"},
		{kadm.PartitionDetail{Partition: 1, Leader: 1, LeaderEpoch: 7, Replicas: []int32{3, 1, 2}, ISR: []int32{1, 2}, OfflineReplicas: []int32{3}},
			"\tTopic: t\tPartition: 1\tLeader: 1\tReplicas: 3,1,2\tIsr: 1,2\tLeaderEpoch: 7\tOffline: 3\tUNDER-REPLICATED\n"},
		{kadm.PartitionDetail{Partition: 2, Leader: -1, LeaderEpoch: 9, Replicas: []int32{1, 2}, ISR: []int32{1}, OfflineReplicas: []int32{1, 2}, Err: kerr.LeaderNotAvailable},
			"\tTopic: t\tPartition: 2\tLeader: -1\tReplicas: 1,2\tIsr: 1\tLeaderEpoch: 9\tOffline: 1,2\tNO LEADER\tUNDER-REPLICATED\n"},
		{kadm.PartitionDetail{Partition: 3, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, Err: kerr.KafkaStorageError},
			"\tTopic: t\tPartition: 3\tLeader: 1\tReplicas: 1\tIsr: 1\tLeaderEpoch: 0\tOffline: \tError: " + kerr.KafkaStorageError.Error() + "\n"},
	} {
		var b bytes.Buffer
		printPartition(&b, "t", tc.p)
		if b.String() != tc.want {
			t.Errorf("got  %q\nwant %q", b.String(), tc.want)
		}
	}
}

func TestClusterInfoPrint(t *testing.T) {
	var b bytes.Buffer
	(&clusterInfo{clusterID: "abc", controller: 2, brokers: []clusterBroker{{id: 1, addr: "127.0.0.1:9092"}, {id: 2, addr: "127.0.0.1:9093", rack: "r2"}},
		topics: 2, partitions: 7, leaderless: 1, underReplicated: 3, offline: 2}).print(&b)
	want := `Cluster ID:             abc
Active controller:      2
Brokers:                2
  1   127.0.0.1:9092
  2   127.0.0.1:9093  rack r2  (active controller)
Topics:                 2
Partitions:             7
Leaderless partitions:  1
Under-replicated:       3
With offline replicas:  2
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	(&clusterInfo{controller: -1}).print(&b)
	if !strings.Contains(b.String(), "Active controller:      none\n") {
		t.Fatalf("no controller: %q", b.String())
	}
}

// On one broker: cluster info works, and nothing is under-replicated.
func TestClusterInfoSingleBroker(t *testing.T) {
	addr := startTestBroker(t)
	ctx := context.Background()
	if err := topicCmd(ctx, []string{"create", "one", "--partitions", "2", "--bootstrap", addr}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := clusterCmd(ctx, []string{"info", "--bootstrap", addr}, &out); err != nil {
		t.Fatal(err)
	}
	info := parseInfo(out.String())
	for k, want := range map[string]string{"Brokers": "1", "Active controller": "1", "Topics": "1", "Partitions": "2",
		"Leaderless partitions": "0", "Under-replicated": "0"} {
		if info[k] != want {
			t.Errorf("%s = %q, want %s:\n%s", k, info[k], want, out.String())
		}
	}
	if !strings.Contains(info["brokers"], "  1   "+addr+"  (active controller)\n") {
		t.Errorf("brokers %q", info["brokers"])
	}
	out.Reset()
	if err := topicCmd(ctx, []string{"describe", "--under-replicated", "--bootstrap", addr}, &out); err != nil || out.Len() != 0 {
		t.Errorf("describe --under-replicated: %q, %v", out.String(), err)
	}
	for _, args := range [][]string{{}, {"nodes"}, {"info", "extra", "--bootstrap", addr}} {
		if err := clusterCmd(ctx, args, &bytes.Buffer{}); err == nil {
			t.Errorf("cluster %v: no error", args)
		}
	}
}
