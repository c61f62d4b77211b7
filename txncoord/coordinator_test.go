package txncoord

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestValidTransitions(t *testing.T) {
	// Kafka's TransactionState.validPreviousStates, as a from -> to matrix.
	allowed := map[[2]State]bool{}
	for to, froms := range map[State][]State{
		Empty:             {Empty, CompleteCommit, CompleteAbort},
		Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
		PrepareCommit:     {Ongoing},
		PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort},
		CompleteCommit:    {PrepareCommit},
		CompleteAbort:     {PrepareAbort},
		Dead:              {Empty, CompleteAbort, CompleteCommit},
		PrepareEpochFence: {Ongoing},
	} {
		for _, f := range froms {
			allowed[[2]State{f, to}] = true
		}
	}
	for from := Empty; from <= PrepareEpochFence; from++ {
		for to := Empty; to <= PrepareEpochFence; to++ {
			if got := ValidTransition(from, to); got != allowed[[2]State{from, to}] {
				t.Errorf("%v -> %v: %v", from, to, got)
			}
		}
	}
	for i, n := range []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"} {
		if s, ok := StateFromName(n); !ok || s != State(i) || s.String() != n {
			t.Errorf("state %d: %v %v", i, s, ok)
		}
	}
}

func TestPendingTransitionDiscipline(t *testing.T) {
	m := newTxnMeta("x", 5, 1000, 1)
	tr, err := m.prepareIncrementProducerEpoch(1000, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.prepareAddPartitions(tps("a", 0), 3, 0); err == nil {
		t.Fatal("a second transition was prepared while one is pending")
	}
	if m.state != Empty || m.producerEpoch != -1 {
		t.Fatal("a prepared transition changed the state before completion")
	}
	if err := m.completeTransition(tr); err != nil {
		t.Fatal(err)
	}
	if m.producerEpoch != 0 || m.hasPending {
		t.Fatalf("after completion: epoch %d pending %v", m.producerEpoch, m.hasPending)
	}
	// A transit that does not match the pending state is refused and changes nothing.
	tr2, _ := m.prepareAddPartitions(tps("a", 0), 3, 0)
	tr2.state = PrepareCommit
	if err := m.completeTransition(tr2); err == nil || m.state != Empty {
		t.Fatalf("mismatched completion: %v, state %v", err, m.state)
	}
	// Illegal transitions are refused at prepare.
	if _, err := m.prepareComplete(4); err == nil {
		t.Fatal("Empty -> Complete prepared")
	}
}

func TestInitProducerID(t *testing.T) {
	e := newEnv(t, nil)
	r := e.init("a")
	if r.ProducerID != 1000 || r.Epoch != 0 {
		t.Fatalf("first init: %+v", r)
	}
	r = e.init("a")
	if r.ProducerID != 1000 || r.Epoch != 1 {
		t.Fatalf("second init: %+v", r)
	}
	recs := e.log("a").records(t)
	if len(recs) != 2 || recs[1].id != "a" || recs[1].v.State != Empty || recs[1].v.ProducerEpoch != 1 ||
		recs[1].v.Partitions != nil || recs[1].v.TimeoutMs != 60000 || recs[1].v.StartMs != -1 || recs[1].v.PreviousProducerID != 1000 {
		t.Fatalf("records: %+v", recs[len(recs)-1].v)
	}
	for _, c := range []struct {
		id      string
		timeout int32
		want    *kerr.Error
	}{
		{"", 1000, kerr.InvalidRequest},
		{"b", 0, kerr.InvalidTransactionTimeout},
		{"b", -1, kerr.InvalidTransactionTimeout},
		{"b", 15*60*1000 + 1, kerr.InvalidTransactionTimeout},
	} {
		if r := e.c.InitProducerID(c.id, c.timeout, nil); r.Err != c.want || r.ProducerID != -1 || r.Epoch != -1 {
			t.Errorf("InitProducerID(%q, %d): %+v, want %v", c.id, c.timeout, r, c.want)
		}
	}
	if r := e.c.InitProducerID("b", 15*60*1000, nil); r.Err != nil {
		t.Fatalf("the maximum timeout is allowed: %v", r.Err)
	}
	e.ids.err = kerr.CoordinatorLoadInProgress
	if r := e.c.InitProducerID("new", 1000, nil); r.Err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("id source error: %v", r.Err)
	}
	e.ids.err = errors.New("boom")
	if r := e.c.InitProducerID("new", 1000, nil); r.Err != kerr.UnknownServerError {
		t.Fatalf("id source error: %v", r.Err)
	}
}

