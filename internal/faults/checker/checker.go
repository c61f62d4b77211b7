package checker

import (
	"cmp"
	"slices"

	"github.com/weir-mq/weir/internal/faults/history"
)

// Options configure a check.
type Options struct {
	// MaxDeliveryCount is the share groups' group.share.delivery.count.limit (0: 5, Kafka's default).
	MaxDeliveryCount int16
	// Idempotent: producers use idempotence, so a value at two offsets is a duplicate anomaly.
	Idempotent bool
}

// defaultMaxDeliveryCount is Kafka's default group.share.delivery.count.limit.
const defaultMaxDeliveryCount = 5

// readCommitted is the Isolation of a read_committed poll.
const readCommitted = "read_committed"

// Check analyses a history (its lines in index order) and returns what it found. It does not
// modify ops.
func Check(ops []history.Op, opts Options) Result {
	if opts.MaxDeliveryCount <= 0 {
		opts.MaxDeliveryCount = defaultMaxDeliveryCount
	}
	c := newCheck(ops, opts)
	c.pair()
	c.build()
	c.checkLog()
	c.checkSends()
	c.checkPolls()
	c.checkCycles()
	c.checkGroups()
	c.checkShares()
	c.countAndUnavailability()
	return c.result()
}

// opc is one operation: its invocation and completion lines.
type opc struct {
	inv  int32 // position of the invoke line in check.lines
	comp int32 // position of the completion line; -1 if the op never completed
	typ  history.Type
}

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

// pv names a value of a partition.
type pv struct {
	part  int32
	value int64
}

// Writer kinds of a value.
const (
	wNone uint8 = iota // no send or txn op sent it
	wSend
	wTxn
)

// val is what the history says about one value of one partition.
type val struct {
	part  int32
	value int64
	// off is the first offset the value was seen at (ack or read); -1 while unknown. Further
	// offsets of the same value are kept in check.dupOffs.
	off int64
	// writer is the op that sent the value (an index into check.ops), -1 if none did.
	writer int32
	wkind  uint8
	// readRC and readRU: the first ok poll (read_committed, other) that returned the value; -1: none.
	readRC int32
	readRU int32
}

// part is what the history says about one partition.
type part struct {
	tp
	// maxRead is the highest offset any ok poll returned; -1: none. maxReadOp is that poll.
	maxRead   int64
	maxReadOp int32
	// log is the partition's known records in offset order, built by index; an offset with
	// conflicting values appears once per value.
	log []entry
	// visAll and visRC are the offsets a consumer must return when it passes them: every known
	// record, and the records a read_committed consumer sees (committed or non-transactional).
	// Sorted, distinct.
	visAll []int64
	visRC  []int64
}

// entry is a known record: an offset and the index of its val in check.vals.
type entry struct {
	off int64
	v   int32
}

// check is the state of one Check call.
type check struct {
	lines []history.Op
	opts  Options

	ops     []opc   // ordered by completion line (never-completed ops last)
	lineOp  []int32 // line position -> index into ops; -1 for lines of no op
	parts   []*part
	partIDs map[tp]int32
	vals    []val
	valIDs  map[pv]int32
	// dupOffs: val index -> the further offsets (beyond val.off) the value was seen at.
	dupOffs map[int32][]int64
	// committed[op] says a txn op committed: ok, or info with a value read under read_committed.
	committed []bool
	// finalRead is the ok final-read op (index into ops), -1 if there was none.
	finalRead int32
	mops      int

	res Result
}

func newCheck(lines []history.Op, opts Options) *check {
	return &check{
		lines:     lines,
		opts:      opts,
		partIDs:   make(map[tp]int32),
		valIDs:    make(map[pv]int32),
		dupOffs:   make(map[int32][]int64),
		finalRead: -1,
		res:       newResult(),
	}
}

