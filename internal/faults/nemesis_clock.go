package faults

import (
	"context"
	"fmt"
	"net/url"
	"time"
)

// Clock faults go through each node's fault control (internal/faultctl /faults/clock, which
// moves the broker's wall clock, internal/clock), so the nodes' binary must be built with
// `-tags faults`. One node's wall clock (a partition leader's or the active controller's) is
// stepped by ±60 s or ±1 day, or strobed ±200 ms every 50 ms, for the hold; then reset.
var clockVariants = []string{"leader+60s", "leader-60s", "controller+24h", "controller-24h", "leader+24h", "leader-24h", "strobe-leader"}

const clockPath = "/faults/clock"

func (n *nemesis) clock(ctx context.Context, f fault) {
	target, form, what := "leader", url.Values{}, ""
	switch f.Variant {
	case "leader+60s", "leader-60s", "leader+24h", "leader-24h":
		step := f.Variant[len("leader"):]
		form.Set("step", step)
		what = "step " + step
	case "controller+24h", "controller-24h":
		step := f.Variant[len("controller"):]
		target = "controller"
		form.Set("step", step)
		what = "step " + step
	case "strobe-leader":
		form.Set("strobe", "200ms")
		form.Set("period", "50ms")
		form.Set("for", f.Hold.String())
		what = "strobe ±200ms every 50ms"
	default:
		n.skipped(f, fmt.Errorf("unknown variant %q", f.Variant))
		return
	}
	id, role, err := n.target(ctx, target, f.Pick)
	if err != nil {
		n.skipped(f, err)
		return
	}
	nd, err := n.node(id)
	if err != nil {
		n.skipped(f, err)
		return
	}
	rf := n.begin(f, fmt.Sprintf("clock %s on node %d (%s) for %v", what, id, role, f.Hold), id)
	if _, err := n.c.control(ctx, nd, clockPath, form); err != nil {
		n.end(rf, "clock fault failed", err)
		return
	}
	sleepCtx(ctx, f.Hold)
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = n.c.control(rctx, nd, clockPath, url.Values{"reset": {"1"}})
	n.end(rf, fmt.Sprintf("clock of node %d reset", id), err)
}