// KIP-360: a producer recovering with its last id and epoch.
func TestInitProducerIDExpectedEpoch(t *testing.T) {
	e := newEnv(t, nil)
	r0 := e.init("a") // 1000/0
	exp := func(pid int64, ep int16) *ProducerIDEpoch { return &ProducerIDEpoch{pid, ep} }
	steps := []struct {
		expected  *ProducerIDEpoch
		wantEpoch int16
		wantErr   *kerr.Error
	}{
		{exp(r0.ProducerID, 0), 1, nil},                  // current epoch: bump
		{exp(r0.ProducerID, 0), 1, nil},                  // retry of that bump: same epoch
		{exp(r0.ProducerID, 1), 2, nil},                  // current again: bump
		{exp(r0.ProducerID, 0), -1, kerr.ProducerFenced}, // neither current nor previous
		{exp(r0.ProducerID+7, 2), -1, kerr.ProducerFenced},
		{nil, 3, nil}, // a new producer instance: bump, forget the previous epoch
		{exp(r0.ProducerID, 2), -1, kerr.ProducerFenced},
	}
	for i, s := range steps {
		r := e.c.InitProducerID("a", 60000, s.expected)
		if r.Err != s.wantErr || (s.wantErr == nil && (r.Epoch != s.wantEpoch || r.ProducerID != r0.ProducerID)) {
			t.Fatalf("step %d (%+v): %+v, want epoch %d err %v", i, s.expected, r, s.wantEpoch, s.wantErr)
		}
	}
	// An unknown id with an expected pair: a fresh id is fine (the metadata was just created).
	if r := e.c.InitProducerID("fresh", 60000, exp(77, 3)); r.Err != nil || r.Epoch != 0 {
		t.Fatalf("fresh id with expected pair: %+v", r)
	}
}

func TestInitProducerIDFencesOpenTransaction(t *testing.T) {
	for _, tv := range []int16{0, 2} {
		t.Run(fmt.Sprintf("tv%d", tv), func(t *testing.T) {
			e := newEnv(t, func(c *Config) {
				if tv == 0 {
					c.TransactionVersion = -1
				}
			})
			r := e.init("a")
			e.add("a", r, tv, tps("t", 0, 1)...)
			if got := e.c.InitProducerID("a", 60000, nil); got.Err != kerr.ConcurrentTransactions {
				t.Fatalf("init over an open transaction: %+v", got)
			}
			d := e.waitState(e.c, "a", CompleteAbort)
			calls := e.markers.calls()
			if len(calls) != 1 || calls[0].Commit || !reflect.DeepEqual(calls[0].Partitions, tps("t", 0, 1)) {
				t.Fatalf("markers: %+v", calls)
			}
			// The fence bumps once; version 2 bumps again at the abort.
			wantMarkerEpoch := r.Epoch + 1
			if tv == 2 {
				wantMarkerEpoch = r.Epoch + 2
			}
			if calls[0].ProducerEpoch != wantMarkerEpoch || d.Epoch != wantMarkerEpoch || calls[0].CoordinatorEpoch != 1 {
				t.Fatalf("marker epoch %d, state epoch %d, want %d", calls[0].ProducerEpoch, d.Epoch, wantMarkerEpoch)
			}
			// The zombie can no longer end its transaction.
			if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, true, tv); got.Err != kerr.ProducerFenced {
				t.Fatalf("zombie EndTxn: %+v", got)
			}
			// The retry gets an epoch above the fence.
			r2 := e.init("a")
			if r2.ProducerID != r.ProducerID || r2.Epoch != wantMarkerEpoch+1 {
				t.Fatalf("retry: %+v", r2)
			}
		})
	}
}

