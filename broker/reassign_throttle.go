package broker

// Replication throttle config keys (KIP-73; their accessors are in configkeys.go): the broker rates leader.replication.throttled.rate
// and follower.replication.throttled.rate (dynamic, per broker), and the topic lists
// leader.replication.throttled.replicas and follower.replication.throttled.replicas with their
// validator. replicas.go turns them into each replica's throttle flags and the two quotas;
// 01_fetch.go (leader side) and replication/fetcher.go (follower side) enforce them.

import (
	"github.com/weir-mq/weir/replication"
)

// throttledReplicasValidator is Kafka's ThrottledReplicaListValidator: "*", or a list of
// partition:broker pairs.
type throttledReplicasValidator struct{}

func (throttledReplicasValidator) check(v string) error {
	_, err := replication.ParseThrottledReplicas(v)
	return err
}

func (throttledReplicasValidator) String() string {
	return "[partitionId]:[brokerId],[partitionId]:[brokerId],... or *"
}

// logDirCopyRate is replica.alter.log.dirs.io.max.bytes.per.second, the bound of the copies
// between this broker's log dirs (AlterReplicaLogDirs, logdirs.go: runMove), all moves together.
func (b *Broker) logDirCopyRate() int64 { return keyReplicaAlterLogDirsIOMaxBytes.Get(b.cfg) }
