package coordinator

// Share group records on __consumer_offsets in Kafka's schemas (group-coordinator's
// ShareGroup*Key.json / ShareGroup*Value.json, as Kafka 4.3+ writes them). Keys are
// non-flexible: the int16 key version, the group id and, for per-member records, the member id.
// Values are flexible version 0: compact strings and arrays, a tagged-field section at the end.
//
//	10 ShareGroupMemberMetadata            RackId (nullable), ClientId, ClientHost, SubscribedTopicNames
//	11 ShareGroupMetadata                  Epoch, MetadataHash
//	12 ShareGroupTargetAssignmentMetadata  AssignmentEpoch (tag 0: AssignmentTimestamp)
//	13 ShareGroupTargetAssignmentMember    TopicPartitions [TopicId, Partitions]
//	14 ShareGroupCurrentMemberAssignment   MemberEpoch, PreviousMemberEpoch, State, AssignedPartitions
//	15 ShareGroupStatePartitionMetadata    InitializingTopics, InitializedTopics [TopicId, TopicName,
//	                                       Partitions], DeletingTopics [TopicId, TopicName]
//
// Key version 9 (ShareGroupPartitionMetadata, the subscribed topics' metadata before Kafka 4.1)
// is read and ignored, never written. A null value is a tombstone.

import (
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kbin"
)

// topicParts is a set of partitions of each topic (by id), partition lists sorted.
type topicParts map[[16]byte][]int32

// clone returns a deep copy.
func (t topicParts) clone() topicParts {
	out := make(topicParts, len(t))
	for id, ps := range t {
		out[id] = append([]int32(nil), ps...)
	}
	return out
}

// equal reports whether t and o hold the same partitions.
func (t topicParts) equal(o topicParts) bool {
	n := 0
	for id, ps := range t {
		if len(ps) == 0 {
			continue
		}
		n++
		qs := o[id]
		if len(qs) != len(ps) {
			return false
		}
		for i := range ps {
			if ps[i] != qs[i] {
				return false
			}
		}
	}
	m := 0
	for _, qs := range o {
		if len(qs) > 0 {
			m++
		}
	}
	return n == m
}

// sortedIDs returns t's topic ids in byte order.
func (t topicParts) sortedIDs() [][16]byte {
	ids := make([][16]byte, 0, len(t))
	for id := range t {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	return ids
}

// shareMemberValue is ShareGroupMemberMetadataValue.
type shareMemberValue struct {
	RackID     *string
	ClientID   string
	ClientHost string
	Subscribed []string
}

// shareAssignmentValue is ShareGroupCurrentMemberAssignmentValue.
type shareAssignmentValue struct {
	MemberEpoch, PreviousMemberEpoch int32
	State                            int8
	Assigned                         topicParts
}

// shareTopicInfo is one topic of ShareGroupStatePartitionMetadataValue.
type shareTopicInfo struct {
	Name       string
	Partitions []int32 // sorted; nil for a deleting topic
}

// shareStateValue is ShareGroupStatePartitionMetadataValue.
type shareStateValue struct {
	Initializing map[[16]byte]shareTopicInfo
	Initialized  map[[16]byte]shareTopicInfo
	Deleting     map[[16]byte]string
}

func appendShareKey(dst []byte, v int16, group string) []byte {
	dst = kbin.AppendInt16(dst, v)
	return kbin.AppendString(dst, group)
}

func appendShareMemberKey(dst []byte, v int16, group, member string) []byte {
	dst = appendShareKey(dst, v, group)
	return kbin.AppendString(dst, member)
}

// parseShareKey decodes a share group key of version v: the group id, and the member id for
// the per-member record types.
func parseShareKey(v int16, key []byte) (group, member string, err error) {
	r := kbin.Reader{Src: key}
	r.Int16()
	group = r.String()
	switch v {
	case recShareGroupMemberMetadata, recShareGroupTargetAssignmentMember, recShareGroupCurrentMemberAssignment:
		member = r.String()
	}
	if err := r.Complete(); err != nil {
		return "", "", fmt.Errorf("share group key v%d: %w", v, err)
	}
	return group, member, nil
}

func appendFlexHeader(dst []byte) []byte { return kbin.AppendInt16(dst, 0) }

func appendNoTags(dst []byte) []byte { return kbin.AppendUvarint(dst, 0) }

func appendCompactStrings(dst []byte, ss []string) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(ss))
	for _, s := range ss {
		dst = kbin.AppendCompactString(dst, s)
	}
	return dst
}

