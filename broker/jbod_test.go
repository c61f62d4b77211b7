package broker

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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
