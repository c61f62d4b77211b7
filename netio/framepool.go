package netio

import (
	"sync"

	"github.com/valyala/bytebufferpool"
)

// Request frames come from two pools. Frames up to bigFrame bytes use bytebufferpool (a
// sync.Pool: what it keeps goes at the next garbage collections). Larger frames (produces) use
// bigFrames, which keeps at most its cap of idle buffers, so that the memory of request frames
// is the bytes held (bounded by the budgets, budget.go) plus at most that cap, whatever the
// traffic was before.
const bigFrame = 1 << 20

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

// getFrame returns a frame buffer for a request of size bytes (its bytes not read yet).
func (s *Server) getFrame(size int) *bytebufferpool.ByteBuffer {
	f := bytebufferpool.Get()
	if cap(f.B) > 2*size+smallFrame {
		// A pooled buffer much larger than this frame would be held, uncounted, as long as the
		// request is (a parked long poll): leave it in the pool for a larger frame.
		bytebufferpool.Put(f)
		f = new(bytebufferpool.ByteBuffer)
	}
	if size > bigFrame {
		if b := s.frames.get(size); b != nil {
			f.B = b
		}
	}
	return f
}

// putFrame returns a frame buffer to its pool.
func (s *Server) putFrame(f *bytebufferpool.ByteBuffer) {
	if cap(f.B) > bigFrame {
		s.frames.put(f.B)
		f.B = nil
	}
	bytebufferpool.Put(f)
}