func appendCompactInt32s(dst []byte, ps []int32) []byte {
	dst = kbin.AppendCompactArrayLen(dst, len(ps))
	for _, p := range ps {
		dst = kbin.AppendInt32(dst, p)
	}
	return dst
}

// appendTopicParts encodes t as a compact array of {TopicId, Partitions, tags}.
func appendTopicParts(dst []byte, t topicParts) []byte {
	ids := t.sortedIDs()
	dst = kbin.AppendCompactArrayLen(dst, len(ids))
	for _, id := range ids {
		dst = kbin.AppendUuid(dst, id)
		dst = appendCompactInt32s(dst, t[id])
		dst = appendNoTags(dst)
	}
	return dst
}

func appendShareMemberValue(dst []byte, v shareMemberValue) []byte {
	dst = appendFlexHeader(dst)
	dst = kbin.AppendCompactNullableString(dst, v.RackID)
	dst = kbin.AppendCompactString(dst, v.ClientID)
	dst = kbin.AppendCompactString(dst, v.ClientHost)
	dst = appendCompactStrings(dst, v.Subscribed)
	return appendNoTags(dst)
}

func appendShareGroupValue(dst []byte, epoch int32, metadataHash int64) []byte {
	dst = appendFlexHeader(dst)
	dst = kbin.AppendInt32(dst, epoch)
	dst = kbin.AppendInt64(dst, metadataHash)
	return appendNoTags(dst)
}

func appendShareTargetMetaValue(dst []byte, epoch int32) []byte {
	dst = appendFlexHeader(dst)
	dst = kbin.AppendInt32(dst, epoch)
	return appendNoTags(dst) // AssignmentTimestamp (tag 0) left at its default
}

func appendShareTargetMemberValue(dst []byte, t topicParts) []byte {
	dst = appendFlexHeader(dst)
	dst = appendTopicParts(dst, t)
	return appendNoTags(dst)
}

func appendShareAssignmentValue(dst []byte, v shareAssignmentValue) []byte {
	dst = appendFlexHeader(dst)
	dst = kbin.AppendInt32(dst, v.MemberEpoch)
	dst = kbin.AppendInt32(dst, v.PreviousMemberEpoch)
	dst = kbin.AppendInt8(dst, v.State)
	dst = appendTopicParts(dst, v.Assigned)
	return appendNoTags(dst)
}

