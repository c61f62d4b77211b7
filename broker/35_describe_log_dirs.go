package broker

// DescribeLogDirs (key 35), v1-v5 (Kafka 4 dropped v0; v5's is_cordoned, KIP-1066, is always
// false: weir does not cordon log dirs): every configured log dir with its path, its error
// (KAFKA_STORAGE_ERROR once offline, and then nothing else), v4 its total and usable bytes
// (statfs of the filesystem holding it; -1 when offline), and each partition log in it
// (every one, or the partitions the request names): size in bytes, offset lag and is_future. As
// Kafka's ReplicaManager.getLogEndOffsetLag computes it, the lag of a partition's current log is
// max(high watermark - log end offset, 0) (0 on a leader), and that of a future log (a replica
// being moved into the dir by AlterReplicaLogDirs) the current log's end offset less its own.
// DESCRIBE on the CLUSTER is required: without it v3+ answers CLUSTER_AUTHORIZATION_FAILED and
// no dirs, older versions no dirs.

import (
	"path/filepath"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 35, min: 1, max: 5, handle: handleDescribeLogDirs})
}

func handleDescribeLogDirs(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	resp.SetVersion(r.Version)
	if err := b.authorizeCluster(r, acl.OpDescribe); err != nil { // ACL: DESCRIBE on CLUSTER (Kafka's rule)
		resp.ErrorCode = err.Code
		return netio.Reply{Response: resp}
	}
	var want map[engine.TopicPartition]bool
	if req.Topics != nil {
		want = map[engine.TopicPartition]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				want[engine.TopicPartition{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	type entry struct {
		tp     engine.TopicPartition
		size   int64
		lag    int64
		future bool
	}
	byDir := map[string][]entry{}
	logs := b.logs.Logs()
	for tp, l := range logs {
		if want != nil && !want[tp] {
			continue
		}
		dir, ok := b.logs.LogDirOf(tp)
		if !ok {
			continue
		}
		byDir[dir] = append(byDir[dir], entry{tp: tp, size: l.Size(), lag: max(l.HighWatermark()-l.LogEndOffset(), 0)})
	}
	for tp, f := range b.logs.Futures() {
		if want != nil && !want[tp] {
			continue
		}
		src, ok := logs[tp]
		if !ok {
			continue
		}
		fl := f.Log()
		byDir[f.Dir()] = append(byDir[f.Dir()], entry{tp: tp, size: fl.Size(), lag: max(src.LogEndOffset()-fl.LogEndOffset(), 0), future: true})
	}
	for _, d := range b.logs.Dirs() {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = absDir(d.Path)
		rd.TotalBytes, rd.UsableBytes = -1, -1
		if err := d.Err(); err != nil {
			rd.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(d.Path, &st); err == nil {
			rd.TotalBytes = int64(st.Blocks) * int64(st.Bsize)
			rd.UsableBytes = int64(st.Bavail) * int64(st.Bsize)
		}
		entries := byDir[d.Path]
		sort.Slice(entries, func(i, j int) bool {
			if entries[i].tp.Topic != entries[j].tp.Topic {
				return entries[i].tp.Topic < entries[j].tp.Topic
			}
			return entries[i].tp.Partition < entries[j].tp.Partition
		})
		for i := 0; i < len(entries); {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = entries[i].tp.Topic
			for ; i < len(entries) && entries[i].tp.Topic == rt.Topic; i++ {
				e := entries[i]
				rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
				rp.Partition, rp.Size, rp.OffsetLag, rp.IsFuture = e.tp.Partition, e.size, e.lag, e.future
				rt.Partitions = append(rt.Partitions, rp)
			}
			rd.Topics = append(rd.Topics, rt)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	return netio.Reply{Response: resp}
}

// absDir is a log dir's absolute path, as Kafka names log dirs in DescribeLogDirs (and expects
// them in AlterReplicaLogDirs).
func absDir(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
