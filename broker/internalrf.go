package broker

// The replication factor of the internal topics (__consumer_offsets, __transaction_state and
// __share_group_state) when one is first created, as in Kafka 4: a cluster creates it with
// offsets.topic.replication.factor (transaction.state.log.replication.factor,
// share.coordinator.state.topic.replication.factor) replicas, never fewer. While fewer brokers
// are registered and unfenced, FindCoordinator, and every coordinator API that needs the topic,
// answer COORDINATOR_NOT_AVAILABLE: clients retry until enough brokers are up. Each broker
// decides so from its own metadata image (internalTopicAwaitsBrokers), without asking the
// controller; the controller, asked once the image has enough brokers, refuses the creation too
// (INVALID_REPLICATION_FACTOR) while its own image has fewer. A topic created with
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

// internalTopicAwaitsBrokers checks, in this broker's metadata image, whether internal topic
// name can be created with replication factor rf: if it does not exist and fewer brokers are
// registered and unfenced than rf, the controller would refuse it (INVALID_REPLICATION_FACTOR),
// so the answer is COORDINATOR_NOT_AVAILABLE (internalTopicUnavailable, with its rate-limited
// warning) without taking the creation lock or sending the controller a CreateTopic: every
// FindCoordinator, JoinGroup or InitProducerId asks while the cluster is short of brokers. Kafka
// checks its alive brokers the same way before asking its controller
// (AutoTopicCreationManager). An image that lags only delays the creation to a later request;
// the controller decides with its own image once this one has enough brokers.
func (b *Broker) internalTopicAwaitsBrokers(name, key string, rf int) error {
	img := b.ctl.Image()
	if _, exists := img.Topics[name]; exists {
		return nil
	}
	alive := 0
	for _, bi := range img.Brokers {
		if !bi.Fenced {
			alive++
		}
	}
	if alive >= rf {
		return nil
	}
	return b.internalTopicUnavailable(name, key, rf,
		fmt.Errorf("replication factor %d with %d available brokers in this broker's metadata: %w", rf, alive, kerr.InvalidReplicationFactor))
}

// internalRFWarnEvery bounds how often the wait for brokers is logged per internal topic (every
// FindCoordinator of every client asks again).
const internalRFWarnEvery = 30 * time.Second

// cfgSet reports whether a broker key was set (statically or dynamically).
func (b *Broker) cfgSet(key string) bool {
	_, src := b.cfg.Get(key)
	return src != "DEFAULT_CONFIG" && src != ""
}
