//go:build linux

package vfs

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Asynchronous fdatasync through Linux native AIO (IOCB_CMD_FDSYNC, Linux 4.18+).
//
// A blocking fdatasync(2) keeps its goroutine's P (Go's processor) for the whole sync: the
// scheduler hands the P to other goroutines only if sysmon retakes it, which it mostly does not.
// Measured with a runtime trace of BenchmarkProduceDurability (16 partitions, 2 CPUs): 1602
// fdatasyncs held their P 626 us on average and only 142 were retaken, so with ~1.4 syncs in
// flight the syncs held most of the 2 Ps while the appends, the network and the clients queued
// for them (scheduling latency 2.3 ms mean in the durable run, 1.0 ms in the page-cache run).
// Through AIO the kernel runs the same vfs_fsync_range(datasync) on a worker thread and the
// goroutine parks on a channel, holding neither a P nor an M; the completion is signalled on an
// eventfd that one reaper goroutine reads through the netpoller.
//
// The hand-off costs a few tens of microseconds, so a sync that starts while no other sync is in
// flight (one partition, or a quiet broker) stays a plain blocking fdatasync: it holds one P for
// a short while, as before. Only syncs that overlap others, the case that starved the
// scheduler, go through AIO.
//
// The result is the same either way: nil only once the data is durable, else the sync's error.
// If AIO is unavailable (io_setup fails, WEIR_NO_AIO_SYNC is set) or a submit is refused (ENOSYS,
// EINVAL on kernels without FDSYNC, EAGAIN when the ring is full, ...) the call falls back to a
// blocking fdatasync(2).

const (
	iocbCmdFdsync = 3
	iocbFlagResfd = 1 << 0
	aioRing       = 1024
)

// iocb is struct iocb (linux/aio_abi.h), little-endian layout.
type iocb struct {
	data      uint64
	key       uint32
	rwFlags   int32
	lioOpcode uint16
	reqprio   int16
	fildes    uint32
	buf       uint64
	nbytes    uint64
	offset    int64
	reserved2 uint64
	flags     uint32
	resfd     uint32
}

// ioEvent is struct io_event.
type ioEvent struct {
	data uint64
	obj  uint64
	res  int64
	res2 int64
}

type aioSyncer struct {
	ctx uintptr
	efd int
	// mu guards next and wait.
	mu   sync.Mutex
	next uint64
	wait map[uint64]chan int64
}

// aio is nil when AIO is unavailable. It is set up when the package loads, so its reaper
// goroutine exists before any test's goroutine-leak baseline.
var aio = newAIO()

func newAIO() *aioSyncer {
	if os.Getenv("WEIR_NO_AIO_SYNC") != "" { // escape hatch, and the baseline of A/B measurements
		return nil
	}
	var ctx uintptr
	if _, _, errno := unix.Syscall(unix.SYS_IO_SETUP, aioRing, uintptr(unsafe.Pointer(&ctx)), 0); errno != 0 {
		return nil
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Syscall(unix.SYS_IO_DESTROY, ctx, 0, 0)
		return nil
	}
	a := &aioSyncer{ctx: ctx, efd: efd, wait: make(map[uint64]chan int64)}
	ev := os.NewFile(uintptr(efd), "aio-eventfd") // non-blocking: reads park in the netpoller
	go a.reap(ev)
	return a
}

// reap delivers completions: every completed sync adds 1 to the eventfd.
func (a *aioSyncer) reap(ev *os.File) {
	var buf [8]byte
	var events [64]ioEvent
	zero := unix.Timespec{}
	for {
		if _, err := ev.Read(buf[:]); err != nil {
			a.failAll(err)
			return
		}
		for {
			n, _, errno := unix.Syscall6(unix.SYS_IO_GETEVENTS, a.ctx, 0, uintptr(len(events)),
				uintptr(unsafe.Pointer(&events[0])), uintptr(unsafe.Pointer(&zero)), 0)
			if errno == unix.EINTR {
				continue
			}
			if errno != 0 || n == 0 {
				break
			}
			aioCompleted.Add(int64(n))
			a.mu.Lock()
			for _, e := range events[:n] {
				if ch, ok := a.wait[e.data]; ok {
					delete(a.wait, e.data)
					ch <- e.res
				}
			}
			a.mu.Unlock()
			if int(n) < len(events) {
				break
			}
		}
	}
}

