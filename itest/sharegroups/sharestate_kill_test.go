package sharegroups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
	"github.com/weir-mq/weir/sharecoord"
	"github.com/weir-mq/weir/sharestate"
)

// TestShareStateSurvivesKill writes share-partition state through the RPCs to a 3-broker
// cluster of child processes, SIGKILLs the broker coordinating one key (the leader of its
// __share_group_state partition), reads every key back from the new coordinators, restarts
// the killed broker, kills the next coordinator too, and reads again: every acknowledged write
// was durable and replicated before it was answered.
func TestShareStateSurvivesKill(t *testing.T) {
	tc := tbcluster.Start(t, testcluster.Config{N: 3})
	cl := scClient(t, tc.Bootstrap()...)
	id := scCreateTopic(t, cl, "sc-kill", 4, 3)
	keys := make([]sharestate.Key, 4)
	for i := range keys {
		keys[i] = sharestate.Key{Group: "sc-kill-group", TopicID: id, Partition: int32(i)}
		if code := scInitialize(t, cl, keys[i], 1, int64(10*i)); code != 0 {
			t.Fatalf("initialize %d: %v", i, kerr.ErrorForCode(code))
		}
		if code := scWrite(t, cl, keys[i], scState(i)); code != 0 {
			t.Fatalf("write %d: %v", i, kerr.ErrorForCode(code))
		}
	}
	for round := range 2 {
		victim := scCoordinator(t, cl, keys[round])
		t.Logf("round %d: SIGKILL broker %d, coordinator of %s", round, victim, sharecoord.CoordinatorKey(keys[round]))
		if err := tc.Node(victim).Kill(); err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			scCheckRead(t, cl, keys[i], scState(i))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := tc.Node(victim).Restart(ctx)
		cancel()
		if err != nil {
			t.Fatalf("restart broker %d: %v", victim, err)
		}
	}
	for i := range keys {
		scCheckRead(t, cl, keys[i], scState(i))
	}
}