func TestAddPartitions(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MaxPartitionsPerTxn = 3 })
	r := e.init("a")
	e.add("a", r, 0, tps("t", 0)...)
	d := e.c.Describe("a")
	if d.State != Ongoing || d.StartMs != e.clock.Now().UnixMilli() || !reflect.DeepEqual(d.Partitions, tps("t", 0)) {
		t.Fatalf("after add: %+v", d)
	}
	n := len(e.log("a").records(t))
	e.add("a", r, 0, tps("t", 0)...) // already in: nothing written
	if len(e.log("a").records(t)) != n {
		t.Fatal("adding a partition already in the transaction wrote a record")
	}
	one := func(res map[TopicPartition]*kerr.Error) *kerr.Error {
		var first *kerr.Error
		for _, err := range res {
			first = err
			break
		}
		for _, err := range res {
			if err != first {
				t.Fatalf("partitions answered differently: %v", res)
			}
		}
		return first
	}
	for _, c := range []struct {
		name  string
		id    string
		pid   int64
		epoch int16
		parts []TopicPartition
		want  *kerr.Error
	}{
		{"unknown id", "nope", r.ProducerID, r.Epoch, tps("t", 1), kerr.InvalidProducerIDMapping},
		{"other producer id", "a", r.ProducerID + 1, r.Epoch, tps("t", 1), kerr.InvalidProducerIDMapping},
		{"older epoch", "a", r.ProducerID, r.Epoch - 1, tps("t", 1), kerr.ProducerFenced},
		{"newer epoch", "a", r.ProducerID, r.Epoch + 1, tps("t", 1), kerr.ProducerFenced},
		{"empty id", "", r.ProducerID, r.Epoch, tps("t", 1), kerr.InvalidRequest},
		{"negative partition", "a", r.ProducerID, r.Epoch, tps("t", -1), kerr.InvalidRequest},
		{"too many partitions", "a", r.ProducerID, r.Epoch, tps("u", 0, 1, 2), kerr.InvalidRequest},
	} {
		if got := one(e.c.AddPartitions(c.id, c.pid, c.epoch, c.parts, false, 0)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// KIP-890 verification: per partition, nothing written.
	res := e.c.AddPartitions("a", r.ProducerID, r.Epoch, []TopicPartition{{"t", 0}, {"t", 9}}, true, 0)
	if res[TopicPartition{"t", 0}] != nil || res[TopicPartition{"t", 9}] != kerr.TransactionAbortable {
		t.Fatalf("verify: %v", res)
	}
	if got := one(e.c.AddPartitions("a", r.ProducerID, r.Epoch+1, tps("t", 0), true, 0)); got != kerr.ProducerFenced {
		t.Fatalf("verify with another epoch: %v", got)
	}
	if got := one(e.c.AddPartitions("nope", 1, 0, tps("t", 0), true, 0)); got != kerr.InvalidProducerIDMapping {
		t.Fatalf("verify unknown id: %v", got)
	}
	// While the transaction ends, adds answer CONCURRENT_TRANSACTIONS.
	e.markers.gate = make(chan struct{})
	if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, true, 0); got.Err != nil {
		t.Fatal(got.Err)
	}
	if got := one(e.c.AddPartitions("a", r.ProducerID, r.Epoch, tps("t", 1), false, 0)); got != kerr.ConcurrentTransactions {
		t.Fatalf("add while PrepareCommit: %v", got)
	}
	if got := one(e.c.AddPartitions("a", r.ProducerID, r.Epoch, tps("t", 0), true, 0)); got != kerr.ConcurrentTransactions {
		t.Fatalf("verify while PrepareCommit: %v", got)
	}
	close(e.markers.gate)
	e.waitState(e.c, "a", CompleteCommit)
	// A new transaction starts from CompleteCommit.
	e.clock.Advance(time.Second)
	e.add("a", r, 0, tps("t", 5)...)
	if d := e.c.Describe("a"); d.State != Ongoing || d.StartMs != e.clock.Now().UnixMilli() || len(d.Partitions) != 1 {
		t.Fatalf("second transaction: %+v", d)
	}
}

func TestAddOffsets(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.OffsetsPartitions = 50 })
	r := e.init("a")
	if err := e.c.AddOffsets("a", r.ProducerID, r.Epoch, "my-group", 0); err != nil {
		t.Fatal(err)
	}
	want := TopicPartition{OffsetsTopic, PartitionFor("my-group", 50)}
	if d := e.c.Describe("a"); !reflect.DeepEqual(d.Partitions, []TopicPartition{want}) {
		t.Fatalf("partitions %v, want %v", d.Partitions, want)
	}
	if err := e.c.AddOffsets("a", r.ProducerID, r.Epoch+1, "my-group", 0); err != kerr.ProducerFenced {
		t.Fatalf("fenced AddOffsets: %v", err)
	}
}

