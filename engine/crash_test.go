package engine

// The crash test: the test binary re-executes itself as a child that appends to a log with
// durable acknowledgements and reports each acknowledged batch on stdout; the parent kills it with
// SIGKILL at a random moment, recovers the log without the clean-shutdown marker and checks that
// every acknowledged batch survived, at its offsets and intact, with nothing after a gap.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Environment of the child process.
const (
	crashChildEnv = "WEIR_CRASH_CHILD" // the log dir; set only in the child
	crashModeEnv  = "WEIR_CRASH_MODE"  // "log" (one OpenLog) or "manager" (a Manager with crashPartitions logs)
	crashCleanEnv = "WEIR_CRASH_CLEAN" // "1": the log was closed cleanly (OpenLog mode)
	crashSeedEnv  = "WEIR_CRASH_SEED"
	crashRPEnv    = "WEIR_CRASH_RECOVERY_POINT" // OpenLog mode: the recovery point to open with
)

const (
	crashTopic      = "crash"
	crashPartitions = 3
	crashCycles     = 20
	// crashAppenders is the number of concurrent appenders per log in the child.
	crashAppenders = 4
)

func crashConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 1024
	// Every open grows each index to its maximum and a SIGKILL leaves them so; 16 KiB (2048
	// offset entries) is plenty for 64 KiB segments and keeps 20 recoveries cheap.
	cfg.MaxIndexBytes = 16 << 10
	return cfg
}

// TestCrashChildProcess is the child of the crash tests; it does nothing in a normal run.
func TestCrashChildProcess(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("the child of TestCrashSIGKILL*; runs only when re-executed by them")
	}
	runCrashChild(dir)
}

// runCrashChild appends until killed and never returns. Output lines: "ready", then one
// "ack <partition> <base> <last>" per batch after AwaitDurable returned nil for it; "fail <why>"
// (exit 3) when anything goes wrong.
func runCrashChild(dir string) {
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		line := fmt.Sprintf(format+"\n", args...)
		outMu.Lock()
		os.Stdout.WriteString(line) // one write(2): a line is never torn by the kill
		outMu.Unlock()
	}
	fail := func(format string, args ...any) {
		say("fail "+format, args...)
		os.Exit(3)
	}
	// A child whose parent vanished without killing it must not run forever.
	time.AfterFunc(2*time.Minute, func() { os.Exit(4) })

	seed, _ := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	rp, _ := strconv.ParseInt(os.Getenv(crashRPEnv), 10, 64)
	cfg := crashConfig()
	var logs []*Log
	switch os.Getenv(crashModeEnv) {
	case "log":
		l, err := OpenLog(OpenOptions{
			Dir: filepath.Join(dir, crashTopic+"-0"), Topic: crashTopic, Config: cfg,
			CleanShutdown: os.Getenv(crashCleanEnv) == "1", RecoveryPoint: rp,
		})
		if err != nil {
			fail("open log: %v", err)
		}
		logs = append(logs, l)
	case "manager":
		m, err := OpenManager(ManagerConfig{
			Dirs: []string{dir}, Default: cfg,
			RetentionCheckInterval: -1, CheckpointInterval: 5 * time.Millisecond,
		})
		if err != nil {
			fail("open manager: %v", err)
		}
		for p := range int32(crashPartitions) {
			l, err := m.CreateLog(TopicPartition{crashTopic, p}, [16]byte{1, 2, 3})
			if err != nil {
				fail("create log %d: %v", p, err)
			}
			logs = append(logs, l)
		}
	default:
		fail("unknown mode %q", os.Getenv(crashModeEnv))
	}
	say("ready")
	for p, l := range logs {
		// Offsets are predicted under appendMu so each record can carry its offset's content;
		// AwaitDurable runs outside it, so the appenders share fdatasyncs (group commit).
		var appendMu sync.Mutex
		for a := range crashAppenders {
			rng := rand.New(rand.NewPCG(seed, uint64(p*crashAppenders+a)))
			go func() {
				for {
					appendMu.Lock()
					base := l.LogEndOffset()
					info, err := l.Append(offsetBatch(base, 1+rng.IntN(20), time.Now().UnixMilli()))
					appendMu.Unlock()
					if err != nil {
						fail("append at %d: %v", base, err)
					}
					if info.BaseOffset != base {
						fail("append predicted at %d landed at %d", base, info.BaseOffset)
					}
					if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
						fail("await durable %d: %v", info.LastOffset, err)
					}
					say("ack %d %d %d", p, info.BaseOffset, info.LastOffset)
				}
			}()
		}
	}
	select {}
}

// crashChild is one run of the child.
type crashChild struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr bytes.Buffer
	start  time.Time
}

func startCrashChild(t *testing.T, dir, mode string, clean bool, rp int64, seed uint64) *crashChild {
	t.Helper()
	c := &crashChild{lines: make(chan string, 1024)}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestCrashChildProcess$", "-test.count=1", "-test.timeout=0")
	c.cmd.Env = append(os.Environ(),
		crashChildEnv+"="+dir, crashModeEnv+"="+mode, crashSeedEnv+"="+strconv.FormatUint(seed, 10),
		crashRPEnv+"="+strconv.FormatInt(rp, 10),
		"GORACE=halt_on_error=1")
	if clean {
		c.cmd.Env = append(c.cmd.Env, crashCleanEnv+"=1")
	}
	c.cmd.Stderr = &c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.start = time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
	}()
	return c
}

