//go:build faults

package faultctl

import "testing"

func TestClockControlRegistered(t *testing.T) {
	if !Enabled() || Handlers()["/faults/clock"] == nil {
		t.Fatalf("a -tags faults build has no /faults/clock: %v", Paths())
	}
}
