package broker

// DescribeShareGroupOffsets (key 90), v0-v1. Per share group: the share-partition start offset
// and leader epoch of each requested partition (a null topic list: every partition whose state
// the group initialized), read through the share-partition state persister; a partition with
// no state answers start offset -1. v1 adds the lag: high watermark minus start offset minus
// the records past it already delivered, -1 when unknown. A group that does not exist or is
// not a share group answers GROUP_ID_NOT_FOUND; an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
// ACLs as Kafka's KafkaApis: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on
// each topic (TOPIC_AUTHORIZATION_FAILED per partition).

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/sharestate"
)

func init() {
	register(apiDef{key: 90, min: 0, max: 1, handle: handleDescribeShareGroupOffsets})
}

// maxSharePartitionsPerRequest bounds the partitions one share offsets request may name.
const maxSharePartitionsPerRequest = 100000

func handleDescribeShareGroupOffsets(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	resp.SetVersion(r.Version)
	return netio.Reply{Deferred: func() netio.Reply {
		budget := maxSharePartitionsPerRequest
		for _, rg := range req.Groups {
			resp.Groups = append(resp.Groups, b.describeShareGroupOffsets(r, rg, &budget))
		}
		return netio.Reply{Response: resp}
	}}
}

func (b *Broker) describeShareGroupOffsets(r *netio.Request, rg kmsg.DescribeShareGroupOffsetsRequestGroup, budget *int) kmsg.DescribeShareGroupOffsetsResponseGroup {
	g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	g.GroupID = rg.GroupID
	fail := func(e *kerr.Error) kmsg.DescribeShareGroupOffsetsResponseGroup {
		g.ErrorCode = e.Code
		g.Topics = nil
		return g
	}
	if e := b.authorize(r, acl.OpDescribe, acl.ResourceGroup, rg.GroupID); e != nil { // ACL: DESCRIBE on the group
		return fail(e)
	}
	keys, gerr := b.groups.coord.SharePartitions(rg.GroupID)
	if gerr != nil {
		return fail(gerr)
	}
	denied := b.topicDenied(r, acl.OpDescribe) // ACL: DESCRIBE on each topic
	type want struct {
		name  string
		id    [16]byte
		known bool
		parts []int32
	}
	var wants []want
	if rg.Topics == nil {
		byID := map[[16]byte]int{}
		for _, k := range keys {
			i, ok := byID[k.TopicID]
			if !ok {
				t, known := b.topics.getByID(k.TopicID)
				if !known || (denied != nil && denied(t.Name)) {
					continue
				}
				i = len(wants)
				byID[k.TopicID] = i
				wants = append(wants, want{name: t.Name, id: t.ID, known: true})
			}
			wants[i].parts = append(wants[i].parts, k.Partition)
		}
	} else {
		for _, rt := range rg.Topics {
			w := want{name: rt.Topic, parts: rt.Partitions}
			if t, ok := b.topics.get(rt.Topic); ok {
				w.id, w.known = t.ID, true
			}
			wants = append(wants, w)
		}
	}
	ctx, cancel := b.requestCtx()
	defer cancel()
	p := b.groups.sharePersister
	// The summaries are read in one batch (one request per share coordinator) after the
	// partitions are laid out; reads[i] is where keys[i]'s answer goes.
	type slot struct{ topic, part int }
	var rkeys []sharestate.Key
	var reads []slot
	for _, w := range wants {
		rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		rt.Topic, rt.TopicID = w.name, w.id
		topicErr := (*kerr.Error)(nil)
		switch {
		case denied != nil && denied(w.name):
			topicErr = kerr.TopicAuthorizationFailed
		case !w.known:
			topicErr = kerr.UnknownTopicOrPartition
		}
		for _, part := range w.parts {
			rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = part, -1, -1, -1
			if *budget <= 0 {
				rp.ErrorCode = kerr.InvalidRequest.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			*budget--
			if topicErr != nil {
				rp.ErrorCode = topicErr.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			if p == nil {
				rp.ErrorCode = kerr.CoordinatorNotAvailable.Code
				rt.Partitions = append(rt.Partitions, rp)
				continue
			}
			rkeys = append(rkeys, sharestate.Key{Group: rg.GroupID, TopicID: w.id, Partition: part})
			reads = append(reads, slot{topic: len(g.Topics), part: len(rt.Partitions)})
			rt.Partitions = append(rt.Partitions, rp)
		}
		g.Topics = append(g.Topics, rt)
	}
	if len(rkeys) == 0 {
		return g
	}
	sums, errs := sharestate.ReadSummaries(ctx, p, rkeys, 0)
	for i, at := range reads {
		rt := &g.Topics[at.topic]
		rp := &rt.Partitions[at.part]
		s, err := sums[i], errs[i]
		switch {
		case errors.Is(err, sharestate.ErrNotInitialized):
		case err != nil:
			var ke *kerr.Error
			if errors.As(err, &ke) {
				rp.ErrorCode = ke.Code
			} else {
				rp.ErrorCode = kerr.UnknownServerError.Code
			}
		default:
			rp.StartOffset, rp.LeaderEpoch = s.StartOffset, s.LeaderEpoch
			if l, ok := b.logs.Log(engine.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}); ok && s.StartOffset >= 0 && s.DeliveryCompleteCount >= 0 {
				rp.Lag = max(l.HighWatermark()-s.StartOffset-int64(s.DeliveryCompleteCount), 0)
			}
		}
	}
	return g
}
