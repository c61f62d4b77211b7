package engine

// Helpers shared by the crash, fault-injection and fuzz tests: batches whose record contents
// derive from their offsets (so a check needs nothing but the log), a reader that re-checks every
// stored batch, and a filesystem wrapper that can "halt" the process (every later operation fails)
// and counts writes and syncs.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/vfs"
)

// offsetKey and offsetValue are the key and value of the record stored at offset o.
func offsetKey(o int64) []byte { return []byte("o" + strconv.FormatInt(o, 10)) }

func offsetValue(o int64) []byte {
	x := mix64(uint64(o))
	v := make([]byte, 1+x%120)
	for i := range v {
		v[i] = byte(x>>(8*(i%8))) ^ byte(i)
	}
	return v
}

// mix64 is splitmix64's finalizer.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// offsetBatch builds an uncompressed batch of n records meant to be stored at offsets base..base+n-1.
func offsetBatch(base int64, n int, ts int64) []byte {
	recs := make([]record.Record, n)
	for i := range recs {
		o := base + int64(i)
		recs[i] = record.Record{Key: offsetKey(o), Value: offsetValue(o), TimestampDelta: int64(i)}
	}
	return record.Build(nil, record.BuildOptions{BaseOffset: base, BaseTimestamp: ts, ProducerID: -1, BaseSequence: -1}, recs)
}

// decodedRecord is one record of an uncompressed batch.
type decodedRecord struct {
	OffsetDelta int64
	Key, Value  []byte
}

// decodeRecords walks the records of an uncompressed batch b (header included).
func decodeRecords(b []byte) ([]decodedRecord, error) {
	var out []decodedRecord
	rest := b[record.HeaderSize:]
	for len(rest) > 0 {
		l, k := binary.Varint(rest)
		if k <= 0 || l < 0 || l > int64(len(rest)-k) {
			return out, fmt.Errorf("record %d: bad length", len(out))
		}
		body := rest[k : k+int(l)]
		rest = rest[k+int(l):]
		if len(body) < 1 {
			return out, fmt.Errorf("record %d: empty", len(out))
		}
		body = body[1:] // attributes
		var fields [2]int64
		for i := range fields {
			v, k := binary.Varint(body)
			if k <= 0 {
				return out, fmt.Errorf("record %d: bad varint", len(out))
			}
			fields[i] = v
			body = body[k:]
		}
		var kv [2][]byte
		for i := range kv {
			v, k := binary.Varint(body)
			if k <= 0 || v > int64(len(body)-k) {
				return out, fmt.Errorf("record %d: bad key/value length", len(out))
			}
			body = body[k:]
			if v >= 0 {
				kv[i] = body[:v]
				body = body[v:]
			}
		}
		out = append(out, decodedRecord{OffsetDelta: fields[1], Key: kv[0], Value: kv[1]})
	}
	return out, nil
}

// checkOffsetBatch checks that every record of the stored batch b holds the key and value of its
// offset (see offsetBatch).
func checkOffsetBatch(b []byte) error {
	h, err := record.CheckStored(b)
	if err != nil {
		return err
	}
	recs, err := decodeRecords(b[:h.Size()])
	if err != nil {
		return fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
	}
	if len(recs) != int(h.RecordCount) || int64(len(recs)) != int64(h.LastOffsetDelta)+1 {
		return fmt.Errorf("batch at %d holds %d records, header says %d (last delta %d)", h.BaseOffset, len(recs), h.RecordCount, h.LastOffsetDelta)
	}
	for i, r := range recs {
		o := h.BaseOffset + int64(i)
		if r.OffsetDelta != int64(i) || !bytes.Equal(r.Key, offsetKey(o)) || !bytes.Equal(r.Value, offsetValue(o)) {
			return fmt.Errorf("record at offset %d (delta %d, key %q) does not hold its offset's content", o, r.OffsetDelta, r.Key)
		}
	}
	return nil
}

// storedBatch is a batch read back from a log.
type storedBatch struct {
	record.Header
	Bytes []byte
}

// scanLog reads every batch from the log start to the log end, CRC-checking each one.
func scanLog(t testing.TB, l *Log) []storedBatch {
	t.Helper()
	var out []storedBatch
	from := l.LogStartOffset()
	for {
		sl, err := l.Read(from, 256<<10, ReadUpToLogEnd)
		if err != nil {
			t.Fatalf("read %s at %d: %v", l.Dir(), from, err)
		}
		if sl.Length == 0 {
			return out
		}
		buf := make([]byte, sl.Length)
		_, err = sl.File.ReadAt(buf, sl.Position)
		sl.Release()
		if err != nil && err != io.EOF {
			t.Fatalf("read %s at %d: %v", l.Dir(), from, err)
		}
		n := 0
		for len(buf) >= record.HeaderSize {
			h, err := record.ParseHeader(buf)
			if err != nil || h.Size() > int64(len(buf)) && n > 0 {
				break // the rest of a batch cut by maxBytes
			}
			if _, err := record.CheckStored(buf); err != nil {
				t.Fatalf("%s: stored batch at offset %d (read from %d) fails its check: %v", l.Dir(), h.BaseOffset, from, err)
			}
			out = append(out, storedBatch{Header: h, Bytes: bytes.Clone(buf[:h.Size()])})
			from = h.NextOffset()
			buf = buf[h.Size():]
			n++
		}
		if n == 0 {
			t.Fatalf("%s: read at %d returned %d bytes holding no whole batch", l.Dir(), from, sl.Length)
		}
	}
}

