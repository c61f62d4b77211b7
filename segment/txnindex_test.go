package segment_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/weir-mq/weir/segment"
	"github.com/weir-mq/weir/vfs"
)

func TestTxnIndexFormatCollectTruncate(t *testing.T) {
	dir := t.TempDir()
	s, err := segment.Create(vfs.OS, dir, 100, segment.DefaultConfig, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, segment.FileName(100, segment.TxnIndexSuffix))
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("txnindex made eagerly: %v", err)
	}
	entries := []segment.AbortedTxn{
		{ProducerID: 1, FirstOffset: 100, LastOffset: 110, LastStableOffset: 105},
		{ProducerID: 2, FirstOffset: 105, LastOffset: 120, LastStableOffset: 121},
		{ProducerID: 3, FirstOffset: 130, LastOffset: 140, LastStableOffset: 141},
	}
	for _, e := range entries {
		if err := s.AppendAbortedTxn(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendAbortedTxn(entries[1]); err != nil { // a replayed marker: skipped
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 3*segment.TxnEntrySize {
		t.Fatalf("txnindex of %d bytes", len(b))
	}
	be := binary.BigEndian
	if be.Uint16(b[34:]) != 0 || be.Uint64(b[36:]) != 2 || be.Uint64(b[44:]) != 105 || be.Uint64(b[52:]) != 120 || be.Uint64(b[60:]) != 121 {
		t.Fatalf("second entry %x", b[34:68])
	}
	got, complete, err := s.CollectAbortedTxns(nil, 111, 125)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, entries[1:2]) || !complete {
		t.Fatalf("collect [111,125): %v complete %v", got, complete)
	}
	got, complete, _ = s.CollectAbortedTxns(nil, 0, 1000)
	if len(got) != 3 || complete {
		t.Fatalf("collect all: %v %v", got, complete)
	}
	s.Close()

	// Reopened: loaded from the file; a torn tail is ignored.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{0, 0, 1})
	f.Close()
	s, err = segment.Open(vfs.OS, dir, 100, segment.DefaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.AbortedTxns()
	if err != nil || !reflect.DeepEqual(all, entries) {
		t.Fatalf("reloaded %v %v", all, err)
	}
	if _, err := s.TruncateTo(115); err != nil { // empty segment: nothing found, nothing cut
		t.Fatal(err)
	}
}