// crashAck is a batch the child acknowledged.
type crashAck struct {
	partition  int
	base, last int64
}

// runCrashCycle starts a child, lets it run, SIGKILLs it and returns every batch it acknowledged.
// killAfter is measured from the child's "ready" line, or from its start when early is set (the
// kill may then land while the child is still opening and recovering the log).
func runCrashCycle(t *testing.T, dir, mode string, clean bool, rp int64, seed uint64, killAfter time.Duration, early bool) (acks []crashAck, ready bool) {
	t.Helper()
	c := startCrashChild(t, dir, mode, clean, rp, seed)
	handle := func(line string) {
		switch {
		case line == "ready":
			ready = true
		case strings.HasPrefix(line, "ack "):
			var a crashAck
			if _, err := fmt.Sscanf(line, "ack %d %d %d", &a.partition, &a.base, &a.last); err != nil {
				t.Fatalf("child said %q: %v", line, err)
			}
			acks = append(acks, a)
		case strings.HasPrefix(line, "fail "):
			c.cmd.Process.Kill()
			c.cmd.Wait()
			t.Fatalf("child: %s\nstderr:\n%s", line, c.stderr.String())
		}
	}
	var deadline <-chan time.Time
	if early {
		deadline = time.After(killAfter)
	}
	startupLimit := time.After(60 * time.Second)
wait:
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				c.cmd.Wait()
				t.Fatalf("child exited on its own: %v\nstderr:\n%s", c.cmd.ProcessState, c.stderr.String())
			}
			handle(line)
			if line == "ready" && !early {
				deadline = time.After(killAfter)
			}
		case <-deadline:
			break wait
		case <-startupLimit:
			c.cmd.Process.Kill()
			c.cmd.Wait()
			t.Fatalf("child not ready after 60s\nstderr:\n%s", c.stderr.String())
		}
	}
	if err := syscall.Kill(c.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	// Lines already written were acknowledged before the kill: read them all.
	for line := range c.lines {
		handle(line)
	}
	err := c.cmd.Wait()
	ws, _ := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, not SIGKILL\nstderr:\n%s", err, c.stderr.String())
	}
	if strings.Contains(c.stderr.String(), "DATA RACE") {
		t.Fatalf("child reported a data race:\n%s", c.stderr.String())
	}
	return acks, ready
}

// crashKillDelay picks when to kill: usually 20-200 ms after "ready"; every fourth cycle at a
// random moment from the child's start, which may hit the open and recovery.
func crashKillDelay(rng *rand.Rand, cycle int) (time.Duration, bool) {
	if cycle%4 == 3 {
		return time.Duration(rng.IntN(150)) * time.Millisecond, true
	}
	return time.Duration(20+rng.IntN(181)) * time.Millisecond, false
}

func crashSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WEIR_CRASH_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (set WEIR_CRASH_TEST_SEED to repeat)", seed)
	return seed
}

// TestCrashSIGKILLLog kills a child appending to one log (OpenLog) with 4 concurrent durable
// appenders and 64 KiB segments, 20 times on the same directory, and recovers it each time without
// the clean-shutdown marker: from the parent's last clean close (a recovery point it can vouch
// for), or from offset 0 every fifth time.
func TestCrashSIGKILLLog(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	logDir := filepath.Join(dir, crashTopic+"-0")
	acked := map[int64]int64{}
	checked := int64(0) // content below this offset was checked in an earlier cycle
	clean := false
	totalAcks, segments := 0, 0
	start := time.Now()
	for cycle := range crashCycles {
		delay, early := crashKillDelay(rng, cycle)
		acks, _ := runCrashCycle(t, dir, "log", clean, checked, seed+uint64(cycle), delay, early)
		totalAcks += len(acks)
		for _, a := range acks {
			acked[a.base] = a.last
		}
		if _, err := os.Stat(logDir); os.IsNotExist(err) {
			if len(acks) > 0 {
				t.Fatalf("cycle %d: log directory gone after %d acks", cycle, len(acks))
			}
			continue // killed before the log was created
		}
		// The parent's own clean close is a recovery point it can vouch for (a checkpoint); every
		// fifth cycle recovers the whole log instead.
		rp := checked
		if cycle%5 == 4 {
			rp = 0
		}
		l, err := OpenLog(OpenOptions{Dir: logDir, Topic: crashTopic, Config: crashConfig(), CleanShutdown: false, RecoveryPoint: rp})
		if err != nil {
			t.Fatalf("cycle %d: reopen after SIGKILL: %v", cycle, err)
		}
		checkOffsetLog(t, l, acked, checked)
		segments = len(l.Segments())
		// The recovered log takes appends at its end.
		leo := l.LogEndOffset()
		info, err := l.Append(offsetBatch(leo, 3, time.Now().UnixMilli()))
		if err != nil || info.BaseOffset != leo {
			t.Fatalf("cycle %d: append after recovery: %+v, %v (log end %d)", cycle, info, err, leo)
		}
		if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
			t.Fatal(err)
		}
		acked[info.BaseOffset] = info.LastOffset
		checked = info.LastOffset + 1
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Every other child starts from a clean close; the others, among them those killed at a
		// random moment from their start, recover first (and may be killed doing so).
		clean = cycle%2 == 1
	}
	if totalAcks < crashCycles {
		t.Fatalf("only %d acknowledgements in %d cycles: the test did not exercise much", totalAcks, crashCycles)
	}
	t.Logf("%d cycles, %d acknowledged batches, %d segments, %v", crashCycles, totalAcks, segments, time.Since(start))
}

