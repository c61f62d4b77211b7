package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestApplyLogDirsOffline: a broker's replicas in an offline log dir leave their ISRs (unless
// the last member) and their leaderships; its other partitions, and unknown names, are left alone.
func TestApplyLogDirsOffline(t *testing.T) {
	img := testImage(t)
	next := mustApply(t, img, 11, &command{Op: opLogDirsOffline, BrokerID: 1, OfflineReplicas: []PartitionRef{
		{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "t", Partition: 2},
		{Topic: "t", Partition: 7}, {Topic: "nope", Partition: 0},
	}})
	p := next.Topics["t"].Partitions
	if p[0].Leader != 2 || !slices.Equal(p[0].ISR, []int32{2, 3}) || p[0].LeaderEpoch != 1 || p[0].PartitionEpoch != 1 {
		t.Fatalf("p0 %+v", p[0])
	}
	if p[1].Leader != -1 || !slices.Equal(p[1].ISR, []int32{1}) || p[1].LeaderEpoch != 1 {
		t.Fatalf("p1 %+v", p[1])
	}
	if p[2].Leader != 2 || p[2].LeaderEpoch != 0 || p[2].PartitionEpoch != 0 {
		t.Fatalf("p2 %+v", p[2])
	}
	if next.Brokers[1].Fenced {
		t.Fatal("the broker was fenced")
	}
	// Reported again: nothing changes.
	if again, res := apply(next, 12, &command{Op: opLogDirsOffline, BrokerID: 1, OfflineReplicas: []PartitionRef{{Topic: "t", Partition: 0}}}); again != nil || res.err != nil {
		t.Fatalf("second report changed the image: %v", res.err)
	}
	if NeedsOfflineReport(&p[0], 1) || !NeedsOfflineReport(&img.Topics["t"].Partitions[0], 1) {
		t.Fatal("NeedsOfflineReport")
	}
}

func TestValidateLogDirsOffline(t *testing.T) {
	ok := `{"op":"log_dirs_offline","broker":1,"offline_replicas":[{"topic":"t","partition":0}]}`
	if _, err := decodeRequest([]byte(ok)); err != nil {
		t.Fatal(err)
	}
	many := make([]string, MaxOfflineReplicasPerReport+1)
	for i := range many {
		many[i] = `{"topic":"t","partition":0}`
	}
	for _, bad := range []string{
		`{"op":"log_dirs_offline","broker":1,"offline_replicas":[{"topic":"","partition":0}]}`,
		`{"op":"log_dirs_offline","broker":1,"offline_replicas":[{"topic":"t","partition":-1}]}`,
		`{"op":"log_dirs_offline","broker":1,"name":"x"}`,
		`{"op":"heartbeat","broker":1,"offline_replicas":[{"topic":"t","partition":0}]}`,
		`{"op":"log_dirs_offline","broker":1,"offline_replicas":[` + strings.Join(many, ",") + `]}`,
	} {
		if _, err := decodeRequest([]byte(bad)); !errors.Is(err, kerr.InvalidRequest) {
			t.Fatalf("%.80s: %v", bad, err)
		}
	}
}
