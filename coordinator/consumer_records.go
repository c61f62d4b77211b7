package coordinator

// KIP-848 consumer group records on __consumer_offsets, in Kafka's schemas
// (group-coordinator's ConsumerGroup*Key.json / *Value.json). A key is an int16 record type
// followed by the key's fields (not flexible); a value is an int16 version (0) followed by the
// value's fields in the flexible encoding (compact strings and arrays, tagged fields at the end
// of every struct). Tagged fields weir does not use are skipped when read.

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kbin"
)

// cgKey is a decoded consumer group record key: the group, and the member id (types 5, 7, 8)
// or the regular expression (type 16).
type cgKey struct {
	Type  int16
	Group string
	Sub   string
}

func appendCGKey(dst []byte, typ int16, group string, sub *string) []byte {
	dst = kbin.AppendInt16(dst, typ)
	dst = kbin.AppendString(dst, group)
	if sub != nil {
		dst = kbin.AppendString(dst, *sub)
	}
	return dst
}

func cgMetadataKey(group string) []byte {
	return appendCGKey(nil, recConsumerGroupMetadata, group, nil)
}
func cgTargetMetadataKey(group string) []byte {
	return appendCGKey(nil, recConsumerGroupTargetAssignmentMetadata, group, nil)
}
func cgMemberKey(group, member string) []byte {
	return appendCGKey(nil, recConsumerGroupMemberMetadata, group, &member)
}
func cgTargetMemberKey(group, member string) []byte {
	return appendCGKey(nil, recConsumerGroupTargetAssignmentMember, group, &member)
}
func cgCurrentKey(group, member string) []byte {
	return appendCGKey(nil, recConsumerGroupCurrentMemberAssignment, group, &member)
}
func cgRegexKey(group, regex string) []byte {
	return appendCGKey(nil, recConsumerGroupRegularExpression, group, &regex)
}

// parseCGKey decodes the key of a consumer group record of type typ.
func parseCGKey(typ int16, b []byte) (cgKey, error) {
	r := kbin.Reader{Src: b}
	k := cgKey{Type: r.Int16()}
	k.Group = r.String()
	switch typ {
	case recConsumerGroupMemberMetadata, recConsumerGroupTargetAssignmentMember,
		recConsumerGroupCurrentMemberAssignment, recConsumerGroupRegularExpression:
		k.Sub = r.String()
	}
	if err := r.Complete(); err != nil {
		return k, fmt.Errorf("consumer group record key type %d: %w", typ, err)
	}
	return k, nil
}

// partitions is a member's partitions per topic id; each list sorted ascending, no empty list.
type partitions map[[16]byte][]int32

func (p partitions) clone() partitions {
	out := make(partitions, len(p))
	for t, ps := range p {
		out[t] = append([]int32(nil), ps...)
	}
	return out
}

func (p partitions) count() int {
	n := 0
	for _, ps := range p {
		n += len(ps)
	}
	return n
}

func (p partitions) has(t [16]byte, part int32) bool {
	ps := p[t]
	i := sort.Search(len(ps), func(i int) bool { return ps[i] >= part })
	return i < len(ps) && ps[i] == part
}

func (p partitions) equal(o partitions) bool {
	if len(p) != len(o) {
		return false
	}
	for t, ps := range p {
		qs, ok := o[t]
		if !ok || len(ps) != len(qs) {
			return false
		}
		for i := range ps {
			if ps[i] != qs[i] {
				return false
			}
		}
	}
	return true
}

// sortedTopics returns p's topic ids in byte order (deterministic records).
func (p partitions) sortedTopics() [][16]byte {
	ids := make([][16]byte, 0, len(p))
	for t := range p {
		ids = append(ids, t)
	}
	sort.Slice(ids, func(i, j int) bool { return string(ids[i][:]) < string(ids[j][:]) })
	return ids
}

// appendTopicPartitions encodes p as a compact array of {TopicId uuid, Partitions []int32,
// tagged fields}.
func appendTopicPartitions(dst []byte, p partitions) []byte {
	ids := p.sortedTopics()
	dst = kbin.AppendCompactArrayLen(dst, len(ids))
	for _, id := range ids {
		dst = kbin.AppendUuid(dst, id)
		ps := p[id]
		dst = kbin.AppendCompactArrayLen(dst, len(ps))
		for _, x := range ps {
			dst = kbin.AppendInt32(dst, x)
		}
		dst = kbin.AppendUvarint(dst, 0)
	}
	return dst
}

