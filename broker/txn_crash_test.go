package broker

// Crash safety of transactions: SIGKILL the transaction coordinator, a partition leader of the
// data topic, or a whole single broker at chosen points of commits and aborts, then check what
// consumers see. The points are the broker's test crash points (faultpoints.go, armed through
// WEIR_TEST_FAULT_DIR) and, for timing randomisation, a SIGKILL from outside 0-15 ms after
// EndTxn is sent. `make test` runs a few cycles per kind; WEIR_TXN_KILL_CYCLES=N runs N
// (scripts/txn-crash.sh, figures in docs/transactions.md).
//
// Each cycle one transactional id of a small pool (so each id's transactions are serialized by
// its coordinator, as an exactly-once application's are) opens a transaction, writes one record
// tagged with the cycle on each of the 3 partitions of the data topic, commits the group offset
// cycle+1 through AddOffsetsToTxn + TxnOffsetCommit, and ends the transaction (commit 70%,
// abort 30%) while the victim is killed; the victim is restarted afterwards. One cycle in six
// instead leaves a transaction open (its producer abandoned, 2 s transaction timeout) and kills
// the victim right after. Checks:
//   - after every cycle, the last stable offset equals the high watermark on every partition
//     within the transaction timeout + abort scan + 15 s (no transaction hangs);
//   - every transaction's records are, on every partition, followed by a marker of the same
//     kind (read_uncommitted with the control records): committed on all or aborted on all;
//   - an acknowledged commit is committed; an abort (acknowledged or not) and an abandoned
//     transaction are aborted; a commit whose EndTxn failed may be either;
//   - read_uncommitted sees every record, aborted ones included, each followed by its ABORT;
//   - read_committed (a consumer running through all the kills, and a fresh one at the end)
//     sees exactly the committed records, once, in order, and never an aborted one;
//   - each id's group offset (OffsetFetch require_stable) is 1 + the last committed cycle of
//     that id (no offset when none committed): offsets and output agree.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
)

type txnCrashKind string

const (
	crashCoordinator txnCrashKind = "coordinator" // the transaction coordinator of the id (3 brokers)
	crashLeader      txnCrashKind = "leader"      // a data partition's leader that is not the coordinator (3 brokers)
	crashBroker      txnCrashKind = "broker"      // the only broker (1 broker, restarted from its data dir)
)

// Crash test settings.
const (
	crashTopic       = "txn-crash"
	crashSrcTopic    = "txn-crash-src" // the topic the group offsets are committed for
	crashParts       = 3
	crashPool        = 6 // transactional ids per test
	crashTxnTimeout  = 8 * time.Second
	crashHangTimeout = 2 * time.Second
	crashAbortScan   = 500 * time.Millisecond
	crashSlack       = 15 * time.Second
)

// crashPoints are the crash points each kind arms on its victim ("timed" is a SIGKILL from
// outside at a random delay after EndTxn is sent).
var crashPoints = map[txnCrashKind][]string{
	crashCoordinator: {"timed", "timed", string(faultPrepareBefore), string(faultPrepareAppended), string(faultMarkersBefore),
		string(faultMarkersBetween), string(faultCompleteBefore)},
	crashLeader: {"timed", string(faultMarkerAppendBefore), string(faultMarkerAppendAfter)},
	crashBroker: {"timed", string(faultPrepareBefore), string(faultPrepareAppended), string(faultMarkersBefore),
		string(faultCompleteBefore), string(faultMarkerAppendBefore), string(faultMarkerAppendAfter)}, // one leader: no "between"
}

// crashProps are the brokers' settings for the crash tests.
func crashProps(n int) map[string]string {
	p := map[string]string{
		"group.initial.rebalance.delay.ms":                            "0",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": strconv.Itoa(int(crashAbortScan / time.Millisecond)),
		"transaction.state.log.num.partitions":                        "10",
		"offsets.topic.num.partitions":                                "10",
	}
	if n > 1 {
		p["offsets.topic.replication.factor"] = strconv.Itoa(n)
		p["min.insync.replicas"] = "2"
	}
	return p
}

