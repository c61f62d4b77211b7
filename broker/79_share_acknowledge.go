package broker

// ShareAcknowledge (key 79), v1-v2 (Kafka 4.1 removed the early-access v0). Acknowledges
// records a share consumer acquired with ShareFetch (sharefetch.go, package sharepart): ACCEPT,
// RELEASE, REJECT, GAP and, with IsRenewAck (v2, KIP-1222), RENEW. It belongs to the member's
// share session: its epoch must be the session's next one (epoch 0 cannot open a session:
// INVALID_SHARE_SESSION_EPOCH), and -1 acknowledges and then closes the session, releasing
// what the member still holds. Each partition's acknowledgements are applied all or nothing
// and persisted before the answer. READ on the group and on each topic, as KafkaApis checks.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/sharepart"
)

func init() {
	register(apiDef{key: 79, min: 1, max: 2, handle: handleShareAcknowledge})
}

func handleShareAcknowledge(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	resp.SetVersion(r.Version)
	group, member := derefString(req.GroupID), derefString(req.MemberID)
	if group == "" || member == "" {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return netio.Reply{Response: resp}
	}
	if e := b.authorize(r, acl.OpRead, acl.ResourceGroup, group); e != nil { // ACL: READ on the group
		resp.ErrorCode = e.Code
		return netio.Reply{Response: resp}
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareOpTimeout)
	defer cancel()
	s := b.shares()
	b.sweepShareSessions(ctx)
	key := sharepart.SessionKey{Group: group, Member: member}
	upd := sharepart.SessionUpdate{Key: key, Epoch: req.ShareSessionEpoch, Ack: true}
	if r.Conn != nil {
		upd.Conn = r.Conn.ID
		closing := r.Conn.Closing
		upd.Closed = func() bool { return isClosed(closing) }
	}
	res, err := s.sessions.Update(upd, nil)
	for _, ev := range res.Evicted {
		b.releaseShareSession(ctx, ev.Key, ev.Parts)
	}
	if err != nil {
		var ke *kerr.Error
		if !errors.As(err, &ke) {
			ke = kerr.UnknownServerError
		}
		resp.ErrorCode = ke.Code
		return netio.Reply{Response: resp}
	}
	if r.Version >= 2 {
		resp.AcquisitionLockTimeoutMillis = int32(b.shareConfig(group).LockDuration.Milliseconds())
	}
	renew := r.Version >= 2 && req.IsRenewAck
	denied := b.topicDenied(r, acl.OpRead)
	listener := ""
	if r.Conn != nil {
		listener = r.Conn.Listener
	}
	seen := map[int32]bool{}
	var acks []sharepart.AckBatch
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := kmsg.NewShareAcknowledgeResponseTopic()
		st.TopicID = rt.TopicID
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
			acks = acks[:0]
			for _, ab := range rp.AcknowledgementBatches {
				acks = append(acks, sharepart.AckBatch{First: ab.FirstOffset, Last: ab.LastOffset, Types: ab.AcknowledgeTypes})
			}
			tp := sharepart.TopicPartition{TopicID: rt.TopicID, Partition: rp.Partition}
			if len(acks) > 0 {
				sp.ErrorCode = b.shareAcknowledge(ctx, group, member, tp, acks, renew, denied)
			}
			if sp.ErrorCode == kerr.NotLeaderForPartition.Code {
				if t, ok := b.topics.getByID(rt.TopicID); ok {
					leader, epoch, ep, found := b.shareLeaderOf(t.Name, rp.Partition, listener)
					sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
					if found && !seen[ep.id] {
						seen[ep.id] = true
						ne := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
						ne.NodeID, ne.Host, ne.Port = ep.id, ep.host, ep.port
						if ep.rack != "" {
							rack := ep.rack
							ne.Rack = &rack
						}
						resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
					}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if req.ShareSessionEpoch == sharepart.FinalEpoch {
		b.releaseShareSession(ctx, key, res.Replaced)
	}
	return netio.Reply{Response: resp}
}