// checkContiguous checks that the batches run without gap or overlap from start to the log end.
func checkContiguous(t testing.TB, l *Log, bs []storedBatch, start int64) {
	t.Helper()
	next := start
	for _, b := range bs {
		if b.BaseOffset != next {
			t.Fatalf("%s: batch at offset %d follows offset %d: gap or overlap", l.Dir(), b.BaseOffset, next)
		}
		next = b.NextOffset()
	}
	if leo := l.LogEndOffset(); leo != next {
		t.Fatalf("%s: log end offset %d, batches end at %d", l.Dir(), leo, next)
	}
}

// checkOffsetLog scans l and checks that it runs contiguously from 0, every record holds its
// offset's content (only from contentFrom on, to keep long logs cheap), and every acknowledged
// batch (base -> last) is stored at its offsets.
func checkOffsetLog(t testing.TB, l *Log, acked map[int64]int64, contentFrom int64) []storedBatch {
	t.Helper()
	bs := scanLog(t, l)
	checkContiguous(t, l, bs, 0)
	bases := make(map[int64]int64, len(bs))
	for _, b := range bs {
		bases[b.BaseOffset] = b.LastOffset()
		if b.LastOffset() >= contentFrom {
			if err := checkOffsetBatch(b.Bytes); err != nil {
				t.Fatalf("%s: %v", l.Dir(), err)
			}
		}
	}
	for base, last := range acked {
		got, ok := bases[base]
		if !ok {
			t.Fatalf("%s: acknowledged batch %d..%d lost (log end %d)", l.Dir(), base, last, l.LogEndOffset())
		}
		if got != last {
			t.Fatalf("%s: acknowledged batch %d..%d stored as %d..%d", l.Dir(), base, last, base, got)
		}
	}
	return bs
}

// errHalted is returned by every operation of a haltFS after halt.
var errHalted = errors.New("test: process halted")

// haltFS wraps an FS. halt stops the simulated process: operations in flight finish, every later
// one (on the FS or on a file opened through it) fails with errHalted, and a function (typically
// FaultFS.Crash) runs while nothing is in flight. It also counts writes and syncs, and can hold
// file syncs or directory syncs back (pause) to crash at a chosen point of a flush.
type haltFS struct {
	vfs.FS
	mu     sync.RWMutex
	halted bool
	writes atomic.Int64 // WriteAt calls
	syncs  atomic.Int64 // Sync and SyncDir calls
	gates  sync.Map     // "sync" or "syncdir" -> *gate
}

// pause holds back every later op ("sync" or "syncdir") until resume is called; blocked is
// closed once an op is held.
func (h *haltFS) pause(op string) (blocked <-chan struct{}, resume func()) {
	g := &gate{release: make(chan struct{}), blocked: make(chan struct{})}
	h.gates.Store(op, g)
	return g.blocked, func() {
		h.gates.Delete(op)
		close(g.release)
	}
}

type gate struct {
	release, blocked chan struct{}
	once             sync.Once
}

func (h *haltFS) gate(op string) {
	if v, ok := h.gates.Load(op); ok {
		g := v.(*gate)
		g.once.Do(func() { close(g.blocked) })
		<-g.release
	}
}

func newHaltFS(base vfs.FS) *haltFS { return &haltFS{FS: base} }

func (h *haltFS) enter() error {
	h.mu.RLock()
	if h.halted {
		h.mu.RUnlock()
		return errHalted
	}
	return nil
}

func (h *haltFS) leave() { h.mu.RUnlock() }

// halt stops the process and runs then (if not nil) with nothing in flight.
func (h *haltFS) halt(then func() error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.halted = true
	if then != nil {
		return then()
	}
	return nil
}

func (h *haltFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if err := h.enter(); err != nil {
		return nil, err
	}
	defer h.leave()
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &haltFile{File: f, fs: h}, nil
}

func (h *haltFS) Remove(name string) error {
	if err := h.enter(); err != nil {
		return err
	}
	defer h.leave()
	return h.FS.Remove(name)
}

func (h *haltFS) Rename(oldpath, newpath string) error {
	if err := h.enter(); err != nil {
		return err
	}
	defer h.leave()
	return h.FS.Rename(oldpath, newpath)
}

func (h *haltFS) MkdirAll(path string, perm os.FileMode) error {
	if err := h.enter(); err != nil {
		return err
	}
	defer h.leave()
	return h.FS.MkdirAll(path, perm)
}

func (h *haltFS) SyncDir(dir string) error {
	h.gate("syncdir")
	if err := h.enter(); err != nil {
		return err
	}
	defer h.leave()
	h.syncs.Add(1)
	return h.FS.SyncDir(dir)
}

type haltFile struct {
	vfs.File
	fs *haltFS
}

func (f *haltFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.enter(); err != nil {
		return 0, err
	}
	defer f.fs.leave()
	f.fs.writes.Add(1)
	return f.File.WriteAt(p, off)
}

func (f *haltFile) Sync() error {
	f.fs.gate("sync")
	if err := f.fs.enter(); err != nil {
		return err
	}
	defer f.fs.leave()
	f.fs.syncs.Add(1)
	return f.File.Sync()
}

func (f *haltFile) Truncate(size int64) error {
	if err := f.fs.enter(); err != nil {
		return err
	}
	defer f.fs.leave()
	return f.File.Truncate(size)
}