// readTopicPartitions decodes appendTopicPartitions' encoding, bounding every count by the
// bytes left.
func readTopicPartitions(r *kbin.Reader) (partitions, error) {
	n := r.CompactArrayLen()
	if n < 0 || int(n) > len(r.Src) {
		return nil, fmt.Errorf("%d topics", n)
	}
	p := make(partitions, n)
	for i := int32(0); i < n && r.Ok(); i++ {
		id := r.Uuid()
		m := r.CompactArrayLen()
		if m < 0 || int(m)*4 > len(r.Src) {
			return nil, fmt.Errorf("%d partitions", m)
		}
		ps := make([]int32, 0, m)
		for j := int32(0); j < m; j++ {
			ps = append(ps, r.Int32())
		}
		skipTags(r)
		if len(ps) > 0 {
			p[id] = normalizePartitions(append(p[id], ps...))
		}
	}
	return p, nil
}

// normalizePartitions sorts ps and drops duplicates.
func normalizePartitions(ps []int32) []int32 {
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	out := ps[:0]
	for i, x := range ps {
		if i == 0 || x != ps[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// cgMetadataValue is ConsumerGroupMetadataValue v0: the group epoch and (tag 0, KIP-1101) the
// hash of the subscribed topics' metadata.
type cgMetadataValue struct {
	Epoch        int32
	MetadataHash int64
}

func appendCGMetadataValue(dst []byte, v cgMetadataValue) []byte {
	dst = kbin.AppendInt16(dst, 0)
	dst = kbin.AppendInt32(dst, v.Epoch)
	if v.MetadataHash == 0 {
		return kbin.AppendUvarint(dst, 0)
	}
	dst = kbin.AppendUvarint(dst, 1) // one tagged field
	dst = kbin.AppendUvarint(dst, 0) // tag 0: MetadataHash
	dst = kbin.AppendUvarint(dst, 8)
	return kbin.AppendInt64(dst, v.MetadataHash)
}

func parseCGMetadataValue(b []byte) (cgMetadataValue, error) {
	r := kbin.Reader{Src: b}
	var v cgMetadataValue
	if ver := r.Int16(); ver != 0 {
		return v, fmt.Errorf("ConsumerGroupMetadataValue version %d", ver)
	}
	v.Epoch = r.Int32()
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag := r.Uvarint()
		size := r.Uvarint()
		if tag == 0 && size == 8 {
			v.MetadataHash = r.Int64()
			continue
		}
		r.Span(int(size))
	}
	if !r.Ok() {
		return v, fmt.Errorf("ConsumerGroupMetadataValue: truncated")
	}
	return v, nil
}

// cgMemberValue is ConsumerGroupMemberMetadataValue v0, with its tagged field 0
// ClassicMemberMetadata (non-nil only for a member of the classic protocol in a consumer group).
type cgMemberValue struct {
	InstanceID         *string
	RackID             *string
	ClientID           string
	ClientHost         string
	SubscribedTopics   []string
	SubscribedRegex    *string
	RebalanceTimeoutMs int32
	ServerAssignor     *string
	Classic            *classicMeta
}

// classicMeta is ConsumerGroupMemberMetadataValue.ClassicMemberMetadata: the session timeout
// and the supported protocols (name, metadata) of a member that joined with JoinGroup.
type classicMeta struct {
	SessionTimeoutMs int32
	Protocols        []Protocol
}

// appendClassicMeta encodes ClassicMemberMetadata (flexible: compact strings and bytes, tagged
// fields ending every struct).
func appendClassicMeta(dst []byte, c *classicMeta) []byte {
	dst = kbin.AppendInt32(dst, c.SessionTimeoutMs)
	dst = kbin.AppendCompactArrayLen(dst, len(c.Protocols))
	for _, p := range c.Protocols {
		dst = kbin.AppendCompactString(dst, p.Name)
		dst = kbin.AppendCompactBytes(dst, p.Metadata)
		dst = kbin.AppendUvarint(dst, 0)
	}
	return kbin.AppendUvarint(dst, 0)
}

// readClassicMeta decodes appendClassicMeta's encoding, bounding counts by the bytes left.
func readClassicMeta(b []byte) (*classicMeta, error) {
	r := kbin.Reader{Src: b}
	c := &classicMeta{SessionTimeoutMs: r.Int32()}
	n := r.CompactArrayLen()
	if n < 0 || int(n) > len(r.Src) {
		return nil, fmt.Errorf("ClassicMemberMetadata: %d protocols", n)
	}
	for i := int32(0); i < n && r.Ok(); i++ {
		name := r.CompactString()
		meta := r.CompactBytes()
		skipTags(&r)
		c.Protocols = append(c.Protocols, Protocol{Name: name, Metadata: append([]byte{}, meta...)})
	}
	skipTags(&r)
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("ClassicMemberMetadata: %w", err)
	}
	return c, nil
}

func appendCGMemberValue(dst []byte, v *cgMemberValue) []byte {
	dst = kbin.AppendInt16(dst, 0)
	dst = kbin.AppendCompactNullableString(dst, v.InstanceID)
	dst = kbin.AppendCompactNullableString(dst, v.RackID)
	dst = kbin.AppendCompactString(dst, v.ClientID)
	dst = kbin.AppendCompactString(dst, v.ClientHost)
	dst = kbin.AppendCompactArrayLen(dst, len(v.SubscribedTopics))
	for _, t := range v.SubscribedTopics {
		dst = kbin.AppendCompactString(dst, t)
	}
	dst = kbin.AppendCompactNullableString(dst, v.SubscribedRegex)
	dst = kbin.AppendInt32(dst, v.RebalanceTimeoutMs)
	dst = kbin.AppendCompactNullableString(dst, v.ServerAssignor)
	if v.Classic == nil {
		return kbin.AppendUvarint(dst, 0)
	}
	cm := appendClassicMeta(nil, v.Classic)
	dst = kbin.AppendUvarint(dst, 1) // one tagged field
	dst = kbin.AppendUvarint(dst, 0) // tag 0: ClassicMemberMetadata
	dst = kbin.AppendUvarint(dst, uint32(len(cm)))
	return append(dst, cm...)
}

func parseCGMemberValue(b []byte) (*cgMemberValue, error) {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return nil, fmt.Errorf("ConsumerGroupMemberMetadataValue version %d", ver)
	}
	v := &cgMemberValue{}
	v.InstanceID = r.CompactNullableString()
	v.RackID = r.CompactNullableString()
	v.ClientID = r.CompactString()
	v.ClientHost = r.CompactString()
	n := r.CompactArrayLen()
	if n < 0 || int(n) > len(r.Src) {
		return nil, fmt.Errorf("ConsumerGroupMemberMetadataValue: %d topics", n)
	}
	v.SubscribedTopics = make([]string, 0, n)
	for i := int32(0); i < n && r.Ok(); i++ {
		v.SubscribedTopics = append(v.SubscribedTopics, r.CompactString())
	}
	v.SubscribedRegex = r.CompactNullableString()
	v.RebalanceTimeoutMs = r.Int32()
	v.ServerAssignor = r.CompactNullableString()
	nt := r.Uvarint()
	for i := uint32(0); i < nt && r.Ok(); i++ {
		tag := r.Uvarint()
		size := r.Uvarint()
		body := r.Span(int(size))
		if tag == 0 && r.Ok() {
			c, err := readClassicMeta(body)
			if err != nil {
				return nil, fmt.Errorf("ConsumerGroupMemberMetadataValue: %w", err)
			}
			v.Classic = c
		}
	}
	if !r.Ok() {
		return nil, fmt.Errorf("ConsumerGroupMemberMetadataValue: truncated")
	}
	return v, nil
}