func TestEndTxnV1(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.TransactionVersion = -1 })
	r := e.init("a")
	if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, true, 0); got.Err != kerr.InvalidTxnState {
		t.Fatalf("commit from Empty: %+v", got)
	}
	e.add("a", r, 0, tps("t", 0, 1)...)
	e.add("a", r, 0, TopicPartition{"u", 3})
	e.markers.gate = make(chan struct{})
	got := e.c.EndTxn("a", r.ProducerID, r.Epoch, true, 0)
	if got.Err != nil || got.ProducerID != -1 || got.Epoch != -1 {
		t.Fatalf("commit: %+v", got)
	}
	if d := e.c.Describe("a"); d.State != PrepareCommit {
		t.Fatalf("after EndTxn: %v", d.State)
	}
	for _, c := range []struct {
		commit bool
		want   *kerr.Error
	}{{true, kerr.ConcurrentTransactions}, {false, kerr.InvalidTxnState}} {
		if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, c.commit, 0); got.Err != c.want {
			t.Fatalf("EndTxn(commit=%v) in PrepareCommit: %v, want %v", c.commit, got.Err, c.want)
		}
	}
	if got := e.c.InitProducerID("a", 60000, nil); got.Err != kerr.ConcurrentTransactions {
		t.Fatalf("init in PrepareCommit: %v", got.Err)
	}
	close(e.markers.gate)
	d := e.waitState(e.c, "a", CompleteCommit)
	if d.Epoch != r.Epoch || len(d.Partitions) != 0 {
		t.Fatalf("complete: %+v", d)
	}
	calls := e.markers.calls()
	if len(calls) != 1 || !calls[0].Commit || calls[0].ProducerEpoch != r.Epoch || calls[0].ProducerID != r.ProducerID ||
		!reflect.DeepEqual(calls[0].Partitions, []TopicPartition{{"t", 0}, {"t", 1}, {"u", 3}}) {
		t.Fatalf("markers: %+v", calls)
	}
	recs := e.log("a").records(t)
	states := []State{}
	for _, rc := range recs {
		states = append(states, rc.v.State)
	}
	if !reflect.DeepEqual(states, []State{Empty, Ongoing, Ongoing, PrepareCommit, CompleteCommit}) {
		t.Fatalf("records: %v", states)
	}
	if last := recs[len(recs)-1].v; last.Partitions == nil || len(last.Partitions) != 0 {
		t.Fatalf("CompleteCommit writes an empty (not null) partition list: %+v", last.Partitions)
	}
	for _, c := range []struct {
		name   string
		pid    int64
		epoch  int16
		commit bool
		want   *kerr.Error
	}{
		{"retried commit", r.ProducerID, r.Epoch, true, nil},
		{"abort after commit", r.ProducerID, r.Epoch, false, kerr.InvalidTxnState},
		{"other producer id", r.ProducerID + 1, r.Epoch, true, kerr.InvalidProducerIDMapping},
		{"other epoch", r.ProducerID, r.Epoch + 1, true, kerr.ProducerFenced},
	} {
		if got := e.c.EndTxn("a", c.pid, c.epoch, c.commit, 0); got.Err != c.want {
			t.Errorf("%s: %v, want %v", c.name, got.Err, c.want)
		}
	}
	if got := e.c.EndTxn("nope", 1, 0, true, 0); got.Err != kerr.InvalidProducerIDMapping {
		t.Fatalf("unknown id: %v", got.Err)
	}
	// Abort: CompleteAbort, and a retried abort is fine.
	e.add("a", r, 0, tps("t", 0)...)
	if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, false, 0); got.Err != nil {
		t.Fatal(got.Err)
	}
	e.waitState(e.c, "a", CompleteAbort)
	if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, false, 0); got.Err != nil {
		t.Fatalf("retried abort: %v", got.Err)
	}
	if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, true, 0); got.Err != kerr.InvalidTxnState {
		t.Fatalf("commit after abort: %v", got.Err)
	}
}

// Transaction version 2 (KIP-890 part 2): every end bumps the epoch and EndTxn returns it.
func TestEndTxnV2(t *testing.T) {
	e := newEnv(t, nil)
	r := e.init("a")
	if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, true, 2); got.Err != kerr.InvalidTxnState {
		t.Fatalf("commit from Empty: %+v", got)
	}
	e.add("a", r, 2, tps("t", 0)...)
	got := e.c.EndTxn("a", r.ProducerID, r.Epoch, true, 2)
	if got.Err != nil || got.ProducerID != r.ProducerID || got.Epoch != r.Epoch+1 {
		t.Fatalf("commit: %+v", got)
	}
	d := e.waitState(e.c, "a", CompleteCommit)
	if d.Epoch != r.Epoch+1 {
		t.Fatalf("epoch after commit %d", d.Epoch)
	}
	if m := e.markers.calls(); len(m) != 1 || m[0].ProducerEpoch != r.Epoch+1 || m[0].TransactionVersion != 2 {
		t.Fatalf("markers: %+v", m)
	}
	if recs := e.log("a").records(t); recs[len(recs)-1].v.ClientTxnVersion != 2 {
		t.Fatal("client transaction version not recorded")
	}
	e1 := r.Epoch + 1
	// Kafka's table for Empty / CompleteAbort / CompleteCommit (Retry = epoch-1, Current).
	for _, c := range []struct {
		name      string
		epoch     int16
		commit    bool
		want      *kerr.Error
		wantEpoch int16 // answered epoch when no error
	}{
		{"CompleteCommit commit retry", e1 - 1, true, nil, e1},
		{"CompleteCommit abort retry", e1 - 1, false, kerr.InvalidTxnState, 0},
		{"CompleteCommit commit current", e1, true, kerr.InvalidTxnState, 0},
		{"CompleteCommit older", e1 - 2, true, kerr.ProducerFenced, 0},
	} {
		got := e.c.EndTxn("a", r.ProducerID, c.epoch, c.commit, 2)
		if got.Err != c.want || (c.want == nil && got.Epoch != c.wantEpoch) {
			t.Errorf("%s: %+v, want %v", c.name, got, c.want)
		}
	}
	// CompleteCommit + abort at the current epoch: an empty abort, with a bump.
	got = e.c.EndTxn("a", r.ProducerID, e1, false, 2)
	if got.Err != nil || got.Epoch != e1+1 {
		t.Fatalf("abort from CompleteCommit: %+v", got)
	}
	e.waitState(e.c, "a", CompleteAbort)
	e2 := e1 + 1
	if got := e.c.EndTxn("a", r.ProducerID, e2-1, false, 2); got.Err != nil || got.Epoch != e2 {
		t.Fatalf("retried abort: %+v", got)
	}
	if got := e.c.EndTxn("a", r.ProducerID, e2-1, true, 2); got.Err != kerr.InvalidTxnState {
		t.Fatalf("commit retry after abort: %+v", got)
	}
	// The client's next transaction ends (an empty abort at the epoch EndTxn returned) while the
	// previous one's markers are still being written: CONCURRENT_TRANSACTIONS until they are,
	// then the empty abort is accepted.
	e.add("a", InitResult{ProducerID: r.ProducerID, Epoch: e2}, 2, tps("t", 0)...)
	e.markers.gate = make(chan struct{})
	if got := e.c.EndTxn("a", r.ProducerID, e2, true, 2); got.Err != nil || got.Epoch != e2+1 {
		t.Fatalf("commit: %+v", got)
	}
	for _, commit := range []bool{false, true} {
		if got := e.c.EndTxn("a", r.ProducerID, e2+1, commit, 2); got.Err != kerr.ConcurrentTransactions {
			t.Fatalf("next end (commit %v) while PrepareCommit: %+v, want CONCURRENT_TRANSACTIONS", commit, got)
		}
	}
	if got := e.c.EndTxn("a", r.ProducerID, e2, true, 2); got.Err != kerr.ConcurrentTransactions {
		t.Fatalf("retried commit while PrepareCommit: %+v", got)
	}
	close(e.markers.gate)
	e.waitState(e.c, "a", CompleteCommit)
	if got := e.c.EndTxn("a", r.ProducerID, e2+1, false, 2); got.Err != nil || got.Epoch != e2+2 {
		t.Fatalf("empty abort after the commit completed: %+v", got)
	}
	// An empty abort from Empty is allowed in version 2.
	r2 := e.init("b")
	if got := e.c.EndTxn("b", r2.ProducerID, r2.Epoch, false, 2); got.Err != nil || got.Epoch != r2.Epoch+1 {
		t.Fatalf("abort from Empty: %+v", got)
	}
	e.waitState(e.c, "b", CompleteAbort)
	if got := e.c.EndTxn("b", r2.ProducerID, r2.Epoch-1, false, 2); got.Err != kerr.ProducerFenced {
		t.Fatalf("older epoch: %+v", got)
	}
}

