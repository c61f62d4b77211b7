package checker

import (
	"fmt"
	"sort"

	"github.com/weir-mq/weir/internal/faults/history"
)

// gp names a partition of a group.
type gp struct {
	group string
	part  int32
}

// mark is an event at a completion line with a running maximum: marks are appended in line
// order, so the maximum over marks before a line is found by binary search.
type mark struct {
	pos int32 // completion line
	max int64 // maximum value of this and every earlier mark
	op  int32 // the op that set max
}

type marks []mark

func (ms *marks) add(pos int32, v int64, op int32) {
	m := mark{pos, v, op}
	if n := len(*ms); n > 0 && (*ms)[n-1].max >= v {
		m.max, m.op = (*ms)[n-1].max, (*ms)[n-1].op
	}
	*ms = append(*ms, m)
}

// before returns the latest mark whose line is before pos; a nil *marks has none.
func (ms *marks) before(pos int32) (mark, bool) {
	if ms == nil {
		return mark{}, false
	}
	i := sort.Search(len(*ms), func(i int) bool { return (*ms)[i].pos >= pos })
	if i == 0 {
		return mark{}, false
	}
	return (*ms)[i-1], true
}

// groupOf returns an op's Group and Generation: the completion's, else the invocation's.
func (c *check) groupOf(o int32) (string, int32) {
	g, gen := c.comp(o).Group, c.comp(o).Generation
	if g == "" {
		g = c.inv(o).Group
	}
	if gen == 0 {
		gen = c.inv(o).Generation
	}
	return g, gen
}

// checkGroups checks consumer group offsets: an ok fetch-offsets never observes an offset below
// an ok commit (or committed txn's offset commit) that completed before it was invoked, and no
// commit with a generation older than one the group had reached is accepted.
func (c *check) checkGroups() {
	commits := make(map[gp]*marks)
	gens := make(map[string]*marks)
	for i := range c.ops {
		o := int32(i)
		if c.ops[i].typ != history.OK {
			continue
		}
		comp := c.ops[i].comp
		switch c.inv(o).F {
		case history.FAssign:
			if g, gen := c.groupOf(o); g != "" && gen > 0 {
				ms := gens[g]
				if ms == nil {
					ms = new(marks)
					gens[g] = ms
				}
				ms.add(comp, int64(gen), o)
			}
		case history.FCommit, history.FTxn:
			g, gen := c.groupOf(o)
			if g == "" {
				continue
			}
			if m, ok := gens[g].before(c.ops[i].inv); ok && gen > 0 && int64(gen) < m.max {
				c.res.add(KindFencedCommit, Example{
					Group: g, Partition: -1, Offset: -1,
					Ops:    c.opsOf(m.op, o),
					Detail: fmt.Sprintf("commit with generation %d accepted after the group reached generation %d", gen, m.max),
				})
			}
			for _, mo := range c.mopsOf(o) {
				// A txn's records carry values; the offsets it commits do not.
				if mo.Offset < 0 || sendMop(&mo) {
					continue
				}
				k := gp{g, c.partID(mo.Topic, mo.Partition)}
				ms := commits[k]
				if ms == nil {
					ms = new(marks)
					commits[k] = ms
				}
				ms.add(comp, mo.Offset, o)
			}
		case history.FFetchOffsets:
			g, _ := c.groupOf(o)
			for _, mo := range c.mopsOf(o) {
				k := gp{g, c.partID(mo.Topic, mo.Partition)}
				m, ok := commits[k].before(c.ops[i].inv)
				if !ok || mo.Offset >= m.max {
					continue
				}
				c.res.add(KindCommitRegression, Example{
					Group: g, Topic: mo.Topic, Partition: mo.Partition, Offset: mo.Offset,
					Offsets: []int64{m.max, mo.Offset},
					Ops:     c.opsOf(m.op, o),
					Detail:  fmt.Sprintf("committed offset %d read back as %d", m.max, mo.Offset),
				})
			}
		}
	}
}

// share names a record of a share group.
type share struct {
	group string
	part  int32
	off   int64
}

// accepted is a record's first successful accept.
type accepted struct {
	pos int32 // completion line of the share-ack
	op  int32
	dc  int16 // delivery count of the accepting consumer's last delivery of the record, 0: unknown
}

// checkShares checks share groups: no record is delivered again after an accept of it succeeded,
// and no delivery count exceeds the limit.
func (c *check) checkShares() {
	acc := make(map[share]accepted)
	type procRec struct {
		proc int
		rec  share
	}
	lastDC := make(map[procRec]int16)
	for i := range c.ops {
		o := int32(i)
		if c.ops[i].typ != history.OK {
			continue
		}
		l := c.inv(o)
		switch l.F {
		case history.FShareDeliver:
			g, _ := c.groupOf(o)
			for _, m := range c.mopsOf(o) {
				k := share{g, c.partID(m.Topic, m.Partition), m.Offset}
				lastDC[procRec{l.Process, k}] = m.DeliveryCount
				if m.DeliveryCount > c.opts.MaxDeliveryCount {
					c.res.add(KindShareDeliveryCount, Example{
						Group: g, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
						Ops:    c.opsOf(o),
						Detail: fmt.Sprintf("delivery count %d above the limit %d", m.DeliveryCount, c.opts.MaxDeliveryCount),
					})
				}
				a, ok := acc[k]
				if !ok {
					continue
				}
				// Invoked after the accept completed: certainly a redelivery. Concurrent with it: a
				// redelivery when its delivery count is above the one the accepting consumer held.
				if c.ops[i].inv > a.pos || (a.dc > 0 && m.DeliveryCount > a.dc) {
					c.res.add(KindShareRedelivered, Example{
						Group: g, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
						Ops:    c.opsOf(a.op, o),
						Detail: fmt.Sprintf("delivered again (delivery count %d) after an accept succeeded", m.DeliveryCount),
					})
				}
			}
		case history.FShareAck:
			g, _ := c.groupOf(o)
			for _, m := range c.mopsOf(o) {
				if m.Ack != "accept" {
					continue
				}
				k := share{g, c.partID(m.Topic, m.Partition), m.Offset}
				if _, ok := acc[k]; !ok {
					acc[k] = accepted{pos: c.ops[i].comp, op: o, dc: lastDC[procRec{l.Process, k}]}
				}
			}
		}
	}
}
