package broker

// The replication factor of the internal topics (__consumer_offsets, __transaction_state and
// __share_group_state) when one is first created, as in Kafka 4: a cluster creates it with
// offsets.topic.replication.factor (transaction.state.log.replication.factor,
// share.coordinator.state.topic.replication.factor) replicas, never fewer. While fewer brokers
// are registered and unfenced, the controller refuses the creation (INVALID_REPLICATION_FACTOR)
// and FindCoordinator, and every coordinator API that needs the topic, answer
// COORDINATOR_NOT_AVAILABLE: clients retry until enough brokers are up. A topic created with
// fewer replicas would keep that lower durability for good (its replication factor is not
// raised when the brokers arrive), so a client arriving before the last broker must not decide
// it. A cluster of fewer brokers than the default 3 sets the keys to its size (weir dev-cluster
// does). A single broker (no controller.quorum.voters) can never have another replica: it uses
// replication factor 1, as Kafka's shipped single-node server.properties sets these keys to 1.

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// internalTopicRF returns the replication factor to create internal topic name with, given its
// configured factor (key names the config key, for the log).
func (b *Broker) internalTopicRF(name, key string, configured int) int {
	if !b.clustered() {
		if configured > 1 && b.cfgSet(key) {
			slog.Info("creating an internal topic with replication factor 1 on a single broker", "topic", name, key, configured)
		}
		return 1
	}
	return configured
}

// internalTopicUnavailable turns a failure to create internal topic name into
// COORDINATOR_NOT_AVAILABLE, logging (at most once per internalRFWarnEvery per topic) when it is
// for want of brokers.
func (b *Broker) internalTopicUnavailable(name, key string, rf int, err error) error {
	if errors.Is(err, kerr.InvalidReplicationFactor) {
		now := time.Now()
		b.internalRFWarn.mu.Lock()
		last, warned := b.internalRFWarn.last[name]
		warn := !warned || now.Sub(last) >= internalRFWarnEvery
		if warn {
			if b.internalRFWarn.last == nil {
				b.internalRFWarn.last = map[string]time.Time{}
			}
			b.internalRFWarn.last[name] = now
		}
		b.internalRFWarn.mu.Unlock()
		if warn {
			slog.Warn("not creating an internal topic yet: fewer brokers are registered and unfenced than its replication factor; its coordinator is unavailable until they are (or lower the key to the cluster's size)",
				"topic", name, key, rf, "live.brokers", len(b.ctl.Image().UnfencedBrokers()), "err", err)
		}
	}
	return fmt.Errorf("creating %s: %v: %w", name, err, kerr.CoordinatorNotAvailable)
}

// internalRFWarnEvery bounds how often the wait for brokers is logged per internal topic (every
// FindCoordinator of every client asks again).
const internalRFWarnEvery = 30 * time.Second

// cfgSet reports whether a broker key was set (statically or dynamically).
func (b *Broker) cfgSet(key string) bool {
	_, src := b.cfg.Get(key)
	return src != "DEFAULT_CONFIG" && src != ""
}
