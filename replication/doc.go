// Package replication will own clustering: the controller's metadata log on an established Raft
// library, partition leadership and leader epochs, follower fetchers, the ISR and the high
// watermark, and acks=all waiting.
//
// The controller's store under its directory (raft.db from raft-boltdb, snapshots from hashicorp/
// raft's FileSnapshotStore, which hold SCRAM credentials) is private to the broker's user: the
// directory is 0700 and snapshot directories and files are chmodded 0700/0600 as each snapshot
// completes (snapshotmode.go).
package replication
