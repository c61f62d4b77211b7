package engine

import "sync/atomic"

// position is an offset with its place in the log (segment base and byte position), published
// with a sequence lock so readers see the three fields of one store without allocation.
// One writer at a time; any number of readers.
type position struct {
	seq     atomic.Uint64
	offset  atomic.Int64
	segBase atomic.Int64
	pos     atomic.Int64
}

func (p *position) store(offset, segBase, pos int64) {
	p.seq.Add(1)
	p.offset.Store(offset)
	p.segBase.Store(segBase)
	p.pos.Store(pos)
	p.seq.Add(1)
}

func (p *position) load() (offset, segBase, pos int64) {
	for {
		s := p.seq.Load()
		if s&1 != 0 {
			continue
		}
		offset, segBase, pos = p.offset.Load(), p.segBase.Load(), p.pos.Load()
		if p.seq.Load() == s {
			return offset, segBase, pos
		}
	}
}
