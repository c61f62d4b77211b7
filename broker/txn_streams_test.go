package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// streamsKillEnv, set to 1, runs TestClusterStreamsEOSBrokerKill (a Kafka Streams exactly_once_v2
// word count during which a broker is SIGKILLed and restarted); its last result is in
// docs/compatibility.md.
const streamsKillEnv = "WEIR_STREAMS_KILL"

// TestClusterStreamsEOS: a Kafka Streams 4.x application with processing.guarantee=exactly_once_v2
// (broker/testdata/streams/WeirWordCount.java: a word count with a repartition topic and a state
// store changelog, two stream threads, so two transactional producers) counts the words of 20k
// lines on a 3-broker cluster. The output read with read_committed holds, per word, strictly
// increasing counts ending at the exact count (a duplicate or an aborted transaction's record
// would repeat or overshoot a count), and the application's committed input offsets, written in
// its transactions, are at the end of the input.
func TestClusterStreamsEOS(t *testing.T) {
	streamsWordCount(t, false)
}

// TestClusterStreamsEOSBrokerKill: as TestClusterStreamsEOS, but the transaction coordinator of
// one of the application's transactional ids is SIGKILLed while input is still arriving, and
// restarted a few seconds later; later the Streams JVM itself is SIGKILLed and started again.
// The result must still be exact. Set WEIR_STREAMS_KILL=1.
func TestClusterStreamsEOSBrokerKill(t *testing.T) {
	if os.Getenv(streamsKillEnv) == "" {
		t.Skip(streamsKillEnv + " not set: the broker-kill variant of the Streams test takes minutes (result in docs/compatibility.md)")
	}
	streamsWordCount(t, true)
}

// streamsJava returns the folder of Kafka jars and compiles WeirWordCount.java into a temporary
// folder, or skips the test when the Java client or a JDK is not there.
func streamsJava(t *testing.T) (libs, classes string) {
	t.Helper()
	libs = os.Getenv("WEIR_KAFKA_LIBS")
	if libs == "" {
		t.Skip("WEIR_KAFKA_LIBS not set: the Java client is not available")
	}
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip("no " + tool)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(libs, "kafka-streams-*.jar")); len(m) == 0 {
		t.Skip("no kafka-streams jar in WEIR_KAFKA_LIBS: refresh it with scripts/kafka-libs.sh")
	}
	if testing.Short() {
		t.Skip("process cluster and a JVM")
	}
	classes = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "javac", "-cp", libs+"/*", "-d", classes, filepath.Join("testdata", "streams", "WeirWordCount.java")).CombinedOutput()
	if err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return libs, classes
}

// wordCountInput is n lines of words from a fixed vocabulary (deterministic), and the count of
// each word, tokenised as WeirWordCount does (lower case, split on non-word characters).
func wordCountInput(n int) (lines []string, counts map[string]int64) {
	counts = map[string]int64{}
	r := rand.New(rand.NewPCG(12, 34))
	seps := []string{" ", "  ", ", ", ". ", "; ", " - "}
	for i := 0; i < n; i++ {
		var sb strings.Builder
		words := 1 + r.IntN(8)
		for j := 0; j < words; j++ {
			w := "w" + strconv.Itoa(r.IntN(400))
			if j > 0 {
				sb.WriteString(seps[r.IntN(len(seps))])
			}
			if r.IntN(5) == 0 {
				sb.WriteString(strings.ToUpper(w))
			} else {
				sb.WriteString(w)
			}
			counts[w]++
		}
		lines = append(lines, sb.String())
	}
	return lines, counts
}

// javaProc is a running JVM whose output is kept for the test log.
type javaProc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex // guards out
	out  strings.Builder
	done chan struct{}
	err  error // set before done is closed
	// running is closed at the first "STATE ... -> RUNNING" line.
	running     chan struct{}
	runningOnce sync.Once
}

