package segment

import (
	"fmt"

	"github.com/weir-mq/weir/vfs"
)

// Syncer syncs the .logs of several segments at once (SyncAll). It keeps its buffers between
// calls; one goroutine uses it at a time (the engine's flusher of a log dir).
type Syncer struct {
	vfs   vfs.BatchSyncer
	refs  []*fileRef
	files []vfs.File
	errs  []error
	seqs  []int64
	idx   []int
}

// Close releases what the syncer holds between calls (vfs.BatchSyncer.Close).
func (y *Syncer) Close() { y.vfs.Close() }

// SyncAll does what Sync does for every segment of segs, errs[i] (len(errs) >= len(segs)) the
// result of segs[i], with the fdatasyncs of all of them in flight at once and one wait
// (vfs.BatchSyncer). The caller makes sure no other sync of any of these segments runs meanwhile
// (the flusher owns them).
func (y *Syncer) SyncAll(segs []*Segment, errs []error) {
	y.refs, y.files, y.seqs, y.idx = y.refs[:0], y.files[:0], y.seqs[:0], y.idx[:0]
	for i, s := range segs {
		seq := s.appendSeq.Load()
		r, err := s.pinLog()
		if err != nil {
			errs[i] = fmt.Errorf("sync segment %s: %w", s.name, err)
			continue
		}
		y.refs = append(y.refs, r)
		y.files = append(y.files, r.f)
		y.seqs = append(y.seqs, seq)
		y.idx = append(y.idx, i)
	}
	if cap(y.errs) < len(y.files) {
		y.errs = make([]error, len(y.files))
	}
	y.errs = y.errs[:len(y.files)]
	y.vfs.SyncFiles(y.files, y.errs)
	for j, r := range y.refs {
		r.unpin()
		y.refs[j], y.files[j] = nil, nil // keep no descriptor reachable between rounds
		i, s := y.idx[j], segs[y.idx[j]]
		if err := y.errs[j]; err != nil {
			errs[i] = fmt.Errorf("sync segment %s: %w", s.name, err)
			continue
		}
		if err := s.syncTxn(); err != nil {
			errs[i] = err
			continue
		}
		if y.seqs[j] > s.syncedSeq.Load() {
			s.syncedSeq.Store(y.seqs[j])
		}
		errs[i] = nil
	}
}
