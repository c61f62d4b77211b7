package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/weir-mq/weir/internal/faults/history"
	"github.com/weir-mq/weir/internal/testcluster"
)

// Fault is one fault a run injected, for the report.
type Fault struct {
	Family  string `json:"family"`
	Variant string `json:"variant"`
	// Value describes it as the history does ("pause node 2 (leader of queue/1) for 12s").
	Value string `json:"value"`
	Node  int32  `json:"node,omitempty"`
	// Start and End are the history times (ns since the run started) of its invoke and end.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Error says why it could not be injected or healed ("" when it went as planned).
	Error string `json:"error,omitempty"`
}

// restartTimeout bounds a killed node's restart.
const restartTimeout = 90 * time.Second

// nemesis injects a run's faults one at a time, from its own goroutine (run); healAll is called
// after run returned.
type nemesis struct {
	cfg        *RunConfig
	c          *cluster
	rec        *recorder
	log        *slog.Logger
	topic      string // the workload topic whose leaders are targets
	partitions int
	group      string // the group whose coordinator is a target ("" for none)
	txnID      string // else the transactional id whose coordinator is a target ("" for none)

	mu     sync.Mutex // guards paused, down and faults
	paused map[int32]bool
	down   map[int32]bool // killed and not yet restarted
	faults []Fault
}

func newNemesis(cfg *RunConfig, c *cluster, rec *recorder, topic, group, txnID string) *nemesis {
	return &nemesis{cfg: cfg, c: c, rec: rec, log: cfg.Logger, topic: topic, partitions: cfg.Partitions, group: group,
		txnID: txnID, paused: map[int32]bool{}, down: map[int32]bool{}}
}

// run injects the scheduler's faults until ctx ends (or after MaxFaults); a fault under way
// when ctx ends is healed before run returns.
func (n *nemesis) run(ctx context.Context, s *scheduler) {
	for i := 0; n.cfg.MaxFaults <= 0 || i < n.cfg.MaxFaults; i++ {
		f, ok := s.next()
		if !ok || !sleepCtx(ctx, f.Gap) {
			return
		}
		n.inject(ctx, f)
	}
}

// sleepCtx waits d or until ctx ends; it says whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// begin records a fault's invoke.
func (n *nemesis) begin(f fault, value string, node int32) Fault {
	op := n.rec.invoke(history.Op{Process: nemesisProcess, F: history.FNemesis, Value: value, Node: node})
	n.log.Info("fault", "family", f.Family, "variant", f.Variant, "value", value)
	return Fault{Family: f.Family, Variant: f.Variant, Value: value, Node: node, Start: op.Time}
}

// end records a fault's end: ok with value, or info with err when healing it went wrong.
func (n *nemesis) end(rf Fault, value string, err error) {
	op := history.Op{Process: nemesisProcess, F: history.FNemesis, Value: value, Node: rf.Node}
	typ := history.OK
	if err != nil {
		typ, op.Error, rf.Error = history.Info, err.Error(), err.Error()
		n.log.Warn("fault end", "value", value, "err", err)
	}
	rf.End = n.rec.complete(op, typ).Time
	n.mu.Lock()
	n.faults = append(n.faults, rf)
	n.mu.Unlock()
}

// skipped records a fault that found no target (a nemesis invoke answered by info).
func (n *nemesis) skipped(f fault, why error) {
	rf := n.begin(f, f.Family+" "+f.Variant, 0)
	n.end(rf, f.Family+" "+f.Variant+" not injected", fmt.Errorf("no target: %w", why))
}

// injected are the faults so far.
func (n *nemesis) injected() []Fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.faults)
}

