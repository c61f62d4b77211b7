package coordinator

import "time"

// shareGroup is a KIP-932 share group's state (group.sg), owned by the group's goroutine.
type shareGroup struct{}

// loadedShareGroup is what a partition's records say about one share group.
type loadedShareGroup struct{}

// replayShareRecord replays one share group record (key version v).
func (c *Coordinator) replayShareRecord(get func(id string) *loadedGroup, v int16, key, value []byte) bool {
	return false
}

// installShareGroup makes g the share group ls describes.
func (c *Coordinator) installShareGroup(g *group, ls *loadedShareGroup, now time.Time) {}
