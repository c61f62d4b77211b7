package coordinator

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/weir-mq/weir/record"
)

// Values computed with Java (String.hashCode, then Kafka's Utils.abs and the modulo):
// javac -> "my-group".hashCode() = -1906497762, "polygenelubricants".hashCode() = Integer.MIN_VALUE.
func TestPartitionForMatchesKafka(t *testing.T) {
	for _, c := range []struct {
		group string
		hash  int32
		mod50 int32
		mod7  int32
	}{
		{"", 0, 0, 0},
		{"a", 97, 47, 6},
		{"my-group", -1906497762, 12, 1},
		{"test-group", 627841412, 12, 2},
		{"consumer-group-1", 147483020, 20, 6},
		{"polygenelubricants", -2147483648, 0, 0},
		{"GydZG_", -2147483648, 0, 0},
		{"héllo-wörld", 2000327916, 16, 6},
		{"日本語グループ", -305235731, 31, 3},
		{"😀group", -1231696132, 32, 2},
		{"Aa", 2112, 12, 5},
		{"group-0", 293427298, 48, 3},
	} {
		if h := javaStringHashCode(c.group); h != c.hash {
			t.Errorf("hashCode(%q) = %d, want %d", c.group, h, c.hash)
		}
		if p := PartitionFor(c.group, 50); p != c.mod50 {
			t.Errorf("PartitionFor(%q, 50) = %d, want %d", c.group, p, c.mod50)
		}
		if p := PartitionFor(c.group, 7); p != c.mod7 {
			t.Errorf("PartitionFor(%q, 7) = %d, want %d", c.group, p, c.mod7)
		}
	}
}

func TestSchemaRoundTrip(t *testing.T) {
	k, err := parseKey(appendOffsetKey(nil, "g", "orders", 7))
	if err != nil || !k.IsOffset || k.Group != "g" || k.Topic != "orders" || k.Partition != 7 {
		t.Fatalf("offset key: %+v %v", k, err)
	}
	// Kafka's exact bytes: int16 version 1, then group, topic (int16-prefixed), partition.
	want := []byte{0, 1, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 2}
	if got := appendOffsetKey(nil, "g", "t", 2); !bytes.Equal(got, want) {
		t.Fatalf("offset key bytes % x, want % x", got, want)
	}
	if got := appendGroupKey(nil, "g"); !bytes.Equal(got, []byte{0, 2, 0, 1, 'g'}) {
		t.Fatalf("group key bytes % x", got)
	}
	k, err = parseKey(appendGroupKey(nil, "grp"))
	if err != nil || k.IsOffset || k.Group != "grp" {
		t.Fatalf("group key: %+v %v", k, err)
	}
	if _, err := parseKey([]byte{0, 3, 0, 1, 'x'}); !errors.Is(err, errUnknownKeyVersion) {
		t.Fatalf("KIP-848 key: %v", err)
	}
	if _, err := parseKey([]byte{0, 1, 0, 9}); err == nil {
		t.Fatal("truncated key parsed")
	}

	ov := offsetValue{Offset: 42, LeaderEpoch: 5, Metadata: "md", CommitTimestamp: 1234, ExpireTimestamp: -1}
	for name, b := range map[string][]byte{"v3": appendOffsetValue(nil, ov), "v4": appendOffsetValueV4(nil, ov)} {
		got, err := parseOffsetValue(b)
		if err != nil || got != ov {
			t.Fatalf("%s: %+v %v", name, got, err)
		}
	}
	ov1 := offsetValue{Offset: 1, LeaderEpoch: -1, Metadata: "", CommitTimestamp: 10, ExpireTimestamp: 99}
	b1 := appendOffsetValue(nil, ov1)
	if b1[1] != 1 {
		t.Fatalf("expire timestamp written as v%d, want v1", b1[1])
	}
	if got, err := parseOffsetValue(b1); err != nil || got != ov1 {
		t.Fatalf("v1: %+v %v", got, err)
	}
	if _, err := parseOffsetValue(appendOffsetValue(nil, ov)[:9]); err == nil {
		t.Fatal("truncated value parsed")
	}

	inst := "i-1"
	proto, leader := "range", "m1"
	gv := &groupValue{ProtocolType: "consumer", Generation: 3, Protocol: &proto, Leader: &leader, CurrentStateTimestamp: 777,
		Members: []memberValue{
			{MemberID: "m1", InstanceID: &inst, ClientID: "c", ClientHost: "/127.0.0.1", RebalanceTimeout: 300, SessionTimeout: 100,
				Subscription: []byte("sub"), Assignment: []byte{}},
			{MemberID: "m2", ClientID: "c2", ClientHost: "/10.0.0.1", RebalanceTimeout: 30, SessionTimeout: 10,
				Subscription: []byte{}, Assignment: []byte("asg")},
		}}
	for name, b := range map[string][]byte{"v3": appendGroupValue(nil, gv), "v4": appendGroupValueV4(nil, gv)} {
		got, err := parseGroupValue(b)
		if err != nil || !reflect.DeepEqual(got, gv) {
			t.Fatalf("%s: %+v %v", name, got, err)
		}
	}
	empty := &groupValue{ProtocolType: "consumer", Generation: 4, CurrentStateTimestamp: 1, Members: []memberValue{}}
	if got, err := parseGroupValue(appendGroupValue(nil, empty)); err != nil || !reflect.DeepEqual(got, empty) {
		t.Fatalf("empty group: %+v %v", got, err)
	}
	// A member count larger than the bytes could hold is refused before allocating.
	bad := appendGroupValue(nil, empty)
	bad[len(bad)-1] = 0xff
	bad[len(bad)-2] = 0xff
	if _, err := parseGroupValue(bad); err == nil {
		t.Fatal("absurd member count parsed")
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	in := []kv{{Key: []byte("k1"), Value: []byte("v1")}, {Key: []byte("k2")}, {Key: []byte("k3"), Value: []byte{}}}
	b := buildBatch(1000, in)
	var out []kv
	if err := eachRecord(b, func(k, v []byte) error {
		out = append(out, kv{Key: append([]byte{}, k...), Value: v})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || string(out[0].Value) != "v1" || out[1].Value != nil || out[2].Value == nil || len(out[2].Value) != 0 {
		t.Fatalf("records %+v", out)
	}
	// The same records compressed (as a log written by Kafka may hold them) read the same.
	for codec := 1; codec <= 4; codec++ {
		payload, err := record.Compress(codec, b[record.HeaderSize:])
		if err != nil {
			t.Fatal(err)
		}
		cb := record.WithRecords(b, codec, payload, 3, 2)
		var got []kv
		if err := eachRecord(cb, func(k, v []byte) error {
			got = append(got, kv{Key: append([]byte{}, k...), Value: append([]byte(nil), v...)})
			if v != nil && got[len(got)-1].Value == nil {
				got[len(got)-1].Value = []byte{}
			}
			return nil
		}); err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if len(got) != 3 || string(got[0].Value) != "v1" || got[1].Value != nil || got[2].Value == nil {
			t.Fatalf("codec %d: records %+v", codec, got)
		}
	}
	b[21+1] |= 1 // marked gzip, records not gzip: unreadable, skipped by the loader
	if err := eachRecord(b, func(k, v []byte) error { return nil }); !errors.Is(err, errUnreadable) {
		t.Fatalf("corrupt compressed batch: %v", err)
	}
}
