package broker

// The broker's side of the cluster metadata: starting the controller (package replication: the
// metadata log on hashicorp/raft; a broker with no controller.quorum.voters is a one-node
// quorum), and topic changes written through it. Every broker applies the same metadata log and
// answers Metadata from its own image; the replica manager (replicas.go) turns image changes
// into logs, leaderships and follower fetchers.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/internal/faultctl"
	"github.com/weir-mq/weir/vfs"
)

// clustered reports whether this broker is part of a multi-broker quorum configuration.
func (b *Broker) clustered() bool { return keyControllerQuorumVoters.Get(b.cfg) != "" }

// startController starts the controller with this broker's advertised listeners and waits until
// this broker is registered (a quorum is reachable).
func (b *Broker) startController(adv []ListenerSpec) error {
	voters, err := controller.ParseVoters(keyControllerQuorumVoters.Get(b.cfg))
	if err != nil {
		return fmt.Errorf("controller.quorum.voters: %w", err)
	}
	dir := keyMetadataLogDir.Get(b.cfg)
	if dir == "" {
		dir = b.cfg.LogDirs()[0]
	}
	var portSec *controller.PortSecurity
	if len(voters) > 0 {
		if portSec, err = controllerPortSecurity(b.cfg); err != nil {
			return err
		}
		if err := checkControllerExposure(b.cfg, portSec); err != nil {
			return err
		}
		logControllerSecurity(b.cfg, portSec)
	}
	var eps []controller.Endpoint
	for _, a := range adv {
		eps = append(eps, controller.Endpoint{Name: a.Name, Host: a.Host, Port: int32(a.Port)})
	}
	ctl, err := controller.Start(controller.Config{
		NodeID:            b.nodeID,
		Voters:            voters,
		Addr:              keyControllerListener.Get(b.cfg),
		Dir:               filepath.Join(dir, "weir-metadata"),
		ClusterID:         b.clusterID,
		Endpoints:         eps,
		SessionTimeout:    keyBrokerSessionTimeout.Get(b.cfg),
		HeartbeatInterval: keyBrokerHeartbeatInterval.Get(b.cfg),
		UncleanLeaderElection: func(topic string) bool {
			t, _ := b.topics.get(topic)
			return keyUncleanLeaderElectionEnable.Topic(b.cfg, t.Configs)
		},
		Logger:   slog.Default(),
		Security: portSec,
		// Leader balance (controller/elect.go).
		AutoLeaderRebalance:                keyAutoLeaderRebalanceEnable.Get(b.cfg),
		LeaderImbalanceCheckInterval:       time.Duration(min(keyLeaderImbalanceCheckInterval.Get(b.cfg), int64(math.MaxInt64/time.Second))) * time.Second,
		LeaderImbalancePerBrokerPercentage: keyLeaderImbalancePerBrokerPercentage.Get(b.cfg),
		Rack:                               keyBrokerRack.Get(b.cfg), // racks.go
	})
	if err != nil {
		return fmt.Errorf("start controller: %w", err)
	}
	b.ctl = ctl
	b.topics = &topicStore{ctl: ctl}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := ctl.WaitReady(ctx); err != nil {
		ctl.Close()
		return fmt.Errorf("waiting for the metadata quorum (controller.quorum.voters=%q): %w", keyControllerQuorumVoters.Get(b.cfg), err)
	}
	if id := ctl.Image().ClusterID; id != "" && id != b.clusterID {
		if keyClusterID.Get(b.cfg) != "" {
			ctl.Close()
			return fmt.Errorf("cluster.id is %s but the metadata quorum's cluster id is %s", keyClusterID.Get(b.cfg), id)
		}
		// The quorum's first controller chose the id: take it (and keep it in meta.properties).
		slog.Info("taking the metadata quorum's cluster id", "cluster.id", id, "was", b.clusterID)
		if err := rewriteClusterID(b.cfg.LogDirs(), id); err != nil {
			ctl.Close()
			return err
		}
		b.clusterID = id
	}
	return nil
}

