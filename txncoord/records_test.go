package txncoord

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-mq/weir/record"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The golden bytes are worked out by hand from TransactionLogKey.json / TransactionLogValue.json
// (Kafka 4.4) and the generated-code rules (version prefix, int16 strings and int32 arrays in
// v0; compact strings and arrays, per-struct tagged-field sections, tags in ascending order and
// only when not default in v1). TestKafkaDecodesTransactionLog checks them against Kafka's own
// decoder when the jars are present.
func TestTransactionLogGolden(t *testing.T) {
	if got, want := encodeKey("t"), unhex(t, "0000 0001 74"); !bytes.Equal(got, want) {
		t.Fatalf("key: %x, want %x", got, want)
	}
	v := &logValue{
		ProducerID: 1000, PreviousProducerID: 999, NextProducerID: -1, ProducerEpoch: 5, NextProducerEpoch: -1,
		TimeoutMs: 60000, State: Ongoing, Partitions: []TopicPartition{{"t", 1}, {"t", 0}},
		LastUpdateMs: 2000, StartMs: 1500, ClientTxnVersion: 2,
	}
	v0 := unhex(t, `0000 00000000000003e8 0005 0000ea60 01
		00000001 0001 74 00000002 00000000 00000001
		00000000000007d0 00000000000005dc`)
	if got := encodeValue(v, 0); !bytes.Equal(got, v0) {
		t.Fatalf("v0:\n got %x\nwant %x", got, v0)
	}
	v1 := unhex(t, `0001 00000000000003e8 0005 0000ea60 01
		02 02 74 03 00000000 00000001 00
		00000000000007d0 00000000000005dc
		02 00 08 00000000000003e7 02 02 0002`)
	if got := encodeValue(v, 1); !bytes.Equal(got, v1) {
		t.Fatalf("v1:\n got %x\nwant %x", got, v1)
	}
	// Decoding gives back the value (partitions sorted; v0 has no tagged fields).
	want := *v
	want.Partitions = []TopicPartition{{"t", 0}, {"t", 1}}
	got, err := decodeValue(v1)
	if err != nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("decode v1: %+v %v, want %+v", got, err, want)
	}
	want.PreviousProducerID, want.ClientTxnVersion = -1, 0
	got, err = decodeValue(v0)
	if err != nil || !reflect.DeepEqual(*got, want) {
		t.Fatalf("decode v0: %+v %v, want %+v", got, err, want)
	}
	// Empty writes a null partition array.
	empty := &logValue{ProducerID: 7, PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1, State: Empty, StartMs: -1}
	if got, want := encodeValue(empty, 1), unhex(t, "0001 0000000000000007 0000 00000000 00 00 0000000000000000 ffffffffffffffff 00"); !bytes.Equal(got, want) {
		t.Fatalf("empty v1: %x, want %x", got, want)
	}
	if got, want := encodeValue(empty, 0), unhex(t, "0000 0000000000000007 0000 00000000 00 ffffffff 0000000000000000 ffffffffffffffff"); !bytes.Equal(got, want) {
		t.Fatalf("empty v0: %x, want %x", got, want)
	}
	// An unknown tag (a newer Kafka's) is skipped.
	withTag := append(append([]byte{}, v1[:len(v1)-15]...), unhex(t, "03 00 08 00000000000003e7 02 02 0002 07 01 ff")...)
	if got, err := decodeValue(withTag); err != nil || got.PreviousProducerID != 999 || got.ClientTxnVersion != 2 {
		t.Fatalf("unknown tag: %+v %v", got, err)
	}
	if id, err := decodeKey(encodeKey("txn-é")); err != nil || id != "txn-é" {
		t.Fatalf("key round trip: %q %v", id, err)
	}
	if _, err := decodeKey(unhex(t, "0001 0001 74")); err == nil {
		t.Fatal("a key of another version decoded")
	}
}

func TestTransactionLogValueRejectsBadInput(t *testing.T) {
	good := encodeValue(&logValue{ProducerID: 1, PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1,
		State: Ongoing, Partitions: []TopicPartition{{"a", 0}}, StartMs: 1, LastUpdateMs: 1}, 1)
	for n := 0; n < len(good); n++ {
		if _, err := decodeValue(good[:n]); err == nil {
			t.Fatalf("truncated to %d bytes: decoded", n)
		}
	}
	bad := [][]byte{
		unhex(t, "0002"), // unknown version
		unhex(t, "0000 0000000000000001 0000 00000000 09 ffffffff 0000000000000000 0000000000000000"), // state 9
		unhex(t, "0000 0000000000000001 0000 00000000 01 7fffffff"),                                   // huge count
		unhex(t, "0000 0000000000000001 0000 00000000 01 00000001 ffff"),                              // null topic
	}
	for i, b := range bad {
		if _, err := decodeValue(b); err == nil {
			t.Fatalf("bad %d decoded", i)
		}
	}
}

