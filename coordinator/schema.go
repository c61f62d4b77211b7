package coordinator

// Kafka's record schemas for __consumer_offsets (group-coordinator's OffsetCommitKey.json,
// OffsetCommitValue.json, GroupMetadataKey.json, GroupMetadataValue.json). A key starts with an
// int16 version that names the record type: 0 and 1 are OffsetCommitKey (group, topic,
// partition), 2 is GroupMetadataKey (group); later versions are other coordinators' records
// (KIP-848 consumer groups, share groups), which weir skips. A value starts with its own int16
// version. A null value is a tombstone: the key's offset or group is deleted.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

const (
	offsetCommitKeyVersion  = 1 // the version Kafka writes (0 is read too)
	groupMetadataKeyVersion = 2
)

// recordKey is a decoded __consumer_offsets key.
type recordKey struct {
	// Group is set for both kinds; Topic and Partition only for offset commits.
	Group     string
	Topic     string
	Partition int32
	// IsOffset distinguishes an OffsetCommitKey from a GroupMetadataKey.
	IsOffset bool
}

// offsetValue is an OffsetCommitValue (v0-v4).
type offsetValue struct {
	Offset          int64
	LeaderEpoch     int32 // -1: unknown (v3+)
	Metadata        string
	CommitTimestamp int64 // ms
	ExpireTimestamp int64 // ms, -1: none (v1 only)

	// recordOffset is the log offset of the record that carried this value (not part of the
	// schema): a transaction's offset replaces a committed one at its COMMIT marker only if
	// its record is later in the log, as Kafka's OffsetAndMetadata.recordOffset decides.
	recordOffset int64
}

// groupValue is a GroupMetadataValue (v0-v4).
type groupValue struct {
	ProtocolType          string
	Generation            int32
	Protocol              *string
	Leader                *string
	CurrentStateTimestamp int64 // ms, -1: unknown (v2+)
	Members               []memberValue
}

type memberValue struct {
	MemberID         string
	InstanceID       *string // v3+
	ClientID         string
	ClientHost       string
	RebalanceTimeout int32 // v1+; -1 on load of v0 means "same as session timeout"
	SessionTimeout   int32
	Subscription     []byte
	Assignment       []byte
}

var errUnknownKeyVersion = errors.New("unknown __consumer_offsets key version")

func appendOffsetKey(dst []byte, group, topic string, partition int32) []byte {
	dst = kbin.AppendInt16(dst, offsetCommitKeyVersion)
	dst = kbin.AppendString(dst, group)
	dst = kbin.AppendString(dst, topic)
	return kbin.AppendInt32(dst, partition)
}

func appendGroupKey(dst []byte, group string) []byte {
	dst = kbin.AppendInt16(dst, groupMetadataKeyVersion)
	return kbin.AppendString(dst, group)
}

// parseKey decodes a key; errUnknownKeyVersion for record types weir does not own.
func parseKey(b []byte) (recordKey, error) {
	r := kbin.Reader{Src: b}
	v := r.Int16()
	var k recordKey
	switch v {
	case 0, 1:
		k.IsOffset = true
		k.Group = r.String()
		k.Topic = r.String()
		k.Partition = r.Int32()
	case 2:
		k.Group = r.String()
	default:
		if !r.Ok() {
			return k, errors.New("short __consumer_offsets key")
		}
		return k, fmt.Errorf("%w %d", errUnknownKeyVersion, v)
	}
	if err := r.Complete(); err != nil {
		return k, fmt.Errorf("__consumer_offsets key v%d: %w", v, err)
	}
	return k, nil
}

// appendOffsetValue encodes v as version 3 (Kafka's current non-flexible version), or as
// version 1 when it carries an expire timestamp (OffsetCommit v2-v4 retention time).
func appendOffsetValue(dst []byte, v offsetValue) []byte {
	if v.ExpireTimestamp >= 0 {
		dst = kbin.AppendInt16(dst, 1)
		dst = kbin.AppendInt64(dst, v.Offset)
		dst = kbin.AppendString(dst, v.Metadata)
		dst = kbin.AppendInt64(dst, v.CommitTimestamp)
		return kbin.AppendInt64(dst, v.ExpireTimestamp)
	}
	dst = kbin.AppendInt16(dst, 3)
	dst = kbin.AppendInt64(dst, v.Offset)
	dst = kbin.AppendInt32(dst, v.LeaderEpoch)
	dst = kbin.AppendString(dst, v.Metadata)
	return kbin.AppendInt64(dst, v.CommitTimestamp)
}

// appendOffsetValueV4 encodes v as the flexible version 4 (tests: weir reads what newer Kafka
// versions write).
func appendOffsetValueV4(dst []byte, v offsetValue) []byte {
	dst = kbin.AppendInt16(dst, 4)
	dst = kbin.AppendInt64(dst, v.Offset)
	dst = kbin.AppendInt32(dst, v.LeaderEpoch)
	dst = kbin.AppendCompactString(dst, v.Metadata)
	dst = kbin.AppendInt64(dst, v.CommitTimestamp)
	return kbin.AppendUvarint(dst, 0) // no tagged fields
}

