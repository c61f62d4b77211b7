package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestEndTxnMarkerRoundTrip(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := BuildEndTxnMarker(nil, 42, 1700000000000, 7, 3, EndTxnMarker{Commit: commit, CoordinatorEpoch: 9})
		h, err := CheckStored(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 7 || h.ProducerEpoch != 3 || h.BaseSequence != -1 || h.RecordCount != 1 || h.BaseOffset != 42 {
			t.Fatalf("header %+v", h)
		}
		m, err := ParseEndTxnMarker(b)
		if err != nil {
			t.Fatal(err)
		}
		if m.Commit != commit || m.CoordinatorEpoch != 9 {
			t.Fatalf("marker %+v", m)
		}
		// Kafka's layout: key version 0, type; value version 0, coordinator epoch.
		typ := byte(0)
		if commit {
			typ = 1
		}
		if !bytes.Contains(b, []byte{0, 0, 0, typ}) || !bytes.Contains(b, binary.BigEndian.AppendUint32([]byte{0, 0}, 9)) {
			t.Fatalf("marker bytes %x", b)
		}
	}
}

func TestParseEndTxnMarkerRefusals(t *testing.T) {
	data := Build(nil, BuildOptions{ProducerID: -1}, []Record{{Value: []byte("x")}})
	if _, err := ParseEndTxnMarker(data); err == nil {
		t.Fatal("data batch parsed as a marker")
	}
	other := Build(nil, BuildOptions{ProducerID: 1, Attributes: AttrControl}, []Record{{Key: []byte{0, 0, 0, 5}, Value: []byte{0, 0, 0, 0, 0, 0}}})
	if _, err := ParseEndTxnMarker(other); !errors.Is(err, ErrNotEndTxnMarker) {
		t.Fatalf("unknown control type: %v", err)
	}
	short := Build(nil, BuildOptions{ProducerID: 1, Attributes: AttrControl}, []Record{{Key: []byte{0, 0}, Value: []byte{0, 0, 0, 0, 0, 0}}})
	if _, err := ParseEndTxnMarker(short); err == nil {
		t.Fatal("short key accepted")
	}
	shortVal := Build(nil, BuildOptions{ProducerID: 1, Attributes: AttrControl}, []Record{{Key: []byte{0, 0, 0, 1}, Value: []byte{0, 0}}})
	if _, err := ParseEndTxnMarker(shortVal); err == nil {
		t.Fatal("short value accepted")
	}
}
