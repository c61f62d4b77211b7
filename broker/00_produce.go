package broker

// Produce (key 0), v3-v13; v0-v2 are advertised (older librdkafka turns compression off unless
// Produce v0 is advertised, KAFKA-18659) and refused on use by closing the connection, as Kafka 4
// does. v13 names topics by id. Each partition's records must be exactly one RecordBatch v2;
// the engine validates it as Kafka's LogValidator does (record.ValidateProduce: header, CRC,
// every record against the header, compressed batches streamed within a bound, timestamps against
// message.timestamp.before/after.max.ms) and assigns offsets in place. Under
// message.timestamp.type=LogAppendTime the batch is stamped with the broker's clock and the
// response carries it in log_append_time_ms (-1 otherwise).
// acks=0: no response. acks=1 means a durable local append when the log's policy is durable
// (the default): the reply is deferred until the fdatasync that covers every appended batch of
// the request, so the appends of pipelined requests share syncs; the log dir's flusher is woken
// once, after the request's last append (engine.FlushHold), so one flush round syncs all of the
// request's partitions and the reply's wait wakes once. acks=-1 on a single-replica
// partition is the same; on a replicated one the reply waits (deferred, not blocking other
// requests) until the high watermark covers the batch, i.e. every in-sync replica has it on
// disk, or timeout_ms (REQUEST_TIMED_OUT). acks=-1 with an ISR smaller than the effective
// min.insync.replicas is refused before the append (NOT_ENOUGH_REPLICAS); an appended batch
// whose ISR shrank below it while the reply waited is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND
// once the high watermark covers it. The effective value is the topic's min.insync.replicas
// capped at the partition's replica count, as in Kafka 3.7+ (KAFKA-15583, Partition's
// effectiveMinIsr): a single-replica partition takes acks=-1 whatever min.insync.replicas says. Only the partition's leader appends
// (NOT_LEADER_OR_FOLLOWER elsewhere). Internal topics (isInternalTopic) are refused with
// INVALID_TOPIC_EXCEPTION "Cannot append to internal topic", as Kafka's ReplicaManager does, for
// every client (Kafka exempts the client id "__admin_client", which any client can send); the
// group coordinator appends to __consumer_offsets through the replica manager, not here.
// A topic whose compression.type names a codec (its override, else the broker's key) stores
// every batch in it: a batch in another codec is recompressed here, on the leader, before the
// append (record.Recompressor: records and header unchanged but the codec, length and CRC; a
// result past max.message.bytes is MESSAGE_TOO_LARGE, as Kafka's RecordTooLargeException after
// recompression), then validated by the log like any batch. Under compression.type=producer (the
// default) and for a batch already in the topic's codec nothing is copied: the request's bytes
// are appended in place. Followers append the leader's bytes (AppendStored): never recompressed.
// A transactional batch needs the request's transactional_id, as in Kafka
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED without one), and a request with a transactional_id
// needs WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition). With
// transaction.partition.verification.enable (KIP-890 part 1, txnverify.go) the leader asks the
// transaction coordinator whether the partition is in the producer's transaction before the
// first transactional batch of each transaction on the partition, and appends it under the
// partition's verification guard (a marker written meanwhile makes it INVALID_TXN_STATE);
// Produce v12+ (transaction version 2 clients, KIP-890 part 2) has the coordinator add the
// partition instead.

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/acl"
	"github.com/weir-mq/weir/engine"
	"github.com/weir-mq/weir/netio"
	"github.com/weir-mq/weir/record"
)

var produceAdvertisedMin = int16(0)

// maxProduceWait bounds an acks=all produce's timeout_ms from the network.
const maxProduceWait = 5 * time.Minute

func init() {
	register(apiDef{key: 0, min: 3, max: 13, advertisedMin: &produceAdvertisedMin, handle: handleProduceQuota})
}

// pendingAppend is an appended batch whose acknowledgement waits for durability.
type pendingAppend struct {
	log  *engine.Log
	part *kmsg.ProduceResponseTopicPartition
	upTo int64
	// replicated (acks=all on a replicated partition): wait until the high watermark covers
	// upTo while this broker still leads at epoch.
	replicated bool
	rep        *replica
	epoch      int32
	minISR     int
}

