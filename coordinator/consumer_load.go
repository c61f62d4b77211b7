package coordinator

import "time"

// consumerGroup is a KIP-848 consumer group's state (group.cg), owned by the group's goroutine.
type consumerGroup struct{}

// loadedConsumerGroup is what a partition's records say about one KIP-848 consumer group.
type loadedConsumerGroup struct{}

// replayConsumerRecord replays one KIP-848 consumer group record (key version v).
func (c *Coordinator) replayConsumerRecord(get func(id string) *loadedGroup, v int16, key, value []byte) bool {
	return false
}

// installConsumerGroup makes g the consumer group lc describes.
func (c *Coordinator) installConsumerGroup(g *group, lc *loadedConsumerGroup, now time.Time) {}
