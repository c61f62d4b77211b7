package engine

import (
	"os"
	"strconv"
	"testing"

	"github.com/weir-mq/weir/segment"
)

// WEIR_TEST_FDCACHE=n runs the package's tests with the segment caches bounded at n descriptors
// and n index pairs (segment/fdcache.go), so every reader, the cleaner, retention and recovery run
// under constant eviction:
//
//	WEIR_TEST_FDCACHE=2 go test ./engine/
//
// Tests that count descriptors exactly expect unbounded caches and skip (skipWithBoundedCaches).
func init() {
	if n, err := strconv.ParseInt(os.Getenv("WEIR_TEST_FDCACHE"), 10, 64); err == nil && n > 0 {
		segment.SetLogDescriptorCacheSize(n)
		segment.SetIndexMappingCacheSize(n)
	}
}

// skipWithBoundedCaches skips a test that counts descriptors or mappings exactly when
// WEIR_TEST_FDCACHE bounds the caches (evicted descriptors are not counted then).
func skipWithBoundedCaches(t *testing.T) {
	if os.Getenv("WEIR_TEST_FDCACHE") != "" {
		t.Skip("counts descriptors exactly; WEIR_TEST_FDCACHE bounds the caches")
	}
}
