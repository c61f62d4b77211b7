package engine

import "testing"

// TestPolicyHas checks cleanup.policy parsing (either order, spaces, empty entries) and that it
// allocates nothing: the append path asks it for every batch.
func TestPolicyHas(t *testing.T) {
	cases := []struct {
		policy           string
		compact, delete_ bool
	}{
		{"", false, true},
		{"delete", false, true},
		{"compact", true, false},
		{"compact,delete", true, true},
		{"delete, compact", true, true},
		{" compact ,", true, false},
		{",delete", false, true},
		{"compacted", false, false},
	}
	for _, c := range cases {
		cfg := Config{CleanupPolicy: c.policy}
		if got := cfg.PolicyCompact(); got != c.compact {
			t.Errorf("%q: PolicyCompact = %v, want %v", c.policy, got, c.compact)
		}
		if got := cfg.PolicyDelete(); got != c.delete_ {
			t.Errorf("%q: PolicyDelete = %v, want %v", c.policy, got, c.delete_)
		}
	}
	cfg := Config{CleanupPolicy: "compact,delete", MaxMessageBytes: 1 << 20}
	if n := testing.AllocsPerRun(100, func() {
		_ = cfg.producePolicy()
		_ = cfg.maxSegmentMs()
	}); n != 0 {
		t.Errorf("producePolicy and maxSegmentMs: %v allocations per call, want 0", n)
	}
}
