package broker

// Restarts of a real `weir serve` process in the middle of client traffic: a clean stop
// (SIGTERM) must leave the clean-shutdown marker and restart without recovery; a SIGKILL while an
// acks=all producer runs must lose no acknowledged record.

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/internal/testcluster"
	"github.com/weir-mq/weir/internal/testcluster/tbcluster"
)

// buildWeir returns the weir binary, built once per test binary by internal/testcluster (dir is
// not used any more: the binary is shared by every test of the process).
func buildWeir(t *testing.T, _ string) string {
	t.Helper()
	return tbcluster.Binary(t)
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// weirProc is a running single `weir serve` (its own one-node quorum), started by
// internal/testcluster, which waits for its /readyz.
type weirProc struct {
	node *testcluster.Node
	addr string
	out  nodeOutput
}

// nodeOutput prints (%s, String) a node's output of its current run.
type nodeOutput struct{ n *testcluster.Node }

func (o nodeOutput) String() string { return o.n.Output() }

// startSingle starts `weir serve` on 127.0.0.1:port with data in dir and props, wrapped by wrap
// when set, and waits for its /readyz.
func startSingle(t *testing.T, bin, dir string, port int, props map[string]string, wrap func([]string) []string) *weirProc {
	t.Helper()
	cfg := testcluster.Config{Binary: bin, N: 1, Single: true, BasePort: port, Props: props,
		NodeProps:    func(*testcluster.Node) map[string]string { return map[string]string{"log.dirs": dir} },
		StartTimeout: 20 * time.Second}
	if wrap != nil {
		cfg.Wrap = func(_ *testcluster.Node, argv []string) []string { return wrap(argv) }
	}
	c := tbcluster.New(t, cfg)
	n := c.Node(1)
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("weir serve: %v", err)
	}
	return &weirProc{node: n, addr: n.Addr(), out: nodeOutput{n}}
}

// startWeir runs `weir serve` on 127.0.0.1:port with data in dir and waits until it serves.
func startWeir(t *testing.T, bin, dir string, port int) *weirProc {
	t.Helper()
	return startSingle(t, bin, dir, port, nil, nil)
}

// stop sends sig and waits (bounded) for the process to exit; it returns the exit's error.
func (p *weirProc) stop(t *testing.T, sig syscall.Signal, within time.Duration) error {
	t.Helper()
	if err := p.node.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if err := p.node.WaitExit(within); err != nil {
		_ = p.node.Kill()
		t.Fatalf("weir serve did not exit within %v of %v\n%s", within, sig, p.out)
	}
	return p.node.ExitErr()
}

// recoveryLine matches what the engine logs when it scans or repairs segments at start.
var recoveryLine = regexp.MustCompile(`(?i)recover|truncat|rebuild|corrupt|unreadable`)

func TestRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the weir binary")
	}
	bin := buildWeir(t, t.TempDir())
	t.Run("sigterm", func(t *testing.T) { testRestartClean(t, bin) })
	t.Run("sigkill", func(t *testing.T) { testRestartKill(t, bin) })
}

// testRestartClean: produce N records (acks all), SIGTERM with a consumer parked in a long poll,
// check the clean-shutdown marker, restart (no recovery logged) and read all N back.
func testRestartClean(t *testing.T, bin string) {
	dir, port := t.TempDir(), freePort(t)
	p := startWeir(t, bin, dir, port)
	createTopic(t, p.addr, "clean", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 3000
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	rng := rand.New(rand.NewPCG(3, 3))
	want := makeRecords(rng, "clean", n, 2, base)
	prod := newKgo(t, p.addr, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for _, r := range want {
		recs = append(recs, r.kgo("clean"))
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()

	// An idle consumer parked in a 10 s long poll must not hold up the shutdown.
	idle := newKgo(t, p.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"clean": {0: kgo.NewOffset().AtEnd()}}),
		kgo.FetchMaxWait(10*time.Second))
	pollCtx, pollCancel := context.WithCancel(ctx)
	defer pollCancel()
	go func() {
		for pollCtx.Err() == nil {
			idle.PollFetches(pollCtx)
		}
	}()
	time.Sleep(300 * time.Millisecond)

	start := time.Now()
	if err := p.stop(t, syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("weir serve exit after SIGTERM: %v\n%s", err, p.out)
	}
	t.Logf("clean shutdown took %v", time.Since(start))
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("clean shutdown took %v with a consumer parked in a 10 s long poll", d)
	}
	pollCancel()
	idle.Close()
	if _, err := os.Stat(filepath.Join(dir, engine.CleanShutdownFile)); err != nil {
		t.Fatalf("no clean-shutdown marker after SIGTERM: %v\n%s", err, p.out)
	}
	if !bytes.Contains([]byte(p.out.String()), []byte("stopped cleanly")) {
		t.Errorf("no 'stopped cleanly' in the log:\n%s", p.out)
	}

	p2 := startWeir(t, bin, dir, port)
	if _, err := os.Stat(filepath.Join(dir, engine.CleanShutdownFile)); err == nil {
		t.Errorf("clean-shutdown marker still present after the restart")
	}
	checkRecords(t, want, consumeKgo(t, p2.addr, "clean", n, 20*time.Second))
	if m := recoveryLine.FindString(p2.out.String()); m != "" {
		t.Errorf("restart after a clean shutdown logged %q:\n%s", m, p2.out)
	}
	if err := p2.stop(t, syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatalf("second shutdown: %v\n%s", err, p2.out)
	}
}