// crashCycles is the number of kill cycles per kind: short unless WEIR_TXN_KILL_CYCLES says.
func crashCycles(short int) int {
	if n, err := strconv.Atoi(os.Getenv("WEIR_TXN_KILL_CYCLES")); err == nil && n > 0 {
		return min(n, 500)
	}
	return short
}

// TestClusterTxnCoordinatorKill: 3 brokers; the transaction coordinator of the id is SIGKILLed at
// each crash point of commit and abort (and at random delays), then restarted.
func TestClusterTxnCoordinatorKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	dir := t.TempDir()
	t.Setenv(faultDirEnv, dir)
	c := startCluster(t, 3, crashProps(3))
	runTxnCrash(t, c, crashCoordinator, dir, crashCycles(4))
}

// TestClusterTxnLeaderKill: 3 brokers; a leader of a data partition (not the coordinator) is
// SIGKILLed just before or after it appends a marker, or at a random delay after EndTxn.
func TestClusterTxnLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	dir := t.TempDir()
	t.Setenv(faultDirEnv, dir)
	c := startCluster(t, 3, crashProps(3))
	runTxnCrash(t, c, crashLeader, dir, crashCycles(3))
}

// TestTxnSingleBrokerKill: a single `weir serve` (its own metadata quorum) SIGKILLed at every
// crash point and restarted from its data dir while the client retries.
func TestTxnSingleBrokerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	dir := t.TempDir()
	t.Setenv(faultDirEnv, dir)
	tc := tbcluster.Start(t, testcluster.Config{N: 1, Single: true, Props: crashProps(1)})
	runTxnCrash(t, wrapCluster(t, tc), crashBroker, dir, crashCycles(4))
}

// crashCycle is what one cycle did and what its client saw.
type crashCycle struct {
	tag    string
	id     int // index in the pool
	commit bool
	hang   bool
	point  string
	victim int32
	killed bool
	endErr error
}

// crashRun is the state of one crash test.
type crashRun struct {
	t        *testing.T
	c        *testCluster
	kind     txnCrashKind
	faultDir string
	rng      *rand.Rand
	adm      *kadm.Client
	srcID    [16]byte
	ctx      context.Context

	maxHangStable time.Duration // longest wait for LSO = HW after abandoning a transaction
	failedVisible int           // commits whose EndTxn failed that ended committed
	committedTags int           // transactions committed
}

func runTxnCrash(t *testing.T, c *testCluster, kind txnCrashKind, faultDir string, cycles int) {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("WEIR_TXN_CRASH_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("kind %s, %d cycles, seed %d (WEIR_TXN_CRASH_SEED)", kind, cycles, seed)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second+45*time.Second*time.Duration(cycles))
	defer cancel()
	r := &crashRun{t: t, c: c, kind: kind, faultDir: faultDir, rng: rand.New(rand.NewPCG(seed, seed>>1|1)), ctx: ctx,
		adm: kadm.NewClient(c.client())}
	rf := int16(len(c.nodes))
	var cfgs map[string]*string
	if rf > 1 {
		cfgs = map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}
	}
	createReplicatedTopic(t, r.adm, crashTopic, crashParts, rf, cfgs)
	createReplicatedTopic(t, r.adm, crashSrcTopic, 1, rf, nil)
	if rf > 1 {
		c.waitISR(r.adm, crashTopic, int(rf), 30*time.Second)
	}
	waitFor(t, 30*time.Second, "the source topic's id", func() (bool, string) {
		md, err := r.adm.Metadata(ctx, crashSrcTopic)
		if err != nil {
			return false, err.Error()
		}
		td := md.Topics[crashSrcTopic]
		r.srcID = td.ID
		return td.Err == nil && td.ID != [16]byte{}, fmt.Sprint(td.Err)
	})

	watch := startCrashWatcher(c.addrs())
	var done []crashCycle
	kills := 0
	points := map[string]int{}
	for cycle := range cycles {
		cy := r.cycle(cycle)
		done = append(done, cy)
		if cy.killed {
			kills++
			points[strings.SplitN(cy.point, "+", 2)[0]]++
		}
	}
	watched := watch.stop()
	r.verify(done, watched)

	var acked, ackedAborts, failedCommits, failedAborts, hangs int
	for _, cy := range done {
		switch {
		case cy.hang:
			hangs++
		case cy.commit && cy.endErr == nil:
			acked++
		case cy.commit:
			failedCommits++
		case cy.endErr == nil:
			ackedAborts++
		default:
			failedAborts++
		}
	}
	t.Logf("TXN-CRASH kind=%s cycles=%d kills=%d points=%v: commits acknowledged %d (all visible), commits with a failed EndTxn %d "+
		"(visible %d, aborted %d), aborts %d acknowledged + %d failed (none visible), hanging transactions %d (all aborted, "+
		"LSO=HW after at most %v), violations 0, %v",
		kind, cycles, kills, points, acked, failedCommits, r.failedVisible, failedCommits-r.failedVisible, ackedAborts, failedAborts,
		hangs, r.maxHangStable.Round(10*time.Millisecond), time.Since(start).Round(time.Second))
}

