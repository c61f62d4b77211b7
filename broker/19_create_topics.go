package broker

// CreateTopics (key 19), v2-v7 (Kafka 4 removed v0-v1). Per topic: name rules, partition count
// (-1 = num.partitions), replication factor (-1 or at most the number of brokers), manual
// assignments naming only live brokers, configs checked against the topic config keys. v5+
// answers with the topic's partitions, replication factor and effective configs; v7 with its id.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 19, min: 2, max: 7, handle: handleCreateTopics})
}

func handleCreateTopics(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.SetVersion(r.Version)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	mq := b.mutationQuota(r, r.Version >= 6) // controller_mutation_rate (quotas.go)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		if e := b.authorizeCreateTopic(r, rt.Topic); e != nil && seen[rt.Topic] == 1 { // ACL: CREATE on cluster or topic
			st.ErrorCode, st.NumPartitions, st.ReplicationFactor = e.Code, -1, -1
			resp.Topics = append(resp.Topics, st)
			continue
		}
		var t Topic
		var err error
		if mq.exceeded() {
			err = errThrottlingQuotaExceeded
		} else if t, err = b.createTopicFromRequest(rt, req.ValidateOnly, seen[rt.Topic] > 1); err == nil && !req.ValidateOnly {
			mq.record(t.Partitions)
		}
		if err != nil {
			st.ErrorCode = errorCode(err)
			msg := err.Error()
			st.ErrorMessage = &msg
			st.NumPartitions, st.ReplicationFactor = -1, -1
		} else {
			st.TopicID = t.ID
			st.NumPartitions = t.Partitions
			st.ReplicationFactor = 1
			if len(t.Assign) > 0 {
				st.ReplicationFactor = int16(len(t.Assign[0].Replicas))
			}
			if e := b.authorize(r, acl.OpDescribeConfigs, acl.ResourceTopic, rt.Topic); e != nil && r.Version >= 5 { // ACL: configs need DESCRIBE_CONFIGS
				st.ConfigErrorCode = e.Code
			} else if r.Version >= 5 {
				st.Configs = b.createTopicsConfigs(t)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	rep := netio.Reply{Response: resp}
	mq.finish(&rep)
	return rep
}

func (b *Broker) createTopicFromRequest(rt kmsg.CreateTopicsRequestTopic, validateOnly, duplicate bool) (Topic, error) {
	if duplicate {
		return Topic{}, fmt.Errorf("topic %s named twice in one request: %w", rt.Topic, kerr.InvalidRequest)
	}
	partitions := rt.NumPartitions
	var assignment [][]int32
	if len(rt.ReplicaAssignment) > 0 {
		if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
			return Topic{}, fmt.Errorf("replica assignment with partitions or replication factor set: %w", kerr.InvalidRequest)
		}
		assignment = make([][]int32, len(rt.ReplicaAssignment))
		for _, a := range rt.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(assignment) || assignment[a.Partition] != nil {
				return Topic{}, fmt.Errorf("assignment partitions must be 0..%d, each once: %w", len(assignment)-1, kerr.InvalidReplicaAssignment)
			}
			if err := b.checkAssignment(a.Partition, a.Replicas); err != nil {
				return Topic{}, err
			}
			if len(a.Replicas) != len(rt.ReplicaAssignment[0].Replicas) {
				return Topic{}, fmt.Errorf("assignment of partition %d has %d replicas, others %d: %w", a.Partition, len(a.Replicas), len(rt.ReplicaAssignment[0].Replicas), kerr.InvalidReplicaAssignment)
			}
			assignment[a.Partition] = a.Replicas
		}
		partitions = int32(len(assignment))
	} else if rt.ReplicationFactor != -1 && rt.ReplicationFactor <= 0 {
		return Topic{}, fmt.Errorf("replication factor %d: %w", rt.ReplicationFactor, kerr.InvalidReplicationFactor)
	}
	configs := map[string]string{}
	for _, c := range rt.Configs {
		if c.Value == nil {
			continue
		}
		configs[c.Name] = *c.Value
	}
	t, err := b.createTopic(rt.Topic, partitions, rt.ReplicationFactor, assignment, configs, &validateOnly)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) && errorCode(err) == kerr.UnknownServerError.Code {
		return t, fmt.Errorf("%v: %w", err, kerr.UnknownServerError)
	}
	return t, err
}

func (b *Broker) createTopicsConfigs(t Topic) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, k := range TopicConfigKeys() {
		v, src, _ := b.cfg.TopicConfigValue(t.Configs, k)
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = k
		val := v
		c.Value = &val
		c.Source = int8(configSource(src))
		out = append(out, c)
	}
	return out
}

// configSource maps a source name to kmsg's ConfigSource.
func configSource(src string) kmsg.ConfigSource {
	switch src {
	case "DYNAMIC_TOPIC_CONFIG":
		return kmsg.ConfigSourceDynamicTopicConfig
	case "DYNAMIC_BROKER_CONFIG":
		return kmsg.ConfigSourceDynamicBrokerConfig
	case "DYNAMIC_DEFAULT_BROKER_CONFIG":
		return kmsg.ConfigSourceDynamicDefaultBrokerConfig
	case "STATIC_BROKER_CONFIG":
		return kmsg.ConfigSourceStaticBrokerConfig
	default:
		return kmsg.ConfigSourceDefaultConfig
	}
}