// testRestartKill: SIGKILL while producers with acks=all run, restart on the same dir, and
// check every acknowledged record is there, in order.
//
// Partition 0: a non-idempotent producer that is closed before the restart, so nothing it sent is
// ever retried to the new process: every record is stored at most once, and each acknowledged
// one exactly once. Partition 1: an idempotent producer (franz-go's default, unlimited retries)
// that keeps running across the restart and carries on once the broker is back: every
// acknowledged record must be there, in order (a retried batch may only be stored twice if
// deduplication failed, which is reported).
func testRestartKill(t *testing.T, bin string) {
	dir, port := t.TempDir(), freePort(t)
	p := startWeir(t, bin, dir, port)
	createTopic(t, p.addr, "kill", 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	type acked struct {
		mu   sync.Mutex
		seqs []int // acknowledged sequence numbers, in acknowledgement order
	}
	var ack [2]acked
	const maxRecords = 200_000
	produce := func(cl *kgo.Client, part int32, stop <-chan struct{}, wg *sync.WaitGroup) {
		defer wg.Done()
		for i := 0; i < maxRecords; i++ {
			select {
			case <-stop:
				return
			default:
			}
			seq := i
			r := &kgo.Record{Topic: "kill", Partition: part, Value: []byte(strconv.Itoa(seq))}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err == nil {
					ack[part].mu.Lock()
					ack[part].seqs = append(ack[part].seqs, seq)
					ack[part].mu.Unlock()
				}
			})
		}
	}
	opts := []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(2000), kgo.ProducerLinger(time.Millisecond)}
	plain := newKgo(t, p.addr, append(opts, kgo.DisableIdempotentWrite(), kgo.RecordDeliveryTimeout(3*time.Second))...)
	idem := newKgo(t, p.addr, append(opts, kgo.RecordDeliveryTimeout(30*time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))...)
	stopPlain, stopIdem := make(chan struct{}), make(chan struct{})
	var wgPlain, wgIdem sync.WaitGroup
	wgPlain.Add(1)
	wgIdem.Add(1)
	go produce(plain, 0, stopPlain, &wgPlain)
	go produce(idem, 1, stopIdem, &wgIdem)

	// Kill once both producers have had some records acknowledged (bounded in time).
	ackedCount := func(part int) int {
		ack[part].mu.Lock()
		defer ack[part].mu.Unlock()
		return len(ack[part].seqs)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ackedCount(0) >= 3000 && ackedCount(1) >= 3000 {
			break
		}
	}
	if err := p.stop(t, syscall.SIGKILL, 10*time.Second); err == nil {
		t.Fatal("weir serve exited cleanly after SIGKILL")
	}
	killedAt := [2]int{ackedCount(0), ackedCount(1)}
	t.Logf("killed with %d and %d records acknowledged", killedAt[0], killedAt[1])

	// The non-idempotent producer stops for good before the restart.
	close(stopPlain)
	plain.Close()
	wgPlain.Wait()

	p2 := startWeir(t, bin, dir, port)
	t.Logf("restart log:\n%s", p2.out)

	// The idempotent producer reconnects and carries on; stop it a little later.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ackedCount(1) >= killedAt[1]+1000 {
			break
		}
	}
	close(stopIdem)
	if err := idem.Flush(ctx); err != nil {
		t.Errorf("idempotent producer flush after the restart: %v", err)
	}
	wgIdem.Wait()
	if ackedCount(1) <= killedAt[1] {
		t.Errorf("idempotent producer got nothing acknowledged after the restart")
	}

	adm := kadm.NewClient(newKgo(t, p2.addr))
	ends, err := adm.ListEndOffsets(ctx, "kill")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	ends.Each(func(o kadm.ListedOffset) { total += int(o.Offset) })
	got := consumeKgo(t, p2.addr, "kill", total, 20*time.Second)
	for part := int32(0); part < 2; part++ {
		ack[part].mu.Lock()
		acked := append([]int(nil), ack[part].seqs...)
		ack[part].mu.Unlock()
		seen := map[int]bool{}
		last := -1
		for i, r := range got[part] {
			seq, err := strconv.Atoi(string(r.Value))
			if err != nil {
				t.Fatalf("partition %d offset %d: value %q", part, i, r.Value)
			}
			if seen[seq] {
				t.Errorf("partition %d: record %d stored twice (offset %d)", part, seq, i)
			} else if seq < last {
				t.Errorf("partition %d: record %d at offset %d after record %d", part, seq, i, last)
			}
			seen[seq] = true
			last = max(last, seq)
		}
		missing := 0
		for _, seq := range acked {
			if !seen[seq] {
				if missing++; missing <= 5 {
					t.Errorf("partition %d: acknowledged record %d missing after the restart", part, seq)
				}
			}
		}
		t.Logf("partition %d: %d records stored, %d acknowledged, %d acknowledged missing", part, len(got[part]), len(acked), missing)
	}
	if t.Failed() {
		t.Logf("first start log:\n%s", p.out)
	}
}
