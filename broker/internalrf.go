package broker

// The replication factor of the internal topics (__consumer_offsets and __transaction_state)
// when one is first created. Kafka 4 refuses the FindCoordinator (COORDINATOR_NOT_AVAILABLE)
// until offsets.topic.replication.factor (or transaction.state.log.replication.factor) brokers
// are alive. weir instead creates the topic with one replica per unfenced broker registered at
// that moment, at most the configured factor, and logs a warning naming the key: a cluster of
// fewer brokers than the default 3 (two brokers, or a one-broker quorum) then has working
// groups and transactions out of the box, where Kafka's answer would leave them unusable
// until the key is lowered. A single broker (no controller.quorum.voters) uses 1 silently
// unless the key was set above 1. The replication factor can be raised later by a partition
// reassignment.

import "log/slog"

// internalTopicRF returns the replication factor to create internal topic name with, given its
// configured factor (key names the config key, for the warning).
func (b *Broker) internalTopicRF(name, key string, configured int) int {
	if !b.clustered() {
		if configured > 1 && b.cfgSet(key) {
			slog.Info("creating an internal topic with replication factor 1 on a single broker", "topic", name, key, configured)
		}
		return 1
	}
	live := len(b.ctl.Image().UnfencedBrokers())
	if live >= configured || live == 0 {
		return configured
	}
	slog.Warn("creating an internal topic with fewer replicas than configured: not enough live brokers; start every broker before the first client, or raise the replication factor later with a partition reassignment",
		"topic", name, key, configured, "live.brokers", live, "replication.factor", live)
	return live
}

// cfgSet reports whether a broker key was set (statically or dynamically).
func (b *Broker) cfgSet(key string) bool {
	_, src := b.cfg.Get(key)
	return src != "DEFAULT_CONFIG" && src != ""
}
