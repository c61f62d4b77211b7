package broker

// DeleteTopics (key 20), v1-v6 (Kafka 4 removed v0). v0-v5 name topics in topic_names; v6 in
// topics, each by name or by id (not both: INVALID_REQUEST; neither: INVALID_REQUEST), and the
// response carries each topic's id. v5+ answers with error messages. A name or id given twice
// in one request is INVALID_REQUEST. With delete.topic.enable=false every topic fails with
// INVALID_REQUEST below v3 and TOPIC_DELETION_DISABLED from v3, as Kafka does. An unknown name is
// UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID. Internal topics (isInternalTopic)
// are refused with INVALID_TOPIC_EXCEPTION: Kafka 4's controller deletes __consumer_offsets when
// asked (only its CLI refuses), which loses every group's committed offsets at once (a "delete
// every topic" script is enough); weir refuses, as Kafka's CLI does. Deletion is
// synchronous: a tombstone of the topic id is stored in the metadata, the topic's metadata is
// removed (so it vanishes from Metadata and no new produce or fetch finds it), then every
// partition log is closed and its directory removed (renamed to a "-delete" name first, cut to
// fit 255 bytes for any legal topic name, so a crash during the removal never resurrects it), and
// the log dirs' checkpoints are rewritten without them. The metadata deletion is authoritative:
// a directory that could not be removed is not served, its removal is retried, and the answer
// for that topic is KAFKA_STORAGE_ERROR saying so; a directory of a deleted topic found at the
// next start (a crash before the rename, a broker that was down) is deleted as a stray
// (cluster.go: removeStrayLogs), never adopted again. Deletion holds topicMu throughout, so a topic of the same
// name cannot be created while its old directories are being renamed. timeout_ms is not
// needed: nothing is left to do asynchronously.

import (
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 20, min: 1, max: 6, handle: handleDeleteTopics})
}

// deleteTopicRef is one topic named in a DeleteTopics request: by name, or (v6) by id.
type deleteTopicRef struct {
	name *string
	id   [16]byte
}

func handleDeleteTopics(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	resp.SetVersion(r.Version)

	var refs []deleteTopicRef
	if r.Version >= 6 {
		for _, rt := range req.Topics {
			refs = append(refs, deleteTopicRef{name: rt.Topic, id: rt.TopicID})
		}
	} else {
		for i := range req.TopicNames {
			refs = append(refs, deleteTopicRef{name: &req.TopicNames[i]})
		}
	}
	names := map[string]int{}
	ids := map[[16]byte]int{}
	for _, ref := range refs {
		if ref.name != nil {
			names[*ref.name]++
		} else {
			ids[ref.id]++
		}
	}

	deleted := false
	mq := b.mutationQuota(r, r.Version >= 5) // controller_mutation_rate (quotas.go)
	for _, ref := range refs {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = ref.name, ref.id
		var err error
		switch {
		case ref.name != nil && ref.id != ([16]byte{}):
			err = fmt.Errorf("you may not specify both topic name and topic id: %w", kerr.InvalidRequest)
		case ref.name == nil && ref.id == ([16]byte{}):
			err = fmt.Errorf("neither topic name nor id were specified: %w", kerr.InvalidRequest)
		case ref.name != nil && names[*ref.name] > 1:
			err = fmt.Errorf("duplicate topic name %s: %w", *ref.name, kerr.InvalidRequest)
		case ref.name == nil && ids[ref.id] > 1:
			err = fmt.Errorf("duplicate topic id: %w", kerr.InvalidRequest)
		case !keyDeleteTopicEnable.Get(b.cfg) && r.Version < 3:
			err = fmt.Errorf("topic deletion is disabled (delete.topic.enable=false): %w", kerr.InvalidRequest)
		case !keyDeleteTopicEnable.Get(b.cfg):
			err = fmt.Errorf("topic deletion is disabled (delete.topic.enable=false): %w", kerr.TopicDeletionDisabled)
		case b.deleteTopicDenied(r, ref): // ACL: DELETE on the topic
			err = kerr.TopicAuthorizationFailed
		case mq.exceeded():
			err = errThrottlingQuotaExceeded
		default:
			var t Topic
			t, err = b.deleteTopic(ref)
			if err == nil {
				mq.record(t.Partitions)
				name := t.Name
				st.Topic, st.TopicID = &name, t.ID
			}
		}
		if err != nil {
			st.ErrorCode = errorCode(err)
			msg := err.Error()
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
		deleted = deleted || st.ErrorCode == 0
	}
	if deleted {
		// Drop the deleted partitions from the checkpoints now: a topic created again under the
		// same name must not inherit their recovery point or log start after a crash.
		if err := b.logs.Checkpoint(); err != nil {
			slog.Error("writing checkpoints after DeleteTopics", "err", err)
		}
	}
	rep := netio.Reply{Response: resp}
	mq.finish(&rep)
	return rep
}

// deleteTopic removes a topic's metadata, then its partition logs and their directories.
func (b *Broker) deleteTopic(ref deleteTopicRef) (Topic, error) {
	b.topicMu.Lock()
	defer b.topicMu.Unlock()
	var t Topic
	var ok bool
	if ref.name != nil {
		if t, ok = b.topicFresh(*ref.name); !ok {
			return Topic{}, fmt.Errorf("topic %s: %w", *ref.name, kerr.UnknownTopicOrPartition)
		}
	} else if t, ok = b.topicFreshByID(ref.id); !ok {
		return Topic{}, fmt.Errorf("topic id %x: %w", ref.id, kerr.UnknownTopicID)
	}
	// The controller removes the topic; every replica's broker deletes its logs when its image
	// no longer has the topic (replicas.go), this one before answering.
	if isInternalTopic(t.Name) {
		return Topic{}, fmt.Errorf("cannot delete internal topic %s: %w", t.Name, kerr.InvalidTopicException)
	}
	if err := b.deleteTopicMeta(t); err != nil {
		return Topic{}, err
	}
	var firstErr error
	for p := int32(0); p < t.Partitions; p++ {
		tp := engine.TopicPartition{Topic: t.Name, Partition: p}
		if err := b.logs.DeleteFailed(tp); err != nil {
			// The metadata deletion stands (the topic is gone from every broker's view and its
			// log is closed); the directory's removal is retried, and at the next start it is
			// deleted as a stray. Say so rather than answer success.
			firstErr = fmt.Errorf("topic %s is deleted, but the directory of partition %d could not be removed yet (retried): %v: %w", t.Name, p, err, kerr.KafkaStorageError)
			continue
		}
		if l, ok := b.logs.Log(tp); ok {
			if id, _ := b.logs.TopicID(engine.TopicPartition{Topic: t.Name, Partition: p}); id == t.ID {
				firstErr = fmt.Errorf("delete topic %s partition %d: log %s still open: %w", t.Name, p, l.Dir(), kerr.KafkaStorageError)
			}
		}
	}
	slog.Info("deleted topic", "topic", t.Name, "partitions", t.Partitions)
	return t, firstErr
}
