package broker

// AddRaftVoter (key 80), v0-v1 (v1 adds ack_when_committed; weir always answers once the new
// configuration is committed) and RemoveRaftVoter (key 81), v0: KIP-853's run-time change of the
// controller quorum's voters, over hashicorp/raft's AddVoter and RemoveServer on the active
// controller (controller/quorum.go). Served by every broker (the request is forwarded to the
// raft leader over the controller RPC). Authorization: ALTER on CLUSTER, else
// CLUSTER_AUTHORIZATION_FAILED. A cluster_id that is not this cluster's is
// INCONSISTENT_CLUSTER_ID. AddRaftVoter takes the voter's address from its first listener
// (host:port of its controller.listener); with no listener, the address the node registered as
// a non-voter with. A node already a voter is DUPLICATE_VOTER; removing a node that is not a
// voter is VOTER_NOT_FOUND; removing the last voter, or changing a single-node controller (no
// controller.quorum.voters), is INVALID_REQUEST. Directory ids are ignored. `weir cluster
// add-voter` and `remove-voter` send these requests.

import (
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 80, min: 0, max: 1, handle: handleAddRaftVoter})
	register(apiDef{key: 81, min: 0, max: 0, handle: handleRemoveRaftVoter})
}

func handleAddRaftVoter(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.AddRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	resp.SetVersion(r.Version)
	resp.ErrorCode, resp.ErrorMessage = b.changeVoters(r, req.ClusterID, func() error {
		addr := ""
		if len(req.Listeners) > 0 {
			l := req.Listeners[0]
			if l.Host == "" || l.Port == 0 {
				return fmt.Errorf("voter %d: listener %q has no host or port: %w", req.VoterID, l.Name, kerr.InvalidRequest)
			}
			addr = net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
		}
		ctx, cancel := b.requestCtx()
		defer cancel()
		return b.ctl.AddVoter(ctx, req.VoterID, addr)
	})
	return netio.Reply{Response: resp}
}

func handleRemoveRaftVoter(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.RemoveRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	resp.SetVersion(r.Version)
	resp.ErrorCode, resp.ErrorMessage = b.changeVoters(r, req.ClusterID, func() error {
		ctx, cancel := b.requestCtx()
		defer cancel()
		return b.ctl.RemoveVoter(ctx, req.VoterID)
	})
	return netio.Reply{Response: resp}
}

// changeVoters authorizes a voter change, checks the cluster id and runs change.
func (b *Broker) changeVoters(r *netio.Request, clusterID *string, change func() error) (int16, *string) {
	if e := b.authorizeCluster(r, acl.OpAlter); e != nil { // ACL: ALTER on CLUSTER
		return e.Code, nil
	}
	var err error
	if clusterID != nil && *clusterID != b.clusterID {
		err = fmt.Errorf("cluster id %q is not this cluster's (%s): %w", *clusterID, b.clusterID, kerr.InconsistentClusterID)
	} else {
		err = change()
	}
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	return errorCode(err), &msg
}
