// Package replication will own clustering: the controller's metadata log on an established Raft
// library, partition leadership and leader epochs, follower fetchers, the ISR and the high
// watermark, and acks=all waiting.
package replication