func parseOffsetValue(b []byte) (offsetValue, error) {
	r := kbin.Reader{Src: b}
	ver := r.Int16()
	v := offsetValue{LeaderEpoch: -1, ExpireTimestamp: -1}
	if ver < 0 || ver > 4 {
		return v, fmt.Errorf("OffsetCommitValue version %d", ver)
	}
	flexible := ver >= 4
	v.Offset = r.Int64()
	if ver >= 3 {
		v.LeaderEpoch = r.Int32()
	}
	if flexible {
		v.Metadata = r.CompactString()
	} else {
		v.Metadata = r.String()
	}
	v.CommitTimestamp = r.Int64()
	if ver == 1 {
		// Any negative expire timestamp means none, as -1 does (FuzzOffsetsRecord: a forged
		// -5 must not survive as a different value than the one re-encoded).
		v.ExpireTimestamp = max(-1, r.Int64())
	}
	if flexible {
		skipTags(&r)
	}
	if !r.Ok() {
		return v, fmt.Errorf("OffsetCommitValue v%d: truncated", ver)
	}
	return v, nil
}

// appendGroupValue encodes v as version 3 (Kafka's current non-flexible version).
func appendGroupValue(dst []byte, v *groupValue) []byte {
	dst = kbin.AppendInt16(dst, 3)
	dst = kbin.AppendString(dst, v.ProtocolType)
	dst = kbin.AppendInt32(dst, v.Generation)
	dst = kbin.AppendNullableString(dst, v.Protocol)
	dst = kbin.AppendNullableString(dst, v.Leader)
	dst = kbin.AppendInt64(dst, v.CurrentStateTimestamp)
	dst = kbin.AppendArrayLen(dst, len(v.Members))
	for i := range v.Members {
		m := &v.Members[i]
		dst = kbin.AppendString(dst, m.MemberID)
		dst = kbin.AppendNullableString(dst, m.InstanceID)
		dst = kbin.AppendString(dst, m.ClientID)
		dst = kbin.AppendString(dst, m.ClientHost)
		dst = kbin.AppendInt32(dst, m.RebalanceTimeout)
		dst = kbin.AppendInt32(dst, m.SessionTimeout)
		dst = kbin.AppendBytes(dst, m.Subscription)
		dst = kbin.AppendBytes(dst, m.Assignment)
	}
	return dst
}

// appendGroupValueV4 encodes v as the flexible version 4 (tests).
func appendGroupValueV4(dst []byte, v *groupValue) []byte {
	dst = kbin.AppendInt16(dst, 4)
	dst = kbin.AppendCompactString(dst, v.ProtocolType)
	dst = kbin.AppendInt32(dst, v.Generation)
	dst = kbin.AppendCompactNullableString(dst, v.Protocol)
	dst = kbin.AppendCompactNullableString(dst, v.Leader)
	dst = kbin.AppendInt64(dst, v.CurrentStateTimestamp)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Members))
	for i := range v.Members {
		m := &v.Members[i]
		dst = kbin.AppendCompactString(dst, m.MemberID)
		dst = kbin.AppendCompactNullableString(dst, m.InstanceID)
		dst = kbin.AppendCompactString(dst, m.ClientID)
		dst = kbin.AppendCompactString(dst, m.ClientHost)
		dst = kbin.AppendInt32(dst, m.RebalanceTimeout)
		dst = kbin.AppendInt32(dst, m.SessionTimeout)
		dst = kbin.AppendCompactBytes(dst, m.Subscription)
		dst = kbin.AppendCompactBytes(dst, m.Assignment)
		dst = kbin.AppendUvarint(dst, 0)
	}
	return kbin.AppendUvarint(dst, 0)
}

func parseGroupValue(b []byte) (*groupValue, error) {
	r := kbin.Reader{Src: b}
	ver := r.Int16()
	if ver < 0 || ver > 4 {
		return nil, fmt.Errorf("GroupMetadataValue version %d", ver)
	}
	flexible := ver >= 4
	str := func() string {
		if flexible {
			return r.CompactString()
		}
		return r.String()
	}
	nstr := func() *string {
		if flexible {
			return r.CompactNullableString()
		}
		return r.NullableString()
	}
	byts := func() []byte {
		var p []byte
		if flexible {
			p = r.CompactBytes()
		} else {
			p = r.Bytes()
		}
		return append([]byte{}, p...) // the batch buffer is reused
	}
	v := &groupValue{CurrentStateTimestamp: -1}
	v.ProtocolType = str()
	v.Generation = r.Int32()
	v.Protocol = nstr()
	v.Leader = nstr()
	if ver >= 2 {
		v.CurrentStateTimestamp = r.Int64()
	}
	var n int32
	if flexible {
		n = r.CompactArrayLen()
	} else {
		n = r.ArrayLen()
	}
	if n < 0 || int(n) > len(r.Src) { // every member takes bytes: bound before allocating
		return nil, fmt.Errorf("GroupMetadataValue: %d members", n)
	}
	v.Members = make([]memberValue, 0, n)
	for i := int32(0); i < n && r.Ok(); i++ {
		m := memberValue{RebalanceTimeout: -1}
		m.MemberID = str()
		if ver >= 3 {
			m.InstanceID = nstr()
		}
		m.ClientID = str()
		m.ClientHost = str()
		if ver >= 1 {
			m.RebalanceTimeout = r.Int32()
		}
		m.SessionTimeout = r.Int32()
		m.Subscription = byts()
		m.Assignment = byts()
		if flexible {
			skipTags(&r)
		}
		v.Members = append(v.Members, m)
	}
	if flexible {
		skipTags(&r)
	}
	if !r.Ok() {
		return nil, fmt.Errorf("GroupMetadataValue v%d: truncated", ver)
	}
	return v, nil
}

// skipTags skips a flexible struct's tagged fields.
func skipTags(r *kbin.Reader) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		r.Uvarint() // tag
		size := r.Uvarint()
		r.Span(int(size))
	}
}
