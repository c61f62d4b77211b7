package broker

import (
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
)

// maxPartitions bounds a topic's partition count (Kafka has no hard limit; this guards against
// a request that would create millions of directories).
const maxPartitions = 100000

// createTopic creates a topic with partitions (-1 = num.partitions) and config overrides.
// assignment, when given, must name only this broker. validateOnly checks without creating.
func (b *Broker) createTopic(name string, partitions int32, configs map[string]string, validateOnly *bool) (Topic, error) {
	if err := validTopicName(name); err != nil {
		return Topic{}, err
	}
	if partitions == -1 {
		partitions = int32(b.cfg.int64("num.partitions"))
	}
	if partitions <= 0 || partitions > maxPartitions {
		return Topic{}, fmt.Errorf("%d partitions: %w", partitions, kerr.InvalidPartitions)
	}
	for k, v := range configs {
		d, ok := topicDefs[k]
		if !ok {
			return Topic{}, fmt.Errorf("unknown topic config %s: %w", k, kerr.InvalidConfig)
		}
		if err := validateValue(d, v); err != nil {
			return Topic{}, fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
		}
	}
	b.topicMu.Lock()
	defer b.topicMu.Unlock()
	if _, exists := b.topics.get(name); exists {
		return Topic{}, fmt.Errorf("topic %s: %w", name, kerr.TopicAlreadyExists)
	}
	t := Topic{Name: name, ID: newTopicID(), Partitions: partitions, Configs: configs, Internal: name == "__consumer_offsets"}
	if validateOnly != nil && *validateOnly {
		return t, nil
	}
	if err := b.topics.put(t); err != nil {
		return Topic{}, fmt.Errorf("create topic %s: %v: %w", name, err, kerr.KafkaStorageError)
	}
	for p := int32(0); p < partitions; p++ {
		if _, err := b.ensureLog(t, p); err != nil {
			return Topic{}, fmt.Errorf("create topic %s partition %d: %v: %w", name, p, err, kerr.KafkaStorageError)
		}
	}
	slog.Info("created topic", "topic", name, "partitions", partitions, "configs", configs)
	return t, nil
}
