package netio

import (
	"math/bits"
	"sync"

	"github.com/valyala/bytebufferpool"
)

// Request frames come from two pools. Frames up to bigFrame bytes use smallFrames: one sync.Pool
// per power-of-two capacity from minFrameClass to bigFrame (what they keep goes at the next
// garbage collections), so a frame of any size up to bigFrame reuses a buffer at most twice its
// size whatever sizes came before. (bytebufferpool's calibrated pool drops buffers above the
// 95th percentile of the sizes it saw in its last 42,000 calls: after a run of one-partition
// produces, every request of a six-partition producer allocated and cleared its frame, and the
// garbage collector took a fifth of the broker's CPU.) Larger frames (produces) use bigFrames,
// which keeps at most its cap of idle buffers, so that the memory of request frames is the bytes
// held (bounded by the budgets, budget.go) plus at most that cap, whatever the traffic was
// before.
const bigFrame = 1 << bigFrameShift

const bigFrameShift = 20

// bigPool is a bounded pool of idle large frame buffers.
type bigPool struct {
	mu sync.Mutex // guards idle and bytes
	// idle are the buffers kept, most recently returned last.
	idle  [][]byte
	bytes int64
	limit int64
}

// get returns a buffer (length 0) of capacity at least size and not much more, or nil.
func (p *bigPool) get(size int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := -1
	for i := len(p.idle) - 1; i >= 0; i-- {
		c := cap(p.idle[i])
		if c >= size && c <= 2*size+smallFrame && (best < 0 || c < cap(p.idle[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := p.idle[best]
	p.idle = append(p.idle[:best], p.idle[best+1:]...)
	p.bytes -= int64(cap(b))
	return b[:0]
}

// put keeps b if there is room, else drops the oldest idle buffers to make room (or b itself
// when it alone is larger than the pool).
func (p *bigPool) put(b []byte) {
	c := int64(cap(b))
	if c > p.limit {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.bytes+c > p.limit && len(p.idle) > 0 {
		p.bytes -= int64(cap(p.idle[0]))
		p.idle[0] = nil
		p.idle = p.idle[1:]
	}
	p.idle = append(p.idle, b)
	p.bytes += c
}

// minFrameClass is the smallest frame buffer capacity: 2^12 bytes.
const minFrameClass = 1 << minFrameShift

const minFrameShift = 12

// smallFrames are the pools of frame buffers up to bigFrame, by capacity: smallFrames[i] holds
// *bytebufferpool.ByteBuffer of capacity exactly minFrameClass<<i.
var smallFrames [bigFrameShift - minFrameShift + 1]sync.Pool

// frameClass is the index of the smallest class that holds size bytes (size <= bigFrame).
func frameClass(size int) int {
	if size <= minFrameClass {
		return 0
	}
	return bits.Len(uint(size-1)) - minFrameShift
}

// getFrame returns a frame buffer for a request of size bytes (its bytes not read yet): up to
// bigFrame one of capacity below 2*size (or minFrameClass), above it a buffer of the bounded
// pool if one fits, else an empty one that readFrame grows as the bytes arrive.
func (s *Server) getFrame(size int) *bytebufferpool.ByteBuffer {
	if size > bigFrame {
		f := new(bytebufferpool.ByteBuffer)
		f.B = s.frames.get(size)
		return f
	}
	i := frameClass(size)
	if f, _ := smallFrames[i].Get().(*bytebufferpool.ByteBuffer); f != nil {
		return f
	}
	return &bytebufferpool.ByteBuffer{B: make([]byte, 0, minFrameClass<<i)}
}

// putFrame returns a frame buffer to its pool. Buffers up to bigFrame whose capacity is not a
// class's are left to the garbage collector.
func (s *Server) putFrame(f *bytebufferpool.ByteBuffer) {
	c := cap(f.B)
	if c > bigFrame {
		s.frames.put(f.B)
		return
	}
	if c < minFrameClass || c&(c-1) != 0 {
		return
	}
	f.B = f.B[:0]
	smallFrames[frameClass(c)].Put(f)
}