// pair matches each completion line to its process's pending invocation. A completion without
// an invocation is an op of its own; an invocation never completed is an info op.
func (c *check) pair() {
	c.lineOp = make([]int32, len(c.lines))
	pending := make(map[int]int32)
	for i := range c.lines {
		c.lineOp[i] = -1
		l := &c.lines[i]
		if l.Type == history.Invoke {
			if prev, ok := pending[l.Process]; ok {
				// The process invoked again without completing: the earlier op stays unknown.
				c.ops = append(c.ops, opc{inv: prev, comp: -1, typ: history.Info})
			}
			pending[l.Process] = int32(i)
			continue
		}
		inv, ok := pending[l.Process]
		if ok && c.lines[inv].F == l.F {
			delete(pending, l.Process)
		} else {
			inv = int32(i)
		}
		c.ops = append(c.ops, opc{inv: inv, comp: int32(i), typ: l.Type})
	}
	for _, inv := range pending {
		c.ops = append(c.ops, opc{inv: inv, comp: -1, typ: history.Info})
	}
	// Keep completion order, with never-completed ops last (by invocation).
	slices.SortStableFunc(c.ops, func(a, b opc) int {
		return cmp.Compare(c.endPos(a), c.endPos(b))
	})
	for i, o := range c.ops {
		c.lineOp[o.inv] = int32(i)
		if o.comp >= 0 {
			c.lineOp[o.comp] = int32(i)
		}
	}
}

// endPos orders ops: completed ones by completion line, the others after every line.
func (c *check) endPos(o opc) int64 {
	if o.comp < 0 {
		return int64(len(c.lines)) + int64(o.inv)
	}
	return int64(o.comp)
}

// inv and comp return an op's lines; comp is the invocation for an op that never completed.
func (c *check) inv(o int32) *history.Op { return &c.lines[c.ops[o].inv] }

func (c *check) comp(o int32) *history.Op {
	if p := c.ops[o].comp; p >= 0 {
		return &c.lines[p]
	}
	return c.inv(o)
}

// mopsOf returns an op's mops: the completion's, or the invocation's when the completion has none.
func (c *check) mopsOf(o int32) []history.Mop {
	if m := c.comp(o).Mops; len(m) > 0 {
		return m
	}
	return c.inv(o).Mops
}

// index returns op o's history index (of its completion line, else its invocation).
func (c *check) index(o int32) int64 { return c.comp(o).Index }

func (c *check) partID(topic string, partition int32) int32 {
	k := tp{topic, partition}
	if id, ok := c.partIDs[k]; ok {
		return id
	}
	id := int32(len(c.parts))
	c.partIDs[k] = id
	c.parts = append(c.parts, &part{tp: k, maxRead: -1, maxReadOp: -1})
	return id
}

func (c *check) valID(p int32, value int64) int32 {
	k := pv{p, value}
	if id, ok := c.valIDs[k]; ok {
		return id
	}
	id := int32(len(c.vals))
	c.valIDs[k] = id
	c.vals = append(c.vals, val{part: p, value: value, off: -1, writer: -1, readRC: -1, readRU: -1})
	return id
}

// seenAt records that value v was at offset off.
func (c *check) seenAt(v int32, off int64) {
	if off < 0 {
		return
	}
	x := &c.vals[v]
	if x.off < 0 {
		x.off = off
		return
	}
	if x.off == off {
		return
	}
	for _, o := range c.dupOffs[v] {
		if o == off {
			return
		}
	}
	c.dupOffs[v] = append(c.dupOffs[v], off)
}

// sendMop says whether a mop of a send or txn op is a record sent (not an offset a
// consume-transform-produce txn commits, which carries no value).
func sendMop(m *history.Mop) bool { return m.Value != 0 }

