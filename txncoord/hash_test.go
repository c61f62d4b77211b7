package txncoord

import (
	"fmt"
	"testing"

	"github.com/weir-mq/weir/coordinator"
)

// Java's String.hashCode values (checked with a JVM) and Kafka's placement; the same rule as the
// group coordinator's.
func TestPartitionForMatchesKafka(t *testing.T) {
	for _, c := range []struct {
		s    string
		hash int32
	}{
		{"", 0},
		{"hello", 99162322},
		{"polygenelubricants", -1 << 31}, // Integer.MIN_VALUE: Utils.abs maps it to 0
		{"my-txn", -1061187895},
		{"\U0001F600", 1772899}, // a surrogate pair
	} {
		if got := javaStringHashCode(c.s); got != c.hash {
			t.Errorf("hashCode(%q) = %d, want %d", c.s, got, c.hash)
		}
	}
	if PartitionFor("polygenelubricants", 50) != 0 {
		t.Fatal("Integer.MIN_VALUE must map to partition 0")
	}
	for i := 0; i < 2000; i++ {
		id := fmt.Sprintf("transactional-id-%d-é", i*7919)
		if a, b := PartitionFor(id, 50), coordinator.PartitionFor(id, 50); a != b {
			t.Fatalf("%q: %d here, %d in coordinator", id, a, b)
		}
	}
}
