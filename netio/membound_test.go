package netio

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/valyala/bytebufferpool"
)

// produceFrame is a Produce v9 frame for topic with one partition of n record bytes (the fake
// handler does not look inside).
func (c *testClient) produceFrame(topic string, n int) ([]byte, int32) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	req.TimeoutMillis = 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = make([]byte, n)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return c.frame(req, 9)
}

// writeAsync writes frames in the background (the server may mute the connection, so the
// writes may block until it reads again); the returned function waits for the writes.
func (c *testClient) writeAsync(t *testing.T, frames ...[]byte) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, f := range frames {
			_ = c.conn.SetWriteDeadline(time.Now().Add(15 * time.Second))
			if _, err := c.conn.Write(f); err != nil {
				t.Errorf("write: %v", err)
				return
			}
		}
	}()
	return wg.Wait
}

// recvProduce reads the answer to a produceFrame of n bytes.
func (c *testClient) recvProduce(corr int32, n int) {
	c.t.Helper()
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	c.recv(corr, resp)
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].BaseOffset != int64(n) {
		c.t.Fatalf("produce %d: %+v", corr, resp)
	}
}

// waitStats waits up to 5 s for cond on the server's Stats.
func (ts *testServer) waitStats(t *testing.T, what string, cond func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := ts.Stats()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: stats %+v", what, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestConnectionBytesBound: requests pipelined behind a pending reply (a parked long poll)
// are read only while the connection's held bytes stay within MaxConnectionBytes; over it the
// connection is muted, and once the pending reply is written everything is answered in order.
func TestConnectionBytesBound(t *testing.T) {
	const bound, size, count = 1 << 20, 300 << 10, 12
	ts := startServer(t, Config{MaxConnectionBytes: bound})
	c := dial(t, ts.addr)
	c.roundTrip(9, "warm-up")
	blockCorr := c.send(metadataReq("block"), 9)
	<-ts.blocked
	var frames [][]byte
	var corrs []int32
	for i := 0; i < count; i++ {
		f, corr := c.produceFrame("t", size)
		frames, corrs = append(frames, f), append(corrs, corr)
	}
	wait := c.writeAsync(t, frames...)
	st := ts.waitStats(t, "muted", func(s Stats) bool { return s.Muted == 1 })
	time.Sleep(50 * time.Millisecond) // a reader ignoring the bound would go on reading
	if st = ts.Stats(); st.HeldBytes > bound || st.HeldRequests != 4 {
		t.Fatalf("held %d bytes in %d requests; bound %d bytes (3 produces of %d fit behind the blocked request)", st.HeldBytes, st.HeldRequests, bound, size)
	}
	ts.unblockAll()
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(9)
	c.recv(blockCorr, resp)
	for _, corr := range corrs {
		c.recvProduce(corr, size)
	}
	wait()
	ts.waitStats(t, "released", func(s Stats) bool { return s.HeldBytes == 0 && s.HeldRequests == 0 && s.Muted == 0 })
	if st := ts.Stats(); st.MutedTotal == 0 {
		t.Fatalf("no mute counted: %+v", st)
	}
}

// TestConnectionBoundAllowsOneLargeRequest: a request larger than MaxConnectionBytes (up to
// socket.request.max.bytes) is still read when the connection holds nothing else.
func TestConnectionBoundAllowsOneLargeRequest(t *testing.T) {
	ts := startServer(t, Config{MaxConnectionBytes: 64 << 10, MaxQueuedBytes: 64 << 10})
	c := dial(t, ts.addr)
	for i := 0; i < 3; i++ {
		f, corr := c.produceFrame("t", 1<<20)
		wait := c.writeAsync(t, f)
		c.recvProduce(corr, 1<<20)
		wait()
	}
}

// TestMaxInFlightMutes: at MaxInFlight requests read and unanswered the connection is muted.
func TestMaxInFlightMutes(t *testing.T) {
	ts := startServer(t, Config{MaxInFlight: 2})
	c := dial(t, ts.addr)
	b1 := c.send(metadataReq("block"), 9)
	<-ts.blocked
	b2 := c.send(metadataReq("block"), 9)
	<-ts.blocked
	plain := c.send(metadataReq("after"), 9)
	ts.waitStats(t, "muted", func(s Stats) bool { return s.Muted == 1 && s.HeldRequests == 2 })
	ts.unblockAll()
	for _, corr := range []int32{b1, b2, plain} {
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(9)
		c.recv(corr, resp)
	}
}

// TestNoAliasReleasesEarly: a reply marked NoAlias returns its frame at once, so big requests
// behind a pending reply neither count nor mute the connection.
func TestNoAliasReleasesEarly(t *testing.T) {
	const bound, size, count = 1 << 20, 300 << 10, 12
	ts := startServer(t, Config{MaxConnectionBytes: bound, MaxQueuedBytes: bound})
	c := dial(t, ts.addr)
	blockCorr := c.send(metadataReq("block"), 9)
	<-ts.blocked
	var frames [][]byte
	var corrs []int32
	for i := 0; i < count; i++ {
		f, corr := c.produceFrame("noalias", size)
		frames, corrs = append(frames, f), append(corrs, corr)
	}
	wait := c.writeAsync(t, frames...)
	// The last frame is released when its handler returns, just after it counts as read: wait
	// for both (a frame that stayed counted fails the wait).
	ts.waitStats(t, "all read and released", func(s Stats) bool { return s.HeldRequests == count+1 && s.HeldBytes <= 64<<10 })
	if st := ts.Stats(); st.MutedTotal != 0 {
		t.Fatalf("NoAlias frames muted the connection: %+v", st)
	}
	ts.unblockAll()
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(9)
	c.recv(blockCorr, resp)
	for _, corr := range corrs {
		c.recvProduce(corr, size)
	}
	wait()
}

// TestBrokerBytesBudget: MaxQueuedBytes (queued.max.request.bytes) bounds the bytes held over
// every connection: big requests of other connections wait (muted) while small requests are
// still served from the reserve, and everything is answered once the pending replies are
// written.
func TestBrokerBytesBudget(t *testing.T) {
	const budgetBytes, size = 1 << 20, 600 << 10
	ts := startServer(t, Config{MaxQueuedBytes: budgetBytes})
	type pend struct {
		c              *testClient
		block, produce int32
		wait           func()
	}
	var ps []pend
	for i := 0; i < 3; i++ {
		c := dial(t, ts.addr)
		b := c.send(metadataReq("block"), 9)
		<-ts.blocked
		f, corr := c.produceFrame("t", size)
		ps = append(ps, pend{c: c, block: b, produce: corr, wait: c.writeAsync(t, f)})
	}
	ts.waitStats(t, "two muted", func(s Stats) bool { return s.Muted == 2 })
	time.Sleep(50 * time.Millisecond)
	if st := ts.Stats(); st.HeldBytes > budgetBytes+64<<10 {
		t.Fatalf("held %d bytes, budget %d", st.HeldBytes, budgetBytes)
	}
	other := dial(t, ts.addr)
	other.roundTrip(9, "small requests still served")
	ts.unblockAll()
	for _, p := range ps {
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(9)
		p.c.recv(p.block, resp)
		p.c.recvProduce(p.produce, size)
		p.wait()
	}
	ts.waitStats(t, "released", func(s Stats) bool { return s.HeldBytes == 0 && s.Muted == 0 })
}

// TestQueuedMaxRequests: with every queued.max.requests slot taken by a request being handled,
// other connections wait (muted) and are served once a slot frees; Shutdown ends such a wait.
func TestQueuedMaxRequests(t *testing.T) {
	ts := startServer(t, Config{MaxQueuedRequests: 1})
	a := dial(t, ts.addr)
	holdCorr := a.send(metadataReq("hold"), 9)
	<-ts.blocked
	b := dial(t, ts.addr)
	bCorr := b.send(metadataReq("b"), 9)
	ts.waitStats(t, "muted", func(s Stats) bool { return s.Muted == 1 })
	ts.unblockAll()
	for _, x := range []struct {
		c    *testClient
		corr int32
	}{{a, holdCorr}, {b, bCorr}} {
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(9)
		x.c.recv(x.corr, resp)
	}
}

// TestShutdownEndsMutedWait: Shutdown does not wait for a muted reader's room.
func TestShutdownEndsMutedWait(t *testing.T) {
	ts := startServer(t, Config{MaxInFlight: 1})
	c := dial(t, ts.addr)
	c.send(metadataReq("park"), 9)
	<-ts.blocked
	c.send(metadataReq("waiting"), 9)
	ts.waitStats(t, "muted", func(s Stats) bool { return s.Muted == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFramePools: idle large frames are kept up to the pool's limit (oldest dropped first) and
// reused only for frames of a similar size; a small frame never gets a large buffer.
func TestFramePools(t *testing.T) {
	s := NewServer(Config{MaxQueuedBytes: 16 << 20}, NewRegistry()) // pool limit: 4 MiB
	if s.frames.limit != 4<<20 {
		t.Fatalf("pool limit %d", s.frames.limit)
	}
	for i := 0; i < 3; i++ {
		s.putFrame(&bytebufferpool.ByteBuffer{B: make([]byte, 0, 3<<19)}) // 1.5 MiB each
	}
	if len(s.frames.idle) != 2 || s.frames.bytes != 3<<20 {
		t.Fatalf("pool keeps %d buffers, %d bytes; want 2 within 4 MiB", len(s.frames.idle), s.frames.bytes)
	}
	if f := s.getFrame(4 << 20); cap(f.B) >= 4<<20 {
		t.Fatalf("a 4 MiB frame got a %d-byte buffer from the pool", cap(f.B))
	}
	if f := s.getFrame(1<<20 + 1); cap(f.B) != 3<<19 {
		t.Fatalf("a 1 MiB frame did not reuse a pooled 1.5 MiB buffer: cap %d", cap(f.B))
	}
	if f := s.getFrame(100 << 10); cap(f.B) > 2*(100<<10)+smallFrame {
		t.Fatalf("a 100 KiB frame got a %d-byte buffer", cap(f.B))
	}
	s.putFrame(&bytebufferpool.ByteBuffer{B: make([]byte, 0, 900<<10)}) // not a class: dropped
	s.putFrame(&bytebufferpool.ByteBuffer{B: make([]byte, 0, 1<<20)})
	for i := 0; i < 100; i++ {
		if f := s.getFrame(100); cap(f.B) > 2*100+smallFrame {
			t.Fatalf("a 100-byte frame got a %d-byte buffer", cap(f.B))
		}
	}
	// Every size up to bigFrame gets a buffer that holds it and is at most twice its size (or
	// the smallest class), after any history of sizes.
	for _, size := range []int{1, 4096, 4097, 16 << 10, 100 << 10, 512<<10 + 1, 1 << 20} {
		for range 3 {
			f := s.getFrame(size)
			if cap(f.B) < size || cap(f.B) > max(2*size, minFrameClass) || len(f.B) != 0 {
				t.Fatalf("a %d-byte frame got len %d cap %d", size, len(f.B), cap(f.B))
			}
			s.putFrame(f)
		}
	}
}

// TestFramePoolReuse: frames of a size reuse their buffers whatever sizes came before (no
// allocation per request once warm), as a six-partition producer after a one-partition one.
func TestFramePoolReuse(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	s := NewServer(Config{MaxQueuedBytes: 16 << 20}, NewRegistry())
	for range 50000 {
		s.putFrame(s.getFrame(16 << 10))
	}
	allocs := testing.AllocsPerRun(1000, func() {
		f := s.getFrame(100 << 10)
		s.putFrame(f)
	})
	if allocs > 0.01 {
		t.Fatalf("%.2f allocations per 100 KiB frame", allocs)
	}
}

// TestBudgetLargeFramesInOrder: a large frame waiting for the broker budget is not passed by a
// later large frame that happens to fit; small frames pass within the reserve; a waiter that
// gives up leaves the queue.
func TestBudgetLargeFramesInOrder(t *testing.T) {
	const mib = 1 << 20
	b := newBudget(10 * mib)
	never := make(chan struct{})
	if !b.acquire(8*mib, never, never, nil) {
		t.Fatal("first frame refused")
	}
	admitted := make(chan string, 4)
	waitQueued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			b.mu.Lock()
			q := len(b.queue)
			b.mu.Unlock()
			if q == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d queued, want %d", q, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	go func() {
		if b.acquire(6*mib, never, never, nil) {
			admitted <- "first"
		}
	}()
	waitQueued(1)
	gaveUp := make(chan struct{})
	go func() { // queued second, gives up
		if !b.acquire(5*mib, gaveUp, never, nil) {
			admitted <- "gave up"
		}
	}()
	waitQueued(2)
	go func() { // fits now (8+2 <= 10), but must not pass the first
		if b.acquire(2*mib, never, never, nil) {
			admitted <- "later"
		}
	}()
	waitQueued(3)
	if !b.acquire(smallFrame, never, never, nil) { // small: passes within the reserve
		t.Fatal("small frame refused")
	}
	select {
	case who := <-admitted:
		t.Fatalf("%s admitted before any release", who)
	case <-time.After(50 * time.Millisecond):
	}
	close(gaveUp)
	if who := <-admitted; who != "gave up" {
		t.Fatalf("got %q, want the waiter that gave up", who)
	}
	waitQueued(2)
	b.release(8 * mib)
	if who := <-admitted; who != "first" {
		t.Fatalf("%q admitted first", who)
	}
	if who := <-admitted; who != "later" {
		t.Fatalf("%q admitted second", who)
	}
	b.release(6*mib + 2*mib + smallFrame)
	if b.held != 0 || len(b.queue) != 0 {
		t.Fatalf("held %d, queue %d after every release", b.held, len(b.queue))
	}
}

// TestBudgetDecodeCharges: decode charges fit within the limit, small ones within the reserve,
// and one past the limit is admitted only while no other is counted; a waiting charge is
// admitted when the one ahead of it is released.
func TestBudgetDecodeCharges(t *testing.T) {
	b := newBudget(1 << 20)
	never := make(chan struct{})
	if !b.acquire(900<<10, never, never, nil) || !b.acquireDecode(100<<10, never, never, nil) {
		t.Fatal("charges within the limit must fit")
	}
	if !b.acquireDecode(smallDecode/16, never, never, func() { t.Fatal("a small charge waited within the reserve") }) {
		t.Fatal("small charge refused")
	}
	b.releaseDecode(smallDecode / 16)
	b.releaseDecode(100 << 10)
	// Nothing decoding: a charge far past the limit is admitted (one request at a time).
	if !b.acquireDecode(64<<20, never, never, nil) {
		t.Fatal("a lone oversize charge must be admitted")
	}
	got := make(chan bool, 1)
	waited := make(chan struct{})
	go func() { got <- b.acquireDecode(32<<20, never, never, func() { close(waited) }) }()
	<-waited
	select {
	case <-got:
		t.Fatal("a second oversize charge was admitted while another is counted")
	case <-time.After(50 * time.Millisecond):
	}
	b.releaseDecode(64 << 20)
	if !<-got {
		t.Fatal("the waiting charge was not admitted after the release")
	}
	stop := make(chan struct{})
	close(stop)
	if b.acquireDecode(32<<20, stop, never, nil) {
		t.Fatal("a stopped wait must give up")
	}
	b.releaseDecode(32 << 20)
	b.release(900 << 10)
	if b.held != 0 || b.decoding != 0 {
		t.Fatalf("held %d decoding %d after every release", b.held, b.decoding)
	}
}