// At epoch 32766 a version-2 end moves the id to a new producer id at epoch 0.
func TestEpochExhaustionRotatesProducerID(t *testing.T) {
	e := newEnv(t, nil)
	r := e.init("a")
	_, m, _ := e.c.lookup("a")
	m.mu.Lock()
	m.producerEpoch = math.MaxInt16 - 1
	m.mu.Unlock()
	e.add("a", InitResult{ProducerID: r.ProducerID, Epoch: math.MaxInt16 - 1}, 2, tps("t", 0)...)
	got := e.c.EndTxn("a", r.ProducerID, math.MaxInt16-1, true, 2)
	if got.Err != nil {
		t.Fatal(got.Err)
	}
	d := e.waitState(e.c, "a", CompleteCommit)
	if d.ProducerID == r.ProducerID || d.Epoch != 0 {
		t.Fatalf("after exhaustion: pid %d epoch %d", d.ProducerID, d.Epoch)
	}
	if mk := e.markers.calls(); mk[0].ProducerID != r.ProducerID || mk[0].ProducerEpoch != math.MaxInt16 {
		t.Fatalf("markers of the exhausted id: %+v", mk[0])
	}
	// A retry of that end (old id, epoch 32766) is recognised.
	if got := e.c.EndTxn("a", r.ProducerID, math.MaxInt16-1, true, 2); got.Err != nil || got.ProducerID != d.ProducerID {
		t.Fatalf("retry after rotation: %+v", got)
	}
	// InitProducerId at an exhausted epoch (version 1 path) rotates too.
	r3 := e.init("c")
	_, m3, _ := e.c.lookup("c")
	m3.mu.Lock()
	m3.producerEpoch = math.MaxInt16 - 1
	m3.mu.Unlock()
	r4 := e.c.InitProducerID("c", 60000, &ProducerIDEpoch{r3.ProducerID, math.MaxInt16 - 1})
	if r4.Err != nil || r4.ProducerID == r3.ProducerID || r4.Epoch != 0 {
		t.Fatalf("init at exhausted epoch: %+v", r4)
	}
}

