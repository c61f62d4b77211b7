package controller

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Endpoint is an advertised Kafka listener of a broker.
type Endpoint struct {
	Name string
	Host string
	Port int32
}

// BrokerInfo is a registered broker as the controller sees it.
type BrokerInfo struct {
	ID        int32
	Endpoints []Endpoint
	// Fenced is true when the broker missed its session timeout, shut down (controlled), or has not
	// re-registered since it was fenced. A fenced broker leads nothing and joins no ISR.
	Fenced bool
	// Epoch is the registration epoch: the raft index of the broker's latest registration.
	Epoch int64
	// Principal is the authenticated principal that registered this broker id on a secured
	// controller port; only it may heartbeat, re-register, shut down or alter partitions for the
	// id. Empty on a PLAINTEXT port (and for registrations from before the port was secured).
	Principal string `json:",omitempty"`
	// Incarnation is the id of the broker process of the latest registration (random per start).
	Incarnation string `json:",omitempty"`
	// Racks (issue 14): Rack is the broker's broker.rack, "" when it has none (Kafka's null).
	Rack string `json:",omitempty"`
}

// PartitionInfo is the controller's view of one partition.
type PartitionInfo struct {
	Replicas       []int32
	ISR            []int32
	Leader         int32 // -1: no leader
	LeaderEpoch    int32
	PartitionEpoch int32 // bumped on every change of this partition (leader or ISR)
}

// TopicInfo is one topic of the image.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Configs    map[string]string
	Internal   bool
	Partitions []PartitionInfo
}

// Image is an immutable snapshot of the cluster metadata. It is never mutated after publication:
// every applied command produces a new Image that shares unchanged parts with the previous one.
// Readers must not modify anything reachable from an Image.
type Image struct {
	Index uint64 // raft index it reflects
	// ClusterID is the cluster's id, fixed by the first controller ever elected (its
	// Config.ClusterID, or a generated one). Empty until then.
	ClusterID      string
	Brokers        map[int32]BrokerInfo
	Topics         map[string]*TopicInfo
	TopicsByID     map[[16]byte]*TopicInfo
	NextProducerID int64
	// Records are small keyed values other packages keep in the metadata log (ACL bindings,
	// SCRAM credentials), by kind then key. Values are opaque strings (JSON by convention).
	Records map[string]map[string]string
	// RecordsIndex is the version of each kind's records: the raft index of the command that
	// last changed them (a snapshot's index for what a snapshot restored). Equal versions mean
	// equal records, so a consumer can keep what it derived from one kind's records (the ACL
	// authorizer) across images until that kind's version moves. A kind never written is 0.
	RecordsIndex map[string]uint64
}

// firstProducerID is the NextProducerID of an empty image.
const firstProducerID = 1000

func newImage(clusterID string) *Image {
	return &Image{
		ClusterID:      clusterID,
		Brokers:        map[int32]BrokerInfo{},
		Topics:         map[string]*TopicInfo{},
		TopicsByID:     map[[16]byte]*TopicInfo{},
		NextProducerID: firstProducerID,
		Records:        map[string]map[string]string{},
		RecordsIndex:   map[string]uint64{},
	}
}

