package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/sharepart"
)

// TestShareEncoderEmptyRecords: a ShareFetch partition without records carries an empty record
// set, never null: Records is not nullable in Kafka's schema and the Java client rejects the
// whole response on a null ("non-nullable field records was serialized as null").
func TestShareEncoderEmptyRecords(t *testing.T) {
	id := [16]byte{1, 2, 3}
	for _, v := range []int16{1, 2} {
		var enc shareEncoder
		enc.init(v)
		enc.begin(0, 30000, 1)
		enc.topic(id, 2)
		enc.partition(&sharePartResult{tp: sharepart.TopicPartition{TopicID: id}, partition: 0, leaderID: -1, leaderEpoch: -1})
		enc.partition(&sharePartResult{tp: sharepart.TopicPartition{TopicID: id, Partition: 1}, partition: 1,
			errorCode: kerr.NotLeaderForPartition.Code, leaderID: 2, leaderEpoch: 7})
		enc.endTopic()
		enc.end([]shareEndpoint{{id: 2, host: "127.0.0.1", port: 9092}})
		if enc.body.Len() != int64(len(enc.body.Bytes())) {
			t.Fatalf("v%d: body has file slices", v)
		}
		resp := kmsg.NewPtrShareFetchResponse()
		resp.SetVersion(v)
		if err := resp.ReadFrom(enc.body.Bytes()); err != nil {
			t.Fatalf("v%d: decode: %v", v, err)
		}
		enc.body.Release()
		if resp.AcquisitionLockTimeoutMillis != 30000 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 || len(resp.NodeEndpoints) != 1 {
			t.Fatalf("v%d: response %+v", v, resp)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.Records == nil || len(p.Records) != 0 {
				t.Errorf("v%d partition %d: records %v, want an empty (non-null) record set", v, p.Partition, p.Records)
			}
		}
		if p := resp.Topics[0].Partitions[1]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != 2 || p.CurrentLeader.LeaderEpoch != 7 {
			t.Errorf("v%d: partition 1 %+v", v, p)
		}
	}
}
