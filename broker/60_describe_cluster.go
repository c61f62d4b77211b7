package broker

// DescribeCluster (key 60), v0-v2. v0: the cluster id, the controller (this node: a single
// broker is its own controller) and the brokers, each at its advertised address for the
// listener the request came in on. v1 adds endpoint_type: 1 (brokers) is answered; 2
// (controllers) is MISMATCHED_ENDPOINT_TYPE and any other UNSUPPORTED_ENDPOINT_TYPE, as a Kafka
// broker answers them. v2 adds
// include_fenced_brokers and is_fenced: this broker is never fenced. Each broker's rack is its broker.rack
// (null without; racks.go). With
// include_cluster_authorized_operations the answer is every cluster operation (no authorizer:
// everything is allowed; with the authorizer on, the principal's operations, 0 without DESCRIBE on
// the cluster, as Kafka answers); otherwise the field is INT32_MIN ("not requested").

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/netio"
)

func init() {
	register(apiDef{key: 60, min: 0, max: 2, handle: handleDescribeCluster})
}

const (
	endpointTypeBrokers     = 1
	endpointTypeControllers = 2
	// authorizedOpsNotRequested is Kafka's INT32_MIN "omitted" marker.
	authorizedOpsNotRequested = -2147483648
	// clusterOperations is the bit set of every ACL operation on the CLUSTER resource: CREATE (5),
	// ALTER (7), DESCRIBE (8), CLUSTER_ACTION (9), DESCRIBE_CONFIGS (10), ALTER_CONFIGS (11),
	// IDEMPOTENT_WRITE (12), CREATE_TOKENS (13), DESCRIBE_TOKENS (14).
	clusterOperations = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12 | 1<<13 | 1<<14
)

func handleDescribeCluster(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.SetVersion(r.Version)
	resp.EndpointType = endpointTypeBrokers
	resp.ClusterID = b.clusterID
	resp.ControllerID = -1
	resp.ClusterAuthorizedOperations = authorizedOpsNotRequested
	if r.Version >= 1 && req.EndpointType != endpointTypeBrokers {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := fmt.Sprintf("unsupported endpoint type %d", req.EndpointType)
		if req.EndpointType == endpointTypeControllers {
			resp.ErrorCode = kerr.MismatchedEndpointType.Code
			msg = "the request was sent to a broker endpoint, but asks for controllers"
		}
		resp.ErrorMessage = &msg
		return netio.Reply{Response: resp}
	}
	resp.ControllerID = b.ctl.ActiveID()
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterOperations
		if b.authzEnabled() { // ACL: the principal's operations, 0 without DESCRIBE on the cluster
			resp.ClusterAuthorizedOperations = b.clusterAuthorizedOps(r)
		}
	}
	for _, e := range b.liveBrokers(b.ctl.Image(), r.Conn.Listener) {
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port = e.id, e.host, e.port
		br.Rack = rackPtr(e.rack) // racks.go
		resp.Brokers = append(resp.Brokers, br)
	}
	return netio.Reply{Response: resp}
}
