package checker

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/weir-mq/weir/internal/faults/history"
)

// sim generates valid histories: a tiny in-memory Kafka (partition logs with transactions and
// control records, a consumer group's committed offsets, a share partition) driven by random
// processes whose operations interleave. Every effect of an op happens between its invoke and
// completion lines, as in a real run.
type sim struct {
	r     *rand.Rand
	lines []history.Op
	now   int64

	logs    [][]simRec      // per partition of topic "t"
	open    []map[int]int64 // per partition: open txn -> its first offset there
	txnDone map[int]int8
	nextVal int64
	nextTxn int

	// The consumer group "g".
	gen       int32
	committed map[int32]int64

	// The share partition "s"/0 of share group "sg".
	shareEnd  int64
	shareLow  int64 // every record below is done
	shareRecs map[int64]*shareRec
	limit     int16

	procs  []*simProc
	finish bool // stop starting ops
}

type simRec struct {
	value int64
	txn   int // 0: not transactional
	ctrl  bool
}

// Transaction states in sim.txnDone (absent: open).
const (
	txnCommitted int8 = 1
	txnAborted   int8 = 2
)

type shareRec struct {
	holder int // process holding the acquisition; -1: available
	dc     int16
	done   bool // accepted, rejected, or over the delivery limit
}

// Process kinds.
const (
	pProducer = iota
	pTxn
	pConsumer
	pGroup
	pShare
	pNemesis
)

type simProc struct {
	id   int
	kind int
	rc   bool
	inv  *history.Op // the pending op's invoke line; nil when idle
	// txn progress
	txn     int
	written int
	touched []int32
	// consumer positions (partition -> next offset); nil: unassigned
	pos map[int32]int64
	// shown: partition -> the highest position an ok poll of this consumer reached
	shown map[int32]int64
	gen   int32
	// share records held
	held []int64
}

func newSim(seed uint64, nparts int) *sim {
	s := &sim{
		r:         rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		logs:      make([][]simRec, nparts),
		open:      make([]map[int]int64, nparts),
		txnDone:   map[int]int8{},
		committed: map[int32]int64{},
		shareRecs: map[int64]*shareRec{},
		limit:     5,
	}
	for p := range s.open {
		s.open[p] = map[int]int64{}
	}
	add := func(kind, n int) {
		for range n {
			p := &simProc{id: len(s.procs), kind: kind, shown: map[int32]int64{}}
			s.procs = append(s.procs, p)
		}
	}
	add(pProducer, 2)
	add(pTxn, 2)
	add(pConsumer, 3)
	add(pGroup, 2)
	add(pShare, 2)
	add(pNemesis, 1)
	for _, p := range s.procs {
		p.rc = p.kind == pGroup || (p.kind == pConsumer && p.id%2 == 0)
	}
	return s
}

// emit appends a line and returns a copy of it (with its own mops) for the process to keep.
func (s *sim) emit(op history.Op) *history.Op {
	s.now += 1e5 + s.r.Int64N(2e6)
	op.Index = int64(len(s.lines))
	op.Time = s.now
	s.lines = append(s.lines, op)
	op.Mops = slices.Clone(op.Mops)
	return &op
}

// run takes n random steps, completes every pending op, and does a final read.
func (s *sim) run(n int, finalRead bool) []history.Op {
	for range n {
		s.procs[s.r.IntN(len(s.procs))].step(s)
	}
	s.finish = true
	for _, p := range s.procs {
		for p.inv != nil {
			p.step(s)
		}
	}
	if finalRead {
		s.finalRead()
	}
	return s.lines
}

func (s *sim) finalRead() {
	s.emit(history.Op{Process: 1000, Type: history.Invoke, F: history.FFinalRead})
	c := &simProc{id: 1001, kind: pConsumer, rc: true, pos: map[int32]int64{}}
	var mops []history.Mop
	for p := range s.logs {
		c.pos[int32(p)] = 0
		mops = append(mops, history.Mop{Topic: "t", Partition: int32(p), Offset: 0})
	}
	s.emit(history.Op{Process: c.id, Type: history.Invoke, F: history.FAssign, Mops: mops})
	s.emit(history.Op{Process: c.id, Type: history.OK, F: history.FAssign, Mops: mops})
	for {
		at := true
		for p := range s.logs {
			at = at && c.pos[int32(p)] >= int64(len(s.logs[p]))
		}
		if at {
			break
		}
		s.emit(history.Op{Process: c.id, Type: history.Invoke, F: history.FPoll, Isolation: readCommitted})
		s.emit(history.Op{Process: c.id, Type: history.OK, F: history.FPoll, Isolation: readCommitted, Mops: s.read(c, 50)})
	}
	s.emit(history.Op{Process: 1000, Type: history.OK, F: history.FFinalRead})
}