// UnfencedBrokers returns the sorted ids of the registered, unfenced brokers.
func (img *Image) UnfencedBrokers() []int32 {
	ids := make([]int32, 0, len(img.Brokers))
	for id, b := range img.Brokers {
		if !b.Fenced {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func (img *Image) alive(id int32) bool {
	b, ok := img.Brokers[id]
	return ok && !b.Fenced
}

// ---- commands ----

// Command operations applied by the FSM.
const (
	opRegister         = "register"
	opFence            = "fence"
	opUnfence          = "unfence"
	opControlledStop   = "controlled_shutdown"
	opCreateTopic      = "create_topic"
	opDeleteTopic      = "delete_topic"
	opCreatePartitions = "create_partitions"
	opAlterConfigs     = "alter_configs"
	opAlterPartition   = "alter_partition"
	opAllocPIDs        = "alloc_pids"
	opInitCluster      = "init_cluster"
	opPutRecords       = "put_records"
	opElectLeaders     = "elect_leaders" // leader election and balance (elect.go)
)

// command is one entry of the metadata log. Everything non-deterministic (placement, random
// starts, topic ids, the unclean-election setting of topics) is decided by the proposer and
// carried in the command, so that every node applies it to the same image.
type command struct {
	Op         string                 `json:"op"`
	BrokerID   int32                  `json:"broker,omitempty"`
	Endpoints  []Endpoint             `json:"endpoints,omitempty"`
	Topic      *TopicInfo             `json:"topic,omitempty"`
	Name       string                 `json:"name,omitempty"`
	Base       int32                  `json:"base,omitempty"`
	Partitions []PartitionInfo        `json:"partitions,omitempty"`
	Configs    map[string]string      `json:"configs,omitempty"`
	Alter      *AlterPartitionRequest `json:"alter,omitempty"`
	N          int64                  `json:"n,omitempty"`
	Unclean    []string               `json:"unclean,omitempty"`
	ClusterID  string                 `json:"cluster_id,omitempty"`
	Kind       string                 `json:"kind,omitempty"`
	Puts       map[string]string      `json:"puts,omitempty"`
	Deletes    []string               `json:"deletes,omitempty"`
	// Principal and Incarnation of a registration (BrokerInfo).
	Principal   string `json:"principal,omitempty"`
	Incarnation string `json:"incarnation,omitempty"`
	// Leader election and balance (elect.go): the leader changes of an elect_leaders command.
	Elect []leaderChange `json:"elect,omitempty"`
	// Racks (issue 14): the rack of a registration (BrokerInfo.Rack).
	Rack string `json:"rack,omitempty"`
}

// applyResult is what the FSM returns for a command (seen by the proposer on the raft leader).
type applyResult struct {
	err       error
	index     uint64 // index of the image this command produced; 0 if the image did not change
	topic     *TopicInfo
	partition *PartitionInfo
	first     int64
	epoch     int64
}

// builder applies a command copy-on-write.
type builder struct {
	old, img *Image
	copied   map[string]bool
	changed  bool
}

func newBuilder(old *Image) *builder {
	img := *old
	img.Brokers = make(map[int32]BrokerInfo, len(old.Brokers)+1)
	for k, v := range old.Brokers {
		img.Brokers[k] = v
	}
	img.Topics = make(map[string]*TopicInfo, len(old.Topics)+1)
	for k, v := range old.Topics {
		img.Topics[k] = v
	}
	img.TopicsByID = make(map[[16]byte]*TopicInfo, len(old.TopicsByID)+1)
	for k, v := range old.TopicsByID {
		img.TopicsByID[k] = v
	}
	return &builder{old: old, img: &img, copied: map[string]bool{}}
}

// mutTopic returns a private copy of topic name that may be modified (its Partitions slice is
// copied; the slices inside each PartitionInfo must be replaced, never modified in place).
func (b *builder) mutTopic(name string) *TopicInfo {
	t := b.img.Topics[name]
	if t == nil {
		return nil
	}
	if b.copied[name] {
		return t
	}
	nt := *t
	nt.Partitions = slices.Clone(t.Partitions)
	b.img.Topics[name] = &nt
	b.img.TopicsByID[nt.ID] = &nt
	b.copied[name] = true
	return &nt
}

func sortedTopicNames(m map[string]*TopicInfo) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func without(s []int32, id int32) []int32 {
	out := make([]int32, 0, len(s))
	for _, v := range s {
		if v != id {
			out = append(out, v)
		}
	}
	return out
}

// electLeader returns the first replica (in Replicas order) that is in the ISR and alive, or -1.
func electLeader(img *Image, p *PartitionInfo) int32 {
	for _, r := range p.Replicas {
		if slices.Contains(p.ISR, r) && img.alive(r) {
			return r
		}
	}
	return -1
}

func firstAliveReplica(img *Image, p *PartitionInfo) int32 {
	for _, r := range p.Replicas {
		if img.alive(r) {
			return r
		}
	}
	return -1
}

// fence marks id fenced, removes it from every ISR it is in (unless it is the last member) and
// moves the leadership of every partition it leads to an eligible ISR member (or to no leader, or
// with unclean election to any live replica).
func (b *builder) fence(id int32, unclean map[string]bool) {
	bi, ok := b.img.Brokers[id]
	if !ok {
		return
	}
	if !bi.Fenced {
		bi.Fenced = true
		b.img.Brokers[id] = bi
		b.changed = true
	}
	for _, name := range sortedTopicNames(b.img.Topics) {
		t := b.img.Topics[name]
		for i := range t.Partitions {
			p := t.Partitions[i]
			if !slices.Contains(p.Replicas, id) {
				continue
			}
			changed := false
			if slices.Contains(p.ISR, id) && len(p.ISR) > 1 {
				p.ISR = without(p.ISR, id)
				changed = true
			}
			if p.Leader == id {
				nl := electLeader(b.img, &p)
				if nl < 0 && unclean[name] {
					if nl = firstAliveReplica(b.img, &p); nl >= 0 {
						p.ISR = []int32{nl}
					}
				}
				p.Leader = nl
				p.LeaderEpoch++
				changed = true
			}
			if changed {
				p.PartitionEpoch++
				b.mutTopic(name).Partitions[i] = p
				b.changed = true
			}
		}
	}
}

// unfence marks id unfenced and makes it the leader of every leaderless partition whose ISR
// contains it (or, with unclean election, of which it is a replica).
func (b *builder) unfence(id int32, unclean map[string]bool) {
	bi, ok := b.img.Brokers[id]
	if !ok {
		return
	}
	if bi.Fenced {
		bi.Fenced = false
		b.img.Brokers[id] = bi
		b.changed = true
	}
	for _, name := range sortedTopicNames(b.img.Topics) {
		t := b.img.Topics[name]
		for i := range t.Partitions {
			p := t.Partitions[i]
			if p.Leader >= 0 || !slices.Contains(p.Replicas, id) {
				continue
			}
			switch {
			case slices.Contains(p.ISR, id):
			case unclean[name]:
				p.ISR = []int32{id}
			default:
				continue
			}
			p.Leader = id
			p.LeaderEpoch++
			p.PartitionEpoch++
			b.mutTopic(name).Partitions[i] = p
			b.changed = true
		}
	}
}

func toSet(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func kerrf(e *kerr.Error, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), e)
}

// apply applies cmd at raft index to old and returns the new image (nil if nothing changed) and
// the result. It is deterministic: it depends only on old, index and cmd.
func apply(old *Image, index uint64, cmd *command) (*Image, *applyResult) {
	b := newBuilder(old)
	res := &applyResult{index: index}
	switch cmd.Op {
	case opRegister:
		prev, existed := b.img.Brokers[cmd.BrokerID]
		bi := BrokerInfo{ID: cmd.BrokerID, Endpoints: slices.Clone(cmd.Endpoints), Fenced: true, Epoch: int64(index),
			Principal: cmd.Principal, Incarnation: cmd.Incarnation}
		bi.Rack = cmd.Rack // racks (issue 14)
		if existed {
			bi.Fenced = prev.Fenced
		}
		b.img.Brokers[cmd.BrokerID] = bi
		b.changed = true
		b.unfence(cmd.BrokerID, toSet(cmd.Unclean))
		res.epoch = int64(index)
	case opFence:
		b.fence(cmd.BrokerID, toSet(cmd.Unclean))
	case opControlledStop:
		if _, ok := b.img.Brokers[cmd.BrokerID]; !ok {
			res.err = kerrf(kerr.BrokerNotAvailable, "broker %d is not registered", cmd.BrokerID)
			break
		}
		b.fence(cmd.BrokerID, nil)
	case opUnfence:
		if _, ok := b.img.Brokers[cmd.BrokerID]; !ok {
			res.err = kerrf(kerr.BrokerNotAvailable, "broker %d is not registered", cmd.BrokerID)
			break
		}
		b.unfence(cmd.BrokerID, toSet(cmd.Unclean))
	case opCreateTopic:
		t := cmd.Topic
		if t == nil || t.Name == "" {
			res.err = kerrf(kerr.InvalidRequest, "create topic without a topic")
			break
		}
		if _, ok := b.img.Topics[t.Name]; ok {
			res.err = kerrf(kerr.TopicAlreadyExists, "topic %q", t.Name)
			break
		}
		if _, ok := b.img.TopicsByID[t.ID]; ok {
			res.err = kerrf(kerr.TopicAlreadyExists, "topic id of %q already in use", t.Name)
			break
		}
		nt := cloneTopic(t)
		b.img.Topics[nt.Name] = nt
		b.img.TopicsByID[nt.ID] = nt
		b.changed = true
		res.topic = nt
	case opDeleteTopic:
		t, ok := b.img.Topics[cmd.Name]
		if !ok {
			res.err = kerrf(kerr.UnknownTopicOrPartition, "topic %q", cmd.Name)
			break
		}
		delete(b.img.Topics, cmd.Name)
		delete(b.img.TopicsByID, t.ID)
		b.changed = true
	case opCreatePartitions:
		t := b.mutTopic(cmd.Name)
		if t == nil {
			res.err = kerrf(kerr.UnknownTopicOrPartition, "topic %q", cmd.Name)
			break
		}
		if int32(len(t.Partitions)) != cmd.Base {
			res.err = kerrf(kerr.InvalidPartitions, "topic %q has %d partitions, not %d", cmd.Name, len(t.Partitions), cmd.Base)
			break
		}
		for _, p := range cmd.Partitions {
			t.Partitions = append(t.Partitions, clonePartition(p))
		}
		b.changed = true
		res.topic = t
	case opAlterConfigs:
		t := b.mutTopic(cmd.Name)
		if t == nil {
			res.err = kerrf(kerr.UnknownTopicOrPartition, "topic %q", cmd.Name)
			break
		}
		t.Configs = cloneConfigs(cmd.Configs)
		b.changed = true
	case opAlterPartition:
		p, err := b.alterPartition(cmd.Alter)
		if err != nil {
			res.err = err
			break
		}
		res.partition = p
	case opAllocPIDs:
		if cmd.N <= 0 || cmd.N > 1<<30 {
			res.err = kerrf(kerr.InvalidRequest, "cannot allocate %d producer ids", cmd.N)
			break
		}
		res.first = b.img.NextProducerID
		b.img.NextProducerID += cmd.N
		b.changed = true
	case opPutRecords:
		if cmd.Kind == "" {
			res.err = kerrf(kerr.InvalidRequest, "records without a kind")
			break
		}
		old := b.img.Records[cmd.Kind]
		next := make(map[string]string, len(old)+len(cmd.Puts))
		for k, v := range old {
			next[k] = v
		}
		for _, k := range cmd.Deletes {
			delete(next, k)
		}
		for k, v := range cmd.Puts {
			next[k] = v
		}
		recs := make(map[string]map[string]string, len(b.img.Records)+1)
		for k, v := range b.img.Records {
			recs[k] = v
		}
		recs[cmd.Kind] = next
		b.img.Records = recs
		versions := make(map[string]uint64, len(b.img.RecordsIndex)+1)
		for k, v := range b.img.RecordsIndex {
			versions[k] = v
		}
		versions[cmd.Kind] = index
		b.img.RecordsIndex = versions
		b.changed = true
	case opElectLeaders:
		b.electLeaders(cmd.Elect)
	case opInitCluster:
		// The first controller's cluster id wins; later ones are ignored.
		if b.img.ClusterID == "" && cmd.ClusterID != "" {
			b.img.ClusterID = cmd.ClusterID
			b.changed = true
		}
	default:
		res.err = kerrf(kerr.InvalidRequest, "unknown command %q", cmd.Op)
	}
	if res.err != nil || !b.changed {
		res.index = 0 // nothing to wait for: the image did not move
		return nil, res
	}
	b.img.Index = index
	return b.img, res
}

func (b *builder) alterPartition(r *AlterPartitionRequest) (*PartitionInfo, error) {
	if r == nil {
		return nil, kerrf(kerr.InvalidRequest, "empty alter partition")
	}
	t := b.img.Topics[r.Topic]
	if t == nil || r.Partition < 0 || int(r.Partition) >= len(t.Partitions) {
		return nil, kerrf(kerr.UnknownTopicOrPartition, "%s-%d", r.Topic, r.Partition)
	}
	p := t.Partitions[r.Partition]
	if r.LeaderEpoch != p.LeaderEpoch {
		return nil, kerrf(kerr.FencedLeaderEpoch, "%s-%d: leader epoch %d, current %d", r.Topic, r.Partition, r.LeaderEpoch, p.LeaderEpoch)
	}
	if r.LeaderID != p.Leader {
		return nil, kerrf(kerr.NotLeaderForPartition, "%s-%d: broker %d is not the leader (%d)", r.Topic, r.Partition, r.LeaderID, p.Leader)
	}
	if r.PartitionEpoch != p.PartitionEpoch {
		return nil, kerrf(kerr.InvalidUpdateVersion, "%s-%d: partition epoch %d, current %d", r.Topic, r.Partition, r.PartitionEpoch, p.PartitionEpoch)
	}
	if !slices.Contains(r.ISR, r.LeaderID) {
		return nil, kerrf(kerr.InvalidRequest, "%s-%d: ISR %v does not contain the leader %d", r.Topic, r.Partition, r.ISR, r.LeaderID)
	}
	seen := map[int32]bool{}
	for _, id := range r.ISR {
		if seen[id] {
			return nil, kerrf(kerr.InvalidRequest, "%s-%d: duplicate replica %d in ISR", r.Topic, r.Partition, id)
		}
		seen[id] = true
		if !slices.Contains(p.Replicas, id) {
			return nil, kerrf(kerr.InvalidRequest, "%s-%d: %d is not a replica", r.Topic, r.Partition, id)
		}
		if !slices.Contains(p.ISR, id) && !b.img.alive(id) {
			return nil, kerrf(kerr.IneligibleReplica, "%s-%d: replica %d is fenced or not registered", r.Topic, r.Partition, id)
		}
	}
	p.ISR = slices.Clone(r.ISR)
	p.PartitionEpoch++
	b.mutTopic(r.Topic).Partitions[r.Partition] = p
	b.changed = true
	out := clonePartition(p)
	return &out, nil
}

func clonePartition(p PartitionInfo) PartitionInfo {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	return p
}

func cloneConfigs(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func cloneTopic(t *TopicInfo) *TopicInfo {
	nt := *t
	nt.Configs = cloneConfigs(t.Configs)
	nt.Partitions = make([]PartitionInfo, len(t.Partitions))
	for i, p := range t.Partitions {
		nt.Partitions[i] = clonePartition(p)
	}
	return &nt
}

// ---- snapshot encoding ----

type imageSnapshot struct {
	Version        int                          `json:"version"`
	Index          uint64                       `json:"index"`
	ClusterID      string                       `json:"cluster_id"`
	Brokers        []BrokerInfo                 `json:"brokers"`
	Topics         []*TopicInfo                 `json:"topics"`
	NextProducerID int64                        `json:"next_producer_id"`
	Records        map[string]map[string]string `json:"records,omitempty"`
}

func encodeImage(img *Image) ([]byte, error) {
	s := imageSnapshot{Version: 1, Index: img.Index, ClusterID: img.ClusterID, NextProducerID: img.NextProducerID, Records: img.Records}
	for _, b := range img.Brokers {
		s.Brokers = append(s.Brokers, b)
	}
	sort.Slice(s.Brokers, func(i, j int) bool { return s.Brokers[i].ID < s.Brokers[j].ID })
	for _, n := range sortedTopicNames(img.Topics) {
		s.Topics = append(s.Topics, img.Topics[n])
	}
	return json.Marshal(&s)
}

func decodeImage(data []byte) (*Image, error) {
	var s imageSnapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decode metadata snapshot: %w", err)
	}
	if s.Version != 1 {
		return nil, fmt.Errorf("metadata snapshot version %d unsupported", s.Version)
	}
	img := newImage(s.ClusterID)
	img.Index = s.Index
	img.NextProducerID = s.NextProducerID
	for k, v := range s.Records {
		img.Records[k] = v
		// The snapshot does not say when each kind last changed: its index is a version of
		// every kind it holds (a larger one than the true one only costs a rebuild).
		img.RecordsIndex[k] = s.Index
	}
	for _, b := range s.Brokers {
		img.Brokers[b.ID] = b
	}
	for _, t := range s.Topics {
		if t == nil {
			continue
		}
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		img.Topics[t.Name] = t
		img.TopicsByID[t.ID] = t
	}
	return img, nil
}
