package sharecoord

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/weir-mq/weir/sharestate"
)

// The expected bytes are written field by field from Kafka 4.4's ShareSnapshotKey/Value and
// ShareUpdateKey/Value JSON schemas (coordinator-key apiKey 0 and 1, values v0 flexible with
// DeliveryCompleteCount as tagged field 0, default -1).

func TestKeyEncoding(t *testing.T) {
	k := sharestate.Key{Group: "ab", TopicID: [16]byte{0: 0xaa, 15: 0xbb}, Partition: 7}
	want := "0000" + "0002" + "6162" + "aa0000000000000000000000000000bb" + "00000007"
	if got := hex.EncodeToString(encodeKey(keySnapshot, k)); got != want {
		t.Fatalf("snapshot key\n got %s\nwant %s", got, want)
	}
	want = "0001" + want[4:]
	if got := hex.EncodeToString(encodeKey(keyUpdate, k)); got != want {
		t.Fatalf("update key\n got %s\nwant %s", got, want)
	}
	ver, dk, err := decodeKey(encodeKey(keyUpdate, k))
	if err != nil || ver != keyUpdate || dk != k {
		t.Fatalf("decodeKey = %d %+v %v", ver, dk, err)
	}
	if _, _, err := decodeKey([]byte{0, 2, 0, 0}); err == nil {
		t.Fatal("key version 2 accepted")
	}
	if _, _, err := decodeKey([]byte{0, 0, 0, 9, 'a'}); err == nil {
		t.Fatal("truncated key accepted")
	}
}

func TestSnapshotValueEncoding(t *testing.T) {
	v := &snapshotValue{SnapshotEpoch: 1, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 4, DeliveryCompleteCount: -1,
		CreateTimestamp: 5, WriteTimestamp: 6,
		Batches: []sharestate.Batch{{FirstOffset: 10, LastOffset: 12, DeliveryState: sharestate.Acknowledged, DeliveryCount: 1}}}
	want := "0000" + // value version 0
		"00000001" + "00000002" + "00000003" + "0000000000000004" + // snapshot, state, leader epoch, start offset
		"0000000000000005" + "0000000000000006" + // create, write timestamp
		"02" + "000000000000000a" + "000000000000000c" + "02" + "0001" + "00" + // one batch, its empty tags
		"00" // no tagged fields (DeliveryCompleteCount at its default)
	if got := hex.EncodeToString(encodeSnapshot(v)); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	v.DeliveryCompleteCount = 9
	want = want[:len(want)-2] + "01" + "00" + "04" + "00000009"
	b := encodeSnapshot(v)
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("with count\n got %s\nwant %s", got, want)
	}
	d, err := decodeSnapshot(b)
	if err != nil || !reflect.DeepEqual(d, v) {
		t.Fatalf("decode = %+v %v", d, err)
	}
	for i := range b {
		if _, err := decodeSnapshot(b[:i]); err == nil {
			t.Fatalf("truncated to %d bytes accepted", i)
		}
	}
}

func TestUpdateValueEncoding(t *testing.T) {
	v := &updateValue{SnapshotEpoch: 7, LeaderEpoch: 8, StartOffset: -1, DeliveryCompleteCount: -1}
	want := "0000" + "00000007" + "00000008" + "ffffffffffffffff" + "01" + "00"
	b := encodeUpdate(v)
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	d, err := decodeUpdate(b)
	if err != nil || d.SnapshotEpoch != 7 || d.LeaderEpoch != 8 || d.StartOffset != -1 || d.DeliveryCompleteCount != -1 || len(d.Batches) != 0 {
		t.Fatalf("decode = %+v %v", d, err)
	}
	// An unknown tagged field is skipped.
	withTag := append(append([]byte(nil), b[:len(b)-1]...), 1, 5, 2, 0xde, 0xad)
	if d, err := decodeUpdate(withTag); err != nil || d.LeaderEpoch != 8 {
		t.Fatalf("unknown tag: %+v %v", d, err)
	}
	// A batch count beyond the bytes left is refused without allocating it.
	huge := append(bytes.Clone(b[:len(b)-2]), 0xff, 0xff, 0xff, 0xff, 0x0f)
	if _, err := decodeUpdate(huge); err == nil {
		t.Fatal("huge batch count accepted")
	}
}

func TestCoordinatorKeyAndPlacement(t *testing.T) {
	k := sharestate.Key{Group: "my:group", TopicID: [16]byte{0: 1, 15: 2}, Partition: 12}
	s := CoordinatorKey(k)
	if s != "my:group:AQAAAAAAAAAAAAAAAAAAAg:12" {
		t.Fatalf("CoordinatorKey = %q", s)
	}
	back, err := ParseCoordinatorKey(s)
	if err != nil || back != k {
		t.Fatalf("ParseCoordinatorKey = %+v %v", back, err)
	}
	for _, bad := range []string{"", "g", "g:x:1", ":AQAAAAAAAAAAAAAAAAAAAg:1", "g:AQAAAAAAAAAAAAAAAAAAAg:-1", "g:AQAAAAAAAAAAAAAAAAAAAg:x"} {
		if _, err := ParseCoordinatorKey(bad); err == nil {
			t.Errorf("ParseCoordinatorKey(%q) accepted", bad)
		}
	}
	// Java: Utils.abs("my:group:AQAAAAAAAAAAAAAAAAAAAg:12".hashCode()) % 50.
	h := int32(0)
	for _, c := range s {
		h = 31*h + int32(c)
	}
	if h < 0 {
		h = -h
	}
	if got := PartitionFor(k, 50); got != h%50 {
		t.Fatalf("PartitionFor = %d, want %d", got, h%50)
	}
}