// rewriteClusterID replaces cluster.id in every log dir's meta.properties.
func rewriteClusterID(dirs []string, id string) error {
	for _, d := range dirs {
		p := filepath.Join(d, "meta.properties")
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		lines := strings.Split(string(data), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "cluster.id=") {
				lines[i] = "cluster.id=" + id
			}
		}
		if err := vfs.WriteFileAtomic(faultctl.FS(vfs.OS), p, []byte(strings.Join(lines, "\n"))); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

// requestCtx bounds a request to the controller.
func (b *Broker) requestCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), keyRequestTimeout.Get(b.cfg))
}

// waitImage waits until the local image satisfies ok (a change this broker asked the
// controller for has been applied here), then reconciles the local replicas with it.
func (b *Broker) waitImage(ctx context.Context, ok func(img *controller.Image) bool) error {
	for {
		ch := b.ctl.Changed()
		if ok(b.ctl.Image()) {
			b.rm.reconcile()
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("metadata change not applied locally: %w", kerr.RequestTimedOut)
		}
	}
}

// createTopic creates a topic with partitions (-1 = num.partitions), a replication factor (-1 =
// default.replication.factor) or an explicit assignment, and config overrides. validateOnly
// checks without creating.
func (b *Broker) createTopic(name string, partitions int32, rf int16, assignment [][]int32, configs map[string]string, validateOnly *bool) (Topic, error) {
	if err := validTopicName(name); err != nil {
		return Topic{}, err
	}
	if name == "__cluster_metadata" { // Kafka's metadata log's name (ControllerApis refuses it too)
		return Topic{}, fmt.Errorf("Creation of internal topic __cluster_metadata is prohibited.: %w", kerr.InvalidRequest)
	}
	if len(assignment) > 0 {
		partitions = int32(len(assignment))
	}
	if partitions == -1 {
		partitions = int32(keyNumPartitions.Get(b.cfg))
	}
	if partitions <= 0 || partitions > maxPartitions {
		return Topic{}, fmt.Errorf("%d partitions: %w", partitions, kerr.InvalidPartitions)
	}
	if rf == -1 {
		rf = int16(keyDefaultReplicationFactor.Get(b.cfg))
		if name == offsetsTopic {
			rf = int16(b.internalTopicRF(name, "offsets.topic.replication.factor", keyOffsetsTopicReplicationFactor.Get(b.cfg)))
		}
	}
	if isInternalTopic(name) {
		// An internal topic is compacted: a client creating one (Kafka 4 allows it) gets
		// cleanup.policy=compact unless it asked for another policy, which is refused.
		configs = maps.Clone(configs)
		if configs == nil {
			configs = map[string]string{}
		}
		if _, ok := configs["cleanup.policy"]; !ok {
			configs["cleanup.policy"] = "compact"
		}
		if err := b.checkInternalTopicConfigs(name, configs); err != nil {
			return Topic{}, err
		}
	}
	for k, v := range configs {
		d, ok := topicDefs[k]
		if !ok {
			return Topic{}, fmt.Errorf("unknown topic config %s: %w", k, kerr.InvalidConfig)
		}
		if err := validateValue(d, v); err != nil {
			return Topic{}, fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
		}
	}
	if err := b.cfg.checkTopicCombination(configs); err != nil {
		return Topic{}, err
	}
	// Refused here, before the controller is asked, when this broker's share of the replicas
	// would not fit its descriptor and mapping budget (each replica checks again as it creates
	// its log).
	// A topic that exists is left to the controller's TOPIC_ALREADY_EXISTS ("create if absent"
	// clients rely on it, budget or not).
	if _, exists := b.ctl.Image().Topics[name]; !exists {
		if err := b.checkPartitionBudget(b.localReplicas(partitions, rf, assignment)); err != nil {
			return Topic{}, fmt.Errorf("topic %s: %w", name, err)
		}
	}
	vo := validateOnly != nil && *validateOnly
	ctx, cancel := b.requestCtx()
	defer cancel()
	info, err := b.ctl.CreateTopic(ctx, controller.CreateTopicRequest{
		Name: name, Partitions: partitions, ReplicationFactor: rf, Assignment: assignment,
		Configs: configs, Internal: isInternalTopic(name), ValidateOnly: vo,
	})
	if err != nil {
		return Topic{}, err
	}
	t := topicFromImage(&info)
	if vo {
		return t, nil
	}
	if err := b.waitImage(ctx, func(img *controller.Image) bool {
		it, ok := img.Topics[name]
		return ok && it.ID == info.ID
	}); err != nil {
		return Topic{}, err
	}
	slog.Info("created topic", "topic", name, "partitions", partitions, "replication.factor", len(info.Partitions[0].Replicas), "configs", configs)
	return t, nil
}

