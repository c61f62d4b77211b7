package broker

import (
	"crypto/rand"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/controller"
)

// Topic is a topic's metadata, as of the broker's latest metadata image.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions int32
	// Configs are the topic's overrides. Shared with the image: never modify.
	Configs  map[string]string
	Internal bool
	// Assign holds each partition's replicas, ISR, leader and epochs.
	Assign []controller.PartitionInfo
}

// internalTopics are Kafka's internal topics (Topic.INTERNAL_TOPICS): the group coordinator's
// __consumer_offsets, the transaction coordinator's __transaction_state, and the share
// coordinator's __share_group_state (sharecoord.go). Clients cannot write to them (Produce,
// DeleteRecords), delete them, add partitions to them, or take compaction away from them; only
// the broker's own coordinators append, through the replica manager (groups.go: offsetsLog),
// never through the Produce handler. The rules and how they compare with Kafka: docs/cluster.md.
var internalTopics = map[string]bool{
	"__consumer_offsets":  true,
	"__transaction_state": true,
	"__share_group_state": true,
}

// isInternalTopic reports whether name is one of Kafka's internal topics.
func isInternalTopic(name string) bool { return internalTopics[name] }

// topicStore reads topics from the controller's metadata image (controller.Controller): the
// replicated metadata log, of which a single broker is a one-node quorum. Writes go through the
// controller (cluster.go).
type topicStore struct {
	ctl *controller.Controller
}

func topicFromImage(t *controller.TopicInfo) Topic {
	return Topic{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions)), Configs: t.Configs, Internal: t.Internal, Assign: t.Partitions}
}

func (s *topicStore) get(name string) (Topic, bool) {
	t, ok := s.ctl.Image().Topics[name]
	if !ok {
		return Topic{}, false
	}
	return topicFromImage(t), true
}

func (s *topicStore) getByID(id [16]byte) (Topic, bool) {
	t, ok := s.ctl.Image().TopicsByID[id]
	if !ok {
		return Topic{}, false
	}
	return topicFromImage(t), true
}

func (s *topicStore) all() []Topic {
	img := s.ctl.Image()
	out := make([]Topic, 0, len(img.Topics))
	for _, t := range img.Topics {
		out = append(out, topicFromImage(t))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func newTopicID() [16]byte {
	var id [16]byte
	for {
		_, _ = rand.Read(id[:])
		if id != ([16]byte{}) {
			return id
		}
	}
}

// validTopicName applies Kafka's rules: 1-249 characters of [a-zA-Z0-9._-], not "." or "..".
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("topic name %q is not legal: %w", name, kerr.InvalidTopicException)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("topic name %q contains %q: %w", name, r, kerr.InvalidTopicException)
		}
	}
	return nil
}
