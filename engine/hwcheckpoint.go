package engine

import (
	"log/slog"
	"path/filepath"

	"github.com/weir-mq/weir/vfs"
)

// ReplicationOffsetCheckpointFile is Kafka's per-log-dir high watermark checkpoint (written by
// Kafka's ReplicaManager): the recovery-point checkpoint's format, one high watermark per partition.
const ReplicationOffsetCheckpointFile = "replication-offset-checkpoint"

// readHighWatermarks reads a log dir's replication-offset-checkpoint; present is false when the
// file does not exist (or is unreadable).
func readHighWatermarks(fsys vfs.FS, dir string) (hws map[TopicPartition]int64, present bool) {
	path := filepath.Join(dir, ReplicationOffsetCheckpointFile)
	if _, err := fsys.Stat(path); err != nil {
		return map[TopicPartition]int64{}, false
	}
	hws, err := ReadCheckpoint(path)
	if err != nil {
		slog.Warn("ignoring unreadable high watermark checkpoint", "err", err)
		return map[TopicPartition]int64{}, false
	}
	return hws, true
}

// restoreHighWatermark sets a just opened log's high watermark from its log dir's checkpoint when
// the watermark is set from outside (Config.LocalHighWatermark false), as Kafka does at start:
// the checkpointed value (0 when the partition has no entry), clamped to [log start, log end].
// Without a checkpoint file at all (a log dir from before it was kept) the log keeps the
// watermark OpenLog gave it, the log end.
func restoreHighWatermark(l *Log, d *dirState, tp TopicPartition) {
	if l.config().LocalHighWatermark || !d.hwFile {
		return
	}
	if err := l.SetHighWatermark(d.highWatermarks[tp]); err != nil {
		slog.Warn("restore high watermark", "partition", tp, "err", err)
	}
}
