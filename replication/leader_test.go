package replication

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var leaderT0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// leaderStep is one scripted event followed by the expected state after it.
type leaderStep struct {
	// event
	op  string // "local", "fetch", "tick", "apply", "abort"
	id  int32  // fetch
	off int64  // local, fetch
	at  time.Duration
	isr []int32 // apply
	le  int32   // apply
	pe  int32   // apply

	// expectations after the event
	hw        int64
	hwChanged bool    // local, fetch
	prop      []int32 // the proposal returned by fetch/tick; nil = none
	isrWant   []int32 // committed ISR
	maxWant   []int32 // maximal ISR; nil = same as isrWant
	pending   bool

	checkEpochs bool  // check the proposal's epochs
	wantLE      int32 // expected proposal leader epoch
	wantPE      int32 // expected proposal partition epoch
}

func lsLocal(end int64) leaderStep { return leaderStep{op: "local", off: end} }
func lsFetch(id int32, off int64, at time.Duration) leaderStep {
	return leaderStep{op: "fetch", id: id, off: off, at: at}
}
func lsTick(at time.Duration) leaderStep { return leaderStep{op: "tick", at: at} }
func lsApply(isr []int32, le, pe int32) leaderStep {
	return leaderStep{op: "apply", isr: isr, le: le, pe: pe}
}
func lsAbort() leaderStep { return leaderStep{op: "abort"} }

// epochs expects the step's proposal to carry these epochs.
func (st leaderStep) epochs(le, pe int32) leaderStep {
	st.checkEpochs, st.wantLE, st.wantPE = true, le, pe
	return st
}

// want fills in the expectations of a step.
func (st leaderStep) want(hw int64, changed bool, prop, isr, maximal []int32, pending bool) leaderStep {
	st.hw, st.hwChanged, st.prop, st.isrWant, st.maxWant, st.pending = hw, changed, prop, isr, maximal, pending
	return st
}

type leaderScript struct {
	name                string
	cfg                 LeaderConfig
	localEnd, hw, esOff int64 // NewLeaderState arguments
	initHW              int64 // expected HW right after NewLeaderState
	steps               []leaderStep
	extra               func(t *testing.T, s *LeaderState) // final checks
}

func lsIDs(v ...int32) []int32 { return v }

func runLeaderScript(t *testing.T, sc leaderScript) *LeaderState {
	t.Helper()
	s := NewLeaderState(sc.cfg, sc.localEnd, sc.hw, sc.esOff, leaderT0)
	if got := s.HighWatermark(); got != sc.initHW {
		t.Fatalf("initial HW = %d, want %d", got, sc.initHW)
	}
	var last *ISRChange // the latest proposal, which "abort" aborts
	for i, st := range sc.steps {
		desc := fmt.Sprintf("step %d (%s id=%d off=%d at=%v isr=%v)", i, st.op, st.id, st.off, st.at, st.isr)
		var changed bool
		var prop *ISRChange
		switch st.op {
		case "local":
			changed = s.UpdateLocal(st.off)
		case "fetch":
			changed, prop = s.UpdateFollower(st.id, st.off, leaderT0.Add(st.at))
		case "tick":
			prop = s.Tick(leaderT0.Add(st.at))
		case "apply":
			s.ApplyPartition(st.isr, st.le, st.pe)
		case "abort":
			if !s.AbortPending(last) {
				t.Errorf("%s: AbortPending(%+v) aborted nothing", desc, last)
			}
		default:
			t.Fatalf("%s: unknown op", desc)
		}
		if prop != nil {
			last = cloneISRChange(prop)
		}
		if got := s.HighWatermark(); got != st.hw {
			t.Errorf("%s: HW = %d, want %d", desc, got, st.hw)
		}
		if (st.op == "local" || st.op == "fetch") && changed != st.hwChanged {
			t.Errorf("%s: hwChanged = %v, want %v", desc, changed, st.hwChanged)
		}
		switch {
		case st.prop == nil && prop != nil:
			t.Errorf("%s: unexpected proposal %+v", desc, *prop)
		case st.prop != nil && prop == nil:
			t.Errorf("%s: no proposal, want ISR %v", desc, st.prop)
		case st.prop != nil && !slices.Equal(prop.ISR, st.prop):
			t.Errorf("%s: proposal ISR = %v, want %v", desc, prop.ISR, st.prop)
		}
		if prop != nil && st.checkEpochs && (prop.LeaderEpoch != st.wantLE || prop.PartitionEpoch != st.wantPE) {
			t.Errorf("%s: proposal epochs = %d/%d, want %d/%d", desc, prop.LeaderEpoch, prop.PartitionEpoch, st.wantLE, st.wantPE)
		}
		if got := s.ISR(); !slices.Equal(got, st.isrWant) {
			t.Errorf("%s: ISR = %v, want %v", desc, got, st.isrWant)
		}
		wantMax := st.maxWant
		if wantMax == nil {
			wantMax = st.isrWant
		}
		if got := s.MaximalISR(); !slices.Equal(got, wantMax) {
			t.Errorf("%s: MaximalISR = %v, want %v", desc, got, wantMax)
		}
		if got := s.Pending(); got != st.pending {
			t.Errorf("%s: Pending = %v, want %v", desc, got, st.pending)
		}
	}
	if sc.extra != nil {
		sc.extra(t, s)
	}
	return s
}

