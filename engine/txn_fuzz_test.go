package engine

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/weir-mq/weir/record"
	"github.com/weir-mq/weir/segment"
)

// FuzzRecoverTxn: a log of plain and transactional batches and COMMIT/ABORT markers, its last
// segment cut or overwritten as a crash might, recovered (optionally from a later recovery
// point, and with the snapshots and indexes left or removed). After recovery the .txnindex
// entries, the producers' ongoing transactions and the last stable offset must be what a replay
// of the recovered batches gives (txnModel).
//
// Input, byte by byte (exhausted input reads as zeros): segment.bytes 512 + 8*b; then 1 + b%40
// batches, each b%4: 0 plain, 1 transactional (producer (b>>2)%3), 2 COMMIT, 3 ABORT marker (of
// producer (b>>2)%3); the damage: b%3 (truncation at a u16, 1 + b%8 bytes XORed at a u16, none);
// then flags b: 1 = remove the snapshots, 2 = remove the .txnindex files, 4 = recover from the
// last segment only.
func FuzzRecoverTxn(f *testing.F) {
	f.Add([]byte{10, 20, 1, 0, 5, 3, 1, 2, 4, 14, 1, 9, 2, 0, 50, 0})
	f.Add([]byte{0, 39, 1, 5, 9, 1, 0, 3, 7, 11, 13, 2, 1, 1, 0, 3, 1, 200, 0, 6})
	f.Add([]byte{3, 30, 1, 1, 5, 5, 9, 9, 3, 7, 11, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 10, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInput{b: data}
		cfg := DefaultConfig()
		cfg.SegmentBytes = 512 + 8*int64(in.byte())
		cfg.FlushIntervalMessages = 1 << 40
		dir := filepath.Join(fuzzTempDir(t), "f-0")
		l, err := OpenLog(OpenOptions{Dir: dir, Topic: "f", Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		seqs := map[int64]int32{}
		nb := 1 + int(in.byte())%40
		for i := 0; i < nb; i++ {
			b := in.byte()
			pid := int64(b>>2) % 3
			switch b % 4 {
			case 0:
				_, err = l.Append(record.Build(nil, record.BuildOptions{ProducerID: -1, BaseSequence: -1}, []record.Record{{Value: []byte{b, byte(i)}}}))
			case 1:
				_, err = l.Append(txnBatch(pid, 0, seqs[pid], 1+i%3))
				seqs[pid] += int32(1 + i%3)
			default:
				_, err = l.AppendMarker(pid, 0, 0, b%4 == 2, 0)
			}
			if err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
		}
		segs := l.Segments()
		lastBase := segs[len(segs)-1].BaseOffset()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(dir, segment.FileName(lastBase, segment.LogSuffix))
		data2, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		switch in.byte() % 3 {
		case 0:
			if len(data2) > 0 {
				data2 = data2[:in.u16()%len(data2)]
			}
		case 1:
			if len(data2) > 0 {
				p, n := in.u16()%len(data2), 1+int(in.byte())%8
				for i := 0; i < n && p+i < len(data2); i++ {
					data2[p+i] ^= in.byte() | 1
				}
			}
		}
		if err := os.WriteFile(logPath, data2, 0o600); err != nil {
			t.Fatal(err)
		}
		flags := in.byte()
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			ext := filepath.Ext(e.Name())
			if (flags&1 != 0 && ext == SnapshotSuffix) || (flags&2 != 0 && ext == segment.TxnIndexSuffix) {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
		rp := int64(0)
		if flags&4 != 0 {
			rp = lastBase
		}
		r, err := OpenLog(OpenOptions{Dir: dir, Topic: "f", Config: cfg, RecoveryPoint: rp})
		if err != nil {
			t.Fatalf("recover: %v", err)
		}
		defer r.Close()
		if flags&2 != 0 && rp > 0 {
			// Indexes removed below the recovery point are not rebuilt (nothing says they
			// are missing: Kafka's loader makes an empty one too); only the model's
			// ongoing transactions and LSO are checked.
			checkTxnModel(t, r, false)
			return
		}
		checkTxnModel(t, r, true)
	})
}

// checkTxnModel replays the log's batches and compares the aborted transactions, the ongoing
// ones and the last stable offset with the log's.
func checkTxnModel(t *testing.T, l *Log, withIndex bool) {
	t.Helper()
	open := map[int64]int64{} // producer -> first offset of its ongoing transaction
	var aborted []AbortedTxn
	for _, b := range scanLog(t, l) {
		if b.ProducerID < 0 {
			continue
		}
		if !b.IsControl() {
			if b.IsTransactional() {
				if _, ok := open[b.ProducerID]; !ok {
					open[b.ProducerID] = b.BaseOffset
				}
			}
			continue
		}
		m, err := record.ParseEndTxnMarker(b.Bytes)
		if errors.Is(err, record.ErrNotEndTxnMarker) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		first, ok := open[b.ProducerID]
		if !ok {
			continue
		}
		delete(open, b.ProducerID)
		if m.Commit {
			continue
		}
		lso := b.BaseOffset + 1
		for _, f := range open {
			lso = min(lso, f)
		}
		aborted = append(aborted, AbortedTxn{ProducerID: b.ProducerID, FirstOffset: first, LastOffset: b.BaseOffset, LastStableOffset: lso})
	}
	if withIndex {
		got, err := l.AbortedTransactions(nil, 0, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			got = nil
		}
		if !reflect.DeepEqual(got, aborted) {
			t.Fatalf("aborted transactions %v, the log's markers say %v", got, aborted)
		}
	}
	gotOpen := map[int64]int64{}
	for _, p := range l.Producers() {
		if p.TxnStartOffset >= 0 {
			gotOpen[p.ProducerID] = p.TxnStartOffset
		}
	}
	if !reflect.DeepEqual(gotOpen, open) {
		t.Fatalf("ongoing transactions %v, the log says %v", gotOpen, open)
	}
	wantLSO := l.HighWatermark()
	firsts := make([]int64, 0, len(open))
	for _, f := range open {
		firsts = append(firsts, f)
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	if len(firsts) > 0 && firsts[0] < wantLSO {
		wantLSO = firsts[0]
	}
	if got := l.LastStableOffset(); got != wantLSO {
		t.Fatalf("LSO %d, want %d (ongoing %v, hw %d)", got, wantLSO, open, l.HighWatermark())
	}
}
