package checker

import (
	"fmt"

	"github.com/weir-mq/weir/internal/faults/history"
)

// checkLog finds lost and unseen writes, duplicates, inconsistent offsets, and aborted,
// uncommitted and phantom reads: everything that follows from values, writers, readers and
// offsets alone.
func (c *check) checkLog() {
	for i := range c.vals {
		v := int32(i)
		x := &c.vals[v]
		pt := c.parts[x.part]
		ex := Example{Topic: pt.topic, Partition: pt.partition, Offset: x.off, Value: x.value}

		if offs := c.dupOffs[v]; len(offs) > 0 {
			d := ex
			d.Offsets = append([]int64{x.off}, offs...)
			d.Ops = c.opsOf(x.writer, x.readRC, x.readRU)
			d.Detail = fmt.Sprintf("value %d at %d offsets", x.value, len(d.Offsets))
			c.res.add(KindDuplicate, d)
		}

		read := x.readRC >= 0 || x.readRU >= 0
		if c.acked(v) && !read {
			c.checkUnread(v, ex)
		}
		if !read {
			continue
		}
		reader := x.readRC
		if reader < 0 {
			reader = x.readRU
		}
		switch {
		case x.wkind == wNone:
			ex.Ops = c.opsOf(reader)
			ex.Detail = fmt.Sprintf("value %d was read but never sent", x.value)
			c.res.add(KindPhantomRead, ex)
		case x.wkind == wSend && c.ops[x.writer].typ == history.Fail:
			ex.Ops = c.opsOf(x.writer, reader)
			ex.Detail = fmt.Sprintf("value %d was read but its send failed", x.value)
			c.res.add(KindAbortedRead, ex)
		case x.wkind == wTxn && x.readRC >= 0 && c.ops[x.writer].typ == history.Fail:
			ex.Ops = c.opsOf(x.writer, x.readRC)
			ex.Detail = fmt.Sprintf("value %d was read under read_committed but its txn aborted", x.value)
			c.res.add(KindAbortedRead, ex)
		case x.wkind == wTxn && x.readRC >= 0 && c.ops[x.writer].typ == history.Info:
			ex.Ops = c.opsOf(x.writer, x.readRC)
			ex.Detail = fmt.Sprintf("value %d was read under read_committed; its txn's outcome is unknown", x.value)
			c.res.add(KindUncommittedRead, ex)
		}
	}

	for _, pt := range c.parts {
		for i := 0; i < len(pt.log); {
			j := i + 1
			for j < len(pt.log) && pt.log[j].off == pt.log[i].off {
				j++
			}
			if j-i > 1 {
				ex := Example{Topic: pt.topic, Partition: pt.partition, Offset: pt.log[i].off}
				for _, e := range pt.log[i:j] {
					x := &c.vals[e.v]
					ex.Values = append(ex.Values, x.value)
					ex.Ops = append(ex.Ops, c.opsOf(x.writer, x.readRC, x.readRU)...)
				}
				ex.Detail = fmt.Sprintf("%d values at one offset", j-i)
				c.res.add(KindInconsistentOffsets, ex)
			}
			i = j
		}
	}
}

// checkUnread classifies an acknowledged value no poll returned: lost when a later offset of its
// partition was read, or when an ok final read (which reads every partition to its end) started
// after the acknowledgement; otherwise unseen.
func (c *check) checkUnread(v int32, ex Example) {
	x := &c.vals[v]
	pt := c.parts[x.part]
	switch {
	case x.off >= 0 && x.off < pt.maxRead:
		ex.Ops = c.opsOf(x.writer, pt.maxReadOp)
		ex.Detail = fmt.Sprintf("acknowledged value %d never read; offset %d was read", x.value, pt.maxRead)
		c.res.add(KindLost, ex)
		return
	case c.finalRead >= 0 && c.endPos(c.ops[x.writer]) < int64(c.ops[c.finalRead].inv):
		ex.Ops = c.opsOf(x.writer, c.finalRead)
		ex.Detail = fmt.Sprintf("acknowledged value %d never read, not even by the final read (which read up to offset %d)",
			x.value, pt.maxRead)
		c.res.add(KindLost, ex)
	}
	u := ex
	u.Ops = c.opsOf(x.writer)
	u.Detail = fmt.Sprintf("acknowledged value %d beyond every offset read (%d)", x.value, pt.maxRead)
	c.res.add(KindUnseen, u)
}

// opsOf returns the history indexes of the given ops, skipping -1 and repeats.
func (c *check) opsOf(ops ...int32) []int64 {
	out := make([]int64, 0, len(ops))
	for _, o := range ops {
		if o < 0 {
			continue
		}
		i := c.index(o)
		dup := false
		for _, p := range out {
			dup = dup || p == i
		}
		if !dup {
			out = append(out, i)
		}
	}
	return out
}
