package checker

import (
	"fmt"
	"sort"

	"github.com/weir-mq/weir/internal/faults/history"
)

// position is where a consumer is in a partition: the last offset it returned (or the assigned
// start offset minus one) and the op that put it there.
type position struct {
	off int64
	op  int32
}

// checkPolls follows each process's ok polls between its assignments: offsets read from a
// partition must strictly increase, and must not jump over a record the consumer should have
// returned.
func (c *check) checkPolls() {
	procs := make(map[int]map[int32]position)
	for i := range c.ops {
		o := int32(i)
		l := c.inv(o)
		switch l.F {
		case history.FAssign:
			switch c.ops[i].typ {
			case history.OK:
				pos := make(map[int32]position)
				for _, m := range c.mopsOf(o) {
					if m.Offset >= 0 {
						pos[c.partID(m.Topic, m.Partition)] = position{m.Offset - 1, o}
					}
				}
				procs[l.Process] = pos
			case history.Info:
				delete(procs, l.Process)
			}
		case history.FPoll:
			if c.ops[i].typ == history.Info {
				// The consumer may have advanced past records the history does not show.
				delete(procs, l.Process)
			}
			if c.ops[i].typ != history.OK {
				continue
			}
			pos := procs[l.Process]
			if pos == nil {
				pos = make(map[int32]position)
				procs[l.Process] = pos
			}
			rc := l.Isolation == readCommitted || c.comp(o).Isolation == readCommitted
			for _, m := range c.mopsOf(o) {
				if m.Offset < 0 {
					continue
				}
				p := c.partID(m.Topic, m.Partition)
				if last, ok := pos[p]; ok {
					c.checkStep(p, last, m.Offset, o, rc)
				}
				pos[p] = position{m.Offset, o}
			}
		}
	}
}

// checkStep checks one step of a consumer in partition p from last to off (read by poll o).
func (c *check) checkStep(p int32, last position, off int64, o int32, rc bool) {
	pt := c.parts[p]
	if off <= last.off {
		c.res.add(KindNonmonotonicPoll, Example{
			Topic: pt.topic, Partition: pt.partition, Offset: off,
			Offsets: []int64{last.off, off},
			Ops:     c.opsOf(last.op, o),
			Detail:  fmt.Sprintf("offset %d read after %d by the same consumer", off, last.off),
		})
		return
	}
	vis, what := pt.visAll, "known record"
	if rc {
		vis, what = pt.visRC, "committed record"
	}
	from := sort.Search(len(vis), func(i int) bool { return vis[i] > last.off })
	to := from + sort.Search(len(vis)-from, func(i int) bool { return vis[from+i] >= off })
	if from == to {
		return
	}
	skipped := vis[from:to]
	ex := Example{
		Topic: pt.topic, Partition: pt.partition, Offset: skipped[0],
		Offsets: append([]int64(nil), skipped[:min(len(skipped), 8)]...),
		Ops:     c.opsOf(last.op, o),
		Detail: fmt.Sprintf("consumer went from offset %d to %d, skipping %d %s(s)",
			last.off, off, len(skipped), what),
	}
	c.res.add(KindSkippedPoll, ex)
}

// checkSends checks that the log grows in real time: a record acknowledged to a send or txn op
// lies above every record of its partition acknowledged before that op was invoked.
func (c *check) checkSends() {
	acked := make(map[int32]*marks)
	for i := range c.ops {
		o := int32(i)
		f := c.inv(o).F
		if (f != history.FSend && f != history.FTxn) || c.ops[i].comp < 0 || c.ops[i].comp == c.ops[i].inv {
			continue
		}
		mops := c.comp(o).Mops
		for _, m := range mops {
			if m.Offset < 0 || !sendMop(&m) {
				continue
			}
			p := c.partID(m.Topic, m.Partition)
			if b, ok := acked[p].before(c.ops[i].inv); ok && m.Offset <= b.max {
				c.res.add(KindNonmonotonicSend, Example{
					Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Value: m.Value,
					Offsets: []int64{b.max, m.Offset},
					Ops:     c.opsOf(b.op, o),
					Detail: fmt.Sprintf("value %d acknowledged at offset %d, not above offset %d acknowledged before it was sent",
						m.Value, m.Offset, b.max),
				})
				break
			}
		}
		for _, m := range mops {
			if m.Offset < 0 || !sendMop(&m) {
				continue
			}
			p := c.partID(m.Topic, m.Partition)
			ms := acked[p]
			if ms == nil {
				ms = new(marks)
				acked[p] = ms
			}
			ms.add(c.ops[i].comp, m.Offset, o)
		}
	}
}