// target finds the node a fault aims at: "leader" (of the workload topic's partition picked),
// "controller" (the active controller) or "coordinator" (of the group, else of the first
// transactional id).
func (n *nemesis) target(ctx context.Context, what string, pick uint64) (int32, string, error) {
	switch what {
	case "leader":
		p := int32(pick % uint64(n.partitions))
		id, err := n.c.leader(ctx, n.topic, p)
		return id, fmt.Sprintf("leader of %s/%d", n.topic, p), err
	case "controller":
		id, err := n.c.controller(ctx)
		return id, "active controller", err
	case "coordinator":
		switch {
		case n.group != "":
			id, err := n.c.coordinator(ctx, false, n.group)
			return id, "coordinator of group " + n.group, err
		case n.txnID != "":
			id, err := n.c.coordinator(ctx, true, n.txnID)
			return id, "transaction coordinator of " + n.txnID, err
		}
		id, err := n.c.controller(ctx)
		return id, "active controller", err
	}
	return -1, "", fmt.Errorf("unknown target %q", what)
}

func (n *nemesis) node(id int32) (*testcluster.Node, error) {
	nd := n.c.tc.Node(id)
	if nd == nil {
		return nil, fmt.Errorf("no node %d", id)
	}
	return nd, nil
}

// inject runs one fault to its end (or until ctx ends, then heals it).
func (n *nemesis) inject(ctx context.Context, f fault) {
	switch f.Family {
	case NemesisPause:
		n.pause(ctx, f)
	case NemesisKill:
		n.kill(ctx, f)
	case NemesisPartition:
		n.partition(ctx, f)
	case NemesisMembership:
		n.membership(ctx, f)
	case NemesisDisk:
		n.disk(ctx, f)
	case NemesisClock:
		n.clock(ctx, f)
	}
}

func (n *nemesis) pause(ctx context.Context, f fault) {
	if f.Variant == "leader-isolated" {
		n.pauseIsolated(ctx, f)
		return
	}
	id, what, err := n.target(ctx, f.Variant, f.Pick)
	if err != nil {
		n.skipped(f, err)
		return
	}
	nd, err := n.node(id)
	if err != nil {
		n.skipped(f, err)
		return
	}
	rf := n.begin(f, fmt.Sprintf("pause node %d (%s) for %v", id, what, f.Hold), id)
	if err := nd.Pause(); err != nil {
		n.end(rf, fmt.Sprintf("pause node %d failed", id), err)
		return
	}
	n.mu.Lock()
	n.paused[id] = true
	n.mu.Unlock()
	sleepCtx(ctx, f.Hold)
	err = nd.Continue()
	n.mu.Lock()
	delete(n.paused, id)
	n.mu.Unlock()
	n.end(rf, fmt.Sprintf("resume node %d", id), err)
}

func (n *nemesis) kill(ctx context.Context, f fault) {
	id, what, err := n.target(ctx, f.Variant, f.Pick)
	if err != nil {
		n.skipped(f, err)
		return
	}
	nd, err := n.node(id)
	if err != nil {
		n.skipped(f, err)
		return
	}
	rf := n.begin(f, fmt.Sprintf("kill node %d (%s), down for %v", id, what, f.Hold), id)
	n.mu.Lock()
	n.down[id] = true
	n.mu.Unlock()
	if err := nd.Kill(); err != nil {
		n.end(rf, fmt.Sprintf("kill node %d failed", id), err)
		return
	}
	sleepCtx(ctx, f.Hold)
	err = n.restart(nd)
	n.end(rf, fmt.Sprintf("restart node %d", id), err)
}

// restart starts a killed node again and waits until it is ready (testcluster.Node.Start).
func (n *nemesis) restart(nd *testcluster.Node) error {
	ctx, cancel := context.WithTimeout(context.Background(), restartTimeout)
	defer cancel()
	if err := nd.Start(ctx); err != nil {
		return fmt.Errorf("restart node %d: %w", nd.ID, err)
	}
	n.mu.Lock()
	delete(n.down, nd.ID)
	n.mu.Unlock()
	return nil
}

