package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeKeepsSysmonAwake starts `weir serve` from a freshly built binary and reads its
// environment from /proc: the process (same pid) runs with GODEBUG schedtrace set, the GODEBUG
// settings it was given kept; with WEIR_SYSMON_DEEP_SLEEP set it runs as started.
func TestServeKeepsSysmonAwake(t *testing.T) {
	if testing.Short() {
		t.Skip("builds weir and starts it")
	}
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc")
	}
	bin := filepath.Join(t.TempDir(), "weir")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name string
		env  []string
		want string // GODEBUG the broker runs with ("" = none)
	}{
		{"default", nil, "GODEBUG=" + sysmonGodebug},
		{"kept", []string{"GODEBUG=madvdontneed=1"}, "GODEBUG=madvdontneed=1," + sysmonGodebug},
		{"opt-out", []string{"WEIR_SYSMON_DEEP_SLEEP=1"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			cmd := exec.Command(bin, "serve", "--log-level", "error", "--set", "listeners=PLAINTEXT://"+addr,
				"--set", "log.dirs="+t.TempDir(), "--set", "metrics.listener=")
			cmd.Env = append(os.Environ(), c.env...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}()
			// Once the broker listens, the re-exec (if any) is behind it.
			deadline := time.Now().Add(30 * time.Second)
			for {
				if c, err := net.Dial("tcp", addr); err == nil {
					c.Close()
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("weir serve did not listen within 30 s")
				}
				time.Sleep(50 * time.Millisecond)
			}
			env, err := os.ReadFile("/proc/" + itoa(cmd.Process.Pid) + "/environ")
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, kv := range strings.Split(string(env), "\x00") {
				if strings.HasPrefix(kv, "GODEBUG=") {
					got = kv
				}
			}
			if got != c.want {
				t.Errorf("pid %d runs with %q, want %q", cmd.Process.Pid, got, c.want)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
