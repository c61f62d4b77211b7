package broker

// DescribeProducers (key 61), v0: a partition's active producers, as its leader's producer
// state holds them (id, epoch, last sequence and timestamp, the coordinator epoch of the last
// marker, the first offset of the ongoing transaction or -1), as kafka-transactions.sh
// describe-producers shows them. As in Kafka, any replica answers from its own log (a follower
// keeps the producer state of the batches it copies): kafka-transactions.sh find-hanging asks one
// broker about every partition it holds a replica of. READ on the topic is required
// (TOPIC_AUTHORIZATION_FAILED); a partition this broker holds no replica of answers
// NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 61, min: 0, max: 0, handle: handleDescribeProducers})
}

func handleDescribeProducers(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	resp.SetVersion(r.Version)
	denied := b.topicDenied(r, acl.OpRead) // ACL: READ on each topic (Kafka's rule)
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t, found := b.topics.get(rt.Topic)
		unauthorized := denied != nil && denied(rt.Topic)
		st.Partitions = make([]kmsg.DescribeProducersResponseTopicPartition, len(rt.Partitions))
		for j, p := range rt.Partitions {
			sp := &st.Partitions[j]
			*sp = kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			switch {
			case unauthorized:
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			case !found || p < 0 || p >= t.Partitions:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			rep := b.rm.get(engine.TopicPartition{Topic: t.Name, Partition: p})
			if rep == nil || rep.log == nil {
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				continue
			}
			for _, pi := range rep.log.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.Epoch)
				ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.TxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
		}
	}
	return netio.Reply{Response: resp}
}
