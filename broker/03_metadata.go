package broker

// Metadata (key 3), v0-v13. Topics by name or (v10+) by id; a nil topic list (v1+; empty in
// v0) means every topic. With allow_auto_topic_creation (v4+, implied before) and
// auto.create.topics.enable, unknown topics are created with num.partitions. The broker list
// holds this broker at its advertised address for the listener the request came in on. A topic
// named more than once is answered once, as Kafka does. Each broker's rack is its broker.rack (null
// without; racks.go).

import (
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/controller"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 3, min: 0, max: 13, handle: handleMetadata})
}

func handleMetadata(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.SetVersion(r.Version)

	img := b.ctl.Image()
	for _, e := range b.liveBrokers(img, r.Conn.Listener) {
		br := kmsg.NewMetadataResponseBroker()
		br.NodeID, br.Host, br.Port = e.id, e.host, e.port
		br.Rack = rackPtr(e.rack) // racks.go
		resp.Brokers = append(resp.Brokers, br)
	}
	cid := b.clusterID
	resp.ClusterID = &cid
	resp.ControllerID = b.ctl.ActiveID()

	allowAuto := r.Version < 4 || req.AllowAutoTopicCreation
	all := req.Topics == nil || (r.Version == 0 && len(req.Topics) == 0)
	denied := b.topicDenied(r, acl.OpDescribe) // ACL: DESCRIBE on each topic (authz.go)
	if all {
		for _, t := range b.topics.all() {
			if denied != nil && denied(t.Name) {
				continue // unauthorized topics are invisible
			}
			resp.Topics = append(resp.Topics, b.metadataTopic(t))
		}
		b.metadataAuthorizedOps(r, req, resp)
		return netio.Reply{Response: resp}
	}
	// Each topic is answered once however often the request names it, as Kafka does (it
	// collects the requested topics into a set): a request naming a topic of P partitions N
	// times would otherwise cost N x P partition entries, thousands of times its own size.
	seenNames := make(map[string]struct{}, min(len(req.Topics), 1024))
	seenIDs := make(map[[16]byte]struct{})
	for _, rt := range req.Topics {
		var t Topic
		var ok bool
		if rt.Topic != nil {
			if _, dup := seenNames[*rt.Topic]; dup {
				continue
			}
			seenNames[*rt.Topic] = struct{}{}
		} else {
			if _, dup := seenIDs[rt.TopicID]; dup {
				continue
			}
			seenIDs[rt.TopicID] = struct{}{}
		}
		switch {
		case rt.Topic != nil:
			if denied != nil && denied(*rt.Topic) {
				resp.Topics = append(resp.Topics, metadataDeniedTopic(rt.Topic, [16]byte{}, kerr.TopicAuthorizationFailed))
				continue
			}
			t, ok = b.topics.get(*rt.Topic)
			if !ok && allowAuto && keyAutoCreateTopicsEnable.Get(b.cfg) {
				if e := b.authorizeCreateTopic(r, *rt.Topic); e != nil { // ACL: CREATE on cluster or topic
					resp.Topics = append(resp.Topics, metadataDeniedTopic(rt.Topic, [16]byte{}, e))
					continue
				}
				var err error
				t, err = b.createTopic(*rt.Topic, -1, -1, nil, nil, nil)
				ok = err == nil || errors.Is(err, kerr.TopicAlreadyExists)
				if errors.Is(err, kerr.TopicAlreadyExists) {
					t, ok = b.topicFresh(*rt.Topic)
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
			if denied != nil && denied(t.Name) {
				resp.Topics = append(resp.Topics, metadataDeniedTopic(nil, rt.TopicID, kerr.TopicAuthorizationFailed))
				continue
			}
		}
		resp.Topics = append(resp.Topics, b.metadataTopic(t))
	}
	b.metadataAuthorizedOps(r, req, resp)
	return netio.Reply{Response: resp}
}

func (b *Broker) metadataTopic(t Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(t.Name) // Kafka: Topic.isInternal
	img := b.ctl.Image()
	for p := int32(0); p < t.Partitions; p++ {
		pi := t.Assign[p]
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		mp.Leader = pi.Leader
		mp.LeaderEpoch = pi.LeaderEpoch
		mp.Replicas = pi.Replicas
		mp.ISR = pi.ISR
		for _, id := range pi.Replicas {
			if bi, ok := img.Brokers[id]; !ok || bi.Fenced {
				mp.OfflineReplicas = append(mp.OfflineReplicas, id)
			}
		}
		if pi.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// brokerEndpoint is one broker's address on a listener.
type brokerEndpoint struct {
	id   int32
	host string
	port int32
	rack string // broker.rack, "" none (racks.go)
}

// liveBrokers lists the unfenced brokers with their address on listener (or their first one),
// by id. This broker is always listed, at its own advertised address.
func (b *Broker) liveBrokers(img *controller.Image, listener string) []brokerEndpoint {
	adv := b.advertisedFor(listener)
	out := []brokerEndpoint{{id: b.nodeID, host: adv.Host, port: int32(adv.Port), rack: keyBrokerRack.Get(b.cfg)}}
	for id, bi := range img.Brokers {
		if id == b.nodeID || bi.Fenced {
			continue
		}
		if e, ok := b.brokerAddr(img, id, listener); ok {
			out = append(out, brokerEndpoint{id: id, host: e.Host, port: e.Port, rack: bi.Rack})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
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