const leaderSec = time.Second

func TestLeaderScripts(t *testing.T) {
	three := LeaderConfig{LocalID: 1, Replicas: lsIDs(1, 2, 3), ISR: lsIDs(1, 2, 3), LeaderEpoch: 5, PartitionEpoch: 7, LagTimeMax: 10 * leaderSec}
	all := lsIDs(1, 2, 3)

	scripts := []leaderScript{
		{
			name: "HW advances with the slowest ISR member",
			cfg:  three, localEnd: 0, hw: 0, esOff: 0, initHW: 0,
			steps: []leaderStep{
				lsLocal(10).want(0, false, nil, all, nil, false),
				// follower 3's end is still unknown: the HW cannot advance.
				lsFetch(2, 5, 1*leaderSec).want(0, false, nil, all, nil, false),
				lsFetch(3, 3, 1*leaderSec).want(3, true, nil, all, nil, false),
				lsFetch(2, 10, 2*leaderSec).want(3, false, nil, all, nil, false),
				lsFetch(3, 7, 2*leaderSec).want(7, true, nil, all, nil, false),
				lsFetch(3, 10, 3*leaderSec).want(10, true, nil, all, nil, false),
				lsLocal(15).want(10, false, nil, all, nil, false),
				lsFetch(3, 15, 4*leaderSec).want(10, false, nil, all, nil, false),
				lsFetch(2, 12, 4*leaderSec).want(12, true, nil, all, nil, false),
				lsFetch(2, 15, 5*leaderSec).want(15, true, nil, all, nil, false),
			},
			extra: func(t *testing.T, s *LeaderState) {
				if !s.CaughtUp(15) || s.CaughtUp(16) {
					t.Errorf("CaughtUp: HW=%d", s.HighWatermark())
				}
				if e, ok := s.FollowerEnd(2); !ok || e != 15 {
					t.Errorf("FollowerEnd(2) = %d, %v", e, ok)
				}
			},
		},
		{
			name: "lagging follower removed, HW advances without it, re-added when caught up",
			cfg:  three, localEnd: 100, hw: 100, esOff: 100, initHW: 100,
			steps: []leaderStep{
				lsFetch(2, 100, 1*leaderSec).want(100, false, nil, all, nil, false),
				lsFetch(3, 100, 1*leaderSec).want(100, false, nil, all, nil, false),
				lsLocal(150).want(100, false, nil, all, nil, false),
				lsFetch(2, 150, 2*leaderSec).want(100, false, nil, all, nil, false),
				lsTick(5*leaderSec).want(100, false, nil, all, nil, false),
				// follower 3 last caught up at 1s: exactly LagTimeMax is not yet out of sync.
				lsTick(11*leaderSec).want(100, false, nil, all, nil, false),
				lsFetch(2, 150, 11500*time.Millisecond).want(100, false, nil, all, nil, false),
				lsTick(11500*time.Millisecond).want(100, false, lsIDs(1, 2), all, all, true).epochs(5, 7),
				// pending shrink: the maximal ISR still holds 3, so the HW stays at 3's end.
				lsLocal(200).want(100, false, nil, all, all, true),
				lsFetch(2, 200, 12*leaderSec).want(100, false, nil, all, all, true),
				lsTick(13*leaderSec).want(100, false, nil, all, all, true),
				// committed: the HW advances without 3.
				lsApply(lsIDs(1, 2), 5, 8).want(200, false, nil, lsIDs(1, 2), nil, false),
				// 3 catches up partially: below the HW, not re-added.
				lsFetch(3, 150, 14*leaderSec).want(200, false, nil, lsIDs(1, 2), nil, false),
				lsLocal(250).want(200, false, nil, lsIDs(1, 2), nil, false),
				lsFetch(2, 250, 15*leaderSec).want(250, true, nil, lsIDs(1, 2), nil, false),
				lsFetch(3, 200, 16*leaderSec).want(250, false, nil, lsIDs(1, 2), nil, false),
				// end >= HW (and >= epoch start offset): proposed for addition.
				lsFetch(3, 250, 17*leaderSec).want(250, false, lsIDs(1, 2, 3), lsIDs(1, 2), all, true).epochs(5, 8),
				// the pending addition counts for the HW.
				lsLocal(300).want(250, false, nil, lsIDs(1, 2), all, true),
				lsFetch(2, 300, 18*leaderSec).want(250, false, nil, lsIDs(1, 2), all, true),
				lsApply(lsIDs(1, 2, 3), 5, 9).want(250, false, nil, all, nil, false),
				lsFetch(3, 300, 19*leaderSec).want(300, true, nil, all, nil, false),
			},
		},
		{
			name: "re-added only when end >= HW and >= epoch start offset",
			cfg:  LeaderConfig{LocalID: 1, Replicas: lsIDs(1, 2, 3), ISR: lsIDs(1, 2), LeaderEpoch: 3, PartitionEpoch: 4, LagTimeMax: 10 * leaderSec},
			// the new leader's HW (50) lags its epoch start offset (100).
			localEnd: 120, hw: 50, esOff: 100, initHW: 50,
			steps: []leaderStep{
				lsFetch(2, 80, 1*leaderSec).want(80, true, nil, lsIDs(1, 2), nil, false),
				lsFetch(3, 40, 1*leaderSec).want(80, false, nil, lsIDs(1, 2), nil, false),
				// >= HW but < epoch start offset: not eligible.
				lsFetch(3, 90, 2*leaderSec).want(80, false, nil, lsIDs(1, 2), nil, false),
				lsFetch(3, 100, 3*leaderSec).want(80, false, lsIDs(1, 2, 3), lsIDs(1, 2), lsIDs(1, 2, 3), true).epochs(3, 4),
				lsFetch(2, 120, 3*leaderSec).want(100, true, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				lsApply(lsIDs(1, 2, 3), 3, 5).want(100, false, nil, lsIDs(1, 2, 3), nil, false),
			},
		},
		{
			name: "HW never moves backwards",
			cfg:  three, localEnd: 100, hw: 60, esOff: 0, initHW: 60,
			steps: []leaderStep{
				lsFetch(2, 20, 1*leaderSec).want(60, false, nil, all, nil, false),
				lsFetch(3, 100, 1*leaderSec).want(60, false, nil, all, nil, false),
				lsFetch(2, 70, 2*leaderSec).want(70, true, nil, all, nil, false),
				// a follower truncating / refetching from below the HW does not lower it.
				lsFetch(2, 30, 3*leaderSec).want(70, false, nil, all, nil, false),
				// nor does the local end going down.
				lsLocal(50).want(70, false, nil, all, nil, false),
				lsLocal(100).want(70, false, nil, all, nil, false),
				lsFetch(2, 100, 4*leaderSec).want(100, true, nil, all, nil, false),
				// a committed ISR adding a replica we know nothing about blocks advances but does not lower the HW.
				lsApply(lsIDs(1, 2, 3, 4), 5, 8).want(100, false, nil, lsIDs(1, 2, 3, 4), nil, false),
				lsLocal(120).want(100, false, nil, lsIDs(1, 2, 3, 4), nil, false),
				lsFetch(2, 120, 5*leaderSec).want(100, false, nil, lsIDs(1, 2, 3, 4), nil, false),
				lsFetch(3, 120, 5*leaderSec).want(100, false, nil, lsIDs(1, 2, 3, 4), nil, false),
				lsFetch(4, 110, 5*leaderSec).want(110, true, nil, lsIDs(1, 2, 3, 4), nil, false),
			},
		},
		{
			name: "single-replica partition: HW = local end",
			cfg:  LeaderConfig{LocalID: 7, Replicas: lsIDs(7), ISR: lsIDs(7), LeaderEpoch: 1, PartitionEpoch: 1},
			// the HW catches up to the local end at creation.
			localEnd: 42, hw: 10, esOff: 0, initHW: 42,
			steps: []leaderStep{
				lsLocal(50).want(50, true, nil, lsIDs(7), nil, false),
				lsLocal(50).want(50, false, nil, lsIDs(7), nil, false),
				lsTick(time.Hour).want(50, false, nil, lsIDs(7), nil, false),
				lsFetch(7, 10, time.Hour).want(50, false, nil, lsIDs(7), nil, false), // own id: ignored
				lsLocal(51).want(51, true, nil, lsIDs(7), nil, false),
			},
			extra: func(t *testing.T, s *LeaderState) {
				if s.UnderMinISR(1) || !s.UnderMinISR(2) {
					t.Errorf("UnderMinISR with ISR %v", s.ISR())
				}
				if !s.CaughtUp(51) || s.CaughtUp(52) {
					t.Errorf("CaughtUp with HW %d", s.HighWatermark())
				}
			},
		},
		{
			name:     "pending changes block new proposals; maximal ISR used for HW; abort",
			cfg:      LeaderConfig{LocalID: 1, Replicas: lsIDs(1, 2, 3, 4), ISR: lsIDs(1, 2), LeaderEpoch: 2, PartitionEpoch: 3, LagTimeMax: 10 * leaderSec},
			localEnd: 10, hw: 10, esOff: 10, initHW: 10,
			steps: []leaderStep{
				lsFetch(2, 10, 1*leaderSec).want(10, false, nil, lsIDs(1, 2), nil, false),
				lsFetch(3, 10, 1*leaderSec).want(10, false, lsIDs(1, 2, 3), lsIDs(1, 2), lsIDs(1, 2, 3), true).epochs(2, 3),
				// 4 is eligible too but a change is in flight.
				lsFetch(4, 10, 1*leaderSec).want(10, false, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				lsLocal(20).want(10, false, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				lsFetch(2, 20, 2*leaderSec).want(10, false, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				// the pending member 3 holds the HW.
				lsFetch(3, 15, 2*leaderSec).want(15, true, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				// 2 would be out of sync, but nothing is proposed while pending.
				lsLocal(40).want(15, false, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				lsTick(30*leaderSec).want(15, false, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				// the proposal failed: 3 stops counting, the HW advances to 2's end.
				lsAbort().want(20, false, nil, lsIDs(1, 2), nil, false),
				// proposals possible again: 2 is out of sync (caught up last at 2s... to 20 < 40).
				lsTick(30*leaderSec).want(20, false, lsIDs(1), lsIDs(1, 2), lsIDs(1, 2), true),
				lsAbort().want(20, false, nil, lsIDs(1, 2), nil, false),
				// 4 refetches (end 10 < HW 20): not eligible; then catches up.
				lsFetch(4, 10, 31*leaderSec).want(20, false, nil, lsIDs(1, 2), nil, false),
				lsFetch(4, 40, 32*leaderSec).want(20, false, lsIDs(1, 2, 4), lsIDs(1, 2), lsIDs(1, 2, 4), true).epochs(2, 3),
				// a stale image is ignored (pending stays).
				lsApply(lsIDs(1), 2, 2).want(20, false, nil, lsIDs(1, 2), lsIDs(1, 2, 4), true),
				lsApply(lsIDs(1, 2, 4), 2, 4).want(20, false, nil, lsIDs(1, 2, 4), nil, false),
			},
		},
		{
			// Every image change reapplies every hosted partition, so the leader sees its
			// partition's committed state again at the epochs it already holds. That state is
			// the one a pending change started from, not an answer to it: the controller may
			// have committed the change already, so it stays pending and its addition keeps
			// counting for the HW (the maximal ISR) until a newer partition epoch arrives.
			name:     "an image at the current epochs keeps a pending expansion",
			cfg:      LeaderConfig{LocalID: 1, Replicas: lsIDs(1, 2, 3), ISR: lsIDs(1, 2), LeaderEpoch: 4, PartitionEpoch: 6, LagTimeMax: 10 * leaderSec},
			localEnd: 10, hw: 10, esOff: 10, initHW: 10,
			steps: []leaderStep{
				lsFetch(2, 10, 1*leaderSec).want(10, false, nil, lsIDs(1, 2), nil, false),
				lsFetch(3, 10, 1*leaderSec).want(10, false, lsIDs(1, 2, 3), lsIDs(1, 2), lsIDs(1, 2, 3), true).epochs(4, 6),
				lsApply(lsIDs(1, 2), 4, 6).want(10, false, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				lsLocal(30).want(10, false, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				lsFetch(2, 30, 2*leaderSec).want(10, false, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				// 3, perhaps in the controller's ISR already, holds the HW at its end.
				lsFetch(3, 20, 2*leaderSec).want(20, true, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				lsApply(lsIDs(1, 2), 4, 6).want(20, false, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				// nothing else is proposed meanwhile.
				lsTick(30*leaderSec).want(20, false, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				// the next partition epoch (the controller's answer, or the image) resolves it.
				lsApply(lsIDs(1, 2, 3), 4, 7).want(20, false, nil, lsIDs(1, 2, 3), nil, false),
				lsApply(lsIDs(1, 2, 3), 4, 7).want(20, false, nil, lsIDs(1, 2, 3), nil, false),
				lsFetch(3, 30, 31*leaderSec).want(30, true, nil, lsIDs(1, 2, 3), nil, false),
			},
		},
		{
			name:     "an image at the current epochs keeps a pending shrink",
			cfg:      three,
			localEnd: 50, hw: 50, esOff: 50, initHW: 50,
			steps: []leaderStep{
				lsFetch(2, 50, 1*leaderSec).want(50, false, nil, all, nil, false),
				lsTick(11*leaderSec).want(50, false, lsIDs(1, 2), all, all, true).epochs(5, 7),
				lsApply(all, 5, 7).want(50, false, nil, all, all, true),
				// no second proposal while the first may still commit.
				lsTick(12*leaderSec).want(50, false, nil, all, all, true),
				lsApply(lsIDs(1, 2), 5, 8).want(50, false, nil, lsIDs(1, 2), nil, false),
			},
		},
		{
			// A newer partition epoch is the controller's committed state whatever caused it (here
			// it fenced 2): the pending change was proposed at an older epoch and can no longer
			// commit, so the committed state replaces it.
			name:     "a newer partition epoch replaces a pending change",
			cfg:      LeaderConfig{LocalID: 1, Replicas: lsIDs(1, 2, 3), ISR: lsIDs(1, 2), LeaderEpoch: 4, PartitionEpoch: 6, LagTimeMax: 10 * leaderSec},
			localEnd: 10, hw: 10, esOff: 10, initHW: 10,
			steps: []leaderStep{
				lsFetch(2, 10, 1*leaderSec).want(10, false, nil, lsIDs(1, 2), nil, false),
				lsFetch(3, 10, 1*leaderSec).want(10, false, lsIDs(1, 2, 3), lsIDs(1, 2), lsIDs(1, 2, 3), true),
				lsLocal(20).want(10, false, nil, lsIDs(1, 2), lsIDs(1, 2, 3), true),
				lsApply(lsIDs(1), 4, 7).want(20, false, nil, lsIDs(1), nil, false),
			},
		},
		{
			name: "unknown follower ids ignored",
			cfg:  three, localEnd: 10, hw: 0, esOff: 0, initHW: 0,
			steps: []leaderStep{
				lsFetch(9, 10, 1*leaderSec).want(0, false, nil, all, nil, false),
				lsFetch(-1, 10, 1*leaderSec).want(0, false, nil, all, nil, false),
				lsFetch(1, 10, 1*leaderSec).want(0, false, nil, all, nil, false), // the leader itself
				lsFetch(2, 10, 1*leaderSec).want(0, false, nil, all, nil, false),
				lsFetch(3, 10, 1*leaderSec).want(10, true, nil, all, nil, false),
				lsFetch(9, 0, 2*leaderSec).want(10, false, nil, all, nil, false),
			},
			extra: func(t *testing.T, s *LeaderState) {
				if _, ok := s.FollowerEnd(9); ok {
					t.Error("FollowerEnd(9) known")
				}
				if _, ok := s.FollowerEnd(1); ok {
					t.Error("FollowerEnd(leader) known")
				}
				if e, ok := s.FollowerEnd(3); !ok || e != 10 {
					t.Errorf("FollowerEnd(3) = %d, %v", e, ok)
				}
			},
		},
		{
			// Kafka: a follower whose fetch reaches the leader's end as of its previous fetch is
			// caught up as of that previous fetch, even if it never reaches the current end.
			name:     "caught up as of the previous fetch",
			cfg:      LeaderConfig{LocalID: 1, Replicas: lsIDs(1, 2), ISR: lsIDs(1, 2), LeaderEpoch: 1, PartitionEpoch: 1, LagTimeMax: 10 * leaderSec},
			localEnd: 10, hw: 0, esOff: 0, initHW: 0,
			steps: []leaderStep{
				lsFetch(2, 5, 1*leaderSec).want(5, true, nil, lsIDs(1, 2), nil, false),
				lsLocal(20).want(5, false, nil, lsIDs(1, 2), nil, false),
				lsFetch(2, 10, 8*leaderSec).want(10, true, nil, lsIDs(1, 2), nil, false), // >= 10 (leader end at 1s): caught up as of 1s
				lsLocal(30).want(10, false, nil, lsIDs(1, 2), nil, false),
				lsFetch(2, 20, 15*leaderSec).want(20, true, nil, lsIDs(1, 2), nil, false), // >= 20: caught up as of 8s
				lsTick(18*leaderSec).want(20, false, nil, lsIDs(1, 2), nil, false),        // 10s since 8s: still in sync
				lsTick(18*leaderSec+1).want(20, false, lsIDs(1), lsIDs(1, 2), nil, true),
			},
		},
		{
			name: "idle follower at the leader's end stays; never-fetching follower is removed",
			cfg:  three, localEnd: 50, hw: 50, esOff: 50, initHW: 50,
			steps: []leaderStep{
				lsFetch(2, 50, 1*leaderSec).want(50, false, nil, all, nil, false),
				lsTick(10*leaderSec).want(50, false, nil, all, nil, false),
				// 3 never fetched since leadership started at 0s; 2's end equals the leader's end.
				lsTick(10*leaderSec+1).want(50, false, lsIDs(1, 2), all, all, true),
				lsApply(lsIDs(1, 2), 5, 8).want(50, false, nil, lsIDs(1, 2), nil, false),
				lsTick(time.Hour).want(50, false, nil, lsIDs(1, 2), nil, false),
				// the leader's end moves on: 2 (last caught up at 1s) is now out of sync.
				lsLocal(60).want(50, false, nil, lsIDs(1, 2), nil, false),
				lsTick(time.Hour).want(50, false, lsIDs(1), lsIDs(1, 2), nil, true).epochs(5, 8),
				lsApply(lsIDs(1), 5, 9).want(60, false, nil, lsIDs(1), nil, false),
			},
			extra: func(t *testing.T, s *LeaderState) {
				if !s.UnderMinISR(2) {
					t.Errorf("UnderMinISR(2) false with ISR %v", s.ISR())
				}
			},
		},
	}
	for _, sc := range scripts {
		t.Run(sc.name, func(t *testing.T) { runLeaderScript(t, sc) })
	}
}

func TestLeaderCopiesAndDefaults(t *testing.T) {
	cfgISR := lsIDs(1, 2)
	s := NewLeaderState(LeaderConfig{LocalID: 1, Replicas: lsIDs(1, 2, 3), ISR: cfgISR, LeaderEpoch: 1, PartitionEpoch: 1}, 10, 10, 0, leaderT0)
	cfgISR[1] = 99
	isr := s.ISR()
	isr[0] = 42
	if got := s.ISR(); !slices.Equal(got, lsIDs(1, 2)) {
		t.Fatalf("ISR aliased: %v", got)
	}
	_, p := s.UpdateFollower(3, 10, leaderT0.Add(leaderSec))
	if p == nil {
		t.Fatal("no expansion proposal")
	}
	sent := cloneISRChange(p)
	p.ISR[0] = 77
	if got := s.MaximalISR(); !slices.Equal(got, lsIDs(1, 2, 3)) {
		t.Fatalf("MaximalISR aliased with the proposal: %v", got)
	}
	if s.IsPending(p) || s.AbortPending(p) {
		t.Fatal("a proposal other than the pending one counts as pending")
	}
	if !s.IsPending(sent) || !s.AbortPending(sent) || s.Pending() {
		t.Fatal("the pending proposal was not aborted")
	}
	// LagTimeMax <= 0 means Kafka's 30s default: 2 never fetched since 0s.
	if p := s.Tick(leaderT0.Add(DefaultLagTimeMax)); p != nil {
		t.Fatalf("shrink at exactly the default lag: %+v", *p)
	}
	if p := s.Tick(leaderT0.Add(DefaultLagTimeMax + 1)); p == nil || !slices.Equal(p.ISR, lsIDs(1)) {
		t.Fatalf("shrink after the default lag = %+v", p)
	}
}

// TestLeaderRandomProperty drives random fetch sequences on 3 replicas (plus local appends,
// ticks, and the controller accepting or rejecting proposals) and checks after every event that
// the HW is monotonic, never above any maximal-ISR member's known end, and exactly
// max(previous HW, min over the maximal ISR) when every end is known.
func TestLeaderRandomProperty(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		lag := time.Duration(1+rng.IntN(10)) * leaderSec
		initISR := lsIDs(1, 2, 3)
		if rng.IntN(3) == 0 {
			initISR = lsIDs(1, 2)
		}
		s := NewLeaderState(LeaderConfig{LocalID: 1, Replicas: lsIDs(1, 2, 3), ISR: initISR, LeaderEpoch: 1, PartitionEpoch: 1, LagTimeMax: lag}, 0, 0, 0, leaderT0)
		localEnd := int64(0)
		ends := map[int32]int64{}
		now := leaderT0
		prevHW := s.HighWatermark()
		var proposal *ISRChange
		pe := int32(1)
		for step := 0; step < 400; step++ {
			var desc string
			now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
			switch r := rng.IntN(10); {
			case r < 2:
				localEnd += int64(rng.IntN(20))
				s.UpdateLocal(localEnd)
				desc = fmt.Sprintf("local %d", localEnd)
			case r < 7:
				id := int32(2 + rng.IntN(2))
				if rng.IntN(4) == 0 {
					id = int32(rng.IntN(6)) // sometimes the leader or an unknown id
				}
				// follower ends only move forward, up to the leader's end.
				off := ends[id] + rng.Int64N(localEnd-ends[id]+1)
				if id == 2 || id == 3 {
					ends[id] = off
				}
				_, p := s.UpdateFollower(id, off, now)
				if p != nil {
					if proposal != nil {
						t.Fatalf("seed %d step %d: second proposal %v while %v pending", seed, step, p.ISR, proposal.ISR)
					}
					proposal = p
				}
				desc = fmt.Sprintf("fetch %d@%d", id, off)
			case r < 8:
				if p := s.Tick(now); p != nil {
					if proposal != nil {
						t.Fatalf("seed %d step %d: second proposal %v while %v pending", seed, step, p.ISR, proposal.ISR)
					}
					if slices.Contains(p.ISR, 2) && slices.Contains(p.ISR, 3) {
						t.Fatalf("seed %d step %d: shrink removing nobody: %v", seed, step, p.ISR)
					}
					proposal = p
				}
				desc = "tick"
			default:
				if proposal != nil {
					if rng.IntN(3) == 0 {
						s.AbortPending(proposal)
						desc = "abort"
					} else {
						pe++
						s.ApplyPartition(proposal.ISR, 1, pe)
						desc = fmt.Sprintf("apply %v", proposal.ISR)
					}
					proposal = nil
				}
			}
			if s.Pending() != (proposal != nil) {
				t.Fatalf("seed %d step %d (%s): Pending = %v", seed, step, desc, s.Pending())
			}
			hw := s.HighWatermark()
			if hw < prevHW {
				t.Fatalf("seed %d step %d (%s): HW went back %d -> %d", seed, step, desc, prevHW, hw)
			}
			if hw > localEnd {
				t.Fatalf("seed %d step %d (%s): HW %d > local end %d", seed, step, desc, hw, localEnd)
			}
			if !slices.Contains(s.ISR(), 1) {
				t.Fatalf("seed %d step %d (%s): leader left the ISR %v", seed, step, desc, s.ISR())
			}
			minEnd, allKnown := localEnd, true
			for _, id := range s.MaximalISR() {
				if id == 1 {
					continue
				}
				end, ok := s.FollowerEnd(id)
				if !ok {
					allKnown = false
					continue
				}
				if hw > end {
					t.Fatalf("seed %d step %d (%s): HW %d > end %d of maximal-ISR member %d (max ISR %v)", seed, step, desc, hw, end, id, s.MaximalISR())
				}
				minEnd = min(minEnd, end)
			}
			if allKnown && hw != max(prevHW, minEnd) {
				t.Fatalf("seed %d step %d (%s): HW %d, want max(%d, %d)", seed, step, desc, hw, prevHW, minEnd)
			}
			for _, id := range s.ISR() {
				if !slices.Contains(s.MaximalISR(), id) {
					t.Fatalf("seed %d step %d (%s): ISR %v not within maximal %v", seed, step, desc, s.ISR(), s.MaximalISR())
				}
			}
			prevHW = hw
		}
	}
}

// TestLeaderControllerProperty runs LeaderState against a model of the controller and of the
// broker's AlterPartition sender, and checks the safety invariant behind acks=all after every
// event: the HW never exceeds the reported end of a replica that is in the controller's ISR, or
// in a proposal the controller may still commit (no acknowledged record lost when the
// controller elects any of them). The model's controller commits a proposal made at its current
// partition epoch, refuses it definitively (INELIGIBLE_REPLICA: the sender aborts it), or
// answers INVALID_UPDATE_VERSION to one made at an older epoch (the sender stops and leaves it
// pending); an answer may be lost after the commit (the sender resends; the resend finds the
// epoch moved). It also shrinks its ISR on its own (fencing), and the leader sees its state
// again at any time, at the epochs it already holds or newer ones (an image change).
func TestLeaderControllerProperty(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0xc0de))
		ctlISR := lsIDs(1, 2, 3)
		if rng.IntN(2) == 0 {
			ctlISR = lsIDs(1, 2)
		}
		ctlPE := int32(1)
		lag := time.Duration(1+rng.IntN(5)) * leaderSec
		s := NewLeaderState(LeaderConfig{LocalID: 1, Replicas: lsIDs(1, 2, 3), ISR: ctlISR, LeaderEpoch: 1, PartitionEpoch: ctlPE, LagTimeMax: lag}, 0, 0, 0, leaderT0)
		localEnd := int64(0)
		ends := map[int32]int64{}
		now := leaderT0
		var sent *ISRChange // the proposal the sender works on; nil once it stopped
		var history []string
		for step := 0; step < 500; step++ {
			now = now.Add(time.Duration(rng.IntN(1200)) * time.Millisecond)
			var desc string
			switch r := rng.IntN(16); {
			case r < 3:
				localEnd += int64(rng.IntN(20))
				s.UpdateLocal(localEnd)
				desc = fmt.Sprintf("local %d", localEnd)
			case r < 8:
				id := int32(2 + rng.IntN(2))
				off := ends[id] + rng.Int64N(localEnd-ends[id]+1)
				if rng.IntN(3) == 0 {
					off = ends[id] // an idle or stuck follower
				}
				ends[id] = off
				_, p := s.UpdateFollower(id, off, now)
				desc = fmt.Sprintf("fetch %d@%d", id, off)
				if p != nil {
					sent = p
					desc += fmt.Sprintf(" -> propose %v@%d", p.ISR, p.PartitionEpoch)
				}
			case r < 9:
				desc = "tick"
				if p := s.Tick(now); p != nil {
					sent = p
					desc += fmt.Sprintf(" -> propose %v@%d", p.ISR, p.PartitionEpoch)
				}
			case r < 12:
				if sent == nil {
					continue
				}
				switch {
				case sent.PartitionEpoch != ctlPE:
					desc = fmt.Sprintf("controller: %v@%d INVALID_UPDATE_VERSION (at %d)", sent.ISR, sent.PartitionEpoch, ctlPE)
					sent = nil
				case rng.IntN(6) == 0:
					desc = fmt.Sprintf("controller: %v@%d INELIGIBLE_REPLICA", sent.ISR, sent.PartitionEpoch)
					s.AbortPending(sent)
					sent = nil
				default:
					ctlISR, ctlPE = slices.Clone(sent.ISR), ctlPE+1
					desc = fmt.Sprintf("controller: commits %v@%d", ctlISR, ctlPE)
					if rng.IntN(2) == 0 {
						s.ApplyPartition(ctlISR, 1, ctlPE)
						sent = nil
					} else {
						desc += ", answer lost"
					}
				}
			case r < 15:
				desc = fmt.Sprintf("image %v@%d", ctlISR, ctlPE)
				s.ApplyPartition(ctlISR, 1, ctlPE)
			default:
				id := int32(2 + rng.IntN(2))
				if !slices.Contains(ctlISR, id) {
					continue
				}
				ctlISR = slices.DeleteFunc(slices.Clone(ctlISR), func(v int32) bool { return v == id })
				ctlPE++
				desc = fmt.Sprintf("controller fences %d: %v@%d", id, ctlISR, ctlPE)
			}
			history = append(history, desc)
			hw := s.HighWatermark()
			must := slices.Clone(ctlISR)
			if sent != nil && sent.PartitionEpoch == ctlPE {
				must = append(must, sent.ISR...)
			}
			for _, id := range must {
				if id != 1 && hw > ends[id] {
					t.Fatalf("seed %d step %d: HW %d is past the end %d of replica %d, which the controller has or may commit in its ISR %v@%d (leader's ISR %v, maximal %v)\nhistory (last 15):\n  %s",
						seed, step, hw, ends[id], id, ctlISR, ctlPE, s.ISR(), s.MaximalISR(), strings.Join(history[max(0, len(history)-15):], "\n  "))
				}
			}
		}
	}
}
