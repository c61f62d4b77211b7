package broker

// The transport's memory and connection bounds, from the configuration (netio/budget.go does
// the counting; docs/security.md#what-a-client-can-cost-the-broker describes what a client can cost the broker).

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
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
	maxConnections     int
	maxPerIP           int
	perIPOverrides     map[string]int
	creationRate       int
}

// readNetLimits reads the bounds and checks the rules between keys; each key's own range was
// checked at start (configdefs.go), and a bad value stops the start naming its key.
func readNetLimits(cfg *Config) (netLimits, error) {
	var l netLimits
	l.maxQueuedRequests = keyQueuedMaxRequests.Get(cfg)
	maxReq := int64(keySocketRequestMaxBytes.Get(cfg))
	switch v := keyQueuedMaxRequestBytes.Get(cfg); {
	case v == -1:
		l.maxQueuedBytes = -1
	case v == 0:
		l.maxQueuedBytes = max(memoryLimit()/4, maxReq)
	case v < maxReq:
		return l, fmt.Errorf("queued.max.request.bytes: %d must be at least socket.request.max.bytes (%d), as Kafka requires", v, maxReq)
	default:
		l.maxQueuedBytes = v
	}
	if v := keyQueuedMaxRequestBytesPerConn.Get(cfg); v > 0 {
		l.maxConnectionBytes = v
	} else {
		l.maxConnectionBytes = max(maxReq, 8<<20) // netio's default, stated here for the log
	}
	l.maxConnections = keyMaxConnections.Get(cfg)
	l.maxPerIP = keyMaxConnectionsPerIP.Get(cfg)
	l.creationRate = keyMaxConnectionCreationRate.Get(cfg)
	var err error
	if l.perIPOverrides, err = parsePerIPOverrides(keyMaxConnectionsPerIPOverrides.Get(cfg)); err != nil {
		return l, fmt.Errorf("max.connections.per.ip.overrides: %w", err)
	}
	if l.maxPerIP == 0 && len(l.perIPOverrides) == 0 {
		return l, fmt.Errorf("max.connections.per.ip: 0 refuses every connection; Kafka allows it only with max.connections.per.ip.overrides")
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
	nc.MaxConnections = l.maxConnections
	nc.MaxConnectionsPerIP = l.maxPerIP
	if l.maxPerIP == 0 { // Kafka's 0: only the addresses in the overrides may connect
		nc.MaxConnectionsPerIP = -1
	}
	nc.ConnectionsPerIPOverrides = l.perIPOverrides
	nc.MaxConnectionCreationRate = l.creationRate
	nc.DecodeCost = requestDecodeCost
}

// parsePerIPOverrides parses max.connections.per.ip.overrides: host:count or ip:count,
// comma-separated (the count after the last colon, so IPv6 addresses work). A hostname is
// resolved now and its limit applies to each of its addresses, as Kafka resolves it when the
// configuration is read.
func parsePerIPOverrides(v string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.LastIndex(item, ":")
		if i <= 0 {
			return nil, fmt.Errorf("%q: want host:count", item)
		}
		host := strings.Trim(strings.TrimSpace(item[:i]), "[]")
		n, err := strconv.Atoi(strings.TrimSpace(item[i+1:]))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: the count must be a non-negative integer", item)
		}
		if ip := net.ParseIP(host); ip != nil {
			out[ip.String()] = n
			continue
		}
		addrs, err := net.LookupHost(host)
		if err != nil {
			return nil, fmt.Errorf("%q: resolve %s: %w", item, host, err)
		}
		for _, a := range addrs {
			if ip := net.ParseIP(a); ip != nil {
				out[ip.String()] = n
			}
		}
	}
	return out, nil
}

// listenerLimits sets l's own connection limits: listener.name.<listener>.max.connections and
// .max.connection.creation.rate.
func listenerLimits(cfg *Config, l *netio.Listener) (err error) {
	// Validated at start (NewConfigFrom checks listener.name.<listener>.<key> as <key>).
	l.MaxConnections, _ = keyMaxConnections.ListenerOverride(cfg, l.Name)
	l.MaxConnectionCreationRate, _ = keyMaxConnectionCreationRate.ListenerOverride(cfg, l.Name)
	return nil
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
