package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startKafka launches the anchor's start.sh for *dir (formatted on first use) and returns once the
// broker's port is open; the broker is not a child of this process (start.sh starts it with
// nohup), so it is watched through its PID (start.sh writes it to <dir>/kafka.pid).
func startKafka() (*broker, time.Time, error) {
	host, port, err := net.SplitHostPort(*addr)
	if err != nil || host != "127.0.0.1" {
		return nil, time.Time{}, fmt.Errorf("-addr %q: 127.0.0.1:PORT expected", *addr)
	}
	args := []string{port, *dir}
	if *extra != "" {
		args = append(args, strings.Split(*extra, ",")...)
	}
	lp := *logPath
	if lp == "" {
		lp = strings.TrimSuffix(*dir, "/") + ".log"
	}
	lf, err := os.OpenFile(lp, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, time.Time{}, err
	}
	pidFile := filepath.Join(*dir, "kafka.pid")
	_ = os.Remove(pidFile)
	waitPortFree() // start.sh refuses a port in use
	cmd := exec.Command(filepath.Join(*kafkaDir, "start.sh"), args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(os.Environ(), fmt.Sprintf("KAFKA_START_TIMEOUT=%d", int(timeout.Seconds())))
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, t0, err
	}
	scriptDone := make(chan error, 1)
	go func() { scriptDone <- cmd.Wait(); lf.Close() }()
	deadline := time.Now().Add(*timeout)
	pid := 0
	for {
		if pid == 0 {
			if b, err := os.ReadFile(pidFile); err == nil {
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
		}
		if pid > 0 {
			if c, err := net.DialTimeout("tcp", *addr, time.Second); err == nil {
				c.Close()
				return &broker{pid: pid}, t0, nil
			}
		}
		select {
		case err := <-scriptDone:
			if pid == 0 || !alive(pid) {
				return nil, t0, fmt.Errorf("start.sh exited: %v (see %s)", err, lp)
			}
			scriptDone <- err // the broker runs: keep waiting for the port
			time.Sleep(50 * time.Millisecond)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			if pid > 0 {
				_ = stopKafka(pid, syscall.SIGKILL)
			}
			return nil, t0, errors.New("kafka's port did not open")
		}
	}
}

// alive reports whether pid exists. A killed JVM's main thread shows as a zombie while its other
// threads still exit and hold its sockets, so a zombie counts as alive until it is reaped (the
// broker is not our child: init reaps it).
func alive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// waitPortFree waits until nothing accepts connections on *addr.
func waitPortFree() {
	deadline := time.Now().Add(*timeout)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", *addr, 200*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(50 * time.Millisecond)
	}
}

// stopKafka signals the Kafka broker and waits until it is gone.
func stopKafka(pid int, sig syscall.Signal) error {
	_ = syscall.Kill(pid, sig)
	deadline := time.Now().Add(*timeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			if sig == syscall.SIGKILL {
				return errors.New("broker did not die")
			}
			deadline = time.Now().Add(*timeout)
			sig = syscall.SIGKILL
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// countSegments counts the .log files of the topic's partition directories.
func countSegments() int {
	data := filepath.Join(*dir, "data")
	parts, _ := os.ReadDir(data)
	total := 0
	for _, p := range parts {
		if !p.IsDir() || !strings.HasPrefix(p.Name(), topic+"-") {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(data, p.Name()))
		for _, f := range files {
			if strings.HasSuffix(f.Name(), ".log") {
				total++
			}
		}
	}
	return total
}

// runSegments grows one topic of *n partitions to *segsMode segments, one record per segment,
// and restarts the broker three times: SIGKILL right after the growth, SIGTERM, SIGKILL of the
// idle broker.
func runSegments() error {
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(*addr),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// No delivery timeout: franz-go counts it from the record's timestamp, set in the past here.
		kgo.RecordRetries(1<<30),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1<<16),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*(*timeout))
	defer cancel()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(timeout.Milliseconds()))
	// segment.ms=1: every batch whose timestamp is later than its segment's first batch by more
	// than 1 ms rolls, in Kafka and in weir alike.
	one := "1"
	resp, err := adm.CreateTopic(ctx, int32(*n), 1, map[string]*string{"segment.ms": &one}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		cl.Close()
		return fmt.Errorf("create topic: %w", err)
	}
	rounds := (*segsMode + *n - 1) / *n
	fmt.Printf("%d partitions, growing to %d segments (%d rounds of one record per partition); broker started: %s\n",
		*n, rounds**n, rounds, stats(b.pid))
	value := make([]byte, valueLen)
	ts := time.Now().Add(-time.Duration(rounds)*10*time.Millisecond - time.Minute)
	t0 := time.Now()
	last, lastRound := t0, 0
	recs := make([]*kgo.Record, *n)
	for r := 0; r < rounds; r++ {
		ts = ts.Add(10 * time.Millisecond)
		for p := range recs {
			recs[p] = &kgo.Record{Topic: topic, Partition: int32(p), Value: value, Timestamp: ts}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			cl.Close()
			return fmt.Errorf("round %d: %w", r, err)
		}
		if step := max(rounds/10, 1); (r+1)%step == 0 || r+1 == rounds {
			now := time.Now()
			fmt.Printf("  %d segments after %.1f s (%.0f segments/s over the last %d)\n", (r+1)**n,
				now.Sub(t0).Seconds(), float64((r+1-lastRound)**n)/now.Sub(last).Seconds(), (r+1-lastRound)**n)
			last, lastRound = now, r+1
		}
	}
	cl.Close()
	fmt.Printf("grown in %.1f s: %d segment files; %s\n", time.Since(t0).Seconds(), countSegments(), stats(b.pid))
	// The case first: a SIGKILL right after the growth (what was written since the last
	// recovery-point checkpoint is recovered), then a clean restart, then a SIGKILL of the idle,
	// cleanly restarted broker.
	if b, err = restart(b, syscall.SIGKILL, "restart after SIGKILL right after the growth"); err != nil {
		return err
	}
	time.Sleep(*idle)
	fmt.Printf("idle %s: %s\n", *idle, stats(b.pid))
	if b, err = restart(b, syscall.SIGTERM, "clean restart (SIGTERM)"); err != nil {
		return err
	}
	time.Sleep(*idle)
	if b, err = restart(b, syscall.SIGKILL, "restart after SIGKILL of the idle, cleanly restarted broker"); err != nil {
		return err
	}
	fmt.Printf("%d segment files at the end\n", countSegments())
	err = b.stop(syscall.SIGTERM)
	b = nil
	return err
}
