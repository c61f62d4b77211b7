// Command manyparts measures what many idle partitions cost one broker process and how fast it
// restarts with them: it starts a broker (-cmd, a weir binary by default), creates -n partitions
// (one topic, -records records each), and reports the broker's open descriptors (/proc/PID/fd),
// mappings (/proc/PID/maps lines) and RSS (VmRSS, RssAnon, RssFile from /proc/PID/status) after
// the load and after -idle; then it stops the broker with SIGTERM and starts it again (clean
// restart), and then kills it with SIGKILL and starts it again (restart after a crash of an idle
// broker that had restarted cleanly), each time timing from the start of the process to the
// acknowledgement of one produced record on every partition. Every wait is bounded by -timeout.
//
//	go build -o /tmp/weir ./cmd/weir
//	go run ./scripts/manyparts -weir /tmp/weir -n 5000 -dir /tmp/mp5000
//
// With -segments S it grows one topic of -n partitions (10 by default in this mode) to S segments
// instead (one record per segment: the topic's segment.ms is 1 and each record's timestamp is 10 ms
// after the previous one, so every produce rolls, as Kafka rolls by record timestamps), printing the
// rate of growth as it goes, and then restarts it (SIGKILL right after the growth, SIGTERM, SIGKILL
// of the idle broker):
//
//	go run ./scripts/manyparts -weir /tmp/weir -segments 100000 -dir /tmp/seg100k
//
// With -kafka DIR (the anchor directory holding start.sh, ../shared/anchors/kafka) it runs Apache
// Kafka instead of weir, with the same load and the same restarts (start.sh in DIR starts it; the
// time to the first acknowledged produce runs from the launch of start.sh).
//
// docs/benchmarks.md ("Many partitions") has the results.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	weirBin  = flag.String("weir", "weir", "weir binary")
	kafkaDir = flag.String("kafka", "", "run Apache Kafka from this anchor directory (start.sh) instead of weir")
	segsMode = flag.Int("segments", 0, "grow one topic to this many segments (one record each) instead of creating -n idle partitions")
	n        = flag.Int("n", 1000, "partitions (at most 100000; 10 by default with -segments)")
	records  = flag.Int("records", 10, "records per partition at creation (at most 1000)")
	dir      = flag.String("dir", "", "data directory (removed first; required)")
	addr     = flag.String("addr", "127.0.0.1:19092", "listener")
	timeout  = flag.Duration("timeout", 5*time.Minute, "bound of every wait")
	idle     = flag.Duration("idle", 5*time.Second, "idle time before measuring and before each stop")
	extra    = flag.String("set", "", "extra broker settings, comma-separated key=value")
	logPath  = flag.String("log", "", "broker log file (default <dir>.log)")
	logLevel = flag.String("log-level", "warn", "broker log level")
	heapAt   = flag.String("heap", "", "weir: serve pprof on this admin address (metrics.listener) and save the heap profile when idle to <dir>.heap.pb.gz")
	topic    = "manyparts"
	valueLen = 100
)

func main() {
	flag.Parse()
	if *segsMode > 0 {
		nSet := false
		flag.Visit(func(f *flag.Flag) { nSet = nSet || f.Name == "n" })
		if !nSet {
			*n = 10
		}
	}
	if *dir == "" || *n < 1 || *n > 100000 || *records < 1 || *records > 1000 {
		fmt.Fprintln(os.Stderr, "manyparts: -dir is required, 1 <= -n <= 100000, 1 <= -records <= 1000")
		os.Exit(2)
	}
	runFn := run
	if *segsMode > 0 {
		runFn = runSegments
	}
	if err := runFn(); err != nil {
		fmt.Fprintln(os.Stderr, "manyparts:", err)
		os.Exit(1)
	}
}

// broker is a running weir (a child process) or Kafka (started by start.sh, not a child).
type broker struct {
	cmd  *exec.Cmd
	done chan error
	pid  int
}

func start() (*broker, time.Time, error) {
	if *kafkaDir != "" {
		return startKafka()
	}
	args := []string{"serve", "--log-level", *logLevel,
		"--set", "log.dirs=" + filepath.Join(*dir, "data"),
		"--set", "listeners=PLAINTEXT://" + *addr,
		"--set", "offsets.topic.num.partitions=1",
		"--set", "metrics.listener=" + *heapAt,
	}
	if *heapAt != "" {
		args = append(args, "--set", "metrics.pprof.enable=true")
	}
	if *extra != "" {
		for _, kv := range strings.Split(*extra, ",") {
			args = append(args, "--set", kv)
		}
	}
	lp := *logPath
	if lp == "" {
		lp = strings.TrimSuffix(*dir, "/") + ".log"
	}
	lf, err := os.OpenFile(lp, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, time.Time{}, err
	}
	cmd := exec.Command(*weirBin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, t0, err
	}
	b := &broker{cmd: cmd, done: make(chan error, 1), pid: cmd.Process.Pid}
	go func() { b.done <- cmd.Wait(); lf.Close() }()
	deadline := time.Now().Add(*timeout)
	for {
		c, err := net.DialTimeout("tcp", *addr, time.Second)
		if err == nil {
			c.Close()
			return b, t0, nil
		}
		select {
		case err := <-b.done:
			return nil, t0, fmt.Errorf("broker exited: %v (see %s)", err, lp)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.kill()
			return nil, t0, errors.New("listener did not open")
		}
	}
}