func TestAbortTimedOutTransactions(t *testing.T) {
	e := newEnv(t, nil)
	r := e.init("a")
	e.add("a", r, 0, tps("t", 0)...)
	ra := e.c.InitProducerID("slow", 120000, nil)
	e.add("slow", ra, 0, tps("t", 1)...)
	e.clock.Advance(60 * time.Second)
	e.c.AbortTimedOut() // not yet: 60 s is not past a 60 s timeout
	if d := e.c.Describe("a"); d.State != Ongoing {
		t.Fatalf("aborted at its timeout: %v", d.State)
	}
	e.clock.Advance(time.Millisecond)
	e.c.AbortTimedOut()
	d := e.waitState(e.c, "a", CompleteAbort)
	if d.Epoch <= r.Epoch {
		t.Fatalf("the timed-out producer's epoch was not bumped: %d", d.Epoch)
	}
	if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, true, 0); got.Err != kerr.ProducerFenced {
		t.Fatalf("commit after timeout: %v", got.Err)
	}
	if s := e.c.Describe("slow"); s.State != Ongoing {
		t.Fatalf("a transaction within its timeout was aborted: %v", s.State)
	}
	mk := e.markers.calls()
	if len(mk) != 1 || mk[0].Commit || mk[0].Partitions[0] != (TopicPartition{"t", 0}) {
		t.Fatalf("markers: %+v", mk)
	}
}

func TestExpireTransactionalIDs(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.IDExpiration = time.Hour })
	e.init("idle")
	r := e.init("busy")
	e.add("busy", r, 0, tps("t", 0)...)
	e.clock.Advance(30 * time.Minute)
	e.init("recent")
	e.clock.Advance(31 * time.Minute)
	e.c.ExpireTransactionalIDs()
	if d := e.c.Describe("idle"); d.Err != kerr.TransactionalIDNotFound {
		t.Fatalf("idle id: %+v", d)
	}
	if d := e.c.Describe("busy"); d.Err != nil || d.State != Ongoing {
		t.Fatalf("an open transaction expired: %+v", d)
	}
	if d := e.c.Describe("recent"); d.Err != nil {
		t.Fatalf("a recent id expired: %+v", d)
	}
	recs := e.log("idle").records(t)
	if last := recs[len(recs)-1]; last.id != "idle" || last.v != nil {
		t.Fatalf("no tombstone: %+v", last)
	}
	// The id starts over after expiry, with a new producer id.
	if r2 := e.init("idle"); r2.Epoch != 0 {
		t.Fatalf("re-init after expiry: %+v", r2)
	}
	// A reload does not bring the expired id back... (it was re-created, so check "gone" ids)
	c2 := e.newCoordinator(nil)
	for p := int32(0); p < 4; p++ {
		c2.Elect(p, 2)
	}
	e.waitLoaded(c2)
	if d := c2.Describe("busy"); d.State != Ongoing {
		t.Fatalf("reload: %+v", d)
	}
}

func TestResignAndLoading(t *testing.T) {
	e := newEnv(t, nil)
	r := e.init("a")
	p := e.c.PartitionFor("a")
	e.c.Resign(p)
	if got := e.c.InitProducerID("a", 60000, nil); got.Err != kerr.NotCoordinator {
		t.Fatalf("after resign: %v", got.Err)
	}
	if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, true, 0); got.Err != kerr.NotCoordinator {
		t.Fatalf("after resign: %v", got.Err)
	}
	if d := e.c.Describe("a"); d.Err != kerr.NotCoordinator {
		t.Fatalf("describe after resign: %v", d.Err)
	}
	// Loading: requests answer COORDINATOR_LOAD_IN_PROGRESS until the partition is read.
	gate := make(chan struct{})
	e.store.mu.Lock()
	e.store.logs[p] = &gatedLog{Log: e.store.logs[p], gate: gate}
	e.store.mu.Unlock()
	e.c.Elect(p, 2)
	if got := e.c.InitProducerID("a", 60000, nil); got.Err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("while loading: %v", got.Err)
	}
	if _, _, err := e.c.List(ListFilter{}); err != kerr.CoordinatorLoadInProgress {
		t.Fatalf("list while loading: %v", err)
	}
	close(gate)
	e.waitLoaded(e.c)
	if got := e.init("a"); got.Epoch != r.Epoch+1 {
		t.Fatalf("after reload: %+v", got)
	}
	e.c.Close()
	if got := e.c.InitProducerID("a", 60000, nil); got.Err != kerr.NotCoordinator {
		t.Fatalf("after close: %v", got.Err)
	}
}

type gatedLog struct {
	Log
	gate chan struct{}
}

func (g *gatedLog) ReadBatches(fn func([]byte) error) error {
	<-g.gate
	return g.Log.ReadBatches(fn)
}

