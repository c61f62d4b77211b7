package broker

// Wiring of KIP-932 share groups into the group coordinator: the group.share.* keys, the topic
// table share groups subscribe from, and the one share-partition state persister the group
// coordinator (initialize, delete, offsets admin) and the share-partition leaders share.

import (
	"fmt"

	"github.com/weir-mq/weir/coordinator"
)

// shareTopics is coordinator.ShareTopics over the broker's topic table.
type shareTopics struct{ b *Broker }

func (s shareTopics) TopicByName(name string) (coordinator.ShareTopic, bool) {
	t, ok := s.b.topics.get(name)
	if !ok {
		return coordinator.ShareTopic{}, false
	}
	return coordinator.ShareTopic{ID: t.ID, Name: t.Name, Partitions: t.Partitions}, true
}

func (s shareTopics) TopicByID(id [16]byte) (coordinator.ShareTopic, bool) {
	t, ok := s.b.topics.getByID(id)
	if !ok {
		return coordinator.ShareTopic{}, false
	}
	return coordinator.ShareTopic{ID: t.ID, Name: t.Name, Partitions: t.Partitions}, true
}

// shareGroupConfig checks the group.share.* keys against each other as Kafka's
// GroupCoordinatorConfig does and returns the coordinator's share group configuration.
func (b *Broker) shareGroupConfig() (coordinator.ShareConfig, error) {
	sess, sessMin, sessMax := keyGroupShareSessionTimeout.Get(b.cfg), keyGroupShareMinSessionTimeout.Get(b.cfg), keyGroupShareMaxSessionTimeout.Get(b.cfg)
	hb, hbMin, hbMax := keyGroupShareHeartbeatInterval.Get(b.cfg), keyGroupShareMinHeartbeatInterval.Get(b.cfg), keyGroupShareMaxHeartbeatInterval.Get(b.cfg)
	switch {
	case sessMax < sessMin:
		return coordinator.ShareConfig{}, fmt.Errorf("group.share.max.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms")
	case sess < sessMin:
		return coordinator.ShareConfig{}, fmt.Errorf("group.share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms")
	case sess > sessMax:
		return coordinator.ShareConfig{}, fmt.Errorf("group.share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms")
	case hbMax < hbMin:
		return coordinator.ShareConfig{}, fmt.Errorf("group.share.max.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms")
	case hb < hbMin:
		return coordinator.ShareConfig{}, fmt.Errorf("group.share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms")
	case hb > hbMax:
		return coordinator.ShareConfig{}, fmt.Errorf("group.share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms")
	case hb >= sess:
		return coordinator.ShareConfig{}, fmt.Errorf("group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")
	}
	return coordinator.ShareConfig{
		SessionTimeout:    sess,
		HeartbeatInterval: hb,
		MaxSize:           keyGroupShareMaxSize.Get(b.cfg),
		Topics:            shareTopics{b: b},
		Persister:         b.groups.sharePersister,
		GroupConfig:       b.groupConfigValue,
	}, nil
}