// nodeIDs are the cluster's node ids in an order shuffled by rng.
func (n *nemesis) nodeIDs(rng *rand.Rand) []int {
	ids := make([]int, len(n.c.tc.Nodes()))
	for i := range ids {
		ids[i] = i + 1
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

// split cuts the shuffled nodes into a minority and a majority.
func (n *nemesis) split(rng *rand.Rand) (minority, majority []int) {
	ids := n.nodeIDs(rng)
	k := (len(ids) - 1) / 2
	return ids[:k], ids[k:]
}

func (n *nemesis) partition(ctx context.Context, f fault) {
	net := n.cfg.Network
	rng := rand.New(rand.NewPCG(f.Pick, 1))
	var (
		value string
		node  int32
		apply func() error
	)
	switch f.Variant {
	case "isolate-leader", "isolate-controller":
		id, what, err := n.target(ctx, strings.TrimPrefix(f.Variant, "isolate-"), f.Pick)
		if err != nil {
			n.skipped(f, err)
			return
		}
		value, node = fmt.Sprintf("isolate node %d (%s) for %v", id, what, f.Hold), id
		apply = func() error { return net.Isolate(int(id)) }
	case "majority":
		minority, majority := n.split(rng)
		value = fmt.Sprintf("split %v | %v for %v", minority, majority, f.Hold)
		apply = func() error { return net.Split(minority, majority) }
	case "bridge":
		ids := n.nodeIDs(rng)
		mid, rest := ids[0], ids[1:]
		a, b := rest[:len(rest)/2], rest[len(rest)/2:]
		value = fmt.Sprintf("bridge %v | %v through %d for %v", a, b, mid, f.Hold)
		apply = func() error { return net.Bridge(a, b, mid) }
	case "one-way":
		ids := n.nodeIDs(rng)
		value = fmt.Sprintf("drop packets %d -> %d for %v", ids[0], ids[1], f.Hold)
		apply = func() error { return net.OneWay(ids[0], ids[1]) }
	case "flap":
		n.flap(ctx, f, rng)
		return
	default:
		n.skipped(f, fmt.Errorf("unknown variant %q", f.Variant))
		return
	}
	rf := n.begin(f, value, node)
	if err := apply(); err != nil {
		n.end(rf, "partition failed", errors.Join(err, net.Heal()))
		return
	}
	sleepCtx(ctx, f.Hold)
	n.end(rf, "heal network", net.Heal())
}

// flap splits the nodes into a random minority and majority, heals, and splits again, each
// state lasting 5-15 s (at most a third of the hold), until the hold has passed.
func (n *nemesis) flap(ctx context.Context, f fault, rng *rand.Rand) {
	net := n.cfg.Network
	step := [2]time.Duration{5 * time.Second, 15 * time.Second}
	if limit := f.Hold / 3; step[1] > limit {
		step = [2]time.Duration{max(limit/3, 500*time.Millisecond), max(limit, 500*time.Millisecond)}
	}
	rf := n.begin(f, fmt.Sprintf("flapping splits every %v-%v for %v", step[0], step[1], f.Hold), 0)
	deadline := time.Now().Add(f.Hold)
	var errs []error
	for split := true; time.Now().Before(deadline) && ctx.Err() == nil; split = !split {
		if split {
			minority, majority := n.split(rng)
			errs = append(errs, net.Split(minority, majority))
		} else {
			errs = append(errs, net.Heal())
		}
		sleepCtx(ctx, min(between(rng, step), time.Until(deadline)))
	}
	errs = append(errs, net.Heal())
	n.end(rf, "heal network", errors.Join(errs...))
}

func (n *nemesis) membership(ctx context.Context, f fault) {
	switch f.Variant {
	case "elect-preferred":
		set := kadm.TopicsSet{n.topic: {}}
		for p := range n.partitions {
			set[n.topic][int32(p)] = struct{}{}
		}
		rf := n.begin(f, "preferred leader election of "+n.topic, 0)
		summary, err := n.electPreferred(ctx, set)
		n.end(rf, "elected: "+summary, err)
	case "reassign":
		p := int32(f.Pick % uint64(n.partitions))
		ps, err := n.c.partitions(ctx, n.topic)
		if err != nil {
			n.skipped(f, err)
			return
		}
		d, ok := ps[p]
		if !ok || len(d.Replicas) < 2 {
			n.skipped(f, fmt.Errorf("%s/%d: replicas %v", n.topic, p, d.Replicas))
			return
		}
		target := append(slices.Clone(d.Replicas[1:]), d.Replicas[0])
		rf := n.begin(f, fmt.Sprintf("reassign %s/%d from %v to %v, then preferred election", n.topic, p, d.Replicas, target), target[0])
		err = n.reassign(ctx, p, target)
		summary := ""
		if err == nil {
			summary, err = n.electPreferred(ctx, kadm.TopicsSet{n.topic: {p: {}}})
		}
		n.end(rf, fmt.Sprintf("reassigned %s/%d to %v; elected: %s", n.topic, p, target, summary), err)
	default:
		n.skipped(f, fmt.Errorf("unknown variant %q", f.Variant))
	}
}

// electPreferred runs a preferred leader election and summarises the per-partition results.
// ELECTION_NOT_NEEDED and PREFERRED_LEADER_NOT_AVAILABLE are answers, not failures.
func (n *nemesis) electPreferred(ctx context.Context, set kadm.TopicsSet) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rs, err := n.c.adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		return "", fmt.Errorf("elect leaders: %w", err)
	}
	var parts []string
	for t, ps := range rs {
		for p, r := range ps {
			res := "elected"
			if r.Err != nil {
				res = r.Err.Error()
			}
			parts = append(parts, t+"/"+strconv.Itoa(int(p))+" "+res)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", "), nil
}

// reassign moves partition p of the topic to target and waits (30 s at most) until the
// reassignment is no longer in progress.
func (n *nemesis) reassign(ctx context.Context, p int32, target []int32) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(n.topic, p, target)
	rs, err := n.c.adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		return fmt.Errorf("alter partition assignments: %w", err)
	}
	for {
		ls, err := n.c.adm.ListPartitionReassignments(ctx, kadm.TopicsSet{n.topic: {p: {}}})
		if err == nil && len(ls[n.topic]) == 0 {
			return nil
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return fmt.Errorf("reassignment of %s/%d still in progress (last: %v, %v): %w", n.topic, p, ls, err, ctx.Err())
		}
	}
}

