package controller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestControllerBrokerPrincipals: with PortSecurity.BrokerPrincipals, each broker id belongs to
// the principal configured for it from the start, not to whichever principal registers it
// first: another broker's principal can neither register an id nobody registered yet nor take
// over a fenced broker's id once its session is over (both accepted by the first-registration
// binding alone), nor heartbeat, shut down or change an ISR for another id. The configured
// principal of a gone broker registers it again.
func TestControllerBrokerPrincipals(t *testing.T) {
	f := newSecFixture(t)
	f.users["broker7"] = "pw-seven"
	principals := map[int32]string{1: "User:broker1", 2: "User:broker2", 3: "User:broker3", 7: "User:broker7"}
	cl := newTestClusterSec(t, 3, func(id int32) *PortSecurity {
		s := f.broker(t, id)
		s.BrokerPrincipals = principals
		s.Allowed = append(s.Allowed, "User:broker7")
		return s
	})
	ctx := ctxT(t, 60*time.Second)
	img := cl.converged()
	for id := int32(1); id <= 3; id++ {
		if got, want := img.Brokers[id].Principal, fmt.Sprintf("User:broker%d", id); got != want {
			t.Fatalf("broker %d registered by %q, want %q", id, got, want)
		}
	}
	ep := []Endpoint{{Name: "PLAINTEXT", Host: "evil.example", Port: 1}}
	refused := func(what string, sec *PortSecurity, req *request) {
		t.Helper()
		if err := callAtLeader(ctx, cl, sec, req); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("%s: %v, want CLUSTER_AUTHORIZATION_FAILED", what, err)
		}
	}
	// An id nobody registered yet, configured for broker7: broker 2's principal may not take it.
	refused("broker 2 registering broker 7's id", f.broker(t, 2), &request{Op: reqHeartbeat, BrokerID: 7, Register: true, Incarnation: "squat", Endpoints: ep})
	// An id configured for nobody: a broker's principal acts for its own id only.
	refused("broker 2 registering unlisted id 9", f.broker(t, 2), &request{Op: reqHeartbeat, BrokerID: 9, Register: true, Incarnation: "squat", Endpoints: ep})
	if _, ok := cl.leader().Image().Brokers[7]; ok {
		t.Fatal("broker 7 registered by another principal")
	}

	gone := cl.follower(cl.leader().cfg.NodeID)
	gid, gEndpoints := gone.cfg.NodeID, gone.cfg.Endpoints
	cl.stop(gid)
	leader := cl.leader()
	eventually(t, 20*time.Second, "the stopped broker fenced", func() error {
		if b := leader.Image().Brokers[gid]; !b.Fenced {
			return fmt.Errorf("broker %d not fenced", gid)
		}
		return nil
	})
	time.Sleep(leader.cfg.SessionTimeout) // its session over: the first-registration binding would let go
	other := int32(2)
	if gid == 2 {
		other = 3
	}
	refused("another broker taking over a gone broker's id", f.broker(t, other), &request{Op: reqHeartbeat, BrokerID: gid, Register: true, Incarnation: "takeover", Endpoints: ep})
	refused("another broker's controlled shutdown", f.broker(t, other), &request{Op: reqControlledStop, BrokerID: gid})
	if got := leader.Image().Brokers[gid].Principal; got != principals[gid] {
		t.Fatalf("broker %d now registered by %s", gid, got)
	}
	// Its own principal (a replaced machine with the broker's credentials) registers it.
	if err := callAtLeader(ctx, cl, f.broker(t, gid), &request{Op: reqHeartbeat, BrokerID: gid, Register: true, Incarnation: "replacement", Endpoints: gEndpoints}); err != nil {
		t.Fatalf("registering a gone broker with its own principal: %v", err)
	}
}