// lso is the first offset of an open transaction's record in partition p.
func (s *sim) lso(p int) int64 {
	lso := int64(len(s.logs[p]))
	for _, off := range s.open[p] {
		lso = min(lso, off)
	}
	return lso
}

// read polls up to max records per assigned partition from c's positions.
func (s *sim) read(c *simProc, max int) []history.Mop {
	parts := make([]int32, 0, len(c.pos))
	for p := range c.pos {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	s.r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	var mops []history.Mop
	for _, p := range parts {
		end := int64(len(s.logs[p]))
		if c.rc {
			end = s.lso(int(p))
		}
		n := 0
		off := c.pos[p]
		for ; off < end && n < max; off++ {
			r := s.logs[p][off]
			if r.ctrl || (c.rc && r.txn != 0 && s.txnDone[r.txn] != txnCommitted) {
				continue
			}
			mops = append(mops, history.Mop{Topic: "t", Partition: p, Offset: off, Value: r.value})
			n++
		}
		c.pos[p] = off
	}
	return mops
}

func (s *sim) append(p int32, r simRec) int64 {
	s.logs[p] = append(s.logs[p], r)
	off := int64(len(s.logs[p]) - 1)
	if r.txn != 0 && !r.ctrl {
		if _, ok := s.open[p][r.txn]; !ok {
			s.open[p][r.txn] = off
		}
	}
	if r.ctrl {
		delete(s.open[p], r.txn)
	}
	return off
}

func (s *sim) value() int64 {
	s.nextVal++
	return s.nextVal
}

func (s *sim) isolation(c *simProc) string {
	if c.rc {
		return readCommitted
	}
	return "read_uncommitted"
}

func (p *simProc) step(s *sim) {
	if p.inv == nil && s.finish {
		return
	}
	switch p.kind {
	case pProducer:
		p.stepProducer(s)
	case pTxn:
		p.stepTxn(s)
	case pConsumer, pGroup:
		p.stepConsumer(s)
	case pShare:
		p.stepShare(s)
	case pNemesis:
		p.stepNemesis(s)
	}
}

func (p *simProc) stepProducer(s *sim) {
	if p.inv == nil {
		part := int32(s.r.IntN(len(s.logs)))
		var mops []history.Mop
		for range 1 + s.r.IntN(3) {
			mops = append(mops, history.Mop{Topic: "t", Partition: part, Offset: -1, Value: s.value()})
		}
		p.inv = s.emit(history.Op{Process: p.id, Type: history.Invoke, F: history.FSend, Mops: mops})
		return
	}
	mops := slices.Clone(p.inv.Mops)
	p.inv = nil
	switch x := s.r.Float64(); {
	case x < 0.85:
		for i := range mops {
			mops[i].Offset = s.append(mops[i].Partition, simRec{value: mops[i].Value})
		}
		s.emit(history.Op{Process: p.id, Type: history.OK, F: history.FSend, Mops: mops})
	case x < 0.93:
		s.emit(history.Op{Process: p.id, Type: history.Fail, F: history.FSend, Mops: mops, Error: "NOT_LEADER_OR_FOLLOWER"})
	default:
		if s.r.IntN(2) == 0 {
			for i := range mops {
				s.append(mops[i].Partition, simRec{value: mops[i].Value})
			}
		}
		s.emit(history.Op{Process: p.id, Type: history.Info, F: history.FSend, Mops: mops, Error: "timeout"})
	}
}

func (p *simProc) stepTxn(s *sim) {
	if p.inv == nil {
		s.nextTxn++
		p.txn, p.written, p.touched = s.nextTxn, 0, nil
		var mops []history.Mop
		for range 1 + s.r.IntN(4) {
			mops = append(mops, history.Mop{Topic: "t", Partition: int32(s.r.IntN(len(s.logs))), Offset: -1, Value: s.value()})
		}
		p.inv = s.emit(history.Op{Process: p.id, Type: history.Invoke, F: history.FTxn, Mops: mops})
		return
	}
	if p.written < len(p.inv.Mops) {
		m := &p.inv.Mops[p.written]
		p.inv.Mops[p.written].Offset = s.append(m.Partition, simRec{value: m.Value, txn: p.txn})
		if !slices.Contains(p.touched, m.Partition) {
			p.touched = append(p.touched, m.Partition)
		}
		p.written++
		return
	}
	// The invoke line was emitted with offsets -1; the acks are in p.inv.Mops now, so the
	// history's invoke line (a copy) is unchanged.
	mops := slices.Clone(p.inv.Mops)
	p.inv = nil
	end := func(st int8) {
		s.txnDone[p.txn] = st
		for _, t := range p.touched {
			s.append(t, simRec{txn: p.txn, ctrl: true})
		}
	}
	switch x := s.r.Float64(); {
	case x < 0.75:
		end(txnCommitted)
		s.emit(history.Op{Process: p.id, Type: history.OK, F: history.FTxn, Mops: mops})
	case x < 0.92:
		end(txnAborted)
		s.emit(history.Op{Process: p.id, Type: history.Fail, F: history.FTxn, Mops: mops, Error: "aborted"})
	default:
		st := txnCommitted
		if s.r.IntN(2) == 0 {
			st = txnAborted
		}
		end(st)
		for i := range mops {
			mops[i].Offset = -1
		}
		s.emit(history.Op{Process: p.id, Type: history.Info, F: history.FTxn, Mops: mops, Error: "timeout"})
	}
}

func (p *simProc) stepConsumer(s *sim) {
	group := p.kind == pGroup
	if p.inv == nil {
		x := s.r.Float64()
		switch {
		case p.pos == nil || x < 0.04:
			op := history.Op{Process: p.id, Type: history.Invoke, F: history.FAssign}
			if group {
				op.Group = "g"
			}
			p.inv = s.emit(op)
		case group && x < 0.25:
			var mops []history.Mop
			for part, off := range p.pos {
				mops = append(mops, history.Mop{Topic: "t", Partition: part, Offset: off})
			}
			slices.SortFunc(mops, func(a, b history.Mop) int { return int(a.Partition - b.Partition) })
			p.inv = s.emit(history.Op{Process: p.id, Type: history.Invoke, F: history.FCommit, Group: "g", Member: fmt.Sprint("m", p.id), Generation: p.gen, Mops: mops})
		case group && x < 0.35:
			p.inv = s.emit(history.Op{Process: p.id, Type: history.Invoke, F: history.FFetchOffsets, Group: "g"})
		default:
			p.inv = s.emit(history.Op{Process: p.id, Type: history.Invoke, F: history.FPoll, Isolation: s.isolation(p)})
		}
		return
	}
	inv := p.inv
	p.inv = nil
	switch inv.F {
	case history.FAssign:
		p.pos = map[int32]int64{}
		var mops []history.Mop
		op := history.Op{Process: p.id, Type: history.OK, F: history.FAssign}
		if group {
			s.gen++
			p.gen = s.gen
			op.Group, op.Generation = "g", p.gen
			for part := range s.logs {
				p.pos[int32(part)] = s.committed[int32(part)]
			}
		} else {
			// Seek back (never forward: a record no consumer returns would be lost) to at most
			// the position the history shows.
			for part := range s.logs {
				if s.r.IntN(3) > 0 {
					p.pos[int32(part)] = s.r.Int64N(p.shown[int32(part)] + 1)
				}
			}
		}
		for part := range s.logs {
			if off, ok := p.pos[int32(part)]; ok {
				mops = append(mops, history.Mop{Topic: "t", Partition: int32(part), Offset: off})
			}
		}
		op.Mops = mops
		s.emit(op)
	case history.FCommit:
		if p.gen != s.gen {
			s.emit(history.Op{Process: p.id, Type: history.Fail, F: history.FCommit, Group: "g", Generation: p.gen, Error: "ILLEGAL_GENERATION"})
			return
		}
		for _, m := range inv.Mops {
			s.committed[m.Partition] = m.Offset
		}
		s.emit(history.Op{Process: p.id, Type: history.OK, F: history.FCommit, Group: "g", Generation: p.gen, Mops: inv.Mops})
	case history.FFetchOffsets:
		var mops []history.Mop
		for part := range s.logs {
			if off, ok := s.committed[int32(part)]; ok {
				mops = append(mops, history.Mop{Topic: "t", Partition: int32(part), Offset: off})
			}
		}
		s.emit(history.Op{Process: p.id, Type: history.OK, F: history.FFetchOffsets, Group: "g", Mops: mops})
	case history.FPoll:
		switch x := s.r.Float64(); {
		case x < 0.03:
			// Unknown outcome: records may have been consumed unseen; the consumer reassigns.
			s.read(p, 1+s.r.IntN(5))
			p.pos = nil
			s.emit(history.Op{Process: p.id, Type: history.Info, F: history.FPoll, Isolation: s.isolation(p), Error: "timeout"})
		case x < 0.06:
			s.emit(history.Op{Process: p.id, Type: history.Fail, F: history.FPoll, Isolation: s.isolation(p), Error: "fetch failed"})
		default:
			s.emit(history.Op{Process: p.id, Type: history.OK, F: history.FPoll, Isolation: s.isolation(p), Mops: s.read(p, 1+s.r.IntN(5))})
			for part, off := range p.pos {
				p.shown[part] = max(p.shown[part], off)
			}
		}
	}
}

func (p *simProc) stepShare(s *sim) {
	if p.inv == nil {
		if len(p.held) > 0 && s.r.IntN(2) == 0 {
			var mops []history.Mop
			for _, off := range p.held {
				ack := "accept"
				switch x := s.r.Float64(); {
				case x < 0.2:
					ack = "release"
				case x < 0.3:
					ack = "reject"
				}
				mops = append(mops, history.Mop{Topic: "s", Offset: off, Ack: ack})
			}
			p.inv = s.emit(history.Op{Process: p.id, Type: history.Invoke, F: history.FShareAck, Group: "sg", Mops: mops})
			return
		}
		p.inv = s.emit(history.Op{Process: p.id, Type: history.Invoke, F: history.FShareDeliver, Group: "sg"})
		return
	}
	inv := p.inv
	p.inv = nil
	switch inv.F {
	case history.FShareDeliver:
		// The acquisition lock of some other consumer's record may expire.
		if s.r.IntN(10) == 0 {
			for _, q := range s.procs {
				if q.kind != pShare || q == p || len(q.held) == 0 {
					continue
				}
				if r := s.shareRecs[q.held[0]]; r.holder == q.id && !r.done {
					r.holder = -1
					if r.dc >= s.limit {
						r.done = true
					}
				}
				break
			}
		}
		s.shareEnd += int64(s.r.IntN(3))
		var mops []history.Mop
		for s.shareLow < s.shareEnd && s.shareRecs[s.shareLow] != nil && s.shareRecs[s.shareLow].done {
			s.shareLow++
		}
		for off := s.shareLow; off < s.shareEnd && len(mops) < 3; off++ {
			r := s.shareRecs[off]
			if r == nil {
				r = &shareRec{holder: -1}
				s.shareRecs[off] = r
			}
			if r.done || r.holder >= 0 {
				continue
			}
			r.dc++
			r.holder = p.id
			p.held = append(p.held, off)
			mops = append(mops, history.Mop{Topic: "s", Offset: off, DeliveryCount: r.dc})
		}
		s.emit(history.Op{Process: p.id, Type: history.OK, F: history.FShareDeliver, Group: "sg", Mops: mops})
	case history.FShareAck:
		p.held = nil
		for _, m := range inv.Mops {
			if r := s.shareRecs[m.Offset]; r.holder != p.id || r.done {
				// The records still held are released (their locks would expire).
				for _, m := range inv.Mops {
					if r := s.shareRecs[m.Offset]; r.holder == p.id {
						r.holder = -1
						if r.dc >= s.limit {
							r.done = true
						}
					}
				}
				s.emit(history.Op{Process: p.id, Type: history.Fail, F: history.FShareAck, Group: "sg", Mops: inv.Mops, Error: "INVALID_RECORD_STATE"})
				return
			}
		}
		for _, m := range inv.Mops {
			r := s.shareRecs[m.Offset]
			r.holder = -1
			if m.Ack != "release" || r.dc >= s.limit {
				r.done = true
			}
		}
		s.emit(history.Op{Process: p.id, Type: history.OK, F: history.FShareAck, Group: "sg", Mops: inv.Mops})
	}
}

func (p *simProc) stepNemesis(s *sim) {
	if p.inv == nil {
		fault := []string{"partition leader p0 from 2,3", "pause 1 12s", "kill 2"}[s.r.IntN(3)]
		p.inv = s.emit(history.Op{Process: p.id, Type: history.Invoke, F: history.FNemesis, Value: fault})
		return
	}
	if s.r.IntN(4) == 0 || s.finish {
		s.emit(history.Op{Process: p.id, Type: history.OK, F: history.FNemesis, Value: p.inv.Value})
		p.inv = nil
	}
}
