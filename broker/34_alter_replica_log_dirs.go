package broker

// AlterReplicaLogDirs (key 34), v1-v2 (Kafka 4 dropped v0): move this broker's replicas to
// other log dirs of it, as Kafka's ReplicaManager.alterReplicaLogDirs does. Each partition is
// answered at once; the move runs in the background (logdirs.go: a future log copied in the
// target dir while the partition keeps serving, then swapped in), and DescribeLogDirs shows it
// (is_future) until it completes. A partition already in the named dir is left alone (NONE);
// a move to another dir replaces a move in progress. Errors per partition: LOG_DIR_NOT_FOUND (the
// path is not one of log.dirs), KAFKA_STORAGE_ERROR (the target dir or the replica's dir is
// offline), REPLICA_NOT_AVAILABLE (no replica of it here: unknown, or not assigned to this
// broker, or not created yet). ALTER on the CLUSTER is required (CLUSTER_AUTHORIZATION_FAILED for
// every partition). A partition named twice is moved to the last dir naming it.

import (
	"errors"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 34, min: 1, max: 2, handle: handleAlterReplicaLogDirs})
}

func handleAlterReplicaLogDirs(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.AlterReplicaLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	resp.SetVersion(r.Version)
	denied := b.authorizeCluster(r, acl.OpAlter) // ACL: ALTER on CLUSTER (Kafka's rule)
	// The last dir naming a partition wins (Kafka's request is a map by partition).
	target := map[engine.TopicPartition]string{}
	var order []engine.TopicPartition
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				tp := engine.TopicPartition{Topic: t.Topic, Partition: p}
				if _, seen := target[tp]; !seen {
					order = append(order, tp)
				}
				target[tp] = d.Dir
			}
		}
	}
	codes := make(map[engine.TopicPartition]int16, len(order))
	for _, tp := range order {
		switch {
		case denied != nil:
			codes[tp] = denied.Code
		case !filepath.IsAbs(target[tp]):
			codes[tp] = kerr.LogDirNotFound.Code
		default:
			codes[tp] = moveErrorCode(b.startMove(tp, target[tp]))
		}
	}
	idx := map[string]int{}
	for _, tp := range order {
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(resp.Topics)
			idx[tp.Topic] = i
			rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
			rt.Topic = tp.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
		rp.Partition, rp.ErrorCode = tp.Partition, codes[tp]
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return netio.Reply{Response: resp}
}

// moveErrorCode maps a move's error to the codes Kafka answers AlterReplicaLogDirs with.
func moveErrorCode(err error) int16 {
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke) && (ke == kerr.LogDirNotFound || ke == kerr.KafkaStorageError || ke == kerr.ReplicaNotAvailable):
		return ke.Code
	default:
		return kerr.KafkaStorageError.Code
	}
}