// appendCGEpochValue encodes ConsumerGroupTargetAssignmentMetadataValue v0 (the assignment
// epoch).
func appendCGEpochValue(dst []byte, epoch int32) []byte {
	dst = kbin.AppendInt16(dst, 0)
	dst = kbin.AppendInt32(dst, epoch)
	return kbin.AppendUvarint(dst, 0)
}

func parseCGEpochValue(b []byte) (int32, error) {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return 0, fmt.Errorf("ConsumerGroupTargetAssignmentMetadataValue version %d", ver)
	}
	e := r.Int32()
	skipTags(&r)
	if !r.Ok() {
		return 0, fmt.Errorf("ConsumerGroupTargetAssignmentMetadataValue: truncated")
	}
	return e, nil
}

// appendCGTargetMemberValue encodes ConsumerGroupTargetAssignmentMemberValue v0.
func appendCGTargetMemberValue(dst []byte, p partitions) []byte {
	dst = kbin.AppendInt16(dst, 0)
	dst = appendTopicPartitions(dst, p)
	return kbin.AppendUvarint(dst, 0)
}

func parseCGTargetMemberValue(b []byte) (partitions, error) {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return nil, fmt.Errorf("ConsumerGroupTargetAssignmentMemberValue version %d", ver)
	}
	p, err := readTopicPartitions(&r)
	if err != nil {
		return nil, fmt.Errorf("ConsumerGroupTargetAssignmentMemberValue: %w", err)
	}
	skipTags(&r)
	if !r.Ok() {
		return nil, fmt.Errorf("ConsumerGroupTargetAssignmentMemberValue: truncated")
	}
	return p, nil
}