func startJava(t *testing.T, args ...string) *javaProc {
	t.Helper()
	p := &javaProc{cmd: exec.Command("java", args...), done: make(chan struct{}), running: make(chan struct{})}
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	scanned := make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if p.out.Len() < 4<<20 {
				p.out.WriteString(line)
				p.out.WriteByte('\n')
			}
			p.mu.Unlock()
			if strings.HasPrefix(line, "STATE ") && strings.HasSuffix(line, "-> RUNNING") {
				p.runningOnce.Do(func() { close(p.running) })
			}
		}
		_, _ = io.Copy(io.Discard, pr)
		close(scanned)
	}()
	go func() {
		p.err = p.cmd.Wait()
		pw.Close()
		<-scanned // every line of the output is in p.out once done is closed
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(30 * time.Second)
		if t.Failed() {
			t.Logf("--- Kafka Streams output ---\n%s", tail(p.output(), 80))
		}
	})
	return p
}

func (p *javaProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// stop sends SIGTERM (Streams closes cleanly in its shutdown hook) and SIGKILL after within.
func (p *javaProc) stop(within time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.err, &ee) && ee.ExitCode() == 128+int(syscall.SIGTERM) {
			return nil // the JVM's status after its shutdown hooks ran on SIGTERM
		}
		return p.err
	case <-time.After(within):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("no exit %v after SIGTERM: killed", within)
	}
}

// wordCounts follows the output topic with read_committed and checks every record as it arrives:
// per word the counts must strictly increase and never pass the expected count.
type wordCounts struct {
	last        map[string]int64
	recs        int
	errs        []string
	consecutive bool // without a record cache each count is the previous one plus one
}

func (w *wordCounts) add(r *kgo.Record, want map[string]int64) {
	w.recs++
	k := string(r.Key)
	if len(r.Value) != 8 {
		w.errs = append(w.errs, fmt.Sprintf("word %q: value of %d bytes", k, len(r.Value)))
		return
	}
	v := int64(binary.BigEndian.Uint64(r.Value))
	exp, ok := want[k]
	switch {
	case !ok:
		w.errs = append(w.errs, fmt.Sprintf("unexpected word %q (count %d) at %d/%d", k, v, r.Partition, r.Offset))
	case v <= w.last[k]:
		w.errs = append(w.errs, fmt.Sprintf("word %q: count %d after %d at %d/%d (a duplicate or an aborted record)", k, v, w.last[k], r.Partition, r.Offset))
	case v > exp:
		w.errs = append(w.errs, fmt.Sprintf("word %q: count %d above the expected %d at %d/%d", k, v, exp, r.Partition, r.Offset))
	case w.consecutive && v != w.last[k]+1:
		w.errs = append(w.errs, fmt.Sprintf("word %q: count %d after %d at %d/%d (an update lost)", k, v, w.last[k], r.Partition, r.Offset))
	}
	w.last[k] = v
}

// missing is how many words do not have their final count yet.
func (w *wordCounts) missing(want map[string]int64) int {
	n := 0
	for k, v := range want {
		if w.last[k] != v {
			n++
		}
	}
	return n
}