func handleProduce(b *Broker, r *netio.Request) netio.Reply {
	req := r.Body.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.SetVersion(r.Version)
	badAcks := req.Acks != 0 && req.Acks != 1 && req.Acks != -1
	// pending is made once, at the first append that waits, for every partition of the request
	// (one allocation per request instead of a growing slice).
	var pending []pendingAppend
	nparts := 0
	for i := range req.Topics {
		nparts += len(req.Topics[i].Partitions)
	}
	// Per-topic produce accounting (metrics.go), added once per topic rather than per batch.
	var tally produceTally
	denied := b.topicDenied(r, acl.OpWrite) // ACL: WRITE on each topic (authz.go)
	var txnIDErr *kerr.Error
	if req.TransactionID != nil {
		txnIDErr = b.authorize(r, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID) // ACL: WRITE on the transactional id
	}
	// One flush round covers every durable append of the request: the log dirs' flushers are
	// woken once, after the last append (engine.FlushHold), so the reply waits for one round.
	var hold engine.FlushHold
	defer hold.Release()
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		st := &resp.Topics[i]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t Topic
		var found bool
		var missing *kerr.Error = kerr.UnknownTopicOrPartition
		if r.Version >= 13 {
			t, found = b.topics.getByID(rt.TopicID)
			missing = kerr.UnknownTopicID
		} else {
			t, found = b.topics.get(rt.Topic)
		}
		unauthorized := denied != nil && (found || r.Version < 13) && denied(topicNameOf(rt.Topic, t.Name, r.Version >= 13))
		compression := record.Compression{Codec: record.CodecProducer}
		if found {
			compression = b.topicCompression(t)
		}
		internal := isInternalTopic(t.Name) // read once per topic, not per partition
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			sp := &st.Partitions[j]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			var err error
			switch {
			case badAcks:
				err = fmt.Errorf("acks %d: %w", req.Acks, kerr.InvalidRequiredAcks)
			case txnIDErr != nil:
				err = txnIDErr
			case req.TransactionID == nil && len(rp.Records) > record.AttributesOffset+1 && int16(rp.Records[record.AttributesOffset+1])&record.AttrTransactional != 0:
				// Kafka's handleProduceRequest: transactional records need the request's
				// transactional id (and WRITE on it). Without a coordinator nothing would end
				// such a transaction, and it would hold read_committed consumers back forever.
				err = fmt.Errorf("transactional records without a transactional id: %w", kerr.TransactionalIDAuthorizationFailed)
			case unauthorized:
				err = kerr.TopicAuthorizationFailed
			case !found || rp.Partition < 0 || rp.Partition >= t.Partitions:
				err = missing
			case r.Version < 7 && len(rp.Records) > 22 && rp.Records[22]&0x07 == record.CodecZstd:
				// zstd needs Produce v7 (KIP-110); Kafka's LogValidator refuses it below.
				err = fmt.Errorf("zstd-compressed batch in Produce v%d (zstd needs v7): %w", r.Version, kerr.UnsupportedCompressionType)
			case internal:
				// Kafka lets a client whose client.id is "__admin_client" append; any client
				// can claim that id, so weir refuses every client.
				err = fmt.Errorf("Cannot append to internal topic %s: %w", t.Name, kerr.InvalidTopicException)
			}
			if err == nil {
				tp := engine.TopicPartition{Topic: t.Name, Partition: rp.Partition}
				rep := b.rm.get(tp)
				var epoch int32
				var leading bool
				var ta txnAppend // how a transactional batch is appended (txnverify.go)
				// acks=all needs the effective min.insync.replicas (capped at the replica count,
				// replicas.go) in the ISR before the append. One lock of the replica reads the
				// role, the epoch, the replica count and the ISR.
				minISR, isrSize := 1, 0
				if rep != nil {
					configuredMinISR := 0
					if req.Acks == -1 {
						configuredMinISR = keyMinInsyncReplicas.Topic(b.cfg, t.Configs)
					}
					epoch, leading, minISR, isrSize = rep.appendCheck(req.Acks == -1, configuredMinISR)
				}
				if req.TransactionID != nil {
					// KIP-890 verification may wait for the transaction coordinator: no other
					// request's flush round waits behind it (the next append holds again).
					hold.Release()
				}
				switch {
				case !leading:
					err = fmt.Errorf("this broker does not lead %s-%d: %w", t.Name, rp.Partition, kerr.NotLeaderForPartition)
				case req.Acks == -1 && isrSize < minISR:
					err = fmt.Errorf("ISR of %s-%d has %d replicas, min.insync.replicas is %d: %w", t.Name, rp.Partition, isrSize, minISR, kerr.NotEnoughReplicas)
				case req.TransactionID != nil && b.verifyTxnProduce(*req.TransactionID, tp, rep.log, rp.Records, r.Version, &ta, &err):
					// KIP-890 (txnverify.go): err says why the batch is refused.
				default:
					l := rep.log
					var info engine.AppendInfo
					if len(rp.Records) == 0 {
						err = fmt.Errorf("empty record set: %w", kerr.InvalidRecord)
					} else {
						// A batch whose codec is not the topic's compression.type is rebuilt in
						// it first (Kafka's LogValidator); every other batch, and every batch
						// under the default (producer), is appended as it came.
						batch := rp.Records
						var rc *record.Recompressor
						if compression.Rewrites(batch) {
							rc = record.GetRecompressor()
							mmb := l.Config().MaxMessageBytes
							batch, err = rc.Recompress(batch, compression, mmb, record.DecompressLimit(mmb))
						}
						if err == nil {
							hold.Add(l)
							info, epoch, err = b.appendVerifiedAsLeader(rep, batch, ta)
						}
						if rc != nil {
							rc.Release() // the log copied the batch into its segment
						}
					}
					if err == nil {
						sp.BaseOffset = info.BaseOffset
						sp.LogAppendTime = info.LogAppendTime // -1 unless message.timestamp.type=LogAppendTime
						sp.LogStartOffset = l.LogStartOffset()
						tally.add(rp.Records)
						switch {
						case req.Acks == -1 && !rep.local.Load():
							if pending == nil {
								pending = make([]pendingAppend, 0, nparts)
							}
							pending = append(pending, pendingAppend{log: l, part: sp, upTo: info.LastOffset + 1,
								replicated: true, rep: rep, epoch: epoch, minISR: minISR})
						case req.Acks != 0 && l.Durable():
							if pending == nil {
								pending = make([]pendingAppend, 0, nparts)
							}
							pending = append(pending, pendingAppend{log: l, part: sp, upTo: info.LastOffset + 1})
						}
					}
				}
			}
			if err != nil {
				sp.ErrorCode = errorCode(err)
				if r.Version >= 8 {
					msg := err.Error()
					sp.ErrorMessage = &msg
					// A refusal naming one record (a timestamp out of bounds, an offset delta out
					// of order, a keyless record on a compacted topic) is also reported per
					// record, as Kafka does (record_errors).
					var re *record.RecordError
					if errors.As(err, &re) {
						rm := re.Message
						sp.ErrorRecords = []kmsg.ProduceResponseTopicPartitionErrorRecord{{RelativeOffset: re.Index, ErrorMessage: &rm}}
					}
				}
				sp.BaseOffset, sp.LogAppendTime = -1, -1
			}
		}
		b.observeProduced(t.Name, &tally) // bytes and records in, per topic (metrics.go)
	}
	hold.Release()
	// Every reply below is NoAlias: the response and the deferred wait refer to resp and the
	// logs, never to the request's bytes (its records are in the log now), so netio releases
	// the request frame at once instead of holding it while the reply waits for fdatasync,
	// acks=all, or a parked long poll ahead of it on the connection (as Kafka drops a produce
	// request's records once appended).
	if req.Acks == 0 {
		b.observeProduceErrors(resp)
		return netio.Reply{None: true, NoAlias: true}
	}
	if len(pending) == 0 {
		b.observeProduceErrors(resp)
		return netio.Reply{Response: resp, NoAlias: true}
	}
	var closing <-chan struct{}
	if r.Conn != nil {
		closing = r.Conn.Closing
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	return netio.Reply{NoAlias: true, Deferred: func() netio.Reply {
		var deadline <-chan time.Time
		for _, p := range pending {
			var err error
			if p.replicated {
				if deadline == nil {
					t := time.NewTimer(min(max(timeout, time.Millisecond), maxProduceWait))
					defer t.Stop()
					deadline = t.C
				}
				err = p.rep.waitCommitted(p.upTo, p.epoch, p.minISR, deadline, closing)
			} else {
				err = p.log.AwaitDurable(p.upTo)
			}
			if err != nil {
				p.part.ErrorCode = errorCode(err)
				p.part.BaseOffset = -1
			}
		}
		b.observeProduceErrors(resp)
		return netio.Reply{Response: resp}
	}}
}

// topicCompression is the codec and level topic t stores produced batches in: its
// compression.type and compression.<codec>.level, each the topic's override, else the broker's
// key. Read once per topic of a request; the values were validated when set.
func (b *Broker) topicCompression(t Topic) record.Compression {
	codec, ok := record.ParseCompressionType(keyCompressionType.Topic(b.cfg, t.Configs))
	switch {
	case !ok: // validated when set: cannot happen
		return record.Compression{Codec: record.CodecProducer}
	case codec == record.CodecGzip:
		return record.Compression{Codec: codec, Level: keyCompressionGzipLevel.Topic(b.cfg, t.Configs)}
	case codec == record.CodecLZ4:
		return record.Compression{Codec: codec, Level: keyCompressionLZ4Level.Topic(b.cfg, t.Configs)}
	case codec == record.CodecZstd:
		return record.Compression{Codec: codec, Level: keyCompressionZstdLevel.Topic(b.cfg, t.Configs)}
	}
	return record.Compression{Codec: codec} // producer, uncompressed, snappy: no level
}