func FuzzTxnLogRecord(f *testing.F) {
	v := &logValue{ProducerID: 1000, PreviousProducerID: 999, NextProducerID: 5, ProducerEpoch: 5, NextProducerEpoch: 2,
		TimeoutMs: 60000, State: PrepareCommit, Partitions: []TopicPartition{{"t", 1}, {"u", 0}}, LastUpdateMs: 2000, StartMs: 1500, ClientTxnVersion: 2}
	f.Add(encodeKey("t"), encodeValue(v, 0))
	f.Add(encodeKey("t"), encodeValue(v, 1))
	f.Add([]byte{0, 0}, []byte{0, 1, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if id, err := decodeKey(key); err == nil && !bytes.Equal(encodeKey(id), key[:4+len(id)]) {
			t.Fatalf("key %x re-encodes differently", key)
		}
		got, err := decodeValue(value)
		if err != nil {
			return
		}
		// What decodes re-encodes and decodes to the same value.
		version := int16(value[1])
		again, err := decodeValue(encodeValue(got, version))
		if err != nil {
			t.Fatalf("re-encoded value does not decode: %v", err)
		}
		norm := func(v *logValue) *logValue {
			c := *v
			c.Partitions = sortedPartitions(setOf(c.Partitions))
			if v.Partitions == nil {
				c.Partitions = nil
			}
			return &c
		}
		if !reflect.DeepEqual(norm(got), norm(again)) {
			t.Fatalf("round trip: %+v != %+v", got, again)
		}
	})
}

func setOf(parts []TopicPartition) map[TopicPartition]struct{} {
	s := map[TopicPartition]struct{}{}
	for _, tp := range parts {
		s[tp] = struct{}{}
	}
	return s
}