// healAll ends every fault: SIGCONT to each node (a no-op for a running one), a restart of
// every node that is down, and a healed network. It is recorded as one nemesis op.
func (n *nemesis) healAll() error {
	n.rec.invoke(history.Op{Process: nemesisProcess, F: history.FNemesis, Value: "heal all"})
	var errs []error
	for _, nd := range n.c.tc.Nodes() {
		if nd.Running() {
			_ = nd.Continue()
			continue
		}
		errs = append(errs, n.restart(nd))
	}
	if n.cfg.Network != nil {
		errs = append(errs, n.cfg.Network.Heal())
	}
	err := errors.Join(errs...)
	end := history.Op{Process: nemesisProcess, F: history.FNemesis, Value: "healed"}
	typ := history.OK
	if err != nil {
		typ, end.Error = history.Info, err.Error()
	}
	n.rec.complete(end, typ)
	return err
}

// pauseIsolated pauses a partition leader and cuts it off from everyone, resumes it after half
// the hold while still cut off, and heals the network after the whole hold. Without a Network
// it is a plain pause of the leader.
func (n *nemesis) pauseIsolated(ctx context.Context, f fault) {
	net := n.cfg.Network
	id, what, err := n.target(ctx, "leader", f.Pick)
	if err != nil {
		n.skipped(f, err)
		return
	}
	nd, err := n.node(id)
	if err != nil {
		n.skipped(f, err)
		return
	}
	rf := n.begin(f, fmt.Sprintf("pause and isolate node %d (%s); resume it after %v, still isolated; heal after %v",
		id, what, f.Hold/2, f.Hold), id)
	if err := nd.Pause(); err != nil {
		n.end(rf, fmt.Sprintf("pause node %d failed", id), err)
		return
	}
	n.mu.Lock()
	n.paused[id] = true
	n.mu.Unlock()
	var errs []error
	if net != nil {
		errs = append(errs, net.Isolate(int(id)))
	}
	sleepCtx(ctx, f.Hold/2)
	errs = append(errs, nd.Continue())
	n.mu.Lock()
	delete(n.paused, id)
	n.mu.Unlock()
	sleepCtx(ctx, f.Hold-f.Hold/2)
	if net != nil {
		errs = append(errs, net.Heal())
	}
	n.end(rf, fmt.Sprintf("resumed node %d; network healed", id), errors.Join(errs...))
}
