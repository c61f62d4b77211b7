package engine

import (
	"errors"
	"fmt"

	"github.com/weir-mq/weir/segment"
)

// Budget bounds the descriptors and memory mappings the process's segments may hold, below the
// limits where the kernel would refuse them (RLIMIT_NOFILE, vm.max_map_count), so that creating
// partitions or rolling segments is refused cleanly (ErrResourceExhausted) before a descriptor or
// mapping runs out under an operation that cannot be refused as easily. Use is counted
// process-wide by the segment package (segment.Usage), as the kernel counts it; the limits are
// what the broker computed at start (the OS limits minus reserves for connections, the metadata
// store and everything else). A nil *Budget, or a zero limit, bounds nothing.
//
// Budget is immutable after creation and safe for concurrent use; checks are advisory (two
// concurrent creations may both pass the last slot), the kernel's own refusal stays the backstop
// and is handled as a refusal too (LogDir.Fail).
type Budget struct {
	// MaxDescriptors is the number of descriptors segments may hold (0 = unbounded);
	// DescriptorLimit the RLIMIT_NOFILE it was derived from (for messages).
	MaxDescriptors  int64
	DescriptorLimit int64
	// MaxMappings is the number of mappings segments may hold (0 = unbounded); MappingLimit the
	// vm.max_map_count it was derived from.
	MaxMappings  int64
	MappingLimit int64
	// Settling is set when the descriptors and index mappings of inactive and idle segments are
	// cached and evicted under these limits (segment/fdcache.go, segment.SetCeilings): a new
	// partition's segment then holds its descriptor and mappings only until it goes idle (about
	// a second, engine's settle loop), so a creation of n partitions is checked for room for one
	// more segment beside the segments that cannot be evicted, not for n.
	Settling bool
}

// BudgetError is a refusal by the budget. It wraps ErrResourceExhausted.
type BudgetError struct {
	What       string // "descriptor" or "mapping"
	Used, Need int64
	Allowed    int64
	Limit      int64 // the OS limit the budget was derived from
	LimitName  string
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("partition budget exhausted: %d %ss open, %d more needed, of %d allowed by %s=%d",
		e.Used, e.What, e.Need, e.Allowed, e.LimitName, e.Limit)
}

func (e *BudgetError) Unwrap() error { return ErrResourceExhausted }

// IsBudgetError reports whether err is a refusal by the budget.
func IsBudgetError(err error) bool {
	var be *BudgetError
	return errors.As(err, &be)
}

// Usage returns the descriptors and mappings the process's segments hold now.
func (b *Budget) Usage() (descriptors, mappings int64) { return segment.Usage() }

// CheckSegments returns a *BudgetError when n more segments (a new partition has one, a roll
// adds one) would take the descriptors or mappings past the budget.
func (b *Budget) CheckSegments(n int64) error {
	if b == nil || n <= 0 {
		return nil
	}
	if b.Settling {
		n = min(n, 1)
	}
	files, maps := segment.Usage()
	// What the caches of settled segments hold can be evicted to make room (segment/fdcache.go).
	rf, rm := segment.Reclaimable()
	files, maps = files-rf, maps-rm
	if need := n * segment.DescriptorsPerSegment; b.MaxDescriptors > 0 && files+need > b.MaxDescriptors {
		return &BudgetError{What: "descriptor", Used: files, Need: need, Allowed: b.MaxDescriptors, Limit: b.DescriptorLimit, LimitName: "RLIMIT_NOFILE"}
	}
	// A segment's two index mappings, and room for its read mapping (reads fall back to pread
	// when it is missing, see segment.SetReadMappingLimit).
	if need := n * (segment.IndexMappingsPerSegment + 1); b.MaxMappings > 0 && maps+need > b.MaxMappings {
		return &BudgetError{What: "mapping", Used: maps, Need: need, Allowed: b.MaxMappings, Limit: b.MappingLimit, LimitName: "vm.max_map_count"}
	}
	return nil
}
