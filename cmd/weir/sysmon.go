package main

import (
	"os"
	"strings"
	"syscall"
)

// The Go runtime's system monitor (sysmon) sleeps in growing steps of 20 µs to 10 ms while the
// program runs, and goes into a deep sleep whenever every P is idle; the first system call after
// that wakes it and starts it again at 20 µs. A broker answering a producer goes idle between
// requests thousands of times a second, so sysmon is woken on nearly every request and then
// sleeps 20 µs at a time while the request is handled: on the 2-core VM of docs/benchmarks.md
// that thread alone was about a fifth of the broker's CPU time under Kafka's ProducerPerformance
// (section "CPU per record at 64 partitions"). With GODEBUG schedtrace set the runtime never
// lets sysmon deep-sleep, so it stays in its 10 ms steps: about 100 wake-ups a second however
// many requests arrive. The period is the largest the runtime takes (2^31-1 ms, 24.8 days): its
// scheduler trace line is printed once per period of uptime, nothing more.
const sysmonGodebug = "schedtrace=2147483647"

// keepSysmonAwake re-executes `weir serve` (same executable, arguments, environment and process
// id) with sysmonGodebug added to GODEBUG, which the runtime reads only at start. It returns
// when nothing is to be done: GODEBUG already sets schedtrace, WEIR_SYSMON_DEEP_SLEEP is set
// (the runtime's default behaviour), or the re-exec failed (then the broker runs as before).
func keepSysmonAwake() {
	gd, _ := os.LookupEnv("GODEBUG")
	if os.Getenv("WEIR_SYSMON_DEEP_SLEEP") != "" || strings.Contains(gd, "schedtrace=") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if gd != "" {
		gd += ","
	}
	env := []string{"GODEBUG=" + gd + sysmonGodebug}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure
}
