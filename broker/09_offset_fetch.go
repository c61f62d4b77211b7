package broker

// OffsetFetch (key 9), v1-v9 (Kafka 4 removed v0; v10 names topics by id and is not served).
// v2+ fetches every committed partition when topics is null and has a top-level error; v7+
// carries require_stable: a partition with transactional offsets not yet committed or aborted
// (TxnOffsetCommit, pending until the transaction's marker) answers UNSTABLE_OFFSET_COMMIT with
// offset -1, as Kafka does, and the client retries; without it the last committed offset is
// returned. v8+ batches
// groups; v9+ carries a member id and epoch, which classic groups ignore and KIP-848 consumer groups check
// (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH). A group or partition
// with nothing committed answers offset -1, leader epoch -1, metadata "" and no error. The reply
// waits until the offsets it returns are durable.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/coordinator"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 9, min: 1, max: 9, handle: handleOffsetFetch})
}

// offsetFetchGroup is one group of a request, normalized across versions.
type offsetFetchGroup struct {
	group  string
	topics []coordinator.FetchTopic // nil = all
	// memberID and memberEpoch (v9+) are checked by a consumer group.
	memberID    *string
	memberEpoch int32
}

func handleOffsetFetch(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.OffsetFetchRequest)
	var groups []offsetFetchGroup
	if r.Version >= 8 {
		for _, g := range req.Groups {
			fg := offsetFetchGroup{group: g.Group, memberEpoch: -1}
			if r.Version >= 9 {
				fg.memberID, fg.memberEpoch = g.MemberID, g.MemberEpoch
			}
			if g.Topics != nil {
				fg.topics = []coordinator.FetchTopic{}
				for _, t := range g.Topics {
					fg.topics = append(fg.topics, coordinator.FetchTopic{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			groups = append(groups, fg)
		}
	} else {
		fg := offsetFetchGroup{group: req.Group, memberEpoch: -1}
		if req.Topics != nil || r.Version < 2 {
			fg.topics = []coordinator.FetchTopic{}
			for _, t := range req.Topics {
				fg.topics = append(fg.topics, coordinator.FetchTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		groups = append(groups, fg)
	}
	requireStable := r.Version >= 7 && req.RequireStable
	waits := make([]func() coordinator.FetchResult, len(groups))
	for i, g := range groups {
		if e := b.authorize(r, acl.OpDescribe, acl.ResourceGroup, g.group); e != nil { // ACL: DESCRIBE on the group
			waits[i] = func() coordinator.FetchResult { return coordinator.FetchResult{Err: e} }
			continue
		}
		waits[i] = b.groups.coord.FetchMember(g.group, g.topics, requireStable, g.memberID, g.memberEpoch)
	}
	denied := b.topicDenied(r, acl.OpDescribe) // ACL: DESCRIBE on each topic
	version := r.Version
	return netio.Reply{Deferred: func() netio.Reply {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.SetVersion(version)
		for i, g := range groups {
			res := waits[i]()
			rg := offsetFetchResponseGroup(g, res)
			authzOffsetFetchTopics(&rg, denied, g.topics == nil)
			if version >= 8 {
				resp.Groups = append(resp.Groups, rg)
				continue
			}
			resp.ErrorCode = rg.ErrorCode
			for _, t := range rg.Topics {
				st := kmsg.NewOffsetFetchResponseTopic()
				st.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewOffsetFetchResponseTopicPartition()
					sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					if version < 2 && rg.ErrorCode != 0 {
						sp.ErrorCode = rg.ErrorCode // v1 has no top-level error
					}
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
		}
		return netio.Reply{Response: resp}
	}}
}

// offsetFetchResponseGroup lays one group's result out by topic, in request order (all offsets:
// sorted by topic and partition). On a group error every requested partition answers -1.
func offsetFetchResponseGroup(g offsetFetchGroup, res coordinator.FetchResult) kmsg.OffsetFetchResponseGroup {
	rg := kmsg.NewOffsetFetchResponseGroup()
	rg.Group = g.group
	offsets := res.Offsets
	if res.Err != nil {
		rg.ErrorCode = res.Err.Code
		offsets = nil
		for _, t := range g.topics {
			for _, p := range t.Partitions {
				offsets = append(offsets, coordinator.FetchedOffset{TopicPartition: coordinator.TopicPartition{Topic: t.Topic, Partition: p}, Offset: -1, LeaderEpoch: -1})
			}
		}
	}
	byTopic := map[string]int{}
	for _, o := range offsets {
		i, ok := byTopic[o.Topic]
		if !ok {
			t := kmsg.NewOffsetFetchResponseGroupTopic()
			t.Topic = o.Topic
			rg.Topics = append(rg.Topics, t)
			i = len(rg.Topics) - 1
			byTopic[o.Topic] = i
		}
		p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		md := o.Metadata
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = o.Partition, o.Offset, o.LeaderEpoch, &md
		if o.Err != nil {
			p.ErrorCode = o.Err.Code // UNSTABLE_OFFSET_COMMIT
		}
		rg.Topics[i].Partitions = append(rg.Topics[i].Partitions, p)
	}
	return rg
}