func TestAppendFailureAbandonsTransition(t *testing.T) {
	e := newEnv(t, nil)
	r := e.init("a")
	l := e.log("a")
	for _, c := range []struct {
		err  error
		want *kerr.Error
	}{
		{errors.New("disk gone"), kerr.NotCoordinator},
		{fmt.Errorf("x: %w", kerr.NotEnoughReplicas), kerr.CoordinatorNotAvailable},
		{fmt.Errorf("x: %w", kerr.NotLeaderForPartition), kerr.NotCoordinator},
		{kerr.MessageTooLarge, kerr.UnknownServerError},
	} {
		l.setFail(c.err)
		if got := e.c.InitProducerID("a", 60000, nil); got.Err != c.want {
			t.Errorf("append error %v: %v, want %v", c.err, got.Err, c.want)
		}
		if d := e.c.Describe("a"); d.Epoch != r.Epoch || d.State != Empty {
			t.Fatalf("a failed write changed the state: %+v", d)
		}
	}
	l.setFail(nil)
	if got := e.init("a"); got.Epoch != r.Epoch+1 {
		t.Fatalf("after the log recovered: %+v", got)
	}
	// A failed fence write is not bumped again on retry (Kafka's hasFailedEpochFence).
	r2 := e.init("a")
	e.add("a", r2, 0, tps("t", 0)...)
	l.setFail(kerr.NotEnoughReplicas)
	if got := e.c.InitProducerID("a", 60000, nil); got.Err != kerr.CoordinatorNotAvailable {
		t.Fatalf("fence with a failing log: %v", got.Err)
	}
	l.setFail(nil)
	if got := e.c.InitProducerID("a", 60000, nil); got.Err != kerr.ConcurrentTransactions {
		t.Fatalf("fence retry: %v", got.Err)
	}
	d := e.waitState(e.c, "a", CompleteAbort)
	if d.Epoch != r2.Epoch+2 { // fence (+1, not repeated) and the version-2 abort (+1)
		t.Fatalf("epoch after a failed then successful fence: %d, want %d", d.Epoch, r2.Epoch+2)
	}
}

func TestMarkerRetries(t *testing.T) {
	e := newEnv(t, nil)
	e.markers.answer = func(tp TopicPartition, attempt int) error {
		switch {
		case tp.Partition == 0 && attempt <= 2:
			return kerr.NotLeaderForPartition
		case tp.Partition == 1:
			return ErrPartitionGone
		}
		return nil
	}
	r := e.init("a")
	e.add("a", r, 2, tps("t", 0, 1, 2)...)
	if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, true, 2); got.Err != nil {
		t.Fatal(got.Err)
	}
	e.waitState(e.c, "a", CompleteCommit)
	calls := e.markers.calls()
	if len(calls) != 3 || len(calls[0].Partitions) != 3 || !reflect.DeepEqual(calls[1].Partitions, tps("t", 0)) {
		t.Fatalf("marker calls: %+v", calls)
	}
	// A fenced coordinator stops sending and does not complete.
	e.markers.answer = func(TopicPartition, int) error { return kerr.TransactionCoordinatorFenced }
	r2 := e.init("b")
	e.add("b", r2, 2, tps("t", 7)...)
	if got := e.c.EndTxn("b", r2.ProducerID, r2.Epoch, false, 2); got.Err != nil {
		t.Fatal(got.Err)
	}
	time.Sleep(20 * time.Millisecond)
	if d := e.c.Describe("b"); d.State != PrepareAbort {
		t.Fatalf("fenced coordinator completed: %v", d.State)
	}
}

// Failover in the middle of a commit: PrepareCommit is durable, no marker was written; the next
// coordinator loads the partition and completes the commit.
func TestFailoverCompletesCommit(t *testing.T) {
	e := newEnv(t, nil)
	e.markers.gate = make(chan struct{}) // the first coordinator's markers never go out
	r := e.init("a")
	e.add("a", r, 2, tps("t", 0, 1)...)
	rb := e.init("b")
	e.add("b", rb, 2, tps("u", 0)...)
	if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, true, 2); got.Err != nil {
		t.Fatal(got.Err)
	}
	if got := e.c.EndTxn("b", rb.ProducerID, rb.Epoch, false, 2); got.Err != nil {
		t.Fatal(got.Err)
	}
	e.c.Close() // the coordinator dies
	if n := len(e.markers.calls()); n != 0 {
		t.Fatalf("%d marker calls before failover", n)
	}

	e.markers.mu.Lock()
	e.markers.gate = nil
	e.markers.mu.Unlock()
	c2 := e.newCoordinator(nil)
	if got := c2.InitProducerID("a", 60000, nil); got.Err != kerr.NotCoordinator {
		t.Fatalf("before election: %v", got.Err)
	}
	for p := int32(0); p < 4; p++ {
		c2.Elect(p, 2)
	}
	e.waitLoaded(c2)
	da := e.waitState(c2, "a", CompleteCommit)
	e.waitState(c2, "b", CompleteAbort)
	if da.Epoch != r.Epoch+1 || len(da.Partitions) != 0 {
		t.Fatalf("after failover: %+v", da)
	}
	byPID := map[int64]Marker{}
	for _, m := range e.markers.calls() {
		byPID[m.ProducerID] = m
	}
	if m := byPID[r.ProducerID]; !m.Commit || m.CoordinatorEpoch != 2 || m.ProducerEpoch != r.Epoch+1 || !reflect.DeepEqual(m.Partitions, tps("t", 0, 1)) {
		t.Fatalf("resent commit markers: %+v", m)
	}
	if m := byPID[rb.ProducerID]; m.Commit || m.CoordinatorEpoch != 2 {
		t.Fatalf("resent abort markers: %+v", m)
	}
	// The producer goes on with the epoch it was given.
	for _, err := range c2.AddPartitions("a", r.ProducerID, r.Epoch+1, tps("t", 3), false, 2) {
		if err != nil {
			t.Fatalf("add after failover: %v", err)
		}
	}
}