// cgCurrentValue is ConsumerGroupCurrentMemberAssignmentValue v0.
type cgCurrentValue struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               memberState
	Assigned            partitions
	PendingRevocation   partitions
}

func appendCGCurrentValue(dst []byte, v *cgCurrentValue) []byte {
	dst = kbin.AppendInt16(dst, 0)
	dst = kbin.AppendInt32(dst, v.MemberEpoch)
	dst = kbin.AppendInt32(dst, v.PreviousMemberEpoch)
	dst = kbin.AppendInt8(dst, int8(v.State))
	dst = appendTopicPartitions(dst, v.Assigned)
	dst = appendTopicPartitions(dst, v.PendingRevocation)
	return kbin.AppendUvarint(dst, 0)
}

func parseCGCurrentValue(b []byte) (*cgCurrentValue, error) {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return nil, fmt.Errorf("ConsumerGroupCurrentMemberAssignmentValue version %d", ver)
	}
	v := &cgCurrentValue{}
	v.MemberEpoch = r.Int32()
	v.PreviousMemberEpoch = r.Int32()
	v.State = memberState(r.Int8())
	var err error
	if v.Assigned, err = readTopicPartitions(&r); err != nil {
		return nil, fmt.Errorf("ConsumerGroupCurrentMemberAssignmentValue: %w", err)
	}
	if v.PendingRevocation, err = readTopicPartitions(&r); err != nil {
		return nil, fmt.Errorf("ConsumerGroupCurrentMemberAssignmentValue: %w", err)
	}
	skipTags(&r)
	if !r.Ok() {
		return nil, fmt.Errorf("ConsumerGroupCurrentMemberAssignmentValue: truncated")
	}
	return v, nil
}

// cgRegexValue is ConsumerGroupRegularExpressionValue v0: the topics a regular expression
// resolved to, the metadata version it was resolved at and when.
type cgRegexValue struct {
	Topics    []string
	Version   int64
	Timestamp int64
}

func appendCGRegexValue(dst []byte, v *cgRegexValue) []byte {
	dst = kbin.AppendInt16(dst, 0)
	dst = kbin.AppendCompactArrayLen(dst, len(v.Topics))
	for _, t := range v.Topics {
		dst = kbin.AppendCompactString(dst, t)
	}
	dst = kbin.AppendInt64(dst, v.Version)
	dst = kbin.AppendInt64(dst, v.Timestamp)
	return kbin.AppendUvarint(dst, 0)
}

func parseCGRegexValue(b []byte) (*cgRegexValue, error) {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return nil, fmt.Errorf("ConsumerGroupRegularExpressionValue version %d", ver)
	}
	v := &cgRegexValue{}
	n := r.CompactArrayLen()
	if n < 0 || int(n) > len(r.Src) {
		return nil, fmt.Errorf("ConsumerGroupRegularExpressionValue: %d topics", n)
	}
	for i := int32(0); i < n && r.Ok(); i++ {
		v.Topics = append(v.Topics, r.CompactString())
	}
	v.Version = r.Int64()
	v.Timestamp = r.Int64()
	skipTags(&r)
	if !r.Ok() {
		return nil, fmt.Errorf("ConsumerGroupRegularExpressionValue: truncated")
	}
	return v, nil
}
