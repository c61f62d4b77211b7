package broker

// Wiring points between the share-group parts (KIP-932): the persister of share-partition
// state (package sharestate; the share coordinator's over __share_group_state replaces the
// in-memory one here) and group-level dynamic configs (share.auto.offset.reset,
// share.record.lock.duration.ms, ...).

import "github.com/weir-mq/weir/sharestate"

// newSharePersister returns the persister the share-partition leaders use: the share
// coordinator over __share_group_state, here or on the broker leading the key's partition
// (sharecoord.go).
func (b *Broker) newSharePersister() sharestate.Persister { return &sharePersister{b: b} }

// groupConfigValue returns group's dynamic config key (IncrementalAlterConfigs on a GROUP
// resource), ok false when it is not set for that group (the broker default applies).
func (b *Broker) groupConfigValue(group, key string) (string, bool) { return b.groupConfig(group, key) }