func appendTopicInfos(dst []byte, m map[[16]byte]shareTopicInfo) []byte {
	ids := make([][16]byte, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	dst = kbin.AppendCompactArrayLen(dst, len(ids))
	for _, id := range ids {
		dst = kbin.AppendUuid(dst, id)
		dst = kbin.AppendCompactString(dst, m[id].Name)
		dst = appendCompactInt32s(dst, m[id].Partitions)
		dst = appendNoTags(dst)
	}
	return dst
}

func appendShareStateValue(dst []byte, v shareStateValue) []byte {
	dst = appendFlexHeader(dst)
	dst = appendTopicInfos(dst, v.Initializing)
	dst = appendTopicInfos(dst, v.Initialized)
	ids := make([][16]byte, 0, len(v.Deleting))
	for id := range v.Deleting {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	dst = kbin.AppendCompactArrayLen(dst, len(ids))
	for _, id := range ids {
		dst = kbin.AppendUuid(dst, id)
		dst = kbin.AppendCompactString(dst, v.Deleting[id])
		dst = appendNoTags(dst)
	}
	return appendNoTags(dst)
}

// ---- decoding ----

var errShareValue = errors.New("share group record value")

// flexReader reads a flexible value; every array length is bounded by the bytes left (each
// element takes at least one byte), so a corrupt length cannot allocate beyond the record.
type flexReader struct{ kbin.Reader }

func newFlexReader(b []byte) (*flexReader, error) {
	r := &flexReader{kbin.Reader{Src: b}}
	if v := r.Int16(); !r.Ok() || v < 0 {
		return nil, fmt.Errorf("%w: bad version", errShareValue)
	}
	return r, nil
}

func (r *flexReader) arrayLen() int {
	n := r.CompactArrayLen()
	if n < 0 || int(n) > len(r.Src) {
		r.Src = nil // poison: Ok() turns false on the next read
		r.Int8()
		return 0
	}
	return int(n)
}

func (r *flexReader) int32s() []int32 {
	n := r.arrayLen()
	if n*4 > len(r.Src) {
		r.Src = nil
		r.Int8()
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = r.Int32()
	}
	return out
}

func (r *flexReader) topicParts() topicParts {
	n := r.arrayLen()
	out := make(topicParts, n)
	for i := 0; i < n && r.Ok(); i++ {
		id := r.Uuid()
		ps := r.int32s()
		skipTags(&r.Reader)
		sort.Slice(ps, func(a, b int) bool { return ps[a] < ps[b] })
		out[id] = ps
	}
	return out
}

func (r *flexReader) done(what string) error {
	skipTags(&r.Reader)
	if !r.Ok() {
		return fmt.Errorf("%w %s: truncated", errShareValue, what)
	}
	return nil
}

func parseShareMemberValue(b []byte) (shareMemberValue, error) {
	var v shareMemberValue
	r, err := newFlexReader(b)
	if err != nil {
		return v, err
	}
	v.RackID = r.CompactNullableString()
	v.ClientID = r.CompactString()
	v.ClientHost = r.CompactString()
	n := r.arrayLen()
	for i := 0; i < n && r.Ok(); i++ {
		v.Subscribed = append(v.Subscribed, r.CompactString())
	}
	sort.Strings(v.Subscribed)
	return v, r.done("ShareGroupMemberMetadataValue")
}

func parseShareGroupValue(b []byte) (epoch int32, hash int64, err error) {
	r, err := newFlexReader(b)
	if err != nil {
		return 0, 0, err
	}
	epoch = r.Int32()
	if len(r.Src) >= 9 { // MetadataHash (Kafka 4.1+); a 4.0 record ends after the epoch
		hash = r.Int64()
	}
	return epoch, hash, r.done("ShareGroupMetadataValue")
}

func parseShareTargetMetaValue(b []byte) (int32, error) {
	r, err := newFlexReader(b)
	if err != nil {
		return 0, err
	}
	e := r.Int32()
	return e, r.done("ShareGroupTargetAssignmentMetadataValue")
}

func parseShareTargetMemberValue(b []byte) (topicParts, error) {
	r, err := newFlexReader(b)
	if err != nil {
		return nil, err
	}
	t := r.topicParts()
	return t, r.done("ShareGroupTargetAssignmentMemberValue")
}

func parseShareAssignmentValue(b []byte) (shareAssignmentValue, error) {
	var v shareAssignmentValue
	r, err := newFlexReader(b)
	if err != nil {
		return v, err
	}
	v.MemberEpoch = r.Int32()
	v.PreviousMemberEpoch = r.Int32()
	v.State = r.Int8()
	v.Assigned = r.topicParts()
	return v, r.done("ShareGroupCurrentMemberAssignmentValue")
}

func (r *flexReader) topicInfos(withPartitions bool) map[[16]byte]shareTopicInfo {
	n := r.arrayLen()
	out := make(map[[16]byte]shareTopicInfo, n)
	for i := 0; i < n && r.Ok(); i++ {
		id := r.Uuid()
		ti := shareTopicInfo{Name: r.CompactString()}
		if withPartitions {
			ti.Partitions = r.int32s()
			sort.Slice(ti.Partitions, func(a, b int) bool { return ti.Partitions[a] < ti.Partitions[b] })
		}
		skipTags(&r.Reader)
		out[id] = ti
	}
	return out
}

func parseShareStateValue(b []byte) (shareStateValue, error) {
	var v shareStateValue
	r, err := newFlexReader(b)
	if err != nil {
		return v, err
	}
	v.Initializing = r.topicInfos(true)
	v.Initialized = r.topicInfos(true)
	v.Deleting = map[[16]byte]string{}
	for id, ti := range r.topicInfos(false) {
		v.Deleting[id] = ti.Name
	}
	return v, r.done("ShareGroupStatePartitionMetadataValue")
}