// failAll ends every wait with EIO; only if the eventfd cannot be read any more (never expected).
func (a *aioSyncer) failAll(error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, ch := range a.wait {
		delete(a.wait, id)
		ch <- -int64(unix.EIO)
	}
	a.wait = nil
}

var errAIOUnavailable = errors.New("aio unavailable")

// fdatasync syncs fd through AIO; errAIOUnavailable means it was not submitted (use fdatasync).
func (a *aioSyncer) fdatasync(fd int) error {
	ch := make(chan int64, 1)
	a.mu.Lock()
	if a.wait == nil {
		a.mu.Unlock()
		return errAIOUnavailable
	}
	id := a.next
	a.next++
	a.wait[id] = ch
	a.mu.Unlock()
	cb := &iocb{data: id, lioOpcode: iocbCmdFdsync, fildes: uint32(fd), flags: iocbFlagResfd, resfd: uint32(a.efd)}
	cbs := [1]*iocb{cb}
	for {
		n, _, errno := unix.Syscall(unix.SYS_IO_SUBMIT, a.ctx, 1, uintptr(unsafe.Pointer(&cbs[0])))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 || n != 1 {
			a.mu.Lock()
			delete(a.wait, id)
			a.mu.Unlock()
			return errAIOUnavailable
		}
		break
	}
	if res := <-ch; res < 0 {
		return unix.Errno(-res)
	}
	return nil
}

// aioCompleted counts the syncs completed through AIO.
var aioCompleted atomic.Int64

// syncsInFlight counts the fdatasync calls in progress.
var syncsInFlight atomic.Int32

// fdatasync makes fd's data durable: a blocking fdatasync(2) when no other sync is in flight,
// else through AIO when available.
func fdatasync(fd int) error {
	defer syncsInFlight.Add(-1)
	if syncsInFlight.Add(1) > 1 && aio != nil {
		if err := aio.fdatasync(fd); err != errAIOUnavailable {
			return err
		}
	}
	for {
		if err := unix.Fdatasync(fd); err != unix.EINTR {
			return err
		}
	}
}

// Batches (BatchSyncer, the engine's flusher of a log dir) use an AIO context of their own that
// the syncing goroutine reaps itself, with no eventfd and no reaper: one io_submit for all files
// but one, a fdatasync of that one meanwhile (blocking, like the first sync in flight of the
// shared path), then one io_getevents that usually finds the rest complete already, since they
// ran in parallel with it and share its journal commit. A round of N files so costs three system
// calls and no goroutine hand-off, where N overlapping Syncs cost N submissions, N completions
// read by the reaper and N wake-ups. The context is made on the first batch (a log dir with one
// partition never makes one) and released by Close; without it (io_setup refused: the
// system-wide aio-max-nr is shared) batches go through the shared path, one Sync per file.

// batchRing is the size of a BatchSyncer's AIO context (larger batches are submitted as slots
// free up). Small, because aio-max-nr bounds every context of the system together.
const batchRing = 128

// aioBatch is a BatchSyncer's AIO state.
type aioBatch struct {
	ctx    uintptr // 0 until the first batch; ^0 when io_setup failed
	gen    uint32  // tags each batch's iocbs, so a late completion of an abandoned batch is ignored
	cbs    []iocb
	ptrs   []*iocb
	events []ioEvent
	slots  []int // file index of each iocb
	done   []bool
}

func (b *aioBatch) setup() bool {
	if b.ctx == 0 {
		b.ctx = ^uintptr(0)
		if os.Getenv("WEIR_NO_AIO_SYNC") == "" {
			var ctx uintptr
			if _, _, errno := unix.Syscall(unix.SYS_IO_SETUP, batchRing, uintptr(unsafe.Pointer(&ctx)), 0); errno == 0 {
				b.ctx = ctx
				b.events = make([]ioEvent, batchRing)
			}
		}
	}
	return b.ctx != ^uintptr(0)
}

