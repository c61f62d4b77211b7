package broker

// The descriptor and mapping budget of the partitions (engine.Budget): computed once at start
// from the OS limits, checked when partitions are created (on the broker that receives
// CreateTopics / CreatePartitions, before the controller is asked, and on every replica when the
// replica manager creates a log) and when segments roll, and reported in the metrics.

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"golang.org/x/sys/unix"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/segment"
)

// Reserves kept out of the budget for what is not a segment. Descriptors: 512 for the listeners,
// the metadata store (bolt, snapshots, Raft and controller connections), follower fetch
// connections, checkpoint and snapshot temporary files, the cleaner's segment being written and
// directory syncs, plus the client connections: max.connections when it is set lower than a fifth
// of the limit, else a fifth of the limit. Mappings: a tenth of vm.max_map_count, at least 4096,
// for the Go runtime's heap arenas, thread stacks and shared libraries. Either reserve is at most
// half the limit, so a small limit still leaves room for some partitions.
const (
	descriptorReserveFixed = 512
	mappingReserveMin      = 4096
)

// raiseNoFileLimit raises RLIMIT_NOFILE's soft limit to the hard limit, as most servers do at
// start, and returns the resulting soft limit. (Go's runtime already raises it when the process
// starts on Linux; this makes it explicit and logged whatever started the broker.)
func raiseNoFileLimit() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("getrlimit(RLIMIT_NOFILE): %w", err)
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err != nil {
			slog.Warn("could not raise the descriptor limit", "soft", lim.Cur, "hard", lim.Max, "err", err)
			return lim.Cur, nil
		}
		slog.Info("raised the descriptor limit (RLIMIT_NOFILE) to the hard limit", "from", lim.Cur, "to", lim.Max)
		return lim.Max, nil
	}
	return lim.Cur, nil
}

// readMaxMapCount returns vm.max_map_count (0 when it cannot be read).
func readMaxMapCount() int64 {
	data, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// computeBudget returns the budget storage.descriptor.budget and storage.mapping.budget ask for
// (-1: derived from the OS limits, 0: none).
func computeBudget(cfg *Config) (*engine.Budget, error) {
	fdKey, mapKey := keyStorageDescriptorBudget.Get(cfg), keyStorageMappingBudget.Get(cfg)
	if fdKey < -1 {
		return nil, fmt.Errorf("storage.descriptor.budget=%d: must be -1 (derived), 0 (none) or positive", fdKey)
	}
	if mapKey < -1 {
		return nil, fmt.Errorf("storage.mapping.budget=%d: must be -1 (derived), 0 (none) or positive", mapKey)
	}
	b := &engine.Budget{}
	soft, err := raiseNoFileLimit()
	if err != nil {
		slog.Warn("descriptor limit unknown", "err", err)
	}
	if soft > 1<<40 {
		soft = 1 << 40 // RLIM_INFINITY
	}
	b.DescriptorLimit = int64(soft)
	switch {
	case fdKey > 0:
		b.MaxDescriptors = fdKey
	case fdKey == -1 && soft > 0:
		limit := int64(soft)
		reserve := min(descriptorReserveFixed+min(int64(keyMaxConnections.Get(cfg)), limit/5), limit/2)
		b.MaxDescriptors = max(limit-reserve, 1)
	}
	b.MappingLimit = readMaxMapCount()
	switch {
	case mapKey > 0:
		b.MaxMappings = mapKey
	case mapKey == -1 && b.MappingLimit > 0:
		b.MaxMappings = max(b.MappingLimit-min(max(mappingReserveMin, b.MappingLimit/10), b.MappingLimit/2), 1)
	}
	if b.MaxMappings > 0 {
		// Optional read mappings stop at three quarters of the budget, keeping the rest for
		// the indexes of new segments (reads then use pread).
		segment.SetReadMappingLimit(b.MaxMappings * 3 / 4)
	}
	// The caches of inactive segments' descriptors and index mappings (segment/fdcache.go).
	fdCache := keyStorageDescriptorCacheSize.Get(cfg)
	if fdCache == -1 {
		fdCache = int64(soft) / 2
	}
	idxCache := keyStorageIndexCacheSize.Get(cfg)
	if idxCache == -1 {
		idxCache = b.MaxMappings / 8
	}
	segment.SetLogDescriptorCacheSize(max(fdCache, 0))
	segment.SetIndexMappingCacheSize(max(idxCache, 0))
	segment.SetCeilings(b.MaxDescriptors, b.MaxMappings)
	// Idle partitions hold no descriptor or mapping of their own once settled: the budget checks
	// room for the next segment, not for every partition created (engine.Budget.Settling).
	b.Settling = fdCache > 0 && idxCache > 0 && b.MaxDescriptors > 0 && b.MaxMappings > 0
	used, maps := b.Usage()
	slog.Info("partition budget", "descriptors_allowed", b.MaxDescriptors, "RLIMIT_NOFILE", b.DescriptorLimit,
		"mappings_allowed", b.MaxMappings, "vm.max_map_count", b.MappingLimit,
		"descriptors_used", used, "mappings_used", maps,
		"descriptor_cache", max(fdCache, 0), "index_cache_segments", max(idxCache, 0))
	return b, nil
}

// checkPartitionBudget refuses creating n partition replicas on this broker when they would not
// fit the budget (POLICY_VIOLATION, with the counts and the limit in the message).
func (b *Broker) checkPartitionBudget(n int64) error {
	if b.logs == nil {
		return nil
	}
	if err := b.budget.CheckSegments(n); err != nil {
		return fmt.Errorf("%v: %w", err, kerr.PolicyViolation)
	}
	return nil
}

// localReplicas estimates how many of a new topic's (or new partitions') replicas land on this
// broker: those the explicit assignment names, else an even share of partitions x replication
// factor over the registered brokers, rounded up (the controller places replicas round-robin).
func (b *Broker) localReplicas(partitions int32, rf int16, assignment [][]int32) int64 {
	if len(assignment) > 0 {
		var n int64
		for _, a := range assignment {
			for _, id := range a {
				if id == b.nodeID {
					n++
				}
			}
		}
		return n
	}
	brokers := int64(1)
	if b.ctl != nil {
		brokers = max(int64(len(b.ctl.Image().Brokers)), 1)
	}
	total := int64(partitions) * int64(max(rf, 1))
	return min((total+brokers-1)/brokers, int64(partitions))
}
