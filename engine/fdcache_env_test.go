package engine

import (
	"os"
	"strconv"

	"github.com/weir-mq/weir/segment"
)

// WEIR_TEST_FDCACHE=n runs the package's tests with the segment caches bounded at n descriptors
// and n index pairs (segment/fdcache.go), so every reader, the cleaner, retention and recovery run
// under constant eviction:
//
//	WEIR_TEST_FDCACHE=2 go test ./engine/
//
// Tests that count descriptors or mappings exactly expect unbounded caches and may fail then.
func init() {
	if n, err := strconv.ParseInt(os.Getenv("WEIR_TEST_FDCACHE"), 10, 64); err == nil && n > 0 {
		segment.SetLogDescriptorCacheSize(n)
		segment.SetIndexMappingCacheSize(n)
	}
}