// arm writes the crash point for node id; disarm removes it.
func (r *crashRun) arm(id int32, point string) {
	if err := os.WriteFile(r.faultFile(id), []byte(point), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *crashRun) disarm(id int32) { _ = os.Remove(r.faultFile(id)) }

func (r *crashRun) faultFile(id int32) string {
	return filepath.Join(r.faultDir, "node-"+strconv.Itoa(int(id)))
}

// coordinators answers the coordinator of every pool id (retrying while __transaction_state
// is created or moves).
func (r *crashRun) coordinators() map[int]int32 {
	ids := make([]string, crashPool)
	for k := range ids {
		ids[k] = r.poolID(k)
	}
	var last error
	for range 100 {
		cs := r.adm.FindTxnCoordinators(r.ctx, ids...)
		out := map[int]int32{}
		for k, id := range ids {
			if co, ok := cs[id]; ok && co.Err == nil {
				out[k] = co.NodeID
			} else if ok {
				last = co.Err
			}
		}
		if len(out) == len(ids) {
			return out
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.t.Fatalf("transaction coordinators: %v", last)
	return nil
}

func (r *crashRun) poolID(k int) string { return fmt.Sprintf("crash-%s-%d", r.kind, k) }

// leaders answers the leader of each data partition.
func (r *crashRun) leaders() map[int32]int32 {
	ps, err := r.c.partitions(r.adm, crashTopic)
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[int32]int32{}
	for p, d := range ps {
		out[p] = d.Leader
	}
	return out
}

// choose picks the pool id and the victim of a cycle.
func (r *crashRun) choose(cycle int) (int, int32) {
	if r.kind == crashBroker {
		return r.rng.IntN(crashPool), r.c.nodes[0].id
	}
	for attempt := 0; ; attempt++ {
		coords := r.coordinators()
		if r.kind == crashCoordinator {
			k := r.rng.IntN(crashPool)
			return k, coords[k]
		}
		leaders := r.leaders()
		var cands [][2]int32
		for k, co := range coords {
			for _, l := range leaders {
				if l >= 0 && l != co {
					cands = append(cands, [2]int32{int32(k), l})
				}
			}
		}
		if len(cands) > 0 {
			sort.Slice(cands, func(i, j int) bool {
				return cands[i][0] < cands[j][0] || cands[i][0] == cands[j][0] && cands[i][1] < cands[j][1]
			})
			ch := cands[r.rng.IntN(len(cands))]
			return int(ch[0]), ch[1]
		}
		if attempt > 0 {
			r.t.Fatalf("cycle %d: every data partition and every coordinator is on one broker: %v %v", cycle, leaders, coords)
		}
		// Leadership never moves back by itself (no preferred leader election): when every data
		// leader and coordinator ended up on one broker, restart that broker cleanly to spread
		// them again. Not a kill cycle.
		for _, l := range leaders {
			i := r.c.index(l)
			r.t.Logf("cycle %d: every leader and coordinator on broker %d: restarting it cleanly to move them", cycle, l)
			r.c.signal(i, syscall.SIGTERM)
			time.Sleep(3 * time.Second)
			r.c.restart(i)
			r.c.waitISR(r.adm, crashTopic, len(r.c.nodes), 60*time.Second)
			break
		}
	}
}

// cycle runs one kill cycle and waits until the cluster is whole and the partitions stable.
func (r *crashRun) cycle(cycle int) crashCycle {
	t := r.t
	cy := crashCycle{tag: "c" + strconv.Itoa(cycle), commit: r.rng.IntN(10) < 7, hang: r.rng.IntN(6) == 0}
	var victim int32
	cy.id, victim = r.choose(cycle)
	id, timeout := r.poolID(cy.id), crashTxnTimeout
	if cy.hang { // an id of its own, never ended: the coordinator aborts it after its timeout
		cy.commit, cy.id = false, -1
		id, timeout = fmt.Sprintf("crash-%s-hang-%d", r.kind, cycle), crashHangTimeout
	}
	cy.victim = victim
	p, err := kgo.NewClient(kgo.SeedBrokers(r.c.addrs()...), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.TransactionalID(id), kgo.DefaultProduceTopic(crashTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(timeout), kgo.RequestTimeoutOverhead(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close() // Close never ends a transaction: an abandoned one stays open
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for part := int32(0); part < crashParts; part++ {
		if err := p.ProduceSync(r.ctx, &kgo.Record{Partition: part, Value: []byte(cy.tag)}).FirstErr(); err != nil {
			t.Fatalf("cycle %d produce: %v\n%s", cycle, err, tail(r.c.tc.Output(), 40))
		}
	}
	if !cy.hang {
		r.commitOffset(p, id, crashGroup(cy.id), int64(cycle+1))
	}
	if r.kind == crashLeader && !slices.Contains(slices.Collect(mapValues(r.leaders())), victim) {
		// the leaders moved (a previous restart): take one that is not the coordinator now
		victim = -1
		co := r.coordinators()[max(cy.id, 0)]
		for _, l := range r.leaders() {
			if l >= 0 && l != co {
				victim = l
			}
		}
		if victim < 0 {
			t.Fatalf("cycle %d: no leader other than the coordinator", cycle)
		}
		cy.victim = victim
	}
	if r.kind == crashCoordinator && cy.hang {
		victim = r.findCoordinator(id)
		cy.victim = victim
	}
	vi := r.c.index(victim)
	node := r.c.nodes[vi].node

	// A single broker is restarted as soon as it dies, so the client's retries can reach it.
	exited := node.Exited() // this process's exit, whatever restarts follow
	stopRestart := make(chan struct{})
	restarted := make(chan error, 1)
	if r.kind == crashBroker {
		go func() {
			select {
			case <-exited:
				restarted <- node.Restart(context.Background())
			case <-stopRestart:
				restarted <- nil
			}
		}()
	}
	kill := func() {
		cy.killed = true
		if err := node.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}

	var stableFrom time.Time
	if cy.hang {
		cy.point = "hang"
		p.Close() // abandoned with its transaction open
		stableFrom = time.Now()
		time.Sleep(time.Duration(r.rng.Int64N(int64(500 * time.Millisecond))))
		kill()
	} else {
		pts := crashPoints[r.kind]
		cy.point = pts[r.rng.IntN(len(pts))]
		var delay time.Duration
		if cy.point == "timed" {
			delay = time.Duration(r.rng.Int64N(int64(15 * time.Millisecond)))
		} else {
			r.arm(victim, cy.point)
		}
		ended := make(chan error, 1)
		go func() {
			ectx, ecancel := context.WithTimeout(r.ctx, 30*time.Second)
			defer ecancel()
			ended <- p.EndTransaction(ectx, kgo.TransactionEndTry(cy.commit))
		}()
		if cy.point == "timed" {
			time.Sleep(delay)
			kill()
			cy.point = "timed+" + delay.Round(100*time.Microsecond).String()
		}
		cy.endErr = <-ended
		stableFrom = time.Now()
		if !cy.killed {
			select {
			case <-exited:
				cy.killed = true
			case <-time.After(3 * time.Second): // the completion follows the answer
				r.disarm(victim)
				select {
				case <-exited:
					cy.killed = true
				case <-time.After(300 * time.Millisecond):
				}
			}
		}
		p.Close()
	}
	if cy.killed {
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("cycle %d: broker %d did not exit after SIGKILL", cycle, victim)
		}
	}
	if r.kind == crashBroker {
		if !cy.killed {
			close(stopRestart)
		}
		if err := <-restarted; err != nil {
			t.Fatalf("cycle %d: restart: %v", cycle, err)
		}
	} else if cy.killed {
		r.c.restart(vi)
	}
	t.Logf("cycle %d: id %s %s, victim %d, point %s (killed %v): EndTxn %v", cycle, id,
		map[bool]string{true: "commit", false: "abort"}[cy.commit]+map[bool]string{true: " (abandoned)"}[cy.hang], victim, cy.point, cy.killed, cy.endErr)
	for i, n := range r.c.nodes { // a point that fired after it was given up
		if !n.node.Running() {
			t.Logf("cycle %d: broker %d exited late: restarting it", cycle, n.id)
			r.c.restart(i)
		}
	}
	if len(r.c.nodes) > 1 {
		r.c.waitISR(r.adm, crashTopic, len(r.c.nodes), 60*time.Second)
	}
	// No transaction hangs: LSO = HW within its timeout, the abort scan and slack.
	took := r.waitStable(stableFrom, timeout+crashAbortScan+crashSlack, cycle)
	if cy.hang {
		r.maxHangStable = max(r.maxHangStable, took)
	}
	return cy
}

func mapValues(m map[int32]int32) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

func crashGroup(k int) string { return "crash-group-" + strconv.Itoa(k) }

// findCoordinator answers the coordinator of id.
func (r *crashRun) findCoordinator(id string) int32 {
	for range 100 {
		if co, ok := r.adm.FindTxnCoordinators(r.ctx, id)[id]; ok && co.Err == nil {
			return co.NodeID
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.t.Fatalf("no coordinator for %s", id)
	return -1
}

// commitOffset adds group to p's transaction and commits offset for partition 0 of the source
// topic in it (AddOffsetsToTxn + TxnOffsetCommit, as sendOffsetsToTransaction does).
func (r *crashRun) commitOffset(p *kgo.Client, id, group string, offset int64) {
	t := r.t
	pid, epoch, err := p.ProducerID(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	retriable := func(code int16) bool {
		return code == kerr.ConcurrentTransactions.Code || code == kerr.CoordinatorLoadInProgress.Code ||
			code == kerr.NotCoordinator.Code || code == kerr.CoordinatorNotAvailable.Code
	}
	for i := 0; ; i++ {
		ao := kmsg.NewPtrAddOffsetsToTxnRequest()
		ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = id, pid, epoch, group
		resp, err := ao.RequestWith(r.ctx, p)
		if err == nil && resp.ErrorCode == 0 {
			break
		}
		if i > 100 || (err == nil && !retriable(resp.ErrorCode)) {
			t.Fatalf("AddOffsetsToTxn: %v %v", err, resp)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; ; i++ {
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = id, group, pid, epoch, -1
		tt := kmsg.NewTxnOffsetCommitRequestTopic()
		tt.Topic, tt.TopicID = crashSrcTopic, r.srcID
		tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset, tp.LeaderEpoch = 0, offset, -1
		tt.Partitions = append(tt.Partitions, tp)
		tc.Topics = append(tc.Topics, tt)
		resp, err := tc.RequestWith(r.ctx, p)
		var code int16
		if err == nil {
			code = resp.Topics[0].Partitions[0].ErrorCode
			if code == 0 {
				return
			}
		}
		if i > 100 || (err == nil && !retriable(code) && code != kerr.UnknownTopicOrPartition.Code && code != kerr.UnknownTopicID.Code) {
			t.Fatalf("TxnOffsetCommit: %v %v", err, kerr.ErrorForCode(code))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitStable waits until the last stable offset is the high watermark on every data partition
// and answers how long that took from since; longer than within fails the test.
func (r *crashRun) waitStable(since time.Time, within time.Duration, cycle int) time.Duration {
	deadline := since.Add(within)
	last := ""
	for {
		hw, err1 := r.adm.ListEndOffsets(r.ctx, crashTopic)
		lso, err2 := r.adm.ListCommittedOffsets(r.ctx, crashTopic)
		if err1 == nil && err2 == nil {
			stable, n := true, 0
			hw.Each(func(o kadm.ListedOffset) {
				n++
				l, ok := lso.Lookup(crashTopic, o.Partition)
				if o.Err != nil || !ok || l.Err != nil || l.Offset != o.Offset {
					stable = false
				}
			})
			if stable && n == crashParts {
				return time.Since(since)
			}
			last = fmt.Sprintf("hw %v lso %v", offsetsOf(hw), offsetsOf(lso))
		} else {
			last = fmt.Sprintf("%v %v", err1, err2)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("cycle %d: the last stable offset did not reach the high watermark within %v: %s\n%s\n%s", cycle, within, last, r.state(), tail(r.c.tc.Output(), 60))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// state describes the data partitions for a failure: high watermark, last stable offset, the
// producers' open transactions (DescribeProducers) and the transactions of the pool.
func (r *crashRun) state() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	hw, err1 := r.adm.ListEndOffsets(ctx, crashTopic)
	lso, err2 := r.adm.ListCommittedOffsets(ctx, crashTopic)
	fmt.Fprintf(&b, "high watermarks %v (%v), last stable offsets %v (%v)\n", offsetsOf(hw), err1, offsetsOf(lso), err2)
	dp, err := r.adm.DescribeProducers(ctx, kadm.TopicsSet{crashTopic: {0: {}, 1: {}, 2: {}}})
	if err != nil {
		fmt.Fprintf(&b, "DescribeProducers: %v\n", err)
	}
	for _, p := range dp[crashTopic].Partitions.Sorted() {
		fmt.Fprintf(&b, "partition %d leader %d (%v):", p.Partition, p.Leader, p.Err)
		for _, pr := range p.ActiveProducers.Sorted() {
			fmt.Fprintf(&b, " [producer %d epoch %d txn start %d coordinator epoch %d]", pr.ProducerID, pr.ProducerEpoch, pr.CurrentTxnStartOffset, pr.CoordinatorEpoch)
		}
		b.WriteString("\n")
	}
	ls, err := r.adm.ListTransactions(ctx, nil, nil)
	fmt.Fprintf(&b, "ListTransactions (%v):", err)
	ls.Each(func(d kadm.ListedTransaction) {
		fmt.Fprintf(&b, " %s@%d:%d:%s", d.TxnID, d.Coordinator, d.ProducerID, d.State)
	})
	return b.String()
}

func offsetsOf(l kadm.ListedOffsets) map[int32]int64 {
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// crashWatcher is a read_committed consumer that runs through every kill.
type crashWatcher struct {
	cl   *kgo.Client
	quit chan struct{}
	done chan struct{}
	mu   sync.Mutex // guards seen
	seen map[int32][]string
	err  error
}

func startCrashWatcher(seeds []string) *crashWatcher {
	w := &crashWatcher{quit: make(chan struct{}), done: make(chan struct{}), seen: map[int32][]string{}}
	w.cl, w.err = kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(crashTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond), kgo.MetadataMinAge(200*time.Millisecond))
	go func() {
		defer close(w.done)
		if w.err != nil {
			return
		}
		for {
			select {
			case <-w.quit:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			fs := w.cl.PollFetches(ctx)
			cancel()
			w.mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) { w.seen[rec.Partition] = append(w.seen[rec.Partition], string(rec.Value)) })
			w.mu.Unlock()
		}
	}()
	return w
}

// stop lets the watcher catch up (2 s), stops it and answers what it saw.
func (w *crashWatcher) stop() map[int32][]string {
	time.Sleep(2 * time.Second)
	close(w.quit)
	<-w.done
	if w.cl != nil {
		w.cl.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// crashOutcome is how a transaction ended on one partition, as its marker says.
type crashOutcome int8

const (
	outcomeOpen crashOutcome = iota
	outcomeCommit
	outcomeAbort
)

// verify checks the final state against what the cycles saw (see the file comment).
func (r *crashRun) verify(cycles []crashCycle, watched map[int32][]string) {
	t := r.t
	r.waitStable(time.Now(), crashTxnTimeout+crashAbortScan+crashSlack, len(cycles))
	raw := r.readUncommitted()
	outcome := map[string]crashOutcome{}
	for p := int32(0); p < crashParts; p++ {
		seen := map[string]crashOutcome{}
		for _, tag := range raw[p].order {
			seen[tag] = raw[p].outcome[tag]
		}
		for _, cy := range cycles {
			o, ok := seen[cy.tag]
			if !ok {
				t.Fatalf("partition %d: %s (%+v) is missing from read_uncommitted: its produce was acknowledged", p, cy.tag, cy)
			}
			if o == outcomeOpen {
				t.Fatalf("partition %d: %s (%+v) has no marker after it: its transaction never ended\n%s", p, cy.tag, cy, r.state())
			}
			if prev, ok := outcome[cy.tag]; ok && prev != o {
				t.Fatalf("%s (%+v): committed on some partitions, aborted on others (partition %d: %v)", cy.tag, cy, p, o)
			}
			outcome[cy.tag] = o
		}
		if len(raw[p].order) != len(cycles) {
			t.Fatalf("partition %d holds %d transactional records, want %d (one per cycle): %v", p, len(raw[p].order), len(cycles), raw[p].order)
		}
	}
	var want []string // committed tags, in cycle order
	lastCommitted := map[int]int{}
	r.failedVisible = 0
	for i, cy := range cycles {
		o := outcome[cy.tag]
		switch {
		case cy.hang && o != outcomeAbort:
			t.Fatalf("%s: an abandoned transaction was not aborted: %v", cy.tag, o)
		case !cy.commit && o != outcomeAbort:
			t.Fatalf("%s: an abort ended committed (EndTxn: %v)", cy.tag, cy.endErr)
		case cy.commit && cy.endErr == nil && o != outcomeCommit:
			t.Fatalf("%s: an acknowledged commit was aborted", cy.tag)
		}
		if o == outcomeCommit {
			want = append(want, cy.tag)
			lastCommitted[cy.id] = i
			if cy.endErr != nil {
				r.failedVisible++
			}
		}
	}
	r.committedTags = len(want)
	// read_committed: a fresh consumer and the one that ran through the kills.
	got := readCommittedFrom(t, r.c.addrs(), crashTopic, len(want)*crashParts)
	for p := int32(0); p < crashParts; p++ {
		if !slices.Equal(got[p], want) {
			t.Fatalf("partition %d: read_committed %v, want the committed transactions %v", p, got[p], want)
		}
		w := watched[p]
		if len(w) > len(want) || !slices.Equal(w, want[:len(w)]) {
			t.Fatalf("partition %d: the read_committed consumer running through the kills saw %v, committed are %v", p, w, want)
		}
		if len(w) < len(want) {
			t.Logf("partition %d: the running read_committed consumer had reached %d of %d records", p, len(w), len(want))
		}
	}
	// Group offsets agree with the output: 1 + the last committed cycle of each id.
	for k := range crashPool {
		group := crashGroup(k)
		var off int64 = -1
		if i, ok := lastCommitted[k]; ok {
			off = int64(i + 1)
		}
		var got int64 = -2
		var last error
		for range 100 {
			res, err := r.adm.FetchOffsets(kadm.RequireStable(r.ctx), group)
			if err == nil {
				if err = res.Error(); err == nil {
					got = -1
					if o, ok := res.Lookup(crashSrcTopic, 0); ok {
						got = o.At
					}
					break
				}
			}
			last = err
			time.Sleep(200 * time.Millisecond)
		}
		if got == -2 {
			t.Fatalf("OffsetFetch %s: %v", group, last)
		}
		if got != off {
			t.Fatalf("group %s: committed offset %d, want %d (1 + its last committed cycle)", group, got, off)
		}
	}
}

// crashPartition is one partition read with read_uncommitted and its control records.
type crashPartition struct {
	order   []string                // transactional records' values, in offset order
	outcome map[string]crashOutcome // by the next marker of the same producer
}

// readUncommitted reads every data partition to its high watermark with read_uncommitted,
// keeping the control records, and classifies each record by the next marker of its producer.
func (r *crashRun) readUncommitted() map[int32]*crashPartition {
	t := r.t
	hw, err := r.adm.ListEndOffsets(r.ctx, crashTopic)
	if err != nil {
		t.Fatal(err)
	}
	ends := offsetsOf(hw)
	parts := map[string]map[int32]kgo.Offset{crashTopic: {}}
	for p := int32(0); p < crashParts; p++ {
		parts[crashTopic][p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.c.addrs()...), kgo.ConsumePartitions(parts), kgo.KeepControlRecords(),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int32]*crashPartition{}
	open := map[int32]map[int64][]string{} // per partition, per producer: records awaiting a marker
	next := map[int32]int64{}
	for p := int32(0); p < crashParts; p++ {
		out[p] = &crashPartition{outcome: map[string]crashOutcome{}}
		open[p] = map[int64][]string{}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		doneAll := true
		for p := int32(0); p < crashParts; p++ {
			if next[p] < ends[p] {
				doneAll = false
			}
		}
		if doneAll {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read_uncommitted reached %v of %v", next, ends)
		}
		ctx, cancel := context.WithTimeout(r.ctx, time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(rec *kgo.Record) {
			p := rec.Partition
			next[p] = rec.Offset + 1
			cp := out[p]
			switch {
			case rec.Attrs.IsControl():
				if len(rec.Key) < 4 {
					t.Fatalf("partition %d offset %d: control record key %x", p, rec.Offset, rec.Key)
				}
				o := outcomeAbort
				if binary.BigEndian.Uint16(rec.Key[2:]) == 1 {
					o = outcomeCommit
				}
				for _, tag := range open[p][rec.ProducerID] {
					cp.outcome[tag] = o
				}
				delete(open[p], rec.ProducerID)
			case rec.Attrs.IsTransactional():
				tag := string(rec.Value)
				if _, dup := cp.outcome[tag]; dup || slices.Contains(open[p][rec.ProducerID], tag) {
					t.Fatalf("partition %d: %s stored twice (offset %d)", p, tag, rec.Offset)
				}
				cp.order = append(cp.order, tag)
				open[p][rec.ProducerID] = append(open[p][rec.ProducerID], tag)
			default:
				t.Fatalf("partition %d offset %d: a non-transactional record %q", p, rec.Offset, rec.Value)
			}
		})
	}
	for p := int32(0); p < crashParts; p++ {
		for _, tags := range open[p] {
			for _, tag := range tags {
				out[p].outcome[tag] = outcomeOpen
			}
		}
	}
	return out
}

// TestClusterTxnOpenAcrossFailover: a transaction left open on a partition whose leader is
// SIGKILLed stays open on the new leader: its last stable offset stays at the transaction's
// first offset until the coordinator aborts it (transaction timeout), and only then reaches
// the high watermark.
func TestClusterTxnOpenAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster")
	}
	c := startCluster(t, 3, crashProps(3))
	adm := kadm.NewClient(c.client())
	const topic = "txn-open-failover"
	createReplicatedTopic(t, adm, topic, 1, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")})
	c.waitISR(adm, topic, 3, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := c.client(kgo.TransactionalID("open-failover"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(6*time.Second))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, kgo.StringRecord("open")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	p.Close() // abandoned
	ps, err := c.partitions(adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	old := ps[0].Leader
	c.signal(c.index(old), syscall.SIGKILL)
	waitFor(t, 30*time.Second, "a new leader", func() (bool, string) {
		ps, err := c.partitions(adm, topic)
		if err != nil {
			return false, err.Error()
		}
		return ps[0].Leader >= 0 && ps[0].Leader != old, fmt.Sprint(ps[0].Leader)
	})
	lsoAt := func() (int64, int64) {
		hw, err1 := adm.ListEndOffsets(ctx, topic)
		lso, err2 := adm.ListCommittedOffsets(ctx, topic)
		if err1 != nil || err2 != nil {
			return -1, -1
		}
		h, _ := hw.Lookup(topic, 0)
		l, _ := lso.Lookup(topic, 0)
		if h.Err != nil || l.Err != nil {
			return -1, -1
		}
		return h.Offset, l.Offset
	}
	for time.Since(opened) < 4*time.Second {
		if hw, lso := lsoAt(); hw >= 0 && lso != 0 {
			dp, _ := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
			t.Fatalf("%v after the transaction opened, on the new leader: last stable offset %d (high watermark %d), want 0 while it is open; producers %+v", time.Since(opened), lso, hw, dp[topic].Partitions[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitFor(t, 6*time.Second+crashAbortScan+crashSlack, "the timed-out transaction aborted", func() (bool, string) {
		hw, lso := lsoAt()
		return hw > 0 && lso == hw, fmt.Sprintf("hw %d lso %d", hw, lso)
	})
	c.restart(c.index(old))
}
