package coordinator

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/weir-mq/weir/record"
)

var updateFuzzOffsetsSeeds = flag.Bool("update-fuzz-offsets-seeds", false, "rewrite coordinator/testdata/fuzz/FuzzOffsetsRecord")

// FuzzOffsetsRecord feeds arbitrary bytes, as a __consumer_offsets record key and value, to the
// decoders the coordinator runs when it loads a partition (a forged or corrupt record must be
// an error, never a panic or an unbounded allocation), and the key and value as a whole stored
// batch to eachRecord. What decodes must survive a round trip through the encoders: the key
// exactly; an offset value as the version appendOffsetValue picks (an expire timestamp forces
// v1, which has no leader epoch); a group value as v3; a consumer group member value (with its
// ClassicMemberMetadata) as v0. A batch built from the key and value
// yields them back (tombstone: the value is null); as a control batch, its marker type is the
// key's second int16.
//
// Seeds: testdata/fuzz/FuzzOffsetsRecord (real keys and values of every version, written by
// TestFuzzOffsetsRecordSeeds -update-fuzz-offsets-seeds).
func FuzzOffsetsRecord(f *testing.F) {
	// A consumer group member of the classic protocol (ClassicMemberMetadata, tag 0).
	f.Add(cgMemberKey("g", "m"), appendCGMemberValue(nil, &cgMemberValue{ClientID: "c", ClientHost: "h", SubscribedTopics: []string{"t"},
		RebalanceTimeoutMs: 5, Classic: &classicMeta{SessionTimeoutMs: 10, Protocols: []Protocol{{Name: "range", Metadata: []byte{0, 1}}}}}), false)
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		}
		if k, err := parseKey(key); err == nil {
			var again []byte
			if k.IsOffset {
				again = appendOffsetKey(nil, k.Group, k.Topic, k.Partition)
			} else {
				again = appendGroupKey(nil, k.Group)
			}
			if k2, err := parseKey(again); err != nil || k2 != k {
				t.Fatalf("key round trip: %+v -> %+v, %v", k, k2, err)
			}
		}
		if v, err := parseOffsetValue(value); err == nil {
			want := v
			if v.ExpireTimestamp >= 0 {
				want.LeaderEpoch = -1
			}
			if v2, err := parseOffsetValue(appendOffsetValue(nil, v)); err != nil || v2 != want {
				t.Fatalf("offset value round trip: %+v -> %+v, %v", v, v2, err)
			}
		}
		if g, err := parseGroupValue(value); err == nil {
			if g2, err := parseGroupValue(appendGroupValue(nil, g)); err != nil || !reflect.DeepEqual(g, g2) {
				t.Fatalf("group value round trip: %+v -> %+v, %v", g, g2, err)
			}
		}
		if m, err := parseCGMemberValue(value); err == nil {
			if m2, err := parseCGMemberValue(appendCGMemberValue(nil, m)); err != nil || !reflect.DeepEqual(m, m2) {
				t.Fatalf("consumer group member value round trip: %+v -> %+v, %v", m, m2, err)
			}
		}
		_ = eachRecord(key, func(k, v []byte) error { return nil })
		_ = readBatch(key, func(*record.Header, int16) error { return nil }, func(*record.Header, int64, []byte, []byte) error { return nil })
		// The key and value as a control record: its type is the key's second int16.
		ctl := record.Build(nil, record.BuildOptions{BaseTimestamp: 1, ProducerID: 1, BaseSequence: -1, Attributes: attrControl | attrTransactional},
			[]record.Record{{Key: key, Value: value}})
		marker := int16(-1)
		err := readBatch(ctl, func(_ *record.Header, typ int16) error { marker = typ; return nil }, nil)
		if len(key) >= 4 && (err != nil || marker != int16(key[2])<<8|int16(key[3])) {
			t.Fatalf("control record key %x: type %d, %v", key, marker, err)
		}
		n := 0
		err = eachRecord(buildBatch(1, []kv{{Key: key, Value: value}}), func(k, v []byte) error {
			n++
			if string(k) != string(key) || string(v) != string(value) || (v == nil) != (value == nil) {
				return fmt.Errorf("record %q=%q, want %q=%q", k, v, key, value)
			}
			return nil
		})
		if err != nil || n != 1 {
			t.Fatalf("built batch: %d records, %v", n, err)
		}
	})
}

// TestFuzzOffsetsRecordSeeds checks the seed corpus is there (and rewrites it with the flag).
func TestFuzzOffsetsRecordSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzOffsetsRecord")
	if !*updateFuzzOffsetsSeeds {
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) < 8 {
			t.Fatalf("seed corpus %s: %d files, %v (regenerate with -update-fuzz-offsets-seeds)", dir, len(ents), err)
		}
		return
	}
	// Rewrite the seed-* files only: inputs the fuzzer found stay.
	old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := func(v string) *string { return &v }
	ov := offsetValue{Offset: 42, LeaderEpoch: 3, Metadata: "meta", CommitTimestamp: 1700000000000, ExpireTimestamp: -1}
	ovExp := ov
	ovExp.ExpireTimestamp = 1700000600000
	gv := &groupValue{ProtocolType: "consumer", Generation: 7, Protocol: s("range"), Leader: s("m-1"), CurrentStateTimestamp: 1700000000000,
		Members: []memberValue{
			{MemberID: "m-1", InstanceID: s("i-1"), ClientID: "c", ClientHost: "/127.0.0.1", RebalanceTimeout: 60000, SessionTimeout: 45000, Subscription: []byte{0, 1, 0, 0, 0, 1, 0, 1, 't'}, Assignment: []byte{}},
			{MemberID: "m-2", ClientID: "c", ClientHost: "/127.0.0.2", RebalanceTimeout: -1, SessionTimeout: 10000, Subscription: []byte{}, Assignment: []byte{1, 2}},
		}}
	empty := &groupValue{ProtocolType: "consumer", CurrentStateTimestamp: -1}
	offKey := appendOffsetKey(nil, "group", "topic", 3)
	offKeyV0 := append([]byte{0, 0}, offKey[2:]...)
	grpKey := appendGroupKey(nil, "group")
	seeds := [][2][]byte{
		{offKey, appendOffsetValue(nil, ov)},
		{offKeyV0, appendOffsetValue(nil, ovExp)},
		{offKey, appendOffsetValueV4(nil, ov)},
		{offKey, nil},
		{grpKey, appendGroupValue(nil, gv)},
		{grpKey, appendGroupValueV4(nil, gv)},
		{grpKey, appendGroupValue(nil, empty)},
		{grpKey, nil},
		{[]byte{0, 5, 0, 1, 'g'}, []byte{0, 0}},                   // a KIP-848 record key: skipped by the loader
		{[]byte{0, 1, 0x7f, 0xff}, []byte{0, 3, 0xff}},            // truncated
		{[]byte{0, 2, 0, 1, 'g'}, []byte{0, 4, 0, 0, 0, 0, 0xff}}, // a huge member count
		{buildBatch(1, []kv{{Key: offKey, Value: appendOffsetValue(nil, ov)}, {Key: grpKey, Value: appendGroupValue(nil, gv)}}), nil},
	}
	for i, sd := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n[]byte(%s)\nbool(%v)\n", strconv.Quote(string(sd[0])), strconv.Quote(string(sd[1])), sd[1] == nil)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%03d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
