package diskfault

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// batch is a fake RecordBatch: a header with baseOffset, batchLength and lastOffsetDelta, the
// rest zeros (LastBatch reads only those).
func batch(base int64, lastDelta int32, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b[0:8], uint64(base))
	binary.BigEndian.PutUint32(b[8:12], uint32(size-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:27], uint32(lastDelta))
	return b
}

func TestDamageHelpers(t *testing.T) {
	dir := t.TempDir()
	part := PartitionDir(dir, "t", 3)
	if err := os.MkdirAll(part, 0o700); err != nil {
		t.Fatal(err)
	}
	var data []byte
	data = append(data, batch(0, 4, 100)...)
	data = append(data, batch(5, 2, 80)...)
	for _, name := range []string{"00000000000000000000.log", "00000000000000000005.log"} {
		if err := os.WriteFile(filepath.Join(part, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Newest(part, LogSuffix)
	if err != nil || filepath.Base(p) != "00000000000000000005.log" {
		t.Fatalf("Newest = %s, %v", p, err)
	}
	b, err := LastBatch(p)
	if err != nil || b != (Batch{BaseOffset: 5, LastOffset: 7, Position: 100, Size: 80}) {
		t.Fatalf("LastBatch = %+v, %v", b, err)
	}
	d, err := FlipBit(p, 0, 3)
	if err != nil || d.Position != 179 {
		t.Fatalf("FlipBit = %+v, %v", d, err)
	}
	got, _ := os.ReadFile(p)
	if got[179] != 1<<3 {
		t.Fatalf("byte 179 = %#x", got[179])
	}
	if _, err := Truncate(p, 10); err != nil {
		t.Fatal(err)
	}
	if b, err := LastBatch(p); err != nil || b.BaseOffset != 0 { // the torn batch is not whole
		t.Fatalf("LastBatch after a cut = %+v, %v", b, err)
	}
	if _, ok, err := RecoveryPoint(dir, "t", 3); ok || err != nil {
		t.Fatalf("RecoveryPoint without a checkpoint: %v %v", ok, err)
	}
}