// deleteTopicMeta removes a topic through the controller and waits for its local logs to go.
func (b *Broker) deleteTopicMeta(t Topic) error {
	ctx, cancel := b.requestCtx()
	defer cancel()
	// The tombstone first: a partition directory of this topic id found later (a removal that
	// failed, a broker that was down) is then known to be deleted, never adopted again.
	if err := b.ctl.PutRecords(ctx, deletedTopicKind, map[string]string{hex.EncodeToString(t.ID[:]): t.Name}, nil); err != nil {
		return fmt.Errorf("recording the deletion of topic %s: %w", t.Name, err)
	}
	if err := b.ctl.DeleteTopic(ctx, t.Name); err != nil {
		return err
	}
	return b.waitImage(ctx, func(img *controller.Image) bool {
		_, ok := img.TopicsByID[t.ID]
		return !ok
	})
}

// checkAssignment checks a replica list against the registered brokers.
func (b *Broker) checkAssignment(partition int32, replicas []int32) error {
	if len(replicas) == 0 {
		return fmt.Errorf("assignment of partition %d is an empty replica list: %w", partition, kerr.InvalidReplicaAssignment)
	}
	img := b.ctl.Image()
	seen := map[int32]bool{}
	for _, id := range replicas {
		if _, ok := img.Brokers[id]; !ok {
			return fmt.Errorf("assignment of partition %d names broker %d, but no such broker is registered: %w", partition, id, kerr.InvalidReplicaAssignment)
		}
		if seen[id] {
			return fmt.Errorf("assignment of partition %d names broker %d twice: %w", partition, id, kerr.InvalidReplicaAssignment)
		}
		seen[id] = true
	}
	return nil
}

// brokerAddr returns broker id's address on listener (or its first one).
func (b *Broker) brokerAddr(img *controller.Image, id int32, listener string) (controller.Endpoint, bool) {
	bi, ok := img.Brokers[id]
	if !ok || len(bi.Endpoints) == 0 {
		return controller.Endpoint{}, false
	}
	for _, e := range bi.Endpoints {
		if e.Name == listener {
			return e, true
		}
	}
	return bi.Endpoints[0], true
}

// replicaAddr is the fetchers' resolver: a leader's advertised address on the inter-broker
// listener (interbroker.go). A leader that does not advertise that listener has no address
// (another listener would speak another security protocol).
func (b *Broker) replicaAddr(id int32) (string, bool) {
	name := b.interBroker.Listener
	if name == "" {
		name = b.advertisedFor("").Name
	}
	bi, ok := b.ctl.Image().Brokers[id]
	if !ok {
		return "", false
	}
	i := slices.IndexFunc(bi.Endpoints, func(e controller.Endpoint) bool { return e.Name == name })
	if i < 0 {
		return "", false
	}
	e := bi.Endpoints[i]
	host := e.Host
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, fmt.Sprint(e.Port)), true
}

// deletedTopicKind is the metadata record kind of deleted topics' tombstones: key the topic id
// in hex, value the name. They are kept (a few dozen bytes per deleted topic) so that a
// partition directory of a deleted topic is recognised whenever it shows up.
const deletedTopicKind = controller.RecordKindDeletedTopic

