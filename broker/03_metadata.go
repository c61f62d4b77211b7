package broker

// Metadata (key 3), v0-v13. Topics by name or (v10+) by id; a nil topic list (v1+; empty in
// v0) means every topic. With allow_auto_topic_creation (v4+, implied before) and
// auto.create.topics.enable, unknown topics are created with num.partitions. The broker list
// holds this broker at its advertised address for the listener the request came in on.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 3, min: 0, max: 13, handle: handleMetadata})
}

func handleMetadata(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.SetVersion(r.Version)

	adv := b.advertisedFor(r.Conn.Listener)
	br := kmsg.NewMetadataResponseBroker()
	br.NodeID, br.Host, br.Port = b.nodeID, adv.Host, int32(adv.Port)
	resp.Brokers = append(resp.Brokers, br)
	cid := b.clusterID
	resp.ClusterID = &cid
	resp.ControllerID = b.nodeID

	allowAuto := r.Version < 4 || req.AllowAutoTopicCreation
	all := req.Topics == nil || (r.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range b.topics.all() {
			resp.Topics = append(resp.Topics, b.metadataTopic(t))
		}
		return netio.Reply{Response: resp}
	}
	for _, rt := range req.Topics {
		var t Topic
		var ok bool
		switch {
		case rt.Topic != nil:
			t, ok = b.topics.get(*rt.Topic)
			if !ok && allowAuto && b.cfg.bool("auto.create.topics.enable") {
				var err error
				t, err = b.createTopic(*rt.Topic, -1, nil, nil)
				ok = err == nil || errors.Is(err, kerr.TopicAlreadyExists)
				if errors.Is(err, kerr.TopicAlreadyExists) {
					t, ok = b.topics.get(*rt.Topic)
				}
				if !ok {
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic = rt.Topic
					mt.ErrorCode = errorCode(err)
					resp.Topics = append(resp.Topics, mt)
					continue
				}
			}
			if !ok {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic = rt.Topic
				mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if validTopicName(*rt.Topic) != nil {
					mt.ErrorCode = kerr.InvalidTopicException.Code
				}
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		default:
			t, ok = b.topics.getByID(rt.TopicID)
			if !ok {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
		}
		resp.Topics = append(resp.Topics, b.metadataTopic(t))
	}
	return netio.Reply{Response: resp}
}

func (b *Broker) metadataTopic(t Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = t.Internal
	for p := int32(0); p < t.Partitions; p++ {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		mp.Leader = b.nodeID
		mp.LeaderEpoch = 0
		mp.Replicas = []int32{b.nodeID}
		mp.ISR = []int32{b.nodeID}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// errorCode maps an error to its Kafka error code (UNKNOWN_SERVER_ERROR when it carries none).
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}
