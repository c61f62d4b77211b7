// Package coordinator will own consumer groups: the group state machine (one goroutine per
// group), membership, generations and assignments, and committed offsets stored durably in the
// internal __consumer_offsets topic.
package coordinator