// close releases the AIO context (io_destroy waits for the syncs in flight).
func (b *aioBatch) close() {
	if b.ctx != 0 && b.ctx != ^uintptr(0) {
		unix.Syscall(unix.SYS_IO_DESTROY, b.ctx, 0, 0)
	}
	b.ctx = 0
}

// syncBatch makes every file durable as files[i].Sync() would, errs[i] its result (see above).
// Files that are not real files (FaultFS) are synced in turn by their own Sync.
func (s *BatchSyncer) syncBatch(files []File, errs []error) {
	b := &s.aio
	if !b.setup() {
		for i, f := range files {
			errs[i] = f.Sync()
		}
		return
	}
	b.gen++
	b.cbs, b.slots = b.cbs[:0], b.slots[:0]
	inline := -1
	for i, f := range files {
		of, ok := f.(osFile)
		switch {
		case !ok:
			errs[i] = f.Sync()
		case inline < 0:
			inline = i
		default:
			b.cbs = append(b.cbs, iocb{data: uint64(b.gen)<<32 | uint64(len(b.slots)), lioOpcode: iocbCmdFdsync, fildes: uint32(of.File.Fd())})
			b.slots = append(b.slots, i)
		}
	}
	n := len(b.cbs)
	b.ptrs = b.ptrs[:0]
	for j := range b.cbs {
		b.ptrs = append(b.ptrs, &b.cbs[j])
	}
	if cap(b.done) < n {
		b.done = make([]bool, n)
	}
	b.done = b.done[:n]
	clear(b.done)
	next, inflight, completed := 0, 0, 0
	failed := false // submitting or reaping failed: what is left is synced in turn
	submit := func() {
		for !failed && next < n && inflight < batchRing {
			m, _, errno := unix.Syscall(unix.SYS_IO_SUBMIT, b.ctx, uintptr(min(n-next, batchRing-inflight)), uintptr(unsafe.Pointer(&b.ptrs[next])))
			if errno == unix.EINTR {
				continue
			}
			if errno != 0 || m == 0 {
				// EBADF and the like name one iocb: sync it in turn and go on with the rest;
				// anything else (EAGAIN, ENOSYS, ...) stops the AIO part of the batch.
				if errno == unix.EBADF || errno == unix.EINVAL {
					i := b.slots[next]
					errs[i] = files[i].Sync()
					b.done[next] = true
					completed++
					next++
					continue
				}
				failed = true
				return
			}
			next += int(m)
			inflight += int(m)
		}
	}
	submit()
	if inline >= 0 {
		errs[inline] = files[inline].Sync()
	}
	for inflight > 0 && !failed {
		want := inflight
		if next < n {
			want = 1 // free slots for the rest as soon as any completes
		}
		got, _, errno := unix.Syscall6(unix.SYS_IO_GETEVENTS, b.ctx, uintptr(want), uintptr(len(b.events)),
			uintptr(unsafe.Pointer(&b.events[0])), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			failed = true
			break
		}
		for _, e := range b.events[:got] {
			if uint32(e.data>>32) != b.gen {
				continue // a late completion of an abandoned batch
			}
			j := int(uint32(e.data))
			inflight--
			if b.done[j] {
				continue
			}
			b.done[j] = true
			completed++
			if i := b.slots[j]; e.res < 0 {
				errs[i] = &os.PathError{Op: "fdatasync", Path: files[i].Name(), Err: unix.Errno(-e.res)}
			} else {
				errs[i] = nil
			}
		}
		submit()
	}
	if completed < n {
		// Submission or reaping failed: every file whose sync did not complete here is synced
		// in turn (a sync still in flight completes harmlessly; its late event is ignored).
		for j, ok := range b.done {
			if !ok {
				i := b.slots[j]
				errs[i] = files[i].Sync()
			}
		}
		if inflight > 0 {
			// The context may still hold completions of this batch: start afresh.
			b.close()
		}
	}
	batchesSynced.Add(1)
}

// batchesSynced counts the batches of more than one file synced (tests).
var batchesSynced atomic.Int64
