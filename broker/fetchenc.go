package broker

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/segment"
)

type segmentSlice = segment.Slice

// fetchPartition is one partition of a Fetch response.
type fetchPartition struct {
	partition     int32
	errorCode     int16
	hw, lso       int64
	logStart      int64
	readCommitted bool
	slice         segment.Slice
	// aborted are the aborted transactions overlapping the records read (read_committed only).
	aborted []engine.AbortedTxn
	// preferredReadReplica, when preferred, is the replica the consumer should read from
	// instead (KIP-392, racks.go; v11+); -1 is sent otherwise.
	preferredReadReplica int32
	preferred            bool
}

// fetchEncoder writes a Fetch response body (v4-v17) straight into a netio.Body, leaving each
// partition's records as a file slice. The layout follows Kafka's FetchResponse schema; tests
// decode every version with kmsg to check it.
type fetchEncoder struct {
	version  int16
	flexible bool
	body     *netio.Body
	b        []byte
}

func newFetchEncoder(version int16) *fetchEncoder {
	e := &fetchEncoder{}
	e.init(version)
	return e
}

// init starts a response at version in a new body (a fetchRun reuses its encoder).
func (e *fetchEncoder) init(version int16) {
	flexible := version >= 12
	body := netio.NewBody(flexible)
	*e = fetchEncoder{version: version, flexible: flexible, body: body, b: body.Bytes()}
}

func (e *fetchEncoder) arrayLen(n int) {
	if e.flexible {
		e.b = kbin.AppendCompactArrayLen(e.b, n)
	} else {
		e.b = kbin.AppendArrayLen(e.b, n)
	}
}

func (e *fetchEncoder) noTags() {
	if e.flexible {
		e.b = append(e.b, 0)
	}
}

// begin writes the top-level fields and the topic count.
func (e *fetchEncoder) begin(throttle int32, errorCode int16, sessionID int32, topics int) {
	e.b = kbin.AppendInt32(e.b, throttle)
	if e.version >= 7 {
		e.b = kbin.AppendInt16(e.b, errorCode)
		e.b = kbin.AppendInt32(e.b, sessionID)
	}
	e.arrayLen(topics)
}

func (e *fetchEncoder) topic(name string, id [16]byte, partitions int) {
	if e.version >= 13 {
		e.b = kbin.AppendUuid(e.b, id)
	} else if e.flexible {
		e.b = kbin.AppendCompactString(e.b, name)
	} else {
		e.b = kbin.AppendString(e.b, name)
	}
	e.arrayLen(partitions)
}

func (e *fetchEncoder) endTopic() { e.noTags() }

// partition writes one partition; the body takes ownership of p.slice.
func (e *fetchEncoder) partition(p *fetchPartition) {
	e.b = kbin.AppendInt32(e.b, p.partition)
	e.b = kbin.AppendInt16(e.b, p.errorCode)
	e.b = kbin.AppendInt64(e.b, p.hw)
	e.b = kbin.AppendInt64(e.b, p.lso)
	if e.version >= 5 {
		e.b = kbin.AppendInt64(e.b, p.logStart)
	}
	// Aborted transactions: null for read_uncommitted; for read_committed those overlapping the
	// records returned (producer_id, first_offset), as Kafka lists them.
	if e.flexible {
		e.b = kbin.AppendCompactNullableArrayLen(e.b, len(p.aborted), !p.readCommitted)
	} else {
		e.b = kbin.AppendNullableArrayLen(e.b, len(p.aborted), !p.readCommitted)
	}
	for _, a := range p.aborted {
		e.b = kbin.AppendInt64(e.b, a.ProducerID)
		e.b = kbin.AppendInt64(e.b, a.FirstOffset)
		e.noTags()
	}
	p.aborted = nil
	if e.version >= 11 {
		preferred := int32(-1)
		if p.preferred {
			preferred = p.preferredReadReplica
		}
		e.b = kbin.AppendInt32(e.b, preferred)
	}
	// Records: never null, zero length when empty.
	n := p.slice.Length
	if e.flexible {
		e.b = binary.AppendUvarint(e.b, uint64(n)+1)
	} else {
		e.b = kbin.AppendInt32(e.b, int32(n))
	}
	if n > 0 {
		e.body.SetBytes(e.b)
		e.body.AppendSlice(p.slice)
		e.b = e.body.Bytes()
	} else {
		p.slice.Release()
	}
	e.noTags()
}

// end writes the top-level tagged fields and hands the bytes to the body.
func (e *fetchEncoder) end() {
	e.noTags()
	e.body.SetBytes(e.b)
}