func TestDescribeAndList(t *testing.T) {
	e := newEnv(t, nil)
	ra := e.init("a")
	e.add("a", ra, 0, tps("t", 1, 0)...)
	rb := e.init("b")
	if d := e.c.Describe("a"); d.Err != nil || d.State != Ongoing || d.ProducerID != ra.ProducerID || d.TimeoutMs != 60000 ||
		!reflect.DeepEqual(d.Partitions, tps("t", 0, 1)) {
		t.Fatalf("describe: %+v", d)
	}
	if d := e.c.Describe("zzz"); d.Err != kerr.TransactionalIDNotFound {
		t.Fatalf("describe unknown: %+v", d)
	}
	if d := e.c.Describe(""); d.Err != kerr.InvalidRequest {
		t.Fatalf("describe empty: %+v", d)
	}
	all, unknown, err := e.c.List(ListFilter{MinDurationMs: -1})
	if err != nil || len(all) != 2 || len(unknown) != 0 {
		t.Fatalf("list: %+v %v %v", all, unknown, err)
	}
	ongoing, unknown, _ := e.c.List(ListFilter{States: []string{"Ongoing", "Bogus"}, MinDurationMs: -1})
	if len(ongoing) != 1 || ongoing[0].TransactionalID != "a" || !reflect.DeepEqual(unknown, []string{"Bogus"}) {
		t.Fatalf("state filter: %+v %v", ongoing, unknown)
	}
	byPID, _, _ := e.c.List(ListFilter{ProducerIDs: []int64{rb.ProducerID}, MinDurationMs: -1})
	if len(byPID) != 1 || byPID[0].TransactionalID != "b" {
		t.Fatalf("producer filter: %+v", byPID)
	}
	byID, _, _ := e.c.List(ListFilter{IDPattern: regexp.MustCompile("^b$"), MinDurationMs: -1})
	if len(byID) != 1 || byID[0].TransactionalID != "b" {
		t.Fatalf("id pattern filter: %+v", byID)
	}
	e.clock.Advance(10 * time.Second)
	long, _, _ := e.c.List(ListFilter{States: []string{"Ongoing"}, MinDurationMs: 5000})
	short, _, _ := e.c.List(ListFilter{States: []string{"Ongoing"}, MinDurationMs: 50000})
	if len(long) != 1 || len(short) != 0 {
		t.Fatalf("duration filter: %+v %+v", long, short)
	}
}

// A client's EndTxn while a fence is prepared (by InitProducerId or the timeout scan) answers
// CONCURRENT_TRANSACTIONS: only the fencing abort may take the fence over.
func TestClientEndTxnDuringFence(t *testing.T) {
	for _, tv := range []int16{0, 2} {
		e := newEnv(t, nil)
		r := e.init("a")
		e.add("a", r, tv, tps("t", 0)...)
		_, m, _ := e.c.lookup("a")
		m.mu.Lock()
		tr, err := m.prepareFenceProducerEpoch()
		m.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		for _, commit := range []bool{true, false} {
			if got := e.c.EndTxn("a", r.ProducerID, r.Epoch, commit, tv); got.Err != kerr.ConcurrentTransactions {
				t.Fatalf("tv%d commit=%v during a fence: %+v", tv, commit, got)
			}
		}
		if got := e.c.endTxn("a", tr.producerID, tr.producerEpoch, false, false, tv); got.Err != nil {
			t.Fatalf("tv%d fencing abort: %+v", tv, got)
		}
		e.waitState(e.c, "a", CompleteAbort)
	}
}

func TestResponseErrorForOldVersions(t *testing.T) {
	for _, c := range []struct {
		api, version int16
		want         *kerr.Error
	}{
		{22, 3, kerr.InvalidProducerEpoch}, {22, 4, kerr.ProducerFenced},
		{24, 1, kerr.InvalidProducerEpoch}, {24, 2, kerr.ProducerFenced},
		{25, 1, kerr.InvalidProducerEpoch}, {25, 4, kerr.ProducerFenced},
		{26, 1, kerr.InvalidProducerEpoch}, {26, 5, kerr.ProducerFenced},
	} {
		if got := ResponseError(kerr.ProducerFenced, c.api, c.version); got != c.want {
			t.Errorf("api %d v%d: %v, want %v", c.api, c.version, got, c.want)
		}
	}
	if got := ResponseError(kerr.ConcurrentTransactions, 22, 0); got != kerr.ConcurrentTransactions {
		t.Fatalf("other errors pass through: %v", got)
	}
}
