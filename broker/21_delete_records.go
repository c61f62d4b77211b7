package broker

// DeleteRecords (key 21), v0-v2 (v1 is v0, v2 flexible). Advances each partition's log start
// offset to the requested offset (-1 = the high watermark); segments wholly below it are
// deleted. Records are never un-deleted: an offset below the current log start changes nothing.
// An offset past the high watermark, or negative other than -1, is OFFSET_OUT_OF_RANGE. The low
// watermark answered is the new log start offset (one replica: nothing to wait for, so
// timeout_ms is not needed). As in Kafka, internal topics are refused with
// INVALID_TOPIC_EXCEPTION and topics whose cleanup.policy lacks "delete" with POLICY_VIOLATION.
// Unknown topics and partitions answer UNKNOWN_TOPIC_OR_PARTITION with low watermark -1. The
// log-start checkpoint is written before answering, so a crash cannot resurrect the records.

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 21, min: 0, max: 2, handle: handleDeleteRecords})
}

// deleteRecordsToHighWatermark is the offset meaning "up to the high watermark".
const deleteRecordsToHighWatermark = -1

func handleDeleteRecords(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	resp.SetVersion(r.Version)
	deleted := false
	denied := b.topicDenied(r, acl.OpDelete) // ACL: DELETE on each topic (authz.go)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t, ok := b.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			if denied != nil && denied(rt.Topic) {
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			var l *engine.Log
			var err error = kerr.UnknownTopicOrPartition
			if ok && rp.Partition >= 0 && rp.Partition < t.Partitions {
				err = kerr.NotLeaderForPartition
				if rep := b.rm.get(engine.TopicPartition{Topic: t.Name, Partition: rp.Partition}); rep != nil {
					if err = rep.checkLeader(-1); err == nil {
						l = rep.log
					}
				}
			}
			if l != nil {
				sp.LowWatermark, err = b.deleteRecords(t, l, rp.Offset)
				deleted = deleted || err == nil
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				sp.LowWatermark = -1
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if deleted {
		if err := b.logs.Checkpoint(); err != nil {
			slog.Error("writing the log-start checkpoint after DeleteRecords", "err", err)
		}
	}
	return netio.Reply{Response: resp}
}

// deleteRecords advances l's log start offset to offset and returns the new log start.
func (b *Broker) deleteRecords(t Topic, l *engine.Log, offset int64) (int64, error) {
	if isInternalTopic(t.Name) { // Kafka's ReplicaManager refuses these too
		return -1, fmt.Errorf("cannot delete records of internal topic %s: %w", t.Name, kerr.InvalidTopicException)
	}
	policy := keyCleanupPolicy.Topic(b.cfg, t.Configs)
	if !hasListItem(policy, "delete") {
		return -1, fmt.Errorf("records of %s cannot be deleted: cleanup.policy is %q: %w", t.Name, policy, kerr.PolicyViolation)
	}
	if offset == deleteRecordsToHighWatermark {
		offset = l.HighWatermark()
	}
	if offset < 0 {
		return -1, fmt.Errorf("offset %d of %s-%d is not valid: %w", offset, t.Name, l.Partition(), kerr.OffsetOutOfRange)
	}
	start, err := l.DeleteRecordsBefore(offset)
	if err != nil && errorCode(err) == kerr.UnknownServerError.Code {
		// The log start moved; deleting a segment file failed.
		return -1, fmt.Errorf("%v: %w", err, kerr.KafkaStorageError)
	}
	return start, err
}

// hasListItem reports whether the comma-separated list holds item.
func hasListItem(list, item string) bool {
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == item {
			return true
		}
	}
	return false
}