// removeStrayLogs runs at start, before adoptOrphanLogs: a partition log whose topic id
// (partition.metadata) is not in the metadata image is a stray. It is deleted when the topic
// is known to be deleted (a tombstone, or the name now belongs to a topic with another id);
// otherwise a cluster member moves it aside ("-stray", as Kafka 4 does with stray logs: not
// served, kept for an operator), and a single broker adopts it (adoptOrphanLogs: a log dir
// written by Kafka). A deleted topic's data is thus never served again nor resurrected, even
// when its directory could not be removed at deletion time.
func (b *Broker) removeStrayLogs() {
	img := b.ctl.Image()
	tombs := img.Records[deletedTopicKind]
	for tp := range b.logs.Logs() {
		id, ok := b.logs.TopicID(tp)
		if !ok || id == ([16]byte{}) {
			continue
		}
		if _, live := img.TopicsByID[id]; live {
			continue
		}
		_, tombstoned := tombs[hex.EncodeToString(id[:])]
		_, reused := img.Topics[tp.Topic]
		switch {
		case tombstoned || reused:
			slog.Info("deleting the partition log of a deleted topic", "topic", tp.Topic, "partition", tp.Partition, "topic_id", hex.EncodeToString(id[:]))
			if err := b.logs.DeleteLog(tp); err != nil {
				slog.Error("deleting the partition log of a deleted topic (retried)", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
		case b.clustered():
			if err := b.logs.MoveAsideLog(tp); err != nil {
				slog.Error("moving a stray partition log aside", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
		}
	}
}

// adoptOrphanLogs handles partition logs with no topic in the image (after removeStrayLogs): a
// single broker adopts them as topics (a log dir written by Kafka, or from before the metadata
// log); a cluster member leaves the ones without a topic id alone and logs them (an operator
// decides).
func (b *Broker) adoptOrphanLogs() error {
	b.removeStrayLogs()
	counts := map[string]int32{}
	for tp := range b.logs.Logs() {
		if tp.Partition+1 > counts[tp.Topic] {
			counts[tp.Topic] = tp.Partition + 1
		}
	}
	for name, n := range counts {
		if _, ok := b.topics.get(name); ok {
			continue
		}
		if b.clustered() {
			slog.Warn("partition logs of a topic the cluster does not know; left in place", "topic", name, "partitions", n)
			continue
		}
		id, ok := b.logs.TopicID(engine.TopicPartition{Topic: name, Partition: 0})
		if !ok {
			id = newTopicID()
		}
		slog.Info("adopting partition logs without topic metadata", "topic", name, "partitions", n)
		assign := make([][]int32, n)
		for i := range assign {
			assign[i] = []int32{b.nodeID}
		}
		ctx, cancel := b.requestCtx()
		_, err := b.ctl.CreateTopic(ctx, controller.CreateTopicRequest{Name: name, ID: id, Partitions: n, ReplicationFactor: 1,
			Assignment: assign, Internal: isInternalTopic(name)})
		cancel()
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("adopt topic %s: %w", name, err)
		}
	}
	return nil
}

// allocateProducerIDs reserves a block of producer ids from the controller.
func (b *Broker) allocateProducerIDs(n int64) (int64, error) {
	ctx, cancel := b.requestCtx()
	defer cancel()
	return b.ctl.AllocateProducerIDs(ctx, n)
}

// topicFresh is topics.get for admin requests: a topic missing from this broker's image is looked
// up again after catching up with the controller, so a topic created or changed through another
// broker a moment ago is found (the hot paths, produce and fetch, do not wait).
func (b *Broker) topicFresh(name string) (Topic, bool) {
	if t, ok := b.topics.get(name); ok || !b.clustered() {
		return t, ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.ctl.Sync(ctx); err != nil {
		return Topic{}, false
	}
	return b.topics.get(name)
}

// topicFreshByID is topicFresh by topic id.
func (b *Broker) topicFreshByID(id [16]byte) (Topic, bool) {
	if t, ok := b.topics.getByID(id); ok || !b.clustered() {
		return t, ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.ctl.Sync(ctx); err != nil {
		return Topic{}, false
	}
	return b.topics.getByID(id)
}
