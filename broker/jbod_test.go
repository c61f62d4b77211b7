package broker

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
)

// DescribeLogDirs and AlterReplicaLogDirs on one broker: authorization (DESCRIBE / ALTER on the
// cluster), the errors of a move (LOG_DIR_NOT_FOUND, REPLICA_NOT_AVAILABLE), a move to the dir
// the replica is already in, and a completed move.
func TestJBODLogDirAPIs(t *testing.T) {
	denied := startBroker(t, map[string]string{"authorizer.enable": "true"})
	dcl, _ := admClient(t, denied)
	dd := kmsg.NewPtrDescribeLogDirsRequest()
	dresp := admRaw[*kmsg.DescribeLogDirsResponse](t, dcl, dd)
	admWantCode(t, "describe log dirs without DESCRIBE on the cluster", dresp.ErrorCode, kerr.ClusterAuthorizationFailed)
	if len(dresp.Dirs) != 0 {
		t.Errorf("dirs described without authorization: %v", dresp.Dirs)
	}
	ar := alterDirsReq("/x", "t", 0)
	aresp := admRaw[*kmsg.AlterReplicaLogDirsResponse](t, dcl, ar)
	admWantCode(t, "alter replica log dirs without ALTER on the cluster", aresp.Topics[0].Partitions[0].ErrorCode, kerr.ClusterAuthorizationFailed)

	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	br := startBroker(t, map[string]string{"log.dirs": a + "," + b})
	cl, adm := admClient(t, br)
	admCreateTopic(t, adm, "jt", 2, nil)
	var where map[int32]string
	waitFor(t, 10*time.Second, "both partitions described", func() (bool, string) {
		where = map[int32]string{}
		resp := admRaw[*kmsg.DescribeLogDirsResponse](t, cl, kmsg.NewPtrDescribeLogDirsRequest())
		for _, d := range resp.Dirs {
			for _, tp := range d.Topics {
				for _, p := range tp.Partitions {
					if tp.Topic == "jt" {
						where[p.Partition] = d.Dir
					}
				}
			}
		}
		return len(where) == 2, ""
	})
	if where[0] == where[1] {
		t.Fatalf("both partitions in %s", where[0])
	}
	code := func(dir, topic string, p int32) int16 {
		return admRaw[*kmsg.AlterReplicaLogDirsResponse](t, cl, alterDirsReq(dir, topic, p)).Topics[0].Partitions[0].ErrorCode
	}
	admWantCode(t, "unknown dir", code(filepath.Join(root, "c"), "jt", 0), kerr.LogDirNotFound)
	admWantCode(t, "relative dir", code("a", "jt", 0), kerr.LogDirNotFound)
	admWantCode(t, "unknown partition", code(a, "jt", 9), kerr.ReplicaNotAvailable)
	admWantCode(t, "already there", code(where[0], "jt", 0), nil)
	other := a
	if where[0] == a {
		other = b
	}
	admWantCode(t, "move", code(other, "jt", 0), nil)
	waitFor(t, 10*time.Second, "jt-0 moved", func() (bool, string) {
		d, _ := br.logs.LogDirOf(engine.TopicPartition{Topic: "jt", Partition: 0})
		return d == other && len(br.logs.Futures()) == 0, d
	})
}

func alterDirsReq(dir, topic string, p int32) *kmsg.AlterReplicaLogDirsRequest {
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	d := kmsg.NewAlterReplicaLogDirsRequestDir()
	d.Dir = dir
	dt := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
	dt.Topic, dt.Partitions = topic, []int32{p}
	d.Topics = append(d.Topics, dt)
	req.Dirs = append(req.Dirs, d)
	return req
}

// TestJBODMoveThrottled: replica.alter.log.dirs.io.max.bytes.per.second bounds a move between
// log dirs. 40 MiB moved at 4 MiB/s: the throttled part (all but the last 1,000 offsets, 8 MiB
// here, copied in the swap, and the first second's allowance) takes about 7 s; unthrottled the
// same move takes well under a second on any disk these tests run on.
func TestJBODMoveThrottled(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 40 MiB")
	}
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	br := startBroker(t, map[string]string{"log.dirs": a + "," + b,
		"replica.alter.log.dirs.io.max.bytes.per.second": "4194304",
		"log.flush.interval.messages":                    "9223372036854775807"})
	cl, adm := admClient(t, br, kgo.DefaultProduceTopic("jm"), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	admCreateTopic(t, adm, "jm", 1, nil)
	val := make([]byte, 8<<10)
	_, _ = rand.Read(val) // incompressible: the client compresses batches
	const records = 5000  // 40 MiB
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rs := make([]*kgo.Record, 0, records)
	for i := 0; i < records; i++ {
		rs = append(rs, &kgo.Record{Value: val})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp := engine.TopicPartition{Topic: "jm", Partition: 0}
	from, _ := br.logs.LogDirOf(tp)
	to := a
	if from == a {
		to = b
	}
	start := time.Now()
	admWantCode(t, "move", admRaw[*kmsg.AlterReplicaLogDirsResponse](t, cl, alterDirsReq(to, "jm", 0)).Topics[0].Partitions[0].ErrorCode, nil)
	waitFor(t, 60*time.Second, "jm-0 moved", func() (bool, string) {
		d, _ := br.logs.LogDirOf(tp)
		return d == to && len(br.logs.Futures()) == 0, d
	})
	took := time.Since(start)
	// (40 - 8 - 4) MiB at 4 MiB/s = 7 s; allow 20% below it.
	t.Logf("40 MiB moved in %v at 4 MiB/s", took)
	if took < 5600*time.Millisecond {
		t.Errorf("move took %v; the throttle should hold it to about 7 s", took)
	}
}
