package controller

import (
	"testing"
	"time"
)

// A broker that was down for a while catches up with the metadata log promptly when it comes
// back (raft's own retry backoff towards a dead follower grows to ~10 s).
func TestRestartedFollowerCatchesUp(t *testing.T) {
	cl := newTestCluster(t, 3)
	f := cl.follower()
	id := f.cfg.NodeID
	cl.stop(id)
	time.Sleep(6 * time.Second)
	start := time.Now()
	c := cl.restart(id)
	if err := c.WaitReady(ctxT(t, 15*time.Second)); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("restarted follower ready after %v", took)
	if took > 2*time.Second {
		t.Fatalf("restarted follower took %v to be ready", took)
	}
	cl.converged()
}