// TestCrashSIGKILLManager kills a child whose Manager appends to 3 partitions (4 durable appenders
// each) and writes its checkpoints every 5 ms, 20 times on the same log dir. The parent reopens the
// Manager without the clean-shutdown marker, so each log is recovered from its checkpointed
// recovery point on, checks every partition, and closes it cleanly; every other cycle the marker
// is then removed so the next child recovers too (the children killed at a random moment from
// their start are among those).
func TestCrashSIGKILLManager(t *testing.T) {
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	acked := make([]map[int64]int64, crashPartitions)
	checked := make([]int64, crashPartitions)
	for p := range acked {
		acked[p] = map[int64]int64{}
	}
	totalAcks := 0
	start := time.Now()
	mcfg := ManagerConfig{Dirs: []string{dir}, Default: crashConfig(), RetentionCheckInterval: -1, CheckpointInterval: -1}
	for cycle := range crashCycles {
		delay, early := crashKillDelay(rng, cycle)
		acks, ready := runCrashCycle(t, dir, "manager", false, 0, seed+uint64(cycle), delay, early)
		totalAcks += len(acks)
		for _, a := range acks {
			acked[a.partition][a.base] = a.last
		}
		// The child consumes the marker before it serves anything (a kill before that leaves it).
		if _, err := os.Stat(filepath.Join(dir, CleanShutdownFile)); err == nil && ready {
			t.Fatalf("cycle %d: clean-shutdown marker present after the child was ready", cycle)
		}
		rps, err := ReadCheckpoint(filepath.Join(dir, RecoveryPointCheckpointFile))
		if err != nil {
			t.Fatalf("cycle %d: recovery-point checkpoint unreadable after SIGKILL: %v", cycle, err)
		}
		if _, err := ReadCheckpoint(filepath.Join(dir, LogStartOffsetCheckpointFile)); err != nil {
			t.Fatalf("cycle %d: log-start checkpoint unreadable after SIGKILL: %v", cycle, err)
		}
		m, err := OpenManager(mcfg)
		if err != nil {
			t.Fatalf("cycle %d: reopen after SIGKILL: %v", cycle, err)
		}
		for p := range crashPartitions {
			tp := TopicPartition{crashTopic, int32(p)}
			l, ok := m.Log(tp)
			if !ok {
				if len(acked[p]) > 0 {
					t.Fatalf("cycle %d: partition %d lost after acknowledgements", cycle, p)
				}
				continue // killed before it was created
			}
			checkOffsetLog(t, l, acked[p], checked[p])
			if rp, ok := rps[tp]; ok && rp > l.LogEndOffset() {
				t.Fatalf("cycle %d: partition %d: checkpointed recovery point %d beyond the recovered log end %d", cycle, p, rp, l.LogEndOffset())
			}
			leo := l.LogEndOffset()
			info, err := l.Append(offsetBatch(leo, 2, time.Now().UnixMilli()))
			if err != nil || info.BaseOffset != leo {
				t.Fatalf("cycle %d: partition %d: append after recovery: %+v, %v (log end %d)", cycle, p, info, err, leo)
			}
			if err := l.AwaitDurable(info.LastOffset + 1); err != nil {
				t.Fatal(err)
			}
			acked[p][info.BaseOffset] = info.LastOffset
			checked[p] = info.LastOffset + 1
		}
		if err := m.Close(); err != nil {
			t.Fatalf("cycle %d: close: %v", cycle, err)
		}
		// The clean close checkpointed each log end as its recovery point.
		rps, err = ReadCheckpoint(filepath.Join(dir, RecoveryPointCheckpointFile))
		if err != nil {
			t.Fatal(err)
		}
		for p := range crashPartitions {
			tp := TopicPartition{crashTopic, int32(p)}
			if rp, ok := rps[tp]; len(acked[p]) > 0 && (!ok || rp != checked[p]) {
				t.Fatalf("cycle %d: partition %d: recovery point %d (present %v) after a clean close at log end %d", cycle, p, rp, ok, checked[p])
			}
		}
		if cycle%2 == 0 {
			if err := os.Remove(filepath.Join(dir, CleanShutdownFile)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if totalAcks < crashCycles {
		t.Fatalf("only %d acknowledgements in %d cycles: the test did not exercise much", totalAcks, crashCycles)
	}
	t.Logf("%d cycles, %d acknowledged batches, %v", crashCycles, totalAcks, time.Since(start))
}
