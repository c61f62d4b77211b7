//go:build faults

package faultctl

import "github.com/weir-mq/weir/internal/clock/clockctl"

// /faults/clock steps and strobes the broker's wall clock (internal/clock): see
// clockctl.Handler for the requests it takes.
func init() { register("/faults/clock", clockctl.Handler()) }
