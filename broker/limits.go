package broker

// The transport's memory and connection bounds, from the configuration (netio/budget.go does
// the counting; docs/limits-memory.md describes what a client can cost the broker).

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/weir-mq/weir/netio"
)

// netLimits are the transport's bounds read from the configuration at start.
type netLimits struct {
	maxQueuedRequests  int
	maxQueuedBytes     int64
	maxConnectionBytes int64
}

// readNetLimits reads and checks the bounds; a bad value stops the start naming its key.
func readNetLimits(cfg *Config) (netLimits, error) {
	var l netLimits
	if v := cfg.int64("queued.max.requests"); v < 1 {
		return l, fmt.Errorf("queued.max.requests: %d must be at least 1", v)
	}
	l.maxQueuedRequests = int(cfg.int64("queued.max.requests"))
	maxReq := cfg.int64("socket.request.max.bytes")
	if maxReq < 1 {
		return l, fmt.Errorf("socket.request.max.bytes: %d must be at least 1", maxReq)
	}
	switch v := cfg.int64("queued.max.request.bytes"); {
	case v < -1:
		return l, fmt.Errorf("queued.max.request.bytes: %d must be -1 (unbounded), 0 (automatic) or positive", v)
	case v == -1:
		l.maxQueuedBytes = -1
	case v == 0:
		l.maxQueuedBytes = max(memoryLimit()/4, maxReq)
	default:
		l.maxQueuedBytes = v
	}
	switch v := cfg.int64("queued.max.request.bytes.per.connection"); {
	case v < 0:
		return l, fmt.Errorf("queued.max.request.bytes.per.connection: %d must be 0 (automatic) or positive", v)
	case v > 0:
		l.maxConnectionBytes = v
	default:
		l.maxConnectionBytes = max(maxReq, 8<<20) // netio's default, stated here for the log
	}
	slog.Info("request memory bounds", "queued.max.request.bytes", l.maxQueuedBytes,
		"queued.max.request.bytes.per.connection", l.maxConnectionBytes, "queued.max.requests", l.maxQueuedRequests)
	return l, nil
}

// applyTo sets the bounds in nc.
func (l netLimits) applyTo(nc *netio.Config) {
	nc.MaxQueuedRequests = l.maxQueuedRequests
	nc.MaxQueuedBytes = l.maxQueuedBytes
	nc.MaxConnectionBytes = l.maxConnectionBytes
}

// memoryLimit is the memory the process may use: the cgroup's limit (v2 memory.max, v1
// memory.limit_in_bytes) when set, else the machine's physical memory (MemTotal); 4 GiB when
// neither can be read.
func memoryLimit() int64 {
	limit := int64(4 << 30)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb > 0 {
					limit = kb << 10
				}
			}
		}
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && v < limit {
			limit = v
		}
	}
	return limit
}
