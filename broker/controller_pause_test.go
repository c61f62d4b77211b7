package broker

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestClusterControllerPause: the active controller stops answering (SIGSTOP) with the brokers'
// heartbeats in flight to it. The controller elected next gives every broker a fresh session
// when it takes over; the other brokers' heartbeats must give up on the stopped one and reach it
// within that session, so it fences only the stopped broker (it once fenced every broker,
// itself included: a heartbeat waited on the stopped controller for a whole session).
func TestClusterControllerPause(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-broker cluster")
	}
	c := startCluster(t, 3, nil)
	adm := kadm.NewClient(c.client())
	createReplicatedTopic(t, adm, "pause", 3, 3, nil)
	c.waitISR(adm, "pause", 3, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := md.Controller
	i := c.index(ctrl)
	if i < 0 {
		t.Fatalf("active controller %d", ctrl)
	}
	before := make([]int, len(c.nodes))
	for j, n := range c.nodes {
		before[j] = len(n.output())
	}
	c.signal(i, syscall.SIGSTOP)
	defer c.signal(i, syscall.SIGCONT)
	var next int32
	waitFor(t, 30*time.Second, "a new active controller", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx)
		if err != nil {
			return false, err.Error()
		}
		if md.Controller == ctrl || md.Controller < 0 {
			return false, fmt.Sprintf("controller %d", md.Controller)
		}
		next = md.Controller
		return true, ""
	})
	// Two sessions (broker.session.timeout.ms, 2.5 s) and more after the takeover.
	time.Sleep(7 * time.Second)
	out := c.nodes[c.index(next)].output()[before[c.index(next)]:]
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "controller: fencing broker") {
			continue
		}
		if !strings.Contains(line, fmt.Sprintf("broker=%d ", ctrl)) {
			t.Errorf("the new controller fenced a live broker: %s", line)
		}
	}
}