func (b *broker) stop(sig syscall.Signal) error {
	if b.cmd == nil {
		return stopKafka(b.pid, sig)
	}
	_ = b.cmd.Process.Signal(sig)
	select {
	case <-b.done:
		return nil
	case <-time.After(*timeout):
		b.kill()
		return errors.New("broker did not stop")
	}
}

func (b *broker) kill() {
	if b.cmd == nil {
		_ = stopKafka(b.pid, syscall.SIGKILL)
		return
	}
	_ = b.cmd.Process.Kill()
	<-b.done
}

// stats reads the broker's descriptors, mappings and RSS.
func stats(pid int) string {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	kb := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(status)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 {
			v, _ := strconv.Atoi(f[1])
			kb[strings.TrimSuffix(f[0], ":")] = v
		}
	}
	return fmt.Sprintf("fds %d, maps %d, VmRSS %.1f MiB (anon %.1f, file %.1f)", len(fds),
		strings.Count(string(maps), "\n"), float64(kb["VmRSS"])/1024, float64(kb["RssAnon"])/1024, float64(kb["RssFile"])/1024)
}

func client() (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(*addr),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(*timeout), kgo.RecordRetries(1<<30),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(1<<20))
}

// produceAll produces per records to every partition and waits for every acknowledgement.
func produceAll(cl *kgo.Client, per int) error {
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Int64
	var first atomic.Value
	value := make([]byte, valueLen)
	for p := range *n {
		for range per {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err)
				}
				wg.Done()
			})
		}
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d records failed, first: %v", f, first.Load())
	}
	return nil
}

// restart stops the broker with sig, starts it and times from the start to one acknowledged
// record on every partition.
func restart(b *broker, sig syscall.Signal, what string) (*broker, error) {
	if err := b.stop(sig); err != nil {
		return nil, err
	}
	b, t0, err := start()
	if err != nil {
		return nil, err
	}
	listening := time.Since(t0)
	cl, err := client()
	if err != nil {
		return b, err
	}
	defer cl.Close()
	if err := produceAll(cl, 1); err != nil {
		return b, fmt.Errorf("%s: %w", what, err)
	}
	fmt.Printf("%s: listening after %.2f s, first produce acknowledged on all %d partitions after %.2f s; %s\n",
		what, listening.Seconds(), *n, time.Since(t0).Seconds(), stats(b.pid))
	return b, nil
}

func run() error {
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	b, _, err := start()
	if err != nil {
		return err
	}
	defer func() {
		if b != nil {
			b.kill()
		}
	}()
	fmt.Printf("%d partitions, %d records of %d B each; broker started: %s\n", *n, *records, valueLen, stats(b.pid))
	cl, err := client()
	if err != nil {
		return err
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(timeout.Milliseconds()))
	resp, err := adm.CreateTopic(ctx, int32(*n), 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) { // a retried create that had succeeded
		return fmt.Errorf("create topic: %w", err)
	}
	created := time.Since(t0)
	if err := produceAll(cl, *records); err != nil {
		cl.Close()
		return err
	}
	cl.Close()
	fmt.Printf("created in %.2f s, %d records on every partition acknowledged after %.2f s; %s\n",
		created.Seconds(), *records, time.Since(t0).Seconds(), stats(b.pid))
	time.Sleep(*idle)
	fmt.Printf("idle %s: %s\n", *idle, stats(b.pid))
	saveHeap()
	if b, err = restart(b, syscall.SIGTERM, "clean restart (SIGTERM)"); err != nil {
		return err
	}
	time.Sleep(*idle)
	if b, err = restart(b, syscall.SIGKILL, "restart after SIGKILL of the idle, cleanly restarted broker"); err != nil {
		return err
	}
	if b, err = restart(b, syscall.SIGKILL, "restart after SIGKILL right after producing"); err != nil {
		return err
	}
	err = b.stop(syscall.SIGTERM)
	b = nil
	return err
}

// saveHeap saves the broker's heap profile (-heap) to <dir>.heap.pb.gz.
func saveHeap() {
	if *heapAt == "" || *kafkaDir != "" {
		return
	}
	resp, err := http.Get("http://" + *heapAt + "/debug/pprof/heap?gc=1")
	if err != nil {
		fmt.Fprintln(os.Stderr, "manyparts: heap profile:", err)
		return
	}
	defer resp.Body.Close()
	out := strings.TrimSuffix(*dir, "/") + ".heap.pb.gz"
	f, err := os.Create(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "manyparts: heap profile:", err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		fmt.Fprintln(os.Stderr, "manyparts: heap profile:", err)
		return
	}
	fmt.Printf("heap profile: %s (go tool pprof -sample_index=inuse_space -top %s)\n", out, out)
	// The runtime's own accounting (heap, goroutine stacks) and the goroutine count.
	for _, q := range []string{"heap?debug=1", "goroutine?debug=1"} {
		r, err := http.Get("http://" + *heapAt + "/debug/pprof/" + q)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "goroutine profile:") || strings.HasPrefix(line, "# HeapInuse") ||
				strings.HasPrefix(line, "# Stack") || strings.HasPrefix(line, "# Sys") || strings.HasPrefix(line, "# HeapAlloc") {
				fmt.Println("  " + line)
			}
		}
	}
}
