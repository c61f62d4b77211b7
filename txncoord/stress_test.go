package txncoord

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestConcurrentProducers runs competing producers per transactional id (each fencing the
// others), flaky markers, the timeout scan and a partition failover, all at once, bounded in
// count and time. Every answer must be one Kafka gives, and once quiet every id must rest in a
// state with nothing pending.
func TestConcurrentProducers(t *testing.T) {
	e := newEnv(t, nil)
	var rmu sync.Mutex
	rng := rand.New(rand.NewSource(1))
	e.markers.answer = func(TopicPartition, int) error {
		rmu.Lock()
		defer rmu.Unlock()
		if rng.Intn(4) == 0 {
			return kerr.NotLeaderForPartition
		}
		return nil
	}
	allowed := map[*kerr.Error]bool{
		nil: true, kerr.ConcurrentTransactions: true, kerr.ProducerFenced: true, kerr.InvalidProducerIDMapping: true,
		kerr.InvalidTxnState: true, kerr.NotCoordinator: true, kerr.CoordinatorLoadInProgress: true,
	}
	deadline := time.Now().Add(10 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("id-%d", w%4) // two producers per id
			for i := 0; i < 40 && time.Now().Before(deadline); i++ {
				r := e.c.InitProducerID(id, 60000, nil)
				if !allowed[r.Err] {
					errs <- fmt.Errorf("init: %v", r.Err)
					return
				}
				if r.Err != nil {
					continue
				}
				tv := int16(2 * (w % 2))
				for _, err := range e.c.AddPartitions(id, r.ProducerID, r.Epoch, tps("t", int32(i%3), int32(w)), false, tv) {
					if !allowed[err] {
						errs <- fmt.Errorf("add: %v", err)
						return
					}
				}
				if res := e.c.EndTxn(id, r.ProducerID, r.Epoch, i%2 == 0, tv); !allowed[res.Err] {
					errs <- fmt.Errorf("end: %v", res.Err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20 && time.Now().Before(deadline); i++ {
			e.clock.Advance(10 * time.Second)
			e.c.AbortTimedOut()
			if i == 10 {
				p := e.c.PartitionFor("id-1")
				e.c.Resign(p)
				e.c.Elect(p, 5)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Quiesce: every transaction that was ending completes; open ones are aborted.
	e.markers.answer = nil
	e.waitLoaded(e.c)
	e.clock.Advance(2 * time.Minute)
	e.c.AbortTimedOut()
	for w := 0; w < 4; w++ {
		id := fmt.Sprintf("id-%d", w)
		end := time.Now().Add(5 * time.Second)
		for {
			d := e.c.Describe(id)
			_, m, _ := e.c.lookup(id)
			pending := false
			if m != nil {
				m.mu.Lock()
				pending = m.hasPending
				m.mu.Unlock()
			}
			rest := d.State == Empty || d.State == CompleteCommit || d.State == CompleteAbort
			if d.Err == nil && rest && !pending {
				break
			}
			if d.State == Ongoing && !pending {
				e.clock.Advance(2 * time.Minute)
				e.c.AbortTimedOut()
			}
			if time.Now().After(end) {
				t.Fatalf("%s does not come to rest: %+v pending %v", id, d, pending)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