func streamsWordCount(t *testing.T, kill bool) {
	libs, classes := streamsJava(t)
	c := startCluster(t, 3, nil)
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const in, out, appID, nLines = "wc-input", "wc-output", "weir-wordcount", 20000
	for _, topic := range []string{in, out} {
		createReplicatedTopic(t, adm, topic, 3, 3, nil)
	}
	lines, want := wordCountInput(nLines)

	dir := t.TempDir()
	props := strings.Join([]string{
		"application.id=" + appID,
		"bootstrap.servers=" + strings.Join(c.addrs(), ","),
		"processing.guarantee=exactly_once_v2",
		"replication.factor=3", // repartition and changelog topics survive a broker kill
		"num.stream.threads=2",
		"commit.interval.ms=100",
		"session.timeout.ms=10000", // a SIGKILLed instance leaves the group within 10 s
		"state.dir=" + filepath.Join(dir, "state"),
		"weir.input.topic=" + in,
		"weir.output.topic=" + out,
	}, "\n") + "\n"
	if kill {
		// No record cache: every count update goes to the changelog and the output at once, so
		// a transaction open when the application dies usually holds output records that must
		// be aborted, and each word's counts must go up by exactly one. Commits every 2 s keep
		// transactions open long enough to be caught with records in the output (the later
		// commit.interval.ms line overrides the earlier one).
		props += "statestore.cache.max.bytes=0\ncommit.interval.ms=2000\n"
	}
	propsFile := filepath.Join(dir, "wordcount.properties")
	if err := os.WriteFile(propsFile, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	launch := func() *javaProc {
		t.Helper()
		return startJava(t, "-Xmx384m", "-XX:+UseSerialGC", "-Djava.io.tmpdir="+dir,
			"-cp", libs+"/*"+string(os.PathListSeparator)+classes, "WeirWordCount", propsFile)
	}
	java := launch()
	select {
	case <-java.running:
		t.Logf("Streams RUNNING after %v", time.Since(start).Round(time.Millisecond))
	case <-java.done:
		t.Fatalf("Streams exited before RUNNING: %v", java.err)
	case <-time.After(90 * time.Second):
		t.Fatal("Streams not RUNNING after 90 s")
	}

	// The input arrives in slices while Streams runs, so that the application commits many
	// transactions; with kill, a broker dies after the first half.
	src := c.client(kgo.DefaultProduceTopic(in), kgo.RequiredAcks(kgo.AllISRAcks()))
	produceAsync := func(ls []string) {
		for i, l := range ls {
			src.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(l)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce input: %v", err)
				}
			})
		}
	}
	flush := func() {
		t.Helper()
		if err := src.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	const nSlices = 10
	per := nLines / nSlices
	victim := -1
	for s := 0; s < nSlices; s++ {
		produceAsync(lines[s*per : (s+1)*per])
		if kill && s == nSlices-2 {
			// The application itself dies inside a transaction that has written output
			// records: its successor (same state directory, so the same process id and
			// transactional ids) fences it, the open transaction is aborted, and the state is
			// restored from the changelog.
			streamsWaitOpenData(t, c, ctx, out)
			_ = java.cmd.Process.Kill()
			<-java.done
			java = launch()
			t.Logf("Streams SIGKILLed inside a transaction and started again")
		}
		flush()
		if kill && s == nSlices/2-1 {
			victim = streamsKillCoordinator(t, c, adm, ctx, appID)
		}
		if kill && victim >= 0 && s == nSlices/2+2 {
			c.restart(victim)
			t.Logf("broker %d restarted", c.nodes[victim].id)
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("input of %d lines written after %v", nLines, time.Since(start).Round(time.Millisecond))

	// Follow the output with read_committed until every word has its final count.
	rd := c.client(kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(300*time.Millisecond))
	wc := &wordCounts{last: map[string]int64{}, consecutive: kill}
	deadline := time.Now().Add(4 * time.Minute)
	for wc.missing(want) > 0 && len(wc.errs) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 4 min: %d of %d words without their final count (%d output records)", wc.missing(want), len(want), wc.recs)
		}
		select {
		case <-java.done:
			t.Fatalf("Streams exited: %v", java.err)
		default:
		}
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := rd.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { wc.add(r, want) })
	}
	if len(wc.errs) > 0 {
		t.Fatalf("read_committed output: %d errors, first: %s", len(wc.errs), strings.Join(wc.errs[:min(len(wc.errs), 10)], "; "))
	}
	t.Logf("exact counts of %d words (%d output records) after %v", len(want), wc.recs, time.Since(start).Round(time.Millisecond))

	// A short quiet time: nothing more may arrive, and nothing that arrives may change a count.
	quiet := time.Now().Add(2 * time.Second)
	for time.Now().Before(quiet) {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := rd.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) { wc.add(r, want) })
	}
	if len(wc.errs) > 0 || wc.missing(want) > 0 {
		t.Fatalf("after the quiet time: %d words off, errors: %v", wc.missing(want), wc.errs[:min(len(wc.errs), 10)])
	}
	if err := java.stop(60 * time.Second); err != nil {
		t.Errorf("Streams stop: %v", err)
	}
	if !strings.Contains(java.output(), "CLOSED true") {
		t.Errorf("Streams did not close cleanly:\n%s", tail(java.output(), 10))
	}

	// The application's input offsets, committed in its transactions, are at the input's end.
	// A new client: adm may still hold a connection to the killed broker process, and franz-go
	// does not retry a sharded FindCoordinator whose connection reads EOF.
	adm = kadm.NewClient(c.client())
	offs, err := adm.FetchOffsets(ctx, appID)
	if err != nil {
		t.Fatalf("OffsetFetch of %s: %v; brokers' warnings:\n%s", appID, err, clusterWarnings(c))
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == in {
			sum += o.At
		}
	})
	if sum != nLines {
		t.Errorf("group %s: input offsets sum to %d, want %d", appID, sum, nLines)
	}

	// For the record: what read_uncommitted sees (aborted transactions' records included).
	ends, err := adm.ListEndOffsets(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	var ids []string
	if ls, err := adm.ListTransactions(ctx, nil, nil); err == nil {
		for id := range ls {
			if strings.HasPrefix(id, appID) {
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	all := 0
	ru := c.client(kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(300*time.Millisecond))
	for idle, stop := 0, time.Now().Add(30*time.Second); idle < 3 && time.Now().Before(stop); {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := ru.PollFetches(pctx)
		pcancel()
		if fs.NumRecords() == 0 {
			idle++
		}
		all += fs.NumRecords()
	}
	t.Logf("output: log end offsets sum to %d (data and markers); read_uncommitted %d records, read_committed %d (%d of aborted transactions); transactional ids %v",
		end, all, wc.recs, all-wc.recs, ids)
}

// streamsKillCoordinator SIGKILLs the transaction coordinator of one of the Streams application's
// transactional ids (application id, process id, thread) and returns its index.
func streamsKillCoordinator(t *testing.T, c *testCluster, adm *kadm.Client, ctx context.Context, appID string) int {
	t.Helper()
	var id string
	waitFor(t, 30*time.Second, "a transactional id of "+appID, func() (bool, string) {
		ls, err := adm.ListTransactions(ctx, nil, nil)
		if err != nil {
			return false, err.Error()
		}
		for tid := range ls {
			if strings.HasPrefix(tid, appID) {
				id = tid
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d ids", len(ls))
	})
	co, ok := adm.FindTxnCoordinators(ctx, id)[id]
	if !ok || co.Err != nil {
		t.Fatalf("coordinator of %s: %+v", id, co)
	}
	i := c.index(co.NodeID)
	c.signal(i, syscall.SIGKILL)
	t.Logf("SIGKILLed broker %d, the transaction coordinator of %s", co.NodeID, id)
	return i
}

// streamsWaitOpenData waits (20 s at most) until a partition of the output topic holds records of
// an open transaction: its high watermark is above its last stable offset read just after.
func streamsWaitOpenData(t *testing.T, c *testCluster, ctx context.Context, out string) {
	t.Helper()
	adm := kadm.NewClient(c.client())
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		hw, err := adm.ListEndOffsets(ctx, out)
		if err != nil {
			continue
		}
		lso, err := adm.ListCommittedOffsets(ctx, out) // ListOffsets with read_committed
		if err != nil {
			continue
		}
		open := false
		hw.Each(func(o kadm.ListedOffset) {
			if l, ok := lso.Lookup(out, o.Partition); ok && l.Err == nil && o.Err == nil && l.Offset < o.Offset {
				open = true
			}
		})
		if open {
			return
		}
	}
	t.Fatalf("no open transaction with records in %s within 20 s", out)
}

// clusterWarnings is every WARN, ERROR or panic line (raft's own excepted) of every node's
// output, for a failure message.
func clusterWarnings(c *testCluster) string {
	var b strings.Builder
	for _, n := range c.tc.Nodes() {
		for _, line := range strings.Split(n.AllOutput(), "\n") {
			if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "panic")) &&
				!strings.Contains(line, "raft:") {
				fmt.Fprintf(&b, "node %d: %s\n", n.ID, line)
			}
		}
	}
	return tail(b.String(), 60)
}