// TestKafkaDecodesTransactionLog runs Kafka's own DumpLogSegments --transaction-log-decoder over
// a segment of weir's __transaction_state batches (values v0 and v1, and a tombstone). It needs
// the Kafka jars: WEIR_KAFKA_LIBS=<folder of jars> (scripts/kafka-libs.sh prints it).
func TestKafkaDecodesTransactionLog(t *testing.T) {
	libs := os.Getenv("WEIR_KAFKA_LIBS")
	if libs == "" {
		t.Skip("WEIR_KAFKA_LIBS not set: Kafka's DumpLogSegments is not available")
	}
	v := &logValue{
		ProducerID: 1000, PreviousProducerID: 999, NextProducerID: -1, ProducerEpoch: 5, NextProducerEpoch: -1,
		TimeoutMs: 60000, State: PrepareCommit, Partitions: []TopicPartition{{"topic-a", 3}, {"topic-a", 1}, {"b", 0}},
		LastUpdateMs: 1_700_000_002_000, StartMs: 1_700_000_001_500, ClientTxnVersion: 2,
	}
	var seg []byte
	for i, b := range [][]byte{
		buildBatch(1_700_000_000_000, []kv{{Key: encodeKey("txn-v0"), Value: encodeValue(v, 0)}}),
		buildBatch(1_700_000_000_000, []kv{{Key: encodeKey("txn-v1"), Value: encodeValue(v, 1)}}),
		buildBatch(1_700_000_000_000, []kv{{Key: encodeKey("txn-gone")}}),
	} {
		record.SetBaseOffset(b, int64(i))
		record.SetPartitionLeaderEpoch(b, 0)
		seg = append(seg, b...)
	}
	dir := filepath.Join(t.TempDir(), "__transaction_state-0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "00000000000000000000.log")
	if err := os.WriteFile(file, seg, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("java", "-cp", libs+"/*", "org.apache.kafka.tools.DumpLogSegments",
		"--transaction-log-decoder", "--files", file).CombinedOutput()
	if err != nil {
		t.Fatalf("DumpLogSegments: %v\n%s", err, out)
	}
	s := string(out)
	t.Logf("%s", s)
	for _, bad := range []string{"Exception", "Error", "Unknown", "isvalid: false"} {
		if strings.Contains(s, bad) {
			t.Fatalf("DumpLogSegments reports %q:\n%s", bad, s)
		}
	}
	for _, want := range []string{
		`"transactionalId":"txn-v0"`, `"transactionalId":"txn-v1"`, `"transactionalId":"txn-gone"`,
		`"producerId":1000`, `"producerEpoch":5`, `"transactionTimeoutMs":60000`, `"transactionStatus":"PrepareCommit"`,
		`"previousProducerId":999`, `"clientTransactionVersion":2`,
		`"transactionLastUpdateTimestampMs":1700000002000`, `"transactionStartTimestampMs":1700000001500`,
		`"topic":"topic-a","partitionIds":[1,3]`, `"topic":"b","partitionIds":[0]`,
	} {
		if !strings.Contains(s, want) {
			t.Fatalf("DumpLogSegments output lacks %s:\n%s", want, s)
		}
	}
}

// kafkaGen prints the bytes Kafka's own generated classes write for the records of
// TestKafkaWritesSameBytes, one hex line each.
const kafkaGen = `import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogKey;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogValue;
import java.util.List;
public class Gen {
  static String hex(byte[] b) { StringBuilder s = new StringBuilder(); for (byte x : b) s.append(String.format("%02x", x)); return s.toString(); }
  public static void main(String[] a) {
    System.out.println(hex(MessageUtil.toCoordinatorTypePrefixedBytes(new TransactionLogKey().setTransactionalId("txn-\u00e9"))));
    for (short v = 0; v <= 1; v++) {
      TransactionLogValue val = new TransactionLogValue().setProducerId(1000).setProducerEpoch((short)5).setTransactionTimeoutMs(60000)
        .setTransactionStatus((byte)2).setTransactionLastUpdateTimestampMs(1700000002000L).setTransactionStartTimestampMs(1700000001500L)
        .setTransactionPartitions(List.of(new TransactionLogValue.PartitionsSchema().setTopic("b").setPartitionIds(List.of(0)),
                                          new TransactionLogValue.PartitionsSchema().setTopic("topic-a").setPartitionIds(List.of(1, 3))));
      if (v >= 1) val.setPreviousProducerId(999).setClientTransactionVersion((short)2);
      System.out.println(hex(MessageUtil.toVersionPrefixedBytes(v, val)));
      TransactionLogValue empty = new TransactionLogValue().setProducerId(7).setProducerEpoch((short)0).setTransactionTimeoutMs(0)
        .setTransactionStatus((byte)0).setTransactionStartTimestampMs(-1).setTransactionPartitions(null);
      System.out.println(hex(MessageUtil.toVersionPrefixedBytes(v, empty)));
    }
  }
}
`

// TestKafkaWritesSameBytes compares weir's encoder with the bytes Kafka's generated classes
// (kafka-transaction-coordinator) write for the same records. It needs WEIR_KAFKA_LIBS.
func TestKafkaWritesSameBytes(t *testing.T) {
	libs := os.Getenv("WEIR_KAFKA_LIBS")
	if libs == "" {
		t.Skip("WEIR_KAFKA_LIBS not set: Kafka's classes are not available")
	}
	src := filepath.Join(t.TempDir(), "Gen.java")
	if err := os.WriteFile(src, []byte(kafkaGen), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("java", "-cp", libs+"/*", src).Output()
	if err != nil {
		t.Fatalf("java: %v", err)
	}
	lines := strings.Fields(string(out))
	v := &logValue{
		ProducerID: 1000, PreviousProducerID: -1, NextProducerID: -1, ProducerEpoch: 5, NextProducerEpoch: -1,
		TimeoutMs: 60000, State: PrepareCommit, Partitions: []TopicPartition{{"topic-a", 3}, {"b", 0}, {"topic-a", 1}},
		LastUpdateMs: 1_700_000_002_000, StartMs: 1_700_000_001_500,
	}
	v1 := *v
	v1.PreviousProducerID, v1.ClientTxnVersion = 999, 2
	empty := &logValue{ProducerID: 7, PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1, State: Empty, StartMs: -1}
	want := []string{
		hex.EncodeToString(encodeKey("txn-é")),
		hex.EncodeToString(encodeValue(v, 0)), hex.EncodeToString(encodeValue(empty, 0)),
		hex.EncodeToString(encodeValue(&v1, 1)), hex.EncodeToString(encodeValue(empty, 1)),
	}
	if !reflect.DeepEqual(lines, want) {
		t.Fatalf("Kafka writes\n%s\nweir writes\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