// build builds the values, their writers, readers and offsets, and each partition's log.
func (c *check) build() {
	// Cache the last partition looked up: mops of one op mostly share a partition.
	lastTP, lastID := tp{partition: -1}, int32(-1)
	pid := func(m *history.Mop) int32 {
		if lastID >= 0 && m.Partition == lastTP.partition && m.Topic == lastTP.topic {
			return lastID
		}
		lastTP, lastID = tp{m.Topic, m.Partition}, c.partID(m.Topic, m.Partition)
		return lastID
	}
	for i := range c.ops {
		o := int32(i)
		l := c.inv(o)
		typ := c.ops[i].typ
		switch l.F {
		case history.FSend, history.FTxn:
			kind := wSend
			if l.F == history.FTxn {
				kind = wTxn
			}
			for j := range c.mopsOf(o) {
				m := &c.mopsOf(o)[j]
				if !sendMop(m) {
					continue
				}
				c.mops++
				v := c.valID(pid(m), m.Value)
				x := &c.vals[v]
				if x.writer < 0 {
					x.writer, x.wkind = o, kind
				}
				// An acknowledged offset is a fact even when the txn later aborted.
				if typ == history.OK || kind == wTxn {
					c.seenAt(v, m.Offset)
				}
			}
		case history.FPoll:
			if typ != history.OK {
				continue
			}
			rc := l.Isolation == readCommitted || c.comp(o).Isolation == readCommitted
			for j := range c.mopsOf(o) {
				m := &c.mopsOf(o)[j]
				c.mops++
				p := pid(m)
				v := c.valID(p, m.Value)
				c.seenAt(v, m.Offset)
				x := &c.vals[v]
				if rc && x.readRC < 0 {
					x.readRC = o
				} else if !rc && x.readRU < 0 {
					x.readRU = o
				}
				if pt := c.parts[p]; m.Offset > pt.maxRead {
					pt.maxRead, pt.maxReadOp = m.Offset, o
				}
			}
		case history.FFinalRead:
			if typ == history.OK {
				c.finalRead = o
			}
		default:
			c.mops += len(c.mopsOf(o))
		}
	}

	c.committed = make([]bool, len(c.ops))
	for i := range c.ops {
		if c.ops[i].typ == history.OK && c.inv(int32(i)).F == history.FTxn {
			c.committed[i] = true
		}
	}
	for i := range c.vals {
		x := &c.vals[i]
		if x.wkind == wTxn && x.readRC >= 0 && c.ops[x.writer].typ == history.Info {
			c.committed[x.writer] = true
		}
	}

	// Each partition's log, in offset order: one entry per (offset, value) seen.
	n := make([]int, len(c.parts))
	for i := range c.vals {
		if c.vals[i].off >= 0 {
			n[c.vals[i].part] += 1 + len(c.dupOffs[int32(i)])
		}
	}
	for p, pt := range c.parts {
		pt.log = make([]entry, 0, n[p])
	}
	for i := range c.vals {
		x := &c.vals[i]
		if x.off < 0 {
			continue
		}
		pt := c.parts[x.part]
		pt.log = append(pt.log, entry{x.off, int32(i)})
		for _, o := range c.dupOffs[int32(i)] {
			pt.log = append(pt.log, entry{o, int32(i)})
		}
	}
	for _, pt := range c.parts {
		slices.SortFunc(pt.log, func(a, b entry) int {
			if r := cmp.Compare(a.off, b.off); r != 0 {
				return r
			}
			return cmp.Compare(a.v, b.v)
		})
		for _, e := range pt.log {
			if k := len(pt.visAll); k == 0 || pt.visAll[k-1] != e.off {
				pt.visAll = append(pt.visAll, e.off)
			}
			if c.visibleRC(e.v) {
				if k := len(pt.visRC); k == 0 || pt.visRC[k-1] != e.off {
					pt.visRC = append(pt.visRC, e.off)
				}
			}
		}
	}
}

// visibleRC says whether a read_committed consumer must return value v when it passes its
// offset: it was read under read_committed, or it was sent outside a transaction (and not
// certainly failed), or its transaction committed.
func (c *check) visibleRC(v int32) bool {
	x := &c.vals[v]
	switch {
	case x.readRC >= 0:
		return true
	case x.wkind == wSend:
		return c.ops[x.writer].typ != history.Fail
	case x.wkind == wTxn:
		return c.committed[x.writer]
	}
	return false
}

// acked says whether value v's write is certain to have happened: an ok send, or a committed txn.
func (c *check) acked(v int32) bool {
	x := &c.vals[v]
	switch x.wkind {
	case wSend:
		return c.ops[x.writer].typ == history.OK
	case wTxn:
		return c.committed[x.writer]
	}
	return false
}
